"""The few matrix functions MultivariateNormal needs: Cholesky factor and lower-triangular solve.

They use ``flambeau.linalg`` when that package provides them, and otherwise a composite of
flambeau operators (a column-by-column Cholesky and forward substitution, vectorised over the batch
dims): autograd then differentiates them like any composite. The loops run ``n`` times for ``n x n``
matrices, fine for the small event sizes of distributions.
"""

from __future__ import annotations

import flambeau as fl
from flambeau.distributions.utils import broadcast_shapes


def _linalg(name):
    try:
        import flambeau.linalg as linalg
    except ImportError:
        return None
    return getattr(linalg, name, None)


def _composite_cholesky(a):
    """``(L, ok)``: the lower Cholesky factor of ``a`` (..., n, n) and a bool (...) per matrix that is
    False where ``a`` is not positive definite (there ``L`` holds NaN)."""
    # Read the symmetric part, so that the gradient is symmetric as torch.linalg.cholesky's is.
    a = (a + a.mT) / 2
    n = a.shape[-1]
    rows = fl.arange(n, device=a.device)
    cols = []
    ok = fl.ones(tuple(a.shape[:-2]), dtype=fl.bool, device=a.device)
    for j in range(n):
        v = a[..., :, j]
        if j:
            prev = fl.stack(cols, -1)  # (..., n, j)
            v = v - (prev * prev[..., j:j + 1, :]).sum(-1)
        pivot = v[..., j]
        ok = ok & (pivot > 0)
        d = pivot.sqrt()  # NaN where not positive definite, as the factor is undefined there
        col = fl.where(rows > j, v / d.unsqueeze(-1), fl.zeros((), dtype=a.dtype, device=a.device))
        col = fl.where(rows == j, d.unsqueeze(-1), col)
        cols.append(col)
    return fl.stack(cols, -1), ok


def cholesky_ex(a):
    """``(L, ok)`` as :func:`_composite_cholesky` (``ok`` from ``flambeau.linalg.cholesky_ex``'s
    ``info == 0`` when that exists)."""
    native = _linalg("cholesky_ex")
    if native is not None:
        out = native(a)
        return out[0], out[1] == 0
    return _composite_cholesky(a)


def cholesky(a):
    """The lower Cholesky factor of ``a`` (..., n, n); raises when a matrix is not positive definite."""
    native = _linalg("cholesky")
    if native is not None:
        return native(a)
    factor, ok = _composite_cholesky(a)
    if not bool(ok.all()):
        raise ValueError("cholesky: the input is not positive-definite (a leading minor is not positive)")
    return factor


def solve_triangular(lower, b):
    """``X`` with ``lower @ X = b`` for lower-triangular ``lower`` (..., n, n) and ``b`` (..., n, k);
    batch dims broadcast."""
    native = _linalg("solve_triangular")
    if native is not None:
        return native(lower, b, upper=False)
    return _composite_solve_triangular(lower, b)


def _composite_solve_triangular(lower, b):
    batch = broadcast_shapes(lower.shape[:-2], b.shape[:-2])
    n = lower.shape[-1]
    lower = lower.expand(tuple(batch) + (n, n))
    b = b.expand(tuple(batch) + tuple(b.shape[-2:]))
    rows = []
    for i in range(n):
        r = b[..., i, :]
        if i:
            r = r - (lower[..., i, :i].unsqueeze(-1) * fl.stack(rows, -2)).sum(-2)
        rows.append(r / lower[..., i, i:i + 1])
    return fl.stack(rows, -2)


def cholesky_inverse(factor):
    """``(L L^T)^{-1}`` from the lower Cholesky factor ``L`` (..., n, n)."""
    eye = fl.eye(factor.shape[-1], dtype=factor.dtype, device=factor.device)
    inv = solve_triangular(factor, eye)
    return inv.mT @ inv
