"""nn.functional: convolutions (``conv1d``, ``conv2d``, transposed forms) and ``unfold``/``fold``.

The convolutions are tensor-core's operators (``flambeau.conv2d`` ...), re-exported here under
torch's ``nn.functional`` names. ``unfold`` (im2col) and ``fold`` (col2im) are built from them: the
columns of a ``k x k`` patch are a convolution with a one-hot weight, and ``fold`` is its transposed
convolution, so both are differentiable for free.
"""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor

__all__ = ["conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "unfold", "fold"]

conv1d = fl.conv1d
conv2d = fl.conv2d
conv_transpose1d = fl.conv_transpose1d
conv_transpose2d = fl.conv_transpose2d


def _pair(v, name):
    if isinstance(v, int) and not isinstance(v, bool):
        return (v, v)
    if isinstance(v, (tuple, list)) and len(v) == 2:
        return tuple(v)
    raise TypeError(f"{name} must be an int or a pair of ints, got {v!r}")


def _patch_weight(channels: int, kh: int, kw: int, dtype, device) -> Tensor:
    """One-hot weight ``(C*kh*kw, 1, kh, kw)`` picking each position of a patch."""
    eye = fl.eye(kh * kw, dtype=dtype, device=device).reshape(kh * kw, 1, kh, kw)
    return eye.repeat(channels, 1, 1, 1)


def unfold(input: Tensor, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Extract sliding local blocks (im2col): ``(N, C, H, W) -> (N, C * kh * kw, L)``.

    Args:
        input: a float tensor ``(N, C, H, W)`` or ``(C, H, W)``.
        kernel_size: int or pair, the block size.
        dilation, padding, stride: int or pair, as for :func:`conv2d`.

    Returns:
        ``(N, C * kh * kw, L)`` where ``L`` is the number of block positions; rows are ordered
        channel-major then kernel position, as in torch.
    """
    kh, kw = _pair(kernel_size, "kernel_size")
    if input.ndim not in (3, 4):
        raise RuntimeError(f"Input Error: Only 3D or 4D input Tensors are supported (got {input.ndim}D)")
    batched = input.ndim == 4
    x = input if batched else input.unsqueeze(0)
    C = x.shape[1]
    w = _patch_weight(C, kh, kw, x.dtype, x.device)
    cols = fl.conv2d(x, w, None, _pair(stride, "stride"), _pair(padding, "padding"), _pair(dilation, "dilation"),
                     groups=C)
    cols = cols.reshape(cols.shape[0], C * kh * kw, -1)
    return cols if batched else cols.squeeze(0)


def fold(input: Tensor, output_size, kernel_size, dilation=1, padding=0, stride=1) -> Tensor:
    """Combine sliding local blocks into a tensor (col2im), summing overlaps: the adjoint of :func:`unfold`.

    Args:
        input: ``(N, C * kh * kw, L)`` or ``(C * kh * kw, L)``.
        output_size: int or pair ``(H, W)`` of the result.
        kernel_size, dilation, padding, stride: as given to :func:`unfold`.

    Returns:
        ``(N, C, H, W)`` (or ``(C, H, W)``).
    """
    kh, kw = _pair(kernel_size, "kernel_size")
    H, W = _pair(output_size, "output_size")
    st, pa, di = _pair(stride, "stride"), _pair(padding, "padding"), _pair(dilation, "dilation")
    if input.ndim not in (2, 3):
        raise RuntimeError(f"Input Error: Only unbatched (2D) or batched (3D) input Tensors are supported "
                           f"(got {input.ndim}D)")
    batched = input.ndim == 3
    x = input if batched else input.unsqueeze(0)
    if x.shape[1] % (kh * kw):
        raise RuntimeError(f"Expected size of input's dimension 1 to be divisible by the product of kernel_size, "
                           f"but got input.size(1)={x.shape[1]} and kernel_size={(kh, kw)}")
    C = x.shape[1] // (kh * kw)
    bh = (H + 2 * pa[0] - di[0] * (kh - 1) - 1) // st[0] + 1
    bw = (W + 2 * pa[1] - di[1] * (kw - 1) - 1) // st[1] + 1
    if bh * bw != x.shape[2]:
        raise RuntimeError(f"Given output_size={(H, W)}, kernel_size={(kh, kw)}, dilation={di}, padding={pa}, "
                           f"stride={st}, expected size of input's dimension 2 to match the calculated number of "
                           f"sliding blocks {bh} * {bw} = {bh * bw}, but got input.size(2)={x.shape[2]}.")
    blocks = x.reshape(x.shape[0], C * kh * kw, bh, bw)
    w = _patch_weight(C, kh, kw, x.dtype, x.device)
    # The transposed convolution's natural size, then whatever output_size adds on the far side.
    nat = [(b - 1) * s - 2 * p + d * (k - 1) + 1 for b, s, p, d, k in zip((bh, bw), st, pa, di, (kh, kw))]
    extra = [H - nat[0], W - nat[1]]
    ok = all(0 <= e < max(s, d) for e, s, d in zip(extra, st, di))
    if ok:
        out = fl.conv_transpose2d(blocks, w, None, st, pa, extra, C, di)
    else:  # an output_padding torch would reject: pad the natural result with zeros instead
        out = fl.conv_transpose2d(blocks, w, None, st, pa, 0, C, di)
        zeros_h = fl.zeros((out.shape[0], C, extra[0], out.shape[3]), dtype=out.dtype, device=out.device)
        out = fl.cat([out, zeros_h], 2) if extra[0] else out
        zeros_w = fl.zeros((out.shape[0], C, out.shape[2], extra[1]), dtype=out.dtype, device=out.device)
        out = fl.cat([out, zeros_w], 3) if extra[1] else out
    return out if batched else out.squeeze(0)

