"""How much of PyTorch's public API flambeau has: per module, and for the names training scripts use most.

Usage (a development tool, not a test: it needs torch installed next to flambeau)::

    python tools/api_coverage.py                  # both tables
    python tools/api_coverage.py --missing 30     # and up to 30 missing names per module
    python tools/api_coverage.py --rst            # the "Not yet in flambeau" list, as reStructuredText
    python tools/api_coverage.py --write-docs     # ... written into docs/differences.rst between its markers
    python tools/api_coverage.py --count FILE...  # count the torch names some programs use (see below)

Table 1: the share of each torch module's public names that flambeau's module of the same path has
(``torch``, ``Tensor``, ``nn``, ``nn.functional``, ``optim``, ``distributions``, ``linalg``, ``fft``,
``special``, ``func``, ``amp``, ``cuda``). The rule for "public name", fixed so that numbers compare
over time:

1. every name in ``dir(torch_module)`` that does not start with ``_``;
2. except submodules (``torch.nn`` is not a name of ``torch``'s row: it has its own row, and
   ``torch.optim.lr_scheduler`` is reached through table 2);
3. except typing and stdlib helpers imported into the module (objects whose ``__module__`` is
   ``typing``, ``typing_extensions``, ``builtins``, ``collections``, ``functools``, ``enum``...);
4. except re-exports of a ``torch.<name>`` object under the same name in another module that does
   not define it (``torch.nn.functional.Tensor`` is ``torch.Tensor``: it counts once, in
   ``torch``'s row; ``torch.amp.GradScaler``, defined in ``torch.amp``, counts in both);
5. except the internals listed in ``INTERNAL``: backend-specific kernels (``cudnn_*``, ``miopen_*``,
   ``mkldnn_*``, ``fbgemm_*``, ``*_backward``, SyncBatchNorm's ``batch_norm_*`` steps),
   functionalization's ``*_copy`` twins of view operators, quantization (``quantize_*``, ``q_*``,
   ``*quantized*``), ``torch.compile``'s symbolic-shape helpers (``sym_*``, ``SymInt``...), the
   ``__torch_function__`` machinery, and helpers that build docstrings (``common_args``) or
   arguments (``factory_kwargs``);
6. except the C++ extension's binding classes re-exported by ``torch`` (``torch.Graph``,
   ``torch.AliasDb``, ``torch.FunctionSchema``: TorchScript's IR and dispatcher types, the classes
   that are ``torch._C.<name>``), apart from ``KEEP_C_CLASSES`` (``device``, ``dtype``, ``Size``,
   ``Generator``, ``Stream``, ``Event``, ``finfo``, ``iinfo``...);
7. except module constants and documentation fragments: ALL_CAPS names (``TYPE_CHECKING``,
   ``GRID_SAMPLE_PADDING_MODES``) and strings (``torch.fft.common_args``);
8. in ``torch``'s row, except the in-place function twins ``torch.abs_``, ``torch.relu_`` ...
   (names ending in ``_``, which torch does not document in its namespace; the ``Tensor`` methods
   ``abs_`` ... count in ``Tensor``'s row).

A name is present when ``hasattr(flambeau_module, name)``. flambeau's subpackages are imported on
demand: a module that does not import counts 0% (the reason is printed).

Table 2: the names training scripts use most, from ``api_common_names.txt`` next to this script
(how that list was built is written at its top), and which of them flambeau lacks.
"""

from __future__ import annotations

import argparse
import ast
import collections
import importlib
import pathlib
import sys
import types

HERE = pathlib.Path(__file__).resolve().parent
COMMON_NAMES = HERE / "api_common_names.txt"
DIFFERENCES = HERE.parent / "docs" / "differences.rst"
BEGIN, END = ".. api-coverage-begin", ".. api-coverage-end"

MODULES = ["torch", "Tensor", "nn", "nn.functional", "optim", "distributions", "linalg", "fft", "special", "func",
           "amp", "cuda"]

