"""nn modules: normalization. Being written."""

__all__: list[str] = []
