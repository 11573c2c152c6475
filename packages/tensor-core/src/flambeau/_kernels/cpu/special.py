"""CPU kernels of the special functions (``flambeau._ops.special``), and the scalar formulas that both
devices compile.

Note [One formula, two devices]
    Each special function is written once, below, as a plain Python function of floats (the
    formulas are Cephes' and SciPy's, as in torch's ``ATen/native/Math.h``). The CPU kernels are
    numba ufuncs of these functions (a float64 loop, compiled on first use and cached on disk);
    the CUDA kernels (``flambeau._kernels.cuda.special``) are ``cuda.jit(device=True)``
    compilations of the same functions. A formula calls another one (``_chbevl``, ``_zeta`` ...)
    by its module-global name: :func:`jitable` registers every formula with numba's
    ``register_jitable`` before anything compiles (lazily: ``import flambeau`` imports no numba),
    which makes such calls compile under ``numba.njit`` and ``numba.cuda.jit`` alike (and under
    the CUDA simulator they are plain Python calls).

    Formulas compute in float64: ``x = _f64(x0)`` promotes a float32 argument (CUDA), and the CPU
    kernels run the float64 loop for every dtype and round the result to the tensor's dtype (one
    loop per formula halves numba's compile time, which dominates at these sizes).
    Constants are tuples (constant memory on the GPU). Formulas avoid operations that raise in
    plain Python (``math.exp`` overflow, ``math.lgamma`` at poles), so the CUDA simulator runs them.

Kernel conventions (``flambeau._ops.special`` documents the operators):
    unary: ``kernel(a, dtype, out=None)``; binary: ``kernel(a, b, dtype, out=None)`` (as the
    elementwise operators, ``flambeau._ops._elementwise_base``); polygamma:
    ``kernel(a, dtype, n, out=None)``.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from flambeau import _dtype as dt
from flambeau._kernels.cpu._elementwise import binary_kernel, unary_kernel
from flambeau._ops._registry import kernel

__all__ = ["FORMULAS", "jitable"]

_INF = math.inf
_NAN = math.nan
_PI = math.pi
_SQRT1_2 = 0.7071067811865476
_INV_SQRT_PI = 0.5641895835477563
_MACHEP = 1.11022302462515654042e-16
# float64 conversion: Python's float until jitable() makes it numba's float64 (numba.cuda types
# float(float32) as float32; plain Python, the CUDA simulator included, gives a Python float either way)
_f64 = float


# --- helpers ------------------------------------------------------------------------------------
def _polevl(x, coef):
    """Horner's rule: ``coef[0] * x**n + ... + coef[n]``."""
    r = 0.0
    for c in coef:
        r = r * x + c
    return r


def _chbevl(x, coef):
    """Cephes' sum of Chebyshev polynomials ``T_i(x / 2)`` with coefficients in reverse order."""
    b0 = 0.0
    b1 = 0.0
    b2 = 0.0
    for c in coef:
        b2 = b1
        b1 = b0
        b0 = x * b1 - b2 + c
    return 0.5 * (b0 - b2)


def _is_pole(x):
    """Whether ``x`` is 0 or a negative integer (poles of the gamma function); False for -inf and NaN."""
    return x <= 0.0 and x > -_INF and x % 1.0 == 0.0


# --- gamma family ---------------------------------------------------------------------------------
def _lgamma(x0):
    x = _f64(x0)
    if _is_pole(x):
        return _INF
    return math.lgamma(x)


_PSI_10 = 2.25175258906672110764
_PSI_A = (8.33333333333333333333e-2, -2.10927960927960927961e-2, 7.57575757575757575758e-3,
          -4.16666666666666666667e-3, 3.96825396825396825397e-3, -8.33333333333333333333e-3,
          8.33333333333333333333e-2)


