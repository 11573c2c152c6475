"""Utilities for training: gradient clipping, flattening parameters, sequence padding, hook handles,
parametrizations (:mod:`~flambeau.nn.utils.parametrize`, :mod:`~flambeau.nn.utils.parametrizations`), pruning
(:mod:`~flambeau.nn.utils.prune`), folding batch norms into the layers before them (:mod:`~flambeau.nn.utils.fusion`)
and converting convolution weights' memory format."""

from flambeau.nn.utils import fusion, hooks, memory_format, prune, rnn, stateless  # noqa: F401
from flambeau.nn.utils.clip_grad import (
    clip_grad_norm,
    clip_grad_norm_,
    clip_grad_value_,
    clip_grads_with_norm_,
    get_total_norm,
)
from flambeau.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters
from flambeau.nn.utils.fusion import (
    fuse_conv_bn_eval,
    fuse_conv_bn_weights,
    fuse_linear_bn_eval,
    fuse_linear_bn_weights,
)
from flambeau.nn.utils.memory_format import convert_conv2d_weight_memory_format, convert_conv3d_weight_memory_format

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "clip_grads_with_norm_", "get_total_norm",
           "parameters_to_vector", "vector_to_parameters", "fuse_conv_bn_eval", "fuse_conv_bn_weights",
           "fuse_linear_bn_eval", "fuse_linear_bn_weights", "convert_conv2d_weight_memory_format",
           "convert_conv3d_weight_memory_format", "rnn", "hooks", "fusion", "memory_format", "prune", "stateless"]
