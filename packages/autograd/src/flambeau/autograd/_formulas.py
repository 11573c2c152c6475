"""The derivative table: one entry per differentiable operator of tensor-core, keyed by its name.

Each entry gives one formula per differentiable input, under the input's name in the
operator's signature, like PyTorch's derivatives.yaml (see ``_opnode.py`` for the formula
convention). Formulas use flambeau operators only, so they are themselves differentiable
(double backward). Broadcasting and dtype casts are undone centrally, never here.
"""

from __future__ import annotations

import math

import numpy as np

import flambeau as fl
from flambeau._ops import OPS
from flambeau.autograd._opnode import Derivative as D

__all__ = ["TABLE"]

_LN2 = math.log(2.0)
_LN10 = math.log(10.0)
_SQRT_PI = math.sqrt(math.pi)


# --- helpers shared by formulas ---------------------------------------------------------------------
def _unreduce(g, s, dim_name="dim", keepdim_name="keepdim"):
    """Broadcast a reduction's gradient back to the input's shape."""
    shape = s.input_shape
    dim = s.get(dim_name)
    if not s.get(keepdim_name, False) and len(shape) and g.dim() != len(shape):
        dims = range(len(shape)) if dim is None else ((dim,) if isinstance(dim, int) else dim)
        for d in sorted(d % len(shape) for d in dims):
            g = g.unsqueeze(d)
    return g.expand(shape)


def _reduced_count(s, dim_name="dim"):
    shape = s.input_shape
    dim = s.get(dim_name)
    if dim is None:
        return math.prod(shape)
    dims = (dim,) if isinstance(dim, int) else dim
    return math.prod(shape[d] for d in dims) if dims else math.prod(shape)


def _keep(x, s, dim_name="dim", keepdim_name="keepdim"):
    """``x`` (a reduction result) with reduced dims kept, for broadcasting against the input."""
    return _unreduce(x, s, dim_name, keepdim_name) if x.dim() != len(s.input_shape) else x


def _scatter_back(g, s, indices, dim, keepdim=True):
    """Gradient of selecting ``indices`` along ``dim`` (max/min with dim, sort, topk)."""
    if not keepdim:
        g, indices = g.unsqueeze(dim), indices.unsqueeze(dim)
    return fl.zeros(s.input_shape, dtype=g.dtype, device=g.device).scatter(dim, indices, g)


def _pad_along(g, dim, before, after):
    """``g`` with ``before``/``after`` zero slices along ``dim`` (gradient of slicing, differentiable)."""
    parts = []
    shape = list(g.shape)
    if before:
        shape[dim] = before
        parts.append(fl.zeros(shape, dtype=g.dtype, device=g.device))
    parts.append(g)
    if after:
        shape[dim] = after
        parts.append(fl.zeros(shape, dtype=g.dtype, device=g.device))
    return fl.cat(parts, dim) if len(parts) > 1 else g


def _c(x):
    """The complex conjugate of a complex tensor or number, else ``x`` itself (no copy): derivatives of
    holomorphic ops conjugate their local derivative (torch's convention: the gradient of a real loss L
    w.r.t. z is dL/d(conj z) scaled by 2, so a product's rule multiplies by conj(other))."""
    if isinstance(x, fl.Tensor):
        return x.conj() if x.dtype.is_complex else x
    return x.conjugate() if isinstance(x, complex) else x


def _logit_grad(g, s):
    """torch's: NaN outside [0, 1] without ``eps``; with it, 0 outside [eps, 1 - eps] (where the input was
    clamped)."""
    x, eps = s.input, s.get("eps")
    if eps is None:
        return fl.where((x < 0) | (x > 1), fl.full_like(x, math.nan), g / (x * (1 - x)))
    return fl.where((x < eps) | (x > 1 - eps), fl.zeros_like(x), g / (x * (1 - x)))


def _reverse_cumsum(x, dim: int):
    return x.flip(dim).cumsum(dim).flip(dim)


def _others_product(x, d: int):
    """Each element's product of the other elements of its line along ``d``: exclusive cumulative products from
    both ends (torch's prod_safe_zeros_backward), exact where the line holds zeros (``result / x`` gives NaN there),
    and differentiable."""
    n = x.shape[d]
    if n == 0:
        return x
    ones = fl.ones_like(x.narrow(d, 0, 1))
    before = fl.cat([ones, x.narrow(d, 0, n - 1)], d).cumprod(d)
    after = fl.cat([ones, x.flip(d).narrow(d, 0, n - 1)], d).cumprod(d).flip(d)
    return before * after


def _prod_grad(g, s):
    """d prod / d input: the product of the others of each reduced line (:func:`_others_product`)."""
    x = s.input
    if x.dim() == 0:
        return g
    dim = s.get("dim")
    dims = (dim,) if isinstance(dim, int) else tuple(range(x.dim())) if dim is None else tuple(dim)
    if len(dims) == 1:
        return _unreduce(g, s) * _others_product(x, dims[0] % x.dim())
    # every element (prod takes one dim or none): the line is the flattened tensor
    return (_unreduce(g, s).reshape(-1) * _others_product(x.reshape(-1), 0)).reshape(s.input_shape)


def _cumprod_grad(g, s):
    """d cumprod with zeros in the input (torch's cumprod_backward). Along each line, with z its first zero
    and ``c1`` the cumprod of the input with that zero set to 1:

    - before z: the usual ``revcumsum(g * result) / input``;
    - at z: the products of the other inputs, ``revcumsum(g * c1)``;
    - after z: ``x_z * revcumsum(g * c1) / input`` (0, as every product holds x_z, but it keeps the
      derivative w.r.t. x_z for double backward), and 0 at later zeros.

    Written with operators, so it can be differentiated again."""
    x, dim = s.input, s.dim
    zero = x == 0
    zeros_so_far = zero.to(fl.int64).cumsum(dim)
    before = zeros_so_far == 0
    first = zero & (zeros_so_far == 1)
    after = (zeros_so_far > 0) & ~zero
    one, nothing = fl.ones_like(x), fl.zeros_like(x)
    usual = _reverse_cumsum(g * s.result, dim) / fl.where(before, x, one)
    others = _reverse_cumsum(g * fl.where(first, one, x).cumprod(dim), dim)
    x_first = fl.where(first, x, nothing).sum(dim, keepdim=True)
    later = x_first * others / fl.where(after, x, one)
    return fl.where(before, usual, fl.where(first, others, fl.where(after, later, nothing)))


