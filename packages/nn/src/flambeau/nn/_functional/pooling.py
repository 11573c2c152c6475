"""nn.functional: pooling. Being written."""

__all__: list[str] = []
