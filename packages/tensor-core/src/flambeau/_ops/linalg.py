"""Linear algebra: matmul and its relatives (mm, bmm, mv, dot, addmm ...), einsum, tensordot, trace, diag.

Like torch, products refuse operands of different dtypes; float16 and bfloat16 products accumulate
in float32. Complex products are complex products (no conjugation, as torch's ``matmul``).
CPU kernels (numpy's BLAS): ``flambeau._kernels.cpu.linalg``.

Kernel convention (every device; arrays in, array out):
    matmul, mm, bmm, mv, dot, vdot, inner, outer, kron: ``kernel(a, b) -> array`` with numpy's
        matmul/dot/outer/kron semantics on already validated operands of one dtype.
    addmm, addmv, baddbmm, addbmm: ``kernel(input, a, b, beta, alpha) -> array``.
    linear: ``kernel(input, weight, bias) -> array``: ``input`` ``(*, in)`` (any strides), ``weight``
        ``(out, in)``, ``bias`` None or broadcastable to the ``(rows, out)`` matrix of the result.
    linear_backward: ``kernel(grad, input, weight, output_mask) -> (grad_input, grad_weight, grad_bias)``:
        ``grad`` ``(*, out)`` and ``input`` ``(*, in)`` of one leading shape (any strides), ``weight``
        ``(out, in)``; ``grad_bias`` is ``(out,)``; None where ``output_mask`` is False.
    einsum: ``kernel(equation, *arrays) -> array``; tensordot: ``kernel(a, b, axes_a, axes_b)``.
    trace: ``kernel(a) -> 0-dim array``; diag: ``kernel(a, diagonal) -> array`` (a copy);
    diagonal: ``kernel(a, offset, dim1, dim2) -> writable view``; diag_embed: ``kernel(a,
    offset, dim1, dim2) -> array``.

Autograd recording: ``inputs`` are the positional arguments in signature order (dims
normalised to non-negative ints), ``attrs`` the keyword-only ones (``beta``, ``alpha``).
"""

from __future__ import annotations

import math
import re

from flambeau import _dtype as dt
from flambeau._ops._common import (
    Tensor,
    _wrap,
    broadcast_shapes,
    check_tensor,
    common_device,
    grad_state,
    output_mask_of,
    record,
    record_if_needed,
    wrap_dim,
    wrap_optional,
)
from flambeau._ops._registry import declare, get_op
from flambeau._ops.shape import broadcast_tensors, stack

__all__ = ["matmul", "mm", "bmm", "mv", "addmm", "addmv", "baddbmm", "addbmm", "linear", "dot", "vdot", "inner",
           "outer", "einsum", "tensordot", "kron", "trace", "diag", "diagonal", "diag_embed", "cross"]

# torch's C type names, used in its dtype-mismatch messages.
_C_NAME = {dt.float32: "float", dt.float64: "double", dt.float16: "c10::Half", dt.int64: "long int",
           dt.int32: "int", dt.int16: "short int", dt.int8: "signed char", dt.uint8: "unsigned char",
           dt.bool: "bool", dt.bfloat16: "c10::BFloat16", dt.complex64: "c10::complex<float>",
           dt.complex128: "c10::complex<double>"}


# --- validation helpers ----------------------------------------------------------------------------
def _same_dtype(a: Tensor, b: Tensor) -> None:
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {_C_NAME[a.dtype]} != "
                           f"{_C_NAME[b.dtype]}")


def _same_dtype_as_addend(addend: Tensor, mat: Tensor) -> None:
    """torch's message for the added tensor of addmm and its relatives (linear's bias) of another dtype."""
    if addend.dtype is not mat.dtype:
        raise RuntimeError(f"self and mat2 must have the same dtype, but got {addend.dtype.scalar_name} and "
                           f"{mat.dtype.scalar_name}")


def _no_bool(name: str, d) -> None:
    if d is dt.bool:
        raise RuntimeError(f'"{name}" not implemented for \'Bool\'')


def _shape_x(shape) -> str:
    return "x".join(str(n) for n in shape)


def _matmul_shape_error(sa: tuple, sb: tuple) -> RuntimeError:
    """torch's message for operands of matmul whose inner dimensions differ."""
    na, nb = len(sa), len(sb)
    if na == 1 and nb == 1:
        return RuntimeError(f"inconsistent tensor size, expected tensor [{sa[0]}] and src [{sb[0]}] to have the "
                            f"same number of elements, but got {sa[0]} and {sb[0]} elements respectively")
    if nb == 1:
        m = math.prod(sa[:-1])
        return RuntimeError(f"size mismatch, got input ({m}), mat ({m}x{sa[-1]}), vec ({sb[0]})")
    if nb == 2 and na != 2 and na != 1:
        return RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({math.prod(sa[:-1])}x{sa[-1]} and "
                            f"{_shape_x(sb)})")
    if na <= 2 and nb == 2:
        rows = 1 if na == 1 else sa[0]
        return RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{sa[-1]} and {_shape_x(sb)})")
    batch = math.prod(broadcast_shapes(sa[:-2], sb[:-2]))
    return RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{batch}, {sa[-1]}] "
                        f"but got: [{batch}, {sb[-2]}].")


