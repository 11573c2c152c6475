"""nn.functional: attention. Being written."""

__all__: list[str] = []
