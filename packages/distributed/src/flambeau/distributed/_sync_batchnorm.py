"""SyncBatchNorm: batch normalisation whose statistics are taken over the whole group's batch.

Note [SyncBatchNorm statistics]
    Each rank computes, per channel, its element count ``n_r``, sum ``s_r`` and centred sum of
    squares ``m_r = sum (x - s_r / n_r)^2``; the three vectors of every rank are all-gathered and
    combined with Chan et al.'s parallel formula: ``N = sum n_r``, ``mean = sum s_r / N``,
    ``M2 = sum (m_r + n_r (s_r / n_r - mean)^2)``, ``var = M2 / N``. Centring locally first keeps
    float32 accurate where ``E[x^2] - E[x]^2`` would cancel. The all-gather is an autograd
    function whose backward all-reduces the gradient and keeps this rank's row (the adjoint of
    gathering), so the gradient flowing into ``x`` is that of batch norm over the concatenated
    batch; the normalisation itself is ordinary differentiable flambeau operators. One all-gather
    of ``3 * C`` values per layer in forward and one all-reduce of the same size in backward, as
    torch does.
"""

from __future__ import annotations

import flambeau as fl
import flambeau.nn as nn
from flambeau import Tensor
from flambeau.autograd import Function
from flambeau.distributed._collectives import all_gather_into_tensor, all_reduce
from flambeau.distributed._process_group import ProcessGroup, _default, is_initialized

__all__ = ["SyncBatchNorm"]


class _GatherStats(Function):
    """``(k,)`` on each rank -> ``(world, k)`` on every rank; backward: sum over ranks, keep this rank's row."""

    @staticmethod
    def forward(ctx, stats: Tensor, group: ProcessGroup) -> Tensor:
        ctx.group = group
        out = fl.empty((group.size(), stats.numel()), dtype=stats.dtype, device=stats.device)
        all_gather_into_tensor(out, stats.contiguous(), group)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        grad = grad.contiguous().clone()
        all_reduce(grad, group=ctx.group)
        return grad[ctx.group.rank()], None


