"""The default device of the factories: ``torch.set_default_device`` / ``torch.get_default_device``.

A leaf module (it imports only ``flambeau._device``) so that the factories can read :data:`DEFAULT`
without an import cycle. A factory called without ``device=`` creates its tensor on ``DEFAULT[0]``
(the CPU unless :func:`set_default_device` changed it), as torch's factories do.
"""

from __future__ import annotations

from flambeau._device import CPU, device, to_device

__all__ = ["get_default_device", "set_default_device"]

DEFAULT = [CPU]  # a one-element list: the factories read DEFAULT[0]


def get_default_device() -> device:
    """The device factories create tensors on when not given ``device=`` (``cpu`` by default)."""
    return DEFAULT[0]


def set_default_device(device) -> None:
    """Make the factories create tensors on ``device`` when not given one; ``None`` resets it to the CPU.

    Accepts what ``flambeau.device`` accepts (``"cuda"``, ``"cuda:1"``, a device, an ordinal).
    """
    DEFAULT[0] = CPU if device is None else to_device(device)


_ENTERED: list = []  # the defaults that ``with device(...)`` blocks replaced, innermost last


def enter_default(dev: device) -> None:
    """Start a ``with device(...)`` block: ``dev`` is the default until :func:`exit_default`."""
    _ENTERED.append(DEFAULT[0])
    DEFAULT[0] = to_device(dev)  # ("cuda" becomes the current CUDA device, as set_default_device does)


def exit_default() -> None:
    """End the innermost ``with device(...)`` block: the default it replaced is back."""
    DEFAULT[0] = _ENTERED.pop()
