"""nn modules: linear. Being written."""

__all__: list[str] = []