def _digamma(x0):
    x = _f64(x0)
    if x == 0.0:
        return math.copysign(_INF, -x)  # +-0 gives -+inf, as torch and SciPy
    if x != x or x == _INF:
        return x
    if x == -_INF or (x < 0.0 and x % 1.0 == 0.0):
        return _NAN
    result = 0.0
    if x < 0.0:
        # reflection; tan of the fractional part is more accurate than tan(pi * x)
        r = x - math.trunc(x)
        result = -_PI / math.tan(_PI * r)
        x = 1.0 - x
    while x < 10.0:
        result -= 1.0 / x
        x += 1.0
    if x == 10.0:
        return result + _PSI_10
    y = 0.0
    if x < 1e17:
        z = 1.0 / (x * x)
        y = z * _polevl(z, _PSI_A)
    return result + math.log(x) - 0.5 / x - y


def _trigamma(x0):
    x = _f64(x0)
    sign = 1.0
    result = 0.0
    if x < 0.5:
        sign = -1.0
        s = math.sin(_PI * x)
        if s == 0.0:
            return _INF  # x = 0 (plain Python would raise ZeroDivisionError)
        result -= _PI * _PI / (s * s)
        x = 1.0 - x
    for _ in range(6):
        result += 1.0 / (x * x)
        x += 1.0
    ixx = 1.0 / (x * x)
    result += (1.0 + 1.0 / (2.0 * x) + ixx * (1.0 / 6.0 - ixx * (1.0 / 30.0 - ixx * (1.0 / 42.0)))) / x
    return sign * result


_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9, 7.47242496e10,
           -2.950130727918164224e12, 1.1646782814350067249e14, -4.5979787224074726105e15,
           1.8152105401943546773e17, -7.1661652561756670113e18)


def _zeta(x0, q0):
    """Hurwitz zeta ``sum_k (k + q) ** -x`` (Cephes: Euler-Maclaurin summation)."""
    x = _f64(x0)
    q = _f64(q0)
    if x != x or q != q:
        return _NAN
    if x == 1.0:
        return _INF
    if x < 1.0:
        return _NAN
    if q <= 0.0:
        if q == -_INF or q % 1.0 == 0.0:
            return _INF
        if x % 1.0 != 0.0:
            return _NAN  # q ** -x is not real
    s = q ** -x
    a = q
    i = 0
    b = 0.0
    while i < 9 or a <= 9.0:
        i += 1
        a += 1.0
        b = a ** -x
        s += b
        if -_MACHEP * s < b < _MACHEP * s:
            return s
    w = a
    s += b * w / (x - 1.0)
    s -= 0.5 * b
    a = 1.0
    k = 0.0
    for c in _ZETA_A:
        a *= x + k
        b /= w
        t = a * b / c
        s = s + t
        if abs(t / s) < _MACHEP:
            return s
        k += 1.0
        a *= x + k
        b /= w
        k += 1.0
    return s


def _polygamma(x, n0):
    """``polygamma(n, x)``, the n-th derivative of digamma (``n`` a non-negative integer as a float)."""
    n = _f64(n0)
    if n == 0.0:
        return _digamma(x)
    if n == 1.0:
        return _trigamma(x)
    sign = 1.0 if n % 2.0 == 1.0 else -1.0
    return sign * math.exp(math.lgamma(n + 1.0)) * _zeta(n + 1.0, x)


def _igam_edge(a, x):
    """gammainc's value where ``a`` or ``x`` is 0, infinite, negative or NaN (SciPy's), else -1."""
    if a != a or x != x or a < 0.0 or x < 0.0:
        return _NAN
    if a == 0.0:
        return 1.0 if x > 0.0 else _NAN
    if x == 0.0:
        return 0.0
    if a == _INF:
        return _NAN if x == _INF else 0.0
    if x == _INF:
        return 1.0
    return -1.0


def _igam_prefactor(a, x):
    return math.exp(a * math.log(x) - x - math.lgamma(a))


def _igam_series(a, x):
    """The lower regularized incomplete gamma by its power series (converges fast for ``x < a + 1``)."""
    ap = a
    term = 1.0 / a
    total = term
    for _ in range(100000):
        ap += 1.0
        term *= x / ap
        total += term
        if abs(term) < abs(total) * _MACHEP:
            break
    return total * _igam_prefactor(a, x)


