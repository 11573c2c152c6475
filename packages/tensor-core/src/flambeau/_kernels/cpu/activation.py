"""CPU kernels of the activation operators of ``flambeau._ops.activation`` (numpy passes), and the
fused numba kernels of gelu, silu, mish, hardswish and their derivatives (Note [Fused activations]),
which ``flambeau._kernels.cpu.elementwise`` also uses for gelu and silu.

The calling convention of each kernel is documented with the operator's declaration in
``flambeau._ops.activation``. numba is imported when a fused kernel first runs, never at import.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau import _dtype as dt
from flambeau._kernels._low_precision import takes_bfloat16
from flambeau._ops._registry import kernel

__all__ = ["fused_activation"]

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _store(r, out):
    """``r`` written into ``out`` (when given), else ``r`` as an ndarray."""
    if out is None:
        return r if isinstance(r, np.ndarray) else np.asarray(r)
    np.copyto(out, r, casting="unsafe")
    return out


def _sc(a, v):
    """The Python scalar ``v`` as a scalar of ``a``'s dtype (keeps float32 arithmetic in float32)."""
    return a.dtype.type(v)


# --- numpy kernels --------------------------------------------------------------------------------
@kernel("leaky_relu", "cpu")
def _k_leaky_relu(a, negative_slope, out=None):
    if fusable(a, out):  # one parallel pass
        return fused_activation("leaky_relu", a, None, a.dtype, out, params=(float(negative_slope), 0.0))
    # max(x, s x) for s <= 1 (min for s > 1): two fast passes where np.where takes ten times longer
    if a.ndim == 0:
        return _store(_k_leaky_relu(a.reshape(1), negative_slope).reshape(()), out)
    r = np.multiply(a, _sc(a, negative_slope))
    return (np.maximum if negative_slope <= 1 else np.minimum)(a, r, out=r if out is None else out)


def _expm1_neg(x):
    """``expm1`` of the non-positive array ``x`` (a fresh array), as ``2 t / (1 - t)`` with ``t = tanh(x / 2)``.

    numpy's ``expm1`` has no SIMD loop (8x slower than ``tanh`` on float32); this identity is
    exact in exact arithmetic and accurate to a few ulp (no cancellation near 0).
    """
    t = np.multiply(x, x.dtype.type(0.5))
    np.tanh(t, out=t)
    d = np.subtract(x.dtype.type(1), t)
    t *= x.dtype.type(2)
    t /= d
    return t


@kernel("elu", "cpu")
def _k_elu(a, alpha, scale, input_scale, out=None):
    if fusable(a, out):  # one parallel pass (selu and celu too); numpy's form takes nine
        return fused_activation("elu", a, None, a.dtype, out, params=(float(alpha), float(scale), float(input_scale)))
    if a.ndim == 0:  # numpy returns scalars, not arrays, from 0-d operations
        return _store(_k_elu(a.reshape(1), alpha, scale, input_scale).reshape(()), out)
    neg = np.minimum(a, _sc(a, 0))
    if input_scale != 1:
        neg *= _sc(a, input_scale)
    r = _expm1_neg(neg)
    r *= _sc(a, alpha)
    r += np.maximum(a, _sc(a, 0))  # x > 0: expm1(0) = 0, so r = x there
    if scale != 1:
        r *= _sc(a, scale)
    if a.dtype.kind == "f":
        nan = np.isnan(a)
        if nan.any():
            r[nan] = a[nan]
    return _store(r, out)


@kernel("selu", "cpu")
def _k_selu(a, out=None):
    return _k_elu(a, SELU_ALPHA, SELU_SCALE, 1.0, out)


@kernel("celu", "cpu")
def _k_celu(a, alpha, out=None):
    return _k_elu(a, alpha, 1.0, 1.0 / alpha, out)


@kernel("hardtanh", "cpu")
def _k_hardtanh(a, min_val, max_val, out=None):
    if fusable(a, out):  # one parallel pass (ReLU6 in MobileNets); np.clip is several times slower
        return fused_activation("hardtanh", a, None, a.dtype, out, params=(float(min_val), float(max_val)))
    return np.clip(a, _sc(a, min_val), _sc(a, max_val), out=out)


