"""nn.functional: conv. Being written."""

__all__: list[str] = []