def _matmul_grad(g, a, b, which: int):
    """Gradient of ``a @ b`` w.r.t. ``a`` (``which=0``) or ``b`` (1), for every torch broadcasting case."""
    if a.dim() == 1 and b.dim() == 1:
        return g * b if which == 0 else g * a
    if a.dim() == 1:
        g = g.unsqueeze(-2)
    if b.dim() == 1:
        g = g.unsqueeze(-1)
    if which == 0:
        b2 = b.unsqueeze(-1) if b.dim() == 1 else b
        ga = g @ b2.mT
        return ga.squeeze(-2) if a.dim() == 1 else ga  # drop the row dim added for a 1-D ``a``
    if b.dim() == 2 and a.dim() > 2:
        # A Linear on (B, T, D) inputs: one (D, B*T) @ (B*T, O) product, not B products summed after.
        rows = math.prod(a.shape[:-1])
        return _mm_grad(g.reshape(rows, g.shape[-1]), a.reshape(rows, a.shape[-1]), b, 1)
    a2 = a.unsqueeze(0) if a.dim() == 1 else a
    gb = a2.mT @ g
    return gb.squeeze(-1) if b.dim() == 1 else gb  # drop the column dim added for a 1-D ``b``


def _is_transposed(m) -> bool:
    """Whether the matrix ``m`` is the transpose of a contiguous one (``weight.t()`` in ``linear``)."""
    return m.dim() == 2 and m.stride(0) == 1 and m.stride(1) == m.shape[0] and m.shape[0] > 1 and m.shape[1] > 1


def _plain_bias(metas) -> bool:
    """Whether ``linear``'s bias is a ``(out,)`` vector (its recorded ``metas``): else a matrix bias of a 2-D input."""
    bias = metas.get("bias")
    return bias is not None and len(bias[0]) == 1 and bias[0][0] == metas["weight"][0][0]


def _linear(name):
    """The formula of ``linear``'s ``name`` where :func:`_linear_joint` does not answer: differentiable products
    (under ``create_graph``, and for complex dtypes, whose gradients conjugate the other operand). A bias other
    than a ``(out,)`` vector gets ``g``, which the engine reduces to its shape."""
    def formula(g, s):
        if name == "input":
            return g.mm(_c(s.weight)) if g.ndim == 2 else g.matmul(_c(s.weight))
        return _linear_weight_grad(g, _c(s.input)) if name == "weight" else g
    return formula


def _linear_joint(g, s, need):
    """``linear``'s gradients from one ``linear_backward`` call (Note [Linear as one operator]); None under
    ``create_graph`` and for complex dtypes (linear_backward: real dtypes, no conjugation)."""
    metas = s._node._metas  # (shape, dtype, device) of each tensor input: read directly, once
    if fl.is_grad_enabled() or metas["weight"][1].is_complex:
        return None
    plain = _plain_bias(metas)
    gi, gw, gb = OPS["linear_backward"].fn(g, s.input, s.weight,
                                          ("input" in need, "weight" in need, plain and "bias" in need))
    return {"input": gi, "weight": gw, "bias": gb if plain else g}


def _linear_weight_grad(g, x):
    """``g2.T @ x2`` over the rows of ``g`` ``(*, out)`` and ``x`` ``(*, in)`` (their leading dims folded)."""
    if g.ndim == 2:
        return g.t().mm(x)
    rows = math.prod(g.shape[:-1])
    return g.reshape(rows, g.shape[-1]).t().mm(x.reshape(rows, x.shape[-1]))


def _mm_grad(g, mat1, mat2, which: int):
    """Gradient of ``mat1 @ mat2`` w.r.t. ``mat1`` (``which=0``) or ``mat2`` (1), in that input's layout.

    As torch's mm_mat*_backward: for a transposed input the product is computed transposed, so its
    gradient arrives at the contiguous tensor underneath (after ``t``'s backward) contiguous itself,
    and ``.grad`` takes it without a copy.
    """
    if which == 0:
        return (mat2 @ g.mT).mT if _is_transposed(mat1) else g @ mat2.mT
    return (g.mT @ mat1).mT if _is_transposed(mat2) else mat1.mT @ g


def _scaled(g, factor):
    """``g * factor``, without a pass over ``g`` for the common factor 1."""
    return g if factor == 1 else g * factor


def _max_formula(g, s):
    # Evenly split among ties, as torch does for the full reduction.
    mask = (s.input == s.result0).to(g.dtype)
    return mask * (g / mask.sum())


def _amax_formula(g, s):
    mask = (s.input == _keep(s.result, s)).to(g.dtype)
    return mask * _unreduce(g, s) / _keep(mask.sum(dim=s.get("dim"), keepdim=True), s)


def _atan2_scale(s):
    """``1 / (y^2 + x^2)`` of atan2's arguments, 0 where both are 0 (torch's choice: a finite gradient there)."""
    r = (s.input * s.input + s.other * s.other).reciprocal()
    return r.masked_fill(r.isinf(), 0.0)


def _var_formula(g, s, std=False):
    x = s.input
    dim = s.get("dim")
    correction = s.get("correction")
    if correction is None:
        correction = 1 if s.get("unbiased", True) else 0
    n = _reduced_count(s)
    if std:  # d std = d var / (2 std); 0 where std is 0 (a constant line), as torch's std_backward
        g = (g / (2.0 * s.result)).masked_fill(s.result == 0, 0.0)
    centered = x - x.mean(dim=dim, keepdim=True)
    if n - correction <= 0:
        return centered * float("nan")
    return _unreduce(g, s) * (2.0 / (n - correction)) * centered


def _norm_formula(g, s):
    p = s.get("p", 2)
    x = s.input
    r = _keep(s.result, s)
    gu = _unreduce(g, s)
    if p in (2, "fro", None):
        return gu * x / r.masked_fill(r == 0, 1.0) * (r != 0)
    if p == 1:
        return gu * x.sign()
    if p in (math.inf, float("inf")):
        mask = (x.abs() == r).to(x.dtype)
        return gu * x.sign() * mask / _keep(mask.sum(dim=s.get("dim"), keepdim=True), s)
    return gu * x * x.abs() ** (p - 2) / r ** (p - 1)


def _split_grads(g, s):
    """Gradient of split/chunk/unbind/tensor_split: concatenate the pieces' gradients."""
    return fl.cat(list(g), s.get("dim", 0))


def _einsum_grads(g, s):
    eq = s.equation.replace(" ", "")
    lhs, _, out = eq.partition("->")
    ins = lhs.split(",")
    ops = list(s.tensors)
    grads = []
    for i, spec in enumerate(ins):
        if not ops[i].requires_grad:
            grads.append(None)
            continue
        others = [ins[j] for j in range(len(ins)) if j != i]
        # Letters of operand i that appear nowhere else are broadcast back with expand.
        kept = "".join(c for c in dict.fromkeys(spec) if c in out or any(c in o for o in others) or c == ".")
        sub = ",".join([out] + others) + "->" + kept
        gi = fl.einsum(sub, g, *[ops[j] for j in range(len(ins)) if j != i])
        if kept != spec:
            shape = ops[i].shape
            for pos, c in enumerate(spec):
                if c not in kept:
                    gi = gi.unsqueeze(pos)
            gi = gi.expand(shape)
        grads.append(gi)
    return grads


