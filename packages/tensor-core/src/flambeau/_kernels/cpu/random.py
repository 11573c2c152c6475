"""CPU kernels of the random operators: samples drawn on the host from numpy's PCG64.

Convention (the CUDA kernels' of the same operators, ``flambeau._kernels.cuda.random``):
``kernel(dst, draw)`` fills numpy array ``dst`` in place with samples of ``draw`` (a
:class:`flambeau._random.Draw`: distribution name, parameters, generator). :func:`host_samples`
draws them as a new array, for the random factories. float16 and integer destinations get float32
samples cast (as torch draws float16 in float32); float64 gets float64 samples.
"""

from __future__ import annotations

import math

import numpy as np

from flambeau._ops._registry import kernel

__all__ = ["host_samples", "sample_into"]


def _float(d: np.dtype) -> type:
    return np.float64 if d == np.float64 else np.float32


def host_samples(draw, shape: tuple, np_dtype) -> np.ndarray:
    """A new host array of ``shape`` with samples of ``draw`` (not yet cast to ``np_dtype``)."""
    rng = draw.generator._np
    kind, params = draw.dist, draw.params
    ft = _float(np.dtype(np_dtype))
    if kind == "uniform":
        low, high = params
        u = rng.random(shape, dtype=ft)
        if low != 0.0 or high != 1.0:
            u *= high - low
            u += low
        return u
    if kind in ("normal", "log_normal"):
        mean, std = params
        if kind == "log_normal":  # float64 normals, whatever the destination (the stream of earlier releases)
            return np.exp(rng.standard_normal(shape) * std + mean)
        z = rng.standard_normal(shape, dtype=ft)
        if std != 1.0:
            z *= std
        if mean != 0.0:
            z += mean
        return z
    if kind == "exponential":
        return rng.standard_exponential(shape) / params[0]
    if kind == "geometric":
        return rng.geometric(params[0], shape)
    if kind == "cauchy":
        median, sigma = params
        return median + sigma * np.tan(math.pi * (rng.random(shape) - 0.5))
    if kind == "bernoulli":
        return rng.random(shape) < params[0]
    if kind == "integers":
        low, high = params
        return rng.integers(low, high, size=shape, dtype=np.int64 if high <= (1 << 63) else np.uint64)
    if kind == "dropout":
        p = params[0]
        keep = rng.random(shape, dtype=np.float32) >= np.float32(p)
        return np.multiply(keep, np.dtype(np_dtype).type(1.0 / (1.0 - p)), dtype=np_dtype)
    raise ValueError(f"unknown distribution {kind!r}")


def sample_into(dst: np.ndarray, draw) -> None:
    """Fill ``dst`` in place with samples of ``draw``, cast to its dtype."""
    values = host_samples(draw, dst.shape, dst.dtype)
    with np.errstate(all="ignore"):  # values beyond float16's range become inf, as in torch
        np.copyto(dst, values, casting="unsafe")


for _name in ("normal_", "uniform_", "bernoulli_", "random_", "exponential_", "geometric_", "cauchy_",
              "log_normal_"):
    kernel(_name, "cpu")(sample_into)
