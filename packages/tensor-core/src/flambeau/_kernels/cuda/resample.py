"""CUDA kernels of the upsampling operators (the CPU kernels: ``flambeau._kernels.cpu.resample``).

Conventions: those of ``flambeau._ops.resample`` (the CPU kernels'). Every kernel sees C-contiguous
``(P, H, W)`` planes; 1-D upsampling is 2-D upsampling of planes of height 1 (an identity along H).
Source indices and weights are computed on the device with the CPU kernels' (torch's) formulas in
the same dtypes: nearest in float32 (``floor(dst * scale)``, the identity and ``dst >> 1`` for
equal and doubled sizes), linear in the compute dtype (``align_corners`` or the half-pixel rule,
user scales or ``in / out``), width then height as the CPU's two matrix products.

The backward kernels gather: each input element sums the gradients of the outputs that read it.
Those outputs form one contiguous range per dimension, since the source index is non-decreasing
in the destination index; a binary search finds its start. Deterministic, no atomics. float32 and
float64 compute natively, float16 in float32.

grid_sampler_2d and grid_sampler_3d run one thread per output point (all channels), with the CPU's per-point
arithmetic (Note [One grid-sample point, two devices] in the CPU module); its backward, one thread
per output point too, scatters into grad_input with atomic adds (a point's taps are data-dependent,
so no gather order exists) and writes the point's grad_grid entry alone.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._dtype import np_name
from flambeau._kernels.cpu.resample import _scale_value, grid_point_fns
from flambeau._kernels.cuda._launch import be, bind_numba_cuda, jit, launch_1d, stream
from flambeau._kernels.cuda.pooling import cast_back, compute_input, plane_index_fn
from flambeau._ops._registry import kernel

__all__ = ["ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)


# --- device functions: source index along one dimension, and where an input index's range starts --------
@functools.cache
def _nearest_fns():
    bind_numba_cuda(globals())

    def near(o, n_in, n_out, scale):
        if n_out == n_in:
            return o
        if n_out == 2 * n_in:
            return o >> 1
        return min(int(math.floor(np.float32(o) * scale)), n_in - 1)

    near_d = cuda.jit(device=True)(near)

    def first_near(j, n_in, n_out, scale):
        # the first destination whose source index is >= j
        lo = 0
        hi = n_out
        while lo < hi:
            mid = (lo + hi) // 2
            if near_d(mid, n_in, n_out, scale) < j:
                lo = mid + 1
            else:
                hi = mid
        return lo

    return near_d, cuda.jit(device=True)(first_near)


@functools.cache
def _linear_fns(ct_name: str):
    bind_numba_cuda(globals())
    ct = np.dtype(ct_name).type

    def lin(o, n_in, n_out, align, ratio):
        # (i0, i1, lambda1): the destination reads (1 - lambda1) of source i0 and lambda1 of i1
        if n_out == n_in:
            return o, o, ct(0)
        if align:
            src = ratio * ct(o)
        else:
            src = ratio * (ct(o) + ct(0.5)) - ct(0.5)
            if src < ct(0):
                src = ct(0)
        i0 = min(int(math.floor(src)), n_in - 1)
        lam = src - ct(i0)
        if lam < ct(0):
            lam = ct(0)
        if lam > ct(1):
            lam = ct(1)
        return i0, (i0 + 1 if i0 < n_in - 1 else i0), lam

    lin_d = cuda.jit(device=True)(lin)

    def first_lin(j, n_in, n_out, align, ratio):
        # the first destination whose i0 is >= j
        lo = 0
        hi = n_out
        while lo < hi:
            mid = (lo + hi) // 2
            if lin_d(mid, n_in, n_out, align, ratio)[0] < j:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def weight(o, j, n_in, n_out, align, ratio):
        # the weight of source j in destination o
        i0, i1, lam = lin_d(o, n_in, n_out, align, ratio)
        w = ct(0)
        if i0 == j:
            w += ct(1) - lam
        if i1 == j:
            w += lam
        return w

    return lin_d, cuda.jit(device=True)(first_lin), cuda.jit(device=True)(weight)


# --- kernel templates ------------------------------------------------------------------------------------
def _nearest_py():
    bind_numba_cuda(globals())
    near, _ = _nearest_fns()
    pos = plane_index_fn()

    def nearest(out, x, P, H, W, OH, OW, sh, sw):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        n = P * OH * OW
        while i < n:
            p, oh, ow = pos(i, OH, OW)
            out[i] = x[p * H * W + near(oh, H, OH, sh) * W + near(ow, W, OW, sw)]
            i += step

    return nearest


def _nearest_backward_py(ct):
    bind_numba_cuda(globals())
    near, first = _nearest_fns()
    pos = plane_index_fn()

    def nearest_backward(gx, g, P, H, W, OH, OW, sh, sw):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        n = P * H * W
        while i < n:
            p, ih, iw = pos(i, H, W)
            base = p * OH * OW
            s = ct(0)
            oh = first(ih, H, OH, sh)
            while oh < OH and near(oh, H, OH, sh) == ih:
                ow = first(iw, W, OW, sw)
                while ow < OW and near(ow, W, OW, sw) == iw:
                    s += ct(g[base + oh * OW + ow])
                    ow += 1
                oh += 1
            gx[i] = s
            i += step

    return nearest_backward


def _linear_py(ct):
    bind_numba_cuda(globals())
    lin = _linear_fns(np_name(ct))[0]
    pos = plane_index_fn()

    def linear(out, x, P, H, W, OH, OW, align, rh, rw):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        n = P * OH * OW
        one = ct(1)
        while i < n:
            p, oh, ow = pos(i, OH, OW)
            base = p * H * W
            h0, h1, lh = lin(oh, H, OH, align, rh)
            w0, w1, lw = lin(ow, W, OW, align, rw)
            r0 = base + h0 * W
            r1 = base + h1 * W
            t0 = ct(x[r0 + w0]) * (one - lw) + ct(x[r0 + w1]) * lw
            t1 = ct(x[r1 + w0]) * (one - lw) + ct(x[r1 + w1]) * lw
            out[i] = t0 * (one - lh) + t1 * lh
            i += step

    return linear


def _linear_backward_py(ct):
    bind_numba_cuda(globals())
    lin, first, weight = _linear_fns(np_name(ct))
    pos = plane_index_fn()

    def linear_backward(gx, g, P, H, W, OH, OW, align, rh, rw):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        n = P * H * W
        while i < n:
            p, ih, iw = pos(i, H, W)
            base = p * OH * OW
            oh0 = first(ih - 1, H, OH, align, rh)
            ow0 = first(iw - 1, W, OW, align, rw)
            s = ct(0)
            ow = ow0
            while ow < OW and lin(ow, W, OW, align, rw)[0] <= iw:
                ww = weight(ow, iw, W, OW, align, rw)
                if ww != ct(0):
                    col = ct(0)
                    oh = oh0
                    while oh < OH and lin(oh, H, OH, align, rh)[0] <= ih:
                        col += weight(oh, ih, H, OH, align, rh) * ct(g[base + oh * OW + ow])
                        oh += 1
                    s += ww * col
                ow += 1
            gx[i] = s
            i += step

    return linear_backward


@functools.cache
def _kernel(which: str, ct: str):
    bind_numba_cuda(globals())
    t = np.dtype(ct).type
    py = {"nearest": lambda: _nearest_py(), "nearest_backward": lambda: _nearest_backward_py(t),
          "linear": lambda: _linear_py(t), "linear_backward": lambda: _linear_backward_py(t)}[which]()
    return jit(py)


# --- launchers -----------------------------------------------------------------------------------------
def _planes(shape):
    """``(P, H, W)`` of a ``(N, C, W)`` or ``(N, C, H, W)`` shape (1-D: planes of height 1)."""
    if len(shape) == 3:
        return shape[0] * shape[1], 1, shape[2]
    return shape[0] * shape[1], shape[2], shape[3]


def _hw(sizes: tuple) -> tuple:
    return (1,) + tuple(sizes) if len(sizes) == 1 else tuple(sizes)


def _launch(which, a, out_shape, loop_shape, make_args):
    """Run kernel ``which`` writing ``out_shape`` from ``a``; one thread per element of ``loop_shape``'s
    planes; ``make_args(ct)`` gives the arguments after the planes' sizes."""
    ac, back = compute_input(a)
    backend = be()
    out = backend.empty(tuple(out_shape), ac.dtype)
    n = out.size
    if n:
        P, H, W = _planes(tuple(loop_shape[0]))
        _, OH, OW = _planes(tuple(loop_shape[1]))
        grid, block = launch_1d(n)
        _kernel(which, np_name(ac.dtype))[grid, block, stream()](backend.flat_view(out), backend.flat_view(ac), P, H, W,
                                                             OH, OW, *make_args(ac.dtype.type))
    return cast_back(out, back)


