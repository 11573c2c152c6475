"""Activation modules (``torch.nn`` names, arguments and ``repr``): thin wrappers over :mod:`flambeau.nn.functional`.

Shape: every module here maps ``(*)`` to ``(*)`` (GLU halves ``dim``); floating inputs.
"""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau.nn import init
from flambeau.nn._functional import activation as F
from flambeau.nn.modules.module import Module
from flambeau.nn.parameter import Parameter

__all__ = ["Threshold", "ReLU", "RReLU", "Hardtanh", "ReLU6", "Sigmoid", "Hardsigmoid", "Tanh", "SiLU", "Mish",
           "Hardswish", "ELU", "CELU", "SELU", "GLU", "GELU", "Hardshrink", "LeakyReLU", "LogSigmoid", "Softplus",
           "Softshrink", "PReLU", "Softsign", "Tanhshrink", "Softmin", "Softmax", "Softmax2d", "LogSoftmax"]


def _ip(inplace: bool, first: bool = False) -> str:
    if not inplace:
        return ""
    return "inplace=True" if first else ", inplace=True"


class _InplaceActivation(Module):
    """An activation whose only option is ``inplace``; a subclass names its functional form.

    ``_show_inplace``: whether the repr prints ``inplace=True`` (torch's Hardsigmoid and Hardswish
    do not).
    """

    _show_inplace = True

    def __init__(self, inplace: bool = False) -> None:
        super().__init__()
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return self._function(input, self.inplace)

    def extra_repr(self) -> str:
        return _ip(self.inplace, True) if self._show_inplace else ""


class Threshold(Module):
    """``x`` where ``x > threshold``, else ``value``.

    Args:
        threshold: the threshold.
        value: the replacement value.
        inplace: overwrite the input.
    """

    def __init__(self, threshold: float, value: float, inplace: bool = False) -> None:
        super().__init__()
        self.threshold = threshold
        self.value = value
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.threshold(input, self.threshold, self.value, self.inplace)

    def extra_repr(self) -> str:
        return f"threshold={self.threshold}, value={self.value}{_ip(self.inplace)}"


class ReLU(_InplaceActivation):
    """``max(x, 0)``.

    Args:
        inplace: overwrite the input.
    """

    _function = staticmethod(F.relu)


class RReLU(Module):
    """Randomized leaky ReLU (random negative slopes from ``U(lower, upper)`` in training).

    Args:
        lower: lower bound of the slope distribution.
        upper: upper bound of the slope distribution.
        inplace: overwrite the input.
    """

    def __init__(self, lower: float = 1.0 / 8, upper: float = 1.0 / 3, inplace: bool = False) -> None:
        super().__init__()
        self.lower = lower
        self.upper = upper
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.rrelu(input, self.lower, self.upper, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"lower={self.lower}, upper={self.upper}{_ip(self.inplace)}"


class Hardtanh(Module):
    """``x`` clamped to ``[min_val, max_val]``.

    Args:
        min_val: the lower bound.
        max_val: the upper bound.
        inplace: overwrite the input.
    """

    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False, min_value=None,
                 max_value=None) -> None:
        super().__init__()
        if min_value is not None:
            min_val = min_value
        if max_value is not None:
            max_val = max_value
        self.min_val = min_val
        self.max_val = max_val
        self.inplace = inplace
        if not self.max_val > self.min_val:
            raise AssertionError("max_val must be greater than min_val")

    def forward(self, input: Tensor) -> Tensor:
        return F.hardtanh(input, self.min_val, self.max_val, self.inplace)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}{_ip(self.inplace)}"


class ReLU6(Hardtanh):
    """``min(max(x, 0), 6)``.

    Args:
        inplace: overwrite the input.
    """

    def __init__(self, inplace: bool = False) -> None:
        super().__init__(0.0, 6.0, inplace)

    def extra_repr(self) -> str:
        return _ip(self.inplace, True)


class Sigmoid(Module):
    """``1 / (1 + exp(-x))``."""

    def forward(self, input: Tensor) -> Tensor:
        return fl.sigmoid(input)


class Hardsigmoid(_InplaceActivation):
    """``relu6(x + 3) / 6``.

    Args:
        inplace: overwrite the input.
    """

    _function = staticmethod(F.hardsigmoid)
    _show_inplace = False


class Tanh(Module):
    """Hyperbolic tangent."""

    def forward(self, input: Tensor) -> Tensor:
        return fl.tanh(input)


class SiLU(_InplaceActivation):
    """``x * sigmoid(x)`` (swish).

    Args:
        inplace: overwrite the input.
    """

    _function = staticmethod(F.silu)


class Mish(_InplaceActivation):
    """``x * tanh(softplus(x))``.

    Args:
        inplace: overwrite the input.
    """

    _function = staticmethod(F.mish)


class Hardswish(_InplaceActivation):
    """``x * relu6(x + 3) / 6``.

    Args:
        inplace: overwrite the input.
    """

    _function = staticmethod(F.hardswish)
    _show_inplace = False


class ELU(Module):
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``.

    Args:
        alpha: the saturation value.
        inplace: overwrite the input.
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.elu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}{_ip(self.inplace)}"


