"""nn.functional: linear maps, dropout, embeddings, padding and distances.

Everything here is composed of flambeau operators, so autograd differentiates it without
derivatives of its own.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

import flambeau as fl
from flambeau import Tensor
from flambeau._ops import get_op

__all__ = ["linear", "bilinear", "dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout",
           "feature_alpha_dropout", "embedding", "embedding_bag", "one_hot", "pad", "normalize",
           "cosine_similarity", "pairwise_distance", "pdist"]

_matmul = fl.matmul
_linear = get_op("linear").fn
_pad = get_op("pad").fn
_one_hot = get_op("one_hot").fn
_dropout = fl.dropout


def linear(input: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``input @ weight.T + bias``.

    Args:
        input: ``(*, in_features)``.
        weight: ``(out_features, in_features)`` (or ``(in_features,)`` for a vector result).
        bias: ``(out_features,)`` or None.

    Returns:
        ``(*, out_features)``.
    """
    if input.ndim >= 2 and weight.ndim == 2 and (bias is None or bias.ndim <= 1 or input.ndim == 2):
        # one operator: (*, in) folded into the rows of one GEMM with the bias fused, one autograd node
        # (Note [Linear as one operator] in flambeau-tensor-core)
        return _linear(input, weight, bias)
    # a 1-D input or weight, or a bias of more than one dim, which broadcasts to the product as torch's does
    out = _matmul(input, weight.t() if weight.ndim == 2 else weight)
    return out if bias is None else out + bias


def bilinear(input1: Tensor, input2: Tensor, weight: Tensor, bias: Tensor | None = None) -> Tensor:
    """``y[..., o] = sum_ij input1[..., i] * weight[o, i, j] * input2[..., j] + bias[o]``.

    Args:
        input1: ``(*, in1_features)``.
        input2: ``(*, in2_features)`` with the same leading dimensions.
        weight: ``(out_features, in1_features, in2_features)``.
        bias: ``(out_features,)`` or None.

    Returns:
        ``(*, out_features)``.
    """
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got {list(input1.shape[:-1])} and "
                           f"{list(input2.shape[:-1])}")
    if weight.ndim != 3:
        raise RuntimeError(f"bilinear(): weight must be three-dimensional, but got {weight.ndim} dimension(s)")
    out_f, in1, in2 = weight.shape
    if input1.shape[-1] != in1:
        raise RuntimeError(f"bilinear(): input1 size does not match weight size: got {input1.shape[-1]} but "
                           f"expected {in1}")
    if input2.shape[-1] != in2:
        raise RuntimeError(f"bilinear(): input2 size does not match weight size: got {input2.shape[-1]} but "
                           f"expected {in2}")
    lead = tuple(input1.shape[:-1])
    x1 = input1.reshape(-1, in1)
    x2 = input2.reshape(-1, in2)
    # (B, in1) @ (in1, out*in2) -> (B, out, in2), then contract with x2 over in2.
    t = _matmul(x1, weight.permute(1, 0, 2).reshape(in1, out_f * in2)).reshape(-1, out_f, in2)
    y = _matmul(t, x2.unsqueeze(-1)).squeeze(-1)
    if bias is not None:
        y = y + bias
    return y.reshape(*lead, out_f)


def _check_p(p: float) -> None:
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")


def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element with probability ``p`` and scale the others by ``1 / (1 - p)`` (when ``training``)."""
    _check_p(p)
    return _dropout(input, p, training, inplace)


def _feature_dropout(input: Tensor, p: float, training: bool, inplace: bool, mask_shape: tuple) -> Tensor:
    _check_p(p)
    if not training or p == 0:
        return input
    if p == 1:
        mask = fl.zeros(mask_shape, dtype=input.dtype, device=input.device)
    else:
        mask = fl.empty(mask_shape, dtype=input.dtype, device=input.device).bernoulli_(1 - p).div_(1 - p)
    return input.mul_(mask) if inplace else input * mask


def dropout1d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, L)`` or ``(C, L)`` input with probability ``p`` (scaling the rest)."""
    if input.ndim not in (2, 3):
        raise RuntimeError(f"dropout1d: Expected 2D or 3D input, but received a {input.ndim}D input. Note that "
                           "dropout1d exists to provide channel-wise dropout on inputs with 1 spatial dimension, a "
                           "channel dimension, and an optional batch dimension (i.e. 2D or 3D inputs).")
    shape = tuple(input.shape[:-1]) + (1,)
    return _feature_dropout(input, p, training, inplace, shape)


