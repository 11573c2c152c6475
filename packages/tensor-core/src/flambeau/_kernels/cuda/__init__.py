"""CUDA kernels, one module per operator family; importing this package registers them all.

``flambeau._ops`` imports it with the operator modules, so flambeau's CUDA kernels are in the
kernel table (Note [One kernel table]) before any other library can call ``register_kernel``: a
kernel registered by another library for the same operator replaces flambeau's and stays.

Importing imports no numba: a family module builds its numba.cuda kernels on first launch
(Note [numba.cuda bound on first use] in ``_launch``). Each family module also lists the
concrete signatures of its kernels (``ptx_cases``) for the PTX compilation test.
"""

from flambeau._kernels._low_precision import wrap_kernels
from flambeau._kernels.cuda import (
    activation,
    attention,
    bfloat16,
    complex,
    conv,
    core,
    elementwise,
    indexing,
    linalg,
    linalg_solvers,
    loss,
    nn_ops,
    normalization,
    numeric,
    pooling,
    random,
    reduction,
    resample,
    rnn,
    searching,
    shape,
    special,
    spectral,
)
from flambeau._ops._registry import KERNELS

# The family modules, for tests that walk every kernel (PTX compilation).
FAMILIES = (core, elementwise, activation, reduction, linalg, linalg_solvers, indexing, shape, loss, nn_ops,
            normalization, pooling, resample, conv, attention, rnn, random, complex, searching, special, spectral,
            numeric, bfloat16)

# bfloat16 computes in float32 in every kernel that does not move its bits itself (Note [bfloat16 on CUDA]).
wrap_kernels(KERNELS, "cuda", bfloat16.CONVERSIONS)

# Operators with a CPU kernel and none on CUDA, with the reason (one table: the coverage test walks
# the operator table against it, and the operator reference in docs/ prints the reasons).
NOT_ON_CUDA: dict[str, str] = {}