def _nearest_scales(in_hw, out_hw, scales):
    scales = (None,) * (2 - len(scales)) + tuple(scales)
    return tuple(_scale_value(s, i, o, np.float32) for i, o, s in zip(_hw(in_hw), _hw(out_hw), scales))


def _linear_ratios(ct, in_hw, out_hw, align_corners, scales):
    scales = (None,) * (2 - len(scales)) + tuple(scales)
    ratios = []
    for i, o, s in zip(_hw(in_hw), _hw(out_hw), scales):
        if align_corners:
            ratios.append(ct(i - 1) / ct(o - 1) if o > 1 else ct(0))
        else:
            ratios.append(_scale_value(s, i, o, ct))
    return bool(align_corners), *ratios


def _nearest(x, output_size, *scales):
    out_shape = tuple(x.shape[:2]) + tuple(output_size)
    return _launch("nearest", x, out_shape, (x.shape, out_shape),
                   lambda ct: _nearest_scales(x.shape[2:], output_size, scales))


def _nearest_backward(g, output_size, input_size, *scales):
    return _launch("nearest_backward", g, input_size, (input_size, g.shape),
                   lambda ct: _nearest_scales(input_size[2:], output_size, scales))


def _linear(x, output_size, align_corners, *scales):
    out_shape = tuple(x.shape[:2]) + tuple(output_size)
    return _launch("linear", x, out_shape, (x.shape, out_shape),
                   lambda ct: _linear_ratios(ct, x.shape[2:], output_size, align_corners, scales))


