"""Ready-made parametrizations (``torch.nn.utils.parametrizations``): :func:`weight_norm`,
:func:`spectral_norm` and :func:`orthogonal`, each registered with
:func:`~flambeau.nn.utils.parametrize.register_parametrization` under torch's names, so their
``state_dict`` keys (``parametrizations.weight.original0`` ...) and buffers (``_u``, ``_v``, ``base``)
match torch's.

The matrix functions :func:`orthogonal` needs are composites of matrix products here (flambeau has
no ``linalg`` module yet): Note [Householder product in WY form] and Note [Matrix exponential by
Taylor series]. The QR factorisation that orthogonalises the initial weight runs once, without
gradient, through numpy's LAPACK (``geqrf``, as torch). The Cayley map needs a linear solve with a
derivative, which flambeau does not have: ``orthogonal_map="cayley"`` raises NotImplementedError.
"""

from __future__ import annotations

import math
from enum import Enum, auto

import numpy as np

import flambeau as fl
from flambeau import Tensor
from flambeau.nn._functional.basic import normalize
from flambeau.nn.modules.conv import ConvTranspose1d, ConvTranspose2d
from flambeau.nn.modules.module import Module
from flambeau.nn.utils import parametrize

__all__ = ["orthogonal", "spectral_norm", "weight_norm"]


# --- matrix functions ------------------------------------------------------------------------------------
def _geqrf(a: Tensor) -> tuple[Tensor, Tensor]:
    """LAPACK's compact QR of ``a`` ``(..., n, k)``: ``(reflectors and R, tau)``, as ``torch.geqrf``. No gradient."""
    h, tau = np.linalg.qr(a.detach().numpy(force=True), mode="raw")  # h is the transposed LAPACK output
    out = fl.from_numpy(np.ascontiguousarray(np.swapaxes(h, -1, -2)).astype(a.dtype.np, copy=False))
    return out.to(a.device), fl.from_numpy(tau.astype(a.dtype.np, copy=False)).to(a.device)


# Note [Householder product in WY form]: the product of the reflectors H_i = I - tau_i v_i v_i^T
# (v_i: column i of A below the diagonal, with a 1 on it) is I - V T V^T with T upper triangular.
# Two blocks combine as T = [[T1, -T1 (V1^T V2) T2], [0, T2]], so T is built from the k diagonal
# entries tau_i by doubling the block size log2(k) times, each level a few batched products over
# all block pairs at once (k padded to a power of two with tau = 0 columns, whose reflector is I).
# The result's first k columns are E - V (T V[:k]^T). Everything is a differentiable product.
def _householder_product(a: Tensor, tau: Tensor) -> Tensor:
    """The first ``k`` columns of ``H_1 ... H_k`` from ``a`` ``(..., n, k)`` and ``tau`` ``(..., k)``."""
    n, k = a.shape[-2], a.shape[-1]
    batch = tuple(a.shape[:-2])
    eye = fl.eye(n, k, dtype=a.dtype, device=a.device)
    v = a.tril(-1) + eye  # (..., n, k)
    size = 1 << max(k - 1, 0).bit_length()
    if size != k:
        v = fl.cat([v, fl.zeros((*batch, n, size - k), dtype=a.dtype, device=a.device)], -1)
        tau = fl.cat([tau, fl.zeros((*batch, size - k), dtype=a.dtype, device=a.device)], -1)
    s = v.mT @ v  # (..., size, size)
    t = tau.reshape(*batch, size, 1, 1)  # the size x size blocks of T on the diagonal, block size 1
    b = 1
    while b < size:
        nb = size // (2 * b)
        t = t.reshape(*batch, nb, 2, b, b)
        t1, t2 = t[..., 0, :, :], t[..., 1, :, :]
        # block (2p, 2p + 1) of V^T V, for every pair p: the upper-right quarter of its diagonal blocks
        pairs = s.reshape(*batch, nb, 2 * b, nb, 2 * b).diagonal(dim1=-4, dim2=-2).movedim(-1, -3)
        t12 = -(t1 @ pairs[..., :b, b:] @ t2)
        top = fl.cat([t1, t12], -1)
        bottom = fl.cat([fl.zeros_like(t2), t2], -1)
        t = fl.cat([top, bottom], -2)  # (..., nb, 2b, 2b)
        b *= 2
    t = t.reshape(*batch, size, size)
    return eye - v @ (t @ v[..., :k, :].mT)


