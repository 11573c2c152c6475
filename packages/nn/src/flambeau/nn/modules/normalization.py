"""Normalisation layers other than batch norm (as ``torch.nn``): :class:`LayerNorm`, :class:`GroupNorm`,
:class:`InstanceNorm1d`/``2d``/``3d`` and :class:`RMSNorm`."""

from __future__ import annotations

import warnings

import numpy as np

import flambeau as fl
from flambeau import Tensor
from flambeau.nn import init
from flambeau.nn._functional.basic_more import local_response_norm
from flambeau.nn._functional.norm import group_norm, instance_norm, layer_norm, rms_norm
from flambeau.nn.modules.batchnorm import _LAZY_DOC, _LazyNormBase, _make_affine, _NormBase, _reset_affine
from flambeau.nn.modules.module import Module
from flambeau.nn.parameter import Parameter

__all__ = ["LayerNorm", "GroupNorm", "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "RMSNorm",
           "LazyInstanceNorm1d",
           "LazyInstanceNorm2d", "LazyInstanceNorm3d", "LocalResponseNorm", "CrossMapLRN2d"]


class LayerNorm(Module):
    """Layer normalisation over the trailing dimensions ``normalized_shape`` (Ba et al., 2016).

    ``y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias``, the mean and (biased) variance taken
    over the last ``len(normalized_shape)`` dimensions of each sample.

    Args:
        normalized_shape: an int or a sequence of ints, the trailing shape of the input.
        eps: added to the variance for numerical stability.
        elementwise_affine: whether to learn ``weight`` (initialised to 1) and ``bias`` (to 0) of
            shape ``normalized_shape``.
        bias: whether to learn ``bias`` (with ``elementwise_affine``).
        device: device of the parameters.
        dtype: dtype of the parameters.

    Shape: input and output ``(*, *normalized_shape)``.
    """

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True, bias: bool = True,
                 device=None, dtype=None) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(s) for s in normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        _make_affine(self, self.normalized_shape, elementwise_affine, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight to 1 and bias to 0."""
        _reset_affine(self, self.elementwise_affine)

    def forward(self, input: Tensor) -> Tensor:
        """Normalise the trailing dimensions of ``input``."""
        return layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self.bias is not None}")


class GroupNorm(Module):
    """Group normalisation (Wu and He, 2018): channels split into ``num_groups`` groups.

    Each sample's group is normalised by its own mean and (biased) variance, then scaled and
    shifted per channel: ``y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias``.

    Args:
        num_groups: the number of groups; must divide ``num_channels``.
        num_channels: the number of channels ``C``.
        eps: added to the variance for numerical stability.
        affine: whether to learn per-channel ``weight`` (initialised to 1) and ``bias`` (to 0).
        device: device of the parameters.
        dtype: dtype of the parameters.
        bias: whether to learn ``bias`` (with ``affine``).

    Shape: input and output ``(N, C, *)``.
    """

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, device=None,
                 dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups = num_groups
        self.num_channels = num_channels
        self.eps = eps
        self.affine = affine
        _make_affine(self, num_channels, affine, bias, device, dtype)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight to 1 and bias to 0."""
        _reset_affine(self, self.affine)

    def forward(self, input: Tensor) -> Tensor:
        """Normalise each group of channels of ``input``."""
        return group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, "
                f"bias={self.bias is not None}")


class _InstanceNorm(_NormBase):
    _batch_dims: int  # the input's number of dimensions with a batch dimension

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)

    def forward(self, input: Tensor) -> Tensor:
        """Normalise each channel of each sample (the input statistics unless evaluating with running ones)."""
        if input.dim() not in (self._batch_dims - 1, self._batch_dims):
            raise ValueError(f"expected {self._batch_dims - 1}D or {self._batch_dims}D input "
                             f"(got {input.dim()}D input)")
        feature_dim = input.dim() - (self._batch_dims - 1)
        if input.shape[feature_dim] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim={feature_dim} to match num_features "
                                 f"({self.num_features}), but got: {input.shape[feature_dim]}.")
            warnings.warn(f"input's size at dim={feature_dim} does not match num_features. You can silence this "
                          "warning by not passing in num_features, which is not used because affine=False",
                          stacklevel=2)
        unbatched = input.dim() == self._batch_dims - 1
        x = input.unsqueeze(0) if unbatched else input
        out = instance_norm(x, self.running_mean, self.running_var, self.weight, self.bias,
                            self.training or not self.track_running_stats,
                            self.momentum if self.momentum is not None else 0.0, self.eps)
        return out.squeeze(0) if unbatched else out


_INSTANCE_DOC = """Instance normalisation of {what}: each channel of each sample normalised by its own statistics.

    ``y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias``, the mean and (biased) variance taken
    over the spatial dimensions of one channel of one sample. With ``track_running_stats`` the
    running statistics (the batch average of the instance statistics) are kept in training and
    used in evaluation mode.

    Args:
        num_features: the number of channels ``C``.
        eps: added to the variance for numerical stability.
        momentum: update factor of the running statistics (None counts as 0).
        affine: whether to learn per-channel ``weight`` (initialised to 1) and ``bias`` (to 0).
        track_running_stats: whether to keep running statistics.
        device: device of the parameters and buffers.
        dtype: dtype of the parameters and buffers.
        bias: whether to learn ``bias`` (with ``affine``).

    Shape: input and output {shape} (or without the batch dimension).
"""