def _linear_backward(g, output_size, input_size, align_corners, *scales):
    return _launch("linear_backward", g, input_size, (input_size, g.shape),
                   lambda ct: _linear_ratios(ct, input_size[2:], output_size, align_corners, scales))


@kernel("upsample_nearest1d", "cuda")
def upsample_nearest1d(x, output_size, scales=None):
    return _nearest(x, output_size, scales)


@kernel("upsample_nearest2d", "cuda")
def upsample_nearest2d(x, output_size, scales_h=None, scales_w=None):
    return _nearest(x, output_size, scales_h, scales_w)


@kernel("upsample_nearest1d_backward", "cuda")
def upsample_nearest1d_backward(g, output_size, input_size, scales=None):
    return _nearest_backward(g, output_size, input_size, scales)


@kernel("upsample_nearest2d_backward", "cuda")
def upsample_nearest2d_backward(g, output_size, input_size, scales_h=None, scales_w=None):
    return _nearest_backward(g, output_size, input_size, scales_h, scales_w)


@kernel("upsample_linear1d", "cuda")
def upsample_linear1d(x, output_size, align_corners, scales=None):
    return _linear(x, output_size, align_corners, scales)


@kernel("upsample_bilinear2d", "cuda")
def upsample_bilinear2d(x, output_size, align_corners, scales_h=None, scales_w=None):
    return _linear(x, output_size, align_corners, scales_h, scales_w)


@kernel("upsample_linear1d_backward", "cuda")
def upsample_linear1d_backward(g, output_size, input_size, align_corners, scales=None):
    return _linear_backward(g, output_size, input_size, align_corners, scales)


@kernel("upsample_bilinear2d_backward", "cuda")
def upsample_bilinear2d_backward(g, output_size, input_size, align_corners, scales_h=None, scales_w=None):
    return _linear_backward(g, output_size, input_size, align_corners, scales_h, scales_w)


# --- grid_sampler_2d / 3d -----------------------------------------------------------------------------
@functools.cache
def _grid_fns(ct_name: str):
    bind_numba_cuda(globals())

    def atomic_add(a, i, v):
        cuda.atomic.add(a, i, v)

    dev = cuda.jit(device=True)
    return grid_point_fns(dev, dev(atomic_add), np.dtype(ct_name).type)


def _grid_py(which: str, ct_name: str):
    """Kernel template ``which`` (forward2, backward2, forward3, backward3): one thread per output point;
    the arguments end with ``NP, C, D, H, W, OSP, mode, pad, align`` (D = 1 for 2-D)."""
    bind_numba_cuda(globals())
    fwd2, bwd2, fwd3, bwd3 = _grid_fns(ct_name)

    def forward2(out, x, grid, NP, C, D, H, W, OSP, mode, pad, align):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < NP:
            fwd2(out, x, grid, i, C, H, W, OSP, mode, pad, align)
            i += step

    def backward2(gin, ggrid, g, x, grid, NP, C, D, H, W, OSP, mode, pad, align):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < NP:
            bwd2(gin, ggrid, g, x, grid, i, C, H, W, OSP, mode, pad, align)
            i += step

    def forward3(out, x, grid, NP, C, D, H, W, OSP, mode, pad, align):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < NP:
            fwd3(out, x, grid, i, C, D, H, W, OSP, mode, pad, align)
            i += step

    def backward3(gin, ggrid, g, x, grid, NP, C, D, H, W, OSP, mode, pad, align):
        i = cuda.grid(1)
        step = cuda.gridsize(1)
        while i < NP:
            bwd3(gin, ggrid, g, x, grid, i, C, D, H, W, OSP, mode, pad, align)
            i += step

    return {"forward2": forward2, "backward2": backward2, "forward3": forward3, "backward3": backward3}[which]


