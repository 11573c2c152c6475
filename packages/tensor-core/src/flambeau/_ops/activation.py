"""Activation operators beyond the elementwise table (leaky_relu, elu, hardtanh, ...). Being written."""

__all__: list[str] = []
