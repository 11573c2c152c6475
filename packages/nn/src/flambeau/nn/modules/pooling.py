"""nn modules: pooling. Being written."""

__all__: list[str] = []
