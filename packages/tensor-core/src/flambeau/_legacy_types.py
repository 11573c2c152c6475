"""PyTorch's legacy tensor types: ``FloatTensor``, ``LongTensor`` ... and their ``cuda.`` twins.

Old PyTorch code makes tensors with ``torch.FloatTensor(2, 3)`` (uninitialised, of that shape) or
``torch.LongTensor([1, 2])`` (from data), tests ``isinstance(x, torch.cuda.FloatTensor)`` and
converts with ``x.type(torch.DoubleTensor)`` or ``x.type('torch.LongTensor')``. Here each legacy
type is a class whose metaclass makes those work: calling it is a factory, ``isinstance`` checks
the tensor's dtype and device, and it is never a base of :class:`flambeau.Tensor` (as in torch,
``issubclass(FloatTensor, Tensor)`` is False).

Note [Legacy type names]
    ``Tensor.type()`` returns ``'torch.FloatTensor'``, torch's spelling, not ``'flambeau...'``:
    programs compare it with torch's strings (``x.type() == 'torch.cuda.FloatTensor'``) and pass
    it back to ``.type()``, so the name identifies a *tensor type* that both libraries share, not a
    module. ``.type()`` accepts both spellings (``'torch.LongTensor'``, ``'flambeau.LongTensor'``).
"""

from __future__ import annotations

import numbers

from flambeau import _dtype as dt
from flambeau._device import to_device
from flambeau._factories import empty, tensor
from flambeau._size import Size
from flambeau._tensor import Tensor

__all__ = ["LegacyTensorType", "CPU_TYPES", "CUDA_TYPES", "type_name", "resolve_type"]


class LegacyTensorType(type):
    """The metaclass of the legacy types: ``FloatTensor(2, 3)``, ``isinstance(x, FloatTensor)``."""

    dtype: dt.dtype
    is_cuda: bool

    def __call__(cls, *args, device=None):
        expected = "cuda" if cls.is_cuda else "cpu"
        if device is not None:  # checked before to_device, which would start CUDA for a wrong "cuda"
            given = getattr(device, "type", None) or ("cuda" if isinstance(device, int) else str(device).split(":")[0])
            if given != expected:
                raise RuntimeError(f"legacy constructor expects device type: {expected} but device type: {given} "
                                   "was passed")
        dev = to_device(expected if device is None else device)
        if not args:
            return empty(0, dtype=cls.dtype, device=dev)
        if (len(args) == 1 and isinstance(args[0], Size)) or all(_is_int(a) for a in args):
            shape = tuple(args[0]) if isinstance(args[0], Size) else tuple(int(a) for a in args)
            return empty(shape, dtype=cls.dtype, device=dev)
        if len(args) > 1:
            raise TypeError(f"new(): expected ints (a shape) or one sequence of data, got "
                            f"({', '.join(type(a).__name__ for a in args)})")
        data = args[0]
        if isinstance(data, Tensor):
            if data.dtype is not cls.dtype or data.device.type != dev.type:
                raise TypeError(f"expected {cls.__name__} (dtype {cls.dtype} on {dev.type}), got a tensor of "
                                f"dtype {data.dtype} on {data.device}")
            return data
        if isinstance(data, (int, float, complex, bool)):
            raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
        return tensor(data, dtype=cls.dtype, device=dev)

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.is_cuda == cls.is_cuda and not obj.is_sparse

    def __repr__(cls) -> str:
        return f"<class 'flambeau.{'cuda.' if cls.is_cuda else ''}{cls.__name__}'>"


def _is_int(x) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool)


def _make(dtype: dt.dtype, cuda: bool) -> LegacyTensorType:
    name = f"{dtype.scalar_name}Tensor"
    doc = (f"Legacy type of {'CUDA' if cuda else 'CPU'} {dtype.name} tensors: ``{name}(*sizes)`` is an "
           f"uninitialised tensor of that shape, ``{name}(data)`` a copy of ``data``; "
           f"``isinstance(x, {name})`` checks dtype and device.")
    return LegacyTensorType(name, (), {"__doc__": doc, "__slots__": (), "dtype": dtype, "is_cuda": cuda,
                                       "__module__": "flambeau.cuda" if cuda else "flambeau"})


def _types(cuda: bool) -> dict:
    return {f"{d.scalar_name}Tensor": _make(d, cuda) for d in dt.ALL_DTYPES}


# name -> type: ``FloatTensor``, ``DoubleTensor``, ``HalfTensor``, ``BFloat16Tensor``, ``LongTensor``, ``IntTensor``,
# ``ShortTensor``, ``CharTensor``, ``ByteTensor``, ``BoolTensor``, and the complex ones where the dtypes exist.
CPU_TYPES = _types(False)
CUDA_TYPES = _types(True)


def type_name(dtype: dt.dtype, is_cuda: bool, is_sparse: bool = False) -> str:
    """``'torch.FloatTensor'``, ``'torch.cuda.FloatTensor'``, ``'torch.sparse.FloatTensor'`` (Note [Legacy type
    names])."""
    return f"torch.{'cuda.' if is_cuda else ''}{'sparse.' if is_sparse else ''}{dtype.scalar_name}Tensor"


def resolve_type(spec) -> tuple[dt.dtype, str | None]:
    """``(dtype, device type or None)`` of a ``Tensor.type(...)`` argument: a legacy type, its name
    (``'torch.cuda.LongTensor'``, ``'flambeau.LongTensor'``) or a dtype (device None: unchanged).

    Raises:
        ValueError: an unknown type name (torch's message).
    """
    if isinstance(spec, LegacyTensorType):
        return spec.dtype, "cuda" if spec.is_cuda else "cpu"
    if isinstance(spec, str):
        parts = spec.split(".")
        if len(parts) in (2, 3) and parts[0] in ("torch", "flambeau") and (len(parts) == 2 or parts[1] == "cuda"):
            table = CUDA_TYPES if len(parts) == 3 else CPU_TYPES
            found = table.get(parts[-1])
            if found is not None:
                return found.dtype, "cuda" if found.is_cuda else "cpu"
        raise ValueError(f"invalid type: {spec!r}")
    return dt.to_dtype(spec), None


def _tensor_type(self: Tensor, dtype=None, non_blocking: bool = False, **kwargs):
    """Without arguments, the type name: ``'torch.FloatTensor'``, ``'torch.cuda.LongTensor'`` ... (torch's
    spelling, which programs compare with: Note [Legacy type names] in ``flambeau._legacy_types``).

    With ``dtype`` (a dtype, a legacy type such as ``flambeau.DoubleTensor`` or its name
    ``'torch.DoubleTensor'``): this tensor converted to it (and moved to the CPU or CUDA for a legacy
    type that says so); self when nothing changes.
    """
    if dtype is None:
        return type_name(self.dtype, self.is_cuda, self.is_sparse)
    d, device_type = resolve_type(dtype)
    if d is self.dtype and device_type in (None, self.device.type):
        return self
    if device_type is None or device_type == self.device.type:
        return self.to(d, non_blocking=non_blocking)
    return self.to(device=device_type, dtype=d, non_blocking=non_blocking)


_tensor_type.__name__ = _tensor_type.__qualname__ = "type"
Tensor.type = _tensor_type  # Note [Tensor methods from the layers above] in flambeau._tensor
