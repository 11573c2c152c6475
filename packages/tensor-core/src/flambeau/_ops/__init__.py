"""Operator declarations, one module per family; importing this package fills the operator table."""

from flambeau._kernels import cuda as _cuda_kernels  # noqa: F401 - registers the CUDA kernels, importing no numba
from flambeau._ops import (  # noqa: F401  - each module declares its operators on import
    activation,
    attention,
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
    reduction,
    resample,
    rnn,
    searching,
    shape,
    special,
    spectral,
    stft,
)
from flambeau._ops._registry import OPS, OpDef, get_op, register_kernel  # noqa: F401

# isort: split
from flambeau._kernels import cpu as _cpu_kernels  # noqa: E402,F401 - registers the CPU kernels (Note [One kernel table])