def _igamc_fraction(a, x):
    """The upper regularized incomplete gamma by its continued fraction (modified Lentz, ``x >= a + 1``)."""
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 100000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        if abs(d) < tiny:
            d = tiny
        c = b + an / c
        if abs(c) < tiny:
            c = tiny
        d = 1.0 / d
        step = d * c
        h *= step
        if abs(step - 1.0) < _MACHEP:
            break
    return h * _igam_prefactor(a, x)


def _gammainc(a0, x0):
    """The regularized lower incomplete gamma function ``P(a, x)``."""
    a = _f64(a0)
    x = _f64(x0)
    edge = _igam_edge(a, x)
    if edge != -1.0:
        return edge
    if x < a + 1.0:
        return _igam_series(a, x)
    return 1.0 - _igamc_fraction(a, x)


def _gammaincc(a0, x0):
    """The regularized upper incomplete gamma function ``Q(a, x) = 1 - P(a, x)``."""
    a = _f64(a0)
    x = _f64(x0)
    edge = _igam_edge(a, x)
    if edge != -1.0:
        return edge if edge != edge else 1.0 - edge
    if x < a + 1.0:
        return 1.0 - _igam_series(a, x)
    return _igamc_fraction(a, x)


# --- modified Bessel functions (Cephes: Chebyshev expansions on [0, 8] and (8, inf)) --------------
_I0E_A = (-4.41534164647933937950e-18, 3.33079451882223809783e-17, -2.43127984654795469359e-16,
          1.71539128555513303061e-15, -1.16853328779934516808e-14, 7.67618549860493561688e-14,
          -4.85644678311192946090e-13, 2.95505266312963983461e-12, -1.72682629144155570723e-11,
          9.67580903537323691224e-11, -5.18979560163526290666e-10, 2.65982372468238665035e-9,
          -1.30002500998624804212e-8, 6.04699502254191894932e-8, -2.67079385394061173391e-7,
          1.11738753912010371815e-6, -4.41673835845875056359e-6, 1.64484480707288970893e-5,
          -5.75419501008210370398e-5, 1.88502885095841655729e-4, -5.76375574538582365885e-4,
          1.63947561694133579842e-3, -4.32430999505057594430e-3, 1.05464603945949983183e-2,
          -2.37374148058994688156e-2, 4.93052842396707084878e-2, -9.49010970480476444210e-2,
          1.71620901522208775349e-1, -3.04682672343198398683e-1, 6.76795274409476084995e-1)
_I0E_B = (-7.23318048787475395456e-18, -4.83050448594418207126e-18, 4.46562142029675999901e-17,
          3.46122286769746109310e-17, -2.82762398051658348494e-16, -3.42548561967721913462e-16,
          1.77256013305652638360e-15, 3.81168066935262242075e-15, -9.55484669882830764870e-15,
          -4.15056934728722208663e-14, 1.54008621752140982691e-14, 3.85277838274214270114e-13,
          7.18012445138366623367e-13, -1.79417853150680611778e-12, -1.32158118404477131188e-11,
          -3.14991652796324136454e-11, 1.18891471078464383424e-11, 4.94060238822496958910e-10,
          3.39623202570838634515e-9, 2.26666899049817806459e-8, 2.04891858946906374183e-7,
          2.89137052083475648297e-6, 6.88975834691682398426e-5, 3.36911647825569408990e-3,
          8.04490411014108831608e-1)
_I1E_A = (2.77791411276104639959e-18, -2.11142121435816608115e-17, 1.55363195773620046921e-16,
          -1.10559694773538630805e-15, 7.60068429473540693410e-15, -5.04218550472791168711e-14,
          3.22379336594557470981e-13, -1.98397439776494371520e-12, 1.17361862988909016308e-11,
          -6.66348972350202774223e-11, 3.62559028155211703701e-10, -1.88724975172282928790e-9,
          9.38153738649577178388e-9, -4.44505912879632808065e-8, 2.00329475355213526229e-7,
          -8.56872026469545474066e-7, 3.47025130813767847674e-6, -1.32731636560394358279e-5,
          4.78156510755005422638e-5, -1.61760815825896745588e-4, 5.12285956168575772895e-4,
          -1.51357245063125314899e-3, 4.15642294431288815669e-3, -1.05640848946261981558e-2,
          2.47264490306265168283e-2, -5.29459812080949914269e-2, 1.02643658689847095384e-1,
          -1.76416518357834055153e-1, 2.52587186443633654823e-1)
