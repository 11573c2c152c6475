"""nn modules: dropout. Being written."""

__all__: list[str] = []
