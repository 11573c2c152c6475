"""Utilities for training: gradient clipping, flattening parameters, sequence padding, hook handles,
parametrizations (:mod:`~flambeau.nn.utils.parametrize`, :mod:`~flambeau.nn.utils.parametrizations`)."""

from flambeau.nn.utils import hooks, rnn  # noqa: F401
from flambeau.nn.utils.clip_grad import clip_grad_norm, clip_grad_norm_, clip_grad_value_, get_total_norm
from flambeau.nn.utils.convert_parameters import parameters_to_vector, vector_to_parameters

__all__ = ["clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm", "parameters_to_vector",
           "vector_to_parameters", "rnn", "hooks"]
