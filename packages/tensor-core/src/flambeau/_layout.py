"""Tensor layouts: :data:`strided` (every dense tensor) and :data:`sparse_coo` (``flambeau.sparse``).

``torch.strided`` and ``torch.sparse_coo`` are the values of ``Tensor.layout`` and the ``layout=``
argument of the factories; programs compare them (``x.layout == torch.strided``). A layout is a
singleton: compare with ``is`` or ``==``.
"""

from __future__ import annotations

__all__ = ["layout", "strided", "sparse_coo"]


class layout:
    """How a tensor's elements are stored: ``flambeau.strided`` or ``flambeau.sparse_coo``."""

    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"flambeau.{self.name}"

    def __reduce__(self):
        return (_from_name, (self.name,))


def _from_name(name: str) -> layout:
    return _BY_NAME[name]


strided = layout("strided")
sparse_coo = layout("sparse_coo")
_BY_NAME = {lay.name: lay for lay in (strided, sparse_coo)}