# Rule 5: prefixes, suffixes and exact names of internals.
INTERNAL_PREFIXES = ("cudnn_", "miopen_", "mkldnn_", "fbgemm_", "quantize_", "quantized_", "q_", "sym_", "batch_norm_",
                     "is_vulkan", "to_mkldnn", "has_torch_function")
INTERNAL_SUFFIXES = ("_backward", "_copy")
INTERNAL_CONTAINS = ("quantized",)
INTERNAL = {"handle_torch_function", "boolean_dispatch", "reproducibility_notes", "sparse_support_notes", "tf32_notes",
            "BroadcastingList1", "BroadcastingList2", "BroadcastingList3", "DType", "classproperty", "lru_cache",
            "PYTORCH_RELEASES_CODE_CC", "DEVICE_REQUIREMENT", "cudart", "cudaStatus", "check_error",
            "common_args", "factory_common_args", "common_notes", "multi_dim_common", "factory_kwargs",
            "assert_int_or_pair", "SymInt", "SymFloat", "SymBool"}
# Rule 6: the torch._C classes that are public API.
KEEP_C_CLASSES = {"device", "dtype", "Size", "Generator", "Stream", "Event", "finfo", "iinfo", "layout",
                  "memory_format", "Tensor", "FloatTensor", "DoubleTensor", "HalfTensor", "BFloat16Tensor",
                  "ByteTensor", "CharTensor", "ShortTensor", "IntTensor", "LongTensor", "BoolTensor"}
# Rule 3: where imported helpers come from.
FOREIGN_MODULES = ("typing", "typing_extensions", "builtins", "collections", "functools", "enum", "abc", "numbers",
                   "dataclasses", "contextlib", "warnings", "math", "inspect", "itertools", "weakref", "threading",
                   "__future__")


def _is_internal(name: str) -> bool:
    return (name in INTERNAL or name.startswith(INTERNAL_PREFIXES) or name.endswith(INTERNAL_SUFFIXES)
            or any(s in name for s in INTERNAL_CONTAINS))


def _torch_module(path: str):
    import torch

    if path == "Tensor":
        return torch.Tensor
    return importlib.import_module("torch" if path == "torch" else f"torch.{path}")


def public_names(path: str) -> list[str]:
    """The public names of ``torch.<path>`` under the rule of the module docstring."""
    import torch

    module = _torch_module(path)
    names = []
    for name in dir(module):
        if name.startswith("_") or _is_internal(name) or (name.isupper() and len(name) > 1):
            continue
        if path == "torch" and name.endswith("_"):
            continue
        try:
            obj = getattr(module, name)
        except Exception:  # noqa: BLE001 - a lazy attribute that fails to load is not part of the API
            continue
        if isinstance(obj, (types.ModuleType, str)):
            continue
        if isinstance(obj, type) and name not in KEEP_C_CLASSES and getattr(torch._C, name, None) is obj:
            continue
        origin = getattr(obj, "__module__", None)
        if isinstance(origin, str) and origin.split(".")[0] in FOREIGN_MODULES:
            continue
        if (path not in ("torch", "Tensor") and getattr(torch, name, None) is obj and not isinstance(obj, (int, float))
                and not str(origin).startswith(f"torch.{path}")):
            continue
        names.append(name)
    return names


def flambeau_object(path: str):
    """flambeau's counterpart of ``torch.<path>`` (``Tensor`` -> ``flambeau.Tensor``); raises when absent."""
    import flambeau

    if path == "Tensor":
        return flambeau.Tensor
    if path == "torch":
        return flambeau
    return importlib.import_module(f"flambeau.{path}")


def _rank(name: str) -> tuple:
    """Sort key of missing names, the likeliest to be called first: legacy storage classes, in-place
    twins (``abs_``), ``*_ex``/``*_with_indices`` variants and names with digits (``bessel_j0``,
    ``adaptive_avg_pool3d``) after the others, then alphabetical."""
    return (name.endswith("Storage"), name.endswith("_"), name.endswith(("_ex", "_with_indices")),
            any(c.isdigit() for c in name), name.lower())