def _pow_base_grad(g, base, exponent):
    """d(base ** exponent)/d base; zero where the exponent is 0, even at base 0 (torch's rule: not 0 * inf)."""
    if not isinstance(exponent, fl.Tensor):
        return g * 0 if exponent == 0 else g * exponent * base ** (exponent - 1)
    return g * (exponent * base ** (exponent - 1)).masked_fill(exponent == 0, 0.0)


def _pow_exponent_grad(g, base, exponent, result):
    """d(base ** exponent)/d exponent = result * log(base); zero where base == 0 and exponent >= 0, as torch.

    ``base`` may be a Python number (``2 ** t``): its log is taken in double precision, as torch does.
    """
    if not isinstance(base, fl.Tensor):
        log_base = math.log(base) if base > 0 else (-math.inf if base == 0 else math.nan)
        grad = result * log_base
        return g * (grad.masked_fill(exponent >= 0, 0.0) if base == 0 else grad)
    return g * (result * base.log()).masked_fill((base == 0) & (exponent >= 0), 0.0)


def _relu_grad(g, s):
    # hardtanh's backward with bounds (0, inf): one fused pass where the device has the kernel
    return fl.hardtanh_backward(g, s.result, 0.0, math.inf)


TABLE: dict[str, D] = {
    # --- arithmetic -----------------------------------------------------------------------------
    # (alpha 1: ``other`` gets ``g`` itself, as torch's maybe_multiply gives it; no pass over g)
    "add": D({"input": lambda g, s: g, "other": lambda g, s: _scaled(g, s.get("alpha", 1))}),
    "sub": D({"input": lambda g, s: g, "other": lambda g, s: _scaled(-g, s.get("alpha", 1))}),
    "mul": D({"input": lambda g, s: g * _c(s.other), "other": lambda g, s: g * _c(s.input)}, save=("input", "other")),
    "div": D({"input": lambda g, s: g / _c(s.other) if s.get("rounding_mode") is None else g * 0,
              "other": lambda g, s: -g * _c(s.input / (s.other * s.other)) if s.get("rounding_mode") is None
              else g * 0},
             save=("input", "other")),
    "neg": D({"input": lambda g, s: -g}),
    "reciprocal": D({"input": lambda g, s: -g * _c(s.result * s.result)}, save=("result",)),
    "pow": D({"input": lambda g, s: _pow_base_grad(g, s.input, s.exponent),
              "exponent": lambda g, s: _pow_exponent_grad(g, s.input, s.exponent, s.result)},
             save=("input", "exponent", "result")),
    "abs": D({"input": lambda g, s: g * s.input.sgn()}, save=("input",)),  # sgn: z/|z| for complex, sign for real
    "sign": D({"input": lambda g, s: g * 0}),
    "remainder": D({"input": lambda g, s: g, "other": lambda g, s: -g * fl.floor_divide(s.input, s.other)},
                   save=("input", "other")),
    "fmod": D({"input": lambda g, s: g, "other": lambda g, s: -g * (s.input / s.other).trunc()},
              save=("input", "other")),
    # --- math -----------------------------------------------------------------------------------
    "exp": D({"input": lambda g, s: g * _c(s.result)}, save=("result",)),
    "exp2": D({"input": lambda g, s: g * s.result * _LN2}, save=("result",)),
    "expm1": D({"input": lambda g, s: g * (s.result + 1)}, save=("result",)),
    "log": D({"input": lambda g, s: g / _c(s.input)}, save=("input",)),
    "log1p": D({"input": lambda g, s: g / (s.input + 1)}, save=("input",)),
    "log2": D({"input": lambda g, s: g / (s.input * _LN2)}, save=("input",)),
    "log10": D({"input": lambda g, s: g / (s.input * _LN10)}, save=("input",)),
    "sqrt": D({"input": lambda g, s: g / (2 * _c(s.result))}, save=("result",)),
    "rsqrt": D({"input": lambda g, s: -0.5 * g * s.result ** 3}, save=("result",)),
    "sin": D({"input": lambda g, s: g * s.input.cos()}, save=("input",)),
    "cos": D({"input": lambda g, s: -g * s.input.sin()}, save=("input",)),
    "tan": D({"input": lambda g, s: g * (1 + s.result * s.result)}, save=("result",)),
    "asin": D({"input": lambda g, s: g * (1 - s.input * s.input).rsqrt()}, save=("input",)),
    "acos": D({"input": lambda g, s: -g * (1 - s.input * s.input).rsqrt()}, save=("input",)),
    "atan": D({"input": lambda g, s: g / (1 + s.input * s.input)}, save=("input",)),
    "sinh": D({"input": lambda g, s: g * s.input.cosh()}, save=("input",)),
    "cosh": D({"input": lambda g, s: g * s.input.sinh()}, save=("input",)),
    "tanh": D({"input": lambda g, s: g * (1 - s.result * s.result)}, save=("result",)),
    "asinh": D({"input": lambda g, s: g * (s.input * s.input + 1).rsqrt()}, save=("input",)),
    "acosh": D({"input": lambda g, s: g * (s.input * s.input - 1).rsqrt()}, save=("input",)),
    "atanh": D({"input": lambda g, s: g / (1 - s.input * s.input)}, save=("input",)),
    "atan2": D({"input": lambda g, s: g * s.other * _atan2_scale(s),
                "other": lambda g, s: -g * s.input * _atan2_scale(s)}, save=("input", "other")),
    "sigmoid": D({"input": lambda g, s: g * s.result * (1 - s.result)}, save=("result",)),
    "logit": D({"input": _logit_grad}, save=("input",)),
    "erf": D({"input": lambda g, s: g * (2 / _SQRT_PI) * (-(s.input * s.input)).exp()}, save=("input",)),
    "erfc": D({"input": lambda g, s: -g * (2 / _SQRT_PI) * (-(s.input * s.input)).exp()}, save=("input",)),
    "erfinv": D({"input": lambda g, s: g * (_SQRT_PI / 2) * (s.result * s.result).exp()}, save=("result",)),
    "relu": D({"input": _relu_grad}, save=("result",)),
    # gelu and silu: fused in one kernel; the *_backward ops' own derivatives (in _formulas_act) give
    # double backward
    "gelu": D({"input": lambda g, s: fl.gelu_backward(g, s.input, approximate=s.get("approximate", "none"))},
              save=("input",)),
    "silu": D({"input": lambda g, s: fl.silu_backward(g, s.input)}, save=("input",)),
    "softplus": D({"input": lambda g, s: g * _softplus_grad(s)}, save=("input",)),
    "hypot": D({"input": lambda g, s: g * s.input / s.result, "other": lambda g, s: g * s.other / s.result},
               save=("input", "other", "result")),
    "logaddexp": D({"input": lambda g, s: g * (s.input - s.result).exp(),
                    "other": lambda g, s: g * (s.other - s.result).exp()}, save=("input", "other", "result")),
    # torch's rule: log(other) also where input == 0, except where other <= 0 (there 0, not -inf/nan)
    "xlogy": D({"input": lambda g, s: fl.xlogy(g, s.other).masked_fill((s.input == 0) & (s.other <= 0), 0.0),
                "other": lambda g, s: g * s.input / s.other}, save=("input", "other")),
    "copysign": D({"input": lambda g, s: g * s.input.sign() * s.result.sign()}, save=("input", "result")),
    "floor": D({"input": lambda g, s: g * 0}),
    "ceil": D({"input": lambda g, s: g * 0}),
    "round": D({"input": lambda g, s: g * 0}),
    "trunc": D({"input": lambda g, s: g * 0}),
    "frac": D({"input": lambda g, s: g}),
    "nan_to_num": D({"input": lambda g, s: g * s.input.isfinite()}, save=("input",)),
    "clamp": D({"input": lambda g, s: g * _clamp_mask(s),
                "min": lambda g, s: g * (s.input < s.min) if fl.is_tensor(s.min) else None,
                "max": lambda g, s: g * (s.input > s.max) if fl.is_tensor(s.max) else None},
               save=("input", "min", "max")),
    "maximum": D({"input": lambda g, s: g * _ge_share(s.input, s.other),
                  "other": lambda g, s: g * _ge_share(s.other, s.input)}, save=("input", "other")),
    "minimum": D({"input": lambda g, s: g * _ge_share(s.other, s.input),
                  "other": lambda g, s: g * _ge_share(s.input, s.other)}, save=("input", "other")),
    "fmax": D({"input": lambda g, s: g * _ge_share(s.input, s.other),
               "other": lambda g, s: g * _ge_share(s.other, s.input)}, save=("input", "other")),
    "fmin": D({"input": lambda g, s: g * _ge_share(s.other, s.input),
               "other": lambda g, s: g * _ge_share(s.input, s.other)}, save=("input", "other")),
    "where": D({"input": lambda g, s: fl.where(s.condition, g, 0.0),
                "other": lambda g, s: fl.where(s.condition, 0.0, g)}, save=("condition",)),
    "lerp": D({"input": lambda g, s: g * (1 - s.weight), "end": lambda g, s: g * s.weight,
               "weight": lambda g, s: g * (s.end - s.input)}, save=("input", "end", "weight")),
    "addcmul": D({"input": lambda g, s: g, "tensor1": lambda g, s: g * s.get("value", 1) * s.tensor2,
                  "tensor2": lambda g, s: g * s.get("value", 1) * s.tensor1}, save=("tensor1", "tensor2")),
    "addcdiv": D({"input": lambda g, s: g, "tensor1": lambda g, s: g * s.get("value", 1) / s.tensor2,
                  "tensor2": lambda g, s: -g * s.get("value", 1) * s.tensor1 / (s.tensor2 * s.tensor2)},
                 save=("tensor1", "tensor2")),
    # --- conversions ----------------------------------------------------------------------------
    "to_copy": D({"input": lambda g, s: g.to(device=s.input_device)}),
    "clone": D({"input": lambda g, s: g}),
    "contiguous": D({"input": lambda g, s: g}),
    # --- reductions -----------------------------------------------------------------------------
    "sum": D({"input": lambda g, s: _unreduce(g, s)}),
    "nansum": D({"input": lambda g, s: _unreduce(g, s) * ~s.input.isnan()}, save=("input",)),
    "mean": D({"input": lambda g, s: _unreduce(g, s) / _reduced_count(s)}),
    "prod": D({"input": _prod_grad}, save=("input",)),
    "amax": D({"input": _amax_formula}, save=("input", "result")),
    "amin": D({"input": _amax_formula}, save=("input", "result")),
    "var": D({"input": lambda g, s: _var_formula(g, s)}, save=("input",)),
    "std": D({"input": lambda g, s: _var_formula(g, s, std=True)}, save=("input", "result")),
    "logsumexp": D({"input": lambda g, s: _unreduce(g, s) * (s.input - _keep(s.result, s)).exp()},
                   save=("input", "result")),
    "norm": D({"input": _norm_formula}, save=("input", "result")),
    "cumsum": D({"input": lambda g, s: _reverse_cumsum(g, s.dim)}),
    "cumprod": D({"input": _cumprod_grad}, save=("input", "result")),
    "softmax": D({"input": lambda g, s: s.result * (g - (g * s.result).sum(s.dim, keepdim=True))},
                 save=("result",)),
    "log_softmax": D({"input": lambda g, s: g - s.result.exp() * g.sum(s.dim, keepdim=True)}, save=("result",)),
    # --- linear algebra -------------------------------------------------------------------------
    "matmul": D({"input": lambda g, s: _matmul_grad(g, _c(s.input), _c(s.other), 0),
                 "other": lambda g, s: _matmul_grad(g, _c(s.input), _c(s.other), 1)}, save=("input", "other")),
    "mm": D({"input": lambda g, s: _mm_grad(g, _c(s.input), _c(s.mat2), 0),
             "mat2": lambda g, s: _mm_grad(g, _c(s.input), _c(s.mat2), 1)}, save=("input", "mat2")),
    "bmm": D({"input": lambda g, s: g @ _c(s.mat2).mT, "mat2": lambda g, s: _c(s.input).mT @ g},
             save=("input", "mat2")),
    "mv": D({"input": lambda g, s: fl.outer(g, _c(s.vec)), "vec": lambda g, s: _c(s.input).mT @ g},
            save=("input", "vec")),
    "dot": D({"input": lambda g, s: g * _c(s.other), "other": lambda g, s: g * _c(s.input)}, save=("input", "other")),
    "outer": D({"input": lambda g, s: (g * s.vec2).sum(-1), "vec2": lambda g, s: (g * s.input.unsqueeze(-1)).sum(0)},
               save=("input", "vec2")),
    "addmm": D({"input": lambda g, s: _scaled(g, s.get("beta", 1)),
                "mat1": lambda g, s: _scaled(_mm_grad(g, s.mat1, s.mat2, 0), s.get("alpha", 1)),
                "mat2": lambda g, s: _scaled(_mm_grad(g, s.mat1, s.mat2, 1), s.get("alpha", 1))},
               save=("mat1", "mat2")),
    "linear": D({"input": _linear("input"), "weight": _linear("weight"), "bias": _linear("bias")},
                save=("input", "weight"), joint=_linear_joint),
    "baddbmm": D({"input": lambda g, s: g * s.get("beta", 1),
                  "batch1": lambda g, s: s.get("alpha", 1) * (g @ s.batch2.mT),
                  "batch2": lambda g, s: s.get("alpha", 1) * (s.batch1.mT @ g)}, save=("batch1", "batch2")),
    "einsum": D({"tensors": _einsum_grads}, save=("tensors",)),
    # --- shape and views --------------------------------------------------------------------------
    "view": D({"input": lambda g, s: g.reshape(s.input_shape)}),
    "reshape": D({"input": lambda g, s: g.reshape(s.input_shape)}),
    "flatten": D({"input": lambda g, s: g.reshape(s.input_shape)}),
    "unflatten": D({"input": lambda g, s: g.reshape(s.input_shape)}),
    "squeeze": D({"input": lambda g, s: g.reshape(s.input_shape)}),
    "unsqueeze": D({"input": lambda g, s: g.squeeze(s.dim)}),
    "expand": D({"input": lambda g, s: g}),
    "broadcast_to": D({"input": lambda g, s: g}),
    "permute": D({"input": lambda g, s: g.permute(_inverse_perm(s.dims))}),
    "transpose": D({"input": lambda g, s: g.transpose(s.dim0, s.dim1)}),
    "t": D({"input": lambda g, s: g.t()}),
    "movedim": D({"input": lambda g, s: g.movedim(s.destination, s.source)}),
    "narrow": D({"input": lambda g, s: _pad_along(g, s.dim % len(s.input_shape), s.start,
                                                  s.input_shape[s.dim] - s.start - s.length)}),
    "select": D({"input": lambda g, s: _select_grad(g, s)}),
    "flip": D({"input": lambda g, s: g.flip(s.dims)}),
    "roll": D({"input": lambda g, s: g.roll(_neg(s.shifts), s.get("dims"))}),
    "tril": D({"input": lambda g, s: g.tril(s.get("diagonal", 0))}),
    "triu": D({"input": lambda g, s: g.triu(s.get("diagonal", 0))}),
    "cat": D({"tensors": lambda g, s: g.split([sh[s.get("dim", 0)] if len(sh) else 0 for sh in s.tensors_shape],
                                             s.get("dim", 0))}),
    "stack": D({"tensors": lambda g, s: g.unbind(s.get("dim", 0))}),
    "split": D({"tensor": _split_grads}, outputs=-1),
    "chunk": D({"input": _split_grads}, outputs=-1),
    "unbind": D({"input": lambda g, s: fl.stack(list(g), s.get("dim", 0))}, outputs=-1),
    "repeat": D({"input": lambda g, s: _repeat_grad(g, s)}),
    "gather": D({"input": lambda g, s: fl.zeros(s.input_shape, dtype=g.dtype, device=g.device)
                 .scatter_add(s.dim, s.index, g)}, save=("index",)),
    "scatter": D({"input": lambda g, s: _scatter_grad(g, s, "input"), "src": lambda g, s: _scatter_grad(g, s, "src")},
                 save=("index",)),
    "scatter_add": D({"input": lambda g, s: g, "src": lambda g, s: g.gather(s.dim, s.index)}, save=("index",)),
    "index_select": D({"input": lambda g, s: fl.zeros(s.input_shape, dtype=g.dtype, device=g.device)
                       .index_add(s.dim, s.index, g)}, save=("index",)),
    "index_add": D({"input": lambda g, s: g,
                    "source": lambda g, s: g.index_select(s.dim, s.index) * s.get("alpha", 1)}, save=("index",)),
    "masked_fill": D({"input": lambda g, s: g.masked_fill(s.mask, 0.0),
                      "value": lambda g, s: g.masked_select(s.mask).sum()}, save=("mask",)),
    "masked_select": D({"input": lambda g, s: fl.zeros(s.input_shape, dtype=g.dtype, device=g.device)
                        .masked_scatter(s.mask, g)}, save=("mask",)),
    "sort": D({"input": lambda g, s: _scatter_back(g[0], s, s.result1, s.get("dim", -1))},
              save=("result1",), outputs=2),
    "topk": D({"input": lambda g, s: _scatter_back(g[0], s, s.result1, s.get("dim", -1))},
              save=("result1",), outputs=2),
    "embedding": D({"weight": lambda g, s: _embedding_grad(g, s)}, save=("input",)),
    "embedding_dense_backward": D({"grad_output": lambda gg, s: _embedding_dense_double(gg, s)}, save=("indices",)),
}


