"""Padding layers (as ``torch.nn.modules.padding``): constant, zero, reflection, replication and circular
padding of the last 1, 2 or 3 dimensions.

Each layer stores ``padding`` as a tuple ``(left, right[, top, bottom[, front, back]])`` (an int is
repeated) and its ``forward`` is one call to :func:`~flambeau.nn.functional.pad`, whose operator
carries the gradient (a border element's gradient is summed back onto the element it copies).
"""

from __future__ import annotations

from flambeau import Tensor
from flambeau.nn._functional.basic import pad
from flambeau.nn.modules.module import Module

__all__ = ["CircularPad1d", "CircularPad2d", "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d",
           "ReflectionPad1d", "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d"]


def _ntuple(padding, n: int) -> tuple:
    # As torch's _ntuple: a sequence is taken as given (F.pad checks its length), a scalar repeated.
    if isinstance(padding, (tuple, list)):
        return tuple(padding)
    return (padding,) * n


class _PadNd(Module):
    """Shared parts: ``padding`` (``2 * _dims`` numbers) and the mode given to ``F.pad``."""

    _dims = 1
    _mode = "constant"

    def __init__(self, padding) -> None:
        super().__init__()
        self.padding = _ntuple(padding, 2 * self._dims)

    def forward(self, input: Tensor) -> Tensor:
        """Pad ``input``."""
        return pad(input, self.padding, self._mode)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value: float) -> None:
        super().__init__(padding)
        self.value = value

    def forward(self, input: Tensor) -> Tensor:
        """Pad ``input`` with ``value``."""
        return pad(input, self.padding, "constant", self.value)

    def extra_repr(self) -> str:
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    """Pad the last dimension of the input with ``value``.

    Args:
        padding: an int (all sides) or ``(left, right)``; negative values crop.
        value: the fill value.

    Shape: ``(C, W_in)`` or ``(N, C, W_in)`` to ``W_out = W_in + left + right``.
    """

    _dims = 1


class ConstantPad2d(_ConstantPadNd):
    """Pad the last 2 dimensions of the input with ``value``.

    Args:
        padding: an int (all sides) or ``(left, right, top, bottom)``; negative values crop.
        value: the fill value.

    Shape: ``(C, H_in, W_in)`` or ``(N, C, H_in, W_in)`` to ``H_out = H_in + top + bottom``,
    ``W_out = W_in + left + right``.
    """

    _dims = 2


class ConstantPad3d(_ConstantPadNd):
    """Pad the last 3 dimensions of the input with ``value``.

    Args:
        padding: an int (all sides) or ``(left, right, top, bottom, front, back)``; negative values crop.
        value: the fill value.

    Shape: ``(C, D_in, H_in, W_in)`` or ``(N, C, D_in, H_in, W_in)`` to ``D_out = D_in + front + back``,
    ``H_out = H_in + top + bottom``, ``W_out = W_in + left + right``.
    """

    _dims = 3


class ZeroPad1d(ConstantPad1d):
    """Pad the last dimension of the input with zeros.

    Args:
        padding: an int (all sides) or ``(left, right)``; negative values crop.

    Shape: ``(C, W_in)`` or ``(N, C, W_in)`` to ``W_out = W_in + left + right``.
    """

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad2d(ConstantPad2d):
    """Pad the last 2 dimensions of the input with zeros.

    Args:
        padding: an int (all sides) or ``(left, right, top, bottom)``; negative values crop.

    Shape: ``(C, H_in, W_in)`` or ``(N, C, H_in, W_in)`` to ``H_out = H_in + top + bottom``,
    ``W_out = W_in + left + right``.
    """

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ZeroPad3d(ConstantPad3d):
    """Pad the last 3 dimensions of the input with zeros.

    Args:
        padding: an int (all sides) or ``(left, right, top, bottom, front, back)``; negative values crop.

    Shape: ``(C, D_in, H_in, W_in)`` or ``(N, C, D_in, H_in, W_in)`` to ``D_out = D_in + front + back``,
    ``H_out = H_in + top + bottom``, ``W_out = W_in + left + right``.
    """

    def __init__(self, padding) -> None:
        super().__init__(padding, 0.0)

    def extra_repr(self) -> str:
        return f"{self.padding}"