class InstanceNorm1d(_InstanceNorm):
    __doc__ = _INSTANCE_DOC.format(what="a 3-D input", shape="``(N, C, L)``")
    _batch_dims = 3


class InstanceNorm2d(_InstanceNorm):
    __doc__ = _INSTANCE_DOC.format(what="a 4-D input", shape="``(N, C, H, W)``")
    _batch_dims = 4


class InstanceNorm3d(_InstanceNorm):
    __doc__ = _INSTANCE_DOC.format(what="a 5-D input", shape="``(N, C, D, H, W)``")
    _batch_dims = 5


class RMSNorm(Module):
    """Root-mean-square layer normalisation over the trailing dimensions ``normalized_shape``.

    ``y = x / sqrt(mean(x**2) + eps) * weight`` (Zhang and Sennrich, 2019), the mean taken over the
    last ``len(normalized_shape)`` dimensions of each sample; no centring and no bias.

    Args:
        normalized_shape: an int or a sequence of ints, the trailing shape of the input.
        eps: added to the mean square; None (default) is ``finfo(input.dtype).eps``.
        elementwise_affine: whether to learn ``weight`` of shape ``normalized_shape`` (initialised to 1).
        device: device of the parameters.
        dtype: dtype of the parameters.

    Shape: input and output ``(*, *normalized_shape)``.
    """

    def __init__(self, normalized_shape, eps: float | None = None, elementwise_affine: bool = True, device=None,
                 dtype=None) -> None:
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(s) for s in normalized_shape)
        self.eps = eps
        self.elementwise_affine = elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(fl.empty(self.normalized_shape, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Weight to 1."""
        if self.elementwise_affine:
            init.ones_(self.weight)

    def forward(self, input: Tensor) -> Tensor:
        """Normalise the trailing dimensions of ``input``."""
        return rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self) -> str:
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class _LazyInstanceNorm(_LazyNormBase, _InstanceNorm):
    # torch's instance-norm defaults: no affine parameters, no running statistics
    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = False,
                 track_running_stats: bool = False, device=None, dtype=None) -> None:
        super().__init__(eps, momentum, affine, track_running_stats, device, dtype)


class LazyInstanceNorm1d(_LazyInstanceNorm):
    __doc__ = _LAZY_DOC.format(cls="InstanceNorm1d")
    cls_to_become = InstanceNorm1d
    _batch_dims = 3


class LazyInstanceNorm2d(_LazyInstanceNorm):
    __doc__ = _LAZY_DOC.format(cls="InstanceNorm2d")
    cls_to_become = InstanceNorm2d
    _batch_dims = 4


class LazyInstanceNorm3d(_LazyInstanceNorm):
    __doc__ = _LAZY_DOC.format(cls="InstanceNorm3d")
    cls_to_become = InstanceNorm3d
    _batch_dims = 5


class LocalResponseNorm(Module):
    """Local response normalization across channels (see :func:`~flambeau.nn.functional.local_response_norm`).

    Args:
        size: the number of neighbouring channels.
        alpha, beta, k: ``b_c = a_c / (k + alpha / size * sum of a^2 over the neighbours)^beta``.

    Shape: ``(N, C, *)``, output of the same shape.
    """

    def __init__(self, size: int, alpha: float = 1e-4, beta: float = 0.75, k: float = 1.0) -> None:
        super().__init__()
        self.size = size
        self.alpha = alpha
        self.beta = beta
        self.k = k

    def forward(self, input: Tensor) -> Tensor:
        """Normalise ``input``."""
        return local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self) -> str:
        return "{size}, alpha={alpha}, beta={beta}, k={k}".format(**self.__dict__)


def _cross_map_window(channels: int, size: int) -> np.ndarray:
    """The ``(C, C)`` 0/1 matrix of the channels summed for each channel by torch's legacy CrossMapLRN2d.

    Replays torch's running-sum loop, quirk included: the first channel is never subtracted again.
    """
    pre_pad = int((size - 1) / 2 + 1)
    window = np.zeros((channels, channels))
    window[0, :min(pre_pad, channels)] = 1
    for c in range(1, channels):
        window[c] = window[c - 1]
        if c < channels - pre_pad + 1:
            window[c, c + pre_pad - 1] += 1
        if c > pre_pad:
            window[c, c - pre_pad] -= 1
    return window


class CrossMapLRN2d(LocalResponseNorm):
    """torch's legacy cross-channel LRN of 4-D inputs: ``x * (k + alpha / size * window sum of x^2)^-beta``.

    The arguments are :class:`LocalResponseNorm`'s. The window sums replay torch's implementation
    exactly (values match; the gradient is autograd's of that forward, where torch's hand-written
    backward is not).

    Shape: ``(N, C, H, W)``.
    """

    def forward(self, input: Tensor) -> Tensor:
        """Normalise ``input``."""
        if input.ndim != 4:
            raise ValueError(f"CrossMapLRN2d: Expected input to be 4D, got {input.ndim}D instead.")
        window = fl.from_numpy(_cross_map_window(input.shape[1], self.size)).to(device=input.device,
                                                                              dtype=input.dtype)
        sums = (window @ (input * input).movedim(1, -2)).movedim(-2, 1)
        return input * (sums * (self.alpha / self.size) + self.k).pow(-self.beta)