def _max_dim_formula(g, s):
    if s.get("dim") is None:  # a single output: the maximum value
        return _max_formula(g, s)
    return _scatter_back(g[0], s, s.result1, s.dim, s.get("keepdim", False))


TABLE["max"] = D({"input": _max_dim_formula}, save=("input", "result0", "result1"), outputs=2)
TABLE["min"] = D({"input": _max_dim_formula}, save=("input", "result0", "result1"), outputs=2)


def _inverse_perm(dims):
    inv = [0] * len(dims)
    for i, d in enumerate(dims):
        inv[d % len(dims)] = i
    return inv


def _neg(shifts):
    return tuple(-x for x in shifts) if isinstance(shifts, (tuple, list)) else -shifts


def _select_grad(g, s):
    dim = s.dim % len(s.input_shape)
    index = s.index % s.input_shape[dim]
    return _pad_along(g.unsqueeze(dim), dim, index, s.input_shape[dim] - index - 1)


def _repeat_grad(g, s):
    shape = s.input_shape
    reps = list(s.repeats)
    lead = len(reps) - len(shape)
    g = g.sum(dim=tuple(range(lead))) if lead else g
    split_shape = []
    for r, n in zip(reps[lead:], shape):
        split_shape += [r, n]
    g = g.reshape(split_shape)
    return g.sum(dim=tuple(range(0, 2 * len(shape), 2))) if shape else g


