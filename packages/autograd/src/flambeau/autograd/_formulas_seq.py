"""Derivatives of the seq operators: attention, recurrent cells and layers, resampling.

See _formulas.py for the convention. Attention and the recurrent operators compute the gradients
of all their inputs in one backward operator call (``_scaled_dot_product_attention_backward``,
``_lstm_layer_backward`` ...) from the values the forward saved (attention weights, gate
activations): it is their derivatives' ``joint``, which the node runs once per backward pass for
every input whose gradient is wanted (Note [Shared backward calls]). With ``create_graph=True``
attention is differentiated through a composite of flambeau operators (the softmax recomputed, so
that second derivatives are right); the recurrent backward operators are not differentiable and raise instead.
"""

from __future__ import annotations

import flambeau as fl
from flambeau.autograd._opnode import Derivative as D

__all__ = ["TABLE"]

_INF = float("inf")


def _table(names, compute, save, outputs: int = 0):
    """The derivative whose gradients all come from ``compute(g, s, need) -> {name: grad}``, one call per node (Note
    [Shared backward calls]): it has no per-input formulas."""
    return D(dict.fromkeys(names), save=save, outputs=outputs, joint=compute)


def _no_double(opname):
    if fl.is_grad_enabled():
        raise RuntimeError(f"double backward through {opname} is not supported")


# --- attention ----------------------------------------------------------------------------------------
def _sdpa_composite(g, s):
    """The gradients written with flambeau operators (softmax recomputed): differentiable again."""
    q, k, v, scale = s.query, s.key, s.value, s.scale
    scores = (q @ k.mT) * scale
    mask = s.get("attn_mask")
    if mask is not None:
        scores = scores.masked_fill(mask.logical_not(), -_INF) if mask.dtype is fl.bool else scores + mask
    if s.is_causal:
        n_l, n_s = scores.shape[-2:]
        scores = scores.masked_fill(fl.ones(n_l, n_s, dtype=fl.bool, device=scores.device).tril().logical_not(), -_INF)
    dead = scores.amax(-1, keepdim=True) == -_INF
    attn = fl.softmax(scores.masked_fill(dead, 0.0), -1).masked_fill(dead, 0.0)
    drop = s.get("dropout_mask")
    p = attn if drop is None else attn * drop
    dp = g @ v.mT
    if drop is not None:
        dp = dp * drop
    ds = attn * (dp - (dp * attn).sum(-1, keepdim=True))
    return (ds @ k) * scale, (ds.mT @ q) * scale, p.mT @ g, ds


def _sdpa_grads(g, s, need):
    if fl.is_grad_enabled():
        gq, gk, gv, ds = _sdpa_composite(g, s)
    else:
        gq, gk, gv, ds = fl._scaled_dot_product_attention_backward(g, s.query, s.key, s.value, s.attn,
                                                                   s.get("dropout_mask"), s.scale)
    return {n: r for n, r in zip(("query", "key", "value", "attn_mask"), (gq, gk, gv, ds)) if n in need}


# --- recurrent -----------------------------------------------------------------------------------------
def _pick(need, names, res):
    return {n: r for n, r in zip(names, res) if n in need and r is not None}


def _has_bias(s):
    return s.get("b_ih_shape") is not None


def _lstm_layer_grads(g, s, need):
    _no_double("_lstm_layer")
    go, gh, gc = g
    res = fl._lstm_layer_backward(go, gh, gc, s.input, s.h0, s.c0, s.w_ih, s.w_hh, s.result0, s.gates, s.cells,
                                  s.tanh_cells, s.reverse, _has_bias(s))
    return _pick(need, ("input", "h0", "c0", "w_ih", "w_hh", "b_ih", "b_hh"), res)


def _gru_layer_grads(g, s, need):
    _no_double("_gru_layer")
    go, gh = g
    res = fl._gru_layer_backward(go, gh, s.input, s.h0, s.w_ih, s.w_hh, s.result0, s.gates, s.reverse,
                                 _has_bias(s))
    return _pick(need, ("input", "h0", "w_ih", "w_hh", "b_ih", "b_hh"), res)


def _rnn_layer_grads(g, s, need):
    _no_double("_rnn_layer")
    go, gh = g
    res = fl._rnn_layer_backward(go, gh, s.input, s.h0, s.w_ih, s.w_hh, s.result0, s.get("nonlinearity", "tanh"),
                                 s.reverse, _has_bias(s))
    return _pick(need, ("input", "h0", "w_ih", "w_hh", "b_ih", "b_hh"), res)


def _cell_input(s):
    x = s.input
    return x.reshape(1, 1, -1) if x.dim() == 1 else x.unsqueeze(0)


def _as_state(h):
    return h.reshape(1, -1) if h.dim() == 1 else h


