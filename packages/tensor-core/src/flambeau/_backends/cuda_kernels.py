"""Registers the CUDA kernels of the operator table (launchers compile lazily on first use)."""
