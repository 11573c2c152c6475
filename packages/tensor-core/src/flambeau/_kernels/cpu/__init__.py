"""CPU kernels, one module per operator family; importing this package registers them all."""

from flambeau._kernels.cpu import (  # noqa: F401 - each module registers its family's kernels on import
    activation,
    attention,
    conv,
    conv_depthwise,
    core,
    elementwise,
    indexing,
    linalg,
    loss,
    nn_ops,
    normalization,
    pooling,
    random,
    reduction,
    resample,
    rnn,
    shape,
)
