"""nn modules: flatten. Being written."""

__all__: list[str] = []