def dropout2d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, H, W)`` input with probability ``p`` (scaling the rest).

    A 3-D input is treated as ``(N, C, L)`` (channel-wise 1-D dropout, with a warning, as torch).
    """
    if input.ndim not in (3, 4):
        warnings.warn(f"dropout2d: Received a {input.ndim}-D input to dropout2d, which is deprecated and will "
                      "result in an error in a future release. To retain the behavior and silence this warning, "
                      "please use dropout instead. Note that dropout2d exists to provide channel-wise dropout on "
                      "inputs with 2 spatial dimensions, a channel dimension, and an optional batch dimension "
                      "(i.e. 3D or 4D inputs).", stacklevel=2)
    if input.ndim == 3:
        warnings.warn("dropout2d: Received a 3D input to dropout2d and assuming that channel-wise 1D dropout "
                      "behavior is desired - input is interpreted as shape (N, C, L), where C is the channel dim. "
                      "This behavior will change in a future release to interpret the input as one without a "
                      "batch dimension, i.e. shape (C, H, W). To maintain the 1D channel-wise dropout behavior, "
                      "please switch to using dropout1d instead.", stacklevel=2)
    if input.ndim < 2:
        return dropout(input, p, training, inplace)
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    return _feature_dropout(input, p, training, inplace, shape)


def dropout3d(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero whole channels of ``(N, C, D, H, W)`` or ``(C, D, H, W)`` input with probability ``p``."""
    if input.ndim not in (4, 5):
        warnings.warn(f"dropout3d: Received a {input.ndim}-D input to dropout3d, which is deprecated and will "
                      "result in an error in a future release.", stacklevel=2)
    if input.ndim == 4:
        shape = (input.shape[0],) + (1,) * 3
    elif input.ndim >= 2:
        shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    else:
        return dropout(input, p, training, inplace)
    return _feature_dropout(input, p, training, inplace, shape)


_SELU_ALPHA_PRIME = 1.7580993408473766


def _alpha_dropout(input, p, training, inplace, mask_shape):
    _check_p(p)
    if not training or p == 0:
        return input
    if p == 1:
        return input.mul_(0) if inplace else input * 0
    keep = fl.empty(mask_shape, dtype=input.dtype, device=input.device).bernoulli_(1 - p)
    alpha = _SELU_ALPHA_PRIME
    a = 1.0 / math.sqrt((alpha * alpha * p + 1) * (1 - p))
    b = (keep - 1) * (alpha * a) + alpha * a * p
    mask = keep * a
    if inplace:
        return input.mul_(mask).add_(b)
    return input * mask + b


def alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Dropout that keeps the mean and variance of SELU activations (dropped values go to SELU's saturation)."""
    return _alpha_dropout(input, p, training, inplace, tuple(input.shape))


def feature_alpha_dropout(input: Tensor, p: float = 0.5, training: bool = False, inplace: bool = False) -> Tensor:
    """Alpha dropout of whole channels (dimension 1 of ``(N, C, *)`` input)."""
    shape = tuple(input.shape[:2]) + (1,) * (input.ndim - 2)
    return _alpha_dropout(input, p, training, inplace, shape)


def embedding(input: Tensor, weight: Tensor, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` ``(num_embeddings, embedding_dim)`` picked by the integer ``input``.

    Args:
        input: integer indices of any shape.
        weight: the embedding matrix.
        padding_idx: the row that receives no gradient.
        max_norm: rows referenced whose ``norm_type``-norm exceeds it are rescaled in place first.
        norm_type: the p of the norm for ``max_norm``.
        scale_grad_by_freq: scale gradients by the inverse frequency of the indices in the batch.
        sparse: the gradient of ``weight`` is a sparse COO tensor (the rows looked up).

    Returns:
        ``input.shape + (embedding_dim,)``.
    """
    if padding_idx is not None:
        n = weight.size(0)
        if padding_idx > 0:
            if padding_idx >= n:
                raise AssertionError("Padding_idx must be within num_embeddings")
        elif padding_idx < 0:
            if padding_idx < -n:
                raise AssertionError("Padding_idx must be within num_embeddings")
            padding_idx = n + padding_idx
    if max_norm is not None:
        with fl.no_grad():
            fl.embedding(input.reshape(-1), weight.detach(), None, max_norm, norm_type)
        max_norm = None
    if sparse and weight.requires_grad and fl.is_grad_enabled():
        from flambeau.nn._functional.embedding_sparse import embedding_sparse

        return embedding_sparse(input, weight, padding_idx, scale_grad_by_freq)
    return fl.embedding(input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, False)


def embedding_bag(input: Tensor, weight: Tensor, offsets: Tensor | None = None, max_norm: float | None = None,
                  norm_type: float = 2, scale_grad_by_freq: bool = False, mode: str = "mean", sparse: bool = False,
                  per_sample_weights: Tensor | None = None, include_last_offset: bool = False,
                  padding_idx: int | None = None) -> Tensor:
    """Sums, means or maxima of bags of embeddings, without materialising the gathered rows per bag.

    Args:
        input: ``(B, N)`` fixed-length bags, or 1-D indices split into bags by ``offsets``.
        weight: ``(num_embeddings, embedding_dim)``.
        offsets: 1-D start index of each bag in ``input`` (1-D ``input`` only).
        max_norm: renormalise referenced rows to at most this norm (in place).
        norm_type: the p of the norm for ``max_norm``.
        scale_grad_by_freq: not supported (must be False).
        mode: ``"sum"``, ``"mean"`` or ``"max"``.
        sparse: the gradient of ``weight`` is a sparse COO tensor (the rows looked up); not with
            ``mode="max"`` (ValueError, as torch).
        per_sample_weights: weights of each index (same shape as ``input``), ``mode="sum"`` only.
        include_last_offset: ``offsets`` has one more entry, the end of the last bag.
        padding_idx: an index excluded from the bags (not counted by ``"mean"``).

    Returns:
        ``(B, embedding_dim)``; an empty bag gives zeros.
    """
    if sparse and mode == "max":
        raise ValueError("max mode does not support sparse weights")
    if sparse and weight.requires_grad and fl.is_grad_enabled():
        from flambeau.nn._functional.embedding_sparse import embedding_bag_sparse

        return embedding_bag_sparse(embedding_bag, input, weight, offsets, max_norm, norm_type, mode,
                                    per_sample_weights, include_last_offset, padding_idx)
    if scale_grad_by_freq:
        raise NotImplementedError("embedding_bag: scale_grad_by_freq=True is not supported by flambeau")
    if weight.dtype in (fl.int64, fl.int32) and input.dtype.is_floating_point:
        warnings.warn("Argument order of nn.functional.embedding_bag was changed. Usage `embedding_bag(weight, "
                      "input, ...)` is deprecated, and should now be `embedding_bag(input, weight, ...)`.",
                      stacklevel=2)
        weight, input = input, weight
    if per_sample_weights is not None and input.shape != per_sample_weights.shape:
        raise ValueError(f"embedding_bag: If per_sample_weights ({per_sample_weights.shape}) is not None, then it "
                         f"must have the same shape as the input ({input.shape})")
    if weight.ndim != 2:
        raise ValueError(f"weight has to be a 2D Tensor, but got Tensor of dimension {weight.ndim}")
    if input.device != weight.device:
        raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                           f"{weight.device} and {input.device}!")
    if weight.device.type != "cpu":
        return _embedding_bag_on_device(input, weight, offsets, max_norm, norm_type, mode, per_sample_weights,
                                        include_last_offset, padding_idx)
    _check_bag_arguments(input, offsets, mode, per_sample_weights)
    if input.ndim == 2:
        b, n = input.shape
        offs = np.arange(0, b * n, n, dtype=np.int64) if n else np.zeros(b, np.int64)
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
        include_last_offset = False
    else:
        offs = offsets.detach().numpy(force=True).astype(np.int64)
    total = input.shape[0]
    if include_last_offset:
        if offs.size == 0:
            raise ValueError("include_last_offset: number of offsets should be at least 1")
        bounds = offs.copy()
        nbags = offs.size - 1
    else:
        bounds = np.concatenate([offs, [total]])
        nbags = offs.size
    if nbags and (offs[0] != 0 or np.any(np.diff(bounds) < 0) or bounds[-1] > total):
        if offs[0] != 0:
            raise RuntimeError(f"offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start "
                               f"from position 0. However, got {offs[0]}")
        raise RuntimeError("offsets must be non-decreasing and within the size of input")
    idx = input.detach().numpy()
    nw = weight.shape[0]
    if padding_idx is not None:
        if not -nw <= padding_idx < nw:
            raise AssertionError("padding_idx must be within the number of embeddings")
        padding_idx = padding_idx % nw
    if max_norm is not None:
        with fl.no_grad():
            fl.embedding(input, weight.detach(), None, max_norm, norm_type)
    # bag of every index position (positions past the last bag, with include_last_offset, get -1)
    seg = np.searchsorted(bounds, np.arange(total), side="right") - 1
    seg[np.arange(total) >= bounds[-1]] = -1
    keep = seg >= 0
    if padding_idx is not None:
        keep &= idx != padding_idx
    dev = weight.device
    sel = np.nonzero(keep)[0]
    dim = weight.shape[1]
    rows = fl.embedding(fl.from_numpy(idx[sel]).to(dev), weight)
    seg_t = fl.from_numpy(seg[sel]).to(dev)
    base = fl.zeros(nbags, dim, dtype=weight.dtype, device=dev)
    if mode == "max":
        return _bag_max(weight, idx[sel], seg[sel], nbags)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights[fl.from_numpy(sel).to(dev)].unsqueeze(1)
    out = base.index_add(0, seg_t, rows)
    if mode == "mean":
        counts = np.bincount(seg[sel], minlength=nbags).astype(weight.dtype.np)
        out = out / fl.from_numpy(np.maximum(counts, 1)).to(dev).unsqueeze(1)
    return out


def _check_bag_arguments(input: Tensor, offsets, mode: str, per_sample_weights) -> None:
    """embedding_bag's checks of its bags' description (torch's messages), on every device."""
    if input.ndim == 2:
        if offsets is not None:
            raise ValueError("if input is 2D, then offsets has to be None, as input is treated is a mini-batch of "
                             "fixed length sequences. However, found offsets of type "
                             f"{type(offsets).__name__}")
    elif input.ndim == 1:
        if offsets is None:
            raise ValueError("offsets has to be a 1D Tensor but got None")
        if offsets.ndim != 1:
            raise ValueError("offsets has to be a 1D Tensor")
    else:
        raise ValueError(f"input has to be 1D or 2D Tensor, but got Tensor of dimension {input.ndim}")
    if mode not in ("sum", "mean", "max"):
        raise ValueError("mode has to be one of sum, mean or max")
    if per_sample_weights is not None and mode != "sum":
        raise NotImplementedError(f"embedding_bag: per_sample_weights was not None. per_sample_weights is only "
                                  f"supported for mode='sum' (got mode='{mode}')")


# Note [Bags on the device]
#     On the CPU embedding_bag works its bags out on the host (numpy: offsets checked, the positions of each bag,
#     the maxima). A GPU's indices and offsets stay on the device, and reading them would synchronise the host
#     with it at every call, as torch's CUDA kernels never do. There each position's bag is found by a
#     ``searchsorted`` of the positions in the bags' bounds, and the positions in no bag (before offsets[0], past
#     the last bound with include_last_offset, padding_idx) go to one extra bag, cut off at the end: the sums are
#     an ``index_add`` of the rows into the bags, the means divide by the counts of another, the maxima are a
#     ``scatter_reduce`` with ``amax`` (empty bags give zeros, as torch's). As with torch's CUDA kernels the
#     offsets' values are not checked (that would need them on the host): offsets that do not rise from 0 give
#     bags of the positions between them, and nothing is read out of bounds. Max mode's gradient is shared
#     between equal maxima of one bag and column (scatter_reduce's rule), where the CPU gives it to the first.
def _embedding_bag_on_device(input: Tensor, weight: Tensor, offsets, max_norm, norm_type, mode: str,
                             per_sample_weights, include_last_offset: bool, padding_idx) -> Tensor:
    """embedding_bag where ``weight`` is not on the CPU, without host synchronisation (Note [Bags on the device])."""
    _check_bag_arguments(input, offsets, mode, per_sample_weights)
    dev, nw, dim = weight.device, weight.shape[0], weight.shape[1]
    if padding_idx is not None:
        if not -nw <= padding_idx < nw:
            raise AssertionError("padding_idx must be within the number of embeddings")
        padding_idx = padding_idx % nw
    if input.ndim == 2:
        b, n = input.shape
        offsets = fl.arange(0, b * n, n, device=dev) if n else fl.zeros(b, dtype=fl.int64, device=dev)
        input = input.reshape(-1)
        if per_sample_weights is not None:
            per_sample_weights = per_sample_weights.reshape(-1)
        include_last_offset = False
    else:
        offsets = offsets.to(device=dev, dtype=fl.int64)
    total = input.shape[0]
    if include_last_offset:
        if offsets.shape[0] == 0:
            raise ValueError("include_last_offset: number of offsets should be at least 1")
        bounds, nbags = offsets, offsets.shape[0] - 1
    else:
        bounds, nbags = fl.cat([offsets, fl.full((1,), total, dtype=fl.int64, device=dev)]), offsets.shape[0]
    if max_norm is not None:
        with fl.no_grad():
            fl.embedding(input, weight.detach(), None, max_norm, norm_type)
    bag = fl.searchsorted(bounds, fl.arange(total, device=dev), right=True) - 1
    inside = (bag >= 0) & (bag < nbags)
    if padding_idx is not None:
        inside = inside & (input != padding_idx)
    bag = fl.where(inside, bag, nbags)  # positions in no bag: the extra bag ``nbags``
    rows = fl.embedding(input, weight)
    base = fl.zeros(nbags + 1, dim, dtype=weight.dtype, device=dev)
    if mode == "max":
        return base.scatter_reduce(0, bag.unsqueeze(1).expand(total, dim), rows, "amax", include_self=False)[:nbags]
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(1)
    out = base.index_add(0, bag, rows)[:nbags]
    if mode == "mean":
        counts = fl.zeros(nbags + 1, dtype=weight.dtype, device=dev).index_add(
            0, bag, fl.ones(total, dtype=weight.dtype, device=dev))[:nbags]
        out = out / counts.clamp(min=1).unsqueeze(1)
    return out


def _bag_max(weight: Tensor, idx, seg, nbags: int) -> Tensor:
    """Per-bag, per-column maximum of the rows ``weight[idx]`` grouped by ``seg`` (sorted); empty bags give 0.

    The maximising row is found with numpy, then gathered from ``weight`` with indexing, so the
    gradient goes to exactly one row per (bag, column), as torch's max mode does.
    """
    dim = weight.shape[1]
    dev = weight.device
    if idx.size == 0:
        return fl.zeros(nbags, dim, dtype=weight.dtype, device=dev)
    vals = weight.detach().numpy(force=True)[idx]  # (n, dim)
    starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
    bags = seg[starts]
    segmax = np.maximum.reduceat(vals, starts, axis=0)  # (nonempty bags, dim)
    group = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, seg.size]))
    pos = np.where(vals == segmax[group], np.arange(seg.size)[:, None], seg.size)
    first = np.minimum.reduceat(pos, starts, axis=0)  # first maximising position per (bag, column)
    first = np.where(first == seg.size, starts[:, None], first)  # NaN columns: keep the first row
    rows = np.zeros((nbags, dim), np.int64)
    rows[bags] = idx[first]
    out = weight[fl.from_numpy(rows).to(dev), fl.arange(dim, device=dev)]
    if bags.size != nbags:
        mask = np.zeros((nbags, 1), weight.dtype.np)
        mask[bags] = 1
        out = out * fl.from_numpy(mask).to(dev)
    return out


