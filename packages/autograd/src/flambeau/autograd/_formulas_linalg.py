"""Derivatives of the torch.linalg operators (see _formulas.py for the convention).

The formulas are torch's (``FunctionsManual.cpp``), for real matrices, written with flambeau
operators (``flambeau.linalg`` among them) so that double backward comes for free:

- inverse ``X = A^-1``: ``gA = -X^T gX X^T``; ``det``: ``gA = g det(A) A^-T`` (the cofactor matrix,
  through the SVD where ``A`` is singular); ``slogdet``: ``gA = g_logabsdet A^-T``.
- ``X = solve(A, B)``: ``gB = solve(A^T, gX)``, ``gA = -gB X^T`` (triangular: the same, masked to
  the triangle that is read).
- Cholesky ``A = L L^T``: ``gA = L^-T Φ(L^T gL) L^-1`` with ``Φ`` the symmetrised lower triangle.
- QR ``A = Q R`` (``m >= n``): ``gA = (gQ + Q copyltu(M)) R^-T``, ``M = R gR^T - gQ^T Q``; wide
  matrices split ``A = [X | Y]`` (Walter & Lehmann; Seeger et al.).
- SVD ``A = U S V^T``: ``gA = U [(skew(U^T gU) / E) S + S (skew(V^T gV) / E) + diag(gS)] V^T`` plus the
  parts of ``gU``/``gV`` outside the spans of ``U``/``V``, ``E_ij = s_j^2 - s_i^2`` (Townsend).
  Defined for losses that do not depend on the signs of the singular vectors and for distinct
  singular values (as torch).
- ``eigh`` ``A = V diag(L) V^T``: ``gA = V [skew(V^T gV) / (2E) + diag(gL)] V^T``, ``E_ij = L_j - L_i``.
- ``svdvals``/``eigvalsh``: ``U diag(g) V^T`` / ``V diag(g) V^T`` from a recomputed factorization.
- ``pinv``: torch's ``pinv_backward``; ``matrix_exp``: the upper-right block of
  ``exp([[A^T, g], [0, A^T]])`` (Najfeld & Havel), itself a matrix exponential.
"""

from __future__ import annotations

import flambeau as fl
from flambeau.autograd._opnode import Derivative as D

__all__ = ["TABLE", "TANGENTS"]


def _mat(g):
    """A batch of scalars ``(*)`` as ``(*, 1, 1)``, to scale matrices."""
    return g.unsqueeze(-1).unsqueeze(-1)


def _eye_like(x, n):
    return fl.eye(n, dtype=x.dtype, device=x.device)


def _skew(x):
    return x - x.mT


# --- inverse, determinants ---------------------------------------------------------------------------
def _inv_grad(g, s):
    x = s.result0
    return -(x.mT @ g[0] @ x.mT)


def _cofactor_by_svd(a):
    """``det(A) A^-T`` for any square ``A``, singular included: ``det(U) det(V^T) U diag(prod_{j != i} s_j) V^T``."""
    u, sv, vh = fl.linalg.svd(a)
    ones = fl.ones_like(sv[..., :1])
    before = fl.cat([ones, sv[..., :-1]], -1).cumprod(-1)
    after = fl.cat([sv[..., 1:], ones], -1).flip(-1).cumprod(-1).flip(-1)
    sign = fl.linalg.det(u.detach()) * fl.linalg.det(vh.detach())
    return _mat(sign) * ((u * (before * after).unsqueeze(-2)) @ vh)


def _det_grad(g, s):
    a, d = s.A, s.result
    if bool((d == 0).any()):
        return _mat(g) * _cofactor_by_svd(a)
    return _mat(g * d) * fl.linalg.inv_ex(a).inverse.mT


def _slogdet_grad(g, s):
    return _mat(g[1]) * fl.linalg.inv_ex(s.A).inverse.mT


# --- solvers -----------------------------------------------------------------------------------------
def _solve_grad_b(g, s):
    return fl.linalg.solve(s.A.mT, g[0])


def _solve_grad_a(g, s):
    return -(_solve_grad_b(g, s) @ s.result0.mT)


def _solve_triangular_grad_b(g, s):
    return fl.linalg.solve_triangular(s.A.mT, g, upper=not s.upper, unitriangular=s.unitriangular)


