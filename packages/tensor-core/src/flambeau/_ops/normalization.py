"""Normalisation operators: batch_norm, layer_norm, group_norm and their fused backward passes.

``flambeau.nn`` builds BatchNorm, LayerNorm, GroupNorm (and instance norm) on these. Every
operator views its input as rows of contiguous memory and runs fused numba kernels, parallel over
rows, built on first use:

- statistics: layer_norm and group_norm compute each row's mean and sum of squared deviations (two
  passes over the row, the second from cache); group_norm's rows are the ``(n, group)`` blocks,
  layer_norm's the normalised trailing dimensions. batch_norm sums ``x - x[0, c]`` and its square
  per channel, parallel over chunks of the batch. Sums along a row accumulate in the input's
  dtype and are combined in float64 (Note [Row accumulation]).
- normalisation and affine transform: one pass, ``((x - mu) * a + c) * w + b`` with per-row
  ``mu, a, c`` and per-column ``w, b``.
- backward: one pass of per-row sums of ``g`` and ``g * (x - mu)``, then one pass
  writing ``dx = g * A + (x - mu) * B + C`` with per-row coefficients; layer_norm fuses both into
  a row loop that also accumulates the weight and bias gradients per thread.

Kernel convention (every device; arrays in, arrays out):
    batch_norm: ``kernel(x, running_mean, running_var, weight, bias, training, momentum, eps)
        -> (out, save_mean, save_invstd)``; ``x`` is ``(N, C, *)``, the running arrays (or None) are
        updated in place in training, ``save_*`` have shape ``(C,)`` and ``x``'s dtype.
    batch_norm_backward: ``kernel(grad, x, weight, save_mean, save_invstd, training, mask)
        -> (dx, dweight, dbias)`` (None where ``mask`` is False).
    layer_norm: ``kernel(x, k, weight, bias, eps) -> (out, mean, rstd)`` normalising the last
        ``k`` dims; ``mean``/``rstd`` have one entry per row (leading dims).
    layer_norm_backward: ``kernel(grad, x, k, mean, rstd, weight, mask) -> (dx, dweight, dbias)``.
    group_norm: ``kernel(x, groups, weight, bias, eps) -> (out, mean, rstd)``, ``mean``/``rstd``
        of shape ``(N, groups)``.
    group_norm_backward: ``kernel(grad, x, groups, mean, rstd, weight, mask) -> (dx, dweight, dbias)``.
    ``weight``/``bias`` may be None (no affine transform).

Autograd recording (seam 2): ``inputs`` are the positional arguments in signature order; the
forward operators also record ``attrs`` ``{"save_mean": ..., "save_invstd"/"save_rstd": ...}``,
the statistics their backward needs. The ``*_backward`` operators are not differentiable: the
derivative table switches to a composite of differentiable operators for double backward.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._ops._common import Tensor, _wrap, check_tensor, common_device, grad_state, record
from flambeau._ops._registry import declare
from flambeau._parallel import get_num_threads

__all__ = ["batch_norm", "layer_norm", "group_norm"]

_FLOATS = (np.float32, np.float64)


# --- kernels -----------------------------------------------------------------------------------------
@functools.cache
def _kernels():
    """The fused row kernels (each specialised for float32 and float64 inputs), compiled on first use."""
    import numba
    from numba import prange

    fm = {"contract", "reassoc", "nsz"}

    # Note [Row accumulation]: sums along one row accumulate in the input's dtype, which LLVM
    # vectorises at full width with several partial sums (reassoc); rows are then combined in
    # float64. Float64 accumulators inside the loops halve the throughput (measured) for an error of
    # a few ulps of float32 on rows of up to a few thousand elements.
    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def row_moments(x, eps, mean, rstd):
        # Per row of ``x`` (R, L): the mean and 1 / sqrt(biased variance + eps), in x's dtype. Two
        # passes over the row (the second from cache): no cancellation.
        rows, n = x.shape
        zero = x.dtype.type(0.0)
        for i in prange(rows):
            r = x[i]
            s = zero
            for j in range(n):
                s += r[j]
            mu = s / n
            q = zero
            for j in range(n):
                d = r[j] - mu
                q += d * d
            mean[i] = mu
            rstd[i] = 1.0 / np.sqrt(q / n + eps)

    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def affine(x, mu, a, c, w, b, out):
        # out[i, j] = ((x[i, j] - mu[i]) * a[i] + c[i]) * w[j] + b[j]
        rows, n = x.shape
        for i in prange(rows):
            r, o = x[i], out[i]
            m, s, t = mu[i], a[i], c[i]
            for j in range(n):
                o[j] = ((r[j] - m) * s + t) * w[j] + b[j]

    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def grad_sums(g, x, mu, sg, sgx):
        # Per row: sum(g) and sum(g * (x - mu[i])) (Note [Row accumulation]).
        rows, n = x.shape
        zero = x.dtype.type(0.0)
        for i in prange(rows):
            gr, r = g[i], x[i]
            m = mu[i]
            s = zero
            q = zero
            for j in range(n):
                v = gr[j]
                s += v
                q += v * (r[j] - m)
            sg[i] = s
            sgx[i] = q

    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def affine2(g, x, mu, a, b, c, out):
        # out[i, j] = g[i, j] * a[i] + (x[i, j] - mu[i]) * b[i] + c[i]
        rows, n = x.shape
        for i in prange(rows):
            gr, r, o = g[i], x[i], out[i]
            m, p, q, t = mu[i], a[i], b[i], c[i]
            for j in range(n):
                o[j] = gr[j] * p + (r[j] - m) * q + t

    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def ln_backward(g, x, w, mean, rstd, dx, dwp, dbp):
        # Rows split into one chunk per partial accumulator. Per row: the sums of g * w and
        # g * w * (x - mean) (float64), then dx and the weight and bias partial sums from the row in
        # cache. The partial sums live in arrays local to the chunk: LLVM vectorises the loops only
        # when it can prove that they do not alias the rows (measured: 2.5x slower otherwise).
        rows, n = x.shape
        chunks = dwp.shape[0]
        per = (rows + chunks - 1) // chunks
        zero = x.dtype.type(0.0)
        for k in prange(chunks):
            dwk = np.zeros(n)
            dbk = np.zeros(n)
            for i in range(k * per, min(rows, (k + 1) * per)):
                gr, r, o = g[i], x[i], dx[i]
                m, s = mean[i], rstd[i]
                a = zero
                b = zero
                for j in range(n):
                    gw = gr[j] * w[j]
                    a += gw
                    b += gw * (r[j] - m)
                # dx = s * (g * w - a / n - (x - m) * s * s * b / n) = g * (w * s) + x * q + t
                q = -s * s * s * b / n
                t = -s * a / n - q * m
                qf, tf = o.dtype.type(q), o.dtype.type(t)
                for j in range(n):
                    o[j] = gr[j] * (w[j] * s) + r[j] * qf + tf
                for j in range(n):
                    dwk[j] += gr[j] * ((r[j] - m) * s)
                    dbk[j] += gr[j]
            for j in range(n):
                dwp[k, j] = dwk[j]
                dbp[k, j] = dbk[j]

    # batch_norm: per-channel loops over (N, C, L), parallel over chunks of the batch, each chunk
    # accumulating float64 partial sums per channel (no per-(n, c) scratch arrays: small spatial
    # sizes such as 4x4 or BatchNorm1d's L = 1 are dominated by such overheads otherwise).
    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def chan_sums(x, g, shift, ps, pq):
        # ps[k, c] = sum(v), pq[k, c] = sum(v * w) over chunk k's samples, v = x - shift[c] and
        # w = v (statistics: g is empty) or w = g (backward: ps sums g, pq sums g * (x - mean)).
        n_, c_, l_ = x.shape
        chunks = ps.shape[0]
        per = (n_ + chunks - 1) // chunks
        stats = g.shape[0] == 0
        zero = x.dtype.type(0.0)
        for k in prange(chunks):
            psk = np.zeros(c_)  # chunk-local partial sums: see ln_backward on aliasing
            pqk = np.zeros(c_)
            lo, hi = k * per, min(n_, (k + 1) * per)
            if l_ == 1:  # (N, C): vectorise across the channels
                x2 = x.reshape(n_, c_)
                if stats:
                    for n in range(lo, hi):
                        r = x2[n]
                        for c in range(c_):
                            v = r[c] - shift[c]
                            psk[c] += v
                            pqk[c] += v * v
                else:
                    g2 = g.reshape(n_, c_)
                    for n in range(lo, hi):
                        r, gr = x2[n], g2[n]
                        for c in range(c_):
                            psk[c] += gr[c]
                            pqk[c] += gr[c] * (r[c] - shift[c])
            else:
                for n in range(lo, hi):
                    for c in range(c_):
                        r = x[n, c]
                        sh = shift[c]
                        s = zero
                        q = zero
                        if stats:
                            for j in range(l_):
                                v = r[j] - sh
                                s += v
                                q += v * v
                        else:
                            gr = g[n, c]
                            for j in range(l_):
                                v = gr[j]
                                s += v
                                q += v * (r[j] - sh)
                        psk[c] += s
                        pqk[c] += q
            for c in range(c_):
                ps[k, c] = psk[c]
                pq[k, c] = pqk[c]

    @numba.njit(parallel=True, cache=True, fastmath=fm)
    def chan_affine(x, g, a, b, cc, out):
        # out = x * a[c] + cc[c], or with g given: out = g * a[c] + x * b[c] + cc[c]
        n_, c_, l_ = x.shape
        plain = g.shape[0] == 0
        for n in prange(n_):
            if l_ == 1:  # (N, C): vectorise across the channels
                r, o = x[n].reshape(c_), out[n].reshape(c_)
                if plain:
                    for c in range(c_):
                        o[c] = r[c] * a[c] + cc[c]
                else:
                    gr = g[n].reshape(c_)
                    for c in range(c_):
                        o[c] = gr[c] * a[c] + r[c] * b[c] + cc[c]
                continue
            for c in range(c_):
                r, o = x[n, c], out[n, c]
                p, t = a[c], cc[c]
                if plain:
                    for j in range(l_):
                        o[j] = r[j] * p + t
                else:
                    gr = g[n, c]
                    q = b[c]
                    for j in range(l_):
                        o[j] = gr[j] * p + r[j] * q + t

    # Note [Per-channel coefficients in one call]: between its two passes over the data, batch_norm
    # turns the per-chunk sums into per-channel statistics, running-statistic updates and affine
    # coefficients. As some 30 numpy calls on (C,) vectors that cost ~35 µs a layer, as much as the
    # passes themselves on MobileNet's small planes; these serial loops do it in one call. Sums and
    # coefficients are computed in float64, outputs written in their arrays' dtypes; an empty array
    # stands for an absent running statistic, weight or bias.
    @numba.njit(cache=True)
    def bn_coefs(ps, pq, shift, count, rm, rv, momentum, eps, w, b, a, cc, mean_out, invstd_out):
        k, c_ = ps.shape
        for c in range(c_):
            s = 0.0
            q = 0.0
            for i in range(k):
                s += ps[i, c]
                q += pq[i, c]
            d = s / count
            mean = shift[c] + d
            var = max(q / count - d * d, 0.0)
            if rm.shape[0] != 0:
                rm[c] = (1.0 - momentum) * rm[c] + momentum * mean
            if rv.shape[0] != 0:
                unbiased = var * (count / (count - 1)) if count > 1 else np.nan
                rv[c] = (1.0 - momentum) * rv[c] + momentum * unbiased
            invstd = 1.0 / np.sqrt(var + eps)
            av = invstd * w[c] if w.shape[0] != 0 else invstd
            a[c] = av
            cc[c] = (b[c] if b.shape[0] != 0 else 0.0) - mean * av
            mean_out[c] = mean
            invstd_out[c] = invstd

    @numba.njit(cache=True)
    def bn_grad_coefs(ps, pq, mean_t, invstd_t, w, count, training, a, b, cc, dw, db):
        # dx = g * a + x * b + cc per channel (training: through the batch statistics), dw, db.
        k, c_ = ps.shape
        for c in range(c_):
            sg = 0.0
            sgx = 0.0
            for i in range(k):
                sg += ps[i, c]
                sgx += pq[i, c]
            invstd = np.float64(invstd_t[c])
            av = invstd * w[c] if w.shape[0] != 0 else invstd
            a[c] = av
            if training:
                bv = -av * invstd * invstd * sgx / count
                b[c] = bv
                cc[c] = -av * sg / count - bv * np.float64(mean_t[c])
            else:
                b[c] = 0.0
                cc[c] = 0.0
            dw[c] = sgx * invstd
            db[c] = sg

    return row_moments, affine, grad_sums, affine2, ln_backward, chan_sums, chan_affine, bn_coefs, bn_grad_coefs


def _as_rows(a: np.ndarray, rows: int) -> np.ndarray:
    """``a`` as a C-contiguous (rows, -1) array (a view when ``a`` is contiguous)."""
    return np.ascontiguousarray(a).reshape(rows, -1)


def _compute(a: np.ndarray) -> np.ndarray:
    """``a`` in a dtype the kernels take (float16 computes in float32)."""
    return a if a.dtype.type in _FLOATS else a.astype(np.float32)


@functools.lru_cache(maxsize=64)
def _ones(n: int, dtype) -> np.ndarray:
    """``n`` ones (the weight when there is none), made once per size; the kernels never write it."""
    return np.ones(n, dtype)


@functools.lru_cache(maxsize=64)
def _zeros(n: int, dtype) -> np.ndarray:
    """``n`` zeros (the bias when there is none), made once per size; the kernels never write it."""
    return np.zeros(n, dtype)


def _threads() -> int:
    return get_num_threads()  # flambeau's setting (numba's get_num_threads costs ~5 µs a call)


# --- batch_norm ---------------------------------------------------------------------------------------
def _as_ncl(a: np.ndarray) -> np.ndarray:
    """``a`` ``(N, C, *)`` as a C-contiguous (N, C, L) array (a view when ``a`` is contiguous)."""
    return np.ascontiguousarray(a).reshape(a.shape[0], a.shape[1], -1)


_NONE = {np.dtype(np.float32): np.empty((0, 0, 0), np.float32), np.dtype(np.float64): np.empty((0, 0, 0))}
_EMPTY = {np.dtype(np.float32): np.empty(0, np.float32), np.dtype(np.float64): np.empty(0)}


def _chunks(n: int) -> int:
    return max(1, min(_threads(), n))


def _in_dtype(v, t):
    """A ``(C,)`` array for the coefficient kernels: ``v`` itself if of dtype ``t`` (writes go through), a
    copy in ``t`` otherwise, an empty array for None."""
    if v is None:
        return _EMPTY[t]
    return v if v.dtype == t else v.astype(t)


def _k_batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps):
    n, c = x.shape[0], x.shape[1]
    xc = _compute(x)
    t = xc.dtype
    if x.size == 0:
        return np.empty(x.shape, x.dtype), np.zeros(c, t), np.zeros(c, t)
    x3 = _as_ncl(xc)
    kernels = _kernels()
    chan_sums, chan_affine = kernels[5:7]
    full = np.empty(x.shape, t)  # owns its memory: autograd may take it as .grad
    if training:
        # Sums of x - x[0, c, 0] (accumulated in float64 per chunk): the shift keeps the variance free
        # of cancellation.
        shift = x3[0, :, 0].copy()
        k = _chunks(n)
        ps = np.zeros((k, c))
        pq = np.zeros((k, c))
        chan_sums(x3, _NONE[t], shift, ps, pq)
        a = np.empty(c, t)
        cc = np.empty(c, t)
        mean = np.empty(c, t)
        invstd = np.empty(c, t)
        rm, rv = _in_dtype(running_mean, t), _in_dtype(running_var, t)
        kernels[7](ps, pq, shift, float(n * x3.shape[2]), rm, rv, float(momentum), float(eps),
                   _in_dtype(weight, t), _in_dtype(bias, t), a, cc, mean, invstd)
        for arr, updated in ((running_mean, rm), (running_var, rv)):
            if arr is not None and arr is not updated:
                arr[...] = updated  # a running statistic of another dtype (float16) was updated in a copy
        chan_affine(x3, _NONE[t], a, a, cc, full.reshape(x3.shape))
        return (full if t == x.dtype else full.astype(x.dtype)), mean, invstd
    mean = running_mean.astype(np.float64)
    var = running_var.astype(np.float64)
    invstd = 1.0 / np.sqrt(var + eps)
    a = invstd if weight is None else invstd * weight
    cc = -mean * a if bias is None else bias - mean * a
    chan_affine(x3, _NONE[t], a.astype(t), a.astype(t), cc.astype(t), full.reshape(x3.shape))
    return (full if t == x.dtype else full.astype(x.dtype)), mean.astype(t), invstd.astype(t)


def _k_batch_norm_backward(grad, x, weight, save_mean, save_invstd, training, mask):
    n, c = x.shape[0], x.shape[1]
    xc = _compute(x)
    t = xc.dtype
    if x.size == 0:
        return (np.zeros(x.shape, x.dtype) if mask[0] else None,
                np.zeros(c, t) if mask[1] else None, np.zeros(c, t) if mask[2] else None)
    x3 = _as_ncl(xc)
    g3 = _as_ncl(_compute(grad))
    kernels = _kernels()
    chan_sums, chan_affine = kernels[5:7]
    mean_t = save_mean.astype(t, copy=False)
    k = _chunks(n)
    ps = np.zeros((k, c))
    pq = np.zeros((k, c))
    chan_sums(x3, g3, mean_t, ps, pq)  # sum(g), sum(g * (x - mean)) per channel
    a, b, cc, dw, db = (np.empty(c, t) for _ in range(5))
    kernels[8](ps, pq, mean_t, save_invstd.astype(t, copy=False), _in_dtype(weight, t), float(n * x3.shape[2]),
               bool(training), a, b, cc, dw, db)
    dx = None
    if mask[0]:
        full = np.empty(x.shape, t)  # owns its memory: autograd may take it as .grad
        if training:
            chan_affine(x3, g3, a, b, cc, full.reshape(x3.shape))
        else:
            chan_affine(g3, _NONE[t], a, b, b, full.reshape(x3.shape))  # b is zero
        dx = full.astype(x.dtype, copy=False)
    return dx, (dw if mask[1] else None), (db if mask[2] else None)


BATCH_NORM = declare(
    "batch_norm(Tensor input, Tensor? running_mean, Tensor? running_var, Tensor? weight=None, Tensor? bias=None, "
    "bool training=False, float momentum=0.1, float eps=1e-05) -> Tensor",
    category="normalization", method=False, kernels={"cpu": _k_batch_norm})
BATCH_NORM_BACKWARD = declare(
    "batch_norm_backward(Tensor grad_output, Tensor input, Tensor? weight, Tensor save_mean, Tensor save_invstd, "
    "bool training, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
    category="normalization", method=False, function=False, differentiable=False,
    kernels={"cpu": _k_batch_norm_backward})


def _check_float(x: Tensor, op: str) -> None:
    if not x.dtype.is_floating_point:
        raise RuntimeError(f"{op}: expected a floating point input, but got {x.dtype}")


def _check_vector(t, argname: str, c: int) -> None:
    if t is not None:
        check_tensor(t, argname, "batch_norm")
        if t.numel() != c:
            raise RuntimeError(f"{argname} should contain {c} elements not {t.numel()}")


def _data(t):
    return None if t is None else t._data


def _vec(t):
    """The data of a 1-D (or one-element) tensor as a 1-D array view (writes go through), or None."""
    return None if t is None else t._data.reshape(-1)


@BATCH_NORM.front
def batch_norm(input: Tensor, running_mean: Tensor | None, running_var: Tensor | None, weight: Tensor | None = None,
               bias: Tensor | None = None, training: bool = False, momentum: float = 0.1,
               eps: float = 1e-5) -> Tensor:
    """Batch normalisation over the channel dimension 1 of ``input`` ``(N, C, *)``.

    ``y = (x - mean) / sqrt(var + eps) * weight + bias`` per channel. In training the statistics
    are the batch's (biased variance) and ``running_mean``/``running_var`` (if given) are updated in
    place: ``running = (1 - momentum) * running + momentum * batch_stat``, with the unbiased
    variance, as torch does. In evaluation (``training=False``) the running statistics are used.

    Args:
        input: a floating tensor of shape ``(N, C)`` or ``(N, C, *)``.
        running_mean: ``(C,)`` running mean, or None (required when ``training=False``).
        running_var: ``(C,)`` running variance, or None.
        weight: ``(C,)`` scale, or None.
        bias: ``(C,)`` shift, or None.
        training: use (and update with) the batch statistics.
        momentum: the running statistics' update factor.
        eps: added to the variance for numerical stability.

    Returns:
        A tensor of ``input``'s shape and dtype.
    """
    check_tensor(input, "input", "batch_norm")
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected input of shape (N, C) or (N, C, *), but got input of size "
                         f"{input.shape}")
    _check_float(input, "batch_norm")
    c = input.shape[1]
    _check_vector(running_mean, "running_mean", c)
    _check_vector(running_var, "running_var", c)
    _check_vector(weight, "weight", c)
    _check_vector(bias, "bias", c)
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError(f"{'running_mean' if running_mean is None else 'running_var'} must be defined in "
                           "evaluation mode")
    if training and input.numel() // c == 1:
        raise ValueError(f"Expected more than 1 value per channel when training, got input size {input.shape}")
    if momentum is None:
        raise TypeError("batch_norm(): argument 'momentum' must be float, not NoneType")
    common_device(input, running_mean, running_var, weight, bias)  # the kernels take host arrays
    dev = input._device
    if training and input.numel():
        for t in (running_mean, running_var):
            if t is not None:
                t._storage._version += 1
    out, save_mean, save_invstd = BATCH_NORM.kernel(dev.type)(
        input._data, _vec(running_mean), _vec(running_var), _vec(weight), _vec(bias), bool(training),
        float(momentum), float(eps))
    out = _wrap(out, dev)
    if grad_state.enabled and (input._requires_grad or (weight is not None and weight._requires_grad)
                               or (bias is not None and bias._requires_grad)):
        record(BATCH_NORM, (input, running_mean, running_var, weight, bias, bool(training), float(momentum),
                            float(eps)),
               {"save_mean": _wrap(save_mean, dev), "save_invstd": _wrap(save_invstd, dev)}, out)
    return out


def _check_norm_backward(op: str, grad_output, input: Tensor, weight, per_channel: bool) -> int:
    """What every normalisation backward kernel indexes: ``grad_output`` of ``input``'s shape, dtype and
    device, and (``per_channel``) an input ``(N, C, *)`` and a ``weight`` of ``C`` elements on that device.
    Autograd hands these kernels the saved tensors, which a ``.data`` assignment may have changed since
    the forward. Returns ``C``."""
    check_tensor(grad_output, "grad_output", op)
    check_tensor(input, "input", op)
    if per_channel and input.ndim < 2:
        raise RuntimeError(f"{op}(): expected input of shape (N, C, *), got {_shape_list(input.shape)}")
    if tuple(grad_output.shape) != tuple(input.shape) or grad_output.dtype is not input.dtype:
        raise RuntimeError(f"{op}(): expected grad_output of input's shape {_shape_list(input.shape)} and dtype "
                           f"{input.dtype}, got {_shape_list(grad_output.shape)} and {grad_output.dtype}")
    c = input.shape[1] if input.ndim >= 2 else 0
    if weight is not None:
        check_tensor(weight, "weight", op)
        if per_channel and weight.numel() != c:
            raise RuntimeError(f"{op}(): expected weight of {c} elements (the channels of input "
                               f"{_shape_list(input.shape)}), got {_shape_list(weight.shape)}")
    common_device(input, grad_output, weight)
    return c


def _check_stat(t, argname: str, op: str, shape: tuple, input: Tensor) -> None:
    """A saved statistic of the forward: ``shape`` elements, on ``input``'s device."""
    check_tensor(t, argname, op)
    if t.numel() != math.prod(shape):
        raise RuntimeError(f"{op}(): expected {argname} of {math.prod(shape)} elements (one per normalised row "
                           f"of input {_shape_list(input.shape)}), got {_shape_list(t.shape)}")
    common_device(input, t)


