"""The operator table (``flambeau._ops.OPS``) is complete and bound as declared.

Every operator declared anywhere in tensor-core is walked here, so a new operator is checked the
moment it is declared: it has a front function with a docstring, a CPU kernel, a well-formed
signature named after it, and ``flambeau.<name>`` / ``Tensor.<name>`` / ``Tensor.<name>_`` exist
exactly when declared. Operators that PyTorch documents as views must be declared as views, and
operators with integer or bool results must not claim to be differentiable.
"""

from __future__ import annotations

import inspect
import re

import pytest

import flambeau as fl
from flambeau._ops import OPS

ALL = sorted(OPS)

# PyTorch's "Tensor Views" page: operators whose result always shares storage with the input.
# (reshape, flatten and contiguous may or may not return a view, so they are not listed.)
# (``detach`` shares storage but is not an autograd view in torch: ``x.detach()._is_view()`` is False.)
TORCH_VIEW_OPS = {
    "adjoint", "alias", "as_strided", "chunk", "diagonal", "expand", "expand_as", "hsplit", "movedim",
    "moveaxis", "narrow", "permute", "select", "split", "split_with_sizes", "squeeze", "swapaxes", "swapdims",
    "t", "tensor_split", "transpose", "unbind", "unflatten", "unfold", "unsqueeze", "view", "view_as",
    "view_as_real", "view_as_complex", "vsplit", "dsplit", "real", "imag",
}

# Operators whose result is integer or bool: autograd has nothing to differentiate.
NON_DIFFERENTIABLE = {
    "eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal", "not_equal",
    "argmax", "argmin", "argsort", "nonzero", "count_nonzero", "isnan", "isinf", "isfinite", "isposinf",
    "isneginf", "isclose", "logical_and", "logical_or", "logical_xor", "logical_not", "bitwise_and",
    "bitwise_or", "bitwise_xor", "bitwise_not", "all", "any", "one_hot", "bucketize", "searchsorted",
    "signbit", "equal", "allclose",
}

SIGNATURE = re.compile(r"^(?P<name>[a-z_][a-z0-9_]*)\((?P<args>.*)\)\s*->\s*(?P<ret>.+)$")


def test_table_is_not_empty():
    assert len(OPS) >= 10


@pytest.mark.parametrize("name", ALL)
def test_signature_is_well_formed_and_named_after_op(name):
    op = OPS[name]
    m = SIGNATURE.match(op.signature)
    assert m, f"{name}: signature {op.signature!r} is not of the form 'name(args) -> Result'"
    assert m["name"] == op.name == name


@pytest.mark.parametrize("name", ALL)
def test_has_front_with_docstring(name):
    op = OPS[name]
    fronts = [f for f in (op.fn, op.inplace_fn) if f is not None]
    assert fronts, f"{name}: declared but no front function was registered (@OP.front / @OP.inplace)"
    for fn in fronts:
        assert callable(fn)
        assert fn._opdef is op
        doc = inspect.getdoc(fn)
        assert doc and len(doc) > 10, f"{name}: front function {fn.__qualname__} has no docstring"
    if op.fn is not None:
        assert op.fn.__name__ == name


@pytest.mark.parametrize("name", ALL)
def test_kernels(name):
    """Kernels are callables keyed by device type; the CPU one is what the table says it is.

    Views (new strides on the same storage) and composites of other operators (``hstack`` is
    ``cat``) run no kernel of their own on the CPU and declare none; a composite may still have a
    fused kernel on another device (``square`` on CUDA).
    """
    op = OPS[name]
    assert set(op.kernels) <= {"cpu", "cuda"}, f"{name}: kernels for unknown device types {sorted(op.kernels)}"
    assert all(callable(k) for k in op.kernels.values())
    if "cpu" in op.kernels:
        assert op.kernel("cpu") is op.kernels["cpu"]
    else:
        with pytest.raises(NotImplementedError, match=f"flambeau.{name} has no kernel for device type 'cpu'"):
            op.kernel("cpu")


def test_most_operators_have_a_cpu_kernel():
    # Views and composites are the exception, not the rule.
    with_cpu = sum("cpu" in op.kernels for op in OPS.values())
    assert with_cpu >= 0.6 * len(OPS), f"only {with_cpu} of {len(OPS)} operators have a CPU kernel"


@pytest.mark.parametrize("name", ALL)
def test_bound_as_declared(name):
    op = OPS[name]
    if op.fn is not None and op.function:
        assert getattr(fl, name, None) is op.bindings[0], f"flambeau.{name} is not the declared front's binding"
        assert getattr(op.bindings[0], "__wrapped__", op.bindings[0]) is op.fn
        assert name in fl.__all__
    else:
        assert getattr(fl, name, None) is not op.fn or op.fn is None, f"flambeau.{name} bound but function=False"
    if op.fn is not None and op.method:  # (a dunder of the method's own name replaces it: Tensor.contiguous)
        assert fl.Tensor.__dict__.get(name) is op.dunders.get(name, op.bindings[1]), \
            f"Tensor.{name} is not the declared front's binding"
        assert getattr(op.bindings[1], "__wrapped__", op.bindings[1]) is op.fn
    if op.inplace_fn is not None:
        assert fl.Tensor.__dict__.get(name + "_") is op.inplace_fn, f"Tensor.{name}_ is not the declared front"
    for dunder, fn in op.dunders.items():
        assert fl.Tensor.__dict__.get(dunder) is fn, f"Tensor.{dunder} is not the one {name} declares"
    for alias in op.aliases:
        if op.function and op.fn is not None:
            assert getattr(fl, alias) is op.bindings[0]
        if op.method and op.fn is not None:
            assert fl.Tensor.__dict__.get(alias) is op.bindings[1]