# --- matmul ----------------------------------------------------------------------------------------
MATMUL = declare("matmul(Tensor input, Tensor other) -> Tensor", category="linalg")


@MATMUL.front
def matmul(input: Tensor, other: Tensor) -> Tensor:
    """Matrix product with torch's broadcasting rules (also ``input @ other``).

    - 1-D @ 1-D: dot product (0-dim result);
    - 2-D @ 2-D: matrix product ``(n, k) @ (k, m) -> (n, m)``;
    - 1-D @ N-D: a 1 is prepended to ``input``'s shape for the product and removed after;
    - N-D @ 1-D: matrix-vector product over the last dimension;
    - batched: leading (batch) dimensions broadcast, ``(*b1, n, k) @ (*b2, k, m) -> (*b, n, m)``.

    Both operands must have the same dtype (no promotion, as in torch).
    """
    if input.__class__ is not Tensor or other.__class__ is not Tensor:
        if getattr(input, "is_sparse", False):  # sparse COO @ dense: flambeau._sparse's product (a Tensor subclass)
            return input.__matmul__(other)
        check_tensor(input, "input", "matmul")
        check_tensor(other, "other", "matmul")
    a, b = input._data, other._data
    na, nb = a.ndim, b.ndim
    if na == 0 or nb == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are {na}D and {nb}D")
    d = input.dtype
    if d is not other.dtype:
        _same_dtype(input, other)
    if a.shape[-1] != b.shape[-2 if nb > 1 else 0]:
        raise _matmul_shape_error(a.shape, b.shape)
    if na > 2 or nb > 2:
        broadcast_shapes(a.shape[:-2], b.shape[:-2])
    if d is _bool:
        _no_bool("addmm_impl_cpu_", d)
    dev = input._device
    if other._device is not dev:
        dev = common_device(input, other)
    out = _wrap((_MATMUL_KERNELS.get(dev.type) or MATMUL.kernel(dev.type))(a, b), dev)
    if grad_state.enabled and (input._requires_grad or other._requires_grad):
        record(MATMUL, (input, other), {}, out)
    return out


_MATMUL_KERNELS = MATMUL.kernels
_TO_COPY = get_op("to_copy")
_bool = dt.bool


def _rmatmul(self, other):
    return matmul(other, self)


MATMUL.dunders["__matmul__"] = matmul
MATMUL.dunders["__rmatmul__"] = _rmatmul


def _product_op(signature: str, check, doc: str, **options):
    """Declare a two-operand product whose operands ``check(a, b)`` validates."""
    op = declare(signature, category="linalg", **options)
    name = op.name

    def fn(input, other):
        if name == "mm" and input.__class__ is not Tensor and getattr(input, "is_sparse", False):
            return input.__matmul__(other)  # sparse COO @ dense (torch.mm takes a sparse first operand)
        check_tensor(input, "input", name)
        check_tensor(other, "other", name)
        check(input, other)
        dev = common_device(input, other)
        out = _wrap(op.kernel(dev.type)(input._data, other._data), dev)
        if grad_state.enabled and (input._requires_grad or other._requires_grad):
            record(op, (input, other), {}, out)
        return out

    fn.__doc__ = doc
    op.front(fn)
    return op


def _check_mm(a, b):
    if a.ndim != 2:
        raise RuntimeError("self must be a matrix")
    if b.ndim != 2:
        raise RuntimeError("mat2 must be a matrix")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({_shape_x(a.shape)} and {_shape_x(b.shape)})")
    _same_dtype(a, b)
    _no_bool("addmm_impl_cpu_", a.dtype)


def _check_bmm(a, b):
    if a.ndim != 3:
        raise RuntimeError("batch1 must be a 3D tensor")
    if b.ndim != 3:
        raise RuntimeError("batch2 must be a 3D tensor")
    if b.shape[0] != a.shape[0] or b.shape[1] != a.shape[2]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: [{a.shape[0]}, "
                           f"{a.shape[2]}] but got: [{b.shape[0]}, {b.shape[1]}].")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"expected scalar type {a.dtype.scalar_name} but found {b.dtype.scalar_name}")
    _no_bool("bmm", a.dtype)


