"""scaled_dot_product_attention: two BLAS matmuls around a fused masked-softmax kernel.

``softmax(query @ key.mT * scale + mask) @ value``, with an optional boolean or additive mask,
a causal (top-left aligned lower-triangular) mask, dropout on the attention weights and grouped
query attention. Rows whose every entry is masked give zero weights, as torch's math backend
does. The attention weights are saved for backward, which never recomputes the softmax
(``_scaled_dot_product_attention_backward``). The CPU kernels (two BLAS matmuls around a fused
masked-softmax pass) are in ``flambeau/_kernels/cpu/attention.py``.

Kernel convention (every device; arrays in, arrays out):
    scaled_dot_product_attention: ``kernel(q, k, v, mask, drop, is_causal, scale) -> (out, attn)``;
        ``q (..., L, E)``, ``k (..., S, E)``, ``v (..., S, Ev)`` with broadcastable batch dims,
        ``mask`` None or an additive mask of ``q``'s dtype broadcastable to ``(..., L, S)`` (on
        devices other than the CPU, a boolean mask is passed as it is: True means take part),
        ``drop`` None or the dropout factors (0 or ``1 / (1 - p)``) of ``attn``'s shape;
        ``attn`` is the softmax before dropout.
    _scaled_dot_product_attention_backward: ``kernel(grad, q, k, v, attn, drop, scale) ->
        (grad_q, grad_k, grad_v, grad_scores)`` where ``grad_scores`` is the gradient of the
        masked scores (the additive mask's gradient, before reduction over broadcast dims).

Autograd recording: inputs ``(query, key, value, attn_mask, dropout_p, is_causal)``, attrs
``scale`` (the one used), ``enable_gqa``, ``attn`` (the weights) and ``dropout_mask`` (or None).
"""

from __future__ import annotations

import math

import numpy as np

from flambeau import _dtype as dt
from flambeau._ops._common import Tensor, _wrap, check_tensor, common_device, grad_state, record
from flambeau._ops._registry import declare

__all__ = ["scaled_dot_product_attention"]


SDPA = declare("scaled_dot_product_attention(Tensor query, Tensor key, Tensor value, Tensor? attn_mask=None, "
               "float dropout_p=0.0, bool is_causal=False, *, float? scale=None, bool enable_gqa=False) -> Tensor",
               category="attention", method=False)
SDPA_BACKWARD = declare("_scaled_dot_product_attention_backward(Tensor grad, Tensor query, Tensor key, Tensor value, "
                        "Tensor attn, Tensor? dropout_mask, float scale) -> (Tensor, Tensor, Tensor, Tensor)",
                        category="attention", method=False, differentiable=False)


def _dropout_factors(shape, p, npdt):
    from flambeau._random import default_generator

    if p >= 1:
        return np.zeros(shape, npdt)
    keep = default_generator._np.random(shape, dtype=np.float32) >= np.float32(p)
    return np.multiply(keep, npdt.type(1.0 / (1.0 - p)), dtype=npdt)


