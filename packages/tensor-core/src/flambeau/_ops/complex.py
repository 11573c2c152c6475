"""Operators of complex numbers: ``real``, ``imag``, ``view_as_real``, ``view_as_complex``, ``angle``,
``conj``, ``conj_physical``, ``complex``, ``polar``, ``is_complex``, ``is_conj``, ``resolve_conj``,
``resolve_neg``.

complex64 and complex128 hold pairs of float32 / float64 (real part first, as C and torch store
them), so ``real``, ``imag``, ``view_as_real`` and ``view_as_complex`` are views: new strides and
a new dtype on the same storage, with torch's storage offsets (in elements of the view's dtype).
They run no kernel, on any device. ``angle``, ``conj_physical``, ``complex`` and ``polar`` are
elementwise, with kernels in ``flambeau._kernels.cpu.complex`` and ``flambeau._kernels.cuda.complex``.

Note [Conjugation is a copy]
    torch's ``conj`` returns a lazily conjugated view (a "conj bit" resolved when read).
    flambeau has no such bit: ``conj`` of a complex tensor is a new tensor holding the conjugate
    (as ``conj_physical``), so writes to it do not reach the input; ``is_conj`` is always False
    and ``resolve_conj`` returns its input. Of a real tensor, ``conj`` returns the input itself,
    as torch does.
"""

from __future__ import annotations

from flambeau import _dtype as dt
from flambeau._ops._common import Tensor, _wrap, check_tensor, common_device, record_if_needed, storage_view
from flambeau._ops._registry import declare
from flambeau._ops._samples import SampleInput, make_tensor

__all__ = ["real", "imag", "view_as_real", "view_as_complex", "angle", "conj", "conj_physical", "complex",
           "polar", "is_complex", "is_conj", "resolve_conj", "resolve_neg"]


def _view(input: Tensor, shape: tuple, strides: tuple, offset: int, dtype, op) -> Tensor:
    """:func:`storage_view` of ``input``, recorded as ``op`` for autograd."""
    out = storage_view(input, shape, strides, offset, dtype)
    record_if_needed(op, (input,), {}, out)
    return out


def _parts(input: Tensor, op, imag: bool) -> Tensor:
    """The real (or imaginary) parts of complex ``input``: every other real of its storage."""
    return _view(input, tuple(input.shape), tuple(2 * st for st in input.stride()),
                 2 * input.storage_offset() + imag, dt.to_real(input.dtype), op)


# --- real and imag: views, also the Tensor.real / Tensor.imag properties -----------------------------
REAL = declare("real(Tensor(a) self) -> Tensor(a)", view=True, method=False, category="complex")


@REAL.front
def real(input: Tensor) -> Tensor:
    """The real parts of complex ``input``, as a view (float32 for complex64, float64 for complex128).

    Of a real tensor, the tensor itself (as torch). Also the property ``Tensor.real``.
    """
    check_tensor(input, "input", "real")
    if not input.dtype.is_complex:
        return input
    return _parts(input, REAL, imag=False)


IMAG = declare("imag(Tensor(a) self) -> Tensor(a)", view=True, method=False, category="complex")


@IMAG.front
def imag(input: Tensor) -> Tensor:
    """The imaginary parts of complex ``input``, as a view (float32 for complex64, float64 for complex128).

    RuntimeError for real tensors, as torch. Also the property ``Tensor.imag``.
    """
    check_tensor(input, "input", "imag")
    if not input.dtype.is_complex:
        raise RuntimeError("imag is not implemented for tensors with non-complex dtypes.")
    return _parts(input, IMAG, imag=True)


def _set_part(get):
    def setter(self: Tensor, value) -> None:
        get(self).copy_(value)

    return setter


REAL.dunders["real"] = property(real, _set_part(real), doc="The real parts (a view); assignable, as in torch.")
IMAG.dunders["imag"] = property(imag, _set_part(imag), doc="The imaginary parts (a view); assignable, as in torch.")


# --- view_as_real / view_as_complex ----------------------------------------------------------------
VIEW_AS_REAL = declare("view_as_real(Tensor(a) self) -> Tensor(a)", view=True, method=False, category="complex")