def _check_mv(a, b):
    if a.ndim != 2 or b.ndim != 1:
        raise RuntimeError(f"vector + matrix @ vector expected, got 1, {a.ndim}, {b.ndim}")
    if a.shape[1] != b.shape[0]:
        raise RuntimeError(f"size mismatch, got input ({a.shape[0]}), mat ({_shape_x(a.shape)}), vec ({b.shape[0]})")
    _same_dtype(a, b)
    _no_bool("addmv_impl_cpu", a.dtype)


def _check_dot(a, b, name="dot"):
    if a.ndim != 1 or b.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a.ndim}D and {b.ndim}D tensors")
    if a.shape[0] != b.shape[0]:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a.shape[0]}] and src [{b.shape[0]}] to "
                           f"have the same number of elements, but got {a.shape[0]} and {b.shape[0]} elements "
                           "respectively")
    if a.dtype is not b.dtype:
        raise RuntimeError(f"{name} : expected both vectors to have same dtype, but found {a.dtype.scalar_name} and "
                           f"{b.dtype.scalar_name}")
    _no_bool(name, a.dtype)


MM = _product_op("mm(Tensor input, Tensor mat2) -> Tensor", _check_mm,
                 "Matrix product of 2-D ``input`` ``(n, k)`` and ``mat2`` ``(k, m)`` -> ``(n, m)`` (same dtypes).")
BMM = _product_op("bmm(Tensor input, Tensor mat2) -> Tensor", _check_bmm,
                  "Batched matrix product ``(b, n, k) @ (b, k, m) -> (b, n, m)`` without broadcasting.")
MV = _product_op("mv(Tensor input, Tensor vec) -> Tensor", _check_mv,
                 "Matrix-vector product ``(n, k) @ (k,) -> (n,)`` (same dtypes).")
DOT = _product_op("dot(Tensor input, Tensor other) -> Tensor", _check_dot,
                  "Dot product of two 1-D tensors of the same size and dtype (0-dim result).")
VDOT = _product_op("vdot(Tensor input, Tensor other) -> Tensor",
                   lambda a, b: _check_dot(a, b, "vdot"),
                   "Dot product of two 1-D tensors, conjugating the first (the same as :func:`flambeau.dot` "
                   "for real tensors).")
mm, bmm, mv, dot, vdot = MM.fn, BMM.fn, MV.fn, DOT.fn, VDOT.fn


def _data_as(t: Tensor, d):
    """``t``'s array in dtype ``d``: itself, or a copy cast by the device's ``to_copy`` kernel."""
    if t.dtype is d:
        return t._data
    dev = t._device
    return _TO_COPY.kernel(dev.type)(t._data, d.np, dev, dev, False)


def _promoted(a: Tensor, b: Tensor):
    d = dt.result_type(a, b)
    return _data_as(a, d), _data_as(b, d)


OUTER = declare("outer(Tensor input, Tensor vec2) -> Tensor", category="linalg", aliases=("ger",))


@OUTER.front
def outer(input: Tensor, vec2: Tensor) -> Tensor:
    """Outer product of 1-D ``input`` ``(n,)`` and ``vec2`` ``(m,)`` -> ``(n, m)`` (types promote)."""
    check_tensor(input, "input", "outer")
    check_tensor(vec2, "vec2", "outer")
    if input.ndim != 1:
        raise RuntimeError(f"outer: Expected 1-D argument self, but got {input.ndim}-D")
    if vec2.ndim != 1:
        raise RuntimeError(f"outer: Expected 1-D argument vec2, but got {vec2.ndim}-D")
    dev = common_device(input, vec2)
    out = _wrap(OUTER.kernel(dev.type)(*_promoted(input, vec2)), dev)
    record_if_needed(OUTER, (input, vec2), {}, out)
    return out


KRON = declare("kron(Tensor input, Tensor other) -> Tensor", category="linalg")


@KRON.front
def kron(input: Tensor, other: Tensor) -> Tensor:
    """Kronecker product; the result has ``max(ndim)`` dims of size ``input.size(i) * other.size(i)``."""
    check_tensor(input, "input", "kron")
    check_tensor(other, "other", "kron")
    dev = common_device(input, other)
    out = _wrap(KRON.kernel(dev.type)(*_promoted(input, other)), dev)
    record_if_needed(KRON, (input, other), {}, out)
    return out


INNER = declare("inner(Tensor input, Tensor other) -> Tensor", category="linalg")


