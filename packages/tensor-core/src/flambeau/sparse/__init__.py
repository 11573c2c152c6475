"""``flambeau.sparse``: operations on sparse COO tensors, as ``torch.sparse``.

Build sparse tensors with :func:`flambeau.sparse_coo_tensor` or ``Tensor.to_sparse()``; see
``flambeau._sparse`` for how they are stored and differentiated.
"""

from flambeau._sparse import mm, softmax, spmm, sum

__all__ = ["mm", "spmm", "sum", "softmax"]
