"""dtypes and torch's type-promotion rules.

A :class:`dtype` is a small immutable object wrapping the numpy dtype that stores its elements.
Promotion follows torch, not numpy: ``int64 + float32 -> float32`` and Python scalars and 0-dim
tensors take part *weakly* (they can raise the category — bool < integer < floating < complex —
but never the width). See Note [Type promotion].

bfloat16 is stored as ``ml_dtypes.bfloat16`` (numpy has no bfloat16); complex64/complex128 as
numpy's complex types. Note [Compute dtype]: kernels compute float16 and bfloat16 in float32
(``dtype.compute``) and round the result to the storage dtype once per operator, as torch's CPU does.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

__all__ = [
    "dtype", "float16", "bfloat16", "float32", "float64", "complex64", "complex128", "int8", "int16", "int32",
    "int64", "uint8", "bool", "half", "float", "double", "cfloat", "cdouble", "short", "int", "long",
    "real_np", "complex_np", "get_default_dtype", "set_default_dtype", "promote_types", "result_type", "can_cast",
]


class dtype:
    """The element type of a tensor: one of the module-level singletons (``flambeau.float32`` ...).

    Attributes:
        itemsize: bytes per element.
        is_floating_point: True for float16, bfloat16, float32 and float64.
        is_complex: True for complex64 and complex128.
        is_differentiable: True for the floating and complex dtypes, those whose tensors can require
            gradients (torch: "only Tensors of floating point and complex dtype can require gradients").
        is_signed: True for signed integers, floats and complex numbers.
        compute: the dtype kernels compute in (Note [Compute dtype]): float32 for float16 and
            bfloat16, the dtype itself otherwise.
        scalar_name: the scalar-type name torch's error messages use (``Float``, ``Long``, ``Bool``
            ...), so that flambeau's messages read like torch's (``"addmm" not implemented for 'Half'``).
    """

    __slots__ = ("name", "np", "itemsize", "is_floating_point", "is_complex", "is_differentiable", "is_signed",
                 "scalar_name", "compute", "_category", "_rank")

    def __init__(self, name: str, np_dtype, category: int, rank: int, scalar_name: str):
        self.name = name
        self.scalar_name = scalar_name
        self.np = np.dtype(np_dtype)
        self.itemsize = self.np.itemsize
        self.is_floating_point = category == 2
        self.is_complex = category == 3
        self.is_differentiable = category >= 2
        self.is_signed = category >= 2 or (category == 1 and self.np.kind == "i")
        self.compute = self
        self._category = category  # 0 bool, 1 integer, 2 floating, 3 complex
        self._rank = rank

    def to_numpy(self) -> np.dtype:
        """The numpy dtype that stores this dtype's elements."""
        return self.np

    def __repr__(self) -> str:
        return f"flambeau.{self.name}"

    def __reduce__(self):
        return (_from_name, (self.name,))


def _from_name(name: str) -> dtype:
    return _BY_NAME[name]


bool = dtype("bool", np.bool_, 0, 0, "Bool")  # noqa: A001 - torch's name
uint8 = dtype("uint8", np.uint8, 1, 1, "Byte")
int8 = dtype("int8", np.int8, 1, 2, "Char")
int16 = dtype("int16", np.int16, 1, 3, "Short")
int32 = dtype("int32", np.int32, 1, 4, "Int")
int64 = dtype("int64", np.int64, 1, 5, "Long")
float16 = dtype("float16", np.float16, 2, 6, "Half")
bfloat16 = dtype("bfloat16", ml_dtypes.bfloat16, 2, 6, "BFloat16")  # same rank as float16: see promote_types
float32 = dtype("float32", np.float32, 2, 7, "Float")
float64 = dtype("float64", np.float64, 2, 8, "Double")
complex64 = dtype("complex64", np.complex64, 3, 9, "ComplexFloat")
complex128 = dtype("complex128", np.complex128, 3, 10, "ComplexDouble")
float16.compute = bfloat16.compute = float32

half, float, double = float16, float32, float64  # noqa: A001
cfloat, cdouble = complex64, complex128
short, int, long = int16, int32, int64  # noqa: A001

