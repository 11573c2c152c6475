"""nn.init. Being written."""

__all__: list[str] = []
