"""CPU kernels of the upsampling operators declared in ``flambeau/_ops/resample.py``.

Nearest and linear interpolation are separable: along each resized dimension the output is a
fixed linear map of the input, an ``(out, in)`` matrix with one (nearest) or two (linear) nonzero
weights per row, built from torch's source-index formulas exactly (``nearest_idx``,
``area_pixel_compute_source_index`` with ``align_corners``, user scales or ``in / out``) and
cached. Linear interpolation then is two BLAS matmuls (width, then height: torch's order of
operations), nearest a gather (``np.take``); the backward of both is the transposed matmuls.
Integer and float16 inputs compute in float32.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau._ops._registry import kernel

_matmul = np.matmul


def _scale_value(scale, n_in, n_out, dtype):
    """torch's compute_scales_value: ``1 / scale`` if given and positive, else ``in / out``."""
    if scale is not None and scale > 0:
        return dtype(1.0 / scale)
    return dtype(n_in) / dtype(n_out)


@functools.lru_cache(maxsize=256)
def _nearest_index(n_in: int, n_out: int, scale):
    if n_out == n_in:
        return np.arange(n_out)
    if n_out == 2 * n_in:
        return np.arange(n_out) >> 1
    s = _scale_value(scale, n_in, n_out, np.float32)
    return np.minimum(np.floor(np.arange(n_out, dtype=np.float32) * s).astype(np.int64), n_in - 1)


@functools.lru_cache(maxsize=256)
def _nearest_matrix(n_in: int, n_out: int, scale, npdt):
    a = np.zeros((n_out, n_in), npdt)
    a[np.arange(n_out), _nearest_index(n_in, n_out, scale)] = 1
    return a


@functools.lru_cache(maxsize=256)
def _linear_taps(n_in: int, n_out: int, align_corners: bool, scale, npdt):
    """``(i0, i1, lam1)``: each output position's two source positions along one dimension and the weight of the
    second (the first's is ``1 - lam1``), as torch's linear interpolation computes them."""
    t = npdt.type
    if align_corners:
        ratio = t(n_in - 1) / t(n_out - 1) if n_out > 1 else t(0)
        src = ratio * np.arange(n_out, dtype=npdt)
    else:
        ratio = _scale_value(scale, n_in, n_out, t)
        src = np.maximum(ratio * (np.arange(n_out, dtype=npdt) + t(0.5)) - t(0.5), t(0))
    i0 = np.minimum(np.floor(src).astype(np.int64), n_in - 1)
    lam1 = np.clip(src - i0.astype(npdt), 0, 1).astype(npdt)
    return i0, i0 + (i0 < n_in - 1), lam1


@functools.lru_cache(maxsize=256)
def _linear_matrix(n_in: int, n_out: int, align_corners: bool, scale, npdt):
    """``(n_out, n_in)`` weights of torch's linear interpolation along one dimension (the backward's GEMM)."""
    a = np.zeros((n_out, n_in), npdt)
    rows = np.arange(n_out)
    if n_out == n_in:
        a[rows, rows] = 1
        return a
    i0, i1, lam1 = _linear_taps(n_in, n_out, align_corners, scale, npdt)
    np.add.at(a, (rows, i0), (npdt.type(1) - lam1).astype(npdt))
    np.add.at(a, (rows, i1), lam1)
    return a


def _lerp_along(x, axis: int, n_out: int, align_corners: bool, scale):
    """``x`` resampled linearly along ``axis`` to ``n_out`` positions from each one's two source taps.

    Note [Linear resampling by taps]: upsampling is a GEMM with the weight matrix (one pass of BLAS, the fastest
    here: 9.6 ms against 26 ms by taps for a (32, 64, 32, 32) batch doubled), downsampling reads two taps per output
    (a GEMM's n_in reads per output cost more: 2.5 against 1.2 ms for 224 -> 112), and so does any input holding a
    NaN or an infinity: a GEMM reads every input position of a row (0 * inf = NaN), so one non-finite value spread
    over the whole row, where torch's kernels read two taps and touch its neighbours only."""
    n_in = x.shape[axis]
    if n_in == n_out:
        return x
    i0, i1, lam1 = _linear_taps(n_in, n_out, align_corners, scale, x.dtype)
    shape = [1] * x.ndim
    shape[axis] = n_out
    lam1 = lam1.reshape(shape)
    return np.take(x, i0, axis=axis) * (1 - lam1) + np.take(x, i1, axis=axis) * lam1