def _grads_out(dev, grads):
    return tuple(None if g is None else _wrap(g, dev) for g in grads)


@BATCH_NORM_BACKWARD.front
def batch_norm_backward(grad_output: Tensor, input: Tensor, weight: Tensor | None, save_mean: Tensor,
                        save_invstd: Tensor, training: bool, output_mask=(True, True, True)) -> tuple:
    """Gradients of :func:`batch_norm` w.r.t. ``input``, ``weight`` and ``bias`` (fused, not differentiable).

    ``save_mean``/``save_invstd`` are the ``(C,)`` statistics the forward used (batch statistics in
    training, the running ones in evaluation). Returns ``(grad_input, grad_weight, grad_bias)``,
    None where ``output_mask`` is False.
    """
    c = _check_norm_backward("batch_norm_backward", grad_output, input, weight, True)
    for t, argname in ((save_mean, "save_mean"), (save_invstd, "save_invstd")):
        _check_stat(t, argname, "batch_norm_backward", (c,), input)
    dev = input._device
    return _grads_out(dev, BATCH_NORM_BACKWARD.kernel(dev.type)(
        grad_output._data, input._data, _data(weight), save_mean._data, save_invstd._data, bool(training),
        tuple(output_mask)))


# --- layer_norm ---------------------------------------------------------------------------------------
def _k_layer_norm(x, k, weight, bias, eps):
    xc = _compute(x)
    t = xc.dtype
    n = math.prod(x.shape[x.ndim - k:])
    rows = math.prod(x.shape[:x.ndim - k])
    if x.size == 0:
        return np.empty(x.shape, x.dtype), np.zeros(rows, t), np.zeros(rows, t)
    x2 = _as_rows(xc, rows)
    row_moments, affine = _kernels()[:2]
    mean = np.empty(rows, t)
    rstd = np.empty(rows, t)
    row_moments(x2, float(eps), mean, rstd)
    full = np.empty(x.shape, t)  # owns its memory: autograd may take it as .grad
    out = full.reshape(x2.shape)
    w = _ones(n, t) if weight is None else np.ascontiguousarray(weight.reshape(-1), t)
    b = _zeros(n, t) if bias is None else np.ascontiguousarray(bias.reshape(-1), t)
    affine(x2, mean, rstd, _zeros(rows, t), w, b, out)
    out = full
    return (out if out.dtype == x.dtype else out.astype(x.dtype)), mean, rstd


