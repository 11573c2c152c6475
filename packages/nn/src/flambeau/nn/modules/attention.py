"""Attention layers: :class:`MultiheadAttention` (as ``torch.nn``)."""

from __future__ import annotations

import flambeau as fl
from flambeau import Tensor
from flambeau.nn import init
from flambeau.nn._functional.attention import _canonical_mask, multi_head_attention_forward
from flambeau.nn.modules.linear import Linear
from flambeau.nn.modules.module import Module
from flambeau.nn.parameter import Parameter

__all__ = ["MultiheadAttention"]


class MultiheadAttention(Module):
    """Multi-head attention: ``concat(head_1 ... head_h) W_O`` with ``head_i = attention(Q W_Q_i, K W_K_i, V W_V_i)``.

    Args:
        embed_dim: model dimension ``E``.
        num_heads: heads (``E`` must be divisible by it).
        dropout: dropout on the attention weights (training only).
        bias: whether the input and output projections have biases.
        add_bias_kv: learn ``bias_k``/``bias_v`` appended to the key and value sequences.
        add_zero_attn: append a zero step to the key and value sequences.
        kdim, vdim: key/value feature sizes (default ``E``); when either differs from ``E`` the
            projections are the separate ``q_proj_weight``/``k_proj_weight``/``v_proj_weight``.
        batch_first: inputs and output are ``(N, L, E)`` instead of ``(L, N, E)``.
        device, dtype: of the parameters.

    Parameters are named as torch's (``in_proj_weight``, ``in_proj_bias``, ``out_proj.weight`` ...)
    and initialised as torch's (xavier-uniform projections, zero biases).
    """

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False, device=None, dtype=None) -> None:
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead")
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads = num_heads
        self.dropout = dropout
        self.batch_first = batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        if not self._qkv_same_embed_dim:
            self.q_proj_weight = Parameter(fl.empty((embed_dim, embed_dim), **kw))
            self.k_proj_weight = Parameter(fl.empty((embed_dim, self.kdim), **kw))
            self.v_proj_weight = Parameter(fl.empty((embed_dim, self.vdim), **kw))
            self.register_parameter("in_proj_weight", None)
        else:
            self.in_proj_weight = Parameter(fl.empty((3 * embed_dim, embed_dim), **kw))
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        if bias:
            self.in_proj_bias = Parameter(fl.empty(3 * embed_dim, **kw))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, **kw)
        if add_bias_kv:
            self.bias_k = Parameter(fl.empty((1, 1, embed_dim), **kw))
            self.bias_v = Parameter(fl.empty((1, 1, embed_dim), **kw))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn
        self._reset_parameters()

    def _reset_parameters(self) -> None:
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
        if self.bias_v is not None:
            init.xavier_normal_(self.bias_v)

    def forward(self, query: Tensor, key: Tensor, value: Tensor, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        """Attend from ``query`` to ``key``/``value``.

        Args:
            query: ``(L, N, E)`` (``(N, L, E)`` with ``batch_first``) or unbatched ``(L, E)``.
            key, value: ``(S, N, kdim)`` / ``(S, N, vdim)`` likewise.
            key_padding_mask: ``(N, S)``; bool True (or ``-inf``) marks keys to ignore.
            need_weights: also return the attention weights.
            attn_mask: ``(L, S)`` or ``(N * num_heads, L, S)``; bool True marks pairs not allowed,
                a float mask is added to the scores.
            average_attn_weights: average the returned weights over heads.
            is_causal: hint that ``attn_mask`` is the causal mask.

        Returns:
            ``(attn_output, attn_weights)``: output of ``query``'s shape, weights ``(N, L, S)``
            (``(N, num_heads, L, S)`` unaveraged) or None when ``need_weights`` is False.
        """
        is_batched = query.ndim == 3
        key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", "attn_mask", query.dtype)
        if self.batch_first and is_batched:
            if key is value:
                if query is key:
                    query = key = value = query.transpose(1, 0)
                else:
                    query, key = (x.transpose(1, 0) for x in (query, key))
                    value = key
            else:
                query, key, value = (x.transpose(1, 0) for x in (query, key, value))
        separate = not self._qkv_same_embed_dim
        out, weights = multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias, self.bias_k,
            self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight, self.out_proj.bias,
            training=self.training, key_padding_mask=key_padding_mask, need_weights=need_weights,
            attn_mask=attn_mask, use_separate_proj_weight=separate,
            q_proj_weight=self.q_proj_weight if separate else None,
            k_proj_weight=self.k_proj_weight if separate else None,
            v_proj_weight=self.v_proj_weight if separate else None,
            average_attn_weights=average_attn_weights, is_causal=is_causal)
        if self.batch_first and is_batched:
            return out.transpose(1, 0), weights
        return out, weights