_I1E_B = (7.51729631084210481353e-18, 4.41434832307170791151e-18, -4.65030536848935832153e-17,
          -3.20952592199342395980e-17, 2.96262899764595013876e-16, 3.30820231092092828324e-16,
          -1.88035477551078244854e-15, -3.81440307243700780478e-15, 1.04202769841288027642e-14,
          4.27244001671195135429e-14, -2.10154184277266431302e-14, -4.08355111109219731823e-13,
          -7.19855177624590851209e-13, 2.03562854414708950722e-12, 1.41258074366137813316e-11,
          3.25260358301548823856e-11, -1.89749581235054123450e-11, -5.58974346219658380687e-10,
          -3.83538038596423702205e-9, -2.63146884688951950684e-8, -2.51223623787020892529e-7,
          -3.88256480887769039346e-6, -1.10588938762623716291e-4, -9.76109749136146840777e-3,
          7.78576235018280120474e-1)


def _i0e(x0):
    x = abs(_f64(x0))
    if x <= 8.0:
        return _chbevl(x / 2.0 - 2.0, _I0E_A)
    return _chbevl(32.0 / x - 2.0, _I0E_B) / math.sqrt(x)


def _i1e(x0):
    x = abs(_f64(x0))
    if x <= 8.0:
        r = _chbevl(x / 2.0 - 2.0, _I1E_A) * x
    else:
        r = _chbevl(32.0 / x - 2.0, _I1E_B) / math.sqrt(x)
    return -r if x0 < 0.0 else r


def _scaled_back(r, x):
    """``r * exp(|x|)`` (i0 and i1 from their scaled forms): inf where that overflows, NaN at +-inf (torch's)."""
    ax = abs(_f64(x))
    if ax == _INF:
        return _NAN
    if ax > 709.0:
        return _NAN if r != r else math.copysign(_INF, r)
    return r * math.exp(ax)


def _i0(x):
    return _scaled_back(_i0e(x), x)


def _i1(x):
    return _scaled_back(_i1e(x), x)


# --- Bessel functions of the first kind (Cephes: rational approximations below 5, asymptotic above) --
_J0_PP = (7.96936729297347051624e-04, 8.28352392107440799803e-02, 1.23953371646414299388e+00,
          5.44725003058768775090e+00, 8.74716500199817011941e+00, 5.30324038235394892183e+00,
          9.99999999999999997821e-01)
_J0_PQ = (9.24408810558863637013e-04, 8.56288474354474431428e-02, 1.25352743901058953537e+00,
          5.47097740330417105182e+00, 8.76190883237069594232e+00, 5.30605288235394617618e+00,
          1.00000000000000000218e+00)
_J0_QP = (-1.13663838898469149931e-02, -1.28252718670509318512e+00, -1.95539544257735972385e+01,
          -9.32060152123768231369e+01, -1.77681167980488050595e+02, -1.47077505154951170175e+02,
          -5.14105326766599330220e+01, -6.05014350600728481186e+00)
_J0_QQ = (6.43178256118178023184e+01, 8.56430025976980587198e+02, 3.88240183605401609683e+03,
          7.24046774195652478189e+03, 5.93072701187316984827e+03, 2.06209331660327847417e+03,
          2.42005740240291393179e+02)
_J0_RP = (-4.79443220978201773821e+09, 1.95617491946556577543e+12, -2.49248344360967716204e+14,
          9.70862251047306323952e+15)
