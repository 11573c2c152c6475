"""nn modules: container. Being written."""

__all__: list[str] = []
