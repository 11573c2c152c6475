"""nn modules: attention. Being written."""

__all__: list[str] = []
