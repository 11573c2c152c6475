"""Batch normalisation layers: :class:`BatchNorm1d`, :class:`BatchNorm2d`, :class:`BatchNorm3d` and their lazy
forms (as ``torch.nn``)."""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau.nn import init
from flambeau.nn._functional.norm import batch_norm
from flambeau.nn.modules.lazy import LazyModuleMixin
from flambeau.nn.modules.module import Module
from flambeau.nn.parameter import Parameter, UninitializedBuffer, UninitializedParameter

__all__ = ["BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LazyBatchNorm1d", "LazyBatchNorm2d", "LazyBatchNorm3d"]


def _make_affine(module: Module, shape, affine: bool, bias: bool, device, dtype) -> None:
    """Register ``weight`` and ``bias`` of ``shape`` on ``module`` (None without ``affine``, or without ``bias``)."""
    if affine:
        module.weight = Parameter(fl.empty(shape, device=device, dtype=dtype))
        if bias:
            module.bias = Parameter(fl.empty(shape, device=device, dtype=dtype))
        else:
            module.register_parameter("bias", None)
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)


def _reset_affine(module: Module, affine: bool) -> None:
    """With ``affine``, the weight to 1 and the bias (when present) to 0."""
    if affine:
        init.ones_(module.weight)
        if module.bias is not None:
            init.zeros_(module.bias)


class _NormBase(Module):
    """Parameters and running-statistics buffers shared by the batch normalisation layers."""

    _version = 2  # version 2 added num_batches_tracked (older state dicts load without it)

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, bias: bool = True) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        _make_affine(self, num_features, affine, bias, device, dtype)
        if track_running_stats:
            self.register_buffer("running_mean", fl.zeros(num_features, device=device, dtype=dtype))
            self.register_buffer("running_var", fl.ones(num_features, device=device, dtype=dtype))
            self.register_buffer("num_batches_tracked", fl.tensor(0, dtype=fl.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self) -> None:
        """Running mean to 0, running variance to 1, and the batch count to 0."""
        if self.track_running_stats:
            self.running_mean.zero_()
            self.running_var.fill_(1)
            self.num_batches_tracked.zero_()

    def reset_parameters(self) -> None:
        """Reset the running statistics, the weight to 1 and the bias to 0."""
        self.reset_running_stats()
        _reset_affine(self, self.affine)

    def _check_input_dim(self, input: Tensor) -> None:
        raise NotImplementedError

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"bias={self.bias is not None}, track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs) -> None:
        version = local_metadata.get("version", None)
        if (version is None or version < 2) and self.track_running_stats:
            key = prefix + "num_batches_tracked"
            if key not in state_dict:  # state dicts of version 1 had no batch count
                state_dict[key] = fl.tensor(0, dtype=fl.int64)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                      error_msgs)


class _BatchNorm(_NormBase):
    def forward(self, input: Tensor) -> Tensor:
        """Normalise ``input`` with the batch statistics (training) or the running ones (evaluation)."""
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            # momentum=None: the running statistics are the cumulative average over the batches seen.
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return batch_norm(input, self.running_mean if keep else None, self.running_var if keep else None,
                          self.weight, self.bias, use_batch_stats, factor, self.eps)


_DOC = """Batch normalisation over {what} (Ioffe and Szegedy, 2015).

    ``y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias``, the mean and (biased) variance taken per
    channel over the batch{over}. In training the running statistics are updated with
    ``running = (1 - momentum) * running + momentum * batch_stat`` (the unbiased variance); with
    ``momentum=None`` they are the cumulative average over the batches seen (``num_batches_tracked``).
    In evaluation mode the running statistics normalise, unless ``track_running_stats=False``.

    Args:
        num_features: the number of channels ``C``.
        eps: added to the variance for numerical stability.
        momentum: update factor of the running statistics, or None for a cumulative average.
        affine: whether to learn ``weight`` (initialised to 1) and ``bias`` (initialised to 0).
        track_running_stats: whether to keep ``running_mean``, ``running_var`` and ``num_batches_tracked``
            buffers; without them the batch statistics are used in evaluation mode too.
        device: device of the parameters and buffers.
        dtype: dtype of the parameters and buffers.
        bias: whether to learn ``bias`` (with ``affine``).

    Shape: input and output {shape}.
"""


class BatchNorm1d(_BatchNorm):
    __doc__ = _DOC.format(what="a 2-D or 3-D input", over=" (and length)", shape="``(N, C)`` or ``(N, C, L)``")

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    __doc__ = _DOC.format(what="a 4-D input", over=" and the spatial dimensions", shape="``(N, C, H, W)``")

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")


class BatchNorm3d(_BatchNorm):
    __doc__ = _DOC.format(what="a 5-D input", over=" and the spatial dimensions", shape="``(N, C, D, H, W)``")

    def _check_input_dim(self, input: Tensor) -> None:
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")


class _LazyNormBase(LazyModuleMixin, _NormBase):
    """``num_features`` from the first input's dimension 1; then the regular layer."""

    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None) -> None:
        # affine and track_running_stats are False here so that no tensor of size 0 is made
        super().__init__(0, eps, momentum, False, False, device, dtype)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = fl.tensor(0, dtype=fl.int64, device=device)

    def reset_parameters(self) -> None:
        """Reset as the regular layer does (once the parameters are materialized)."""
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        """Materialize the parameters and running statistics for ``input.shape[1]`` channels, then reset them."""
        if not self.has_uninitialized_params():
            return
        self.num_features = input.shape[1]
        with fl.no_grad():
            if self.affine:
                self.weight.materialize((self.num_features,))
                self.bias.materialize((self.num_features,))
            if self.track_running_stats:
                self.running_mean.materialize((self.num_features,))
                self.running_var.materialize((self.num_features,))
            self.reset_parameters()


_LAZY_DOC = """A :class:`{cls}` whose ``num_features`` is inferred from the first input (``input.shape[1]``).

    Until the first forward the parameters and running statistics are uninitialized placeholders
    (:class:`~flambeau.nn.UninitializedParameter`, :class:`~flambeau.nn.UninitializedBuffer`) and
    ``num_features`` is 0; the first call materializes them (weight 1, bias 0, mean 0, variance 1)
    and the module becomes a :class:`{cls}`. The arguments are :class:`{cls}`'s without ``num_features``.
"""


class LazyBatchNorm1d(_LazyNormBase, _BatchNorm):
    __doc__ = _LAZY_DOC.format(cls="BatchNorm1d")
    cls_to_become = BatchNorm1d
    _check_input_dim = BatchNorm1d._check_input_dim


class LazyBatchNorm2d(_LazyNormBase, _BatchNorm):
    __doc__ = _LAZY_DOC.format(cls="BatchNorm2d")
    cls_to_become = BatchNorm2d
    _check_input_dim = BatchNorm2d._check_input_dim


class LazyBatchNorm3d(_LazyNormBase, _BatchNorm):
    __doc__ = _LAZY_DOC.format(cls="BatchNorm3d")
    cls_to_become = BatchNorm3d
    _check_input_dim = BatchNorm3d._check_input_dim