ALL_DTYPES = (bool, uint8, int8, int16, int32, int64, float16, bfloat16, float32, float64, complex64, complex128)
_BY_NAME = {d.name: d for d in ALL_DTYPES}
_BY_NP = {d.np: d for d in ALL_DTYPES}
# numpy dtypes whose kernels compute in a wider dtype (float16, bfloat16: Note [Compute dtype])
LOW_PRECISION_NP = tuple(d.np for d in ALL_DTYPES if d.compute is not d)
FLOAT_NP = (float32.np, float64.np)  # the float dtypes the numba kernels are compiled for
# Strings accepted wherever a dtype is (numpy-style and torch-style spellings).
_ALIASES = {"half": float16, "float": float32, "double": float64, "short": int16, "int": int32,
            "long": int64, "cfloat": complex64, "cdouble": complex128, **_BY_NAME}
# the complex dtype whose real and imaginary parts have a floating dtype, and back
_TO_COMPLEX = {float16: complex64, bfloat16: complex64, float32: complex64, float64: complex128,
               complex64: complex64, complex128: complex128}
_TO_REAL = {complex64: float32, complex128: float64}


def to_complex(d: dtype) -> dtype:
    """The complex dtype holding pairs of ``d`` (float32 -> complex64; float16/bfloat16 -> complex64).

    torch has complex32 for float16; flambeau has none and widens to complex64.
    """
    return _TO_COMPLEX.get(d, complex64)


def to_real(d: dtype) -> dtype:
    """The real dtype of ``d``'s parts (complex64 -> float32); ``d`` itself if it is not complex."""
    return _TO_REAL.get(d, d)


def real_np(np_dtype) -> np.dtype:
    """:func:`to_real` of a numpy dtype (complex64 -> float32; a real dtype itself), for kernels."""
    return to_real(from_numpy_dtype(np_dtype)).np


def complex_np(np_dtype) -> np.dtype:
    """:func:`to_complex` of a numpy dtype (float32 -> complex64; a complex dtype itself), for kernels."""
    return to_complex(from_numpy_dtype(np_dtype)).np


_NP_NAMES: dict = {}  # numpy dtype or scalar type -> numpy's name of it


def np_name(np_dtype) -> str:
    """numpy's name of ``np_dtype`` (``"float32"``), a numpy dtype or scalar type, from a table: numpy's own
    ``dtype.name`` runs Python code (about 2 µs), and kernel launchers ask for it on every call."""
    name = _NP_NAMES.get(np_dtype)
    if name is None:
        name = _NP_NAMES[np_dtype] = np.dtype(np_dtype).name
    return name


def scalar_name(d) -> str:
    """torch's scalar-type name of a flambeau or numpy dtype (``Float`` ...), for error messages."""
    if isinstance(d, dtype):
        return d.scalar_name
    found = _BY_NP.get(np.dtype(d))
    return found.scalar_name if found is not None else np.dtype(d).name


def from_numpy_dtype(np_dtype) -> dtype:
    """The flambeau dtype storing elements of numpy dtype ``np_dtype``; TypeError if none.

    numpy complex64/complex128 give the complex dtypes, ``ml_dtypes.bfloat16`` gives bfloat16.
    """
    try:
        return _BY_NP[np.dtype(np_dtype)]
    except (KeyError, TypeError):
        raise TypeError(
            f"can't convert np.ndarray of type numpy.{np.dtype(np_dtype).type.__name__}. The only supported "
            "types are: "
            "float64, float32, float16, bfloat16, complex64, complex128, int64, int32, int16, int8, uint8, and bool."
        ) from None


def to_dtype(value, argname: str = "dtype") -> dtype:
    """Normalise a dtype argument (flambeau dtype, numpy dtype, Python type or name)."""
    if isinstance(value, dtype):
        return value
    if value is _builtin_float:
        return _default[0]
    if value is _builtin_int:
        return int64
    if value is _builtin_bool:
        return bool
    if value is _builtin_complex:
        return get_default_complex_dtype()
    if isinstance(value, str) and value in _ALIASES:
        return _ALIASES[value]
    try:
        return _BY_NP[np.dtype(value)]
    except (KeyError, TypeError):
        raise TypeError(f"{argname} must be a flambeau dtype, got {value!r}") from None


_builtin_float, _builtin_int, _builtin_bool, _builtin_complex = type(1.0), type(1), type(True), type(1j)

# --- default dtype ----------------------------------------------------------------------------
_default = [float32]


def get_default_dtype() -> dtype:
    """The dtype of floating tensors made from Python floats (float32 unless changed)."""
    return _default[0]


