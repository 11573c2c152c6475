"""nn modules: loss. Being written."""

__all__: list[str] = []
