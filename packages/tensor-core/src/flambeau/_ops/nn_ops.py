"""Neural-network primitives of the operator table: softmax, log_softmax, embedding, dropout.

``flambeau.nn.functional`` builds on these. The CPU kernels (a fused numba softmax over rows, numpy
otherwise) are in ``flambeau/_kernels/cpu/nn_ops.py``.

Kernel convention (every device; arrays in, array out):
    softmax, log_softmax: ``kernel(a, dim) -> array`` (``a`` already in the compute dtype).
    embedding: ``kernel(weight, indices) -> array`` (rows of ``weight`` gathered, shape
        ``indices.shape + (embedding_dim,)``).
    dropout: ``kernel(a, mask, out=None) -> array`` returning ``a * mask`` (written into ``out``
        for the in-place form); ``mask`` holds ``0`` or ``1 / (1 - p)`` in ``a``'s dtype.

Autograd recording: ``inputs`` are the positional arguments in signature order, ``attrs`` the
keyword-only ones. ``dropout`` also records ``attrs["mask"]``, the tensor of factors it applied,
so that its backward is ``grad * mask``.
"""

from __future__ import annotations

import numpy as np

from flambeau import _dtype as dt
from flambeau._ops._common import (
    Tensor,
    _wrap,
    check_tensor,
    grad_state,
    inplace_by_engine,
    inplace_needs_engine,
    record,
    record_if_needed,
    same_device,
    wrap_dim,
)
from flambeau._ops._registry import declare

__all__ = ["softmax", "log_softmax", "embedding", "dropout"]


def _softmax_op(name: str, log: bool, formula: str):
    op = declare(f"{name}(Tensor input, int dim, ScalarType? dtype=None) -> Tensor", category="nn")

    def fn(input, dim=None, dtype=None):
        check_tensor(input, "input", name)
        if dim is None:
            raise TypeError(f"{name}(): argument 'dim' must be given (an int)")
        d = wrap_dim(dim, input.ndim)
        x = input if dtype is None else input.to(dt.to_dtype(dtype))
        if not x.dtype.is_floating_point:
            raise NotImplementedError(f'"{name}_lastdim_kernel_impl" not implemented for \'{x.dtype.scalar_name}\'')
        out = _wrap(op.kernel(x._device.type)(x._data, d), x._device)
        if grad_state.enabled and x._requires_grad:
            record(op, (x, d, None), {}, out)
        return out

    fn.__doc__ = f"""{formula} along ``dim``, computed stably (the maximum is subtracted first).

    Args:
        input: a floating tensor of any shape (integers need ``dtype``).
        dim: the dimension to normalise over.
        dtype: if given, ``input`` is cast to it first.

    Returns a tensor of the shape of ``input``; a slice that is all ``-inf`` gives NaN as in torch.
    """
    op.front(fn)
    return op


SOFTMAX = _softmax_op("softmax", False, "``exp(x) / sum(exp(x))``")
LOG_SOFTMAX = _softmax_op("log_softmax", True, "``x - log(sum(exp(x)))``")
softmax = SOFTMAX.fn
log_softmax = LOG_SOFTMAX.fn


# --- embedding -------------------------------------------------------------------------------------
def _check_cpu_indices(idx, n: int, dev) -> None:
    """IndexError where CPU indices ``idx`` leave ``[0, n)``. A device kernel checks its indices itself and reports
    a bad one at the next synchronisation (Note [Device-side errors]): reading them here would make the host
    wait."""
    if dev.type == "cpu" and idx.size and (idx.min() < 0 or idx.max() >= n):
        raise IndexError("index out of range in self")


EMBEDDING = declare("embedding(Tensor input, Tensor weight, int? padding_idx=None, float? max_norm=None, "
                    "float norm_type=2.0, bool scale_grad_by_freq=False, bool sparse=False) -> Tensor",
                    category="nn", method=False)