def _clamp_mask(s):
    x = s.input
    mask = fl.ones_like(x, dtype=fl.bool)
    if s.min is not None:
        mask = mask & (x >= s.min)
    if s.max is not None:
        mask = mask & (x <= s.max)
    return mask


def _ge_share(a, b):
    # d max(a, b)/da: 1 where a > b, 1/2 where they tie (torch's convention).
    return (a > b).to(a.dtype) + (a == b).to(a.dtype) * 0.5


def _softplus_grad(s):
    beta = s.get("beta", 1.0)
    threshold = s.get("threshold", 20.0)
    z = s.input * beta
    return fl.where(z > threshold, fl.ones_like(z), z.sigmoid())


def _scatter_grad(g, s, name: str):
    """``name``'s gradient of a scatter that writes ``src`` over ``input``: ``g`` but where written, and ``g`` read
    where written. A ``reduce="add"`` or ``"multiply"`` scatter has no derivative, as in torch (those gradients would
    be silently wrong for it)."""
    if s.get("reduce") is not None:
        raise RuntimeError("derivative for aten::scatter is not implemented")
    return g.scatter(s.dim, s.index, 0.0) if name == "input" else g.gather(s.dim, s.index)


def _embedding_grad(g, s):
    padding_idx = s.get("padding_idx")  # (the front made a negative one positive)
    return OPS["embedding_dense_backward"].fn(g, s.input, s.weight_shape[0], -1 if padding_idx is None else padding_idx,
                                              bool(s.get("scale_grad_by_freq", False)))