def _solve_triangular_grad_a(g, s):
    ga = -(_solve_triangular_grad_b(g, s) @ s.result.mT)
    offset = 1 if s.unitriangular else 0
    return ga.triu(offset) if s.upper else ga.tril(-offset)


# --- factorizations ----------------------------------------------------------------------------------
def _cholesky_grad(g, s):
    low, gl = s.result0, g[0]
    if s.get("upper", False):
        low, gl = low.mT, gl.mT
    ga = (low.mT @ gl).tril()
    ga = 0.5 * (ga + ga.tril(-1).mT)
    ga = fl.linalg.solve_triangular(low.mT, ga, upper=True)
    return fl.linalg.solve_triangular(low, ga, upper=False, left=False)


def _qr_tall_grad(q, r, gq, gr):
    """Gradient of ``A = Q R`` for ``m >= n`` (``R`` square, invertible)."""
    m = r @ gr.mT - gq.mT @ q
    m = m.tril()
    m = m + m.tril(-1).mT  # copyltu: the lower triangle mirrored
    b = gq + q @ m
    return fl.linalg.solve_triangular(r.mT, b, upper=False, left=False)  # b R^-T


def _qr_grad(g, s):
    mode = s.get("mode", "reduced")
    if mode == "r":
        raise RuntimeError("The derivative of linalg.qr depends on Q, which is not computed when mode='r'. Please use "
                           "linalg.qr(A, mode='reduced') if you are going to differentiate through linalg.qr.")
    rows, cols = s.A_shape[-2:]
    if mode == "complete" and rows > cols:
        raise RuntimeError("The QR decomposition is not differentiable when mode='complete' and nrows > ncols.")
    q, r = s.result0, s.result1
    gq, gr = g
    if rows >= cols:
        return _qr_tall_grad(q, r, gq, gr)
    # A = [X | Y] with X = Q R[:, :m] square: Y = Q R[:, m:] sends gradient to X through Q.
    a = s.A
    y, gr_y = a[..., rows:], gr[..., rows:]
    gx = _qr_tall_grad(q, r[..., :rows], gq + y @ gr_y.mT, gr[..., :rows])
    return fl.cat([gx, q @ gr_y], -1)


def _svd_grad(g, s):
    u, sv, vh = s.result0, s.result1, s.result2
    gu, gs, gvh = g
    rows, cols = s.A_shape[-2:]
    k = min(rows, cols)
    if s.get("full_matrices", True):  # the extra columns are not differentiable (torch ignores them)
        u, gu, vh, gvh = u[..., :k], gu[..., :k], vh[..., :k, :], gvh[..., :k, :]
    v, gv = vh.mT, gvh.mT
    s2 = sv * sv
    e = s2.unsqueeze(-2) - s2.unsqueeze(-1) + _eye_like(sv, k)
    uhgu = u.mT @ gu
    vhgv = vh @ gv
    inner = (_skew(uhgu) / e) * sv.unsqueeze(-2) + sv.unsqueeze(-1) * (_skew(vhgv) / e) + fl.diag_embed(gs)
    ga = u @ inner @ vh
    if rows > k:
        ga = ga + ((gu - u @ uhgu) / sv.unsqueeze(-2)) @ vh
    if cols > k:
        ga = ga + u @ ((gv - v @ vhgv) / sv.unsqueeze(-2)).mT
    return ga


def _svdvals_grad(g, s):
    u, _, vh = fl.linalg.svd(s.A, full_matrices=False)
    return (u * g.unsqueeze(-2)) @ vh


def _eigh_grad(g, s):
    w, v = s.result0, s.result1
    gw, gv = g
    e = w.unsqueeze(-2) - w.unsqueeze(-1) + _eye_like(w, w.shape[-1])
    inner = 0.5 * _skew(v.mT @ gv) / e + fl.diag_embed(gw)
    return v @ inner @ v.mT


def _eigvalsh_grad(g, s):
    _, v = fl.linalg.eigh(s.A, UPLO=s.get("UPLO", "L"))
    return (v * g.unsqueeze(-2)) @ v.mT


