"""Devices: where a tensor's storage lives (``cpu`` or ``cuda:N``)."""

from __future__ import annotations

__all__ = ["device"]

_DEVICE_TYPES = ("cpu", "cuda")

# Note [The current device of a type]
# ``device('cuda')`` names "the current CUDA device", which :func:`to_device` resolves to an index by asking
# the function that the device type's package registers here: flambeau.cuda registers its ``current_device``
# (which raises "CUDA is not available" without CUDA) when it is imported, as ``import flambeau`` does. Every
# layer imports this module, so it never imports a device's package back.
_current_index: dict = {}


def register_current_index(device_type: str, current_index) -> None:
    """Say how to find the calling thread's current device of ``device_type`` (a function returning its index)."""
    if device_type not in _DEVICE_TYPES or device_type == "cpu":
        raise ValueError(f"register_current_index: expected a device type with indices, got {device_type!r}")
    _current_index[device_type] = current_index


class device:
    """A device: ``device('cpu')``, ``device('cuda')``, ``device('cuda:1')`` or ``device('cuda', 1)``.

    Devices are interned, so ``is`` comparison works for devices made from the same spec.
    ``type`` is ``'cpu'`` or ``'cuda'``; ``index`` is None (the current device) or an int.
    """

    __slots__ = ("type", "index")
    _cache: dict = {}

    def __new__(cls, type_or_spec, index: int | None = None):
        if isinstance(type_or_spec, device):
            if index is not None:
                raise TypeError("device(): index must not be given with a device object")
            return type_or_spec
        key = (type_or_spec, index)
        d = cls._cache.get(key)
        if d is not None:
            return d
        if not isinstance(type_or_spec, str):
            raise TypeError(f"device(): expected a string such as 'cpu' or 'cuda:0', got {type_or_spec!r}")
        kind, sep, idx = type_or_spec.partition(":")
        if kind not in _DEVICE_TYPES:
            raise RuntimeError(
                f"Expected one of {', '.join(_DEVICE_TYPES)} device type at start of device string: {type_or_spec}"
            )
        if sep:
            if index is not None:
                raise RuntimeError(f"device(): index given twice, in {type_or_spec!r} and as index={index}")
            if not idx.isdigit():
                raise RuntimeError(f"Invalid device string: {type_or_spec!r}")
            index = int(idx)
        if index is not None:
            if not isinstance(index, int) or index < 0:
                raise RuntimeError(f"Device index must not be negative, got {index!r}")
            if kind == "cpu" and index != 0:
                raise RuntimeError(f"CPU device index must be 0 or absent, got {index}")
        d = object.__new__(cls)
        d.type = kind
        d.index = index
        # Intern under the normalised key too, so device('cuda:0') is device('cuda', 0).
        d = cls._cache.setdefault((kind, index), d)
        cls._cache[key] = d
        return d

    def __repr__(self) -> str:
        if self.index is None:
            return f"device(type='{self.type}')"
        return f"device(type='{self.type}', index={self.index})"

    def __str__(self) -> str:
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __eq__(self, other) -> bool:
        if isinstance(other, str):
            try:
                other = device(other)
            except (RuntimeError, TypeError):
                return False
        return self is other

    def __hash__(self) -> int:
        return hash((self.type, self.index))

    def __reduce__(self):
        return (device, (self.type, self.index))

    def __enter__(self):
        """``with flambeau.device("cuda"):``: the factories create tensors on this device inside the block (as
        :func:`flambeau.set_default_device` would), the previous default restored at its end, as torch's."""
        from flambeau._default_device import enter_default

        enter_default(self)
        return self

    def __exit__(self, *exc):
        from flambeau._default_device import exit_default

        exit_default()
        return False


CPU = device("cpu")


def to_device(value, argname: str = "device") -> device:
    """Normalise a device argument (device, string or CUDA ordinal) to a concrete device.

    ``'cuda'`` without an index becomes the current CUDA device.
    """
    if value.__class__ is device:
        d = value
    elif isinstance(value, int) and not isinstance(value, bool):
        d = device("cuda", value)
    elif isinstance(value, str):
        d = device(value)
    else:
        raise TypeError(f"{argname} must be a flambeau.device, a string or an int, got {type(value).__name__}")
    if d.type == "cuda" and d.index is None:
        d = device("cuda", _current_index["cuda"]())
    return d
