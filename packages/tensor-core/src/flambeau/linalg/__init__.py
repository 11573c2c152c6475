"""``flambeau.linalg``: torch.linalg's functions, with torch's names, signatures and derivatives.

Batches of matrices ``(*, m, n)`` of float32 or float64; results keep the input's dtype. The
factorizations and solvers call LAPACK through numpy on the CPU (no CUDA kernels yet: they need
cuSOLVER; move the tensor to the CPU); the norms, ``vecdot``, ``cross``, ``multi_dot``,
``matrix_power``, ``diagonal`` and ``matmul`` are compositions of other operators and run wherever
those do. ``eig``/``eigvals`` return complex tensors.
The operators live in ``flambeau._ops.linalg_solvers``; this module is their public namespace.
"""

from flambeau._ops.linalg_solvers import (
    LinAlgError,
    cholesky,
    cholesky_ex,
    cond,
    cross,
    det,
    diagonal,
    eig,
    eigh,
    eigvals,
    eigvalsh,
    householder_product,
    inv,
    inv_ex,
    lstsq,
    lu,
    lu_factor,
    lu_factor_ex,
    lu_solve,
    matmul,
    matrix_exp,
    matrix_norm,
    matrix_power,
    matrix_rank,
    multi_dot,
    norm,
    pinv,
    qr,
    slogdet,
    solve,
    solve_ex,
    solve_triangular,
    svd,
    svdvals,
    tensorinv,
    tensorsolve,
    vander,
    vecdot,
    vector_norm,
)

__all__ = ["cholesky", "cholesky_ex", "cond", "cross", "det", "diagonal", "eig", "eigh", "eigvals", "eigvalsh",
           "householder_product", "inv", "inv_ex", "LinAlgError", "lstsq", "lu", "lu_factor", "lu_factor_ex",
           "lu_solve", "matmul", "matrix_exp", "matrix_norm", "matrix_power", "matrix_rank", "multi_dot", "norm",
           "pinv", "qr", "slogdet", "solve", "solve_ex", "solve_triangular", "svd", "svdvals", "tensorinv",
           "tensorsolve", "vander", "vecdot", "vector_norm"]