def one_hot(tensor: Tensor, num_classes: int = -1) -> Tensor:
    """int64 one-hot encoding: ``tensor.shape + (num_classes,)`` (``-1``: ``max + 1``)."""
    return _one_hot(tensor, num_classes)


_NON_CONSTANT_PAD_DIMS = {2: (2, 3), 4: (3, 4), 6: (4, 5)}


def pad(input: Tensor, pad, mode: str = "constant", value: float | None = None) -> Tensor:
    """Pad the last dimensions of ``input``: ``pad = (left_last, right_last, left_second_last, ...)``.

    ``mode`` is ``"constant"`` (with ``value``, default 0; negative pads crop), ``"reflect"``,
    ``"replicate"`` or ``"circular"``. As in torch, the non-constant modes pad the last 1, 2 or 3
    dimensions of an input with one or two more dimensions (``len(pad)`` 2: 2-D or 3-D input, 4: 3-D
    or 4-D, 6: 4-D or 5-D) and take no ``value``.
    """
    if mode in ("reflect", "replicate", "circular"):
        if value is not None and value != 0:
            raise RuntimeError(f'Padding mode "{mode}" doesn\'t take in value argument')
        supported = _NON_CONSTANT_PAD_DIMS.get(len(pad), ())
        if len(pad) % 2 == 0 and len(pad) // 2 <= input.ndim and input.ndim not in supported:
            raise NotImplementedError(
                f"Padding size {len(pad)} is not supported for {input.ndim}D input tensor.\n"
                "Supported combinations for non-constant padding:\n"
                "  - 2D or 3D input: padding size = 2 (pads last dimension)\n"
                "  - 3D or 4D input: padding size = 4 (pads last 2 dimensions)\n"
                "  - 4D or 5D input: padding size = 6 (pads last 3 dimensions)")
    return _pad(input, pad, mode, value)


