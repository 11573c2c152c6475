"""CPU kernels, one module per operator family; importing this package registers them all."""