@EMBEDDING.front
def embedding(input: Tensor, weight: Tensor, padding_idx=None, max_norm=None, norm_type: float = 2.0,
              scale_grad_by_freq: bool = False, sparse: bool = False) -> Tensor:
    """Rows of ``weight`` ``(num_embeddings, embedding_dim)`` picked by integer ``input`` indices.

    The result has shape ``input.shape + (embedding_dim,)``. ``padding_idx`` marks the row that
    gets no gradient; with ``max_norm`` the referenced rows of ``weight`` whose ``norm_type``-norm
    exceeds it are rescaled in place first (as torch does). An index outside ``[0, num_embeddings)``
    raises IndexError on the CPU; on CUDA the kernel checks it and the next synchronisation raises
    (Note [Device-side errors]).
    """
    check_tensor(input, "input", "embedding")
    check_tensor(weight, "weight", "embedding")
    if input.dtype not in (dt.int64, dt.int32):
        raise RuntimeError("Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                           f"Long, Int; but got flambeau.{input.dtype.scalar_name}Tensor instead (while checking "
                           "arguments for embedding)")
    if weight.ndim != 2:
        raise RuntimeError(f"'weight' must be 2-D, got {weight.ndim}-D")
    if weight.dtype.is_complex and weight._requires_grad and grad_state.enabled:  # (as torch)
        raise RuntimeError("embedding does not support automatic differentiation for outputs with complex dtype.")
    dev = same_device(weight, input)  # (no 0-d CPU indices beside a CUDA weight: the kernels read them)
    n = weight.shape[0]
    if padding_idx is not None:
        if not -n <= padding_idx < n:
            raise AssertionError("Padding_idx must be within num_embeddings")
        padding_idx = padding_idx + n if padding_idx < 0 else padding_idx
    idx = input._data
    _check_cpu_indices(idx, n, dev)
    if max_norm is not None:
        _renorm_rows(weight, idx, float(max_norm), float(norm_type))
    out = _wrap(EMBEDDING.kernel(weight._device.type)(weight._data, idx), weight._device)
    record_if_needed(EMBEDDING, (input, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse),
                     {}, out)
    return out


EMBEDDING_DENSE_BACKWARD = declare(
    "embedding_dense_backward(Tensor grad_output, Tensor indices, int num_weights, int padding_idx, "
    "bool scale_grad_by_freq) -> Tensor", category="nn", method=False, function=False)


@EMBEDDING_DENSE_BACKWARD.front
def embedding_dense_backward(grad_output: Tensor, indices: Tensor, num_weights: int, padding_idx: int,
                             scale_grad_by_freq: bool) -> Tensor:
    """The gradient of :func:`embedding`'s ``weight`` (torch's ``embedding_dense_backward``): ``(num_weights, D)``
    zeros plus each row of ``grad_output`` added at its index, in one operator call (Note [Embedding backward as
    one operator]).

    Args:
        grad_output: float ``indices.shape + (D,)``, the gradient of the lookup's result.
        indices: int64 or int32 indices into ``[0, num_weights)`` (checked on the CPU; on CUDA the kernel
            checks them and the next synchronisation raises).
        num_weights: the rows of the embedding matrix.
        padding_idx: the row that gets no gradient (one outside ``[0, num_weights)``, such as -1: none).
        scale_grad_by_freq: divide each row's gradient by the number of times its index occurs in ``indices``.

    Returns:
        ``(num_weights, D)`` of ``grad_output``'s dtype; differentiable in ``grad_output``.
    """
    op = "embedding_dense_backward"
    check_tensor(grad_output, "grad_output", op)
    check_tensor(indices, "indices", op)
    if indices.dtype not in (dt.int64, dt.int32):
        raise RuntimeError(f"{op}(): expected indices of dtype int64 or int32, got {indices.dtype}")
    if not grad_output.dtype.is_floating_point or grad_output.dtype.is_complex:
        raise RuntimeError(f"{op}(): expected a floating point grad_output, got {grad_output.dtype}")
    if grad_output.ndim != indices.ndim + 1 or tuple(grad_output.shape[:-1]) != tuple(indices.shape):
        raise RuntimeError(f"{op}(): expected grad_output of shape indices.shape + (embedding_dim,) = "
                           f"{list(indices.shape)} + [D], got {list(grad_output.shape)}")
    n = int(num_weights)
    if n < 0:
        raise RuntimeError(f"{op}(): expected num_weights >= 0, got {num_weights}")
    dev = same_device(grad_output, indices)  # (no 0-d CPU indices beside CUDA gradients: the kernels read them)
    idx = indices._data
    _check_cpu_indices(idx, n, dev)
    out = _wrap(EMBEDDING_DENSE_BACKWARD.kernel(dev.type)(grad_output._data, idx, n, int(padding_idx),
                                                         bool(scale_grad_by_freq)), dev)
    record_if_needed(EMBEDDING_DENSE_BACKWARD, (grad_output, indices, n, int(padding_idx), bool(scale_grad_by_freq)),
                     {}, out)
    return out


# Note [Embedding backward as one operator]
#     An embedding's weight gradient was composed of operators: a reshape of the indices and of the gradient,
#     ``zeros`` and ``index_add_`` (with a mask product where there is a padding row): some 130 µs of host time
#     per backward on the fake device of tools/host_overhead.py, a sixth of an NCF step's. It is one operator now,
#     as in torch, with one kernel per device (on CUDA a fill and one scatter of atomic adds). It also honours
#     ``scale_grad_by_freq``, which the composite ignored.


def _renorm_rows(weight: Tensor, idx, max_norm: float, norm_type: float) -> None:
    w = weight._data
    if weight._device.type == "cuda":
        from flambeau._kernels.cuda.nn_ops import embedding_renorm

        embedding_renorm(w, idx, max_norm, norm_type)
        weight._storage._version += 1
        return
    rows = np.unique(idx)
    sub = w[rows]
    norms = np.linalg.norm(sub, ord=norm_type, axis=1)
    big = norms > max_norm
    if big.any():
        w[rows[big]] = sub[big] * (max_norm / (norms[big] + 1e-7))[:, None].astype(w.dtype)
        weight._storage._version += 1


# --- dropout ---------------------------------------------------------------------------------------
DROPOUT = declare("dropout(Tensor input, float p=0.5, bool training=True, bool inplace=False) -> Tensor",
                  category="nn", method=False)


@DROPOUT.front
def dropout(input: Tensor, p: float = 0.5, training: bool = True, inplace: bool = False) -> Tensor:
    """Zero each element of ``input`` with probability ``p`` and scale the rest by ``1 / (1 - p)``.

    The mask comes from flambeau's default generator (``flambeau.manual_seed`` makes it
    reproducible). With ``training=False`` or ``p == 0`` ``input`` is returned unchanged;
    ``inplace=True`` overwrites ``input`` (the ``dropout_`` form). Floating inputs only.
    """
    check_tensor(input, "input", "dropout")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return input
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"result type Float can't be cast to the desired output type {input.dtype.scalar_name}")
    if inplace and inplace_needs_engine(input):
        # Note [In-place operators under autograd]: the engine runs the out-of-place form and copies.
        return inplace_by_engine(DROPOUT, (input, p, training, False), {})
    a = input._data
    dev = input._device
    npdt = input.dtype.np
    if p == 1:
        mask = np.zeros(a.shape, npdt)
        if dev.type != "cpu":
            from flambeau._backends import backend

            mask = backend(dev.type).from_numpy(mask, dev)
    else:  # drawn on input's device by its default generator
        from flambeau._random import dropout_mask

        mask = dropout_mask(tuple(a.shape), p, npdt, dev)
    kernel = DROPOUT.kernel(dev.type)
    if inplace:
        kernel(a, mask, out=a)
        input._storage._version += 1
        out = input
    else:
        out = _wrap(kernel(a, mask), dev)
    if grad_state.enabled and input._requires_grad:
        record(DROPOUT, (input, p, training, inplace), {"mask": _wrap(mask, dev)}, out)
    return out