@VIEW_AS_REAL.front
def view_as_real(input: Tensor) -> Tensor:
    """A real view of complex ``input`` of shape ``(*input.shape, 2)``: ``[..., 0]`` the real parts,
    ``[..., 1]`` the imaginary parts (float32 for complex64, float64 for complex128)."""
    check_tensor(input, "input", "view_as_real")
    if not input.dtype.is_complex:
        raise RuntimeError("view_as_real is only supported for complex tensors")
    return _view(input, tuple(input.shape) + (2,), tuple(2 * st for st in input.stride()) + (1,),
                 2 * input.storage_offset(), dt.to_real(input.dtype), VIEW_AS_REAL)


VIEW_AS_COMPLEX = declare("view_as_complex(Tensor(a) self) -> Tensor(a)", view=True, method=False,
                          category="complex")


@VIEW_AS_COMPLEX.front
def view_as_complex(input: Tensor) -> Tensor:
    """A complex view of float32/float64 ``input`` of shape ``(..., 2)`` (real, imaginary pairs):
    shape ``input.shape[:-1]``, complex64 for float32 and complex128 for float64.

    As torch: the last dimension must have size 2 and stride 1, the other strides and the storage
    offset must be even.
    """
    check_tensor(input, "input", "view_as_complex")
    d = input.dtype
    if d not in (dt.float32, dt.float64):
        raise RuntimeError("view_as_complex is only supported for float and double tensors, but got a tensor "
                           f"of scalar type: {d.scalar_name}")
    shape, strides = input.shape, input.stride()
    if not shape or shape[-1] != 2:
        raise RuntimeError("Tensor must have a last dimension of size 2")
    if strides[-1] != 1:
        raise RuntimeError("Tensor must have a last dimension with stride 1")
    if any(s % 2 for s in strides[:-1]):
        raise RuntimeError("Tensor must have a stride divisible by 2 for all but last dimension")
    if input.storage_offset() % 2:
        raise RuntimeError("Tensor must have a storage_offset divisible by 2")
    return _view(input, tuple(shape[:-1]), tuple(st // 2 for st in strides[:-1]), input.storage_offset() // 2,
                 dt.to_complex(d), VIEW_AS_COMPLEX)


def _complex_samples(device, dtype, requires_grad):
    def mk(shape, **kw):
        return make_tensor(shape, device=device, dtype=dtype, requires_grad=requires_grad, **kw)

    yield SampleInput(mk((3, 2))).named("pairs")
    yield SampleInput(mk((2, 3, 2))).named("3-d")


# Complex results are not gradchecked here (finite differences of real outputs only): their gradients
# are compared with torch's in flambeau-autograd's tests/test_complex_grad.py.
VIEW_AS_COMPLEX.samples(_complex_samples, dtypes=("float32", "float64"), gradcheck=False)


# --- elementwise: angle, conj, complex, polar -------------------------------------------------------
ANGLE = declare("angle(Tensor self) -> Tensor", category="complex")


@ANGLE.front
def angle(input: Tensor) -> Tensor:
    """The argument (phase) of each element, in radians in ``[-pi, pi]``: a real tensor.

    Complex inputs give their real dtype; real floating inputs ``pi`` for negative values and 0
    otherwise (NaN stays NaN); integer and bool inputs the default float dtype.
    """
    check_tensor(input, "input", "angle")
    d = input.dtype
    out_d = dt.to_real(d) if d.is_complex else (d if d.is_floating_point else dt.get_default_dtype())
    out = _wrap(ANGLE.kernel(input._device.type)(input._data, out_d), input._device, None, out_d)
    record_if_needed(ANGLE, (input,), {}, out)
    return out


ANGLE.samples(lambda device, dtype, requires_grad: iter([SampleInput(make_tensor(
    (3, 4), device=device, dtype=dtype, requires_grad=requires_grad, exclude_zero=True)).named("2-d")]),
    dtypes=("float32", "float64"), gradcheck=False)  # angle of a real tensor is piecewise constant

CONJ_PHYSICAL = declare("conj_physical(Tensor self) -> Tensor", category="complex")


@CONJ_PHYSICAL.front
def conj_physical(input: Tensor) -> Tensor:
    """The complex conjugate of each element, in a new tensor (a copy of a real ``input``)."""
    check_tensor(input, "input", "conj_physical")
    out = _wrap(CONJ_PHYSICAL.kernel(input._device.type)(input._data), input._device, None, input.dtype)
    record_if_needed(CONJ_PHYSICAL, (input,), {}, out)
    return out


CONJ = declare("conj(Tensor(a) self) -> Tensor(a)", composite=True, category="complex")


@CONJ.front
def conj(input: Tensor) -> Tensor:
    """The complex conjugate of ``input``: a new tensor for complex inputs (Note [Conjugation is a copy]);
    a real ``input`` itself."""
    check_tensor(input, "input", "conj")
    return conj_physical(input) if input.dtype.is_complex else input


def _from_parts(op, a: Tensor, b: Tensor, names: tuple, floats: tuple, kinds: str) -> Tensor:
    """The complex tensor ``op``'s kernel builds from real tensors ``a`` and ``b`` (of one dtype among
    ``floats``, torch's ``kinds`` in the error), broadcast together."""
    check_tensor(a, names[0], op.name)
    check_tensor(b, names[1], op.name)
    d = a.dtype
    if d is not b.dtype or d not in floats:
        raise RuntimeError(f"Expected both inputs to be {kinds} tensors but got {d.scalar_name} and "
                           f"{b.dtype.scalar_name}")
    dev = common_device(a, b)
    c = dt.to_complex(d)
    out = _wrap(op.kernel(dev.type)(a._data, b._data, c), dev, None, c)
    record_if_needed(op, (a, b), {}, out)
    return out


COMPLEX = declare("complex(Tensor real, Tensor imag) -> Tensor", method=False, category="complex")


@COMPLEX.front
def complex(real: Tensor, imag: Tensor) -> Tensor:  # noqa: A001 - torch's name
    """A complex tensor ``real + 1j * imag`` from two float32 (complex64) or float64 (complex128)
    tensors of the same dtype and broadcastable shapes (float16 gives complex64: no complex32)."""
    return _from_parts(COMPLEX, real, imag, ("real", "imag"), (dt.float16, dt.float32, dt.float64),
                       "Half, Float or Double")


POLAR = declare("polar(Tensor abs, Tensor angle) -> Tensor", method=False, category="complex")


@POLAR.front
def polar(abs: Tensor, angle: Tensor) -> Tensor:  # noqa: A002 - torch's argument names
    """The complex tensor ``abs * (cos(angle) + 1j * sin(angle))`` from two float32 or float64 tensors
    of the same dtype and broadcastable shapes (complex64 / complex128)."""
    return _from_parts(POLAR, abs, angle, ("abs", "angle"), (dt.float32, dt.float64), "Float or Double")


def _pair_samples(device, dtype, requires_grad):
    def mk(shape, low=None, **kw):
        return make_tensor(shape, device=device, dtype=dtype, requires_grad=requires_grad, low=low, **kw)

    yield SampleInput(mk((3, 4), low=0.5), mk((3, 4))).named("same shape")
    yield SampleInput(mk((2, 3), low=0.5), mk((3,))).named("broadcast")


COMPLEX.samples(_pair_samples, dtypes=("float32", "float64"), gradcheck=False)
POLAR.samples(_pair_samples, dtypes=("float32", "float64"), gradcheck=False)


# --- predicates and no-op resolutions ---------------------------------------------------------------
def _predicate(name: str, doc: str, value):
    op = declare(f"{name}(Tensor self) -> bool", differentiable=False, composite=True, category="complex")

    @op.front
    def fn(input: Tensor) -> bool:
        check_tensor(input, "input", name)
        return value(input)

    fn.__doc__ = doc
    return fn


is_complex = _predicate("is_complex", "Whether ``input``'s dtype is complex64 or complex128.",
                        lambda t: t.dtype.is_complex)
is_conj = _predicate("is_conj", "Always False: flambeau has no lazily conjugated tensors (Note [Conjugation is "
                                "a copy]).", lambda t: False)


def _identity(name: str, doc: str):
    op = declare(f"{name}(Tensor(a) self) -> Tensor(a)", composite=True, category="complex")

    @op.front
    def fn(input: Tensor) -> Tensor:
        return check_tensor(input, "input", name)

    fn.__doc__ = doc
    return fn


resolve_conj = _identity("resolve_conj", "``input`` itself: flambeau's conjugates are already materialised "
                                         "(Note [Conjugation is a copy]).")
resolve_neg = _identity("resolve_neg", "``input`` itself: flambeau has no lazily negated tensors.")
