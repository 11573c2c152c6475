"""Linear layers: :class:`Identity`, :class:`Linear`, :class:`Bilinear`, :class:`LazyLinear` (as ``torch.nn``)."""

from __future__ import annotations

import math

import flambeau as fl
from flambeau import Tensor
from flambeau.nn import init
from flambeau.nn._functional.basic import bilinear, linear
from flambeau.nn.modules.lazy import LazyModuleMixin
from flambeau.nn.modules.module import Module
from flambeau.nn.parameter import Parameter, UninitializedParameter

__all__ = ["Identity", "Linear", "Bilinear", "LazyLinear"]


class Identity(Module):
    """Return the input unchanged (arguments are accepted and ignored)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()

    def forward(self, input: Tensor) -> Tensor:
        """Return ``input``."""
        return input


class Linear(Module):
    """``y = x @ weight.T + bias``.

    Args:
        in_features: size of each input sample.
        out_features: size of each output sample.
        bias: whether to learn an additive bias.
        device: device of the parameters.
        dtype: dtype of the parameters.

    Shape: input ``(*, in_features)``, output ``(*, out_features)``.

    Attributes:
        weight: ``(out_features, in_features)``, initialised from ``U(-k, k)``, ``k = 1 / sqrt(in_features)``
            (``kaiming_uniform_`` with ``a = sqrt(5)``).
        bias: ``(out_features,)`` from ``U(-k, k)``, or None.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.weight = Parameter(fl.empty((out_features, in_features), device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(fl.empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-draw the weight and bias as at construction."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input: Tensor) -> Tensor:
        """Apply the affine map to the last dimension of ``input``."""
        return linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class Bilinear(Module):
    """``y = x1^T A x2 + b``.

    Args:
        in1_features: size of each first input sample.
        in2_features: size of each second input sample.
        out_features: size of each output sample.
        bias: whether to learn an additive bias.
        device: device of the parameters.
        dtype: dtype of the parameters.

    Shape: inputs ``(*, in1_features)`` and ``(*, in2_features)``, output ``(*, out_features)``.

    Attributes:
        weight: ``(out_features, in1_features, in2_features)`` from ``U(-k, k)``, ``k = 1 / sqrt(in1_features)``.
        bias: ``(out_features,)`` from ``U(-k, k)``, or None.
    """

    def __init__(self, in1_features: int, in2_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.in1_features = in1_features
        self.in2_features = in2_features
        self.out_features = out_features
        self.weight = Parameter(fl.empty((out_features, in1_features, in2_features), device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(fl.empty(out_features, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-draw the weight and bias as at construction."""
        bound = 1 / math.sqrt(self.weight.size(1))
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1: Tensor, input2: Tensor) -> Tensor:
        """Apply the bilinear map."""
        return bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")


class LazyLinear(LazyModuleMixin, Linear):
    """A :class:`Linear` whose ``in_features`` is inferred from the first input (``input.shape[-1]``).

    Until the first forward ``weight`` and ``bias`` are :class:`~flambeau.nn.UninitializedParameter`
    placeholders and ``in_features`` is 0; the first call materializes and initialises them as
    :class:`Linear` does, and the module becomes a :class:`Linear` (see
    :class:`~flambeau.nn.modules.lazy.LazyModuleMixin`).

    Args:
        out_features: size of each output sample.
        bias: whether to learn an additive bias.
        device: device of the parameters.
        dtype: dtype of the parameters.
    """

    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        """Draw the parameters as :class:`Linear` does (once they are materialized)."""
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        """Materialize ``weight`` ``(out_features, input.shape[-1])`` and ``bias``, then draw them."""
        if self.has_uninitialized_params():
            with fl.no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()


class NonDynamicallyQuantizableLinear(Linear):
    """A :class:`Linear` under another name: ``MultiheadAttention.out_proj`` is one in torch (so its ``repr``
    shows this name). Not exported from :mod:`flambeau.nn`, as in torch."""
