"""``flambeau.cpu.amp``: torch's older spelling of mixed precision on the CPU (``torch.cpu.amp``).

Each name forwards to :mod:`flambeau.amp` with ``device_type="cpu"`` (bfloat16 by default) and warns that the
spelling is deprecated, as torch 2.4+ does (:mod:`flambeau._legacy_amp`).
"""

from __future__ import annotations

from flambeau._legacy_amp import spellings

__all__ = ["autocast", "GradScaler"]

_names = spellings("cpu", "bfloat16")
autocast, GradScaler = _names.autocast, _names.GradScaler
