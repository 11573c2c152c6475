"""Sphinx configuration of flambeau's documentation (``nox -s docs``; warnings are errors).

The operator reference (``api/operators.rst``) and the Tensor reference (``api/tensor.rst``) are
generated here at every build from the operator table ``flambeau._ops.OPS``: those pages hold a
``GENERATED-*`` marker that :func:`fill_name_lists` replaces when sphinx reads them, so a newly
declared operator appears in the docs without anyone editing them, and no generated file lands
in the repository.
"""

from __future__ import annotations

import inspect
import pathlib
import re
import sys

import flambeau
from flambeau._kernels.cuda import NOT_ON_CUDA
from flambeau._ops import OPS

HERE = pathlib.Path(__file__).parent

project = "flambeau"
author = "the flambeau developers"
copyright = "2026, the flambeau developers"  # noqa: A001 - sphinx's name
release = str(flambeau.__version__)
version = ".".join(release.split(".")[:2])

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.intersphinx", "sphinx.ext.viewcode"]
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
napoleon_google_docstring = True
napoleon_numpy_docstring = False
intersphinx_mapping = {}  # offline builds: no inventories are fetched
html_theme = "alabaster"
html_theme_options = {"description": "eager tensors and operators, the PyTorch way", "fixed_sidebar": True}
exclude_patterns = ["_build"]
nitpicky = False
suppress_warnings: list[str] = []
if not (HERE / "api" / "cuda_alloc.rst").exists():
    # Written by the cuda-alloc package; until it lands the toctree entry stays dangling.
    suppress_warnings.append("toc.not_readable")

# Display names of the operator categories, in the order the reference lists them; categories not
# listed here follow, alphabetically, under their own name.
CATEGORY_TITLES = {
    "conversion": "Copies and conversions",
    "arithmetic": "Arithmetic",
    "math": "Pointwise math",
    "rounding": "Rounding",
    "comparison": "Comparisons",
    "logical": "Logical and bitwise",
    "reduction": "Reductions",
    "sorting": "Sorting and selection",
    "view": "Views",
    "shape": "Shape",
    "joining": "Joining and splitting",
    "reordering": "Reordering",
    "padding": "Padding",
    "indexing": "Indexing, gathering and scattering",
    "linalg": "Matrix products and linear algebra",
    "linalg_solvers": "Linear algebra: factorizations and solvers",
    "numeric": "Numeric functions, statistics, scatters and windows",
    "special": "Special functions",
    "spectral": "Discrete Fourier transforms",
    "stft": "Short-time Fourier transforms",
    "activation": "Activations",
    "nn": "Neural-network functions",
    "random": "Random sampling",
    "misc": "Other operators",
}


def _heading(text: str, char: str, over: bool = False) -> str:
    line = char * len(text)
    return f"{line}\n{text}\n{line}\n" if over else f"{text}\n{line}\n"


def _variants(op) -> str:
    names = []
    if op.fn is not None and op.function:
        names.append(f"``flambeau.{op.name}``")
    if op.fn is not None and op.method:
        names.append(f"``Tensor.{op.name}``")
    if op.inplace_fn is not None:
        names.append(f"``Tensor.{op.name}_``")
    names += [f"``{d}``" for d in sorted(op.dunders)]
    names += [f"``{a}``" for a in op.aliases]
    return ", ".join(names)


def _op_entry(op) -> str:
    if op.fn is not None and op.function:
        directive, target = "autofunction", f"flambeau.{op.name}"
    elif op.fn is not None and op.method:
        directive, target = "automethod", f"flambeau.Tensor.{op.name}"
    elif op.fn is not None and not hasattr(sys.modules[op.fn.__module__], op.name):
        # Backs syntax rather than a name (indexing): describe it from its front's docstring.
        doc = "\n".join("   " + line if line else "" for line in (inspect.getdoc(op.fn) or "").splitlines())
        return f".. py:function:: {op.signature.split(' -> ')[0]}\n   :no-index:\n\n{doc}\n\n" + "\n".join([
            f"   :Schema: ``{op.signature}``", f"   :Kernels: {', '.join(sorted(op.kernels)) or 'none'}"]) + "\n"
    elif op.fn is not None:
        # Neither a flambeau function nor a Tensor method (torch has it elsewhere, e.g. in
        # torch.nn.functional, or it backs an operator such as indexing): document it where it lives.
        directive, target = "autofunction", f"{op.fn.__module__}.{op.name}"
    else:
        directive, target = "automethod", f"flambeau.Tensor.{op.name}_"
    flags = []
    if op.view:
        flags.append("returns a view")
    if not op.differentiable:
        flags.append("not differentiable")
    devices = ", ".join(sorted(op.kernels)) or "none of its own (a view or a composite)"
    body = [
        f"   :Schema: ``{op.signature}``",
        f"   :Variants: {_variants(op)}",
        f"   :Kernels: {devices}" + (f" ({'; '.join(flags)})" if flags else ""),
    ]
    keywords = _torch_keywords(op)
    if keywords:
        body.append(f"   :Also takes: {keywords}")
    if op.name in NOT_ON_CUDA:
        body.append(f"   :Not on CUDA: {NOT_ON_CUDA[op.name]}")
    return f".. {directive}:: {target}\n\n" + "\n".join(body) + "\n"


