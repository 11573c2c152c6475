"""nn.functional: resample. Being written."""

__all__: list[str] = []
