"""nn modules: conv. Being written."""

__all__: list[str] = []