def test_no_two_ops_bind_the_same_dunder():
    seen: dict[str, str] = {}
    for op in OPS.values():
        for dunder in op.dunders:
            assert dunder not in seen, f"Tensor.{dunder} declared by both {seen[dunder]} and {op.name}"
            seen[dunder] = op.name


# Known deviations, reported to the owners of the operators (pass again once fixed).
KNOWN_NOT_VIEW: dict = {}  # op -> reason, for view operators of torch not (yet) declared as views


def _known(names, known):
    return [pytest.param(n, marks=pytest.mark.xfail(reason=known[n], strict=False)) if n in known else n
            for n in names]


@pytest.mark.parametrize("name", _known(sorted(TORCH_VIEW_OPS & set(OPS)), KNOWN_NOT_VIEW))
def test_view_ops_declare_view(name):
    assert OPS[name].view, f"{name} is a view in PyTorch: declare it with view=True"


@pytest.mark.parametrize("name", sorted(NON_DIFFERENTIABLE & set(OPS)))
def test_integer_result_ops_are_not_differentiable(name):
    assert not OPS[name].differentiable, f"{name} returns integers/bools: declare it with differentiable=False"


@pytest.mark.parametrize("name", ALL)
def test_has_category(name):
    category = OPS[name].category
    assert isinstance(category, str) and re.fullmatch(r"[a-z][a-z_ ]*", category), category


def test_get_op_and_register_kernel_errors():
    with pytest.raises(KeyError, match="no operator named 'no_such_op'"):
        fl._ops.get_op("no_such_op")
    with pytest.raises(ValueError, match=r"device_type must be one of \('cpu', 'cuda'\), got 'tpu'"):
        fl._ops.register_kernel(ALL[0], "tpu", lambda *a: None)
    with pytest.raises(ValueError, match="device_type must be one of"):
        fl._ops._registry.kernel(ALL[0], "tpu")
    with pytest.raises(KeyError, match="no operator named 'no_such_op'"):
        fl._ops.register_kernel("no_such_op", "cpu", lambda *a: None)


def test_every_kernel_belongs_to_a_declared_operator():
    """``@kernel`` registers before declarations exist (Note [One kernel table]): catch misspelt names."""
    from flambeau._ops._registry import DEVICE_TYPES, KERNELS

    stray = sorted(name for name, row in KERNELS.items() if row and name not in OPS)
    assert not stray, f"kernels registered for operators nobody declares: {stray}"
    assert all(set(row) <= set(DEVICE_TYPES) for row in KERNELS.values())
    with pytest.raises(NotImplementedError, match=r"flambeau\.\w+ has no kernel for device type 'tpu'"):
        OPS[ALL[0]].kernel("tpu")


# Arguments after the input for calling each view operator on a (2, 3) tensor.
VIEW_CALLS = {
    "view": ((3, 2),), "permute": ((1, 0),), "transpose": (0, 1), "t": (), "expand": ((2, 2, 3),),
    "broadcast_to": ((2, 2, 3),), "squeeze": (), "unsqueeze": (0,), "narrow": (1, 0, 2), "select": (0, 1),
    "unfold": (1, 2, 1), "as_strided": ((2,), (1,)), "unbind": (), "split": (1,), "chunk": (2,),
    "split_with_sizes": ([1, 1],), "tensor_split": (2,), "diagonal": (), "movedim": (0, 1),
    "unflatten": (1, (3, 1)), "detach": (), "alias": (),
    "swapaxes": (0, 1), "swapdims": (0, 1), "adjoint": (), "moveaxis": (0, 1), "hsplit": (3,), "vsplit": (2,),
}


@pytest.mark.parametrize("name", sorted(n for n in OPS if OPS[n].view))
def test_view_ops_share_storage(name):
    op = OPS[name]
    if op.fn is None:
        pytest.skip(f"{name} has no out-of-place front")
    x = fl.zeros(2, 3)
    assert x._base is None
    if name in ("view_as", "expand_as"):
        args = (fl.zeros(3, 2) if name == "view_as" else fl.zeros(2, 2, 3),)
    elif name == "broadcast_tensors":
        inputs = (x, fl.zeros(2, 2, 3))
        outs = op.fn(*inputs)
        assert [o._storage for o in outs] == [t._storage for t in inputs], "broadcast_tensors must return views"
        return
    elif name in VIEW_CALLS:
        args = VIEW_CALLS[name]
    else:
        pytest.skip(f"no example call for view operator {name}: add one to VIEW_CALLS")
    out = op.fn(x, *args)
    for o in out if isinstance(out, (tuple, list)) else (out,):
        assert o._storage is x._storage, f"{name} declares view=True but its result has its own storage"
        assert o._base is x, f"{name}: a view's _base must be the tensor that owns the storage"