def _lstm_cell_grads(g, s, need):
    _no_double("lstm_cell")
    gh, gc = g
    h, c = s.hx
    out = s.output
    res = fl._lstm_layer_backward(fl.zeros_like(out), _as_state(gh), _as_state(gc), _cell_input(s),
                                  _as_state(h), _as_state(c), s.w_ih, s.w_hh, out, s.gates, s.cells, s.tanh_cells,
                                  False, _has_bias(s))
    gx, gh0, gc0 = res[0].reshape(s.input_shape), res[1].reshape(h.shape), res[2].reshape(c.shape)
    grads = _pick(need, ("input", "w_ih", "w_hh", "b_ih", "b_hh"), (gx,) + tuple(res[3:]))
    if "hx" in need:
        grads["hx"] = [gh0, gc0]
    return grads


def _gru_cell_grads(g, s, need):
    _no_double("gru_cell")
    out = s.output
    res = fl._gru_layer_backward(fl.zeros_like(out), _as_state(g), _cell_input(s), _as_state(s.hx),
                                 s.w_ih, s.w_hh, out, s.gates, False, _has_bias(s))
    res = (res[0].reshape(s.input_shape), res[1].reshape(s.hx_shape)) + tuple(res[2:])
    return _pick(need, ("input", "hx", "w_ih", "w_hh", "b_ih", "b_hh"), res)


def _rnn_cell_grads(nonlinearity):
    def compute(g, s, need):
        _no_double(f"rnn_{nonlinearity}_cell")
        out = s.output
        res = fl._rnn_layer_backward(fl.zeros_like(out), _as_state(g), _cell_input(s),
                                     _as_state(s.hx), s.w_ih, s.w_hh, out, nonlinearity, False, _has_bias(s))
        res = (res[0].reshape(s.input_shape), res[1].reshape(s.hx_shape)) + tuple(res[2:])
        return _pick(need, ("input", "hx", "w_ih", "w_hh", "b_ih", "b_hh"), res)

    return compute


# --- resampling ------------------------------------------------------------------------------------------
def _sc(s, n):
    return (s.get("scales"),) if n == 1 else (s.get("scales_h"), s.get("scales_w"))


def _resample_pair(name, n, align):
    fwd, bwd = getattr(fl, name), getattr(fl, name + "_backward")

    def forward_grad(g, s):
        extra = (s.align_corners,) if align else ()
        return bwd(g, s.output_size, s.input_shape, *extra, *_sc(s, n))

    def backward_grad(g, s):
        extra = (s.align_corners,) if align else ()
        return fwd(g, s.output_size, *extra, *_sc(s, n))

    return {name: D({"input": forward_grad}), name + "_backward": D({"grad_output": backward_grad})}


_W = ("w_ih", "w_hh", "b_ih", "b_hh")

TABLE: dict[str, D] = {
    "scaled_dot_product_attention": _table(("query", "key", "value", "attn_mask"), _sdpa_grads,
                                           ("query", "key", "value", "attn_mask")),
    "_lstm_layer": _table(("input", "h0", "c0") + _W, _lstm_layer_grads,
                          ("input", "h0", "c0", "w_ih", "w_hh", "result0"), 3),
    "_gru_layer": _table(("input", "h0") + _W, _gru_layer_grads, ("input", "h0", "w_ih", "w_hh", "result0"), 2),
    "_rnn_layer": _table(("input", "h0") + _W, _rnn_layer_grads, ("input", "h0", "w_ih", "w_hh", "result0"), 2),
    "lstm_cell": _table(("input", "hx") + _W, _lstm_cell_grads, ("input", "hx", "w_ih", "w_hh"), 2),
    "gru_cell": _table(("input", "hx") + _W, _gru_cell_grads, ("input", "hx", "w_ih", "w_hh")),
    "rnn_tanh_cell": _table(("input", "hx") + _W, _rnn_cell_grads("tanh"), ("input", "hx", "w_ih", "w_hh")),
    "rnn_relu_cell": _table(("input", "hx") + _W, _rnn_cell_grads("relu"), ("input", "hx", "w_ih", "w_hh")),
}

for _name, _n, _align in (("upsample_nearest1d", 1, False), ("upsample_nearest2d", 2, False),
                          ("upsample_linear1d", 1, True), ("upsample_bilinear2d", 2, True)):
    TABLE.update(_resample_pair(_name, _n, _align))


# --- grid sampling: both gradients from one backward operator call -------------------------------------
def _grid_sampler_grads(opname):
    backward = getattr(fl, opname + "_backward")

    def compute(g, s, need):
        _no_double(opname)
        res = backward(g, s.input, s.grid, s.interpolation_mode, s.padding_mode, s.align_corners)
        return _pick(need, ("input", "grid"), res)

    return compute


for _name in ("grid_sampler_2d", "grid_sampler_3d"):
    TABLE[_name] = _table(("input", "grid"), _grid_sampler_grads(_name), ("input", "grid"))