def get_default_complex_dtype() -> dtype:
    """The dtype of complex tensors made from Python complex numbers: complex128 when the default
    dtype is float64, complex64 otherwise (torch would give complex32 for a float16 default)."""
    return complex128 if _default[0] is float64 else complex64


def set_default_dtype(d) -> None:
    """Set the default floating dtype; only floating dtypes are allowed."""
    d = to_dtype(d, "d")
    if not d.is_floating_point:
        raise TypeError(f"only floating-point types are supported as the default type, got {d}")
    _default[0] = d
    _RESULT_CACHE.clear()


# --- promotion --------------------------------------------------------------------------------
# Note [Type promotion]
# torch promotes by *category* (bool < integer < floating < complex) first and by width second,
# and keeps three separate states: tensors with dim > 0, 0-dim tensors, and Python scalars
# ("wrapped numbers"). A lower state only matters when it raises the category of the higher one;
# a complex lower state over a floating higher one keeps the higher one's width (float64 tensor +
# 1j -> complex128, float32 tensor + complex128 0-dim tensor -> complex64). Python floats count as
# the default dtype, Python complex numbers as the default complex dtype, Python ints as int64,
# Python bools as bool. Within integers, uint8 mixed with a signed type widens as numpy does
# (uint8 + int8 -> int16). float16 and bfloat16 have the same rank: mixed, they give float32.

def promote_types(a: dtype, b: dtype) -> dtype:
    """The smallest dtype to which both ``a`` and ``b`` can be promoted (torch's table)."""
    if a is b:
        return a
    ca, cb = a._category, b._category
    if ca == 3 or cb == 3:  # complex wide enough for the other operand's parts
        if ca == 3 and cb == 3:
            return a if a._rank > b._rank else b
        c, other = (a, b) if ca == 3 else (b, a)
        return complex128 if other is float64 else c
    if ca == 2 or cb == 2:
        if ca == 2 and cb == 2:
            if a._rank == b._rank:  # float16 with bfloat16
                return float32
            return a if a._rank > b._rank else b
        return a if ca == 2 else b
    if a is bool:
        return b
    if b is bool:
        return a
    return _BY_NP[np.promote_types(a.np, b.np)]


def _combine_categories(higher: dtype | None, lower: dtype | None) -> dtype | None:
    if higher is None:
        return lower
    if lower is None or lower._category <= higher._category:
        return higher
    if lower._category == 3 and higher._category == 2:
        return to_complex(higher)
    return promote_types(higher, lower)


_RESULT_CACHE: dict = {}


def _combine3(dim_t, zero_t, scalar_t) -> dtype:
    key = (dim_t, zero_t, scalar_t)
    r = _RESULT_CACHE.get(key)
    if r is None:
        r = _combine_categories(dim_t, _combine_categories(zero_t, scalar_t))
        _RESULT_CACHE[key] = r
    return r


def scalar_dtype(value) -> dtype:
    """The dtype a Python scalar takes when it enters promotion."""
    t = type(value)
    if t is _builtin_bool or t is np.bool_:
        return bool
    if t is _builtin_float:
        return _default[0]
    if t is _builtin_int:
        return int64
    if isinstance(value, np.generic):  # numpy scalars behave like the Python number they hold
        kind = value.dtype.kind
        if kind == "f":
            return _default[0]
        if kind in "iu":
            return int64
        if kind == "c":
            return get_default_complex_dtype()
    if t is _builtin_complex or isinstance(value, complex):
        return get_default_complex_dtype()
    raise TypeError(f"expected a Tensor or a number, got {type(value).__name__}")


def result_type(*operands) -> dtype:
    """torch.result_type over tensors and Python scalars, following Note [Type promotion]."""
    dim_t = zero_t = scalar_t = None
    for x in operands:
        d = getattr(x, "dtype", None)
        if isinstance(d, dtype):
            if x.ndim:
                dim_t = d if dim_t is None else promote_types(dim_t, d)
            else:
                zero_t = d if zero_t is None else promote_types(zero_t, d)
        else:
            s = scalar_dtype(x)
            # Wrapped numbers keep only their category; float ones count as the default dtype.
            scalar_t = s if scalar_t is None else promote_types(scalar_t, s)
    return _combine3(dim_t, zero_t, scalar_t)


def can_cast(from_: dtype, to: dtype) -> bool:
    """torch.can_cast: whether an in-place result of ``from_`` may be written into ``to``.

    Casting may not lower the category (complex -> float, float -> integer, or non-bool -> bool).
    """
    return from_._category <= to._category
