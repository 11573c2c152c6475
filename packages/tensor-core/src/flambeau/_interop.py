"""Interoperability: zero-copy exchange of tensors with other array libraries through DLPack.

``from_dlpack(obj)`` imports any object implementing the DLPack protocol (``__dlpack__`` and
``__dlpack_device__``: numpy arrays, torch tensors, flambeau tensors ...) or a legacy DLPack
capsule; the export side is ``Tensor.__dlpack__`` / ``Tensor.__dlpack_device__`` in ``_tensor.py``,
so ``np.from_dlpack(t)`` and ``torch.from_dlpack(t)`` share memory with a CPU flambeau tensor.
``to_dlpack(t)`` returns the capsule itself, for APIs that still take one.

On CPU the import goes through ``np.from_dlpack`` and :func:`flambeau.from_numpy`, so the
result views the producer's memory (and keeps the producer alive). CUDA exchange is not
supported yet: it raises a ``BufferError`` that says so (``__cuda_array_interface__`` works).
"""

from __future__ import annotations

import numpy as np

from flambeau._tensor import Tensor

__all__ = ["from_dlpack", "to_dlpack"]

_CPU, _CUDA, _CUDA_HOST = 1, 2, 3
_DEVICE_NAMES = {1: "CPU", 2: "CUDA", 3: "CUDA host", 4: "OpenCL", 7: "Vulkan", 8: "Metal", 9: "VPI",
                 10: "ROCm", 11: "ROCm host", 13: "CUDA managed", 14: "oneAPI"}


class _Capsule:
    """Presents a legacy DLPack capsule (a CPU one) through the protocol ``np.from_dlpack`` expects."""

    def __init__(self, capsule):
        self.capsule = capsule

    def __dlpack__(self, **kwargs):
        return self.capsule

    def __dlpack_device__(self):
        return (_CPU, 0)


def from_dlpack(ext_tensor) -> Tensor:
    """A tensor sharing memory with ``ext_tensor`` (no copy), through the DLPack protocol.

    Args:
        ext_tensor: an object with ``__dlpack__`` and ``__dlpack_device__`` (a numpy array, a
            torch tensor, a flambeau tensor ...) or a DLPack capsule (consumed: a capsule can be
            imported once).

    Returns:
        A CPU tensor with the producer's shape, strides and dtype (float16/32/64, complex64/128,
        int8/16/32/64, uint8 or bool; not bfloat16, which numpy's DLPack import does not know);
        writes are seen on both sides.

    Raises:
        BufferError: the data is not in CPU memory (CUDA import is not supported yet).
        TypeError: ``ext_tensor`` does not speak DLPack, or its dtype has no flambeau dtype.
    """
    from flambeau._factories import from_numpy

    capsule = type(ext_tensor).__name__ == "PyCapsule"
    if capsule:
        ext_tensor = _Capsule(ext_tensor)
    elif not hasattr(ext_tensor, "__dlpack__"):
        raise TypeError(f"from_dlpack(): expected an object implementing __dlpack__ (a DLPack producer such as "
                        f"a numpy array or a torch tensor) or a DLPack capsule, got {type(ext_tensor).__name__}")
    if hasattr(ext_tensor, "__dlpack_device__"):
        dev_type, dev_id = ext_tensor.__dlpack_device__()
        if int(dev_type) != _CPU:
            name = _DEVICE_NAMES.get(int(dev_type), f"type {int(dev_type)}")
            raise BufferError(
                f"from_dlpack(): only CPU data can be imported for now, got data on a {name} device "
                f"(index {dev_id}); for CUDA arrays use __cuda_array_interface__ or copy to the host first"
            )
    try:
        arr = np.from_dlpack(ext_tensor)
    except (BufferError, TypeError, RuntimeError) as e:
        raise type(e)(f"from_dlpack(): could not import {type(ext_tensor).__name__} through DLPack: {e}") from None
    if capsule and not arr.flags.writeable:
        arr = _writable_view(arr)
    try:
        return from_numpy(arr)
    except TypeError as e:
        raise TypeError(f"from_dlpack(): unsupported dtype: {e}") from None


class _Interface:
    """Holds an ``__array_interface__`` (and the array owning the memory, to keep it alive)."""

    def __init__(self, interface: dict, owner: np.ndarray):
        self.__array_interface__ = interface
        self.owner = owner


def _writable_view(arr: np.ndarray) -> np.ndarray:
    """A writable view of ``arr``'s memory.

    numpy marks arrays imported from legacy (unversioned) capsules read-only, since such capsules
    cannot say whether the producer allows writes; torch treats that memory as writable, and so do we.
    """
    iface = dict(arr.__array_interface__)
    iface["data"] = (iface["data"][0], False)
    return np.asarray(_Interface(iface, arr))


def to_dlpack(tensor: Tensor):
    """A DLPack capsule viewing the memory of CPU ``tensor`` (consumed by ``from_dlpack`` elsewhere).

    Prefer passing the tensor itself to the consumer's ``from_dlpack``: it calls
    ``tensor.__dlpack__()`` for you.
    """
    if not isinstance(tensor, Tensor):
        raise TypeError(f"to_dlpack(): argument 'tensor' must be Tensor, not {type(tensor).__name__}")
    return tensor.__dlpack__()