class SyncBatchNorm(nn.Module):
    """Batch normalisation over an ``(N, C, *)`` input with statistics from every rank of the group.

    ``y = (x - E[x]) / sqrt(Var[x] + eps) * weight + bias``, the mean and (biased) variance taken
    per channel over the batch *of all ranks together* (and the spatial dimensions), so that data
    parallelism over W ranks with batch B each normalises like one process with batch W * B. The
    running statistics use the unbiased variance over that whole batch. In evaluation mode, or
    outside a process group of more than one rank, it is plain batch normalisation.

    Args:
        num_features: the number of channels ``C``.
        eps: added to the variance for numerical stability.
        momentum: update factor of the running statistics, or None for a cumulative average.
        affine: whether to learn ``weight`` (initialised to 1) and ``bias`` (initialised to 0).
        track_running_stats: whether to keep ``running_mean``, ``running_var`` and ``num_batches_tracked``.
        process_group: the group whose batches are normalised together (default: all ranks).
        device: device of the parameters and buffers.
        dtype: dtype of the parameters and buffers.

    Shape: input and output ``(N, C, *)`` (at least 2-D).

    Example::

        model = SyncBatchNorm.convert_sync_batchnorm(model)   # every BatchNorm*d becomes a SyncBatchNorm
        model = DistributedDataParallel(model)
    """

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, process_group: ProcessGroup | None = None, device=None,
                 dtype=None) -> None:
        super().__init__()
        self.num_features = num_features
        self.eps = eps
        self.momentum = momentum
        self.affine = affine
        self.track_running_stats = track_running_stats
        self.process_group = process_group
        if affine:
            self.weight = nn.Parameter(fl.empty(num_features, device=device, dtype=dtype))
            self.bias = nn.Parameter(fl.empty(num_features, device=device, dtype=dtype))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
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
        if self.affine:
            nn.init.ones_(self.weight)
            nn.init.zeros_(self.bias)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")

    def forward(self, input: Tensor) -> Tensor:  # noqa: A002 - torch's name
        """Normalise ``input`` with the group's batch statistics (training) or the running ones (evaluation)."""
        if input.dim() < 2:
            raise ValueError(f"expected at least 2D input (got {input.dim()}D input)")
        if input.shape[1] != self.num_features:
            raise ValueError(f"SyncBatchNorm: input has {input.shape[1]} channels (dimension 1), expected "
                             f"num_features={self.num_features}")
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked.add_(1)
            factor = 1.0 / float(self.num_batches_tracked) if self.momentum is None else self.momentum
        use_batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        group = self.process_group
        if group is None and is_initialized():
            group = _default("SyncBatchNorm")
        if not use_batch_stats or group is None or group.size() == 1:
            keep = not self.training or self.track_running_stats
            return fl.batch_norm(input, self.running_mean if keep else None, self.running_var if keep else None,
                                 self.weight, self.bias, use_batch_stats, factor, self.eps)
        return self._sync_forward(input, group, factor)

    def _sync_forward(self, x: Tensor, group: ProcessGroup, factor: float) -> Tensor:
        """Batch norm with the group's statistics (Note [SyncBatchNorm statistics])."""
        c = self.num_features
        dims = [0] + list(range(2, x.dim()))
        n_local = x.numel() // c
        shape = [1, c] + [1] * (x.dim() - 2)
        local_sum = x.sum(dims)
        local_mean = local_sum / max(n_local, 1)
        centred = x - local_mean.view(shape)
        local_m2 = (centred * centred).sum(dims)
        count = fl.full((c,), float(n_local), dtype=x.dtype, device=x.device)
        stats = _GatherStats.apply(fl.cat([count, local_sum, local_m2]), group)  # (world, 3c)
        counts, sums, m2s = stats[:, :c], stats[:, c:2 * c], stats[:, 2 * c:]
        total = counts.sum(0)
        if float(total.min()) <= 1 and self.training:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{tuple(x.shape)} on this rank and {int(total.min())} values per channel in the group")
        mean = sums.sum(0) / total
        rank_means = sums / counts.clamp(min=1)
        m2 = (m2s + counts * (rank_means - mean) ** 2).sum(0)
        var = m2 / total
        if self.track_running_stats and self.running_mean is not None:
            with fl.no_grad():
                n = float(total[0])
                self.running_mean.mul_(1 - factor).add_(mean.detach() * factor)
                self.running_var.mul_(1 - factor).add_(var.detach() * (n / (n - 1)) * factor)
        y = (x - mean.view(shape)) * (var + self.eps).rsqrt().view(shape)
        if self.weight is not None:
            y = y * self.weight.view(shape) + self.bias.view(shape)
        return y

    @classmethod
    def convert_sync_batchnorm(cls, module: nn.Module, process_group: ProcessGroup | None = None) -> nn.Module:
        """``module`` with every ``BatchNorm1d/2d/3d`` replaced by a :class:`SyncBatchNorm` holding its state.

        Args:
            module: the model (or a batch-norm layer itself).
            process_group: the group the new layers synchronise over (default: all ranks).

        Returns:
            The converted module (``module`` itself, changed in place, unless it is a batch-norm layer).
        """
        output = module
        if isinstance(module, (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d)):
            output = cls(module.num_features, module.eps, module.momentum, module.affine, module.track_running_stats,
                         process_group)
            with fl.no_grad():
                if module.affine:
                    output.weight = module.weight
                    output.bias = module.bias if module.bias is not None else output.bias
                if module.track_running_stats:
                    output.running_mean = module.running_mean
                    output.running_var = module.running_var
                    output.num_batches_tracked = module.num_batches_tracked
            output.training = module.training
        for name, child in module.named_children():
            output.add_module(name, cls.convert_sync_batchnorm(child, process_group))
        return output
