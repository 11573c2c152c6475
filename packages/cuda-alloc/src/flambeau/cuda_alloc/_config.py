"""Allocator settings and the parser of ``FLAMBEAU_CUDA_ALLOC_CONF``.

The variable uses PyTorch's ``PYTORCH_CUDA_ALLOC_CONF`` syntax: comma-separated
``key:value`` pairs, e.g. ``"max_split_size_mb:128,garbage_collection_threshold:0.8"``.
It is read once, when the first allocator is built, so a malformed value fails at start
and not in the middle of a training step.
"""

from __future__ import annotations

import dataclasses
import math
import os

__all__ = ["AllocatorConfig", "ENV_VAR", "parse_config"]

ENV_VAR = "FLAMBEAU_CUDA_ALLOC_CONF"

_MB = 1 << 20
# A split limit below the large-pool segment granularity would make every large block
# "oversize", which defeats the cache; PyTorch refuses anything under 20 MB too.
_MIN_MAX_SPLIT_SIZE_MB = 20


@dataclasses.dataclass
class AllocatorConfig:
    """Tunable policy of a :class:`~flambeau.cuda_alloc.CachingAllocator`.

    Attributes:
        max_split_size: Blocks of at least this many bytes are never split, and requests
            smaller than this never take such a block; ``None`` means no limit. Limits
            fragmentation when large and small tensors alternate.
        garbage_collection_threshold: Fraction of device memory in (0, 1). When the
            reserved memory would pass it, free cached segments that have gone unused the
            longest before asking the device for more; ``None`` disables this.
        roundup_power2_divisions: Round each request up to one of this many equal steps
            between consecutive powers of two (a power of two, at least 1); 1 keeps the
            plain rounding to multiples of 512 bytes.
    """

    max_split_size: int | None = None
    garbage_collection_threshold: float | None = None
    roundup_power2_divisions: int = 1

    def __post_init__(self) -> None:
        check_max_split_size(self.max_split_size)
        check_gc_threshold(self.garbage_collection_threshold)
        check_divisions(self.roundup_power2_divisions)

    @property
    def max_split_size_mb(self) -> int | None:
        """``max_split_size`` in MiB, as ``FLAMBEAU_CUDA_ALLOC_CONF`` spells it."""
        return None if self.max_split_size is None else self.max_split_size // _MB


def check_max_split_size(value: int | None) -> None:
    """Raise ValueError unless ``value`` (bytes) is None or at least 20 MiB."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < _MIN_MAX_SPLIT_SIZE_MB * _MB:
        raise ValueError(
            f"max_split_size: expected None or an int of at least {_MIN_MAX_SPLIT_SIZE_MB} MiB "
            f"({_MIN_MAX_SPLIT_SIZE_MB * _MB} bytes), got {value!r}"
        )


def check_gc_threshold(value: float | None) -> None:
    """Raise ValueError unless ``value`` is None or a fraction strictly between 0 and 1."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 < value < 1.0:
        raise ValueError(
            f"garbage_collection_threshold: expected a number in the open interval (0, 1), got {value!r}"
        )


def check_divisions(value: int) -> None:
    """Raise ValueError unless ``value`` is a power of two of at least 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value & (value - 1):
        raise ValueError(
            f"roundup_power2_divisions: expected a power of two of at least 1, got {value!r}"
        )


def _parse_int(key: str, text: str, expected: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{ENV_VAR}: {key}: expected {expected}, got {text!r}") from None


def _parse_float(key: str, text: str, expected: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{ENV_VAR}: {key}: expected {expected}, got {text!r}") from None
    if not math.isfinite(value):
        raise ValueError(f"{ENV_VAR}: {key}: expected {expected}, got {text!r}")
    return value


def parse_config(text: str | None) -> AllocatorConfig:
    """Parse a ``FLAMBEAU_CUDA_ALLOC_CONF`` string into an :class:`AllocatorConfig`.

    Args:
        text: ``key:value`` pairs separated by commas; ``None`` or blank gives the defaults.
            Keys: ``max_split_size_mb`` (int, MiB, at least 20), ``garbage_collection_threshold``
            (float in (0, 1)), ``roundup_power2_divisions`` (power of two).

    Returns:
        The settings, validated.

    Raises:
        ValueError: naming the setting, what was expected and what was given.
    """
    config = AllocatorConfig()
    if text is None or not text.strip():
        return config
    seen: set[str] = set()
    for item in text.split(","):
        item = item.strip()
        if not item:
            continue
        key, sep, value = item.partition(":")
        key, value = key.strip(), value.strip()
        if not sep or not value:
            raise ValueError(f"{ENV_VAR}: expected 'key:value' pairs separated by commas, got {item!r}")
        if key in seen:
            raise ValueError(f"{ENV_VAR}: {key}: expected the setting once, got it twice in {text!r}")
        seen.add(key)
        if key == "max_split_size_mb":
            mb = _parse_int(key, value, f"an integer number of MiB of at least {_MIN_MAX_SPLIT_SIZE_MB}")
            if mb < _MIN_MAX_SPLIT_SIZE_MB:
                raise ValueError(
                    f"{ENV_VAR}: {key}: expected an integer number of MiB of at least "
                    f"{_MIN_MAX_SPLIT_SIZE_MB}, got {value!r}"
                )
            config.max_split_size = mb * _MB
        elif key == "garbage_collection_threshold":
            threshold = _parse_float(key, value, "a number in the open interval (0, 1)")
            if not 0.0 < threshold < 1.0:
                raise ValueError(
                    f"{ENV_VAR}: {key}: expected a number in the open interval (0, 1), got {value!r}"
                )
            config.garbage_collection_threshold = threshold
        elif key == "roundup_power2_divisions":
            divisions = _parse_int(key, value, "a power of two of at least 1")
            if divisions < 1 or divisions & (divisions - 1):
                raise ValueError(f"{ENV_VAR}: {key}: expected a power of two of at least 1, got {value!r}")
            config.roundup_power2_divisions = divisions
        else:
            raise ValueError(
                f"{ENV_VAR}: unknown setting {key!r}: expected one of max_split_size_mb, "
                "garbage_collection_threshold, roundup_power2_divisions"
            )
    return config


def config_from_env() -> AllocatorConfig:
    """Read and parse ``FLAMBEAU_CUDA_ALLOC_CONF`` from the environment."""
    return parse_config(os.environ.get(ENV_VAR))