def _k_layer_norm_backward(grad, x, k, mean, rstd, weight, mask):
    xc = _compute(x)
    t = xc.dtype
    n = math.prod(x.shape[x.ndim - k:])
    rows = math.prod(x.shape[:x.ndim - k])
    wshape = x.shape[x.ndim - k:]
    if x.size == 0:
        return (np.zeros(x.shape, x.dtype) if mask[0] else None,
                np.zeros(wshape, t) if mask[1] else None, np.zeros(wshape, t) if mask[2] else None)
    x2 = _as_rows(xc, rows)
    g2 = _as_rows(_compute(grad), rows)
    chunks = max(1, min(_threads(), rows))
    dwp = np.empty((chunks, n))  # every row written by the kernel
    dbp = np.empty((chunks, n))
    full = np.empty(x.shape, t)
    dx = full.reshape(x2.shape)
    w = _ones(n, t) if weight is None else np.ascontiguousarray(weight.reshape(-1), t)
    _kernels()[4](g2, x2, w, np.ascontiguousarray(mean.reshape(-1), t), np.ascontiguousarray(rstd.reshape(-1), t),
                  dx, dwp, dbp)
    return (full.astype(x.dtype, copy=False) if mask[0] else None,
            dwp.sum(0).astype(t).reshape(wshape) if mask[1] else None,
            dbp.sum(0).astype(t).reshape(wshape) if mask[2] else None)


