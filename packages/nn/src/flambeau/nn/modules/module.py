"""nn modules: module. Being written."""

__all__: list[str] = []