# Note [Matrix exponential by Taylor series]: exp(A) = exp(A / 2^s)^(2^s). The Taylor polynomial of
# degree m is exact to rounding while ||A||_1 <= theta_m; the thetas are those torch's matrix_exp uses
# (Bader, Blanes and Casas, 2019), for degrees 1, 2, 4, 8, 12 and 18. The smallest degree that covers
# ||A||_1 is used, else degree 18 after s halvings. The polynomial is evaluated by Paterson-Stockmeyer
# (powers A^0..A^q, then Horner in A^q: about 2 sqrt(m) products instead of m) and squared s times.
# Autograd differentiates the products.
_EXP_DEGREES = (1, 2, 4, 8, 12, 18)
_EXP_THETAS = {
    "float64": (2.220446049250313e-16, 2.580956802971767e-08, 3.397168839976962e-04, 4.991228871115323e-02,
                2.996158913811580e-01, 1.090863719290036e+00),
    "float32": (1.192092800768788e-07, 5.978858893805233e-04, 5.116619363445086e-02, 5.800524627688768e-01,
                1.461661507209034e+00, 3.010066362817634e+00),
}


def _matrix_exp(a: Tensor) -> Tensor:
    """``exp(a)`` of square matrices ``(..., n, n)``."""
    n = a.shape[-1]
    thetas = _EXP_THETAS["float64" if a.dtype == fl.float64 else "float32"]
    with fl.no_grad():
        norm = float(a.abs().sum(-2).amax()) if a.numel() else 0.0
    degree, s = next(((m, 0) for m, theta in zip(_EXP_DEGREES, thetas) if norm <= theta), (18, None))
    if s is None:
        s = max(0, math.ceil(math.log2(norm / thetas[-1])))
    x = a / (2 ** s) if s else a
    q = max(1, math.isqrt(degree))
    powers = [fl.eye(n, dtype=a.dtype, device=a.device).expand_as(x), x]
    for _ in range(q - 1):
        powers.append(powers[-1] @ x)
    coef = [1.0 / math.factorial(j) for j in range(degree + 1)]
    blocks = [sum(c * p for c, p in zip(coef[i:i + q], powers[:q])) for i in range(0, degree + 1, q)]
    result = blocks[-1]
    for block in reversed(blocks[:-1]):
        result = block + powers[q] @ result
    for _ in range(s):
        result = result @ result
    return result


# --- orthogonal --------------------------------------------------------------------------------------------
def _is_orthogonal(q: Tensor) -> bool:
    n, k = q.shape[-2], q.shape[-1]
    eye = fl.eye(k, dtype=q.dtype, device=q.device)
    eps = 10.0 * n * fl.finfo(q.dtype).eps
    return bool(((q.mT @ q) - eye).abs().le(eps).all())


def _make_orthogonal(a: Tensor) -> Tensor:
    """The Q of ``a = QR`` (``a`` tall) with ``diag(R) >= 0``."""
    x, tau = _geqrf(a)
    q = _householder_product(x, tau)
    return q * x.diagonal(dim1=-2, dim2=-1).sgn().unsqueeze(-2)


class _OrthMaps(Enum):
    matrix_exp = auto()
    cayley = auto()
    householder = auto()


class _Orthogonal(Module):
    """Maps an unconstrained ``(..., n, k)`` tensor to one with orthonormal columns (or rows if ``n < k``)."""

    def __init__(self, weight: Tensor, orthogonal_map: _OrthMaps, *, use_trivialization: bool = True) -> None:
        super().__init__()
        self.shape = weight.shape
        self.orthogonal_map = orthogonal_map
        if use_trivialization:
            self.register_buffer("base", None)

    def forward(self, x: Tensor) -> Tensor:
        n, k = x.shape[-2], x.shape[-1]
        transposed = n < k
        if transposed:
            x = x.mT
            n, k = k, n
        if self.orthogonal_map == _OrthMaps.matrix_exp:
            x = x.tril()
            if n != k:
                x = fl.cat([x, x.new_zeros((n, n - k)).expand(*x.shape[:-2], -1, -1)], -1)
            q = _matrix_exp(x - x.mT)  # the exponential of a skew-symmetric matrix is orthogonal
            if n != k:
                q = q[..., :k]
        else:
            a = x.tril(-1)
            tau = 2.0 / (1.0 + (a * a).sum(-2))
            q = _householder_product(a, tau)
            # the diagonal of x picks the sign of each column (its integer part: -1, 0 or 1 at init)
            q = q * x.diagonal(dim1=-2, dim2=-1).int().unsqueeze(-2)
        if hasattr(self, "base"):
            q = self.base @ q
        return q.mT if transposed else q

    def right_inverse(self, q: Tensor) -> Tensor:
        with fl.no_grad():
            if q.shape != self.shape:
                raise ValueError(f"Expected a matrix or batch of matrices of shape {self.shape}. Got a tensor of "
                                 f"shape {q.shape}.")
            q_init = q
            n, k = q.shape[-2], q.shape[-1]
            transpose = n < k
            if transpose:
                q = q.mT
                n, k = k, n
            if not hasattr(self, "base"):
                if self.orthogonal_map == _OrthMaps.matrix_exp:
                    raise NotImplementedError("It is not possible to assign to the matrix exponential or the Cayley "
                                              "parametrizations when use_trivialization=False.")
                a, tau = _geqrf(q)
                # diag(R) > 0 makes the decomposition unique; LAPACK's tau = 0 means "no reflection"
                diag = a.diagonal(dim1=-2, dim2=-1)
                diag.copy_(fl.where(tau == 0, -diag.sign(), diag.sign()))
                return a.mT if transpose else a
            if n == k:
                q = q.clone() if _is_orthogonal(q) else _make_orthogonal(q)
            else:
                extra = fl.randn(*q.shape[:-2], n, n - k, dtype=q.dtype, device=q.device)
                q = _make_orthogonal(fl.cat([q, extra], -1))
            self.base = q
            neg_eye = fl.zeros_like(q_init)
            neg_eye.diagonal(dim1=-2, dim2=-1).fill_(-1.0)
            return neg_eye