LAYER_NORM = declare(
    "layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) "
    "-> Tensor", category="normalization", method=False, kernels={"cpu": _k_layer_norm})
LAYER_NORM_BACKWARD = declare(
    "layer_norm_backward(Tensor grad_output, Tensor input, int[] normalized_shape, Tensor mean, Tensor rstd, "
    "Tensor? weight, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
    category="normalization", method=False, function=False, differentiable=False,
    kernels={"cpu": _k_layer_norm_backward})


def _shape_list(shape) -> str:
    return "[" + ", ".join(str(s) for s in shape) + "]"


def _normalize(op, input, kernel_arg, recorded_arg, weight, bias, eps):
    """Run layer_norm's or group_norm's kernel and record it with the statistics its backward reuses.

    ``kernel_arg``: what the kernel takes (the number of normalised dims, or of groups);
    ``recorded_arg``: the operator's own argument (``normalized_shape`` or ``num_groups``).
    """
    dev = input._device
    out, mean, rstd = op.kernel(dev.type)(input._data, kernel_arg, _data(weight), _data(bias), float(eps))
    out = _wrap(out, dev)
    if grad_state.enabled and (input._requires_grad or (weight is not None and weight._requires_grad)
                               or (bias is not None and bias._requires_grad)):
        record(op, (input, recorded_arg, weight, bias, float(eps)),
               {"save_mean": _wrap(mean, dev), "save_rstd": _wrap(rstd, dev)}, out)
    return out