def normalize(input: Tensor, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Tensor | None = None) -> Tensor:
    """``input / max(||input||_p, eps)`` with the norm taken over ``dim``."""
    denom = input.norm(p, dim, keepdim=True).clamp_min(eps).expand_as(input)
    if out is None:
        return input / denom
    return out.copy_(input / denom)


def cosine_similarity(x1: Tensor, x2: Tensor, dim: int = 1, eps: float = 1e-8) -> Tensor:
    """Cosine of the angle between ``x1`` and ``x2`` (broadcast) along ``dim``; norms are clamped to ``eps``."""
    return fl.cosine_similarity(x1, x2, dim, eps)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Tensor:
    """``||x1 - x2 + eps||_p`` over the last dimension (inputs broadcast)."""
    return fl.pairwise_distance(x1, x2, p, eps, keepdim)


def pdist(input: Tensor, p: float = 2.0) -> Tensor:
    """The ``p``-norm distances between the rows of ``input`` ``(N, M)``: ``(N * (N - 1) / 2,)``, the pairs
    ``(i, j)`` with ``i < j`` in row-major order (the upper triangle of ``cdist(input, input)``), as torch's."""
    if input.ndim != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.ndim}D")
    if not input.dtype.is_floating_point:
        raise RuntimeError("pdist only supports floating-point dtypes")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = input.shape[0]
    rows, cols = fl.triu_indices(n, n, offset=1, device=input.device)
    return fl.linalg.vector_norm(input[rows] - input[cols], p, dim=1)
