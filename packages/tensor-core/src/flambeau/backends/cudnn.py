"""``flambeau.backends.cudnn``: cuDNN's switches, as ``torch.backends.cudnn``.

The flags, bools to read and assign (``flambeau.backends.cudnn.benchmark = True``):

- ``enabled``: whether CUDA convolutions may use cuDNN (False: flambeau's numba kernels). Starts
  False when the environment has ``FLAMBEAU_CUDNN=0``.
- ``deterministic``: deterministic algorithms only (cuDNN's, and flambeau's CUDA scatter and index
  paths).
- ``benchmark``: a convolution configuration's first call times cuDNN's engines (those that compute as the
  other flags ask) and keeps the fastest; False: the heuristics' first (Note [cuDNN benchmark mode] in
  ``flambeau._kernels.cuda._cudnn_graph``).
- ``allow_tf32``: whether cuDNN may run float32 convolutions on TF32 tensor cores (compute
  capability 8.0 and up). True by default, as torch's: about 1e-3 relative error for several times
  the speed; set it False where a result must agree with the CPU to float32 rounding.
"""

from __future__ import annotations

from flambeau.backends._flags import make_flag_module, set_flags

__all__ = ["is_available", "version", "flags"]  # and the flags of the module docstring

_FLAGS = {"enabled": "cudnn.enabled", "benchmark": "cudnn.benchmark", "deterministic": "cudnn.deterministic",
          "allow_tf32": "cudnn.allow_tf32"}


def _library():
    """cuDNN's cffi library object where a real GPU and libcudnn are present, else None."""
    from flambeau import cuda

    if not cuda.is_available() or cuda.is_simulator():
        return None
    from flambeau._kernels.cuda import _cudnn

    try:
        return _cudnn._lib()[1]
    except _cudnn.CudnnUnavailable:
        return None


def is_available() -> bool:
    """Whether cuDNN can be loaded: a CUDA GPU (not the simulator), cffi and libcudnn 8 or later."""
    return _library() is not None


def version() -> int | None:
    """cuDNN's version number (``90100`` for 9.1.0), or None where it is not available."""
    lib = _library()
    return None if lib is None else int(lib.cudnnGetVersion())


def flags(enabled=False, benchmark=False, deterministic=False, allow_tf32=True, **_ignored):
    """Context manager setting the four flags inside a ``with`` block and restoring them after
    (``torch.backends.cudnn.flags``); torch's other keywords are accepted and ignored."""
    return set_flags(_FLAGS, {"enabled": enabled, "benchmark": benchmark, "deterministic": deterministic,
                              "allow_tf32": allow_tf32})


make_flag_module(__name__, _FLAGS)
