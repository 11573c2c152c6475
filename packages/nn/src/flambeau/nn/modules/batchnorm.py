"""nn modules: batchnorm. Being written."""

__all__: list[str] = []
