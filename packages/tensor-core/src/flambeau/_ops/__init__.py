"""Operator declarations, one module per family; importing this package fills the operator table."""

from flambeau._backends import cuda_kernels  # noqa: E402,F401  - registers CUDA launchers (no numba import)
from flambeau._ops import (  # noqa: F401  - each module declares its operators on import
    activation,
    attention,
    conv,
    core,
    elementwise,
    indexing,
    linalg,
    loss,
    nn_ops,
    normalization,
    pooling,
    reduction,
    resample,
    rnn,
    shape,
)
from flambeau._ops._registry import OPS, OpDef, get_op, register_kernel  # noqa: F401
