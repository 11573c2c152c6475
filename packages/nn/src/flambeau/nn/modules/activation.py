"""nn modules: activation. Being written."""

__all__: list[str] = []