def _lu_square_grad(perm, low, up, gl, gu):
    """``gA`` of a square ``A = P L U`` (torch's linalg_lu_backward).

    ``P L^-T [tril_-1(L^T tril_-1(gL)) + triu(triu(gU) U^T)] U^-T``: only the strict lower triangle of
    ``L`` and the upper one of ``U`` vary, so the other parts of ``gL``/``gU`` are dropped first.
    """
    inner = (low.mT @ gl.tril(-1)).tril(-1) + (gu.triu() @ up.mT).triu()
    inner = fl.linalg.solve_triangular(up.mT, inner, upper=False, left=False)
    return perm @ fl.linalg.solve_triangular(low.mT, inner, upper=True, unitriangular=True)


def _lu_factor_grad(g, s):
    """``A = P L U`` from ``(LU, pivots)``; ``g`` reaches ``L`` below the diagonal and ``U`` on and above it.

    Wide ``A = P L [U1 | U2]``: ``U2 = L^-1 P^T A2`` adds ``-L^-T gU2 U2^T`` to ``gL`` and gives
    ``gA2 = P L^-T gU2``. Tall ``P^T A = [L1; L2] U``: ``L2 = (P^T A)_2 U^-1`` adds ``-L2^T gL2 U^-T`` to
    ``gU`` and gives ``(P^T gA)_2 = gL2 U^-T``.
    """
    perm, low, up = fl.lu_unpack(s.result0, s.result1)
    g = g[0]
    rows, cols = g.shape[-2:]
    if rows == cols:
        return _lu_square_grad(perm, low, up, g, g)
    if rows < cols:
        u1, u2, gu2 = up[..., :rows], up[..., rows:], g[..., rows:]
        gl = g[..., :rows] - fl.linalg.solve_triangular(low.mT, gu2 @ u2.mT, upper=True, unitriangular=True)
        ga1 = _lu_square_grad(perm, low, u1, gl, g[..., :rows])
        ga2 = perm @ fl.linalg.solve_triangular(low.mT, gu2, upper=True, unitriangular=True)
        return fl.cat([ga1, ga2], -1)
    l1, l2, gl2 = low[..., :cols, :], low[..., cols:, :], g[..., cols:, :]
    ga2 = fl.linalg.solve_triangular(up.mT, gl2, upper=False, left=False)  # gL2 U^-T
    gu = g[..., :cols, :] - l2.mT @ ga2
    ident = fl.eye(cols, dtype=g.dtype, device=g.device)
    ga1 = _lu_square_grad(ident, l1, up, g[..., :cols, :], gu)
    return perm @ fl.cat([ga1, ga2], -2)


# --- pinv, matrix_exp --------------------------------------------------------------------------------
def _pinv_grad(g, s):
    a, p = s.A, s.result
    ph, gh = p.mT, g.mT
    if a.shape[-2] <= a.shape[-1]:
        k = gh @ p
        kph = k @ ph
        return -(p @ k).mT + kph - (a @ p) @ kph + (ph @ p) @ (gh - k @ a)
    k = p @ gh
    phk = ph @ k
    return -(k @ p).mT + (gh - a @ k) @ p @ ph + phk - phk @ p @ a


def _matrix_exp_grad(g, s):
    at = s.A.mT
    n = at.shape[-1]
    at, g = fl.broadcast_tensors(at, g)
    block = fl.cat([fl.cat([at, g], -1), fl.cat([fl.zeros_like(at), at], -1)], -2)
    return fl.linalg.matrix_exp(block)[..., :n, n:]


TABLE = {
    "linalg_inv_ex": D({"A": _inv_grad}, save=("result0",), outputs=2),
    "linalg_det": D({"A": _det_grad}, save=("A", "result")),
    "linalg_slogdet": D({"A": _slogdet_grad}, save=("A",), outputs=2),
    "linalg_solve": D({"A": _solve_grad_a, "B": _solve_grad_b}, save=("A", "result0"), outputs=2),
    "linalg_solve_triangular": D({"A": _solve_triangular_grad_a, "B": _solve_triangular_grad_b},
                                 save=("A", "result")),
    "linalg_cholesky_ex": D({"A": _cholesky_grad}, save=("result0",), outputs=2),
    "linalg_qr": D({"A": _qr_grad}, save=("A", "result0", "result1"), outputs=2),
    "linalg_svd": D({"A": _svd_grad}, save=("result0", "result1", "result2"), outputs=3),
    "linalg_svdvals": D({"A": _svdvals_grad}, save=("A",)),
    "linalg_eigh": D({"A": _eigh_grad}, save=("result0", "result1"), outputs=2),
    "linalg_eigvalsh": D({"A": _eigvalsh_grad}, save=("A",)),
    "linalg_lu_factor_ex": D({"A": _lu_factor_grad}, save=("result0", "result1"), outputs=3),
    "linalg_pinv": D({"A": _pinv_grad}, save=("A", "result")),
    "linalg_matrix_exp": D({"A": _matrix_exp_grad}, save=("A",)),
}