@kernel("mish", "cpu")
def _k_mish(a, out=None):
    return fused_activation("mish", a, None, a.dtype, out)  # fused (Note [Fused activations])


@kernel("hardswish", "cpu")
def _k_hardswish(a, out=None):
    return fused_activation("hardswish", a, None, a.dtype, out)


@kernel("hardsigmoid", "cpu")
def _k_hardsigmoid(a, out=None):
    if fusable(a, out):  # one parallel pass
        return fused_activation("hardsigmoid", a, None, a.dtype, out)
    return _store(np.clip(a + _sc(a, 3), _sc(a, 0), _sc(a, 6)) / _sc(a, 6), out)


def _log1p_small(u):
    """``log1p`` of the array ``u`` in ``[0, 1]`` with numpy's SIMD ``log``: ``log(w) + (u - (w - 1)) / w``,
    ``w = 1 + u`` (the rounding of ``w`` is corrected to first order; accurate to ~1 ulp)."""
    w = u + u.dtype.type(1)
    c = w - u.dtype.type(1)
    np.subtract(u, c, out=c)
    c /= w
    np.log(w, out=w)
    w += c
    return w


@kernel("log_sigmoid", "cpu")
def _k_log_sigmoid(a, out=None):
    if fusable(a, out):  # one parallel pass (numpy's form takes six, and a log1p without SIMD)
        return fused_activation("log_sigmoid", a, None, a.dtype, out)
    if a.ndim == 0:
        return _store(_k_log_sigmoid(a.reshape(1)).reshape(()), out)
    u = np.abs(a)
    np.negative(u, out=u)
    np.exp(u, out=u)
    r = _log1p_small(u)
    np.subtract(np.minimum(a, _sc(a, 0)), r, out=r)
    return _store(r, out)


@kernel("threshold", "cpu")
def _k_threshold(a, threshold, value, out=None):
    return _store(np.where(a <= _sc(a, threshold), _sc(a, value), a), out)  # NaN is kept, as torch


@kernel("hardshrink", "cpu")
def _k_hardshrink(a, lambd, out=None):
    return _store(np.where(np.abs(a) <= _sc(a, lambd), _sc(a, 0), a), out)  # NaN is kept, as torch


@kernel("softshrink", "cpu")
def _k_softshrink(a, lambd, out=None):
    lam = _sc(a, lambd)
    with np.errstate(invalid="ignore"):  # NaN * 0 stays NaN, as torch
        return _store(np.where(a > lam, a - lam, np.where(a < -lam, a + lam, a * _sc(a, 0))), out)


@kernel("prelu", "cpu")
def _k_prelu(a, w):
    if a.ndim == 0:
        return _k_prelu(a.reshape(1), w).reshape(())
    with np.errstate(all="ignore"):  # x where x > 0, else w x (an infinite w leaves positive x alone, as torch)
        r = np.multiply(a, w)
        np.copyto(r, np.broadcast_to(a, r.shape), where=a > 0)
        return r



_FUSED_MIN_SIZE = 4096  # below: numpy's passes cost less than a parallel launch (~4 µs)


def fusable(a, out=None) -> bool:
    """Whether the fused kernels take ``a`` for a forward activation: a C-contiguous float32 or float64 array
    big enough to pay for a parallel launch (others keep numpy's layout rules), written into a new array
    or into ``out`` of its shape, dtype and layout (``a`` itself for in-place calls)."""
    if a.dtype not in (_F32, _F64) or a.size < _FUSED_MIN_SIZE or not a.flags.c_contiguous:
        return False
    return out is None or (out.dtype == a.dtype and out.shape == a.shape and out.flags.c_contiguous)


