"""nn.functional: activations (``relu``, ``gelu``, ``softmax`` ...), with ``inplace=`` where torch has it.

They call flambeau operators (``relu``, ``leaky_relu``, ``elu``, ``hardtanh`` ...), which carry their
own derivatives; the rest (``softsign``, ``tanhshrink``, ``glu``, ``softmin``, ``gumbel_softmax``) are
compositions.
"""

from __future__ import annotations

import warnings

import flambeau as fl
from flambeau import Tensor

__all__ = ["relu", "relu_", "relu6", "leaky_relu", "leaky_relu_", "elu", "elu_", "selu", "selu_", "celu", "celu_",
           "gelu", "silu", "mish", "sigmoid", "tanh", "softmax", "log_softmax", "softmin", "softplus", "hardswish",
           "hardsigmoid", "hardtanh", "hardtanh_", "prelu", "rrelu", "rrelu_", "softsign", "tanhshrink", "glu",
           "logsigmoid", "threshold", "threshold_", "hardshrink", "softshrink", "gumbel_softmax"]

_relu = fl.relu
_leaky = fl.leaky_relu
_hardtanh = fl.hardtanh


def relu(input: Tensor, inplace: bool = False) -> Tensor:
    """``max(x, 0)`` elementwise (in place with ``inplace=True``)."""
    return input.relu_() if inplace else _relu(input)


def relu_(input: Tensor) -> Tensor:
    """In-place :func:`relu`."""
    return input.relu_()


def relu6(input: Tensor, inplace: bool = False) -> Tensor:
    """``min(max(x, 0), 6)`` elementwise."""
    return input.hardtanh_(0.0, 6.0) if inplace else _hardtanh(input, 0.0, 6.0)


def leaky_relu(input: Tensor, negative_slope: float = 0.01, inplace: bool = False) -> Tensor:
    """``x`` where ``x > 0``, else ``negative_slope * x``."""
    return input.leaky_relu_(negative_slope) if inplace else _leaky(input, negative_slope)


def leaky_relu_(input: Tensor, negative_slope: float = 0.01) -> Tensor:
    """In-place :func:`leaky_relu`."""
    return input.leaky_relu_(negative_slope)


def elu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)``."""
    return input.elu_(alpha) if inplace else fl.elu(input, alpha)


def elu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`elu`."""
    return input.elu_(alpha)


def selu(input: Tensor, inplace: bool = False) -> Tensor:
    """``scale * elu(x, alpha)`` with SELU's fixed constants (alpha ~1.6733, scale ~1.0507)."""
    return input.selu_() if inplace else fl.selu(input)


def selu_(input: Tensor) -> Tensor:
    """In-place :func:`selu`."""
    return input.selu_()


def celu(input: Tensor, alpha: float = 1.0, inplace: bool = False) -> Tensor:
    """``max(0, x) + min(0, alpha * (exp(x / alpha) - 1))``."""
    return input.celu_(alpha) if inplace else fl.celu(input, alpha)


def celu_(input: Tensor, alpha: float = 1.0) -> Tensor:
    """In-place :func:`celu`."""
    return input.celu_(alpha)


def gelu(input: Tensor, approximate: str = "none") -> Tensor:
    """``x * Phi(x)`` (``approximate='tanh'``: the tanh approximation)."""
    return fl.gelu(input, approximate=approximate)


def _inplace_via_copy(input: Tensor, fn) -> Tensor:
    """``input`` overwritten with ``fn(input)``: differentiable (the value is computed from a clone)."""
    if input.requires_grad and fl.is_grad_enabled():
        return input.copy_(fn(input.clone()))
    with fl.no_grad():
        return input.copy_(fn(input))


