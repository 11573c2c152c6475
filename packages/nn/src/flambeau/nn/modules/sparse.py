"""nn modules: sparse. Being written."""

__all__: list[str] = []