def _compute_dtype(x):
    return x.dtype if x.dtype in (np.float32, np.float64) else np.dtype(np.float32)


def _apply_w(x, a):
    """``x @ a.T`` over the last dim as one GEMM."""
    lead = x.shape[:-1]
    y = _matmul(np.ascontiguousarray(x).reshape(-1, x.shape[-1]), a.T)
    return y.reshape(lead + (a.shape[0],))


def _apply_h(x, a):
    """``a @ x`` over dim -2 (batched over the leading dims)."""
    return _matmul(a, x)


@kernel("upsample_nearest1d", "cpu")
def _k_nearest1d(x, output_size, scales=None):
    return np.take(x, _nearest_index(x.shape[-1], output_size[0], scales), axis=-1)


@kernel("upsample_nearest2d", "cpu")
def _k_nearest2d(x, output_size, scales_h=None, scales_w=None):
    ih = _nearest_index(x.shape[-2], output_size[0], scales_h)
    iw = _nearest_index(x.shape[-1], output_size[1], scales_w)
    return np.take(np.take(x, ih, axis=-2), iw, axis=-1)


@kernel("upsample_nearest1d_backward", "cpu")
def _k_nearest1d_backward(g, output_size, input_size, scales=None):
    cdt = _compute_dtype(g)
    a = _nearest_matrix(input_size[-1], output_size[0], scales, cdt)
    return _apply_w(g.astype(cdt, copy=False), a.T).astype(g.dtype, copy=False)


@kernel("upsample_nearest2d_backward", "cpu")
def _k_nearest2d_backward(g, output_size, input_size, scales_h=None, scales_w=None):
    cdt = _compute_dtype(g)
    ah = _nearest_matrix(input_size[-2], output_size[0], scales_h, cdt)
    aw = _nearest_matrix(input_size[-1], output_size[1], scales_w, cdt)
    y = _apply_h(_apply_w(g.astype(cdt, copy=False), aw.T), ah.T)
    return y.astype(g.dtype, copy=False)


@kernel("upsample_linear1d", "cpu")
def _k_linear1d(x, output_size, align_corners, scales=None):
    cdt = _compute_dtype(x)
    if output_size[0] < x.shape[-1] or not np.isfinite(x).all():  # Note [Linear resampling by taps]
        y = _lerp_along(x.astype(cdt, copy=False), -1, output_size[0], bool(align_corners), scales)
        return np.array(y, dtype=x.dtype, copy=y is x)
    a = _linear_matrix(x.shape[-1], output_size[0], bool(align_corners), scales, cdt)
    return _apply_w(x.astype(cdt, copy=False), a).astype(x.dtype, copy=False)


@kernel("upsample_bilinear2d", "cpu")
def _k_bilinear2d(x, output_size, align_corners, scales_h=None, scales_w=None):
    cdt = _compute_dtype(x)
    shrinks = output_size[0] < x.shape[-2] or output_size[1] < x.shape[-1]
    if shrinks or not np.isfinite(x).all():  # Note [Linear resampling by taps]
        y = _lerp_along(x.astype(cdt, copy=False), -1, output_size[1], bool(align_corners), scales_w)
        y = _lerp_along(y, -2, output_size[0], bool(align_corners), scales_h)
        return np.array(y, dtype=x.dtype, copy=y is x)
    ah = _linear_matrix(x.shape[-2], output_size[0], bool(align_corners), scales_h, cdt)
    aw = _linear_matrix(x.shape[-1], output_size[1], bool(align_corners), scales_w, cdt)
    return _apply_h(_apply_w(x.astype(cdt, copy=False), aw), ah).astype(x.dtype, copy=False)


@kernel("upsample_linear1d_backward", "cpu")
def _k_linear1d_backward(g, output_size, input_size, align_corners, scales=None):
    cdt = _compute_dtype(g)
    a = _linear_matrix(input_size[-1], output_size[0], bool(align_corners), scales, cdt)
    return _apply_w(g.astype(cdt, copy=False), a.T).astype(g.dtype, copy=False)


