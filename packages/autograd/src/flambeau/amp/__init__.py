"""``flambeau.amp``: mixed-precision training helpers, as ``torch.amp``.

:class:`GradScaler` scales the loss so that small gradients survive low-precision arithmetic,
unscales the gradients before the optimizer step, skips steps whose gradients overflowed and
adapts the scale. It works on CPU and CUDA tensors of any floating dtype. ``autocast`` (running
chosen operators in a lower precision) is not part of flambeau yet: it needs a casting hook in
tensor-core's operator dispatch and the bfloat16 dtype.

Shipped by flambeau-autograd.
"""

from flambeau.amp.grad_scaler import GradScaler, OptState

__all__ = ["GradScaler", "OptState"]