def _embedding_dense_double(gg, s):
    """The derivative of ``embedding_dense_backward`` in its ``grad_output`` (it is linear in it): the rows of ``gg``
    gathered at the indices, none at ``padding_idx`` (outside ``[0, num_weights)``: no padding row), each divided by
    its index's count where scaled (counted in int64, divided in at least float32: exact for any count a batch
    holds)."""
    idx, n, padding_idx = s.indices, s.num_weights, s.padding_idx
    rows = fl.embedding(idx, gg)
    if 0 <= padding_idx < n:
        rows = rows * (idx != padding_idx).to(rows.dtype).unsqueeze(-1)
    if s.scale_grad_by_freq:
        flat = idx.reshape(-1)
        counts = fl.zeros(n, dtype=fl.int64, device=idx.device).index_add_(
            0, flat, fl.ones(flat.shape, dtype=fl.int64, device=idx.device))
        wide = fl.float64 if rows.dtype is fl.float64 else fl.float32
        rows = (rows.to(wide) / fl.embedding(idx, counts.to(wide).unsqueeze(1))).to(rows.dtype)
    return rows


# --- view rebasing (Note [In-place operators under autograd]) ----------------------------------------
def _as_strided_grad(g, s):
    """Gradient of a strided view of a contiguous input (offsets relative to the input): each view element's
    gradient added at the input element it reads, so that elements the view reads several times (overlapping
    windows) get the sum, as torch's."""
    size, stride, offset = tuple(s.size), tuple(s.stride), s.storage_offset
    where = np.full((), offset, np.int64)
    for n, st in zip(size, stride):  # the input offset of every view element, in the view's order
        where = where[..., None] + np.arange(n, dtype=np.int64) * st
    where = where.reshape(-1)
    if np.unique(where).size == where.size:  # no element read twice: one strided copy
        r = fl.zeros(s.input_shape, dtype=g.dtype, device=g.device)
        with fl.no_grad():
            r.as_strided(size, stride, offset).copy_(g)
        return r
    flat = fl.zeros(math.prod(s.input_shape), dtype=g.dtype, device=g.device)
    index = fl.from_numpy(where).to(g.device)
    return flat.index_add(0, index, g.reshape(-1)).reshape(s.input_shape)


def _region_of(g, s):
    g = g.contiguous()
    return g.as_strided(s.size, s.stride, g.storage_offset() + s.storage_offset)


def _zero_region(g, s):
    r = g.clone()
    with fl.no_grad():
        r.as_strided(s.size, s.stride, r.storage_offset() + s.storage_offset).zero_()
    return r


TABLE["as_strided"] = D({"input": _as_strided_grad})


class _InternalOp:
    """A signature-only operator for nodes autograd builds itself (not in tensor-core's table)."""

    def __init__(self, signature: str):
        self.name = signature.split("(", 1)[0]
        self.signature = signature


AS_STRIDED_SCATTER = D({"input": _zero_region, "src": _region_of})
AS_STRIDED_SCATTER.bind(_InternalOp("as_strided_scatter(Tensor input, Tensor src, int[] size, int[] stride, "
                                    "int storage_offset) -> Tensor"))


# --- derivatives of the rest of the table ----------------------------------------------------------
def _index_map_grad(g, s, build):
    """Gradient of an operator that only moves/copies input elements (pad, unfold...).

    ``build(ids)`` applies the operator to a tensor of element ids shaped like the input (-1 where the
    output holds no input element); the gradient sums ``g`` into the ids' positions.
    """
    numel = math.prod(s.input_shape)
    ids = fl.arange(numel, device=g.device).reshape(s.input_shape)
    mapped = build(ids).reshape(-1)
    # Output elements that hold no input element (-1) add into a spare slot past the end, so that
    # nothing here depends on the values (no host synchronisation on CUDA).
    mapped = mapped.masked_fill(mapped < 0, numel)
    summed = fl.zeros(numel + 1, dtype=g.dtype, device=g.device).index_add(0, mapped, g.reshape(-1))
    return summed[:numel].reshape(s.input_shape)


def _stack_like_grads(g, s, dim, promote):
    shapes = s.tensors_shape
    promoted = [promote(sh) for sh in shapes]
    sizes = [sh[dim] for sh in promoted]
    return [piece.reshape(sh) for piece, sh in zip(g.split(sizes, dim), shapes)]


def _atleast(n):
    def promote(shape):
        shape = tuple(shape)
        if len(shape) >= n:
            return shape
        if n == 2:
            return (1,) + shape if len(shape) == 1 else (1, 1)
        if len(shape) == 0:
            return (1, 1, 1)
        if len(shape) == 1:
            return (1,) + shape + (1,)
        return shape + (1,)

    return promote


def _hstack_grads(g, s):
    dim = 0 if all(len(sh) <= 1 for sh in s.tensors_shape) else 1
    return _stack_like_grads(g, s, dim, lambda sh: tuple(sh) if len(sh) else (1,))


def _column_stack_grads(g, s):
    return _stack_like_grads(g, s, 1, lambda sh: (tuple(sh)[0], 1) if len(sh) == 1 else (tuple(sh) or (1, 1)))


def _letters(n, start=0):
    return "".join(chr(ord("a") + start + i) for i in range(n))


def _inner_grads(g, s, which):
    a, b = s.input, s.other
    if a.dim() == 0 or b.dim() == 0:
        return g * b if which == 0 else g * a
    la, lb = _letters(a.dim() - 1), _letters(b.dim() - 1, 10)
    k = "z"
    if which == 0:
        return fl.einsum(f"{la}{lb},{lb}{k}->{la}{k}", g, b)
    return fl.einsum(f"{la}{lb},{la}{k}->{lb}{k}", g, a)


def _tensordot_dims(s):
    dims = s.get("dims", 2)
    na = s.input.dim()
    if isinstance(dims, int):
        return list(range(na - dims, na)), list(range(dims))
    a_dims, b_dims = dims
    a_dims = [a_dims] if isinstance(a_dims, int) else list(a_dims)
    b_dims = [b_dims] if isinstance(b_dims, int) else list(b_dims)
    return [d % na for d in a_dims], [d % s.other.dim() for d in b_dims]


def _tensordot_grads(g, s, which):
    a, b = s.input, s.other
    da, db = _tensordot_dims(s)
    la = list(_letters(a.dim()))
    lb = list(_letters(b.dim(), 12))
    for i, j in zip(da, db):
        lb[j] = la[i]
    out = [c for i, c in enumerate(la) if i not in da] + [c for j, c in enumerate(lb) if j not in db]
    sa, sb, so = "".join(la), "".join(lb), "".join(out)
    if which == 0:
        return fl.einsum(f"{so},{sb}->{sa}", g, b)
    return fl.einsum(f"{so},{sa}->{sb}", g, a)