@kernel("upsample_bilinear2d_backward", "cpu")
def _k_bilinear2d_backward(g, output_size, input_size, align_corners, scales_h=None, scales_w=None):
    cdt = _compute_dtype(g)
    ah = _linear_matrix(input_size[-2], output_size[0], bool(align_corners), scales_h, cdt)
    aw = _linear_matrix(input_size[-1], output_size[1], bool(align_corners), scales_w, cdt)
    return _apply_w(_apply_h(g.astype(cdt, copy=False), ah.T), aw.T).astype(g.dtype, copy=False)



# --- grid_sampler_2d -------------------------------------------------------------------------------------
# Note [One grid-sample point, two devices]: the arithmetic of one output point of grid_sampler_2d
# (torch's GridSampler.h: unnormalize, clip and reflect with their gradients, bilinear, nearest and
# bicubic taps) is written once, in plain Python, by ``grid_point_fns(jit, add, ct)``; the CPU builds it
# with ``numba.njit`` and an ordinary ``+=``, the CUDA module with ``cuda.jit(device=True)`` and an atomic
# add. ``ct`` is the compute dtype (float32 for float16 and float32 inputs, float64 for float64) so that
# the constants do not promote float32 arithmetic to float64, as torch computes in the input's type.
# Arrays are flat and C-contiguous: input ``(N, C, H, W)``, grid ``(N, OH, OW, 2)``, output
# ``(N, C, OH, OW)``. Modes are torch's enums: interpolation bilinear 0, nearest 1, bicubic 2; padding
# zeros 0, border 1, reflection 2.
def grid_point_fns(jit, add, ct):
    """``(forward_point, backward_point, forward_point3, backward_point3)`` device functions of
    grid_sampler_2d and grid_sampler_3d (Note above)."""
    import math

    # (math.floor gives an int64 in numba: results are cast back to ct so float32 stays float32)
    zero, one, two, half = ct(0), ct(1), ct(2), ct(0.5)
    a_cubic = ct(-0.75)

    @jit
    def unnormalize(coord, size, align):
        # (source coordinate, its derivative with respect to ``coord``)
        if align:
            return (coord + one) / two * ct(size - 1), ct(size - 1) / two
        return ((coord + one) * ct(size) - one) / two, ct(size) / two

    @jit
    def clip(x, size):
        if x <= zero:
            return zero, zero
        top = ct(size - 1)
        if x >= top:
            return top, zero
        return x, one

    @jit
    def reflect(x, twice_low, twice_high):
        if twice_low == twice_high:
            return zero, zero
        low = ct(twice_low) / two
        span = ct(twice_high - twice_low) / two
        x = x - low
        sign = one
        if x < zero:
            sign = -one
            x = -x
        flips = ct(math.floor(x / span))
        extra = x - span * flips  # fmod(x, span) for x >= 0 (numba's CPU target has no math.fmod)
        flips = int(flips)
        if flips % 2 == 0:
            return extra + low, sign
        return span - extra + low, -sign

    @jit
    def coordinates(x, size, pad, align):
        # torch's compute_coordinates (and its derivative): padding applied, then out-of-int-range -> -100
        g = one
        if pad == 1:
            x, g = clip(x, size)
        elif pad == 2:
            if align:
                x, g = reflect(x, 0, 2 * (size - 1))
            else:
                x, g = reflect(x, -1, 2 * size - 1)
            x, gc = clip(x, size)
            g = g * gc
        if not math.isfinite(x) or x > ct(2147483646.0) or x < ct(-2147483648.0):
            x = ct(-100)
        return x, g

    @jit
    def source_index(coord, size, pad, align):
        x, g0 = unnormalize(coord, size, align)
        x, g1 = coordinates(x, size, pad, align)
        return x, g0 * g1

    @jit
    def round_even(x):
        # std::nearbyint under the default rounding mode: halves go to the even neighbour
        f = ct(math.floor(x))
        d = x - f
        if d > half or (d == half and f - two * ct(math.floor(f / two)) != zero):
            f += one
        return int(f)

    @jit
    def cubic_weight(t, i):
        # Keys' cubic convolution weight (A = -0.75) of tap i in 0..3 at fraction t
        if i == 0:
            x = t + one
            return ((a_cubic * x - ct(5) * a_cubic) * x + ct(8) * a_cubic) * x - ct(4) * a_cubic
        if i == 1:
            return ((a_cubic + two) * t - (a_cubic + ct(3))) * t * t + one
        if i == 2:
            x = one - t
            return ((a_cubic + two) * x - (a_cubic + ct(3))) * x * x + one
        x = two - t
        return ((a_cubic * x - ct(5) * a_cubic) * x + ct(8) * a_cubic) * x - ct(4) * a_cubic

    @jit
    def cubic_weight_grad(t, i):
        if i == 0:
            x = -one - t
            return (-ct(3) * a_cubic * x - ct(10) * a_cubic) * x - ct(8) * a_cubic
        if i == 1:
            x = -t
            return (-ct(3) * (a_cubic + two) * x - two * (a_cubic + ct(3))) * x
        if i == 2:
            x = one - t
            return (ct(3) * (a_cubic + two) * x - two * (a_cubic + ct(3))) * x
        x = two - t
        return (ct(3) * a_cubic * x - ct(10) * a_cubic) * x + ct(8) * a_cubic

    @jit
    def tap(xi, yi, W, H, pad, align):
        # flat offset in a plane of the bicubic tap (xi, yi) after padding, or -1 outside
        cx, _ = coordinates(ct(xi), W, pad, align)
        cy, _ = coordinates(ct(yi), H, pad, align)
        ix = int(cx)
        iy = int(cy)
        if 0 <= ix < W and 0 <= iy < H:
            return iy * W + ix
        return -1

    @jit
    def corner(ix, iy, W, H):
        if 0 <= ix < W and 0 <= iy < H:
            return iy * W + ix
        return -1

    @jit
    def point_base(grid, p, C, HW, OHW):
        # point p = (n * OH + oh) * OW + ow: its grid (x, y), input image offset and output offset
        n = p // OHW
        return ct(grid[2 * p]), ct(grid[2 * p + 1]), n * C * HW, n * C * OHW + (p - n * OHW)

    @jit
    def cubic_origin(gx, gy, W, H, align):
        # (tx, ty, first tap x, first tap y, d ix / d gx, d iy / d gy) of bicubic interpolation
        ix, mx = unnormalize(gx, W, align)
        iy, my = unnormalize(gy, H, align)
        fx = ct(math.floor(ix))
        fy = ct(math.floor(iy))
        return ix - fx, iy - fy, int(fx) - 1, int(fy) - 1, mx, my

    @jit
    def bilinear_corners(ix, iy, W, H):
        # (floor(ix), floor(iy), flat offsets of the nw, ne, sw, se neighbours or -1 outside)
        fx = ct(math.floor(ix))
        fy = ct(math.floor(iy))
        x0 = int(fx)
        y0 = int(fy)
        return fx, fy, corner(x0, y0, W, H), corner(x0 + 1, y0, W, H), corner(x0, y0 + 1, W, H), \
            corner(x0 + 1, y0 + 1, W, H)

    @jit
    def forward_point(out, x, grid, p, C, H, W, OHW, mode, pad, align):
        # output point p, all channels
        HW = H * W
        gx, gy, xb, ob = point_base(grid, p, C, HW, OHW)
        if mode == 2:
            # row by row, the taps and weights computed once for all channels; the sums keep torch's order
            # (each row's four taps, then the rows), accumulated in ``out``
            tx, ty, x0, y0, _, _ = cubic_origin(gx, gy, W, H, align)
            wx0 = cubic_weight(tx, 0)
            wx1 = cubic_weight(tx, 1)
            wx2 = cubic_weight(tx, 2)
            wx3 = cubic_weight(tx, 3)
            for c in range(C):
                out[ob + c * OHW] = zero
            for j in range(4):
                wy = cubic_weight(ty, j)
                k0 = tap(x0, y0 + j, W, H, pad, align)
                k1 = tap(x0 + 1, y0 + j, W, H, pad, align)
                k2 = tap(x0 + 2, y0 + j, W, H, pad, align)
                k3 = tap(x0 + 3, y0 + j, W, H, pad, align)
                for c in range(C):
                    b = xb + c * HW
                    row = (ct(x[b + k0]) if k0 >= 0 else zero) * wx0
                    row += (ct(x[b + k1]) if k1 >= 0 else zero) * wx1
                    row += (ct(x[b + k2]) if k2 >= 0 else zero) * wx2
                    row += (ct(x[b + k3]) if k3 >= 0 else zero) * wx3
                    out[ob + c * OHW] += row * wy
            return
        ix, _ = source_index(gx, W, pad, align)
        iy, _ = source_index(gy, H, pad, align)
        if mode == 1:
            k = corner(round_even(ix), round_even(iy), W, H)
            for c in range(C):
                out[ob + c * OHW] = ct(x[xb + c * HW + k]) if k >= 0 else zero
            return
        fx, fy, knw, kne, ksw, kse = bilinear_corners(ix, iy, W, H)
        nw = (fx + one - ix) * (fy + one - iy)
        ne = (ix - fx) * (fy + one - iy)
        sw = (fx + one - ix) * (iy - fy)
        se = (ix - fx) * (iy - fy)
        for c in range(C):
            b = xb + c * HW
            acc = zero
            if knw >= 0:
                acc += ct(x[b + knw]) * nw
            if kne >= 0:
                acc += ct(x[b + kne]) * ne
            if ksw >= 0:
                acc += ct(x[b + ksw]) * sw
            if kse >= 0:
                acc += ct(x[b + kse]) * se
            out[ob + c * OHW] = acc

    @jit
    def backward_point(gin, ggrid, gout, x, grid, p, C, H, W, OHW, mode, pad, align):
        # adds point p's share of grad_input into gin (through ``add``), writes its grad_grid
        HW = H * W
        gx, gy, xb, ob = point_base(grid, p, C, HW, OHW)
        gix = zero
        giy = zero
        if mode == 2:
            # each of the 16 taps (and its weights) once, all channels inside (torch loops over channels
            # outside: the grid gradient's sum runs in another order, equal to rounding)
            tx, ty, x0, y0, mx, my = cubic_origin(gx, gy, W, H, align)
            for i in range(4):
                wx = cubic_weight(tx, i)
                dwx = cubic_weight_grad(tx, i)
                for j in range(4):
                    k = tap(x0 + i, y0 + j, W, H, pad, align)
                    if k >= 0:
                        wy = cubic_weight(ty, j)
                        dwy = cubic_weight_grad(ty, j)
                        for c in range(C):
                            go = ct(gout[ob + c * OHW])
                            b = xb + c * HW
                            add(gin, b + k, go * wx * wy)
                            v = ct(x[b + k])
                            gix -= v * dwx * wy * go
                            giy -= v * dwy * wx * go
            ggrid[2 * p] = mx * gix
            ggrid[2 * p + 1] = my * giy
            return
        ix, mx = source_index(gx, W, pad, align)
        iy, my = source_index(gy, H, pad, align)
        if mode == 1:
            k = corner(round_even(ix), round_even(iy), W, H)
            if k >= 0:
                for c in range(C):
                    add(gin, xb + c * HW + k, ct(gout[ob + c * OHW]))
            ggrid[2 * p] = zero
            ggrid[2 * p + 1] = zero
            return
        fx, fy, knw, kne, ksw, kse = bilinear_corners(ix, iy, W, H)
        wx1 = ix - fx
        wx0 = fx + one - ix
        wy1 = iy - fy
        wy0 = fy + one - iy
        for c in range(C):
            go = ct(gout[ob + c * OHW])
            b = xb + c * HW
            if knw >= 0:
                add(gin, b + knw, wx0 * wy0 * go)
                v = ct(x[b + knw])
                gix -= v * wy0 * go
                giy -= v * wx0 * go
            if kne >= 0:
                add(gin, b + kne, wx1 * wy0 * go)
                v = ct(x[b + kne])
                gix += v * wy0 * go
                giy -= v * wx1 * go
            if ksw >= 0:
                add(gin, b + ksw, wx0 * wy1 * go)
                v = ct(x[b + ksw])
                gix -= v * wy1 * go
                giy += v * wx0 * go
            if kse >= 0:
                add(gin, b + kse, wx1 * wy1 * go)
                v = ct(x[b + kse])
                gix += v * wy1 * go
                giy += v * wx1 * go
        ggrid[2 * p] = mx * gix
        ggrid[2 * p + 1] = my * giy

    @jit
    def corner3(ix, iy, iz, W, H, D):
        if 0 <= ix < W and 0 <= iy < H and 0 <= iz < D:
            return (iz * H + iy) * W + ix
        return -1

    @jit
    def axis_weight(i, d):
        # (weight, sign of its derivative) of neighbour d (0: floor, 1: floor + 1) of coordinate i
        f = ct(math.floor(i))
        if d == 1:
            return i - f, one
        return f + one - i, -one

    @jit
    def trilinear_tap(j, ix, iy, iz, W, H, D):
        # neighbour j = dx + 2 dy + 4 dz (torch's tnw, tne, tsw, tse, bnw ... order): its flat offset (or -1
        # outside), the three axis weights and their derivatives' signs
        dx = j & 1
        dy = (j >> 1) & 1
        dz = j >> 2
        wx, sx = axis_weight(ix, dx)
        wy, sy = axis_weight(iy, dy)
        wz, sz = axis_weight(iz, dz)
        k = corner3(int(math.floor(ix)) + dx, int(math.floor(iy)) + dy, int(math.floor(iz)) + dz, W, H, D)
        return k, wx, wy, wz, sx, sy, sz

    @jit
    def point_setup3(grid, p, C, DHW, OSP, D, H, W, pad, align):
        # point p of a volumetric grid: source (ix, iy, iz), their derivatives, input and output offsets
        n = p // OSP
        ix, mx = source_index(ct(grid[3 * p]), W, pad, align)
        iy, my = source_index(ct(grid[3 * p + 1]), H, pad, align)
        iz, mz = source_index(ct(grid[3 * p + 2]), D, pad, align)
        return ix, iy, iz, mx, my, mz, n * C * DHW, n * C * OSP + (p - n * OSP)

    @jit
    def forward_point3(out, x, grid, p, C, D, H, W, OSP, mode, pad, align):
        # torch's grid_sampler_3d (trilinear: its tnw, tne, tsw, tse, bnw ... order and weights)
        DHW = D * H * W
        ix, iy, iz, _, _, _, xb, ob = point_setup3(grid, p, C, DHW, OSP, D, H, W, pad, align)
        if mode == 1:
            k = corner3(round_even(ix), round_even(iy), round_even(iz), W, H, D)
            for c in range(C):
                out[ob + c * OSP] = ct(x[xb + c * DHW + k]) if k >= 0 else zero
            return
        for c in range(C):
            b = xb + c * DHW
            acc = zero
            for j in range(8):
                k, wx, wy, wz, _, _, _ = trilinear_tap(j, ix, iy, iz, W, H, D)
                if k >= 0:
                    acc += ct(x[b + k]) * (wx * wy * wz)
            out[ob + c * OSP] = acc

    @jit
    def backward_point3(gin, ggrid, gout, x, grid, p, C, D, H, W, OSP, mode, pad, align):
        DHW = D * H * W
        ix, iy, iz, mx, my, mz, xb, ob = point_setup3(grid, p, C, DHW, OSP, D, H, W, pad, align)
        if mode == 1:
            k = corner3(round_even(ix), round_even(iy), round_even(iz), W, H, D)
            if k >= 0:
                for c in range(C):
                    add(gin, xb + c * DHW + k, ct(gout[ob + c * OSP]))
            ggrid[3 * p] = zero
            ggrid[3 * p + 1] = zero
            ggrid[3 * p + 2] = zero
            return
        gix = zero
        giy = zero
        giz = zero
        for c in range(C):
            go = ct(gout[ob + c * OSP])
            b = xb + c * DHW
            for j in range(8):
                k, wx, wy, wz, sx, sy, sz = trilinear_tap(j, ix, iy, iz, W, H, D)
                if k >= 0:
                    add(gin, b + k, wx * wy * wz * go)
                    v = ct(x[b + k])
                    gix += sx * v * wy * wz * go
                    giy += sy * v * wx * wz * go
                    giz += sz * v * wx * wy * go
        ggrid[3 * p] = mx * gix
        ggrid[3 * p + 1] = my * giy
        ggrid[3 * p + 2] = mz * giz

    return forward_point, backward_point, forward_point3, backward_point3