@LAYER_NORM.front
def layer_norm(input: Tensor, normalized_shape, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Layer normalisation over the trailing dimensions ``normalized_shape`` of ``input``.

    ``y = (x - mean) / sqrt(var + eps) * weight + bias``, the mean and (biased) variance taken over
    the last ``len(normalized_shape)`` dimensions of each sample.

    Args:
        input: a floating tensor of shape ``(*, *normalized_shape)``.
        normalized_shape: an int or a sequence of ints, the trailing shape to normalise over.
        weight: elementwise scale of shape ``normalized_shape``, or None.
        bias: elementwise shift of shape ``normalized_shape``, or None.
        eps: added to the variance for numerical stability.

    Returns:
        A tensor of ``input``'s shape and dtype.
    """
    check_tensor(input, "input", "layer_norm")
    shape = (int(normalized_shape),) if isinstance(normalized_shape, int) else tuple(int(s) for s in normalized_shape)
    k = len(shape)
    if k == 0 or input.ndim < k or tuple(input.shape[input.ndim - k:]) != shape:
        raise RuntimeError(f"Given normalized_shape={_shape_list(shape)}, expected input with shape "
                           f"[*, {', '.join(str(s) for s in shape)}], but got input of size{_shape_list(input.shape)}")
    _check_float(input, "layer_norm")
    for t, argname in ((weight, "weight"), (bias, "bias")):
        if t is not None:
            check_tensor(t, argname, "layer_norm")
            if tuple(t.shape) != shape:
                raise RuntimeError(f"Expected {argname} to be of same shape as normalized_shape, but got {argname} of "
                                   f"shape {_shape_list(t.shape)} and normalized_shape = {_shape_list(shape)}")
    common_device(input, weight, bias)
    return _normalize(LAYER_NORM, input, k, shape, weight, bias, eps)


@LAYER_NORM_BACKWARD.front
def layer_norm_backward(grad_output: Tensor, input: Tensor, normalized_shape, mean: Tensor, rstd: Tensor,
                        weight: Tensor | None, output_mask=(True, True, True)) -> tuple:
    """Gradients of :func:`layer_norm` w.r.t. ``input``, ``weight`` and ``bias`` (fused, not differentiable).

    ``mean``/``rstd`` hold one value per normalised row, as the forward computed them. Returns
    ``(grad_input, grad_weight, grad_bias)``, None where ``output_mask`` is False.
    """
    shape = tuple(normalized_shape)
    k = len(shape)
    _check_norm_backward("layer_norm_backward", grad_output, input, weight, False)
    if k == 0 or tuple(input.shape[input.ndim - k:]) != shape or (weight is not None and tuple(weight.shape) != shape):
        raise RuntimeError(f"layer_norm_backward(): expected input of shape [*, {', '.join(map(str, shape))}] and "
                           f"weight of shape {_shape_list(shape)} (normalized_shape), got input of shape "
                           f"{_shape_list(input.shape)} and weight of shape "
                           f"{None if weight is None else _shape_list(weight.shape)}")
    rows = math.prod(input.shape[:input.ndim - k])
    for t, argname in ((mean, "mean"), (rstd, "rstd")):
        _check_stat(t, argname, "layer_norm_backward", (rows,), input)
    dev = input._device
    return _grads_out(dev, LAYER_NORM_BACKWARD.kernel(dev.type)(
        grad_output._data, input._data, len(normalized_shape), mean._data, rstd._data, _data(weight),
        tuple(output_mask)))


# --- group_norm ---------------------------------------------------------------------------------------
def _k_group_norm(x, groups, weight, bias, eps):
    n, c = x.shape[0], x.shape[1]
    xc = _compute(x)
    t = xc.dtype
    if x.size == 0:
        return np.empty(x.shape, x.dtype), np.zeros((n, groups), t), np.zeros((n, groups), t)
    row_moments, affine = _kernels()[:2]
    xg = _as_rows(xc, n * groups)
    mean = np.empty(n * groups, t)
    rstd = np.empty(n * groups, t)
    row_moments(xg, float(eps), mean, rstd)
    # per (n, c) block: ((x - mean[n, g]) * rstd[n, g] * w[c] + b[c])
    per = c // groups
    mu_b = np.repeat(mean, per)
    a_b = np.repeat(rstd, per).reshape(n, c)
    if weight is not None:
        a_b = a_b * weight
    c_b = np.zeros((n, c)) if bias is None else np.broadcast_to(bias.astype(np.float64), (n, c))
    x2 = xg.reshape(n * c, -1)
    full = np.empty(x.shape, t)  # owns its memory: autograd may take it as .grad
    out = full.reshape(x2.shape)
    length = x2.shape[1]
    affine(x2, mu_b, a_b.astype(t).reshape(-1), np.ascontiguousarray(c_b, t).reshape(-1), _ones(length, t),
           _zeros(length, t), out)
    out = full
    return (out if out.dtype == x.dtype else out.astype(x.dtype)), mean.reshape(n, groups), rstd.reshape(n, groups)


def _k_group_norm_backward(grad, x, groups, mean, rstd, weight, mask):
    n, c = x.shape[0], x.shape[1]
    xc = _compute(x)
    t = xc.dtype
    if x.size == 0:
        return (np.zeros(x.shape, x.dtype) if mask[0] else None,
                np.zeros(c, t) if mask[1] else None, np.zeros(c, t) if mask[2] else None)
    _, _, grad_sums, affine2 = _kernels()[:4]
    x2 = _as_rows(xc, n * c)
    g2 = _as_rows(_compute(grad), n * c)
    length = x2.shape[1]
    per = c // groups
    rstd64 = rstd.astype(np.float64).reshape(n, groups)
    mu_b = np.repeat(mean.reshape(-1).astype(t), per)
    sg = np.empty(n * c)
    sgx = np.empty(n * c)
    grad_sums(g2, x2, mu_b, sg, sgx)  # per (n, c): sum g, sum g * (x - mean[n, g])
    sg = sg.reshape(n, c)
    sgx = sgx.reshape(n, c)
    w = np.ones(c) if weight is None else weight.astype(np.float64)
    dx = dw = db = None
    if mask[0]:
        d = per * length
        r_b = np.repeat(rstd64, per, axis=1)  # (n, c)
        # dL/dxhat = g * w[c]; dx = rstd * (gh - mean(gh) - xhat * mean(gh * xhat)) over the group
        mgh = (sg * w).reshape(n, groups, per).sum(2) / d
        mghx = (sgx * w).reshape(n, groups, per).sum(2) * rstd64 / d
        a = r_b * w
        b = -np.repeat(rstd64 * rstd64 * mghx, per, axis=1)
        cc = -np.repeat(rstd64 * mgh, per, axis=1)
        full = np.empty(x.shape, t)  # owns its memory: autograd may take it as .grad
        out = full.reshape(x2.shape)
        affine2(g2, x2, mu_b, a.astype(t).reshape(-1), b.astype(t).reshape(-1), cc.astype(t).reshape(-1), out)
        dx = full.astype(x.dtype, copy=False)
    if mask[1]:
        dw = (sgx * np.repeat(rstd64, per, axis=1)).sum(0).astype(t)
    if mask[2]:
        db = sg.sum(0).astype(t)
    return dx, dw, db


GROUP_NORM = declare(
    "group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, float eps=1e-05) -> Tensor",
    category="normalization", method=False, kernels={"cpu": _k_group_norm})
GROUP_NORM_BACKWARD = declare(
    "group_norm_backward(Tensor grad_output, Tensor input, int num_groups, Tensor mean, Tensor rstd, "
    "Tensor? weight, bool[3] output_mask) -> (Tensor, Tensor, Tensor)",
    category="normalization", method=False, function=False, differentiable=False,
    kernels={"cpu": _k_group_norm_backward})


@GROUP_NORM.front
def group_norm(input: Tensor, num_groups: int, weight: Tensor | None = None, bias: Tensor | None = None,
               eps: float = 1e-5) -> Tensor:
    """Group normalisation: the channels of ``input`` ``(N, C, *)`` split into ``num_groups`` groups.

    Each sample's group is normalised by its own mean and (biased) variance, then scaled and
    shifted per channel: ``y = (x - mean) / sqrt(var + eps) * weight[c] + bias[c]``.

    Args:
        input: a floating tensor of shape ``(N, C, *)`` with ``C`` divisible by ``num_groups``.
        num_groups: the number of groups.
        weight: ``(C,)`` scale, or None.
        bias: ``(C,)`` shift, or None.
        eps: added to the variance for numerical stability.

    Returns:
        A tensor of ``input``'s shape and dtype.
    """
    check_tensor(input, "input", "group_norm")
    if input.ndim < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {input.ndim}")
    _check_float(input, "group_norm")
    c = input.shape[1]
    num_groups = int(num_groups)
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError("Expected number of channels in input to be divisible by num_groups, but got input of "
                           f"shape {_shape_list(input.shape)} and num_groups={num_groups}")
    for t, argname in ((weight, "weight"), (bias, "bias")):
        if t is not None:
            check_tensor(t, argname, "group_norm")
            if t.ndim != 1 or t.shape[0] != c:
                raise RuntimeError(f"Expected {argname} to be a vector of size equal to the number of channels in "
                                   f"input, but got {argname} of shape {_shape_list(t.shape)} and input of shape "
                                   f"{_shape_list(input.shape)}")
    common_device(input, weight, bias)
    return _normalize(GROUP_NORM, input, num_groups, num_groups, weight, bias, eps)


@GROUP_NORM_BACKWARD.front
def group_norm_backward(grad_output: Tensor, input: Tensor, num_groups: int, mean: Tensor, rstd: Tensor,
                        weight: Tensor | None, output_mask=(True, True, True)) -> tuple:
    """Gradients of :func:`group_norm` w.r.t. ``input``, ``weight`` and ``bias`` (fused, not differentiable).

    ``mean``/``rstd`` are the ``(N, num_groups)`` statistics of the forward. Returns
    ``(grad_input, grad_weight, grad_bias)``, None where ``output_mask`` is False.
    """
    c = _check_norm_backward("group_norm_backward", grad_output, input, weight, True)
    num_groups = int(num_groups)
    if num_groups <= 0 or c % num_groups:
        raise RuntimeError(f"group_norm_backward(): expected num_groups dividing the {c} channels, got {num_groups}")
    for t, argname in ((mean, "mean"), (rstd, "rstd")):
        _check_stat(t, argname, "group_norm_backward", (input.shape[0] * num_groups,), input)
    dev = input._device
    return _grads_out(dev, GROUP_NORM_BACKWARD.kernel(dev.type)(
        grad_output._data, input._data, int(num_groups), mean._data, rstd._data, _data(weight),
        tuple(output_mask)))