_J0_RQ = (4.99563147152651017219e+02, 1.73785401676374683123e+05, 4.84409658339962045305e+07,
          1.11855537045356834862e+10, 2.11277520115489217587e+12, 3.10518229857422583814e+14,
          3.18121955943204943306e+16, 1.71086294081043136091e+18)
_J1_PP = (7.62125616208173112003e-04, 7.31397056940917570436e-02, 1.12719608129684925192e+00,
          5.11207951146807644818e+00, 8.42404590141772420927e+00, 5.21451598682361504063e+00,
          1.00000000000000000254e+00)
_J1_PQ = (5.71323128072548699714e-04, 6.88455908754495404082e-02, 1.10514232634061696926e+00,
          5.07386386128601488557e+00, 8.39985554327604159757e+00, 5.20982848682361821619e+00,
          9.99999999999999997461e-01)
_J1_QP = (5.10862594750176621635e-02, 4.98213872951233449420e+00, 7.58238284132545283818e+01,
          3.66779609360150777800e+02, 7.10856304998926107277e+02, 5.97489612400613639965e+02,
          2.11688757100572135698e+02, 2.52070205858023719784e+01)
_J1_QQ = (7.42373277035675149943e+01, 1.05644886038262816351e+03, 4.98641058337653607651e+03,
          9.56231892404756170795e+03, 7.99704160447350683650e+03, 2.82619278517639096600e+03,
          3.36093607810698293419e+02)
_J1_RP = (-8.99971225705559398224e+08, 4.52228297998194034323e+11, -7.27494245221818276015e+13,
          3.68295732863852883286e+15)
_J1_RQ = (6.20836478118054335476e+02, 2.56987256757748830383e+05, 8.35146791431949253037e+07,
          2.21511595479792499675e+10, 4.74914122079991414898e+12, 7.84369607876235854894e+14,
          8.95222336184627338078e+16, 5.32278620332680085395e+18)
_SQRT_2_PI = 0.797884560802865355879892119868763737  # sqrt(2 / pi)


def _bessel_asymptotic(x, pp, pq, qp, qq, phase):
    """Hankel's expansion for ``x > 5``: ``sqrt(2 / (pi x)) (P cos(x - phase) - 5 / x Q sin(x - phase))``."""
    if x == _INF:
        return _NAN  # torch's: cos(inf) (plain Python raises there)
    z = 25.0 / (x * x)
    p = _polevl(z, pp) / _polevl(z, pq)
    q = _polevl(z, qp) / _polevl(z, qq)
    return (p * math.cos(x - phase) - 5.0 / x * q * math.sin(x - phase)) * _SQRT_2_PI / math.sqrt(x)


def _bessel_j0(x0):
    x = abs(_f64(x0))
    if x <= 5.0:
        if x < 1e-5:
            return 1.0 - x * x / 4.0
        z = x * x
        return (z - 5.78318596294678452118e+00) * (z - 3.04712623436620863991e+01) * _polevl(z, _J0_RP) / _polevl(
            z, _J0_RQ)
    return _bessel_asymptotic(x, _J0_PP, _J0_PQ, _J0_QP, _J0_QQ, 0.785398163397448309615660845819875721)


def _bessel_j1(x0):
    x = abs(_f64(x0))
    if x <= 5.0:
        z = x * x
        r = _polevl(z, _J1_RP) / _polevl(z, _J1_RQ) * x * (z - 1.46819706421238932572e+01) * (
            z - 4.92184563216946036703e+01)
    else:
        r = _bessel_asymptotic(x, _J1_PP, _J1_PQ, _J1_QP, _J1_QQ, 2.356194490192344928846982537459627163)
    return -r if x0 < 0.0 else r


# --- normal distribution ------------------------------------------------------------------------------
_NDTRI_P0 = (-5.99633501014107895267e1, 9.80010754185999661536e1, -5.66762857469070293439e1,
             1.39312609387279679503e1, -1.23916583867381258016e0)
_NDTRI_Q0 = (1.0, 1.95448858338141759834e0, 4.67627912898881538453e0, 8.63602421390890590575e1,
             -2.25462687854119370527e2, 2.00260212380060660359e2, -8.20372256168333339912e1,
             1.59056225126211695515e1, -1.18331621121330003142e0)