def _kron_grads(g, s, which):
    a, b = s.input, s.other
    n = max(a.dim(), b.dim())
    ash = (1,) * (n - a.dim()) + tuple(a.shape)
    bsh = (1,) * (n - b.dim()) + tuple(b.shape)
    inter = []
    for x, y in zip(ash, bsh):
        inter += [x, y]
    g4 = g.reshape(inter)
    la, lb = _letters(n), _letters(n, 10)
    spec = "".join(x + y for x, y in zip(la, lb))
    if which == 0:
        return fl.einsum(f"{spec},{lb}->{la}", g4, b.reshape(bsh)).reshape(tuple(a.shape))
    return fl.einsum(f"{spec},{la}->{lb}", g4, a.reshape(ash)).reshape(tuple(b.shape))


def _diagonal_grad(g, s, offset, dim1, dim2):
    """Gradient of ``diagonal``: ``g`` embedded on that diagonal, cropped or zero-padded to the input.

    Built from differentiable operators (diag_embed, narrow, pad) so that double backward works.
    """
    from flambeau._ops.shape import pad

    shape = s.input_shape
    nd = len(shape)
    d1, d2 = dim1 % nd, dim2 % nd
    r = fl.diag_embed(g, offset, d1, d2)  # the diagonal's dims become d1, d2 with size len + |offset|
    for d in (d1, d2):
        size, want = r.shape[d], shape[d]
        if size > want:
            r = r.narrow(d, 0, want)
        elif size < want:
            widths = [0, 0] * (nd - 1 - d) + [0, want - size]  # pad's (last dim first) pairs
            r = pad(r, widths)
    return r


def _unfold_build(s):
    dim, size, step = s.dimension, s.size, s.step
    return lambda ids: ids.unfold(dim, size, step)


def _reduction_pair(first, second):
    """Formula of an op returning two reductions (var_mean, aminmax...) from the two formulas."""
    def formula(g, s):
        total = None
        for fn, gi, rname in ((first, g[0], "result0"), (second, g[1], "result1")):
            part = fn(gi, _Renamed(s, {"result": rname}))
            total = part if total is None else total + part
        return total

    return formula


class _Renamed:
    """``s`` with some names redirected (``result`` -> ``result1``) for reusing formulas."""

    def __init__(self, s, mapping):
        self._s, self._m = s, mapping

    def get(self, name, default=None):
        return self._s.get(self._m.get(name, name), default)

    def __getattr__(self, name):
        return getattr(self._s, self._m.get(name, name))


def _nanmean_grad(g, s):
    notnan = ~s.input.isnan()
    count = _keep(notnan.sum(dim=s.get("dim"), keepdim=True).to(g.dtype), s)
    return _unreduce(g, s) * notnan / count


def _cum_extreme_grad(g, s):
    return fl.zeros(s.input_shape, dtype=g[0].dtype, device=g[0].device).scatter_add(s.dim, s.result1, g[0])


def _median_grad(g, s):
    if s.get("dim") is None:  # a single value: the gradient goes to the (first) median element
        flat = s.input.reshape(-1)
        pos = (flat == s.result0).to(fl.int64).argmax()
        return fl.zeros(flat.numel(), dtype=g.dtype, device=g.device).index_put((pos.reshape(1),), g.reshape(1)) \
            .reshape(s.input_shape)
    return _scatter_back(g[0], s, s.result1, s.dim, s.get("keepdim", False))


def _var_part(g, s):
    return _var_formula(g, s)


def _std_part(g, s):
    return _var_formula(g, s, std=True)


def _mean_part(g, s):
    return _unreduce(g, s) / _reduced_count(s)


def _amin_part(g, s):
    return _amax_formula(g, s)


def _index_put_input(g, s):
    if s.get("accumulate", False):
        return g
    return g.index_put(s.indices, fl.zeros((), dtype=g.dtype, device=g.device))


def _scatter_reduce_grads(g, s, which):
    """torch's scatter_reduce_backward: ties of amax/amin share the gradient evenly; with
    ``include_self=False`` the positions scattered to get no gradient for ``input``."""
    reduce, dim, index = s.reduce, s.dim, s.index
    include_self = s.get("include_self", True)
    if reduce == "sum":
        g_input, g_src = g, (lambda: g.gather(dim, index))
    elif reduce == "mean":
        ones = fl.ones(tuple(index.shape), dtype=g.dtype, device=g.device)
        base = fl.ones(s.input_shape, dtype=g.dtype, device=g.device) if include_self \
            else fl.zeros(s.input_shape, dtype=g.dtype, device=g.device)
        gm = g / base.scatter_add(dim, index, ones).clamp_min(1)
        g_input, g_src = gm, (lambda: gm.gather(dim, index))
    elif reduce in ("amax", "amin"):
        result = s.result
        value = result.gather(dim, index)
        input_is_result = (s.input == result).to(g.dtype)
        src_is_result = (s.src == value).to(g.dtype)
        distributed = g / input_is_result.scatter_add(dim, index, src_is_result)
        g_input, g_src = input_is_result * distributed, (lambda: src_is_result * distributed.gather(dim, index))
    else:
        raise NotImplementedError(f"scatter_reduce(reduce='{reduce}') has no derivative in flambeau-autograd yet")
    if which == 1:
        return g_src()
    return g_input if include_self else g_input.scatter(dim, index, 0.0)


