"""Recurrent cells (lstm_cell, gru_cell, rnn_tanh_cell, rnn_relu_cell) and whole-sequence layers.

torch's gate order and formulas: LSTM gates ``i, f, g, o`` (``c' = f * c + i * g``,
``h' = o * tanh(c')``); GRU gates ``r, z, n`` with ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``
and ``h' = (1 - z) * n + z * h``; Elman cells ``h' = tanh|relu(W_ih x + b_ih + W_hh h + b_hh)``.

``_lstm_layer`` / ``_gru_layer`` / ``_rnn_layer`` run a whole sequence in one operator, so that
``flambeau.nn.LSTM`` records one autograd node per layer and direction instead of one per step; the
gate activations are saved for the backward, never recomputed. A cell is a one-step layer (its
kernel is the layer's). The CPU kernels (BLAS GEMMs and one fused numba pass per step) are in
``flambeau/_kernels/cpu/rnn.py``.

Kernel convention (every device; arrays in, arrays out), ``x (T, B, I)``, ``h0``/``c0 (B, H)``:
    _lstm_layer: ``kernel(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse) -> (out, h_n, c_n, gates,
        cells, tanh_cells)``; ``gates (T, B, 4H)`` the activated i, f, g, o, ``cells`` every c_t.
    _lstm_layer_backward: ``kernel(g_out, g_h, g_c, x, h0, c0, w_ih, w_hh, out, gates, cells,
        tanh_cells, reverse, has_bias) -> (g_x, g_h0, g_c0, g_w_ih, g_w_hh, g_b_ih, g_b_hh)``.
    _gru_layer: ``kernel(x, h0, w_ih, w_hh, b_ih, b_hh, reverse) -> (out, h_n, gates)``;
        ``gates (T, B, 4H)``: r, z, n and ``W_hn h + b_hn``.
    _gru_layer_backward: ``kernel(g_out, g_h, x, h0, w_ih, w_hh, out, gates, reverse, has_bias)``.
    _rnn_layer: ``kernel(x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity, reverse) -> (out, h_n)``.
    _rnn_layer_backward: ``kernel(g_out, g_h, x, h0, w_ih, w_hh, out, nonlinearity, reverse, has_bias)``.
Gradients of absent biases come back as None.

Autograd recording: the layers and cells record their tensor arguments positionally and the saved
workspace (``gates``, ``cells``, ``tanh_cells``) as attrs. Their derivatives run the backward
operators above, which are not differentiable: double backward raises a RuntimeError.
"""

from __future__ import annotations

import numpy as np

from flambeau import _dtype as dt
from flambeau._ops._common import Tensor, _wrap, check_tensor, common_device, grad_state, record, wrap_optional
from flambeau._ops._registry import declare

__all__ = ["lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell"]


_W = "Tensor w_ih, Tensor w_hh, Tensor? b_ih=None, Tensor? b_hh=None"
LSTM_LAYER = declare(f"_lstm_layer(Tensor input, Tensor h0, Tensor c0, {_W}, bool reverse=False) "
                     "-> (Tensor, Tensor, Tensor)", category="recurrent", method=False)
