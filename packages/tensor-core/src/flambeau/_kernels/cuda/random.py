"""CUDA kernels of the random operators: samples drawn on the device from a counter-based Philox generator.

Note [Philox on the device]
    Every CUDA generator (``flambeau.Generator(device='cuda')``, one default per device) is a
    64-bit seed and a 64-bit *offset*; a launch takes the offset and advances it by one
    (``Generator._philox_next``). Element ``i`` of a launch belongs to group ``g = i // V``, and
    group ``g`` draws four 32-bit words from Philox4x32-10 (Salmon et al., SC'11; the generator
    of cuRAND and of torch's CUDA backend) with counter ``(g, offset)`` and key ``seed``. A sample
    therefore depends only on (seed, offset, i): not on the grid, the block size or the device,
    so the simulator and a GPU draw the same numbers, and no state lives on the device (nothing
    to copy or synchronise). ``V`` is 4 for 32-bit samples (one word each) and 2 for 64-bit ones
    (two words each); the normal distribution pairs lanes by Box-Muller.

Convention (the CPU kernels' of the same operators, ``flambeau._kernels.cpu.random``):
    ``kernel(dst, draw)`` fills device array ``dst`` in place with samples of ``draw`` (a
    :class:`flambeau._random.Draw`: distribution name, parameters, generator). Distributions:
    ``uniform (a, b)``, ``normal (mean, std)``, ``log_normal (mean, std)``, ``exponential
    (lambd,)``, ``geometric (p,)``, ``cauchy (median, sigma)``, ``bernoulli (p,)`` with ``p`` a
    number or a device array broadcastable to ``dst``, ``integers (low, high)`` (``[low, high)``),
    ``dropout (p,)`` (the scaled keep mask ``(u >= p) / (1 - p)``). float32 and float64 are drawn
    directly; other dtypes are drawn in float32 (int64 for ``integers``) and cast.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau._dtype import from_numpy_dtype
from flambeau._kernels.cuda._index_math import device as index_device
from flambeau._kernels.cuda._launch import be, bind_numba_cuda, jit, launch_1d, stream, strides_for
from flambeau._kernels.cuda.core import copy_into
from flambeau._kernels.cuda.elementwise import binary_launcher
from flambeau._ops._registry import kernel

__all__ = ["sample_into", "DISTRIBUTIONS", "ptx_cases"]

cuda = None  # numba.cuda once a kernel is built (Note [numba.cuda bound on first use] in _launch)

_MASK32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
_M0 = np.uint64(0xD2511F53)  # Philox4x32 round multipliers and Weyl key increments
_M1 = np.uint64(0xCD9E8D57)
_W0 = np.uint64(0x9E3779B9)
_W1 = np.uint64(0xBB67AE85)
_TWO_PI = 6.283185307179586


def _philox_py():
    """Philox4x32-10 on 32-bit words held in uint64: ``(c0, c1, c2, c3), (k0, k1) -> 4 words``."""
    def philox(c0, c1, c2, c3, k0, k1):
        for _ in range(10):
            p0 = _M0 * c0
            p1 = _M1 * c2
            c0, c1, c2, c3 = ((p1 >> _SHIFT32) ^ c1 ^ k0, p1 & _MASK32,
                              (p0 >> _SHIFT32) ^ c3 ^ k1, p0 & _MASK32)
            k0 = (k0 + _W0) & _MASK32
            k1 = (k1 + _W1) & _MASK32
        return c0, c1, c2, c3

    return philox


# --- uniforms from words ------------------------------------------------------------------------
def _u32(w):
    """A float in [0, 1) from one 32-bit word (24 bits: exact in float32)."""
    return float(w >> np.uint64(8)) * 5.9604644775390625e-08


def _u64(hi, lo):
    """A float in [0, 1) from two 32-bit words (53 bits)."""
    return float(((hi << _SHIFT32) | lo) >> np.uint64(11)) * 1.1102230246251565e-16


def _lane(r0, r1, r2, r3, j):
    if j == 0:
        return r0
    if j == 1:
        return r1
    if j == 2:
        return r2
    return r3


# --- distributions: (r0, r1, r2, r3, lane j, p0, p1) -> sample, for 32-bit (V=4) and 64-bit (V=2) --
@functools.cache
def _dists():
    """``{name: (fn32, fn64)}``: each ``fn(r0, r1, r2, r3, j, p0, p1)`` is the sample of lane ``j``.

    Every helper a kernel calls must be a numba.cuda device function, so they are jitted here.
    """
    bind_numba_cuda(globals())
    dev = cuda.jit(device=True)
    u32, u64, lane = dev(_u32), dev(_u64), dev(_lane)

    def single32(r0, r1, r2, r3, j):
        return u32(lane(r0, r1, r2, r3, j))

    def single64(r0, r1, r2, r3, j):
        return u64(lane(r0, r1, r2, r3, 2 * j), lane(r0, r1, r2, r3, 2 * j + 1))

    def normal32(r0, r1, r2, r3, j):
        k = 2 * (j // 2)
        u1 = 1.0 - u32(lane(r0, r1, r2, r3, k))  # (0, 1]: log is finite
        u2 = u32(lane(r0, r1, r2, r3, k + 1))
        rad = math.sqrt(-2.0 * math.log(u1))
        return rad * math.cos(_TWO_PI * u2) if j % 2 == 0 else rad * math.sin(_TWO_PI * u2)

    def normal64(r0, r1, r2, r3, j):
        u1 = 1.0 - u64(r0, r1)
        u2 = u64(r2, r3)
        rad = math.sqrt(-2.0 * math.log(u1))
        return rad * math.cos(_TWO_PI * u2) if j == 0 else rad * math.sin(_TWO_PI * u2)

    single32, single64, normal32, normal64 = dev(single32), dev(single64), dev(normal32), dev(normal64)

    def make(kind, single, normal):
        if kind == "uniform":
            return lambda r0, r1, r2, r3, j, a, b: a + (b - a) * single(r0, r1, r2, r3, j)
        if kind == "normal":
            return lambda r0, r1, r2, r3, j, mean, std: mean + std * normal(r0, r1, r2, r3, j)
        if kind == "log_normal":
            return lambda r0, r1, r2, r3, j, mean, std: math.exp(mean + std * normal(r0, r1, r2, r3, j))
        if kind == "exponential":
            return lambda r0, r1, r2, r3, j, lambd, _: -math.log1p(-single(r0, r1, r2, r3, j)) / lambd
        if kind == "geometric":  # trials until the first success: floor(log(U) / log(1 - p)) + 1, U in (0, 1]
            return lambda r0, r1, r2, r3, j, p, _: math.floor(
                math.log(1.0 - single(r0, r1, r2, r3, j)) / math.log1p(-p)) + 1.0
        if kind == "cauchy":
            return lambda r0, r1, r2, r3, j, median, sigma: median + sigma * math.tan(
                math.pi * (single(r0, r1, r2, r3, j) - 0.5))
        if kind == "bernoulli":
            return lambda r0, r1, r2, r3, j, p, _: 1.0 if single(r0, r1, r2, r3, j) < p else 0.0
        if kind == "dropout":  # the scaled keep mask
            return lambda r0, r1, r2, r3, j, p, scale: scale if single(r0, r1, r2, r3, j) >= p else 0.0
        raise KeyError(kind)

    return {kind: (dev(make(kind, single32, normal32)), dev(make(kind, single64, normal64))) for kind in
            ("uniform", "normal", "log_normal", "exponential", "geometric", "cauchy", "bernoulli", "dropout")}


DISTRIBUTIONS = ("uniform", "normal", "log_normal", "exponential", "geometric", "cauchy", "bernoulli", "dropout",
                 "integers")


def _sample_py(dist_fn, V):
    """The sampling kernel over device function ``dist_fn`` with ``V`` samples per Philox call.

    ``out`` is written through element strides ``ost`` over ``shape`` (``n`` elements); ``seed``
    and ``offset`` are split in 32-bit halves (Note [Philox on the device]).
    """
    bind_numba_cuda(globals())
    philox = _philox_device()
    offset = index_device("row_offset")
    dist = dist_fn

    def sample(out, ost, shape, n, k0, k1, o0, o1, p0, p1):
        g = cuda.grid(1)
        step = cuda.gridsize(1)
        groups = (n + V - 1) // V
        while g < groups:
            gg = np.uint64(g)
            r0, r1, r2, r3 = philox(gg & _MASK32, gg >> _SHIFT32, o0, o1, k0, k1)
            for j in range(V):
                i = g * V + j
                if i < n:
                    out[offset(i, shape, ost)] = dist(r0, r1, r2, r3, j, p0, p1)
            g += step

    return sample


def _integers_py():
    """Uniform integers in ``[low, low + span)`` from 64 random bits (two words) per element, V = 2."""
    bind_numba_cuda(globals())
    philox = _philox_device()
    offset = index_device("row_offset")

    def integers(out, ost, shape, n, k0, k1, o0, o1, low, span):
        g = cuda.grid(1)
        step = cuda.gridsize(1)
        groups = (n + 1) // 2
        while g < groups:
            gg = np.uint64(g)
            r0, r1, r2, r3 = philox(gg & _MASK32, gg >> _SHIFT32, o0, o1, k0, k1)
            for j in range(2):
                i = g * 2 + j
                if i < n:
                    bits = ((r0 << _SHIFT32) | r1) if j == 0 else ((r2 << _SHIFT32) | r3)
                    out[offset(i, shape, ost)] = low + np.int64(bits % span)
            g += step

    return integers


@functools.cache
def _philox_device():
    bind_numba_cuda(globals())
    return cuda.jit(device=True)(_philox_py())


@functools.cache
def _sample_kernel(kind: str, wide: bool):
    bind_numba_cuda(globals())
    if kind == "integers":
        return jit(_integers_py())
    fn32, fn64 = _dists()[kind]
    return jit(_sample_py(fn64 if wide else fn32, 2 if wide else 4))


def _split(v: int) -> tuple:
    return np.uint64(v & 0xFFFFFFFF), np.uint64((v >> 32) & 0xFFFFFFFF)


def _launch(kind: str, out, params: tuple, generator) -> None:
    """Fill float32/float64 (int64 for ``integers``) device array ``out`` with samples of ``kind``."""
    n = out.size
    if n == 0:
        return
    seed, offset = generator._philox_next()
    k0, k1 = _split(seed)
    o0, o1 = _split(offset)
    shape = tuple(out.shape)
    V = 2 if kind == "integers" or out.dtype == np.float64 else 4
    grid, block = launch_1d((n + V - 1) // V)
    k = _sample_kernel(kind, out.dtype == np.float64)
    if kind == "integers":
        low, high = params
        p0, p1 = np.int64(low), np.uint64(high - low)
    else:
        p0, p1 = (float(params[0]), float(params[1]) if len(params) > 1 else 0.0)
    k[grid, block, stream()](be().flat_view(out), strides_for(out, shape), shape or (1,), n, k0, k1, o0, o1, p0, p1)


_lt = binary_launcher("lt")


def sample_into(dst, draw) -> None:
    """Fill device array ``dst`` in place with samples of ``draw`` (module docstring), on the current stream."""
    kind, params, generator = draw.dist, draw.params, draw.generator
    if kind == "bernoulli" and hasattr(params[0], "shape"):  # p a device array: u < p, cast to dst's dtype
        u = be().empty(dst.shape, np.dtype(np.float64 if params[0].dtype == np.float64 else np.float32))
        _launch("uniform", u, (0.0, 1.0), generator)
        mask = _lt(u, params[0], from_numpy_dtype(u.dtype))  # compared in u's dtype, a bool result
        copy_into(dst, mask)
        return
    if kind == "dropout":
        params = (params[0], 1.0 / (1.0 - params[0]))
    direct = np.dtype(np.int64) if kind == "integers" else (
        dst.dtype if dst.dtype in (np.float32, np.float64) else np.dtype(np.float32))
    if dst.dtype == direct:
        _launch(kind, dst, params, generator)
        return
    tmp = be().empty(dst.shape, direct)
    _launch(kind, tmp, params, generator)
    copy_into(dst, tmp)


for _name in ("normal_", "uniform_", "bernoulli_", "random_", "exponential_", "geometric_", "cauchy_",
              "log_normal_"):
    kernel(_name, "cuda")(sample_into)


def ptx_cases(ndim: int = 2) -> list:
    """``(label, python_function, signature)`` of every sampling kernel, float32 and float64 (int64 for integers)."""
    from numba import types

    idx = types.UniTuple(types.int64, ndim)
    u64 = types.uint64
    cases = []
    dists = _dists()
    for kind in DISTRIBUTIONS:
        if kind == "integers":
            sig = (types.Array(types.int64, 1, "C"), idx, idx, types.int64, u64, u64, u64, u64, types.int64, u64)
            cases.append(("random:integers:int64", _integers_py(), sig))
            continue
        for wide, t in ((False, types.float32), (True, types.float64)):
            fn = _sample_py(dists[kind][1 if wide else 0], 2 if wide else 4)
            sig = (types.Array(t, 1, "C"), idx, idx, types.int64, u64, u64, u64, u64, types.float64, types.float64)
            cases.append((f"random:{kind}:{t}", fn, sig))
    return cases


# --- dropout: the mask is drawn by flambeau._random.dropout_mask (the "dropout" distribution above) -----
_mul = binary_launcher("mul")


@kernel("dropout", "cuda")
def dropout(a, mask, out=None):
    """``a * mask`` (the CPU kernel's convention): the mask, already scaled, comes from the device generator."""
    return _mul(a, mask, from_numpy_dtype(a.dtype), out=out)
