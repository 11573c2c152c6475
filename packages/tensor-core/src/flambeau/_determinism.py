"""The global switches of ``flambeau.backends`` and the determinism and matmul-precision settings.

One place holds them so that the kernels read a flag and the user sets it where a PyTorch program
does: ``torch.backends.cudnn.enabled = False`` (``flambeau.backends.cudnn.enabled``),
``torch.use_deterministic_algorithms(True)``, ``torch.set_float32_matmul_precision("high")``.
Kernel modules import this module (a leaf: it imports nothing of flambeau) and call
:func:`cudnn_enabled` / :func:`deterministic` when they choose a path.

Note [What the flags change]
    ``cudnn.enabled``: False makes the CUDA convolution skip cuDNN for its own implicit-GEMM
    kernels. ``cudnn.deterministic`` or ``use_deterministic_algorithms(True)``: the CUDA
    scatter and index kernels take their deterministic (pull, no atomics) paths where they have
    one, and cuDNN is restricted to deterministic algorithms. ``cudnn.allow_tf32`` (True by
    default, as torch's): cuDNN runs float32 convolutions with ``CUDNN_DEFAULT_MATH``, TF32 tensor
    cores on compute capability 8.0 and up; False: ``CUDNN_FMA_MATH``, full float32.
    ``cudnn.benchmark``, ``cuda.matmul.allow_tf32`` and the float32 matmul precision are recorded
    and readable; flambeau's matmul runs in full float32 whatever they say (precision "highest",
    torch's default too), which is always allowed by what they permit.
"""

from __future__ import annotations

import os
import warnings

__all__ = ["FLAGS", "cudnn_enabled", "deterministic", "alert_not_deterministic", "use_deterministic_algorithms",
           "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
           "set_float32_matmul_precision", "get_float32_matmul_precision"]

# The switches, with torch's defaults (FLAMBEAU_CUDNN=0 in the environment starts with cuDNN off).
FLAGS = {
    "cudnn.enabled": os.environ.get("FLAMBEAU_CUDNN", "1") != "0",
    "cudnn.benchmark": False,
    "cudnn.deterministic": False,
    "cudnn.allow_tf32": True,
    "cuda.matmul.allow_fp16_reduced_precision_reduction": True,
    "cuda.matmul.allow_bf16_reduced_precision_reduction": True,
    "opt_einsum.enabled": True,
    "deterministic_algorithms": False,
    "deterministic_warn_only": False,
    "float32_matmul_precision": "highest",
}

_PRECISIONS = ("highest", "high", "medium")


def cudnn_enabled() -> bool:
    """Whether the CUDA kernels may use cuDNN (``flambeau.backends.cudnn.enabled``)."""
    return FLAGS["cudnn.enabled"]


def cudnn_allow_tf32() -> bool:
    """Whether cuDNN may run float32 convolutions on TF32 tensor cores (``flambeau.backends.cudnn.allow_tf32``,
    True by default as torch's: about 1e-3 relative error, several times the speed on Ampere and Hopper)."""
    return FLAGS["cudnn.allow_tf32"]


def cudnn_benchmark() -> bool:
    """Whether a convolution's first call times cuDNN's engines and keeps the fastest (``flambeau.backends.cudnn.
    benchmark``, False by default as torch's; Note [cuDNN benchmark mode] in ``_kernels/cuda/_cudnn_graph``)."""
    return FLAGS["cudnn.benchmark"]


def deterministic() -> bool:
    """Whether kernels must take their deterministic paths (``cudnn.deterministic`` or
    ``use_deterministic_algorithms(True)``)."""
    return FLAGS["deterministic_algorithms"] or FLAGS["cudnn.deterministic"]


def alert_not_deterministic(caller: str) -> None:
    """Called by a kernel about to take a nondeterministic path (atomics) with no deterministic one: under
    ``use_deterministic_algorithms(True)`` raise RuntimeError (``warn_only=True``: warn), as torch's
    ``alertNotDeterministic``; otherwise nothing."""
    if not FLAGS["deterministic_algorithms"]:
        return
    message = (f"{caller} does not have a deterministic implementation, but you set "
               "'flambeau.use_deterministic_algorithms(True)'. You can turn off determinism just for this "
               "operation, or you can use the 'warn_only=True' option, if that's acceptable for your application.")
    if FLAGS["deterministic_warn_only"]:
        warnings.warn(message, UserWarning, stacklevel=3)
        return
    raise RuntimeError(message)


def use_deterministic_algorithms(mode: bool, *, warn_only: bool = False) -> None:
    """Make operators take deterministic paths (``torch.use_deterministic_algorithms``).

    With ``mode=True`` the CUDA scatter and index kernels use their no-atomics paths and cuDNN only
    deterministic algorithms (Note [What the flags change]). flambeau's CPU kernels are deterministic
    already. ``warn_only`` is recorded (:func:`is_deterministic_algorithms_warn_only_enabled`): no
    flambeau operator lacks a deterministic path it would have to warn or raise about.

    Raises:
        TypeError: ``mode`` or ``warn_only`` is not a bool.
    """
    for name, value in (("mode", mode), ("warn_only", warn_only)):
        if not isinstance(value, bool):
            raise TypeError(f"use_deterministic_algorithms(): argument '{name}' must be bool, "
                            f"not {type(value).__name__}")
    FLAGS["deterministic_algorithms"] = mode
    FLAGS["deterministic_warn_only"] = warn_only if mode else False


def are_deterministic_algorithms_enabled() -> bool:
    """Whether :func:`use_deterministic_algorithms` was turned on."""
    return FLAGS["deterministic_algorithms"]


def is_deterministic_algorithms_warn_only_enabled() -> bool:
    """Whether :func:`use_deterministic_algorithms` was turned on with ``warn_only=True``."""
    return FLAGS["deterministic_warn_only"]


def set_float32_matmul_precision(precision: str) -> None:
    """Record the internal precision of float32 matmuls: ``"highest"``, ``"high"`` or ``"medium"``.

    As ``torch.set_float32_matmul_precision``. "high" and "medium" *allow* TF32 or bfloat16 inner
    products; flambeau keeps full float32 (Note [What the flags change]), which they allow too.

    Another string warns (``UserWarning``) and changes nothing, as torch's call does.
    ``flambeau.backends.cuda.matmul.allow_tf32`` follows: True for "high" and "medium".
    """
    if precision not in _PRECISIONS:
        warnings.warn(f"{precision} is not one of 'highest', 'high', or 'medium'; the current "
                      "set_float32_matmul_precision call has no effect.", UserWarning, stacklevel=2)
        return
    FLAGS["float32_matmul_precision"] = precision


def get_float32_matmul_precision() -> str:
    """The precision set by :func:`set_float32_matmul_precision` (``"highest"`` by default)."""
    return FLAGS["float32_matmul_precision"]
