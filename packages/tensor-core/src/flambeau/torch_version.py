"""``flambeau.__version__``: a string that compares with version strings and tuples, as torch's ``TorchVersion``
(``flambeau.__version__ >= "0.1"``, ``>= (0, 1)``: a plain string compared characters, and a tuple raised)."""

from __future__ import annotations

import re

__all__ = ["TorchVersion", "__version__"]


def _release(version) -> tuple:
    """The numeric release of a version string (``"2.1.0+cu121"`` -> ``(2, 1, 0)``) or tuple, trailing zeros off."""
    if isinstance(version, tuple):
        parts = [int(p) for p in version]
    elif isinstance(version, str):
        match = re.match(r"\s*v?(\d+(?:\.\d+)*)", version)
        if match is None:
            raise ValueError(f"not a version: {version!r}")
        parts = [int(p) for p in match.group(1).split(".")]
    else:
        raise TypeError(f"cannot compare a version with {type(version).__name__}")
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


class TorchVersion(str):
    """A version string ordered by its numeric release against strings and tuples of ints (pre-release and local
    labels are not ordered: ``"0.1.0a1"`` compares as ``"0.1.0"``)."""

    def _cmp(self, other) -> int:
        a, b = _release(str(self)), _release(other)
        return (a > b) - (a < b)

    def __lt__(self, other):
        return self._cmp(other) < 0

    def __le__(self, other):
        return self._cmp(other) <= 0

    def __gt__(self, other):
        return self._cmp(other) > 0

    def __ge__(self, other):
        return self._cmp(other) >= 0

    def __eq__(self, other):
        if isinstance(other, (str, tuple)):
            try:
                return self._cmp(other) == 0
            except ValueError:
                return str.__eq__(self, other)
        return NotImplemented

    def __ne__(self, other):
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = str.__hash__


__version__ = TorchVersion("0.1.0")