TABLE.update({
    "float_power": D({"input": lambda g, s: _pow_base_grad(g, s.input.double(), s.exponent),
                      "exponent": lambda g, s: _pow_exponent_grad(g, s.input, s.exponent, s.result)},
                     save=("input", "exponent", "result")),
    "deg2rad": D({"input": lambda g, s: g * (math.pi / 180)}),
    "rad2deg": D({"input": lambda g, s: g * (180 / math.pi)}),
    "logaddexp2": D({"input": lambda g, s: g * fl.exp2(s.input - s.result),
                     "other": lambda g, s: g * fl.exp2(s.other - s.result)}, save=("input", "other", "result")),
    "view_as": D({"input": lambda g, s: g.reshape(s.input_shape)}),
    "reshape_as": D({"input": lambda g, s: g.reshape(s.input_shape)}),
    "expand_as": D({"input": lambda g, s: g}),
    "broadcast_tensors": D({"tensors": lambda g, s: list(g)}, outputs=-1),
    "unfold": D({"input": lambda g, s: _index_map_grad(g, s, _unfold_build(s))}),
    "tensor_split": D({"input": _split_grads}, outputs=-1),
    "hstack": D({"tensors": _hstack_grads}),
    "vstack": D({"tensors": lambda g, s: _stack_like_grads(g, s, 0, _atleast(2))}),
    "dstack": D({"tensors": lambda g, s: _stack_like_grads(g, s, 2, _atleast(3))}),
    "column_stack": D({"tensors": _column_stack_grads}),
    "tile": D({"input": lambda g, s: _index_map_grad(g, s, lambda ids: ids.tile(s.dims))}),
    "repeat_interleave": D({"input": lambda g, s: _index_map_grad(
        g, s, lambda ids: ids.repeat_interleave(s.repeats, dim=s.get("dim")))}),
    "split_with_sizes": D({"input": _split_grads}, outputs=-1),
    "hsplit": D({"input": lambda g, s: fl.cat(list(g), 0 if len(s.input_shape) == 1 else 1)}, outputs=-1),
    "vsplit": D({"input": lambda g, s: fl.cat(list(g), 0)}, outputs=-1),
    "dsplit": D({"input": lambda g, s: fl.cat(list(g), 2)}, outputs=-1),
    "adjoint": D({"input": lambda g, s: g.mT}),
    "fliplr": D({"input": lambda g, s: g.fliplr()}),
    "flipud": D({"input": lambda g, s: g.flipud()}),
    "rot90": D({"input": lambda g, s: g.rot90(-s.get("k", 1), s.get("dims", [0, 1]))}),
    "pad": D({"input": lambda g, s: _index_map_grad(g, s, lambda ids: _pad_ids(ids, s))}),
    "msort": D({"input": lambda g, s: _scatter_back(g, s, s.input.argsort(dim=0), 0)}, save=("input",)),
    "kthvalue": D({"input": lambda g, s: _scatter_back(g[0], s, s.result1, s.get("dim", -1), s.get("keepdim", False))},
                  save=("result1",), outputs=2),
    "index": D({"input": lambda g, s: fl.zeros(s.input_shape, dtype=g.dtype, device=g.device)
                .index_put(s.indices, g, accumulate=True)}),
    "index_put": D({"input": _index_put_input, "values": lambda g, s: g[s.indices]}),
    "masked_scatter": D({"input": lambda g, s: g.masked_fill(s.mask, 0.0),
                         "source": lambda g, s: _masked_scatter_source(g, s)}, save=("mask",)),
    "scatter_reduce": D({"input": lambda g, s: _scatter_reduce_grads(g, s, 0),
                         "src": lambda g, s: _scatter_reduce_grads(g, s, 1)}, save=("input", "index", "src", "result")),
    "index_copy": D({"input": lambda g, s: g.index_fill(s.dim, s.index, 0.0),
                     "source": lambda g, s: g.index_select(s.dim, s.index)}, save=("index",)),
    "index_fill": D({"input": lambda g, s: g.index_fill(s.dim, s.index, 0.0)}, save=("index",)),
    # torch's take_backward: put with accumulation, which wraps negative indices as take does
    "take": D({"input": lambda g, s: fl.zeros(s.input_shape, dtype=g.dtype, device=g.device)
               .put_(s.index, g, accumulate=True)}, save=("index",)),
    "put": D({"input": lambda g, s: g if s.get("accumulate", False) else
              g.reshape(-1).index_fill(0, s.index.reshape(-1), 0.0).reshape(s.input_shape),
              "source": lambda g, s: fl.take(g, s.index)}, save=("index",)),
    "vdot": D({"input": lambda g, s: g * s.other, "other": lambda g, s: g * s.input}, save=("input", "other")),
    "kron": D({"input": lambda g, s: _kron_grads(g, s, 0), "other": lambda g, s: _kron_grads(g, s, 1)},
              save=("input", "other")),
    "inner": D({"input": lambda g, s: _inner_grads(g, s, 0), "other": lambda g, s: _inner_grads(g, s, 1)},
               save=("input", "other")),
    "addmv": D({"input": lambda g, s: g * s.get("beta", 1), "mat": lambda g, s: s.get("alpha", 1) * fl.outer(g, s.vec),
                "vec": lambda g, s: s.get("alpha", 1) * (s.mat.mT @ g)}, save=("mat", "vec")),
    "addbmm": D({"input": lambda g, s: g * s.get("beta", 1),
                 "batch1": lambda g, s: s.get("alpha", 1) * (g.unsqueeze(0) @ s.batch2.mT),
                 "batch2": lambda g, s: s.get("alpha", 1) * (s.batch1.mT @ g.unsqueeze(0))}, save=("batch1", "batch2")),
    "tensordot": D({"input": lambda g, s: _tensordot_grads(g, s, 0), "other": lambda g, s: _tensordot_grads(g, s, 1)},
                   save=("input", "other")),
    "trace": D({"input": lambda g, s: g * fl.eye(*s.input_shape, dtype=g.dtype, device=g.device)}),
    "diag": D({"input": lambda g, s: g.diagonal(s.get("diagonal", 0)) if len(s.input_shape) == 1 else
               _diagonal_grad(g, s, s.get("diagonal", 0), 0, 1)}),
    "diagonal": D({"input": lambda g, s: _diagonal_grad(g, s, s.get("offset", 0), s.get("dim1", 0), s.get("dim2", 1))}),
    "diag_embed": D({"input": lambda g, s: g.diagonal(s.get("offset", 0), s.get("dim1", -2), s.get("dim2", -1))}),
    "dropout": D({"input": lambda g, s: g * s.mask if s.get("training", True) and s.get("p", 0.5) > 0 else g}),
    "nanmean": D({"input": _nanmean_grad}, save=("input",)),
    "aminmax": D({"input": _reduction_pair(_amin_part, _amin_part)}, save=("input", "result0", "result1"),
                 outputs=2),
    "var_mean": D({"input": _reduction_pair(_var_part, _mean_part)}, save=("input", "result0", "result1"),
                  outputs=2),
    "std_mean": D({"input": _reduction_pair(_std_part, _mean_part)}, save=("input", "result0", "result1"),
                  outputs=2),
    "cummax": D({"input": _cum_extreme_grad}, save=("result1",), outputs=2),
    "cummin": D({"input": _cum_extreme_grad}, save=("result1",), outputs=2),
    "median": D({"input": _median_grad}, save=("input", "result0", "result1"), outputs=2),
    "mode": D({"input": lambda g, s: _scatter_back(g[0], s, s.result1, s.get("dim", -1), s.get("keepdim", False))},
              save=("result1",), outputs=2),
})


def _pad_ids(ids, s):
    from flambeau._ops.shape import pad

    mode = s.get("mode", "constant")
    if mode == "constant":
        return pad(ids, s.pad, mode="constant", value=-1)
    return pad(ids, s.pad, mode=mode)


def _masked_scatter_source(g, s):
    picked = g.masked_select(s.mask)
    n = math.prod(s.source_shape)
    if picked.numel() < n:
        picked = fl.cat([picked, fl.zeros(n - picked.numel(), dtype=g.dtype, device=g.device)])
    return picked.reshape(s.source_shape)
