"""``flambeau.cuda.amp``: torch's older spelling of mixed precision on CUDA (``torch.cuda.amp``).

Each name forwards to :mod:`flambeau.amp` with ``device_type="cuda"`` (float16 by default) and warns that the
spelling is deprecated, as torch 2.4+ does (:mod:`flambeau._legacy_amp`).
"""

from __future__ import annotations

from flambeau._legacy_amp import spellings

__all__ = ["autocast", "GradScaler", "custom_fwd", "custom_bwd"]

_names = spellings("cuda", "float16")
autocast, GradScaler, custom_fwd, custom_bwd = _names.autocast, _names.GradScaler, _names.custom_fwd, _names.custom_bwd
