"""Sparse gradients of ``embedding`` and ``embedding_bag`` (``sparse=True``), as torch.

Note [Sparse embedding gradients by row gathering]
    The lookup reads rows ``rows`` of ``weight``; its weight gradient is nonzero only there. So
    ``weight`` enters the graph through :class:`_GatherRows`, a Function whose forward is
    ``weight.index_select(0, rows)`` and whose backward returns the sparse COO tensor of those
    rows' gradients (``indices = rows[None]``, ``values = grad``), and the dense lookup runs on the
    gathered rows with remapped indices. ``embedding`` gathers one row per index, as torch does
    (its gradient is uncoalesced: ``nnz = input.numel()``, duplicates summing); ``embedding_bag``
    gathers each distinct index once, so every mode (``sum``, ``mean``, ``max``, per-sample
    weights, padding) is differentiated by the dense operator on the gathered rows.
"""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau._sparse import sparse_coo_tensor
from flambeau.autograd import Function

__all__: list[str] = []


class _GatherRows(Function):
    """``weight[rows]`` whose weight gradient is sparse (Note [Sparse embedding gradients by row gathering])."""

    @staticmethod
    def forward(ctx, weight, rows, padding_idx, scale_grad_by_freq):
        ctx.rows, ctx.padding_idx, ctx.scale = rows, padding_idx, scale_grad_by_freq
        ctx.weight_shape = tuple(weight.shape)
        return weight.index_select(0, rows)

    @staticmethod
    def backward(ctx, grad):
        rows, values = ctx.rows, grad
        if ctx.scale:  # as torch: raised when the backward runs
            raise RuntimeError("embedding_backward: scale_grad_by_freq not supported with sparse gradients")
        if ctx.padding_idx is not None:
            keep = (rows != ctx.padding_idx).nonzero().reshape(-1)
            rows, values = rows.index_select(0, keep), values.index_select(0, keep)
        return sparse_coo_tensor(rows.unsqueeze(0), values, ctx.weight_shape), None, None, None


def _pad_index(padding_idx, n):
    if padding_idx is not None and padding_idx < 0:
        return padding_idx + n
    return padding_idx


def embedding_sparse(input: Tensor, weight: Tensor, padding_idx, scale_grad_by_freq: bool) -> Tensor:
    """``F.embedding`` with a sparse weight gradient (arguments checked and max_norm applied by the caller)."""
    rows = input.reshape(-1).to(fl.int64)
    if rows.numel() and (int(rows.min().item()) < 0 or int(rows.max().item()) >= weight.shape[0]):
        raise IndexError("index out of range in self")
    out = _GatherRows.apply(weight, rows, _pad_index(padding_idx, weight.shape[0]), bool(scale_grad_by_freq))
    return out.reshape(*input.shape, weight.shape[1])


def embedding_bag_sparse(embedding_bag, input: Tensor, weight: Tensor, offsets, max_norm, norm_type, mode,
                         per_sample_weights, include_last_offset, padding_idx) -> Tensor:
    """``F.embedding_bag`` with a sparse weight gradient: the dense ``embedding_bag`` on the gathered rows."""
    if max_norm is not None:
        with fl.no_grad():
            fl.embedding(input.reshape(-1).to(fl.int64), weight.detach(), None, max_norm, norm_type)
    uniq, inverse = fl.unique(input.reshape(-1).to(fl.int64), sorted=True, return_inverse=True)
    if uniq.numel() and (int(uniq[0].item()) < 0 or int(uniq[-1].item()) >= weight.shape[0]):
        raise IndexError("index out of range in self")
    pad = _pad_index(padding_idx, weight.shape[0])
    local_pad = None
    if pad is not None:
        hit = (uniq == pad).nonzero().reshape(-1)
        local_pad = int(hit[0].item()) if hit.numel() else None
    sub = _GatherRows.apply(weight, uniq, None, False)
    return embedding_bag(inverse.reshape(input.shape), sub, offsets, None, norm_type, False, mode, False,
                         per_sample_weights, include_last_offset, local_pad)