def module_table(show_missing: int) -> tuple[list[tuple], dict[str, list[str]]]:
    rows, missing = [], {}
    for path in MODULES:
        names = public_names(path)
        try:
            ours = flambeau_object(path)
            absent = [n for n in names if not _has(ours, n)]
            note = ""
        except Exception as e:  # noqa: BLE001 - any import failure means the module is absent
            absent, note = names, f"not importable: {type(e).__name__}: {e}"[:90]
        missing[path] = sorted(absent, key=_rank)
        rows.append((path, len(names) - len(absent), len(names), note))
    return rows, missing


def _has(obj, name: str) -> bool:
    try:
        return hasattr(obj, name)
    except Exception:  # noqa: BLE001 - a property that raises on the class still exists
        return True


def resolve(dotted: str) -> bool:
    """Whether flambeau has ``dotted`` (a torch path: ``torch.nn.Linear``, ``Tensor.view``, ``torch.float32``)."""
    import flambeau

    parts = dotted.split(".")
    if parts[0] == "Tensor":
        obj, rest, prefix = flambeau.Tensor, parts[1:], None
    elif parts[0] == "torch":
        obj, rest, prefix = flambeau, parts[1:], "flambeau"
    else:
        raise ValueError(f"{dotted!r}: names start with 'torch.' or 'Tensor.'")
    for part in rest:
        if _has(obj, part):
            obj = getattr(obj, part)
        elif prefix is not None and isinstance(obj, types.ModuleType):
            try:
                obj = importlib.import_module(f"{obj.__name__}.{part}")
            except Exception:  # noqa: BLE001 - not importable: absent
                return False
        else:
            return False
        prefix = obj.__name__ if isinstance(obj, types.ModuleType) else None
    return True


def read_common_names() -> list[str]:
    names = []
    for line in COMMON_NAMES.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.extend(line.split())
    return list(dict.fromkeys(names))


# --- building the list of common names ----------------------------------------------------------
def count_names(paths: list[pathlib.Path]) -> collections.Counter:
    """How many programs of ``paths`` use each torch name (``torch.x.y`` through any import alias, ``Tensor.m``).

    A Tensor method is an attribute ``obj.m`` whose ``obj`` is not a torch module alias and ``m`` is
    a public ``torch.Tensor`` attribute that is not also an ``nn.Module`` one (``model.train()`` is
    not a Tensor method call): approximate, which is why the list is reviewed by hand.
    """
    import torch

    tensor_names = {n for n in dir(torch.Tensor) if not n.startswith("_")} - set(dir(torch.nn.Module))
    tensor_names |= {"to", "cuda", "cpu", "float", "double", "half", "type", "requires_grad_"}
    counts = collections.Counter()
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        alias: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.split(".")[0] == "torch":
                        alias[a.asname or a.name.split(".")[0]] = a.name if a.asname else "torch"
            elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
                for a in node.names:
                    alias[a.asname or a.name] = f"{node.module}.{a.name}"
        used = set()
        parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and not isinstance(parents.get(node), ast.Attribute):
                chain, inner = [], node
                while isinstance(inner, ast.Attribute):
                    chain.append(inner.attr)
                    inner = inner.value
                if isinstance(inner, ast.Name) and inner.id in alias:
                    used.add(".".join([alias[inner.id], *reversed(chain)]))
                elif node.attr in tensor_names:
                    used.add(f"Tensor.{node.attr}")
            elif isinstance(node, ast.Name) and node.id in alias and "." in alias[node.id] \
                    and not isinstance(parents.get(node), ast.Attribute):
                used.add(alias[node.id])
        counts.update(used)
    return counts