_NDTRI_P1 = (4.05544892305962419923e0, 3.15251094599893866154e1, 5.71628192246421288162e1,
             4.40805073893200834700e1, 1.46849561928858024014e1, 2.18663306850790267539e0,
             -1.40256079171354495875e-1, -3.50424626827848203418e-2, -8.57456785154685413611e-4)
_NDTRI_Q1 = (1.0, 1.57799883256466749731e1, 4.53907635128879210584e1, 4.13172038254672030440e1,
             1.50425385692907503408e1, 2.50464946208309415979e0, -1.42182922854787788574e-1,
             -3.80806407691578277194e-2, -9.33259480895457427372e-4)
_NDTRI_P2 = (3.23774891776946035970e0, 6.91522889068984211695e0, 3.93881025292474443415e0,
             1.33303460815807542389e0, 2.01485389549179081538e-1, 1.23716634817820021358e-2,
             3.01581553508235416007e-4, 2.65806974686737550832e-6, 6.23974539184983293730e-9)
_NDTRI_Q2 = (1.0, 6.02427039364742014255e0, 3.67983563856160859403e0, 1.37702099489081330271e0,
             2.16236993594496635890e-1, 1.34204006088543189037e-2, 3.28014464682127739104e-4,
             2.89247864745380683936e-6, 6.79019408009981274425e-9)
_EXP_M2 = 0.13533528323661269189  # exp(-2)


def _ndtri(y0):
    """The inverse of the standard normal CDF (Cephes' rational approximations)."""
    y = _f64(y0)
    if y == 0.0:
        return -_INF
    if y == 1.0:
        return _INF
    if not 0.0 < y < 1.0:
        return _NAN
    negate = True
    if y > 1.0 - _EXP_M2:
        y = 1.0 - y
        negate = False
    if y > _EXP_M2:
        y = y - 0.5
        y2 = y * y
        return (y + y * (y2 * _polevl(y2, _NDTRI_P0) / _polevl(y2, _NDTRI_Q0))) * 2.50662827463100050242
    x = math.sqrt(-2.0 * math.log(y))
    x0 = x - math.log(x) / x
    z = 1.0 / x
    if x < 8.0:
        x1 = z * _polevl(z, _NDTRI_P1) / _polevl(z, _NDTRI_Q1)
    else:
        x1 = z * _polevl(z, _NDTRI_P2) / _polevl(z, _NDTRI_Q2)
    return x1 - x0 if negate else x0 - x1


def _erfcx_pos(x):
    """``exp(x**2) erfc(x)`` for ``x >= 0``: directly below 10, the asymptotic series above."""
    if x < 10.0:
        return math.exp(x * x) * math.erfc(x)
    # 1/(x sqrt(pi)) * sum_k (-1)^k (2k-1)!! / (2x^2)^k: 15 terms leave < 1e-18 at x = 10
    z = 0.5 / (x * x)
    term = 1.0
    s = 1.0
    for k in range(1, 16):
        term *= -(2.0 * k - 1.0) * z
        s += term
    return _INV_SQRT_PI / x * s


def _erfcx(x0):
    """The scaled complementary error function ``exp(x**2) erfc(x)``."""
    x = _f64(x0)
    if x != x:
        return x
    if x >= 0.0:
        return _erfcx_pos(x)
    if x * x > 709.7:  # exp(x**2) overflows (plain Python raises)
        return _INF
    e = 2.0 * math.exp(x * x)
    return e if x < -6.1 else e - _erfcx_pos(-x)


def _log_ndtr(x0):
    """``log`` of the standard normal CDF, accurate in both tails (SciPy's formulation)."""
    x = _f64(x0)
    t = x * _SQRT1_2
    if x == -_INF:
        return x
    if x < -1.0:
        return math.log(_erfcx(-t) / 2.0) - t * t
    return math.log1p(-math.erfc(t) / 2.0)


