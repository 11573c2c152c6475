"""Random number generation: Generator, manual_seed and the random factories."""

__all__: list = []