@SDPA.front
def scaled_dot_product_attention(query: Tensor, key: Tensor, value: Tensor, attn_mask=None, dropout_p: float = 0.0,
                                 is_causal: bool = False, *, scale=None, enable_gqa: bool = False) -> Tensor:
    """Attention ``softmax(query @ key.mT * scale + mask) @ value``, as torch's math backend.

    Args:
        query: ``(..., L, E)`` floating tensor.
        key: ``(..., S, E)``, same dtype; batch dims broadcast with ``query``'s.
        value: ``(..., S, Ev)``, same dtype.
        attn_mask: None, a boolean mask (True means take part in attention) or an additive
            floating mask, broadcastable to ``(..., L, S)``. A float mask gets a gradient.
        dropout_p: dropout probability applied to the attention weights (flambeau's default
            generator draws the mask; ``flambeau.manual_seed`` makes it reproducible).
        is_causal: mask out keys after the query position (top-left aligned lower triangle);
            ``attn_mask`` must then be None.
        scale: factor applied to the scores; ``1 / sqrt(E)`` when None.
        enable_gqa: grouped query attention: ``key``/``value`` may have fewer heads (dim -3)
            than ``query``, a divisor of its head count; each is repeated to match.

    Returns:
        ``(..., L, Ev)`` tensor. Rows whose every key is masked give zeros.
    """
    check_tensor(query, "query", "scaled_dot_product_attention")
    check_tensor(key, "key", "scaled_dot_product_attention")
    check_tensor(value, "value", "scaled_dot_product_attention")
    qdt = query.dtype
    if key.dtype is not qdt or value.dtype is not qdt:
        raise RuntimeError("Expected query, key, and value to have the same dtype, but got query.dtype: "
                           f"{qdt} key.dtype: {key.dtype} and value.dtype: {value.dtype} instead.")
    if not qdt.is_floating_point:
        raise RuntimeError(f"scaled_dot_product_attention(): expected a floating dtype for query, got {qdt}")
    if query.ndim < 2 or key.ndim < 2 or value.ndim < 2:
        raise RuntimeError("scaled_dot_product_attention(): query, key and value must be at least 2-D, got "
                           f"{query.ndim}-D, {key.ndim}-D and {value.ndim}-D")
    if query.shape[-1] != key.shape[-1]:
        raise RuntimeError(f"scaled_dot_product_attention(): the last dim of query ({query.shape[-1]}) and key "
                           f"({key.shape[-1]}) must match")
    if key.shape[-2] != value.shape[-2]:
        raise RuntimeError(f"scaled_dot_product_attention(): key ({key.shape[-2]}) and value ({value.shape[-2]}) "
                           "must have the same sequence length (dim -2)")
    if not 0.0 <= dropout_p <= 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {dropout_p}")
    if enable_gqa and query.ndim >= 3 and key.ndim >= 3:
        hq, hk, hv = query.shape[-3], key.shape[-3], value.shape[-3]
        if hq % hk or hq % hv:
            raise RuntimeError(f"scaled_dot_product_attention(): with enable_gqa the number of query heads ({hq}) "
                               f"must be a multiple of the key ({hk}) and value ({hv}) heads")
        if hk != hq:
            key = key.repeat_interleave(hq // hk, dim=-3)
        if hv != hq:
            value = value.repeat_interleave(hq // hv, dim=-3)
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    common_device(query, key, value, attn_mask)
    sc = 1.0 / math.sqrt(query.shape[-1]) if scale is None else float(scale)
    npdt = qdt.np
    mask_arr = None
    if attn_mask is not None:
        check_tensor(attn_mask, "attn_mask", "scaled_dot_product_attention")
        if attn_mask.dtype is dt.bool and attn_mask._device.type != "cpu":
            mask_arr = attn_mask._data  # the CUDA kernel reads a boolean mask itself (no host work)
        elif attn_mask.dtype is dt.bool:
            mask_arr = np.where(attn_mask._data, npdt.type(0), npdt.type(-np.inf)).astype(npdt, copy=False)
        elif attn_mask.dtype.is_floating_point:
            mask_arr = attn_mask._data
        else:
            raise RuntimeError(f"scaled_dot_product_attention(): attn_mask must be bool or floating, got "
                               f"{attn_mask.dtype}")
        nl, ns = query.shape[-2], key.shape[-2]
        mshape = attn_mask.shape
        if (len(mshape) >= 1 and mshape[-1] not in (1, ns)) or (len(mshape) >= 2 and mshape[-2] not in (1, nl)):
            raise RuntimeError(f"scaled_dot_product_attention(): attn_mask of shape {list(mshape)} does not "
                               f"broadcast to the scores' shape [..., {nl}, {ns}]")
    dev = query._device
    drop = None
    if dropout_p > 0:
        bshape = np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2])
        drop = _dropout_factors(tuple(bshape) + (query.shape[-2], key.shape[-2]), dropout_p, npdt)
        if dev.type != "cpu":
            from flambeau._backends import backend

            drop = backend(dev.type).from_numpy(drop, dev)
    out_arr, attn = SDPA.kernel(dev.type)(query._data, key._data, value._data, mask_arr, drop, bool(is_causal), sc)
    out = _wrap(out_arr, dev)
    if grad_state.enabled and (query._requires_grad or key._requires_grad or value._requires_grad
                               or (attn_mask is not None and attn_mask._requires_grad)):
        record(SDPA, (query, key, value, attn_mask, dropout_p, bool(is_causal)),
               {"scale": sc, "enable_gqa": enable_gqa, "attn": _wrap(attn, dev),
                "dropout_mask": None if drop is None else _wrap(drop, dev)}, out)
    return out


