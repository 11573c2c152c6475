"""nn modules: upsampling. Being written."""

__all__: list[str] = []