def _torch_keywords(op) -> str:
    """torch's keyword forms that the operator's bindings take beyond its front's signature."""
    taken, out = {}, False
    for binding in op.bindings or ():
        spec = getattr(binding, "_torch_keywords", None)
        if spec is not None:
            taken.update(spec[1])
            out = out or spec[2]
    parts = [f"``{given}=`` for ``{target}``" for given, target in sorted(taken.items())]
    return ", ".join((["``out=`` (the function)"] if out else []) + parts)


def operator_reference() -> str:
    by_category: dict[str, list] = {}
    for op in OPS.values():
        by_category.setdefault(op.category, []).append(op)
    order = [c for c in CATEGORY_TITLES if c in by_category] + sorted(set(by_category) - set(CATEGORY_TITLES))
    out = [
        "Every operator of flambeau's operator table, grouped by family. Each entry gives the declared\n"
        "schema (whose argument names are the ones the autograd derivative table uses), the variants\n"
        "bound from it (``flambeau.<name>`` function, ``Tensor`` method, in-place ``Tensor.<name>_`` and\n"
        "operator dunders), torch's keyword forms that they take beyond the front's own signature\n"
        "(``out=``, numpy's ``axis=``/``keepdims=``, the schema's names) and the device types that\n"
        "have a kernel.\n",
        f"The table currently holds {len(OPS)} operators.\n",
        ".. contents:: Families\n   :local:\n   :depth: 1\n",
    ]
    for category in order:
        out.append(_heading(CATEGORY_TITLES.get(category, category.replace("_", " ").capitalize()), "-"))
        ops = sorted(by_category[category], key=lambda o: o.name)
        out.append(", ".join(f":ref:`{o.name} <op-{o.name}>`" for o in ops) + "\n")
        for op in ops:
            out.append(f".. _op-{op.name}:\n\n{_op_entry(op)}")
    return "\n".join(out)


def _tensor_members() -> list[str]:
    """Public attributes defined on Tensor itself, leaving out what the operator table binds."""
    bound = set()
    for op in OPS.values():
        bound.update({op.name, op.name + "_", *op.dunders, *op.aliases, *(a + "_" for a in op.aliases)})
    members = []
    for name, value in vars(flambeau.Tensor).items():
        if name.startswith("_") or name in bound:
            continue
        if inspect.isfunction(value) or isinstance(value, (property, staticmethod, classmethod)):
            members.append(name)
    return members


def tensor_reference() -> str:
    members = _tensor_members()
    out = [
        "The attributes and methods defined on :class:`flambeau.Tensor` itself. Methods that are\n"
        "operators (``Tensor.add``, ``Tensor.sum``, ``Tensor.add_`` ...) are listed with their\n"
        "function form in :doc:`operators`.\n",
        ".. autoclass:: flambeau.Tensor\n" + (f"   :members: {', '.join(members)}\n" if members else ""),
    ]
    return "\n".join(out)


def _autodoc_lines(names: list[str]) -> str:
    """autodoc directives for public names of ``flambeau`` (functions, classes, other objects)."""
    lines = []
    for name in names:
        obj = getattr(flambeau, name)
        if inspect.isclass(obj):
            lines.append(f".. autoclass:: {name}\n   :members:\n")
        elif callable(obj):
            lines.append(f".. autofunction:: {name}")
        else:
            kind = type(obj).__name__
            lines.append(f".. py:data:: {name}\n   :type: {kind}\n\n   The {kind} object ``flambeau.{name}``.\n")
    return "\n".join(lines) + "\n"


def fill_name_lists(app, docname: str, source: list[str]) -> None:
    """Fill the ``GENERATED-*`` markers of api/tensor_core.rst, api/operators.rst and api/tensor.rst from the
    package (differences.rst's list of missing names is written by ``tools/api_coverage.py --write-docs``)."""
    if docname == "api/operators":
        source[0] = source[0].replace("GENERATED-OPERATORS", operator_reference())
        return
    if docname == "api/tensor":
        source[0] = source[0].replace("GENERATED-TENSOR", tensor_reference())
        return
    if docname != "api/tensor_core":
        return
    from flambeau import _factories, _random

    text = source[0]
    documented = set(re.findall(r"^\.\. auto\w+:: (?:flambeau\.)?(\w+)", text, flags=re.M))
    factories = [n for n in _factories.__all__ if n not in documented]
    random = [n for n in _random.__all__ if n not in documented and n not in factories]
    ops = {n for op in OPS.values() for n in (op.name, *op.aliases)}
    dtypes = {n for n in flambeau.__all__ if isinstance(getattr(flambeau, n), flambeau.dtype)}
    misc = [n for n in flambeau.__all__
            if n not in documented | set(factories) | set(random) | ops | dtypes | {"cuda", "Tensor"}]
    for marker, names in (("FACTORIES", factories), ("RANDOM", random), ("MISC", misc)):
        text = text.replace(f"GENERATED-{marker}", _autodoc_lines(names))
    source[0] = text


def always_reread(app, env, added, changed, removed) -> list[str]:
    # Their text comes from the code, which sphinx does not watch: re-read them at every build.
    return ["api/operators", "api/tensor", "api/tensor_core"]


def setup(app):
    app.connect("source-read", fill_name_lists)
    app.connect("env-get-outdated", always_reread)