@kernel("hardtanh_backward", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_hardtanh_backward(g, a, min_val, max_val):
    if a.dtype in (_F32, _F64) and g.dtype == a.dtype and a.size >= _FUSED_MIN_SIZE:
        # one parallel pass (ReLU6's backward in MobileNets); the numpy form takes four
        return fused_activation("hardtanh", a, g, a.dtype, params=(float(min_val), float(max_val)))
    inside = np.greater(a, _sc(a, min_val))
    inside &= np.less(a, _sc(a, max_val))
    return np.multiply(g, inside, dtype=g.dtype)


# --- gelu, silu, mish, hardswish: fused numba kernels ---------------------------------------------------
# Note [Fused activations]
# gelu, silu, mish and their derivatives as numpy expressions take 5 to 12 passes over memory (gelu
# also a scalar erf per element). One parallel numba loop per direction computes each element from
# registers, with approximations that LLVM vectorises (no libm calls in the loops):
#   float32: erf by the rational approximation of Eigen/XLA (clamped to [-4, 4], ~2 ulp), exp by
#            Cephes' expf (as in ``_kernels/cpu/_fast_exp.py``); float16 is computed in float32.
#   float64: Phi(x) = erfc(-x / sqrt 2) / 2 by Cephes' ndtr rationals (both branches evaluated and
#            selected, one division), exp by range reduction and a degree-13 Taylor polynomial.
#   gelu's tanh form and silu are both x sigmoid(z) with z = a x + b x^3 (0.5 (1 + tanh u) is
#   sigmoid(2u)): one exp and one division. mish uses tanh(softplus x) = n / (n + 2), n = e^x (e^x + 2).
# 2^k is built from its exponent bits by a bitcast intrinsic. The kernels read flat C-contiguous
# arrays; ``fused_activation`` gives them one (F-contiguous inputs run on their transpose, other
# layouts are copied). One jitted function per float width covers every activation and both directions.
_SQRT_HALF = math.sqrt(0.5)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
_K_TANH = math.sqrt(2.0 / math.pi)
_C_TANH = 0.044715
_F32, _F64 = dt.FLOAT_NP
_GELU, _SIGMOID_FAMILY, _MISH, _HARDSWISH, _HARDTANH = 0, 1, 2, 3, 4  # the kernels' ``kind``
_LEAKY, _ELU, _HARDSIGMOID, _ELU_RESULT, _LOG_SIGMOID = 5, 6, 7, 8, 9  # (_ELU_RESULT: elu's backward from
# its result; _LOG_SIGMOID: forward only)
_exp32 = _erf32 = _exp64 = _em1_64 = _cdf64 = _expf_poly = _log1p32 = _log1p64 = None  # numba helpers,
# set by _act_kernels()


@functools.cache
def _act_kernels():
    """``{float32: kernel, float64: kernel}``, ``kernel(x, g, out, backward, kind, a, b)`` over flat
    arrays: ``out = f(x)`` or ``out = g * f'(x)`` for ``f`` chosen by ``kind`` (``_GELU``: exact gelu;
    ``_SIGMOID_FAMILY``: ``x sigmoid(a x + b x^3)``; ``_MISH``; ``_HARDSWISH``). Compiled on first use,
    cached on disk."""
    # The kernels reach their helpers as module globals: numba keys its disk cache on the kernels'
    # closure cells, and jitted helpers in cells hash differently in every process (a recompile each time).
    global _exp32, _erf32, _exp64, _em1_64, _cdf64, _expf_poly, _log1p32, _log1p64
    import numba

    from flambeau._kernels.cpu._fast_exp import expf_helpers
    from flambeau._kernels.cpu._log1p import log1p_unit_helpers

    _expf_poly = expf_helpers()[0]
    _log1p32, _log1p64 = log1p_unit_helpers()  # Note [log1p by its atanh series]
    from numba.core import types
    from numba.extending import intrinsic

    @intrinsic
    def as_f32(typingctx, i):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(types.float32))
        return types.float32(types.int32), codegen

    @intrinsic
    def as_f64(typingctx, i):
        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], context.get_value_type(types.float64))
        return types.float64(types.int64), codegen

    f32, i32, i64 = np.float32, np.int32, np.int64
    inline = {"inline": "always", "fastmath": {"contract"}}

    @numba.njit(**inline)
    def exp32(v):  # Cephes expf (see _fast_exp); 2^k as two normal factors so underflow rounds right
        y, k = _expf_poly(min(max(v, f32(-104.0)), f32(89.0)))
        ki = i32(k)
        k1 = ki >> i32(1)
        return y * as_f32((k1 + i32(127)) << i32(23)) * as_f32((ki - k1 + i32(127)) << i32(23))

    @numba.njit(**inline)
    def erf32(x):  # Eigen's generic_fast_erf_float: odd/even rational on [-4, 4], erf = +-1 beyond
        x = min(max(x, f32(-4.0)), f32(4.0))
        x2 = x * x
        p = x2 * f32(-2.72614225801306e-10) + f32(2.77068142495902e-08)
        p = x2 * p + f32(-2.10102402082508e-06)
        p = x2 * p + f32(-5.69250639462346e-05)
        p = x2 * p + f32(-7.34990630326855e-04)
        p = x2 * p + f32(-2.95459980854025e-03)
        p = x2 * p + f32(-1.60960333262415e-02)
        q = x2 * f32(-1.45660718464996e-05) + f32(-2.13374055278905e-04)
        q = x2 * q + f32(-1.68282697438203e-03)
        q = x2 * q + f32(-7.37332916720468e-03)
        q = x2 * q + f32(-1.42647390514189e-02)
        return x * p / q

    @numba.njit(**inline)
    def em1_64(r):
        """``e^r - 1`` by Taylor's series to ``r^14 / 14!`` (below 1e-17 of ``|r|`` for ``|r| <= 1/2``)."""
        y = 1.0 / 87178291200.0
        y = y * r + 1.0 / 6227020800.0
        y = y * r + 1.0 / 479001600.0
        y = y * r + 1.0 / 39916800.0
        y = y * r + 1.0 / 3628800.0
        y = y * r + 1.0 / 362880.0
        y = y * r + 1.0 / 40320.0
        y = y * r + 1.0 / 5040.0
        y = y * r + 1.0 / 720.0
        y = y * r + 1.0 / 120.0
        y = y * r + 1.0 / 24.0
        y = y * r + 1.0 / 6.0
        y = y * r + 0.5
        return (y * r + 1.0) * r  # (a product last: e^-0 - 1 is -0, as elu(-0) is in torch)

    _em1_64 = em1_64

    @numba.njit(**inline)
    def exp64(v):
        v = min(max(v, -745.2), 709.79)
        k = np.floor(v * 1.4426950408889634 + 0.5)
        r = v - k * 6.93145751953125e-1 - k * 1.42860682030941723212e-6  # ln 2 split: k * hi is exact
        y = _em1_64(r) + 1.0
        ki = i64(k)
        k1 = ki >> i64(1)
        return y * as_f64((k1 + i64(1023)) << i64(52)) * as_f64((ki - k1 + i64(1023)) << i64(52))

    @numba.njit(**inline)
    def cdf64(x):
        """``(Phi(x), exp(-x^2 / 2))``: Cephes' erf (|z| < 1) and erfc (1 <= |z| < 8, >= 8) rationals."""
        z = x * _SQRT_HALF
        z2 = z * z
        a = min(abs(z), 40.0)  # keeps the rationals finite at +-inf (exp(-z^2) is 0 there)
        t = (((9.60497373987051638749e0 * z2 + 9.00260197203842689217e1) * z2 + 2.23200534594684319226e3) * z2
             + 7.00332514112805075473e3) * z2 + 5.55923013010394962768e4
        u = ((((z2 + 3.35617141647503099647e1) * z2 + 5.21357949780152679795e2) * z2 + 4.59432382970980127987e3)
             * z2 + 2.26290000613890934246e4) * z2 + 4.92673942608635921086e4
        p = (((((((2.46196981473530512524e-10 * a + 5.64189564831068821977e-1) * a + 7.46321056442269912687e0) * a
                 + 4.86371970985681366614e1) * a + 1.96520832956077098242e2) * a + 5.26445194995477358631e2) * a
              + 9.34528527171957607540e2) * a + 1.02755188689515710272e3) * a + 5.57535335369399327526e2
        q = (((((((a + 1.32281951154744992508e1) * a + 8.67072140885989742329e1) * a + 3.54937778887819891062e2) * a
                + 9.75708501743205489753e2) * a + 1.82390916687909736289e3) * a + 2.24633760818710981792e3) * a
             + 1.65666309194161350182e3) * a + 5.57535340817727675546e2
        r = ((((5.64189583547755073984e-1 * a + 1.27536670759978104416e0) * a + 5.01905042251180477414e0) * a
              + 6.16021097993053585195e0) * a + 7.40974269950448939160e0) * a + 2.97886665372100240670e0
        s = (((((a + 2.26052863220117276590e0) * a + 9.39603524938001434673e0) * a + 1.20489539808096656605e1) * a
              + 1.70814450747565897222e1) * a + 9.60896809063285878198e0) * a + 3.36907645100081516050e0
        e = exp64(-z2)
        small = a < 1.0
        far = a >= 8.0
        num = z * t if small else (r if far else p)
        den = u if small else (s if far else q)
        ratio = num / den
        half_erfc = 0.5 * e * ratio  # erfc(|z|) / 2
        if small:
            cdf = 0.5 + 0.5 * ratio
        elif z > 0:
            cdf = 1.0 - half_erfc
        else:
            cdf = half_erfc
        return cdf, e

    _exp32, _erf32, _exp64, _cdf64 = exp32, erf32, exp64, cdf64
    flags = {"parallel": True, "cache": True, "nogil": True, "fastmath": {"contract"}}

    # x sigmoid(z), z = a x + b x^3: derivative s + x q z' with q = s (1 - s) computed as e s^2,
    # e = exp(-z): exact where s rounds to 1; q is 0 once e overflows (so NaN at x = -inf, as torch).
    # mish: t = n / (n + 2); derivative t + x sigmoid(x) (1 - t^2), 1 - t^2 = 4 (n + 1) / (n + 2)^2,
    # whose term is dropped above x = 20 (where t is 1 and e^x is clamped).
    @numba.njit(**flags)
    def act32(x, g, out, backward, kind, a, b, c):
        n = x.shape[0]
        a, b, c = f32(a), f32(b), f32(c)
        cubic = b != f32(0)
        if kind == _LOG_SIGMOID:  # min(x, 0) - log1p(exp(-|x|)) (Note [log1p by its atanh series])
            for i in numba.prange(n):
                v = x[i]
                r = min(v, f32(0)) - _log1p32(_exp32(-abs(v)))
                out[i] = v if v != v else r
        elif kind == _LEAKY:  # x > 0 ? x : a x (torch's form: NaN stays NaN); backward g or a g
            if backward:
                for i in numba.prange(n):
                    gi = g[i]
                    out[i] = gi if x[i] > f32(0) else gi * a
            else:
                for i in numba.prange(n):
                    v = x[i]
                    out[i] = v if v > f32(0) else v * a
        elif kind == _ELU_RESULT:  # backward from the result y: y <= 0 ? g c (y + a b) : g b
            for i in numba.prange(n):
                v = x[i]
                gi = g[i]
                out[i] = gi * c * (v + a * b) if v <= f32(0) else gi * b
        elif kind == _ELU and backward:  # x <= 0 ? g c a b exp(c x) : g b (NaN: g b, as torch)
            for i in numba.prange(n):
                v = x[i]
                gi = g[i]
                out[i] = gi * (c * a * b) * _exp32(min(v, f32(0)) * c) if v <= f32(0) else gi * b
        elif kind == _ELU:  # x > 0 ? b x : a b expm1(c x); expm1 by its Taylor series near 0 (no cancellation)
            for i in numba.prange(n):
                v = x[i]
                z = min(v * c, f32(0))
                p = z * (f32(1) + z * (f32(1 / 2) + z * (f32(1 / 6) + z * (f32(1 / 24) + z * (
                    f32(1 / 120) + z * (f32(1 / 720) + z * f32(1 / 5040)))))))
                em1 = p if z > f32(-0.5) else _exp32(z) - f32(1)
                r = v * b if v > f32(0) else em1 * (a * b)
                out[i] = v if v != v else r
        elif kind == _HARDSIGMOID and backward:  # g / 6 inside (-3, 3), else 0 (NaN too)
            for i in numba.prange(n):
                v = x[i]
                gi = g[i]
                out[i] = gi * f32(1 / 6) if v > f32(-3) and v < f32(3) else f32(0)
        elif kind == _HARDSIGMOID:  # min(max(x + 3, 0), 6) / 6, rounded as torch's (NaN stays NaN)
            for i in numba.prange(n):
                t = x[i] + f32(3)
                t = f32(0) if t < f32(0) else t
                out[i] = (f32(6) if t > f32(6) else t) / f32(6)
        elif kind == _SIGMOID_FAMILY:
            if backward:
                for i in numba.prange(n):
                    v = x[i]
                    e = _exp32(-(v * (a + b * v * v) if cubic else a * v))
                    s = f32(1) / (f32(1) + e)
                    q = e * s * s if e < f32(1e30) else f32(0)
                    out[i] = g[i] * (s + v * q * (a + f32(3) * b * v * v))
            else:
                for i in numba.prange(n):
                    v = x[i]
                    out[i] = v / (f32(1) + _exp32(-(v * (a + b * v * v) if cubic else a * v)))
        elif kind == _GELU:
            if backward:  # Phi(x) + x phi(x)
                for i in numba.prange(n):
                    v = x[i]
                    cdf = f32(0.5) + f32(0.5) * _erf32(v * f32(_SQRT_HALF))
                    out[i] = g[i] * (cdf + v * f32(_INV_SQRT_2PI) * _exp32(f32(-0.5) * v * v))
            else:
                for i in numba.prange(n):
                    v = x[i]
                    out[i] = v * (f32(0.5) + f32(0.5) * _erf32(v * f32(_SQRT_HALF)))
        elif kind == _MISH:
            if backward:
                for i in numba.prange(n):
                    v = x[i]
                    e = _exp32(min(v, f32(20)))
                    m = e * (e + f32(2))
                    d = f32(1) / (m + f32(2))
                    dt = f32(4) * (m + f32(1)) * d * d if v <= f32(20) else f32(0)
                    out[i] = g[i] * (m * d + v * (e / (f32(1) + e)) * dt)
            else:
                for i in numba.prange(n):
                    v = x[i]
                    e = _exp32(min(v, f32(20)))
                    m = e * (e + f32(2))
                    out[i] = v * (m / (m + f32(2)))
        elif kind == _HARDTANH:
            if backward:  # g where a < x < b, else 0 (NaN included)
                for i in numba.prange(n):
                    v = x[i]
                    gi = g[i]
                    out[i] = gi if v > a and v < b else f32(0)
            else:  # x clamped to [a, b], NaN kept (relu: b = inf)
                lo, hi = f32(a), f32(b)
                for i in numba.prange(n):
                    v = x[i]
                    out[i] = lo if v < lo else (hi if v > hi else v)
        elif backward:  # hardswish; torch's subgradients: 0 up to -3, (2x + 3) / 6 inside, 1 from 3; NaN stays
            for i in numba.prange(n):
                v = x[i]
                d = f32(0) if v <= f32(-3) else (f32(1) if v >= f32(3) else v * f32(1 / 3) + f32(0.5))
                out[i] = g[i] * d  # (g loaded unconditionally: conditional loads keep LLVM from vectorising)
        else:
            for i in numba.prange(n):
                v = x[i]
                out[i] = v * min(max(v + f32(3), f32(0)), f32(6)) / f32(6)

    @numba.njit(**flags)
    def act64(x, g, out, backward, kind, a, b, c):
        n = x.shape[0]
        cubic = b != 0.0
        if kind == _LOG_SIGMOID:
            for i in numba.prange(n):
                v = x[i]
                r = min(v, 0.0) - _log1p64(_exp64(-abs(v)))
                out[i] = v if v != v else r
        elif kind == _LEAKY:
            if backward:
                for i in numba.prange(n):
                    gi = g[i]
                    out[i] = gi if x[i] > 0.0 else gi * a
            else:
                for i in numba.prange(n):
                    v = x[i]
                    out[i] = v if v > 0.0 else v * a
        elif kind == _ELU_RESULT:
            for i in numba.prange(n):
                v = x[i]
                gi = g[i]
                out[i] = gi * c * (v + a * b) if v <= 0.0 else gi * b
        elif kind == _ELU and backward:
            for i in numba.prange(n):
                v = x[i]
                gi = g[i]
                out[i] = gi * (c * a * b) * _exp64(min(v, 0.0) * c) if v <= 0.0 else gi * b
        elif kind == _ELU:  # expm1 by exp64's Taylor series on [-0.5, 0]
            for i in numba.prange(n):
                v = x[i]
                z = min(v * c, 0.0)
                em1 = _em1_64(z) if z > -0.5 else _exp64(z) - 1.0
                r = v * b if v > 0.0 else em1 * (a * b)
                out[i] = v if v != v else r
        elif kind == _HARDSIGMOID and backward:
            for i in numba.prange(n):
                v = x[i]
                gi = g[i]
                out[i] = gi * (1 / 6) if v > -3.0 and v < 3.0 else 0.0
        elif kind == _HARDSIGMOID:
            for i in numba.prange(n):
                t = x[i] + 3.0
                t = 0.0 if t < 0.0 else t
                out[i] = (6.0 if t > 6.0 else t) / 6.0
        elif kind == _SIGMOID_FAMILY:
            if backward:
                for i in numba.prange(n):
                    v = x[i]
                    e = _exp64(-(v * (a + b * v * v) if cubic else a * v))
                    s = 1.0 / (1.0 + e)
                    q = e * s * s if e < 1e300 else 0.0
                    out[i] = g[i] * (s + v * q * (a + 3.0 * b * v * v))
            else:
                for i in numba.prange(n):
                    v = x[i]
                    out[i] = v / (1.0 + _exp64(-(v * (a + b * v * v) if cubic else a * v)))
        elif kind == _GELU:
            if backward:
                for i in numba.prange(n):
                    v = x[i]
                    cdf, e = _cdf64(v)
                    out[i] = g[i] * (cdf + v * _INV_SQRT_2PI * e)
            else:
                for i in numba.prange(n):
                    v = x[i]
                    out[i] = v * _cdf64(v)[0]
        elif kind == _MISH:
            if backward:
                for i in numba.prange(n):
                    v = x[i]
                    e = _exp64(min(v, 20.0))
                    m = e * (e + 2.0)
                    d = 1.0 / (m + 2.0)
                    dt = 4.0 * (m + 1.0) * d * d if v <= 20.0 else 0.0
                    out[i] = g[i] * (m * d + v * (e / (1.0 + e)) * dt)
            else:
                for i in numba.prange(n):
                    v = x[i]
                    e = _exp64(min(v, 20.0))
                    m = e * (e + 2.0)
                    out[i] = v * (m / (m + 2.0))
        elif kind == _HARDTANH:
            if backward:
                for i in numba.prange(n):
                    v = x[i]
                    gi = g[i]
                    out[i] = gi if v > a and v < b else 0.0
            else:
                for i in numba.prange(n):
                    v = x[i]
                    out[i] = a if v < a else (b if v > b else v)
        elif backward:
            for i in numba.prange(n):
                v = x[i]
                out[i] = g[i] * (0.0 if v <= -3.0 else (1.0 if v >= 3.0 else v * (1 / 3) + 0.5))
        else:
            for i in numba.prange(n):
                v = x[i]
                out[i] = v * min(max(v + 3.0, 0.0), 6.0) / 6.0

    return {_F32: act32, _F64: act64}