@functools.cache
def _grid_kernel(which: str, ct_name: str):
    bind_numba_cuda(globals())
    return jit(_grid_py(which, ct_name))


def _grid_sizes(x, grid):
    """``(C, D, H, W, points per image)`` of an input and its grid (D = 1 for 2-D)."""
    spatial = tuple(x.shape[2:])
    d, h, w = ((1,) + spatial) if len(spatial) == 2 else spatial
    return x.shape[1], d, h, w, int(np.prod(grid.shape[1:-1]))


def _grid_forward(x, grid, modes):
    xc, back = compute_input(x)
    gc, _ = compute_input(grid)
    backend = be()
    out = backend.empty(tuple(x.shape[:2]) + tuple(grid.shape[1:-1]), xc.dtype)
    C, D, H, W, osp = _grid_sizes(x, grid)
    n_points = x.shape[0] * osp
    if out.size:
        blocks, threads = launch_1d(n_points)
        _grid_kernel(f"forward{len(x.shape) - 2}", np_name(xc.dtype))[blocks, threads, stream()](
            backend.flat_view(out), backend.flat_view(xc), backend.flat_view(gc), n_points, C, D, H, W, osp,
            int(modes[0]), int(modes[1]), bool(modes[2]))
    return cast_back(out, back)


def _grid_backward(g, x, grid, modes):
    xc, back = compute_input(x)
    gc, _ = compute_input(grid)
    goc, _ = compute_input(g)
    backend = be()
    gin = backend.full(tuple(x.shape), 0, xc.dtype)
    ggrid = backend.full(tuple(grid.shape), 0, xc.dtype)
    C, D, H, W, osp = _grid_sizes(x, grid)
    n_points = x.shape[0] * osp
    if n_points and C:
        blocks, threads = launch_1d(n_points)
        _grid_kernel(f"backward{len(x.shape) - 2}", np_name(xc.dtype))[blocks, threads, stream()](
            backend.flat_view(gin), backend.flat_view(ggrid), backend.flat_view(goc), backend.flat_view(xc),
            backend.flat_view(gc), n_points, C, D, H, W, osp, int(modes[0]), int(modes[1]), bool(modes[2]))
    return cast_back(gin, back), cast_back(ggrid, back)


@kernel("grid_sampler_2d", "cuda")
def grid_sampler_2d(x, grid, interpolation_mode, padding_mode, align_corners):
    return _grid_forward(x, grid, (interpolation_mode, padding_mode, align_corners))


@kernel("grid_sampler_3d", "cuda")
def grid_sampler_3d(x, grid, interpolation_mode, padding_mode, align_corners):
    return _grid_forward(x, grid, (interpolation_mode, padding_mode, align_corners))


@kernel("grid_sampler_2d_backward", "cuda")
def grid_sampler_2d_backward(g, x, grid, interpolation_mode, padding_mode, align_corners):
    return _grid_backward(g, x, grid, (interpolation_mode, padding_mode, align_corners))


@kernel("grid_sampler_3d_backward", "cuda")
def grid_sampler_3d_backward(g, x, grid, interpolation_mode, padding_mode, align_corners):
    return _grid_backward(g, x, grid, (interpolation_mode, padding_mode, align_corners))


# --- concrete signatures (PTX test) ---------------------------------------------------------------------
def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of the upsampling kernels for float32 and float64."""
    from numba import types
    from numba.np.numpy_support import from_dtype

    i64, f32 = types.int64, types.float32
    cases = []
    for dn in ("float32", "float64"):
        t = from_dtype(np.dtype(dn))
        ct = np.dtype(dn).type
        arr = types.Array(t, 1, "C")
        near_sig = (arr, arr) + (i64,) * 5 + (f32, f32)
        lin_sig = (arr, arr) + (i64,) * 5 + (types.boolean, t, t)
        cases += [(f"upsample_nearest:{dn}", _nearest_py(), near_sig),
                  (f"upsample_nearest_backward:{dn}", _nearest_backward_py(ct), near_sig),
                  (f"upsample_linear:{dn}", _linear_py(ct), lin_sig),
                  (f"upsample_linear_backward:{dn}", _linear_backward_py(ct), lin_sig)]
        grid_tail = (i64,) * 8 + (types.boolean,)
        for nd in (2, 3):
            cases += [(f"grid_sampler_{nd}d:{dn}", _grid_py(f"forward{nd}", dn), (arr, arr, arr) + grid_tail),
                      (f"grid_sampler_{nd}d_backward:{dn}", _grid_py(f"backward{nd}", dn), (arr,) * 5 + grid_tail)]
    return cases
