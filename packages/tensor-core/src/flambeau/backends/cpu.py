"""``flambeau.backends.cpu``: what the CPU kernels run with."""

__all__ = ["get_cpu_capability"]


def get_cpu_capability() -> str:
    """The SIMD level numba compiles the CPU kernels for: ``"AVX512"``, ``"AVX2"`` or ``"DEFAULT"``
    (torch's spellings)."""
    try:
        import llvmlite.binding as llvm

        features = llvm.get_host_cpu_features()
    except Exception:  # llvmlite absent or unable to query: nothing specific is known
        return "DEFAULT"
    if features.get("avx512f"):
        return "AVX512"
    if features.get("avx2"):
        return "AVX2"
    return "DEFAULT"