@functools.cache
def _grid_numba(ct_name: str):
    """The CPU grid_sampler_2d loops for compute dtype ``ct_name``, compiled on first use."""
    import numba
    from numba import prange

    def add(a, i, v):
        a[i] += v

    jit = numba.njit
    fwd_point, bwd_point, fwd_point3, bwd_point3 = grid_point_fns(jit, jit(add), np.dtype(ct_name).type)

    @numba.njit(parallel=True, nogil=True)
    def forward(out, x, grid, N, C, H, W, OH, OW, mode, pad, align):
        # one task per output row (n, oh)
        OHW = OH * OW
        for r in prange(N * OH):
            for ow in range(OW):
                fwd_point(out, x, grid, r * OW + ow, C, H, W, OHW, mode, pad, align)

    @numba.njit(parallel=True, nogil=True)
    def backward(gin, ggrid, gout, x, grid, N, C, H, W, OH, OW, mode, pad, align):
        # one task per image: the points of an image scatter into its own slice of gin, serially (no races)
        OHW = OH * OW
        for n in prange(N):
            for q in range(OHW):
                bwd_point(gin, ggrid, gout, x, grid, n * OHW + q, C, H, W, OHW, mode, pad, align)

    @numba.njit(parallel=True, nogil=True)
    def forward3(out, x, grid, N, C, D, H, W, OD, OH, OW, mode, pad, align):
        # one task per output row (n, od, oh)
        OSP = OD * OH * OW
        for r in prange(N * OD * OH):
            for ow in range(OW):
                fwd_point3(out, x, grid, r * OW + ow, C, D, H, W, OSP, mode, pad, align)

    @numba.njit(parallel=True, nogil=True)
    def backward3(gin, ggrid, gout, x, grid, N, C, D, H, W, OD, OH, OW, mode, pad, align):
        # one task per volume (its points scatter into its own slice of gin, serially)
        OSP = OD * OH * OW
        for n in prange(N):
            for q in range(OSP):
                bwd_point3(gin, ggrid, gout, x, grid, n * OSP + q, C, D, H, W, OSP, mode, pad, align)

    return forward, backward, forward3, backward3