# --- forward mode: Jacobian-vector products (torch's ``*_jvp`` in FunctionsManual.cpp) -----------------
# Rules take forward_ad's arguments ``(op, inputs, attrs, outputs, tangents, names)``, ``tangents`` keyed
# by input position (absent: no tangent), and return the output tangent(s), None for integer outputs.
def _tangent(tangents, i, like):
    t = tangents.get(i)
    return fl.zeros_like(like) if t is None else t


def _inv_jvp(op, inputs, attrs, outputs, tangents, names):
    x = outputs[0]
    return -(x @ tangents[0] @ x), None


def _det_jvp(op, inputs, attrs, outputs, tangents, names):
    a, da = inputs[0], tangents[0]
    if bool((outputs == 0).any()):  # d det = <cofactor(A), dA>, defined at singular A too
        return (_cofactor_by_svd(a) * da).sum((-2, -1))
    return outputs * fl.linalg.solve(a, da).diagonal(0, -2, -1).sum(-1)


def _slogdet_jvp(op, inputs, attrs, outputs, tangents, names):
    trace = fl.linalg.solve(inputs[0], tangents[0]).diagonal(0, -2, -1).sum(-1)
    return fl.zeros_like(outputs[0]), trace


def _solve_jvp(op, inputs, attrs, outputs, tangents, names):
    a, b = inputs[:2]
    x = outputs[0]
    rhs = _tangent(tangents, 1, b)
    if 0 in tangents:
        rhs = rhs - tangents[0] @ x
    return fl.linalg.solve(a, rhs), None


def _solve_triangular_jvp(op, inputs, attrs, outputs, tangents, names):
    a, b, upper, unit = inputs
    rhs = _tangent(tangents, 1, b)
    if 0 in tangents:
        offset = 1 if unit else 0
        da = tangents[0].triu(offset) if upper else tangents[0].tril(-offset)
        rhs = rhs - da @ outputs
    return fl.linalg.solve_triangular(a, rhs, upper=upper, unitriangular=unit)


def _cholesky_jvp(op, inputs, attrs, outputs, tangents, names):
    """``dL = L Φ(L^-1 dA L^-T)``, ``Φ`` the lower triangle with its diagonal halved (``dU = dL^T`` if upper)."""
    upper = (attrs or {}).get("upper", False)
    low = outputs[0].mT if upper else outputs[0]
    x = fl.linalg.solve_triangular(low, tangents[0], upper=False)
    x = fl.linalg.solve_triangular(low.mT, x, upper=True, left=False)
    dl = low @ (x.tril(-1) + 0.5 * x.diagonal(0, -2, -1).diag_embed())
    return (dl.mT if upper else dl), None


def _eigvalsh_jvp(op, inputs, attrs, outputs, tangents, names):
    _, v = fl.linalg.eigh(inputs[0], UPLO=inputs[1] if len(inputs) > 1 else "L")
    return (v * (tangents[0] @ v)).sum(-2)


def _matrix_exp_jvp(op, inputs, attrs, outputs, tangents, names):
    a, da = fl.broadcast_tensors(inputs[0], tangents[0])
    n = a.shape[-1]
    block = fl.cat([fl.cat([a, da], -1), fl.cat([fl.zeros_like(a), a], -1)], -2)
    return fl.linalg.matrix_exp(block)[..., :n, n:]


TANGENTS = {
    "linalg_inv_ex": _inv_jvp,
    "linalg_det": _det_jvp,
    "linalg_slogdet": _slogdet_jvp,
    "linalg_solve": _solve_jvp,
    "linalg_solve_triangular": _solve_triangular_jvp,
    "linalg_cholesky_ex": _cholesky_jvp,
    "linalg_eigvalsh": _eigvalsh_jvp,
    "linalg_matrix_exp": _matrix_exp_jvp,
}
