"""scaled_dot_product_attention. Being written."""

__all__: list[str] = []
