"""nn.functional: norm. Being written."""

__all__: list[str] = []
