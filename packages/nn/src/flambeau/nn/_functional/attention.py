"""nn.functional: attention (scaled_dot_product_attention, multi_head_attention_forward), as torch."""

from __future__ import annotations

import math

import flambeau as fl
from flambeau import Tensor
from flambeau.nn._functional.basic import dropout, linear, pad

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]

scaled_dot_product_attention = fl.scaled_dot_product_attention


def _canonical_mask(mask, mask_name, other_name, target_type, check_other=True):
    """A float additive mask: a boolean mask becomes ``-inf`` where True (MultiheadAttention's convention)."""
    if mask is None:
        return None
    if mask.dtype is fl.bool:
        return fl.zeros(mask.shape, dtype=target_type, device=mask.device).masked_fill(mask, float("-inf"))
    if not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    return mask


def _in_projection_packed(q, k, v, w, b):
    e = q.shape[-1]
    # One GEMM for the packed projections, split into views with chunk (whose backward is a cat).
    if k is v and q is k:
        return linear(q, w, b).chunk(3, -1)
    w_q, w_kv = w.split([e, e * 2])
    b_q, b_kv = (None, None) if b is None else b.split([e, e * 2])
    if k is v:
        k_, v_ = linear(k, w_kv, b_kv).chunk(2, -1)
        return linear(q, w_q, b_q), k_, v_
    w_k, w_v = w_kv.chunk(2)
    b_k, b_v = (None, None) if b is None else b_kv.chunk(2)
    return linear(q, w_q, b_q), linear(k, w_k, b_k), linear(v, w_v, b_v)


def multi_head_attention_forward(query: Tensor, key: Tensor, value: Tensor, embed_dim_to_check: int, num_heads: int,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn: bool, dropout_p: float,
                                 out_proj_weight: Tensor, out_proj_bias, training: bool = True, key_padding_mask=None,
                                 need_weights: bool = True, attn_mask=None, use_separate_proj_weight: bool = False,
                                 q_proj_weight=None, k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights: bool = True, is_causal: bool = False):
    """The forward pass of :class:`~flambeau.nn.MultiheadAttention`, as torch's function of the same name.

    Args:
        query: ``(L, N, E)`` or unbatched ``(L, E)``.
        key, value: ``(S, N, kdim)`` / ``(S, N, vdim)`` (or unbatched).
        embed_dim_to_check: ``E``; num_heads: number of heads (divides ``E``).
        in_proj_weight, in_proj_bias: packed ``(3E, E)`` projection (or None with
            ``use_separate_proj_weight`` and ``q/k/v_proj_weight``).
        bias_k, bias_v: ``(1, 1, E)`` biases appended to the key/value sequences, or None.
        add_zero_attn: append a zero key/value step.
        dropout_p: dropout on the attention weights (only when ``training``).
        out_proj_weight, out_proj_bias: output projection.
        key_padding_mask: ``(N, S)`` (bool: True means ignore; or additive float).
        need_weights: also return the attention weights ``(N, L, S)`` (averaged over heads if
            ``average_attn_weights``, else ``(N, H, L, S)``); otherwise the second result is None.
        attn_mask: ``(L, S)`` or ``(N * H, L, S)`` (bool: True means not allowed; or additive float).
        is_causal: hint that ``attn_mask`` is the causal mask (torch requires ``attn_mask`` then).
        static_k, static_v: precomputed ``(N * H, S, E / H)`` keys/values.

    Returns:
        ``(attn_output (L, N, E), attn_weights or None)``.
    """
    is_batched = query.ndim == 3
    if not is_batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]
    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask", "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the Transformer module "
                           "method `generate_square_subsequent_mask` to create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        attn_mask = None
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, query.dtype)
        if key_padding_mask is not None:
            is_causal = False
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        b_q = b_k = b_v = None
        if in_proj_bias is not None:
            b_q, b_k, b_v = in_proj_bias.chunk(3)
        q, k, v = linear(query, q_proj_weight, b_q), linear(key, k_proj_weight, b_k), linear(value, v_proj_weight, b_v)
    else:
        q, k, v = _in_projection_packed(query, key, value, in_proj_weight, in_proj_bias)
    if attn_mask is not None:
        if attn_mask.ndim == 2:
            if tuple(attn_mask.shape) != (tgt_len, src_len):
                raise RuntimeError(f"The shape of the 2D attn_mask is {tuple(attn_mask.shape)}, but should be "
                                   f"{(tgt_len, src_len)}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.ndim == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, src_len):
                raise RuntimeError(f"The shape of the 3D attn_mask is {tuple(attn_mask.shape)}, but should be "
                                   f"{(bsz * num_heads, tgt_len, src_len)}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.ndim} is not supported")
    if bias_k is not None and bias_v is not None:
        k = fl.cat([k, bias_k.repeat(1, bsz, 1)])
        v = fl.cat([v, bias_v.repeat(1, bsz, 1)])
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    if static_k is None:
        k = k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    else:
        k = static_k
    if static_v is None:
        v = v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    else:
        v = static_v
    if add_zero_attn:
        k = fl.cat([k, fl.zeros((bsz * num_heads, 1, head_dim), dtype=k.dtype, device=k.device)], dim=1)
        v = fl.cat([v, fl.zeros((bsz * num_heads, 1, head_dim), dtype=v.dtype, device=v.device)], dim=1)
        if attn_mask is not None:
            attn_mask = pad(attn_mask, (0, 1))
        if key_padding_mask is not None:
            key_padding_mask = pad(key_padding_mask, (0, 1))
    src_len = k.shape[1]
    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                                 f"{tuple(key_padding_mask.shape)}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(-1, num_heads, -1, -1)
        kpm = kpm.reshape(bsz * num_heads, 1, src_len)
        attn_mask = kpm if attn_mask is None else attn_mask + kpm
    if not training:
        dropout_p = 0.0
    if need_weights:
        q_scaled = q * math.sqrt(1.0 / float(head_dim))
        if attn_mask is not None:
            weights = fl.baddbmm(attn_mask.expand(bsz * num_heads, tgt_len, src_len), q_scaled, k.transpose(-2, -1))
        else:
            weights = fl.bmm(q_scaled, k.transpose(-2, -1))
        weights = fl.softmax(weights, -1)
        if dropout_p > 0.0:
            weights = dropout(weights, p=dropout_p)
        out = fl.bmm(weights, v)
        out = out.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(1)
        if not is_batched:
            out, weights = out.squeeze(1), weights.squeeze(0)
        return out, weights
    if attn_mask is not None:
        if attn_mask.shape[0] == 1 and attn_mask.ndim == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    out = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    out = out.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
    if not is_batched:
        out = out.squeeze(1)
    return out, None
