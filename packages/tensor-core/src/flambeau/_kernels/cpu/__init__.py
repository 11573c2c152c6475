"""CPU kernels, one module per operator family; importing this package registers them all."""

from flambeau._kernels._low_precision import HOST, wrap_kernels
from flambeau._kernels.cpu import (  # noqa: F401 - each module registers its family's kernels on import
    activation,
    attention,
    complex,
    conv,
    conv_depthwise,
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
from flambeau._kernels.cpu._elementwise import quiet_kernels
from flambeau._ops._registry import KERNELS

# numpy's floating-point warnings off in every kernel, as torch warns about none (Note [Quiet floating-point errors]).
quiet_kernels(KERNELS, "cpu")
# bfloat16 computes in float32 in every kernel not marked as taking it itself (Note [bfloat16 through float32]).
wrap_kernels(KERNELS, "cpu", HOST)
