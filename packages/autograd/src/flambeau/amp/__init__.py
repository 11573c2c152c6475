"""``flambeau.amp``: automatic mixed precision, as ``torch.amp``.

:class:`autocast` runs chosen operators of a region in a lower precision (float16 or bfloat16)
and the numerically sensitive ones in float32, with torch's per-operator lists (Note [Autocast as
a dispatch mode]). :class:`GradScaler` scales the loss so that small gradients survive
low-precision arithmetic, unscales the gradients before the optimizer step, skips steps whose
gradients overflowed and adapts the scale. Both work on CPU and CUDA tensors.

Shipped by flambeau-autograd.
"""

from flambeau.amp.autocast_mode import (
    autocast,
    autocast_decrement_nesting,
    autocast_increment_nesting,
    clear_autocast_cache,
    custom_bwd,
    custom_fwd,
    get_autocast_cpu_dtype,
    get_autocast_dtype,
    get_autocast_gpu_dtype,
    is_autocast_available,
    is_autocast_cache_enabled,
    is_autocast_cpu_enabled,
    is_autocast_enabled,
    set_autocast_cache_enabled,
    set_autocast_cpu_dtype,
    set_autocast_cpu_enabled,
    set_autocast_dtype,
    set_autocast_enabled,
    set_autocast_gpu_dtype,
)
from flambeau.amp.grad_scaler import GradScaler, OptState

__all__ = ["autocast", "custom_fwd", "custom_bwd", "is_autocast_available", "is_autocast_enabled",
           "get_autocast_dtype", "is_autocast_cache_enabled", "clear_autocast_cache", "GradScaler", "OptState",
           # torch's low-level autocast state (torch.set_autocast_enabled ...), also at flambeau's top level
           "set_autocast_enabled", "set_autocast_dtype", "set_autocast_cache_enabled", "is_autocast_cpu_enabled",
           "set_autocast_cpu_enabled", "get_autocast_cpu_dtype", "set_autocast_cpu_dtype", "get_autocast_gpu_dtype",
           "set_autocast_gpu_dtype", "autocast_increment_nesting", "autocast_decrement_nesting"]