def _bar(share: float) -> str:
    return "#" * round(share * 20)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--missing", type=int, default=12, metavar="N", help="missing names shown per module")
    parser.add_argument("--rst", action="store_true", help="print the missing names as reStructuredText")
    parser.add_argument("--write-docs", action="store_true",
                        help=f"replace the text between {BEGIN!r} and {END!r} in docs/differences.rst with --rst's")
    parser.add_argument("--count", nargs="+", type=pathlib.Path, metavar="FILE",
                        help="count the torch names the given programs use, and stop")
    args = parser.parse_args(argv)
    try:
        import torch
    except ImportError:
        print("tools/api_coverage.py compares flambeau with PyTorch: install torch first", file=sys.stderr)
        return 2
    if args.count:
        for name, n in count_names(args.count).most_common():
            print(f"{n:4d}  {name}")
        return 0

    rows, missing = module_table(args.missing)
    common = read_common_names()
    common_missing = [n for n in common if not resolve(n)]
    if args.rst or args.write_docs:
        text = _rst(rows, missing, common, common_missing, args.missing)
        if not args.write_docs:
            print(text)
            return 0
        page = DIFFERENCES.read_text(encoding="utf-8")
        if BEGIN not in page or END not in page:
            print(f"{DIFFERENCES}: no {BEGIN!r} ... {END!r} markers", file=sys.stderr)
            return 2
        head, rest = page.split(BEGIN, 1)
        stamp = f"\n   (generated by python tools/api_coverage.py --write-docs, against torch {torch.__version__})\n\n"
        DIFFERENCES.write_text(head + BEGIN + stamp + text + "\n\n" + END + rest.split(END, 1)[1], encoding="utf-8")
        print(f"updated {DIFFERENCES}")
        return 0
    print(f"flambeau vs torch {torch.__version__}: public names present, per module\n")
    print(f"{'module':<15} {'present':>7} {'of':>5} {'share':>7}")
    for path, have, total, note in rows:
        share = have / total if total else 1.0
        print(f"{path:<15} {have:>7} {total:>5} {share:>7.1%}  {_bar(share):<20} {note}")
    have = sum(r[1] for r in rows)
    total = sum(r[2] for r in rows)
    print(f"{'all':<15} {have:>7} {total:>5} {have / total:>7.1%}")
    if args.missing:
        print()
        for path, _, _, _ in rows:
            if missing[path]:
                shown = ", ".join(missing[path][:args.missing])
                more = f" ... (+{len(missing[path]) - args.missing})" if len(missing[path]) > args.missing else ""
                print(f"missing in {path}: {shown}{more}")
    share = 1 - len(common_missing) / len(common)
    print(f"\nNames training scripts use most ({COMMON_NAMES.name}): {len(common) - len(common_missing)} of "
          f"{len(common)} present ({share:.1%})")
    if common_missing:
        print("missing: " + ", ".join(common_missing))
    return 0


def _rst(rows, missing, common, common_missing, per_module: int) -> str:
    lines = [f"Of the {len(common)} names training scripts use most (``tools/api_common_names.txt``), flambeau "
             f"lacks {len(common_missing)}" + (": " + ", ".join(f"``{n}``" for n in common_missing) + "."
                                               if common_missing else "."), "",
             "Share of each PyTorch module's public names that flambeau has, and the first missing ones "
             "(``python tools/api_coverage.py``):", ""]
    for path, have, total, note in rows:
        share = have / total if total else 1.0
        head = f"- ``{'torch.' + path if path not in ('torch', 'Tensor') else path}``: {share:.0%} ({have} of {total})"
        storages = [n for n in missing[path] if n.endswith("Storage")]
        absent = [f"``{n}``" for n in missing[path] if not n.endswith("Storage")][:per_module]
        if storages:
            absent.append(f"the {len(storages)} legacy ``*Storage`` classes")
        if note:
            head += " — not importable"
        if absent:
            more = ", ..." if len(missing[path]) - len(storages) > per_module else ""
            head += ". Missing: " + ", ".join(absent) + more
        lines.append(head)
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
