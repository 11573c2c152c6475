"""nn.functional: loss. Being written."""

__all__: list[str] = []