@INNER.front
def inner(input: Tensor, other: Tensor) -> Tensor:
    """Inner product over the last dimension: ``(*a, k)`` and ``(*b, k)`` -> ``(*a, *b)``.

    A 0-dim operand multiplies the other elementwise.
    """
    check_tensor(input, "input", "inner")
    check_tensor(other, "other", "inner")
    dev = common_device(input, other)
    if input.ndim and other.ndim:
        if input.shape[-1] != other.shape[-1]:
            raise RuntimeError(f"inner() the last dimension must match on both input tensors but got shapes "
                               f"{list(input.shape)} and {list(other.shape)}")
        if input.dtype is not other.dtype:
            raise RuntimeError("both inputs should have same dtype")
        arr = INNER.kernel(dev.type)(input._data, other._data)
    else:
        arr = INNER.kernel(dev.type)(*_promoted(input, other))
    out = _wrap(arr, dev)
    record_if_needed(INNER, (input, other), {}, out)
    return out


# --- addmm and friends -----------------------------------------------------------------------------
def _check_expandable(shape, target) -> None:
    """torch's error if ``shape`` does not expand to ``target`` (the shape of the product)."""
    if len(shape) > len(target):
        raise RuntimeError(f"The expand of the tensor of shape {list(shape)} to {list(target)} is not possible: "
                           "the number of sizes provided must be greater or equal to the number of dimensions")
    for i in range(1, len(shape) + 1):
        if shape[-i] != 1 and shape[-i] != target[-i]:
            raise RuntimeError(f"The expanded size of the tensor ({target[-i]}) must match the existing size "
                               f"({shape[-i]}) at non-singleton dimension {len(target) - i}.  Target sizes: "
                               f"{list(target)}.  Tensor sizes: {list(shape)}")


def _add_product_op(signature: str, check, shape_of, doc: str):
    op = declare(signature, category="linalg")
    name = op.name
    argnames = re.findall(r"Tensor (\w+)", signature)

    def fn(input, a, b, *, beta=1, alpha=1):
        for t, arg in zip((input, a, b), argnames):
            check_tensor(t, arg, name)
        check(a, b)
        _same_dtype_as_addend(input, a)
        target = shape_of(a, b)
        _check_expandable(input.shape, target)
        dev = common_device(input, a, b)
        out = _wrap(op.kernel(dev.type)(input._data, a._data, b._data, beta, alpha), dev)
        record_if_needed(op, (input, a, b), {"beta": beta, "alpha": alpha}, out)
        return out

    fn.__doc__ = doc
    op.front(fn)
    return op


ADDMM = _add_product_op("addmm(Tensor input, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
                        _check_mm, lambda a, b: (a.shape[0], b.shape[1]),
                        "``beta * input + alpha * (mat1 @ mat2)``; ``input`` broadcasts to ``(n, m)``.")
ADDMV = _add_product_op("addmv(Tensor input, Tensor mat, Tensor vec, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
                        _check_mv, lambda a, b: (a.shape[0],),
                        "``beta * input + alpha * (mat @ vec)``; ``input`` broadcasts to ``(n,)``.")
BADDBMM = _add_product_op("baddbmm(Tensor input, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) "
                          "-> Tensor", _check_bmm, lambda a, b: (a.shape[0], a.shape[1], b.shape[2]),
                          "``beta * input + alpha * bmm(batch1, batch2)``; ``input`` broadcasts to ``(b, n, m)``.")
ADDBMM = _add_product_op("addbmm(Tensor input, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) "
                         "-> Tensor", _check_bmm, lambda a, b: (a.shape[1], b.shape[2]),
                         "``beta * input + alpha * sum_i(batch1[i] @ batch2[i])``; ``input`` broadcasts to "
                         "``(n, m)``.")
addmm, addmv, baddbmm, addbmm = ADDMM.fn, ADDMV.fn, BADDBMM.fn, ADDBMM.fn


# --- linear ------------------------------------------------------------------------------------------
# Note [Linear as one operator]
#     ``nn.functional.linear`` of an ``(*, in)`` input built of views and a product recorded four operators
#     (a reshape, ``weight.t()``, ``addmm``, a view back) and four nodes for backward to walk: about fifty
#     microseconds of host time per layer and step, paid seventeen times in a small GPT's step on a GPU that
#     waits for the host. ``linear`` is one operator: its kernels fold the leading dims into the rows of one
#     GEMM with the bias in its epilogue, and its derivative gives the three gradients directly.
LINEAR = declare("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor", category="linalg",
                 method=False, function=False)


