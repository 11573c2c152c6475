"""Dynamic loss scaling (torch's ``GradScaler``), on flambeau tensors and any optimizer.

Note [Dynamic loss scaling]
Float16 gradients underflow to zero when they are small. Multiplying the loss by a large scale
``S`` multiplies every gradient by ``S`` (backward is linear), which keeps them representable;
``unscale_`` multiplies them by ``1/S`` (computed in float64, then float32, as torch does) and records
whether any was inf or NaN. ``step`` skips the optimizer step in that case, and ``update`` multiplies
``S`` by ``backoff_factor`` after an overflow, or by ``growth_factor`` after ``growth_interval``
steps in a row without one (keeping the old scale if the grown one would be infinite). The scale
and the count of good steps are 0-dim tensors on the device of the loss, so nothing synchronises
with the GPU until a step has to decide whether to run.

The optimizer is only used through ``param_groups`` and ``step()``: flambeau.optim's optimizers and
any torch-style optimizer work.
"""

from __future__ import annotations

import warnings
from collections import abc, defaultdict
from enum import Enum

import flambeau as fl
from flambeau import Tensor

__all__ = ["GradScaler", "OptState"]


class OptState(Enum):
    """Where an optimizer is in the current iteration of a :class:`GradScaler`."""

    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _refresh_per_optimizer_state() -> dict:
    return {"stage": OptState.READY, "found_inf_per_device": {}}