def orthogonal(module: Module, name: str = "weight", orthogonal_map: str | None = None, *,
               use_trivialization: bool = True) -> Module:
    """Constrain the matrix (or batch of matrices) ``module.<name>`` to be orthogonal.

    The parametrized ``Q`` of shape ``(..., m, n)`` has ``Q^T Q = I`` if ``m >= n`` and ``Q Q^T = I``
    otherwise. ``orthogonal_map`` picks how it is computed from the unconstrained tensor:

    - ``"matrix_exp"``: ``Q = exp(A)`` for the skew-symmetric ``A`` built from the lower triangle
      (Note [Matrix exponential by Taylor series]);
    - ``"householder"``: a product of Householder reflectors (Note [Householder product in WY form]);
    - ``"cayley"``: not supported (it needs a linear solve with a derivative): NotImplementedError.

    With ``use_trivialization=True`` (default) an extra matrix ``base`` is kept in
    ``module.parametrizations.<name>[0].base`` and ``Q = base @ map(X)`` ("dynamic trivialization",
    Lezcano-Casado 2019); the initial ``Q`` is the tensor's value if it is orthogonal and the Q of its
    QR factorisation otherwise (with a random completion for non-square matrices, as torch).

    Args:
        module: the module holding the tensor.
        name: the parameter or buffer to constrain (at least 2-D). Default ``"weight"``.
        orthogonal_map: ``"matrix_exp"``, ``"cayley"`` or ``"householder"``; default ``"matrix_exp"``
            for square matrices, ``"householder"`` otherwise.
        use_trivialization: whether to use the dynamic trivialization.

    Returns:
        ``module``, parametrized.
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if weight.ndim < 2:
        raise ValueError(f"Expected a matrix or batch of matrices. Got a tensor of {weight.ndim} dimensions.")
    if orthogonal_map is None:
        orthogonal_map = "matrix_exp" if weight.shape[-2] == weight.shape[-1] else "householder"
    orth_enum = getattr(_OrthMaps, orthogonal_map, None)
    if orth_enum is None:
        raise ValueError('orthogonal_map has to be one of "matrix_exp", "cayley", "householder". '
                         f"Got: {orthogonal_map}")
    if orth_enum == _OrthMaps.cayley:
        raise NotImplementedError('orthogonal_map="cayley" needs a linear solve with a derivative, which flambeau '
                                  'does not have yet; use "matrix_exp" or "householder"')
    orth = _Orthogonal(weight, orth_enum, use_trivialization=use_trivialization)
    parametrize.register_parametrization(module, name, orth, unsafe=True)
    return module


# --- weight norm ------------------------------------------------------------------------------------------
def _norm_except_dim(v: Tensor, dim: int) -> Tensor:
    """The 2-norm of ``v`` over every dimension but ``dim`` (kept, size 1); ``dim == -1``: the whole norm."""
    if dim == -1:
        return v.norm()
    dim = dim % v.ndim
    return v.norm(2, tuple(d for d in range(v.ndim) if d != dim), keepdim=True)


class _WeightNorm(Module):
    def __init__(self, dim: int | None = 0) -> None:
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g: Tensor, weight_v: Tensor) -> Tensor:
        return weight_v * (weight_g / _norm_except_dim(weight_v, self.dim))

    def right_inverse(self, weight: Tensor):
        return _norm_except_dim(weight, self.dim), weight


def weight_norm(module: Module, name: str = "weight", dim: int | None = 0) -> Module:
    """Reparametrize ``module.<name>`` as ``w = g * v / ||v||`` (Salimans and Kingma, 2016).

    The magnitude ``g`` becomes ``module.parametrizations.<name>.original0`` and the direction ``v``
    ``original1``. The norm is taken over every dimension but ``dim`` (per output channel with the
    default 0); ``dim=None`` (or ``-1``, as torch) takes one norm over the whole tensor. A state dict
    of the legacy ``weight_norm`` (keys ``<name>_g``, ``<name>_v``) loads into the new keys.

    Args:
        module: the module holding the tensor.
        name: the parameter to reparametrize. Default ``"weight"``.
        dim: the dimension kept by the norm, or None for the whole tensor.

    Returns:
        ``module``, parametrized.
    """
    parametrize.register_parametrization(module, name, _WeightNorm(dim), unsafe=True)

    def _weight_norm_compat_hook(state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                                 error_msgs) -> None:
        g_key, v_key = f"{prefix}{name}_g", f"{prefix}{name}_v"
        if g_key in state_dict and v_key in state_dict:
            state_dict[f"{prefix}parametrizations.{name}.original0"] = state_dict.pop(g_key)
            state_dict[f"{prefix}parametrizations.{name}.original1"] = state_dict.pop(v_key)

    module._register_load_state_dict_pre_hook(_weight_norm_compat_hook)
    return module


# --- spectral norm ------------------------------------------------------------------------------------------
class _SpectralNorm(Module):
    def __init__(self, weight: Tensor, n_power_iterations: int = 1, dim: int = 0, eps: float = 1e-12) -> None:
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"Dimension out of range (expected to be in range of [-{ndim}, {ndim - 1}] but got {dim})")
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            weight_mat = self._reshape_weight_to_matrix(weight)
            h, w = weight_mat.shape
            u = weight_mat.new_empty(h).normal_(0, 1)
            v = weight_mat.new_empty(w).normal_(0, 1)
            self.register_buffer("_u", normalize(u, dim=0, eps=self.eps))
            self.register_buffer("_v", normalize(v, dim=0, eps=self.eps))
            # start from (nearly) the top singular vectors rather than random ones
            self._power_method(weight_mat, 15)

    def _reshape_weight_to_matrix(self, weight: Tensor) -> Tensor:
        if self.dim != 0:
            weight = weight.permute(self.dim, *(d for d in range(weight.ndim) if d != self.dim))
        return weight.flatten(1)

    def _power_method(self, weight_mat: Tensor, n_power_iterations: int) -> None:
        # In place, under no_grad: the buffers are state, not part of the graph (forward clones them).
        with fl.no_grad():
            for _ in range(n_power_iterations):
                self._u.copy_(normalize(fl.mv(weight_mat, self._v), dim=0, eps=self.eps))
                self._v.copy_(normalize(fl.mv(weight_mat.mT, self._u), dim=0, eps=self.eps))

    def forward(self, weight: Tensor) -> Tensor:
        if weight.ndim == 1:
            return normalize(weight, dim=0, eps=self.eps)
        weight_mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(weight_mat, self.n_power_iterations)
        u, v = self._u.clone(), self._v.clone()
        sigma = fl.vdot(u, fl.mv(weight_mat, v))
        return weight / sigma

    def right_inverse(self, value: Tensor) -> Tensor:
        # the scale sigma cannot be recovered from the normalised value; keep it as given
        return value


def spectral_norm(module: Module, name: str = "weight", n_power_iterations: int = 1, eps: float = 1e-12,
                  dim: int | None = None) -> Module:
    """Divide ``module.<name>`` by its spectral norm (largest singular value) (Miyato et al., 2018).

    ``W_SN = W / sigma(W)``, ``sigma`` estimated by power iteration on ``W`` reshaped to a matrix
    (``dim`` first): the singular-vector estimates are buffers ``_u`` and ``_v`` of
    ``module.parametrizations.<name>[0]``, refined by ``n_power_iterations`` steps at every access in
    training mode (15 at registration) and frozen in evaluation mode. A 1-D tensor is divided by
    its 2-norm.

    Args:
        module: the module holding the tensor.
        name: the parameter to normalise. Default ``"weight"``.
        n_power_iterations: power-iteration steps per access in training mode.
        eps: added to the norms in the power iteration for numerical stability.
        dim: the output dimension; default 0, or 1 for transposed convolutions.

    Returns:
        ``module``, parametrized.
    """
    weight = getattr(module, name, None)
    if not isinstance(weight, Tensor):
        raise ValueError(f"Module '{module}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if isinstance(module, (ConvTranspose1d, ConvTranspose2d)) else 0
    parametrize.register_parametrization(module, name, _SpectralNorm(weight, n_power_iterations, dim, eps))
    return module