def _flat(a, cdt):
    return np.ascontiguousarray(a, dtype=cdt).reshape(-1)


@kernel("grid_sampler_2d", "cpu")
def _k_grid_sampler_2d(x, grid, interpolation_mode, padding_mode, align_corners):
    cdt = _compute_dtype(x)
    N, C, H, W = x.shape
    OH, OW = grid.shape[1], grid.shape[2]
    out = np.empty((N, C, OH, OW), cdt)
    if out.size:
        _grid_numba(cdt.name)[0](out.reshape(-1), _flat(x, cdt), _flat(grid, cdt), N, C, H, W, OH, OW,
                                 int(interpolation_mode), int(padding_mode), bool(align_corners))
    return out.astype(x.dtype, copy=False)


@kernel("grid_sampler_2d_backward", "cpu")
def _k_grid_sampler_2d_backward(g, x, grid, interpolation_mode, padding_mode, align_corners):
    cdt = _compute_dtype(x)
    N, C, H, W = x.shape
    OH, OW = grid.shape[1], grid.shape[2]
    gin = np.zeros(x.shape, cdt)
    ggrid = np.zeros(grid.shape, cdt)
    if g.size:
        _grid_numba(cdt.name)[1](gin.reshape(-1), ggrid.reshape(-1), _flat(g, cdt), _flat(x, cdt), _flat(grid, cdt),
                                 N, C, H, W, OH, OW, int(interpolation_mode), int(padding_mode),
                                 bool(align_corners))
    return gin.astype(x.dtype, copy=False), ggrid.astype(grid.dtype, copy=False)


