"""nn.functional: basic. Being written."""

__all__: list[str] = []