class CELU(Module):
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``.

    Args:
        alpha: the saturation value.
        inplace: overwrite the input.
    """

    def __init__(self, alpha: float = 1.0, inplace: bool = False) -> None:
        super().__init__()
        self.alpha = alpha
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.celu(input, self.alpha, self.inplace)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}{_ip(self.inplace)}"


class SELU(_InplaceActivation):
    """Scaled ELU with fixed constants (self-normalising networks).

    Args:
        inplace: overwrite the input.
    """

    _function = staticmethod(F.selu)


class GLU(Module):
    """Gated linear unit over ``dim``: ``a * sigmoid(b)`` for the halves ``a, b``.

    Args:
        dim: the dimension to split (its size must be even).
    """

    def __init__(self, dim: int = -1) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.glu(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class GELU(Module):
    """``x * Phi(x)``.

    Args:
        approximate: ``'none'`` (exact, with erf) or ``'tanh'``.
    """

    def __init__(self, approximate: str = "none") -> None:
        super().__init__()
        self.approximate = approximate

    def forward(self, input: Tensor) -> Tensor:
        return fl.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class Hardshrink(Module):
    """``x`` where ``|x| > lambd``, else 0.

    Args:
        lambd: the threshold.
    """

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return F.hardshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return f"{self.lambd}"


class LeakyReLU(Module):
    """``x`` where ``x > 0``, else ``negative_slope * x``.

    Args:
        negative_slope: the slope for negative inputs.
        inplace: overwrite the input.
    """

    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False) -> None:
        super().__init__()
        self.negative_slope = negative_slope
        self.inplace = inplace

    def forward(self, input: Tensor) -> Tensor:
        return F.leaky_relu(input, self.negative_slope, self.inplace)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}{_ip(self.inplace)}"


class LogSigmoid(Module):
    """``log(sigmoid(x))``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.logsigmoid(input)


class Softplus(Module):
    """``log(1 + exp(beta * x)) / beta``, linear above ``threshold``.

    Args:
        beta: the sharpness.
        threshold: above ``beta * x > threshold`` the result is ``x``.
    """

    def __init__(self, beta: float = 1.0, threshold: float = 20.0) -> None:
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input: Tensor) -> Tensor:
        return fl.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Softshrink(Module):
    """``x -+ lambd`` where ``|x| > lambd``, else 0.

    Args:
        lambd: the threshold (non-negative).
    """

    def __init__(self, lambd: float = 0.5) -> None:
        super().__init__()
        self.lambd = lambd

    def forward(self, input: Tensor) -> Tensor:
        return F.softshrink(input, self.lambd)

    def extra_repr(self) -> str:
        return str(self.lambd)


class PReLU(Module):
    """``x`` where ``x > 0``, else ``weight * x`` with learnable slopes.

    Args:
        num_parameters: 1 (one slope shared) or the number of channels (dimension 1 of the input).
        init: the initial slope.
        device: device of the weight.
        dtype: dtype of the weight.

    Attributes:
        weight: ``(num_parameters,)``, filled with ``init``.
    """

    def __init__(self, num_parameters: int = 1, init: float = 0.25, device=None, dtype=None) -> None:
        self.num_parameters = num_parameters
        super().__init__()
        self.init = init
        self.weight = Parameter(fl.empty(num_parameters, device=device, dtype=dtype))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Refill the weight with ``init``."""
        init.constant_(self.weight, self.init)

    def forward(self, input: Tensor) -> Tensor:
        return fl.prelu(input, self.weight)

    def extra_repr(self) -> str:
        return f"num_parameters={self.num_parameters}"


class Softsign(Module):
    """``x / (1 + |x|)``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.softsign(input)


class Tanhshrink(Module):
    """``x - tanh(x)``."""

    def forward(self, input: Tensor) -> Tensor:
        return F.tanhshrink(input)


class Softmin(Module):
    """``softmax(-x)`` along ``dim``.

    Args:
        dim: the dimension to normalise over.
    """

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def __setstate__(self, state):
        super().__setstate__(state)
        if not hasattr(self, "dim"):
            self.dim = None

    def forward(self, input: Tensor) -> Tensor:
        return F.softmin(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(Module):
    """``exp(x) / sum(exp(x))`` along ``dim``.

    Args:
        dim: the dimension to normalise over.
    """

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax2d(Module):
    """Softmax over the channels (dimension -3) of ``(N, C, H, W)`` or ``(C, H, W)`` input."""

    def forward(self, input: Tensor) -> Tensor:
        if input.dim() not in (3, 4):
            raise ValueError(f"Softmax2d: expected input to be 3D or 4D, got {input.dim()}D instead")
        return fl.softmax(input, -3)


class LogSoftmax(Module):
    """``x - log(sum(exp(x)))`` along ``dim``.

    Args:
        dim: the dimension to normalise over.
    """

    def __init__(self, dim: int | None = None) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, input: Tensor) -> Tensor:
        return F.log_softmax(input, self.dim, _stacklevel=5)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


# torch's home of MultiheadAttention (``from torch.nn.modules.activation import MultiheadAttention``)
from flambeau.nn.modules.attention import MultiheadAttention  # noqa: E402,F401
