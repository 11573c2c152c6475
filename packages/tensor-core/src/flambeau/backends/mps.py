"""``flambeau.backends.mps``: Apple's Metal backend, which flambeau does not have."""

__all__ = ["is_available", "is_built"]


def is_available() -> bool:
    """Always False: flambeau runs on the CPU and on CUDA only."""
    return False


def is_built() -> bool:
    """Always False."""
    return False
