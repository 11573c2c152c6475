"""The few matrix functions the distributions need, from ``flambeau.linalg``.

``_composite_cholesky`` / ``_composite_solve_triangular`` are reference composites of flambeau
operators (a column-by-column Cholesky and forward substitution, vectorised over the batch dims)
that the tests check against torch; the distributions do not use them.
"""

from __future__ import annotations

import flambeau as fl
import flambeau.linalg as _la
from flambeau.distributions.utils import broadcast_shapes


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
    """``(L, ok)``: the lower Cholesky factor of ``a`` (..., n, n) and a bool (...) per matrix, False
    where ``a`` is not positive definite."""
    factor, info = _la.cholesky_ex(a)
    return factor, info == 0


cholesky = _la.cholesky


def solve_triangular(lower, b):
    """``X`` with ``lower @ X = b`` for lower-triangular ``lower`` (..., n, n) and ``b`` (..., n, k);
    batch dims broadcast."""
    return _la.solve_triangular(lower, b, upper=False)


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


cholesky_inverse = fl.cholesky_inverse