# (kind, a, b) of each activation; gelu's tanh form is x sigmoid(2u), u = k (x + c x^3)
_ACT = {"gelu": (_GELU, 0.0, 0.0), "gelu_tanh": (_SIGMOID_FAMILY, 2 * _K_TANH, 2 * _K_TANH * _C_TANH),
        "silu": (_SIGMOID_FAMILY, 1.0, 0.0), "mish": (_MISH, 0.0, 0.0), "hardswish": (_HARDSWISH, 0.0, 0.0),
        "hardtanh": (_HARDTANH, -1.0, 1.0),  # its bounds come as ``params`` (relu: 0 and inf)
        "leaky_relu": (_LEAKY, 0.01, 0.0), "elu": (_ELU, 1.0, 1.0, 1.0),  # (slope), (alpha, scale, input scale)
        "elu_result": (_ELU_RESULT, 1.0, 1.0, 1.0), "hardsigmoid": (_HARDSIGMOID, 0.0, 0.0),
        "log_sigmoid": (_LOG_SIGMOID, 0.0, 0.0)}


def fused_activation(name: str, x, g, npdt, out=None, params=None):
    """Activation ``name`` of ``x`` (``g`` None) or ``g * name'(x)`` with the fused kernels, as an array
    of dtype ``npdt`` (written into ``out`` when given). F-contiguous inputs keep their layout.
    ``params``: the kernel's ``(a, b)`` or ``(a, b, c)`` where the operator has them (hardtanh's bounds,
    leaky_relu's slope, elu's alpha, scale and input scale)."""
    kind, a, b, *c = _ACT[name]
    if params is not None:
        a, b, *c = params
    c = c[0] if c else 0.0
    cdt = _F64 if npdt == _F64 else _F32
    x = x.astype(cdt, copy=False)
    transposed = not x.flags.c_contiguous and x.flags.f_contiguous and x.ndim > 1
    if transposed:
        x = x.T
    elif not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    direct = (out is not None and not transposed and out.dtype == cdt and out.shape == x.shape
              and out.flags.c_contiguous)
    r = out if direct else np.empty(x.shape, cdt)  # elementwise: out may be x itself
    if x.size:
        flat = x.reshape(-1)
        if g is None:
            _act_kernels()[cdt](flat, flat, r.reshape(-1), False, kind, a, b, c)
        else:
            g = np.ascontiguousarray(g.T if transposed else g, cdt)
            _act_kernels()[cdt](flat, g.reshape(-1), r.reshape(-1), True, kind, a, b, c)
    if transposed:
        r = r.T
    if out is not None:
        if not direct:
            np.copyto(out, r, casting="unsafe")
        return out
    return r if cdt == npdt else r.astype(npdt)


