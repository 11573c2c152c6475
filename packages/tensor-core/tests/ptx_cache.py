"""Every CUDA kernel instantiation compiled to PTX, and the record of the sources that compiled.

Note [PTX matrix cached by source]
    Compiling every (kernel, dtype, arch) instantiation of the kernel families to PTX takes about 11 minutes on one
    core (538 reduction kernels alone take 7), more than CI's two cores can spare beside the suites. A family's
    PTX depends only on its sources and the compiler, so the matrix is cached by them. A family's *key* hashes the
    versions of numba, numba-cuda and NVVM, the source files of the family's module and of every module under
    ``flambeau._kernels`` (and ``flambeau._dtype``) it imports, transitively, and the labels and signatures of its
    ``ptx_cases``. ``ptx_compiled.json`` records the keys of the families that compiled. The test
    (``test_cuda_ptx.py::test_every_instantiation_compiles_to_ptx``) compiles each family whose key is not
    recorded, so CI compiles every family whose sources changed since the record, and ``FLAMBEAU_PTX_FULL=1``
    compiles them all. After changing a kernel, run ``python packages/tensor-core/tests/ptx_cache.py`` (from the
    repository root, without the simulator): it compiles the families that are not recorded, two at a time, and
    records those that compile.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import json
import pathlib
import sys
import types as pytypes
from contextlib import contextmanager

ARCHS = [(8, 0), (9, 0)]
RECORD = pathlib.Path(__file__).with_name("ptx_compiled.json")
_CODE_ROOTS = ("flambeau._kernels", "flambeau._dtype")  # where device code and its dtype tables live


@contextmanager
def fixed_arch():
    """Device functions compile for sm_80 where no GPU is present: numba compiles a device function called by a
    kernel for the *current* device's compute capability, and without a GPU there is none (the PTX of the calling
    kernel is still generated for each requested arch)."""
    import numba.cuda as ncuda
    import numba.cuda.dispatcher as disp

    saved = disp.get_current_device
    if not ncuda.is_available():
        disp.get_current_device = lambda: pytypes.SimpleNamespace(compute_capability=(8, 0))
    try:
        yield
    finally:
        disp.get_current_device = saved


def _ptx(fn, sig, cc):
    import numba.cuda as ncuda

    ptx, _ = ncuda.compile_ptx(fn, sig, cc=cc)
    assert f".target sm_{cc[0]}{cc[1]}" in ptx
    assert ".entry" in ptx
    return ptx


def ptx_all_archs(fn, sig) -> list:
    """PTX of kernel ``fn`` for every arch of ARCHS: typed and lowered once, then NVVM per arch.

    This is what ``compile_ptx`` does for one arch; lowering is the slow part, so it is shared.
    Falls back to one ``compile_ptx`` per arch if numba-cuda's internals differ.
    """
    from numba.cuda import compiler

    lower = getattr(compiler, "_compile_pyfunc_with_fixup", None)
    if lower is None:
        return [_ptx(fn, sig, cc) for cc in ARCHS]
    try:
        lib, _ = lower(fn, sig, cc=ARCHS[0], debug=False, lineinfo=False, device=False, fastmath=False,
                       opt=True, abi="numba", abi_info=None, forceinline=False, launch_bounds=None, lto=False)
    except TypeError:
        return [_ptx(fn, sig, cc) for cc in ARCHS]
    out = []
    for cc in ARCHS:
        (ptx,) = lib.get_asm_strs(cc=cc)
        assert f".target sm_{cc[0]}{cc[1]}" in ptx
        assert ".entry" in ptx
        out.append(ptx)
    return out


def compile_family(module) -> list:
    """Compile every case of kernel family ``module``'s ``ptx_cases`` for every arch; the failures, as text."""
    failures = []
    for label, fn, sig in module.ptx_cases():
        try:
            ptx_all_archs(fn, sig)
        except Exception as e:  # noqa: BLE001 - every failure is reported, with its case
            failures.append(f"{label}: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    return failures


# --- keys ----------------------------------------------------------------------------------------------
def _source_root() -> pathlib.Path:
    import flambeau

    return pathlib.Path(flambeau.__file__).parent


def _file_of(module_name: str, root: pathlib.Path) -> pathlib.Path | None:
    """The source file of ``flambeau.*`` module ``module_name``, or None (a name, not a module)."""
    path = root.joinpath(*module_name.split(".")[1:])
    if path.with_suffix(".py").is_file():
        return path.with_suffix(".py")
    if (path / "__init__.py").is_file():
        return path / "__init__.py"
    return None


def _imported_files(path: pathlib.Path, root: pathlib.Path) -> set:
    """The files of the device-code modules (:data:`_CODE_ROOTS`) that the source at ``path`` imports anywhere in
    it. ``from package import submodule`` counts the submodule, not the package's ``__init__``."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not node.module.startswith(_CODE_ROOTS):
                continue
            submodules = [_file_of(f"{node.module}.{a.name}", root) for a in node.names]
            found.update(f for f in submodules if f is not None)
            if any(f is None for f in submodules):  # names defined in the module itself
                found.add(_file_of(node.module, root))
        elif isinstance(node, ast.Import):
            found.update(_file_of(a.name, root) for a in node.names if a.name.startswith(_CODE_ROOTS))
    found.discard(None)
    return found


def _closure(path: pathlib.Path, root: pathlib.Path) -> list:
    seen, todo = set(), [path]
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo.extend(_imported_files(p, root) - seen)
    return sorted(seen)


def _versions() -> str:
    import numba

    try:
        from numba.cuda.cudadrv import nvvm

        nvvm_version = ".".join(map(str, nvvm.NVVM().get_version()))
    except Exception:  # noqa: BLE001 - an NVVM that does not say: the other versions still key
        nvvm_version = "?"
    return f"numba {numba.__version__}, numba-cuda {importlib.metadata.version('numba-cuda')}, NVVM {nvvm_version}"


def family_key(module) -> str:
    """The key of kernel family ``module`` (Note [PTX matrix cached by source])."""
    root = _source_root()
    h = hashlib.sha256(_versions().encode())
    for f in _closure(pathlib.Path(module.__file__), root):
        h.update(str(f.relative_to(root)).encode())
        h.update(f.read_bytes())
    for label, _fn, sig in module.ptx_cases():
        h.update(f"{label} {sig}".encode())
    return h.hexdigest()


def family_name(module) -> str:
    return module.__name__.rsplit(".", 1)[-1]


def recorded() -> dict:
    """Family name -> the key it compiled at (ptx_compiled.json)."""
    return json.loads(RECORD.read_text())["families"] if RECORD.is_file() else {}


# --- the command: compile what is not recorded, record what compiles -----------------------------------
def _compile_by_name(name: str) -> tuple:
    """``(name, failures)`` of compiling kernel family ``name`` (in a worker process)."""
    from flambeau._kernels import cuda

    module = next(m for m in cuda.FAMILIES if family_name(m) == name)
    with fixed_arch():
        return name, compile_family(module)


def main(argv: list) -> int:
    import multiprocessing

    from flambeau._kernels import cuda

    full = "--all" in argv
    record = recorded()
    with fixed_arch():
        keys = {family_name(m): family_key(m) for m in cuda.FAMILIES}
    todo = [n for n, k in keys.items() if full or record.get(n) != k]
    print(f"{len(keys) - len(todo)} families recorded at their sources; compiling {len(todo)}: {', '.join(todo)}")
    failed = {}
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        for name, failures in pool.imap_unordered(_compile_by_name, todo):
            if failures:
                failed[name] = failures
                record.pop(name, None)
            else:
                record[name] = keys[name]
            print(f"{name}: {'FAILED ' + str(len(failures)) if failures else 'compiled'}", flush=True)
    record = {n: record[n] for n in sorted(record) if n in keys}
    RECORD.write_text(json.dumps({"note": "keys of the kernel families that compiled to PTX for sm_80 and sm_90 "
                                          "(tests/ptx_cache.py: Note [PTX matrix cached by source])",
                                  "families": record}, indent=1) + "\n")
    for name, failures in failed.items():
        print(f"{name}:\n  " + "\n  ".join(failures))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
