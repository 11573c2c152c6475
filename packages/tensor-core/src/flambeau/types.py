"""``flambeau.types``: torch's ``torch.types`` aliases, for annotations in ported code."""

from __future__ import annotations

import os
from typing import IO

from flambeau._device import device as _device
from flambeau._dtype import dtype as _dtype
from flambeau._layout import layout as _layout
from flambeau._size import Size
from flambeau._tensor import Tensor

__all__ = ["Device", "FileLike", "Number", "Size", "Tensor"]

_bool = bool
_complex = complex
_float = float
_int = int
_str = str
_bytes = bytes
_size = Size | list[int] | tuple[int, ...]
_Number = (int, float, bool)  # what isinstance checks take
Number = int | float | bool
Device = _device | str | int | None
FileLike = str | os.PathLike | IO[bytes]
_TensorOrTensors = Tensor | tuple[Tensor, ...] | list[Tensor]
_dtype, _device, _layout = _dtype, _device, _layout  # (torch's private names of the classes)
