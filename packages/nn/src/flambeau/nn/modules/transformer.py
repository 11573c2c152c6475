"""nn modules: transformer. Being written."""

__all__: list[str] = []