@kernel("grid_sampler_3d", "cpu")
def _k_grid_sampler_3d(x, grid, interpolation_mode, padding_mode, align_corners):
    cdt = _compute_dtype(x)
    N, C, D, H, W = x.shape
    OD, OH, OW = grid.shape[1:4]
    out = np.empty((N, C, OD, OH, OW), cdt)
    if out.size:
        _grid_numba(cdt.name)[2](out.reshape(-1), _flat(x, cdt), _flat(grid, cdt), N, C, D, H, W, OD, OH, OW,
                                 int(interpolation_mode), int(padding_mode), bool(align_corners))
    return out.astype(x.dtype, copy=False)


@kernel("grid_sampler_3d_backward", "cpu")
def _k_grid_sampler_3d_backward(g, x, grid, interpolation_mode, padding_mode, align_corners):
    cdt = _compute_dtype(x)
    N, C, D, H, W = x.shape
    OD, OH, OW = grid.shape[1:4]
    gin = np.zeros(x.shape, cdt)
    ggrid = np.zeros(grid.shape, cdt)
    if g.size:
        _grid_numba(cdt.name)[3](gin.reshape(-1), ggrid.reshape(-1), _flat(g, cdt), _flat(x, cdt), _flat(grid, cdt),
                                 N, C, D, H, W, OD, OH, OW, int(interpolation_mode), int(padding_mode),
                                 bool(align_corners))
    return gin.astype(x.dtype, copy=False), ggrid.astype(grid.dtype, copy=False)