class GradScaler:
    """Scale the loss, unscale gradients, skip overflowing steps and adapt the scale (Note [Dynamic loss scaling]).

    Use it as torch's::

        scaler = flambeau.amp.GradScaler("cpu")
        for x, y in data:
            optimizer.zero_grad()
            loss = loss_fn(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)       # unscales, skips the step if a gradient is inf/NaN
            scaler.update()

    Args:
        device: the device type of the loss and gradients (``"cuda"`` or ``"cpu"``). With
            ``"cuda"`` and no CUDA device, the scaler warns and disables itself, as torch does.
        init_scale: the first scale.
        growth_factor: multiplies the scale after ``growth_interval`` steps without inf/NaN (> 1).
        backoff_factor: multiplies the scale after a step with inf/NaN gradients (< 1).
        growth_interval: steps without inf/NaN before the scale grows.
        enabled: False makes every method a no-op (``step`` just calls ``optimizer.step()``).
    """

    def __init__(self, device: str = "cuda", init_scale: float = 2.0**16, growth_factor: float = 2.0,
                 backoff_factor: float = 0.5, growth_interval: int = 2000, enabled: bool = True) -> None:
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled and not fl.cuda.is_available():
            warnings.warn("flambeau.amp.GradScaler is enabled, but CUDA is not available.  Disabling.", stacklevel=2)
            self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale: Tensor | None = None  # made on the loss's device by the first scale()
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker: Tensor | None = None
            self._per_optimizer_states: dict = defaultdict(_refresh_per_optimizer_state)

    # --- scaling ---------------------------------------------------------------------------------
    def _check_scale_growth_tracker(self, funcname: str) -> tuple:
        fix = "This may indicate your script did not use scaler.scale(loss or outputs) earlier in the iteration."
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + fix)
        return self._scale, self._growth_tracker

    def _lazy_init_scale_growth_tracker(self, device) -> None:
        self._scale = fl.full((), self._init_scale, dtype=fl.float32, device=device)
        self._growth_tracker = fl.full((), self._init_growth_tracker, dtype=fl.int32, device=device)

    def scale(self, outputs):
        """``outputs`` (a tensor, or a list/tuple/iterable of them) multiplied by the scale.

        Returns outputs unchanged when the scaler is disabled.
        """
        if not self._enabled:
            return outputs
        if isinstance(outputs, Tensor):
            if self._scale is None:
                self._lazy_init_scale_growth_tracker(outputs.device)
            return outputs * self._scale.to(device=outputs.device)

        def apply(value):
            if isinstance(value, Tensor):
                if self._scale is None:
                    self._lazy_init_scale_growth_tracker(value.device)
                return value * self._scale.to(device=value.device)
            if isinstance(value, abc.Iterable):
                scaled = map(apply, value)
                return type(value)(scaled) if isinstance(value, (list, tuple)) else scaled
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply(outputs)

    def _unscale_grads_(self, optimizer, inv_scale: Tensor, found_inf: Tensor, allow_fp16: bool) -> dict:
        """Multiply every gradient by ``inv_scale``; the per-device flags of non-finite gradients."""
        found = {}
        with fl.no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if not isinstance(param, Tensor):
                        raise AssertionError(f"expected param to be flambeau.Tensor, got {type(param).__name__}")
                    grad = param.grad
                    if grad is None:
                        continue
                    if not allow_fp16 and grad.dtype is fl.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    device = grad.device
                    flag = found.get(device)
                    if flag is None:
                        flag = found[device] = found_inf.to(device=device, copy=True)
                    # checked before unscaling, as torch's kernel does
                    flag.copy_(fl.maximum(flag, (~grad.isfinite()).any().to(fl.float32)))
                    grad.mul_(inv_scale.to(device=device, dtype=grad.dtype))
        return found

    def unscale_(self, optimizer) -> None:
        """Divide the gradients of ``optimizer``'s parameters by the scale, in place, and look for inf/NaN.

        Optional: :meth:`step` unscales if this was not called. Call it (once per step) to inspect or
        clip the true gradients between ``backward`` and ``step``.
        """
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the last update().")
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        inv_scale = self._scale.double().reciprocal().float()
        found_inf = fl.full((), 0.0, dtype=fl.float32, device=self._scale.device)
        state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, found_inf, False)
        state["stage"] = OptState.UNSCALED

    def step(self, optimizer, *args, **kwargs):
        """Unscale the gradients (unless :meth:`unscale_` did) and run ``optimizer.step`` unless one is inf/NaN.

        Returns what ``optimizer.step(*args, **kwargs)`` returns, or None when the step was skipped.
        """
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        state = self._per_optimizer_states[id(optimizer)]
        if state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if len(state["found_inf_per_device"]) == 0:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = None
        if not sum(v.item() for v in state["found_inf_per_device"].values()):
            retval = optimizer.step(*args, **kwargs)
        state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale: float | Tensor | None = None) -> None:
        """Adapt the scale for the next iteration (or set it to ``new_scale``); call once per iteration, last.

        After a skipped step (inf/NaN gradients) the scale is multiplied by ``backoff_factor``; after
        ``growth_interval`` good steps in a row, by ``growth_factor``.
        """
        if not self._enabled:
            return
        scale, tracker = self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, float):
                scale.fill_(new_scale)
            else:
                reason = ("new_scale should be a float or a 1-element flambeau.cuda.FloatTensor or "
                          "flambeau.FloatTensor with requires_grad=False.")
                if not isinstance(new_scale, Tensor) or new_scale.device.type != self._device:
                    raise AssertionError(reason)
                if new_scale.numel() != 1 or new_scale.requires_grad:
                    raise AssertionError(reason)
                scale.copy_(new_scale.reshape(()))
        else:
            found_infs = [f.to(device=scale.device) for state in self._per_optimizer_states.values()
                          for f in state["found_inf_per_device"].values()]
            if not found_infs:
                raise AssertionError("No inf checks were recorded prior to update.")
            found = found_infs[0]
            for f in found_infs[1:]:
                found = found + f
            _update_scale_(scale, tracker, found, self._growth_factor, self._backoff_factor, self._growth_interval)
        self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)

    # --- state -------------------------------------------------------------------------------------
    def get_scale(self) -> float:
        """The current scale as a Python float (1.0 when disabled); synchronises with a GPU."""
        if self._enabled:
            return self._init_scale if self._scale is None else float(self._scale.item())
        return 1.0

    def get_growth_factor(self) -> float:
        """The factor the scale grows by."""
        return self._growth_factor

    def set_growth_factor(self, new_factor: float) -> None:
        """Set the factor the scale grows by."""
        self._growth_factor = new_factor

    def get_backoff_factor(self) -> float:
        """The factor the scale shrinks by after an overflow."""
        return self._backoff_factor

    def set_backoff_factor(self, new_factor: float) -> None:
        """Set the factor the scale shrinks by after an overflow."""
        self._backoff_factor = new_factor

    def get_growth_interval(self) -> int:
        """The number of good steps in a row before the scale grows."""
        return self._growth_interval

    def set_growth_interval(self, new_interval: int) -> None:
        """Set the number of good steps in a row before the scale grows."""
        self._growth_interval = new_interval

    def _get_growth_tracker(self) -> int:
        if self._enabled:
            return self._init_growth_tracker if self._growth_tracker is None else int(self._growth_tracker.item())
        return 0

    def is_enabled(self) -> bool:
        """Whether this scaler scales at all."""
        return self._enabled

    def state_dict(self) -> dict:
        """``{"scale", "growth_factor", "backoff_factor", "growth_interval", "_growth_tracker"}``; {} when disabled.

        Call it after :meth:`update` to checkpoint the scaler between iterations.
        """
        if self._enabled:
            return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                    "backoff_factor": self._backoff_factor, "growth_interval": self._growth_interval,
                    "_growth_tracker": self._get_growth_tracker()}
        return {}

    def load_state_dict(self, state_dict: dict) -> None:
        """Restore a :meth:`state_dict` (a no-op when disabled)."""
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved from a disabled "
                               "instance of GradScaler.")
        self._init_scale = float(state_dict["scale"])
        if self._scale is not None:
            self._scale.fill_(state_dict["scale"])
        self._growth_factor = float(state_dict["growth_factor"])
        self._backoff_factor = float(state_dict["backoff_factor"])
        self._growth_interval = int(state_dict["growth_interval"])
        self._init_growth_tracker = int(state_dict["_growth_tracker"])
        if self._growth_tracker is not None:
            self._growth_tracker.fill_(state_dict["_growth_tracker"])

    def __getstate__(self) -> dict:
        state = self.__dict__.copy()
        if self._enabled:
            if len(self._per_optimizer_states) != 0:
                raise AssertionError("A GradScaler instance may only be pickled at the beginning of an iteration, "
                                     "or at the end after scaler.update().")
            state["_init_scale"] = self.get_scale()
            state["_init_growth_tracker"] = self._get_growth_tracker()
            state["_scale"] = None
            state["_growth_tracker"] = None
            state["_per_optimizer_states"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self._enabled:
            self._per_optimizer_states = defaultdict(_refresh_per_optimizer_state)


def _update_scale_(scale: Tensor, tracker: Tensor, found_inf: Tensor, growth_factor: float, backoff_factor: float,
                   growth_interval: int) -> None:
    """torch's ``_amp_update_scale_``, with tensor operations only (no host synchronisation)."""
    overflow = found_inf > 0
    successful = tracker + 1
    grow = ~overflow & (successful == growth_interval)
    grown = scale * growth_factor
    grown = fl.where(grown.isfinite(), grown, scale)  # keep the scale if the grown one overflows float32
    new_scale = fl.where(overflow, scale * backoff_factor, fl.where(grow, grown, scale))
    new_tracker = fl.where(overflow | grow, fl.zeros_like(successful), successful)
    scale.copy_(new_scale)
    tracker.copy_(new_tracker)
