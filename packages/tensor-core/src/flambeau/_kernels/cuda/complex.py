"""CUDA kernels of the complex family (Note [numba.cuda bound on first use] in ``_launch``).

None yet. On CUDA, complex tensors have the arithmetic of the elementwise templates (``add``,
``sub``, ``mul``, ``div``, ``neg``, ``eq``, ``ne`` and copies: the "c" kind of
``elementwise.KINDS``); other operators raise torch's ``"<op>_cuda" not implemented for
'ComplexFloat'``, the views of the family refuse CUDA tensors, and ``angle``, ``complex``,
``conj_physical`` and ``polar`` are listed in ``NOT_ON_CUDA``.
"""

from __future__ import annotations

cuda = None


def ptx_cases() -> list:
    """(label, python function, signature) for every kernel template x dtype this family launches."""
    return []