class ReflectionPad1d(_PadNd):
    """Pad the last dimension of the input with its reflection at the borders (the border element not repeated).

    Args:
        padding: an int (all sides) or ``(left, right)``; each pad smaller than its dimension.

    Shape: ``(C, W_in)`` or ``(N, C, W_in)`` to ``W_out = W_in + left + right``.
    """

    _dims, _mode = 1, "reflect"


class ReflectionPad2d(_PadNd):
    """Pad the last 2 dimensions of the input with its reflection at the borders (the border element not repeated).

    Args:
        padding: an int (all sides) or ``(left, right, top, bottom)``; each pad smaller than its dimension.

    Shape: ``(C, H_in, W_in)`` or ``(N, C, H_in, W_in)`` to ``H_out = H_in + top + bottom``,
    ``W_out = W_in + left + right``.
    """

    _dims, _mode = 2, "reflect"


class ReflectionPad3d(_PadNd):
    """Pad the last 3 dimensions of the input with its reflection at the borders (the border element not repeated).

    Args:
        padding: an int (all sides) or ``(left, right, top, bottom, front, back)``; each pad smaller than its dimension.

    Shape: ``(C, D_in, H_in, W_in)`` or ``(N, C, D_in, H_in, W_in)`` to ``D_out = D_in + front + back``,
    ``H_out = H_in + top + bottom``, ``W_out = W_in + left + right``.
    """

    _dims, _mode = 3, "reflect"


class ReplicationPad1d(_PadNd):
    """Pad the last dimension of the input by repeating its border elements.

    Args:
        padding: an int (all sides) or ``(left, right)``.

    Shape: ``(C, W_in)`` or ``(N, C, W_in)`` to ``W_out = W_in + left + right``.
    """

    _dims, _mode = 1, "replicate"


class ReplicationPad2d(_PadNd):
    """Pad the last 2 dimensions of the input by repeating its border elements.

    Args:
        padding: an int (all sides) or ``(left, right, top, bottom)``.

    Shape: ``(C, H_in, W_in)`` or ``(N, C, H_in, W_in)`` to ``H_out = H_in + top + bottom``,
    ``W_out = W_in + left + right``.
    """

    _dims, _mode = 2, "replicate"


class ReplicationPad3d(_PadNd):
    """Pad the last 3 dimensions of the input by repeating its border elements.

    Args:
        padding: an int (all sides) or ``(left, right, top, bottom, front, back)``.

    Shape: ``(C, D_in, H_in, W_in)`` or ``(N, C, D_in, H_in, W_in)`` to ``D_out = D_in + front + back``,
    ``H_out = H_in + top + bottom``, ``W_out = W_in + left + right``.
    """

    _dims, _mode = 3, "replicate"


class _CircularPadNd(_PadNd):
    _mode = "circular"

    def forward(self, input: Tensor) -> Tensor:
        """Pad ``input`` circularly."""
        if input.dim() not in (self._dims + 1, self._dims + 2):
            raise ValueError(f"expected {self._dims + 1}D or {self._dims + 2}D input (got {input.dim()}D input)")
        return pad(input, self.padding, "circular")


class CircularPad1d(_CircularPadNd):
    """Pad the last dimension of the input circularly: the far side's elements wrap around.

    Args:
        padding: an int (all sides) or ``(left, right)``; each pad at most its dimension.

    Shape: ``(C, W_in)`` or ``(N, C, W_in)`` to ``W_out = W_in + left + right``.
    """

    _dims = 1


class CircularPad2d(_CircularPadNd):
    """Pad the last 2 dimensions of the input circularly: the far side's elements wrap around.

    Args:
        padding: an int (all sides) or ``(left, right, top, bottom)``; each pad at most its dimension.

    Shape: ``(C, H_in, W_in)`` or ``(N, C, H_in, W_in)`` to ``H_out = H_in + top + bottom``,
    ``W_out = W_in + left + right``.
    """

    _dims = 2


class CircularPad3d(_CircularPadNd):
    """Pad the last 3 dimensions of the input circularly: the far side's elements wrap around.

    Args:
        padding: an int (all sides) or ``(left, right, top, bottom, front, back)``; each pad at most its dimension.

    Shape: ``(C, D_in, H_in, W_in)`` or ``(N, C, D_in, H_in, W_in)`` to ``D_out = D_in + front + back``,
    ``H_out = H_in + top + bottom``, ``W_out = W_in + left + right``.
    """

    _dims = 3
