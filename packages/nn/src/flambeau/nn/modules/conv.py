"""Convolution layers: :class:`Conv1d`, :class:`Conv2d`, :class:`Conv3d`, :class:`ConvTranspose1d`,
:class:`ConvTranspose2d`, :class:`ConvTranspose3d`, and their lazy forms (:class:`LazyConv1d` ...).

As in ``torch.nn.modules.conv``: one base class holds the hyperparameters, the weight
``(out, in / groups, *kernel)`` (``(in, out / groups, *kernel)`` when transposed) and the bias, drawn
by ``reset_parameters`` like torch (``kaiming_uniform_`` with ``a = sqrt(5)``, bias from
``U(-1/sqrt(fan_in), 1/sqrt(fan_in))``); each layer's ``forward`` is one call into
``nn.functional``. Non-zero ``padding_mode`` pads explicitly with ``F.pad`` first.
"""

from __future__ import annotations

import math

import flambeau as fl
from flambeau import Tensor
from flambeau.nn import init
from flambeau.nn._functional.basic import pad as _pad
from flambeau.nn._functional.basic_more import conv_transpose3d
from flambeau.nn._functional.conv import conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d
from flambeau.nn.modules.lazy import LazyModuleMixin
from flambeau.nn.modules.module import Module
from flambeau.nn.parameter import Parameter, UninitializedParameter

__all__ = ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d", "LazyConv1d",
           "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d", "LazyConvTranspose2d", "LazyConvTranspose3d"]

_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


def _ntuple(value, n: int) -> tuple:
    if isinstance(value, (tuple, list)):
        return tuple(value)
    return (value,) * n