def _check_backward(grad, query, key, value, attn, dropout_mask) -> None:
    """The backward's arguments must be those of a forward (autograd hands it the saved tensors, which a
    ``.data`` assignment may have changed since): the softmax-backward kernel runs over ``attn``'s rows."""
    op = "_scaled_dot_product_attention_backward"
    names = ("grad", "query", "key", "value", "attn")
    tensors = (grad, query, key, value, attn) + (() if dropout_mask is None else (dropout_mask,))
    for t, name in zip(tensors, names + ("dropout_mask",)):
        check_tensor(t, name, op)
        if t.ndim < 2 or t.dtype is not query.dtype:
            raise RuntimeError(f"{op}(): expected {name} of at least 2 dimensions and dtype {query.dtype}, got "
                               f"{list(t.shape)} and {t.dtype}")
    nl, e, ns, ev = query.shape[-2], query.shape[-1], key.shape[-2], value.shape[-1]
    for t, name, last in ((key, "key", (ns, e)), (value, "value", (ns, ev)), (grad, "grad", (nl, ev)),
                          (attn, "attn", (nl, ns))):
        if tuple(t.shape[-2:]) != last:
            raise RuntimeError(f"{op}(): expected {name} of shape [..., {last[0]}, {last[1]}] (query [..., {nl}, "
                               f"{e}], key [..., {ns}, {e}], value [..., {ns}, {ev}]), got {list(t.shape)}")
    if dropout_mask is not None and tuple(dropout_mask.shape) != tuple(attn.shape):
        raise RuntimeError(f"{op}(): expected dropout_mask of attn's shape {list(attn.shape)}, got "
                           f"{list(dropout_mask.shape)}")
    common_device(*tensors)


@SDPA_BACKWARD.front
def _scaled_dot_product_attention_backward(grad: Tensor, query: Tensor, key: Tensor, value: Tensor, attn: Tensor,
                                           dropout_mask, scale: float):
    """Gradients of :func:`scaled_dot_product_attention` from its saved attention weights.

    Args:
        grad: gradient of the output ``(..., L, Ev)``.
        query, key, value: the forward's inputs (after the GQA repeat).
        attn: the saved softmax weights ``(..., L, S)`` (before dropout).
        dropout_mask: the dropout factors applied to ``attn``, or None.
        scale: the scale the forward used.

    Returns:
        ``(grad_query, grad_key, grad_value, grad_scores)``; ``grad_scores`` has the broadcast
        batch shape and is the gradient of an additive mask.
    """
    _check_backward(grad, query, key, value, attn, dropout_mask)
    dev = grad._device
    res = SDPA_BACKWARD.kernel(dev.type)(grad._data, query._data, key._data, value._data, attn._data,
                                         None if dropout_mask is None else dropout_mask._data, float(scale))
    return tuple(_wrap(r, dev) for r in res)


# --- sample inputs (Note [Sample inputs] in _registry) -------------------------------------------------
_KEEP = np.array([[True, False, True, True, False], [False, False, True, False, False],
                  [True, True, True, True, True]])  # a boolean mask with a key kept in every row


def _sdpa_samples(device, dtype, requires_grad):
    from functools import partial

    import flambeau as fl
    from flambeau._ops._samples import SampleInput as S
    from flambeau._ops._samples import make_tensor

    mk = partial(make_tensor, device=device, dtype=dtype, requires_grad=requires_grad, low=-2, high=2)
    yield S(mk((2, 3, 4)), mk((2, 5, 4)), mk((2, 5, 3))).named("plain")
    yield S(mk((2, 3, 4)), mk((2, 5, 4)), mk((2, 5, 3)), is_causal=True).named("causal")
    yield S(mk((2, 3, 4)), mk((2, 5, 4)), mk((2, 5, 3)), fl.tensor(_KEEP, device=device)).named("bool mask")
    yield S(mk((1, 3, 2)), mk((2, 1, 5, 2)), mk((2, 1, 5, 3)), mk((2, 1, 3, 5)), scale=0.5).named("float mask")
    yield S(mk((2, 4, 3), noncontiguous=True), mk((2, 5, 3)), mk((2, 5, 2))).named("noncontiguous")


def _sdpa_backward_samples(device, dtype, requires_grad):
    from functools import partial

    import flambeau as fl
    from flambeau._ops._samples import SampleInput as S
    from flambeau._ops._samples import make_tensor

    mk = partial(make_tensor, device=device, dtype=dtype, low=-2, high=2)
    for name, drop in (("plain", None), ("dropout", np.array([[0.0, 2.0, 2.0, 0.0, 2.0]] * 3))):
        q, k, v, g = mk((2, 3, 4)), mk((2, 5, 4)), mk((2, 5, 3)), mk((2, 3, 3))
        s = q.numpy().astype(np.float64) @ np.swapaxes(k.numpy(), -1, -2) * 0.5
        e = np.exp(s - s.max(-1, keepdims=True))
        attn = fl.tensor(e / e.sum(-1, keepdims=True), dtype=dtype, device=device)
        d = None if drop is None else fl.tensor(np.broadcast_to(drop, (2, 3, 5)).copy(), dtype=dtype, device=device)
        yield S(g, q, k, v, attn, d, 0.5).named(name)


SDPA.samples(_sdpa_samples, dtypes=("float32", "float64"), ref="nn.functional.scaled_dot_product_attention")
SDPA_BACKWARD.samples(_sdpa_backward_samples, dtypes=("float32", "float64"), ref=None)