LSTM_LAYER_BACKWARD = declare(
    "_lstm_layer_backward(Tensor grad_output, Tensor grad_h, Tensor grad_c, Tensor input, Tensor h0, Tensor c0, "
    "Tensor w_ih, Tensor w_hh, Tensor output, Tensor gates, Tensor cells, Tensor tanh_cells, bool reverse, "
    "bool has_bias) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    category="recurrent", method=False, differentiable=False)
GRU_LAYER = declare(f"_gru_layer(Tensor input, Tensor h0, {_W}, bool reverse=False) -> (Tensor, Tensor)",
                    category="recurrent", method=False)
GRU_LAYER_BACKWARD = declare(
    "_gru_layer_backward(Tensor grad_output, Tensor grad_h, Tensor input, Tensor h0, Tensor w_ih, Tensor w_hh, "
    "Tensor output, Tensor gates, bool reverse, bool has_bias) -> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    category="recurrent", method=False, differentiable=False)
RNN_LAYER = declare(f"_rnn_layer(Tensor input, Tensor h0, {_W}, str nonlinearity='tanh', bool reverse=False) "
                    "-> (Tensor, Tensor)", category="recurrent", method=False)
RNN_LAYER_BACKWARD = declare(
    "_rnn_layer_backward(Tensor grad_output, Tensor grad_h, Tensor input, Tensor h0, Tensor w_ih, Tensor w_hh, "
    "Tensor output, str nonlinearity, bool reverse, bool has_bias) "
    "-> (Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)",
    category="recurrent", method=False, differentiable=False)
LSTM_CELL = declare(f"lstm_cell(Tensor input, Tensor[] hx, {_W}) -> (Tensor, Tensor)", category="recurrent",
                    method=False)
GRU_CELL = declare(f"gru_cell(Tensor input, Tensor hx, {_W}) -> Tensor", category="recurrent", method=False)
RNN_TANH_CELL = declare(f"rnn_tanh_cell(Tensor input, Tensor hx, {_W}) -> Tensor", category="recurrent",
                        method=False)
RNN_RELU_CELL = declare(f"rnn_relu_cell(Tensor input, Tensor hx, {_W}) -> Tensor", category="recurrent",
                        method=False)


# --- validation --------------------------------------------------------------------------------------
def _check_weights(name, dtype, batch, in_features, hs, w_ih, w_hh, b_ih, b_hh, gates):
    check_tensor(w_ih, "w_ih", name)
    check_tensor(w_hh, "w_hh", name)
    if not dtype.is_floating_point:
        raise RuntimeError(f"{name}(): expected a floating input, got {dtype}")
    if dtype.np not in (np.float32, np.float64) and dtype is not dt.bfloat16:  # bfloat16 computes in float32
        raise RuntimeError(f"{name}(): {dtype} is not supported (float32, float64 and bfloat16 are)")
    nh = w_hh.shape[-1] if w_hh.ndim == 2 else -1
    if w_ih.ndim != 2 or w_hh.ndim != 2 or w_hh.shape[0] != gates * nh or w_ih.shape[0] != gates * nh:
        raise RuntimeError(f"{name}(): expected w_ih of shape [{gates} * hidden_size, input_size] and w_hh of "
                           f"shape [{gates} * hidden_size, hidden_size], got {list(w_ih.shape)} and "
                           f"{list(w_hh.shape)}")
    if in_features != w_ih.shape[1]:
        raise RuntimeError(f"{name}(): input has inconsistent input_size: got {in_features} expected "
                           f"{w_ih.shape[1]}")
    for b, bn in ((b_ih, "b_ih"), (b_hh, "b_hh")):
        if b is not None:
            check_tensor(b, bn, name)
            if tuple(b.shape) != (gates * nh,):
                raise RuntimeError(f"{name}(): expected {bn} of shape [{gates * nh}], got {list(b.shape)}")
    for t in (w_ih, w_hh, b_ih, b_hh, *hs):
        if t is not None and t.dtype is not dtype:
            raise RuntimeError(f"{name}(): expected all tensors to have dtype {dtype}, got {t.dtype}")
    for h, hn in zip(hs, ("hx", "cx")):
        if tuple(h.shape) != tuple(batch) + (nh,):
            raise RuntimeError(f"{name}(): expected {hn} of shape {list(batch) + [nh]}, got {list(h.shape)}")
    common_device(w_ih, w_hh, b_ih, b_hh, *hs)
    return nh


def _any_grad(*ts):
    return grad_state.enabled and any(t is not None and t._requires_grad for t in ts)


def _d(t):
    return None if t is None else t._data


# --- layers ------------------------------------------------------------------------------------------
def _check_layer(name, input, hs, w_ih, w_hh, b_ih, b_hh, gates):
    check_tensor(input, "input", name)
    if input.ndim != 3:
        raise RuntimeError(f"{name}(): expected a 3-D input (seq, batch, feature), got {input.ndim}-D")
    for h in hs:
        check_tensor(h, "h0", name)
    if (b_ih is None) != (b_hh is None):
        raise RuntimeError(f"{name}(): b_ih and b_hh must both be given or both be None")
    _check_weights(name, input.dtype, input.shape[1:2], input.shape[2], hs, w_ih, w_hh, b_ih, b_hh, gates)
    common_device(input, w_ih)


@LSTM_LAYER.front
def _lstm_layer(input: Tensor, h0: Tensor, c0: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None,
                reverse: bool = False):
    """One LSTM layer over a whole sequence (one direction), as ``flambeau.nn.LSTM`` runs it.

    Args:
        input: ``(T, B, input_size)``.
        h0, c0: ``(B, hidden_size)`` initial states.
        w_ih: ``(4 * hidden_size, input_size)``; w_hh: ``(4 * hidden_size, hidden_size)``;
            b_ih, b_hh: ``(4 * hidden_size,)`` or both None. Gate order i, f, g, o.
        reverse: run the sequence from its last step to its first.

    Returns:
        ``(output (T, B, hidden_size), h_n, c_n)``.
    """
    _check_layer("_lstm_layer", input, (h0, c0), w_ih, w_hh, b_ih, b_hh, 4)
    dev = input._device
    res = LSTM_LAYER.kernel(dev.type)(input._data, h0._data, c0._data, w_ih._data, w_hh._data, _d(b_ih), _d(b_hh),
                                      bool(reverse))
    out = tuple(_wrap(r, dev) for r in res[:3])
    if _any_grad(input, h0, c0, w_ih, w_hh, b_ih, b_hh):
        record(LSTM_LAYER, (input, h0, c0, w_ih, w_hh, b_ih, b_hh, bool(reverse)),
               {"gates": _wrap(res[3], dev), "cells": _wrap(res[4], dev), "tanh_cells": _wrap(res[5], dev)}, out)
    return out


@GRU_LAYER.front
def _gru_layer(input: Tensor, h0: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None, reverse: bool = False):
    """One GRU layer over a whole sequence (one direction), as ``flambeau.nn.GRU`` runs it.

    Args:
        input: ``(T, B, input_size)``; h0: ``(B, hidden_size)``.
        w_ih: ``(3 * hidden_size, input_size)``; w_hh: ``(3 * hidden_size, hidden_size)``;
            b_ih, b_hh: ``(3 * hidden_size,)`` or both None. Gate order r, z, n.
        reverse: run the sequence from its last step to its first.

    Returns:
        ``(output (T, B, hidden_size), h_n)``.
    """
    _check_layer("_gru_layer", input, (h0,), w_ih, w_hh, b_ih, b_hh, 3)
    dev = input._device
    res = GRU_LAYER.kernel(dev.type)(input._data, h0._data, w_ih._data, w_hh._data, _d(b_ih), _d(b_hh),
                                     bool(reverse))
    out = (_wrap(res[0], dev), _wrap(res[1], dev))
    if _any_grad(input, h0, w_ih, w_hh, b_ih, b_hh):
        record(GRU_LAYER, (input, h0, w_ih, w_hh, b_ih, b_hh, bool(reverse)), {"gates": _wrap(res[2], dev)}, out)
    return out


def _check_nonlinearity(nonlinearity):
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")


@RNN_LAYER.front
def _rnn_layer(input: Tensor, h0: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None,
               nonlinearity: str = "tanh", reverse: bool = False):
    """One Elman RNN layer over a whole sequence (one direction), as ``flambeau.nn.RNN`` runs it.

    Args:
        input: ``(T, B, input_size)``; h0: ``(B, hidden_size)``.
        w_ih: ``(hidden_size, input_size)``; w_hh: ``(hidden_size, hidden_size)``;
            b_ih, b_hh: ``(hidden_size,)`` or both None.
        nonlinearity: ``'tanh'`` or ``'relu'``.
        reverse: run the sequence from its last step to its first.

    Returns:
        ``(output (T, B, hidden_size), h_n)``.
    """
    _check_nonlinearity(nonlinearity)
    _check_layer("_rnn_layer", input, (h0,), w_ih, w_hh, b_ih, b_hh, 1)
    dev = input._device
    res = RNN_LAYER.kernel(dev.type)(input._data, h0._data, w_ih._data, w_hh._data, _d(b_ih), _d(b_hh),
                                     nonlinearity, bool(reverse))
    out = (_wrap(res[0], dev), _wrap(res[1], dev))
    if _any_grad(input, h0, w_ih, w_hh, b_ih, b_hh):
        record(RNN_LAYER, (input, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity, bool(reverse)), {}, out)
    return out


# The tensor arguments of the backward operators, in signature order, and their shapes in terms of
# T, B, I, H (``G`` stands for gates * H): Note [Recurrent backward checks].
_BACKWARD_SHAPES = {
    "_lstm_layer_backward": (4, (("grad_output", "TBH"), ("grad_h", "BH"), ("grad_c", "BH"), ("input", "TBI"),
                                 ("h0", "BH"), ("c0", "BH"), ("w_ih", "GI"), ("w_hh", "GH"), ("output", "TBH"),
                                 ("gates", "TBG"), ("cells", "TBH"), ("tanh_cells", "TBH"))),
    "_gru_layer_backward": (3, (("grad_output", "TBH"), ("grad_h", "BH"), ("input", "TBI"), ("h0", "BH"),
                                ("w_ih", "GI"), ("w_hh", "GH"), ("output", "TBH"), ("gates", "TBF"))),
    "_rnn_layer_backward": (1, (("grad_output", "TBH"), ("grad_h", "BH"), ("input", "TBI"), ("h0", "BH"),
                                ("w_ih", "GI"), ("w_hh", "GH"), ("output", "TBH"))),
}


def _check_backward(name: str, args: tuple) -> None:
    """Note [Recurrent backward checks]: the fused step kernels index the saved workspace and states by
    the sizes of ``output`` and ``input``, with no bounds checks, and autograd hands them the saved
    tensors (which a ``.data`` assignment may have changed since the forward): every tensor argument
    must have its shape in terms of ``T, B, I, H`` (GRU's ``gates`` hold four blocks of ``H``), and
    ``input``'s dtype and device."""
    gates, spec = _BACKWARD_SHAPES[name]
    tensors = args[:len(spec)]
    for t, (argname, _) in zip(tensors, spec):
        check_tensor(t, argname, name)
    x, out = tensors[[n for n, _ in spec].index("input")], tensors[[n for n, _ in spec].index("output")]
    if x.ndim != 3 or out.ndim != 3:
        raise RuntimeError(f"{name}(): expected 3-D input and output (seq, batch, feature), got "
                           f"{list(x.shape)} and {list(out.shape)}")
    sizes = {"T": x.shape[0], "B": x.shape[1], "I": x.shape[2], "H": out.shape[2]}
    sizes["G"], sizes["F"] = gates * sizes["H"], 4 * sizes["H"]
    for t, (argname, dims) in zip(tensors, spec):
        expected = tuple(sizes[d] for d in dims)
        if tuple(t.shape) != expected or t.dtype is not x.dtype:
            raise RuntimeError(f"{name}(): expected {argname} of shape {list(expected)} and dtype {x.dtype} "
                               f"(T, B, I, H = {sizes['T']}, {sizes['B']}, {sizes['I']}, {sizes['H']}), got "
                               f"{list(t.shape)} and {t.dtype}")
    common_device(*tensors)


def _backward_front(op, n_grads):
    def fn(*args):
        _check_backward(op.name, args)
        dev = args[0]._device
        arrays = tuple(a._data if isinstance(a, Tensor) else a for a in args)
        return wrap_optional(op.kernel(dev.type)(*arrays), dev)

    fn.__doc__ = f"""Gradients of ``{op.name[:-9]}`` from its saved workspace ({n_grads} results).

    Not differentiable (double backward through the recurrent layers is not supported). The
    arguments are those of the signature: output gradients (zeros where an output got none), the
    forward's inputs, its output and workspace; gradients of absent biases are None.
    """
    op.front(fn)
    return fn


_lstm_layer_backward = _backward_front(LSTM_LAYER_BACKWARD, 7)
_gru_layer_backward = _backward_front(GRU_LAYER_BACKWARD, 6)
_rnn_layer_backward = _backward_front(RNN_LAYER_BACKWARD, 6)


# --- cells -------------------------------------------------------------------------------------------
def _cell_args(name, input, hs, w_ih, w_hh, b_ih, b_hh, gates):
    check_tensor(input, "input", name)
    for h in hs:
        check_tensor(h, "hx", name)
    if input.ndim not in (1, 2):
        raise RuntimeError(f"{name}(): Expected input to be 1D or 2D, got {input.ndim}D instead")
    if (b_ih is None) != (b_hh is None):
        raise RuntimeError(f"{name}(): b_ih and b_hh must both be given or both be None")
    _check_weights(name, input.dtype, input.shape[:-1], input.shape[-1], hs, w_ih, w_hh, b_ih, b_hh, gates)
    common_device(input, w_ih)
    x = _lead(input._data, 3 - input.ndim, input)
    return x, tuple(h._data if h.ndim == 2 else _lead(h._data, 1, h) for h in hs)


def _lead(a, k: int, t: Tensor):
    """Array ``a`` (the data of ``t``) with ``k`` leading dimensions of size 1, a view on any device (a
    numba device array takes no ``None`` index)."""
    if isinstance(a, np.ndarray):
        return a[(None,) * k]
    from flambeau._backends import backend

    be = backend(t._device.type)
    item = a.dtype.itemsize
    return be.as_strided(be.flat_view(a), (1,) * k + tuple(a.shape), (0,) * k + tuple(s // item for s in a.strides), 0)


@LSTM_CELL.front
def lstm_cell(input: Tensor, hx, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None):
    """One LSTM step: ``(h', c')`` from ``input`` and ``hx = (h, c)`` (torch's gate order i, f, g, o).

    Args:
        input: ``(B, input_size)`` or unbatched ``(input_size,)``.
        hx: a pair ``(h, c)`` of ``(B, hidden_size)`` (or ``(hidden_size,)``) tensors.
        w_ih: ``(4 * hidden_size, input_size)``; w_hh: ``(4 * hidden_size, hidden_size)``.
        b_ih, b_hh: ``(4 * hidden_size,)`` biases, or both None.

    Returns:
        ``(h', c')`` of the shape of ``h``.
    """
    if not isinstance(hx, (tuple, list)) or len(hx) != 2:
        raise RuntimeError("lstm_cell(): hx must be a pair (h, c) of tensors")
    h, c = hx
    x, (h0, c0) = _cell_args("lstm_cell", input, (h, c), w_ih, w_hh, b_ih, b_hh, 4)
    dev = input._device
    res = LSTM_CELL.kernel(dev.type)(x, h0, c0, w_ih._data, w_hh._data, _d(b_ih), _d(b_hh), False)
    shape = h.shape
    out = (_wrap(res[1].reshape(shape), dev), _wrap(res[2].reshape(shape), dev))
    if _any_grad(input, h, c, w_ih, w_hh, b_ih, b_hh):
        record(LSTM_CELL, (input, (h, c), w_ih, w_hh, b_ih, b_hh),
               {"gates": _wrap(res[3], dev), "cells": _wrap(res[4], dev), "tanh_cells": _wrap(res[5], dev),
                "output": _wrap(res[0], dev)}, out)
    return out


@GRU_CELL.front
def gru_cell(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None) -> Tensor:
    """One GRU step (torch's gates r, z, n; ``n = tanh(W_in x + b_in + r * (W_hn h + b_hn))``).

    Args:
        input: ``(B, input_size)`` or unbatched ``(input_size,)``.
        hx: ``(B, hidden_size)`` (or ``(hidden_size,)``) hidden state.
        w_ih: ``(3 * hidden_size, input_size)``; w_hh: ``(3 * hidden_size, hidden_size)``.
        b_ih, b_hh: ``(3 * hidden_size,)`` biases, or both None.

    Returns:
        ``h' = (1 - z) * n + z * h``, of the shape of ``hx``.
    """
    x, (h0,) = _cell_args("gru_cell", input, (hx,), w_ih, w_hh, b_ih, b_hh, 3)
    dev = input._device
    res = GRU_CELL.kernel(dev.type)(x, h0, w_ih._data, w_hh._data, _d(b_ih), _d(b_hh), False)
    out = _wrap(res[1].reshape(hx.shape), dev)
    if _any_grad(input, hx, w_ih, w_hh, b_ih, b_hh):
        record(GRU_CELL, (input, hx, w_ih, w_hh, b_ih, b_hh),
               {"gates": _wrap(res[2], dev), "output": _wrap(res[0], dev)}, out)
    return out


def _rnn_cell(op, nonlinearity):
    def fn(input: Tensor, hx: Tensor, w_ih: Tensor, w_hh: Tensor, b_ih=None, b_hh=None) -> Tensor:
        x, (h0,) = _cell_args(op.name, input, (hx,), w_ih, w_hh, b_ih, b_hh, 1)
        dev = input._device
        res = op.kernel(dev.type)(x, h0, w_ih._data, w_hh._data, _d(b_ih), _d(b_hh), nonlinearity, False)
        out = _wrap(res[1].reshape(hx.shape), dev)
        if _any_grad(input, hx, w_ih, w_hh, b_ih, b_hh):
            record(op, (input, hx, w_ih, w_hh, b_ih, b_hh), {"output": _wrap(res[0], dev)}, out)
        return out

    fn.__doc__ = f"""One Elman RNN step: ``h' = {nonlinearity}(input @ w_ih.T + b_ih + hx @ w_hh.T + b_hh)``.

    Args:
        input: ``(B, input_size)`` or unbatched ``(input_size,)``.
        hx: ``(B, hidden_size)`` (or ``(hidden_size,)``) hidden state.
        w_ih: ``(hidden_size, input_size)``; w_hh: ``(hidden_size, hidden_size)``.
        b_ih, b_hh: ``(hidden_size,)`` biases, or both None.

    Returns:
        ``h'`` of the shape of ``hx``.
    """
    return op.front(fn)


rnn_tanh_cell = _rnn_cell(RNN_TANH_CELL, "tanh")
rnn_relu_cell = _rnn_cell(RNN_RELU_CELL, "relu")


# --- sample inputs (Note [Sample inputs] in _registry) -------------------------------------------------
def _layer_ref(cell, n_states):
    """A PyTorch reference of a layer operator: ``cell`` (``torch.lstm_cell`` ...) over the sequence."""

    def ref(x, *args, reverse=False):
        import torch

        hs, rest = args[:n_states], args[n_states:]
        steps = range(x.shape[0] - 1, -1, -1) if reverse else range(x.shape[0])
        outs = [None] * x.shape[0]
        state = hs if n_states > 1 else hs[0]
        for t in steps:
            state = getattr(torch, cell)(x[t], state, *rest)
            outs[t] = state[0] if n_states > 1 else state
        return (torch.stack(outs), *state) if n_states > 1 else (torch.stack(outs), state)

    return ref


def _rnn_layer_ref(x, h0, w_ih, w_hh, b_ih=None, b_hh=None, nonlinearity="tanh", reverse=False):
    return _layer_ref(f"rnn_{nonlinearity}_cell", 1)(x, h0, w_ih, w_hh, b_ih, b_hh, reverse=reverse)


_T, _B, _I, _H = 3, 2, 3, 4  # sample sizes: seq, batch, input, hidden


def _weights(mk, gates, bias):
    w = (mk((gates * _H, _I), low=-1, high=1), mk((gates * _H, _H), low=-1, high=1))
    return w + ((mk((gates * _H,), low=-1, high=1), mk((gates * _H,), low=-1, high=1)) if bias else ())


def _layer_samples(gates, n_states, extra=()):
    def samples(device, dtype, requires_grad):
        from functools import partial

        from flambeau._ops._samples import SampleInput as S
        from flambeau._ops._samples import make_tensor

        mk = partial(make_tensor, device=device, dtype=dtype, requires_grad=requires_grad, low=-1, high=1)
        for bias, reverse in ((True, False), (False, True)):
            hs = tuple(mk((_B, _H)) for _ in range(n_states))
            kw = {"reverse": True} if reverse else {}
            args = hs + _weights(mk, gates, bias) + ((None, None) if not bias else ())
            for e in extra or (None,):
                yield S(mk((_T, _B, _I)), *args, *(() if e is None else (e,)), **kw).named(
                    f"{'bias' if bias else 'no bias'}{' reverse' if reverse else ''}{'' if e is None else ' ' + e}")

    return samples


def _backward_samples(layer, gates, n_states, extra=None):
    """Samples of a backward operator: the forward (CPU kernel) run on sample inputs for its workspace."""

    def samples(device, dtype, requires_grad):
        from functools import partial

        import flambeau as fl
        from flambeau._ops._samples import SampleInput as S
        from flambeau._ops._samples import make_tensor

        mk = partial(make_tensor, device="cpu", dtype=dtype, low=-1, high=1)
        for bias, reverse in ((True, False), (False, True)):
            x, hs, w = mk((_T, _B, _I)), tuple(mk((_B, _H)) for _ in range(n_states)), _weights(mk, gates, True)
            ws = w if bias else w[:2] + (None, None)
            args = [a.numpy() if a is not None else None for a in (x, *hs, *ws)]
            res = layer.kernel("cpu")(*args, *(() if extra is None else (extra,)), reverse)
            work = [fl.tensor(r, device=device) for r in res]
            grads = [mk((_T, _B, _H)).to(device)] + [mk((_B, _H)).to(device) for _ in range(n_states)]
            saved = [work[0]] + (work[3:] if layer is LSTM_LAYER else work[2:])
            tail = (() if extra is None else (extra,)) + (reverse, bias)
            yield S(*grads, x.to(device), *(h.to(device) for h in hs), w[0].to(device), w[1].to(device), *saved,
                    *tail).named(f"{'bias' if bias else 'no bias'}{' reverse' if reverse else ''}")

    return samples


def _cell_samples(gates, n_states):
    def samples(device, dtype, requires_grad):
        from functools import partial

        from flambeau._ops._samples import SampleInput as S
        from flambeau._ops._samples import make_tensor

        mk = partial(make_tensor, device=device, dtype=dtype, requires_grad=requires_grad, low=-1, high=1)
        for bias in (True, False):
            hs = tuple(mk((_B, _H)) for _ in range(n_states))
            hx = hs if n_states > 1 else hs[0]
            yield S(mk((_B, _I)), hx, *_weights(mk, gates, bias)).named("bias" if bias else "no bias")

    return samples


_FLOAT = ("float32", "float64")
LSTM_LAYER.samples(_layer_samples(4, 2), dtypes=_FLOAT, ref=_layer_ref("lstm_cell", 2))
GRU_LAYER.samples(_layer_samples(3, 1), dtypes=_FLOAT, ref=_layer_ref("gru_cell", 1))
RNN_LAYER.samples(_layer_samples(1, 1, ("tanh", "relu")), dtypes=_FLOAT, ref=_rnn_layer_ref)
LSTM_LAYER_BACKWARD.samples(_backward_samples(LSTM_LAYER, 4, 2), dtypes=_FLOAT, ref=None)
GRU_LAYER_BACKWARD.samples(_backward_samples(GRU_LAYER, 3, 1), dtypes=_FLOAT, ref=None)
RNN_LAYER_BACKWARD.samples(_backward_samples(RNN_LAYER, 1, 1, "tanh"), dtypes=_FLOAT, ref=None)
LSTM_CELL.samples(_cell_samples(4, 2), dtypes=_FLOAT)
GRU_CELL.samples(_cell_samples(3, 1), dtypes=_FLOAT)
RNN_TANH_CELL.samples(_cell_samples(1, 1), dtypes=_FLOAT)
RNN_RELU_CELL.samples(_cell_samples(1, 1), dtypes=_FLOAT)