class _ConvNd(Module):
    """Shared parts of the convolution layers (hyperparameters, parameters, init, repr)."""

    _dims = 2

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride, padding, dilation,
                 transposed: bool, output_padding, groups: int, bias: bool, padding_mode: str,
                 device=None, dtype=None) -> None:
        super().__init__()
        n = self._dims
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        kernel_size, stride, dilation = _ntuple(kernel_size, n), _ntuple(stride, n), _ntuple(dilation, n)
        if isinstance(padding, str):
            if padding not in ("same", "valid"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of {{'valid', 'same'}}")
            if padding == "same" and any(s != 1 for s in stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
        else:
            padding = _ntuple(padding, n)
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {_PADDING_MODES}, but got padding_mode='{padding_mode}'")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = kernel_size
        self.stride = stride
        self.padding = padding
        self.dilation = dilation
        self.transposed = transposed
        self.output_padding = _ntuple(output_padding, n)
        self.groups = groups
        self.padding_mode = padding_mode
        # F.pad takes the last dimension first: (left, right, top, bottom).
        if isinstance(padding, str):
            self._reversed_padding_repeated_twice = [0, 0] * n
            if padding == "same":
                for d, k, i in zip(dilation, kernel_size, range(n - 1, -1, -1)):
                    total = d * (k - 1)
                    self._reversed_padding_repeated_twice[2 * i] = total // 2
                    self._reversed_padding_repeated_twice[2 * i + 1] = total - total // 2
        else:
            self._reversed_padding_repeated_twice = [p for p in reversed(padding) for _ in range(2)]
        shape = (in_channels, out_channels // groups) if transposed else (out_channels, in_channels // groups)
        self.weight = Parameter(fl.empty(shape + kernel_size, device=device, dtype=dtype))
        if bias:
            self.bias = Parameter(fl.empty(out_channels, device=device, dtype=dtype))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Re-draw weight and bias as torch does.

        The weight from ``kaiming_uniform_(a=sqrt(5))``, the bias from ``U(-b, b)``, ``b = 1/sqrt(fan_in)``.
        """
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in, _ = init._calculate_fan_in_and_fan_out(self.weight)
            if fan_in != 0:
                bound = 1 / math.sqrt(fan_in)
                init.uniform_(self.bias, -bound, bound)

    def extra_repr(self) -> str:
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        n = self._dims
        if isinstance(self.padding, str):
            s += f", padding={self.padding}"
        elif self.padding != (0,) * n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s

    def _conv_forward(self, input: Tensor, weight: Tensor, bias, conv) -> Tensor:
        if self.padding_mode != "zeros":
            return conv(_pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode), weight, bias,
                        self.stride, 0, self.dilation, self.groups)
        return conv(input, weight, bias, self.stride, self.padding, self.dilation, self.groups)


class _ConvLayerNd(_ConvNd):
    """The regular (not transposed) convolution layers: ``forward`` is ``_conv_fn`` of the input."""

    _conv_fn = staticmethod(conv2d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, False, 0, groups, bias,
                         padding_mode, device, dtype)

    def forward(self, input: Tensor) -> Tensor:
        """Convolve ``input`` with the layer's weight."""
        return self._conv_forward(input, self.weight, self.bias, self._conv_fn)


class Conv1d(_ConvLayerNd):
    """1-D convolution over ``(N, C_in, L)`` inputs: ``out = bias + sum_k weight[:, k] * input[k]`` (cross-correlation).

    Args:
        in_channels: channels of the input.
        out_channels: channels produced.
        kernel_size: size of the kernel.
        stride: stride of the convolution.
        padding: int, tuple, ``"valid"`` or ``"same"``.
        dilation: spacing between kernel elements.
        groups: blocked connections from input to output channels.
        bias: whether to learn an additive bias.
        padding_mode: ``"zeros"``, ``"reflect"``, ``"replicate"`` or ``"circular"``.
        device: device of the parameters.
        dtype: dtype of the parameters.

    Shape: input ``(N, C_in, L)`` or ``(C_in, L)``; output ``(N, C_out, L_out)`` with
    ``L_out = (L + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1``.

    Attributes:
        weight: ``(out_channels, in_channels / groups, kernel_size)``.
        bias: ``(out_channels,)`` or None.
    """

    _dims = 1
    _conv_fn = staticmethod(conv1d)


class Conv2d(_ConvLayerNd):
    """2-D convolution over ``(N, C_in, H, W)`` inputs (cross-correlation, as in torch).

    Args:
        in_channels: channels of the input.
        out_channels: channels produced.
        kernel_size: int or pair.
        stride: int or pair.
        padding: int, pair, ``"valid"`` or ``"same"``.
        dilation: int or pair, spacing between kernel elements.
        groups: blocked connections; ``groups == in_channels`` is a depthwise convolution.
        bias: whether to learn an additive bias.
        padding_mode: ``"zeros"``, ``"reflect"``, ``"replicate"`` or ``"circular"``.
        device: device of the parameters.
        dtype: dtype of the parameters.

    Shape: input ``(N, C_in, H, W)`` or ``(C_in, H, W)``; output ``(N, C_out, H_out, W_out)`` with
    ``H_out = (H + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1`` (likewise ``W_out``).

    Attributes:
        weight: ``(out_channels, in_channels / groups, kH, kW)``.
        bias: ``(out_channels,)`` or None.
    """

    _dims = 2
    _conv_fn = staticmethod(conv2d)


class Conv3d(_ConvLayerNd):
    """3-D convolution over ``(N, C_in, D, H, W)`` inputs (cross-correlation, as in torch).

    Computed as one 2-D convolution over the gathered depth taps (see :func:`~flambeau.nn.functional.conv3d`).

    Args:
        in_channels: channels of the input.
        out_channels: channels produced.
        kernel_size: int or triple.
        stride: int or triple.
        padding: int, triple, ``"valid"`` or ``"same"``.
        dilation: int or triple, spacing between kernel elements.
        groups: blocked connections from input to output channels.
        bias: whether to learn an additive bias.
        padding_mode: ``"zeros"``, ``"reflect"``, ``"replicate"`` or ``"circular"``.
        device: device of the parameters.
        dtype: dtype of the parameters.

    Shape: input ``(N, C_in, D, H, W)`` or ``(C_in, D, H, W)``; output ``(N, C_out, D_out, H_out, W_out)`` with
    ``D_out = (D + 2 * padding - dilation * (kD - 1) - 1) // stride + 1`` (likewise ``H_out``, ``W_out``).

    Attributes:
        weight: ``(out_channels, in_channels / groups, kD, kH, kW)``.
        bias: ``(out_channels,)`` or None.
    """

    _dims = 3
    _conv_fn = staticmethod(conv3d)


class _ConvTransposeNd(_ConvNd):
    _conv_fn = staticmethod(conv_transpose2d)

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0,
                 groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None,
                 dtype=None) -> None:
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, True, output_padding,
                         groups, bias, padding_mode, device, dtype)

    def _output_padding(self, input: Tensor, output_size) -> tuple:
        if output_size is None:
            return self.output_padding
        n = self._dims
        non_spatial = 2 if input.ndim == n + 2 else 1
        output_size = list(output_size)
        if len(output_size) == non_spatial + n:
            output_size = output_size[non_spatial:]
        if len(output_size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {input.ndim}D input, output_size must have {n} or "
                             f"{non_spatial + n} elements (got {len(output_size)})")
        spatial = input.shape[non_spatial:]
        min_sizes = [(spatial[d] - 1) * self.stride[d] - 2 * self.padding[d]
                     + self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(n)]
        max_sizes = [m + self.stride[d] - 1 for d, m in enumerate(min_sizes)]
        for size, lo, hi in zip(output_size, min_sizes, max_sizes):
            if size < lo or size > hi:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes range from {min_sizes} "
                                 f"to {max_sizes} (for an input of {list(spatial)})")
        return tuple(output_size[d] - min_sizes[d] for d in range(n))

    def forward(self, input: Tensor, output_size=None) -> Tensor:
        """Apply the transposed convolution; ``output_size`` picks the output size among the valid ones."""
        output_padding = self._output_padding(input, output_size)
        return self._conv_fn(input, self.weight, self.bias, self.stride, self.padding, output_padding, self.groups,
                              self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """1-D transposed convolution (the gradient of :class:`Conv1d` with respect to its input).

    Args:
        in_channels: channels of the input.
        out_channels: channels produced.
        kernel_size: size of the kernel.
        stride: stride of the convolution.
        padding: ``dilation * (kernel_size - 1) - padding`` zeros are added to both sides of the input.
        output_padding: extra size added to one side of the output.
        groups: blocked connections.
        bias: whether to learn an additive bias.
        dilation: spacing between kernel elements.
        padding_mode: only ``"zeros"``.
        device: device of the parameters.
        dtype: dtype of the parameters.

    Shape: input ``(N, C_in, L)`` or ``(C_in, L)``; output ``(N, C_out, L_out)`` with
    ``L_out = (L - 1) * stride - 2 * padding + dilation * (kernel_size - 1) + output_padding + 1``.

    Attributes:
        weight: ``(in_channels, out_channels / groups, kernel_size)``.
        bias: ``(out_channels,)`` or None.
    """

    _dims = 1
    _conv_fn = staticmethod(conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """2-D transposed convolution ("deconvolution": the gradient of :class:`Conv2d` with respect to its input).

    Args:
        in_channels: channels of the input.
        out_channels: channels produced.
        kernel_size: int or pair.
        stride: int or pair.
        padding: ``dilation * (kernel_size - 1) - padding`` zeros are added to both sides of each dimension.
        output_padding: extra size added to one side of each output dimension.
        groups: blocked connections.
        bias: whether to learn an additive bias.
        dilation: spacing between kernel elements.
        padding_mode: only ``"zeros"``.
        device: device of the parameters.
        dtype: dtype of the parameters.

    Shape: input ``(N, C_in, H, W)`` or ``(C_in, H, W)``; output ``(N, C_out, H_out, W_out)`` with
    ``H_out = (H - 1) * stride - 2 * padding + dilation * (kH - 1) + output_padding + 1`` (likewise ``W_out``).

    Attributes:
        weight: ``(in_channels, out_channels / groups, kH, kW)``.
        bias: ``(out_channels,)`` or None.
    """

    _dims = 2
    _conv_fn = staticmethod(conv_transpose2d)


class ConvTranspose3d(_ConvTransposeNd):
    """3-D transposed convolution (the gradient of :class:`Conv3d` with respect to its input).

    The arguments are :class:`ConvTranspose2d`'s, with ints or triples. Computed by
    :func:`~flambeau.nn.functional.conv_transpose3d` (a :func:`~flambeau.nn.functional.conv3d` of the
    zero-interleaved input).

    Shape: input ``(N, C_in, D, H, W)`` or ``(C_in, D, H, W)``; output ``(N, C_out, D_out, H_out, W_out)``,
    ``D_out = (D - 1) * stride - 2 * padding + dilation * (kD - 1) + output_padding + 1`` (likewise the others).
    Weight ``(in_channels, out_channels / groups, kD, kH, kW)``; bias ``(out_channels,)`` or None.
    """

    _dims = 3
    _conv_fn = staticmethod(conv_transpose3d)


# --- lazy convolutions -----------------------------------------------------------------------------------
class _LazyConvXdMixin(LazyModuleMixin):
    """``in_channels`` from the first input (its dimension 1, or 0 unbatched); then the regular layer."""

    def _make_lazy(self, out_channels: int, bias: bool, device, dtype) -> None:
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_channels = out_channels
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        """Draw the parameters as the regular layer does (once they are materialized)."""
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor, *args, **kwargs) -> None:
        """Materialize ``weight`` and ``bias`` for the channels of ``input``, then draw them."""
        if not self.has_uninitialized_params():
            return
        n = self._dims
        if input.dim() not in (n + 1, n + 2):
            raise RuntimeError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to "
                               f"{self.__class__.__name__}, but got input of size: {list(input.shape)}")
        self.in_channels = input.shape[1] if input.dim() == n + 2 else input.shape[0]
        if self.in_channels % self.groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        with fl.no_grad():
            if self.transposed:
                self.weight.materialize((self.in_channels, self.out_channels // self.groups, *self.kernel_size))
            else:
                self.weight.materialize((self.out_channels, self.in_channels // self.groups, *self.kernel_size))
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()


class _LazyConvMixin(_LazyConvXdMixin):
    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1,
                 bias: bool = True, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False, padding_mode, device, dtype)
        self._make_lazy(out_channels, bias, device, dtype)


class _LazyConvTransposeMixin(_LazyConvXdMixin):
    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, groups: int = 1,
                 bias: bool = True, dilation=1, padding_mode: str = "zeros", device=None, dtype=None) -> None:
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False, dilation, padding_mode,
                         device, dtype)
        self._make_lazy(out_channels, bias, device, dtype)


_LAZY_DOC = """A :class:`{cls}` whose ``in_channels`` is inferred from the first input.

    Until the first forward ``weight`` and ``bias`` are :class:`~flambeau.nn.UninitializedParameter`
    placeholders and ``in_channels`` is 0; the first call materializes and initialises them as
    :class:`{cls}` does, and the module becomes a :class:`{cls}`. The arguments are :class:`{cls}`'s
    without ``in_channels``.
"""


class LazyConv1d(_LazyConvMixin, Conv1d):
    __doc__ = _LAZY_DOC.format(cls="Conv1d")
    cls_to_become = Conv1d


class LazyConv2d(_LazyConvMixin, Conv2d):
    __doc__ = _LAZY_DOC.format(cls="Conv2d")
    cls_to_become = Conv2d


class LazyConv3d(_LazyConvMixin, Conv3d):
    __doc__ = _LAZY_DOC.format(cls="Conv3d")
    cls_to_become = Conv3d


class LazyConvTranspose1d(_LazyConvTransposeMixin, ConvTranspose1d):
    __doc__ = _LAZY_DOC.format(cls="ConvTranspose1d")
    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTransposeMixin, ConvTranspose2d):
    __doc__ = _LAZY_DOC.format(cls="ConvTranspose2d")
    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTransposeMixin, ConvTranspose3d):
    __doc__ = _LAZY_DOC.format(cls="ConvTranspose3d")
    cls_to_become = ConvTranspose3d