@kernel("gelu_backward", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself (test_bfloat16_against_torch)
def _k_gelu_backward(g, a, approximate):
    return fused_activation("gelu_tanh" if approximate == "tanh" else "gelu", a, g, a.dtype)


def _fused_backward(name: str):
    """The kernel of ``<name>_backward(grad_output, input)``: ``g * name'(a)``, fused."""

    def backward(g, a):
        return fused_activation(name, a, g, a.dtype)

    return takes_bfloat16(backward)  # hot in training; handles bfloat16 itself


kernel("silu_backward", "cpu")(_fused_backward("silu"))
kernel("mish_backward", "cpu")(_fused_backward("mish"))
kernel("hardswish_backward", "cpu")(_fused_backward("hardswish"))
kernel("hardsigmoid_backward", "cpu")(_fused_backward("hardsigmoid"))


@kernel("leaky_relu_backward", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself
def _k_leaky_relu_backward(g, a, negative_slope, self_is_result):
    return fused_activation("leaky_relu", a, g, a.dtype, params=(float(negative_slope), 0.0))


@kernel("elu_backward", "cpu")
@takes_bfloat16  # hot in training; handles bfloat16 itself
def _k_elu_backward(g, alpha, scale, input_scale, is_result, a):
    return fused_activation("elu_result" if is_result else "elu", a, g, a.dtype,
                            params=(float(alpha), float(scale), float(input_scale)))
