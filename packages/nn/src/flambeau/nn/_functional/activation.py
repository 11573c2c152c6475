"""nn.functional: activation. Being written."""

__all__: list[str] = []