# --- sample inputs (Note [Sample inputs] in _registry) -------------------------------------------------
def _embedding_dense_backward_reference(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    """torch's gradient of ``embedding``'s weight (``aten.embedding_dense_backward``: an independent reference)."""
    import torch

    return torch.ops.aten.embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq)


def _declare_samples():
    from flambeau._ops._registry import OPS
    from flambeau._ops._samples import FLOAT, cases
    from flambeau._ops._samples import SampleInput as S

    def add(name, *builders, dtypes=FLOAT, **meta):
        OPS[name].samples(cases(*builders), dtypes=dtypes, **meta)

    for name in ("softmax", "log_softmax"):
        add(name, lambda mk, mki: S(mk((3, 4)), 1), lambda mk, mki: S(mk((2, 3, 4)), 0),
            lambda mk, mki: S(mk((4, 3), noncontiguous=True), -1), ref=f"nn.functional.{name}")
    add("embedding", lambda mk, mki: S(mki((2, 3), 5), mk((5, 4))), ref="nn.functional.embedding")
    add("embedding_dense_backward", lambda mk, mki: S(mk((2, 3, 4)), mki((2, 3), 5), 5, -1, False),
        lambda mk, mki: S(mk((6, 4), noncontiguous=True), mki((6,), 3), 5, 1, False).named("padding"),
        lambda mk, mki: S(mk((2, 4, 3)), mki((2, 4), 3), 4, -1, True).named("scaled by frequency"),
        lambda mk, mki: S(mk((4, 2)), mki((4,), 2), 3, 0, True).named("scaled, padding"),
        lambda mk, mki: S(mk((0, 3)), mki((0,), 2), 2, -1, False).named("no indices"),
        lambda mk, mki: S(mk((3, 0)), mki((3,), 5), 5, -1, True).named("no columns"),
        lambda mk, mki: S(mk((4, 2)), mki((4,), 3), 3, 7, False).named("padding_idx outside the rows"),
        ref=_embedding_dense_backward_reference)
    add("dropout", lambda mk, mki: S(mk((3, 4)), 0.5, True), lambda mk, mki: S(mk((3, 4)), 0.5, False),
        ref="nn.functional.dropout", nondeterministic=True, gradcheck=False)

_declare_samples()