@LINEAR.front
def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias`` as one operator (Note [Linear as one operator]); the operator of
    ``nn.functional.linear`` for an input of at least two dims and a matrix weight.

    Args:
        input: ``(*, in)``, at least 2-D.
        weight: ``(out, in)`` of ``input``'s dtype.
        bias: None, or of ``input``'s dtype and broadcastable to the ``(rows, out)`` matrix of the result (as
            ``addmm``'s ``input``): a ``(out,)``-like bias, or a 2-D one of a 2-D input. (``nn.functional.linear``
            adds a larger bias of a larger input to the product, as torch does.)

    Returns:
        ``(*, out)`` of ``input``'s dtype.
    """
    check_tensor(input, "input", "linear")
    check_tensor(weight, "weight", "linear")
    if bias is not None:
        check_tensor(bias, "bias", "linear")
    if input.ndim < 2 or weight.ndim != 2:
        raise RuntimeError(f"linear: expected an input of at least 2 dims and a 2-D weight, got input of size "
                           f"{list(input.shape)} and weight of size {list(weight.shape)}")
    rows = math.prod(input.shape[:-1])
    if input.shape[-1] != weight.shape[1]:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{input.shape[-1]} and "
                           f"{weight.shape[1]}x{weight.shape[0]})")
    _same_dtype(input, weight)
    _no_bool("addmm_impl_cpu_", input.dtype)
    if bias is not None:
        _same_dtype_as_addend(bias, input)
        if bias.ndim > 1 and input.ndim > 2:
            raise RuntimeError(f"linear: expected a bias of at most one dim for an input of {input.ndim} dims, got "
                               f"bias of size {list(bias.shape)}")
        _check_expandable(bias.shape, (rows, weight.shape[0]))
    dev = common_device(input, weight, bias)
    out = _wrap(LINEAR.kernel(dev.type)(input._data, weight._data, None if bias is None else bias._data), dev)
    if grad_state.enabled and (input._requires_grad or weight._requires_grad
                               or (bias is not None and bias._requires_grad)):
        record(LINEAR, (input, weight, bias), {}, out)
    return out


LINEAR_BACKWARD = declare("linear_backward(Tensor grad_output, Tensor input, Tensor weight, bool[3] output_mask) "
                          "-> (Tensor, Tensor, Tensor)", category="linalg", method=False, function=False,
                          differentiable=False)


@LINEAR_BACKWARD.front
def linear_backward(grad_output: Tensor, input: Tensor, weight: Tensor, output_mask=(True, True, True)) -> tuple:
    """Gradients of :func:`linear` w.r.t. ``input``, ``weight`` and a ``(out,)`` bias, in one operator call
    (Note [Linear as one operator]; not differentiable: double backward goes through differentiable products).

    Args:
        grad_output: ``(*, out)``, the gradient of linear's result.
        input: ``(*, in)`` with ``grad_output``'s leading dims.
        weight: ``(out, in)``.
        output_mask: which of the three gradients to compute.

    Returns:
        ``(grad_input (*, in), grad_weight (out, in), grad_bias (out,))``, None where ``output_mask`` is False;
        all of ``input``'s dtype.
    """
    op = "linear_backward"
    for t, name in ((grad_output, "grad_output"), (input, "input"), (weight, "weight")):
        check_tensor(t, name, op)
    if not input.dtype.is_floating_point:  # (complex dtypes are not)
        raise RuntimeError(f"{op}(): expected input of a real floating point dtype, got {input.dtype}")
    for t, name in ((grad_output, "grad_output"), (weight, "weight")):
        if t.dtype is not input.dtype:
            raise RuntimeError(f"{op}(): expected {name} of input's dtype {input.dtype}, got {t.dtype}")
    if weight.ndim != 2 or input.ndim < 2 or input.shape[-1] != weight.shape[1] \
            or tuple(grad_output.shape) != (*input.shape[:-1], weight.shape[0]):
        raise RuntimeError(f"{op}(): expected input (*, in), weight (out, in) and grad_output (*, out) with input's "
                           f"leading dims, got input {list(input.shape)}, weight {list(weight.shape)} and "
                           f"grad_output {list(grad_output.shape)}")
    mask = output_mask_of(output_mask, op)
    dev = common_device(grad_output, input, weight)
    return wrap_optional(LINEAR_BACKWARD.kernel(dev.type)(grad_output._data, input._data, weight._data, mask), dev)


# --- einsum, tensordot -----------------------------------------------------------------------------
EINSUM = declare("einsum(str equation, Tensor[] tensors) -> Tensor", category="linalg", method=False)


@EINSUM.front
def einsum(equation: str, *operands) -> Tensor:
    """Einstein summation, e.g. ``einsum('bij,bjk->bik', a, b)`` (operands may also come as one list).

    Accepts torch's equation forms: implicit output, ``->``, ``...`` for broadcast dimensions and
    spaces. All operands must have the same dtype. Contractions are ordered by numpy's
    ``einsum(optimize=True)`` and run on BLAS where they can.
    """
    if not isinstance(equation, str):
        raise TypeError(f"einsum(): argument 'equation' must be str, not {type(equation).__name__}")
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for i, t in enumerate(operands):
        check_tensor(t, f"operands[{i}]", "einsum")
    n_specified = equation.split("->")[0].count(",") + 1
    if len(operands) < n_specified:
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    if len(operands) > n_specified:
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    for t in operands[1:]:
        if t.dtype is not operands[0].dtype:
            raise RuntimeError(f"expected scalar type {operands[0].dtype.scalar_name} but found {t.dtype.scalar_name}")
    dev = common_device(*operands)
    try:
        arr = EINSUM.kernel(dev.type)(equation, *(t._data for t in operands))
    except ValueError as e:
        raise RuntimeError(f"einsum(): {e}") from None
    out = _wrap(arr, dev)
    record_if_needed(EINSUM, (equation, tuple(operands)), {}, out)
    return out


TENSORDOT = declare("tensordot(Tensor input, Tensor other, int[][] dims=2) -> Tensor", category="linalg",
                    method=False)


@TENSORDOT.front
def tensordot(a: Tensor, b: Tensor, dims=2) -> Tensor:
    """Contract the last ``dims`` dims of ``a`` with the first ``dims`` of ``b``.

    ``dims`` may also be a pair of lists ``([dims of a], [dims of b])``. Same dtypes required.
    """
    check_tensor(a, "a", "tensordot")
    check_tensor(b, "b", "tensordot")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        da, db = dims
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
    if len(da) != len(db):
        raise RuntimeError(f"both dimension lists should have same length, got {len(da)} and {len(db)}")
    da = [wrap_dim(d, a.ndim) for d in da]
    db = [wrap_dim(d, b.ndim) for d in db]
    for x, y in zip(da, db):
        if a.shape[x] != b.shape[y]:
            raise RuntimeError(f"contracted dimensions need to match, but first has size {a.shape[x]} in dim {x} and "
                               f"second has size {b.shape[y]} in dim {y}")
    if a.dtype is not b.dtype:
        raise RuntimeError("both inputs should have same dtype")
    dev = common_device(a, b)
    out = _wrap(TENSORDOT.kernel(dev.type)(a._data, b._data, da, db), dev)
    record_if_needed(TENSORDOT, (a, b, (tuple(da), tuple(db))), {}, out)
    return out


# --- trace, diag, diagonal, diag_embed --------------------------------------------------------------
TRACE = declare("trace(Tensor input) -> Tensor", category="linalg")


@TRACE.front
def trace(input: Tensor) -> Tensor:
    """Sum of the main diagonal of a 2-D tensor (0-dim; integer inputs give int64)."""
    check_tensor(input, "input", "trace")
    if input.ndim != 2:
        raise RuntimeError(f"trace: expected a matrix, but got tensor with dim {input.ndim}")
    if input.dtype is dt.bool:
        raise RuntimeError("\"trace\" not implemented for 'Bool'")
    out = _wrap(TRACE.kernel(input._device.type)(input._data), input._device)
    record_if_needed(TRACE, (input,), {}, out)
    return out


DIAG = declare("diag(Tensor input, int diagonal=0) -> Tensor", category="linalg")


@DIAG.front
def diag(input: Tensor, diagonal: int = 0) -> Tensor:
    """1-D ``input`` -> the square matrix with it on diagonal ``diagonal``; 2-D -> that diagonal (a copy)."""
    check_tensor(input, "input", "diag")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"diag(): Supports 1D or 2D tensors. Got {input.ndim}D")
    out = _wrap(DIAG.kernel(input._device.type)(input._data, diagonal), input._device)
    record_if_needed(DIAG, (input, diagonal), {}, out)
    return out


def _diag_dims(ndim, dim1, dim2):
    d1, d2 = wrap_dim(dim1, ndim), wrap_dim(dim2, ndim)
    if d1 == d2:
        raise RuntimeError(f"diagonal dimensions cannot be identical {dim1}, {dim2}")
    return d1, d2


DIAGONAL = declare("diagonal(Tensor input, int offset=0, int dim1=0, int dim2=1) -> Tensor",
                   category="linalg", view=True)


@DIAGONAL.front
def diagonal(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """A view of the diagonal ``offset`` of the ``(dim1, dim2)`` planes of ``input``.

    The two dims are removed and the diagonal is appended as the last dimension. Writing into
    the result writes into ``input``.
    """
    check_tensor(input, "input", "diagonal")
    d1, d2 = _diag_dims(input.ndim, dim1, dim2)
    out = _wrap(DIAGONAL.kernel(input._device.type)(input._data, offset, d1, d2), input._device, input._storage)
    out._base = input if input._base is None else input._base
    record_if_needed(DIAGONAL, (input, offset, d1, d2), {}, out)
    return out


DIAG_EMBED = declare("diag_embed(Tensor input, int offset=0, int dim1=-2, int dim2=-1) -> Tensor",
                     category="linalg")


@DIAG_EMBED.front
def diag_embed(input: Tensor, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Tensor:
    """Tensor whose ``(dim1, dim2)`` diagonals ``offset`` hold the last dimension of ``input``.

    The result has ``input.ndim + 1`` dims; the two new ones have size ``input.size(-1) + |offset|``.
    """
    check_tensor(input, "input", "diag_embed")
    d1, d2 = _diag_dims(input.ndim + 1, dim1, dim2)
    a = input._data if input.ndim else input.reshape(1)._data
    out = _wrap(DIAG_EMBED.kernel(input._device.type)(a, offset, d1, d2), input._device)
    record_if_needed(DIAG_EMBED, (input, offset, d1, d2), {}, out)
    return out


# --- composites ------------------------------------------------------------------------------------
CROSS = declare("cross(Tensor input, Tensor other, int? dim=None) -> Tensor", composite=True, category="linalg")


@CROSS.front
def cross(input: Tensor, other: Tensor, dim: int | None = None) -> Tensor:
    """Cross product of 3-vectors along ``dim`` of ``input`` and ``other`` (broadcast together).

    ``dim=None`` takes the first dimension of size 3, as torch.cross does. Shapes: ``(..., 3, ...)``;
    the result has the broadcast shape and the promoted dtype.
    """
    check_tensor(input, "input", "cross")
    check_tensor(other, "other", "cross")
    a, b = broadcast_tensors(input, other)
    if dim is None:
        sizes = tuple(a.shape)
        if 3 not in sizes:
            raise RuntimeError(f"no dimension of size 3 in input of shape {list(input.shape)}")
        dim = sizes.index(3)
    d = wrap_dim(dim, a.dim())
    if a.shape[d] != 3:
        raise RuntimeError(f"linalg.cross: inputs dimension {dim} must have length 3. Got {a.shape[d]} and "
                           f"{b.shape[d]}")
    a1, a2, a3 = a.unbind(d)
    b1, b2, b3 = b.unbind(d)
    return stack([a2 * b3 - a3 * b2, a3 * b1 - a1 * b3, a1 * b2 - a2 * b1], d)


# --- sample inputs (Note [Sample inputs] in _registry) -------------------------------------------------
def _linear_backward_reference(grad_output, input, weight, output_mask):
    """torch's gradients of ``linear(input, weight, bias)`` for ``grad_output`` (its autograd: an independent
    reference), None where ``output_mask`` is False."""
    import torch

    x, w = input.detach().requires_grad_(), weight.detach().requires_grad_()
    b = torch.zeros(weight.shape[0], dtype=weight.dtype, requires_grad=True)
    grads = torch.autograd.grad(torch.nn.functional.linear(x, w, b), (x, w, b), grad_output)
    return tuple(g if m else None for g, m in zip(grads, output_mask))


def _declare_samples():
    from flambeau._ops._registry import OPS
    from flambeau._ops._samples import FLOAT, FLOAT_INT, cases
    from flambeau._ops._samples import SampleInput as S

    def add(name, *builders, dtypes=FLOAT, **meta):
        OPS[name].samples(cases(*builders), dtypes=dtypes, **meta)

    add("matmul", lambda mk, mki: S(mk((3, 4)), mk((4, 2))), lambda mk, mki: S(mk((2, 3, 4)), mk((4,))),
        lambda mk, mki: S(mk((4,)), mk((2, 4, 3))), lambda mk, mki: S(mk((4,)), mk((4,))),
        lambda mk, mki: S(mk((2, 1, 3, 4)), mk((3, 4, 2)), ), dtypes=FLOAT_INT)
    add("mm", lambda mk, mki: S(mk((3, 4)), mk((4, 2))), lambda mk, mki: S(mk((4, 3), noncontiguous=True), mk((3, 2))),
        dtypes=FLOAT_INT)
    add("bmm", lambda mk, mki: S(mk((2, 3, 4)), mk((2, 4, 2))), dtypes=FLOAT_INT)
    add("mv", lambda mk, mki: S(mk((3, 4)), mk((4,))), dtypes=FLOAT_INT)
    add("dot", lambda mk, mki: S(mk((4,)), mk((4,))), dtypes=FLOAT_INT)
    add("vdot", lambda mk, mki: S(mk((4,)), mk((4,))), dtypes=FLOAT_INT)
    add("inner", lambda mk, mki: S(mk((2, 4)), mk((3, 4))), dtypes=FLOAT_INT)
    add("outer", lambda mk, mki: S(mk((3,)), mk((4,))), dtypes=FLOAT_INT)
    add("kron", lambda mk, mki: S(mk((2, 3)), mk((2, 2))), dtypes=FLOAT_INT)
    add("addmm", lambda mk, mki: S(mk((3, 2)), mk((3, 4)), mk((4, 2))),
        lambda mk, mki: S(mk((2,)), mk((3, 4)), mk((4, 2)), beta=0.5, alpha=2), dtypes=FLOAT)
    add("addmv", lambda mk, mki: S(mk((3,)), mk((3, 4)), mk((4,)), beta=0.5, alpha=2), dtypes=FLOAT)
    add("linear", lambda mk, mki: S(mk((3, 4)), mk((2, 4)), mk((2,))),
        lambda mk, mki: S(mk((2, 3, 4)), mk((5, 4))).named("3-d, no bias"),
        lambda mk, mki: S(mk((2, 3, 4), noncontiguous=True), mk((5, 4)), mk((5,))).named("strided"),
        lambda mk, mki: S(mk((3, 4), noncontiguous=True), mk((5, 4))).named("strided matrix"),
        lambda mk, mki: S(mk((3, 4)), mk((5, 4), noncontiguous=True), mk((3, 5))).named("matrix bias"),
        lambda mk, mki: S(mk((2, 0, 4)), mk((3, 4)), mk((3,))).named("empty"), dtypes=FLOAT_INT)
    everything = (True, True, True)
    add("linear_backward", lambda mk, mki: S(mk((3, 5)), mk((3, 4)), mk((5, 4)), everything),
        lambda mk, mki: S(mk((2, 3, 5)), mk((2, 3, 4)), mk((5, 4)), everything).named("3-d"),
        lambda mk, mki: S(mk((2, 3, 5), noncontiguous=True), mk((2, 3, 4), noncontiguous=True),
                          mk((5, 4), noncontiguous=True), everything).named("strided"),
        lambda mk, mki: S(mk((3, 5), noncontiguous=True), mk((3, 4), noncontiguous=True), mk((5, 4)),
                          (True, False, True)).named("strided matrices, no weight"),
        lambda mk, mki: S(mk((2, 3, 5)), mk((2, 3, 4)), mk((5, 4)), (False, True, False)).named("weight only"),
        lambda mk, mki: S(mk((2, 0, 5)), mk((2, 0, 4)), mk((5, 4)), everything).named("no rows"),
        ref=_linear_backward_reference, gradcheck=False)
    add("baddbmm", lambda mk, mki: S(mk((2, 3, 2)), mk((2, 3, 4)), mk((2, 4, 2)), beta=0.5, alpha=2), dtypes=FLOAT)
    add("addbmm", lambda mk, mki: S(mk((3, 2)), mk((2, 3, 4)), mk((2, 4, 2)), beta=0.5, alpha=2), dtypes=FLOAT)
    add("einsum", lambda mk, mki: S("ij,jk->ik", mk((3, 4)), mk((4, 2))), lambda mk, mki: S("bij->bji", mk((2, 3, 4))),
        lambda mk, mki: S("ii->", mk((3, 3))).named("trace"), dtypes=FLOAT,
        xfail={"grad:trace": "einsum('ii->') backward disagrees with finite differences"})
    add("tensordot", lambda mk, mki: S(mk((2, 3, 4)), mk((3, 4, 2))),
        lambda mk, mki: S(mk((2, 3, 4)), mk((4, 3)), ([1, 2], [1, 0])), dtypes=FLOAT)
    add("trace", lambda mk, mki: S(mk((3, 4))), dtypes=FLOAT_INT)
    add("diag", lambda mk, mki: S(mk((4,))), lambda mk, mki: S(mk((3, 4)), 1), lambda mk, mki: S(mk((3,)), -1),
        dtypes=FLOAT_INT)
    add("diagonal", lambda mk, mki: S(mk((3, 4))), lambda mk, mki: S(mk((2, 3, 4)), 1, 0, 2), dtypes=FLOAT_INT)
    add("diag_embed", lambda mk, mki: S(mk((2, 3))), lambda mk, mki: S(mk((2, 3)), 1), dtypes=FLOAT)
    add("cross", lambda mk, mki: S(mk((2, 3)), mk((2, 3)), dim=1), dtypes=FLOAT)

_declare_samples()
