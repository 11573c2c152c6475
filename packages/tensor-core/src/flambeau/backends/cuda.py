"""``flambeau.backends.cuda``: CUDA's matmul switches, as ``torch.backends.cuda``.

``matmul.allow_tf32`` is another view of the float32 matmul precision (True for "high" and
"medium", as in torch: setting it sets the precision); ``matmul.allow_fp16_reduced_precision_reduction``
and ``matmul.allow_bf16_reduced_precision_reduction`` are recorded. flambeau's matmuls keep full
precision whatever they allow (Note [What the flags change] in ``flambeau._determinism``).
"""

from __future__ import annotations

from flambeau._determinism import FLAGS, get_float32_matmul_precision, set_float32_matmul_precision

__all__ = ["is_built", "matmul"]


def is_built() -> bool:
    """Whether flambeau can run on CUDA at all: numba-cuda is installed (torch: built with CUDA)."""
    import importlib.util

    return importlib.util.find_spec("numba.cuda") is not None


def _flag(name: str) -> property:
    """A bool property reading and writing ``FLAGS["cuda.matmul.<name>"]``."""
    key = f"cuda.matmul.{name}"

    def set_flag(self, value: bool) -> None:
        _check_bool(name, value)
        FLAGS[key] = value

    return property(lambda self: FLAGS[key], set_flag)


class _Matmul:
    """``flambeau.backends.cuda.matmul``: ``allow_tf32``, ``allow_fp16_reduced_precision_reduction`` and
    ``allow_bf16_reduced_precision_reduction`` (bools)."""

    __slots__ = ()

    @property
    def allow_tf32(self) -> bool:
        return get_float32_matmul_precision() != "highest"

    @allow_tf32.setter
    def allow_tf32(self, value: bool) -> None:
        _check_bool("allow_tf32", value)
        set_float32_matmul_precision("high" if value else "highest")

    allow_fp16_reduced_precision_reduction = _flag("allow_fp16_reduced_precision_reduction")
    allow_bf16_reduced_precision_reduction = _flag("allow_bf16_reduced_precision_reduction")


def _check_bool(name: str, value) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"flambeau.backends.cuda.matmul.{name} must be a bool, got {type(value).__name__}")


matmul = _Matmul()