def silu(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * sigmoid(x)``."""
    return _inplace_via_copy(input, fl.silu) if inplace else fl.silu(input)


def mish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * tanh(softplus(x))``."""
    return input.mish_() if inplace else fl.mish(input)


def sigmoid(input: Tensor) -> Tensor:
    """``1 / (1 + exp(-x))``."""
    return fl.sigmoid(input)


def tanh(input: Tensor) -> Tensor:
    """Hyperbolic tangent."""
    return fl.tanh(input)


def _get_softmax_dim(name: str, ndim: int, stacklevel: int) -> int:
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", stacklevel=stacklevel)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``dim`` (computed in ``dtype`` if given)."""
    if dim is None:
        dim = _get_softmax_dim("softmax", input.dim(), _stacklevel)
    return fl.softmax(input, dim, dtype=dtype)


def log_softmax(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """``x - log(sum(exp(x)))`` along ``dim`` (computed in ``dtype`` if given)."""
    if dim is None:
        dim = _get_softmax_dim("log_softmax", input.dim(), _stacklevel)
    return fl.log_softmax(input, dim, dtype=dtype)


def softmin(input: Tensor, dim: int | None = None, _stacklevel: int = 3, dtype=None) -> Tensor:
    """``softmax(-x)`` along ``dim``."""
    if dim is None:
        dim = _get_softmax_dim("softmin", input.dim(), _stacklevel)
    if dtype is not None:
        input = input.to(dtype)
    return fl.softmax(-input, dim)


def gumbel_softmax(logits: Tensor, tau: float = 1.0, hard: bool = False, eps: float = 1e-10, dim: int = -1) -> Tensor:
    """A sample of the Gumbel-softmax (Concrete) distribution over ``dim``, optionally discretised.

    ``y = softmax((logits + g) / tau)`` with ``g = -log(E)``, ``E ~ Exponential(1)`` i.i.d. (Gumbel(0, 1)
    noise; Jang et al., 2016, Maddison et al., 2016). With ``hard=True`` the result is the one-hot
    vector of ``y``'s argmax in the forward pass, while gradients flow as if it were ``y``
    (straight-through: ``one_hot - y.detach() + y``).

    Args:
        logits: ``(*, num_features, *)`` unnormalised log-probabilities.
        tau: positive temperature.
        hard: return one-hot samples (with the straight-through gradient).
        eps: deprecated and unused (a value other than the default warns, as torch).
        dim: the dimension of the categories.

    Returns:
        ``logits``' shape and dtype; each slice along ``dim`` sums to 1.
    """
    if eps != 1e-10:
        warnings.warn("`eps` parameter is deprecated and has no effect.", stacklevel=2)
    gumbels = -fl.empty_like(logits).exponential_().log()
    return _gumbel_softmax_sample(logits, gumbels, tau, hard, dim)


def _gumbel_softmax_sample(logits: Tensor, gumbels: Tensor, tau: float, hard: bool, dim: int) -> Tensor:
    """:func:`gumbel_softmax` for given Gumbel(0, 1) noise ``gumbels`` (``logits``' shape)."""
    y_soft = ((logits + gumbels) / tau).softmax(dim)
    if not hard:
        return y_soft
    index = y_soft.argmax(dim, keepdim=True)
    y_hard = fl.zeros_like(logits).scatter_(dim, index, 1.0)
    return y_hard - y_soft.detach() + y_soft


def softplus(input: Tensor, beta: float = 1.0, threshold: float = 20.0) -> Tensor:
    """``log(1 + exp(beta * x)) / beta``, linear where ``beta * x > threshold``."""
    return fl.softplus(input, beta, threshold)


def hardswish(input: Tensor, inplace: bool = False) -> Tensor:
    """``x * relu6(x + 3) / 6``."""
    return input.hardswish_() if inplace else fl.hardswish(input)


def hardsigmoid(input: Tensor, inplace: bool = False) -> Tensor:
    """``relu6(x + 3) / 6``."""
    return input.hardsigmoid_() if inplace else fl.hardsigmoid(input)


def hardtanh(input: Tensor, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Tensor:
    """``x`` clamped to ``[min_val, max_val]``."""
    return input.hardtanh_(min_val, max_val) if inplace else _hardtanh(input, min_val, max_val)


def hardtanh_(input: Tensor, min_val: float = -1.0, max_val: float = 1.0) -> Tensor:
    """In-place :func:`hardtanh`."""
    return input.hardtanh_(min_val, max_val)


def prelu(input: Tensor, weight: Tensor) -> Tensor:
    """``x`` where ``x > 0``, else ``weight * x`` (``weight``: 1 or ``C`` slopes, channels on dimension 1)."""
    return fl.prelu(input, weight)


def rrelu(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False,
          inplace: bool = False) -> Tensor:
    """Randomized leaky ReLU: negative inputs are scaled by ``U(lower, upper)`` draws in training,
    by ``(lower + upper) / 2`` in evaluation."""
    if lower > upper:
        raise RuntimeError("Lower bound should be less than or equal to the upper bound")
    if not training:
        return leaky_relu(input, (lower + upper) / 2, inplace)
    slopes = fl.empty(input.shape, dtype=input.dtype, device=input.device).uniform_(lower, upper)
    factor = fl.where(input >= 0, fl.ones_like(slopes), slopes)
    return input.mul_(factor) if inplace else input * factor


def rrelu_(input: Tensor, lower: float = 1.0 / 8, upper: float = 1.0 / 3, training: bool = False) -> Tensor:
    """In-place :func:`rrelu`."""
    return rrelu(input, lower, upper, training, True)


def softsign(input: Tensor) -> Tensor:
    """``x / (1 + |x|)``."""
    return input / (input.abs() + 1)


def tanhshrink(input: Tensor) -> Tensor:
    """``x - tanh(x)``."""
    return input - input.tanh()


def glu(input: Tensor, dim: int = -1) -> Tensor:
    """Gated linear unit: ``a * sigmoid(b)`` where ``a, b`` are the halves of ``input`` along ``dim``."""
    if input.dim() == 0:
        raise RuntimeError("glu does not support scalars because halving size must be even")
    d = dim % input.dim() if -input.dim() <= dim < input.dim() else dim
    n = input.shape[d]
    if n % 2:
        raise RuntimeError(f"Halving dimension must be even, but dimension {d} is size {n}")
    a, b = input.chunk(2, d)
    return a * b.sigmoid()


def logsigmoid(input: Tensor) -> Tensor:
    """``log(sigmoid(x))``, computed stably."""
    return fl.log_sigmoid(input)


def threshold(input: Tensor, threshold: float, value: float, inplace: bool = False) -> Tensor:
    """``x`` where ``x > threshold``, else ``value``."""
    return input.threshold_(threshold, value) if inplace else fl.threshold(input, threshold, value)


def threshold_(input: Tensor, threshold: float, value: float) -> Tensor:
    """In-place :func:`threshold`."""
    return input.threshold_(threshold, value)


def hardshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x`` where ``|x| > lambd``, else 0."""
    return fl.hardshrink(input, lambd)


def softshrink(input: Tensor, lambd: float = 0.5) -> Tensor:
    """``x -+ lambd`` where ``|x| > lambd``, else 0."""
    return fl.softshrink(input, lambd)