# --- the rest ------------------------------------------------------------------------------------------
def _entr(x0):
    x = _f64(x0)
    if x != x:
        return x
    if x > 0.0:
        return -x * math.log(x)
    if x == 0.0:
        return 0.0
    return -_INF


def _sinc(x0):
    x = _f64(x0)
    if x == 0.0:
        return 1.0
    if x != x or x == _INF or x == -_INF:
        return _NAN
    px = _PI * x
    return math.sin(px) / px


def _xlog1py(x0, y0):
    x = _f64(x0)
    y = _f64(y0)
    if x == 0.0 and y == y:
        return 0.0
    if y <= -1.0:  # math.log1p raises there in plain Python (the CUDA simulator)
        return -x * _INF if y == -1.0 else _NAN
    return x * math.log1p(y)


# operator -> (formula, number of operands): the scalar functions both devices compile.
FORMULAS = {
    "lgamma": (_lgamma, 1), "digamma": (_digamma, 1), "polygamma": (_polygamma, 2),
    "i0": (_i0, 1), "special_i0e": (_i0e, 1), "special_i1": (_i1, 1), "special_i1e": (_i1e, 1),
    "special_ndtri": (_ndtri, 1), "special_erfcx": (_erfcx, 1), "special_log_ndtr": (_log_ndtr, 1),
    "special_entr": (_entr, 1), "sinc": (_sinc, 1), "special_xlog1py": (_xlog1py, 2),
    "special_zeta": (_zeta, 2), "special_bessel_j0": (_bessel_j0, 1), "special_bessel_j1": (_bessel_j1, 1),
    "igamma": (_gammainc, 2), "igammac": (_gammaincc, 2),
}
_HELPERS = (_polevl, _chbevl, _is_pole, _digamma, _trigamma, _zeta, _i0e, _i1e, _scaled_back, _erfcx_pos, _erfcx,
            _bessel_asymptotic, _igam_edge, _igam_prefactor, _igam_series, _igamc_fraction)


@functools.cache
def jitable() -> None:
    """Register every formula with numba's ``register_jitable`` (Note [One formula, two devices])."""
    import numba
    from numba.extending import register_jitable

    globals()["_f64"] = numba.float64  # read when the formulas compile (Note [One formula, two devices])
    for fn in (*_HELPERS, *(f for f, _ in FORMULAS.values())):
        register_jitable(fn)


@functools.cache
def _ufunc(name: str):
    """Operator ``name``'s formula as a numba ufunc with a float64 loop."""
    import numba

    jitable()
    fn, arity = FORMULAS[name]
    return numba.vectorize([f"float64({', '.join(['float64'] * arity)})"], cache=True)(fn)


def _lazy_ufunc(name: str):
    def call(*args, **kwargs):
        return _ufunc(name)(*args, **kwargs)

    return call


def _in_float64(k, args: tuple, dtype, out):
    """``k(*args, dtype, out=out)`` computed in float64 whatever ``dtype`` is, rounded to it."""
    if dtype is dt.float64:
        return k(*args, dt.float64, out=out)
    r = k(*args, dt.float64).astype(dtype.np)  # out-of-range values become inf (this kernel runs quietly)
    if out is None:
        return r
    np.copyto(out, r, casting="unsafe")
    return out


def _unary(name: str):
    k = unary_kernel(_lazy_ufunc(name))

    def special(a, dtype, out=None):
        return _in_float64(k, (a,), dtype, out)

    return special


def _binary(name: str):
    k = binary_kernel(_lazy_ufunc(name))

    def special(a, b, dtype, out=None):
        return _in_float64(k, (a, b), dtype, out)

    return special


for _name, (_fn, _arity) in FORMULAS.items():
    if _name != "polygamma":
        kernel(_name, "cpu")((_unary if _arity == 1 else _binary)(_name))
del _name, _fn, _arity

_polygamma_kernel = binary_kernel(_lazy_ufunc("polygamma"))


@kernel("polygamma", "cpu")
def _cpu_polygamma(a, dtype, n, out=None):
    return _in_float64(_polygamma_kernel, (a, float(n)), dtype, out)
