"""Transformer layers: :class:`TransformerEncoderLayer`, :class:`TransformerDecoderLayer`, the
:class:`TransformerEncoder` / :class:`TransformerDecoder` stacks and :class:`Transformer` (as ``torch.nn``).

Post-norm (default) or pre-norm (``norm_first``) blocks of :class:`MultiheadAttention`, a
two-layer feed-forward network, dropout and :class:`LayerNorm`, with torch's submodule names so
that state_dicts are interchangeable.
"""

from __future__ import annotations

import copy

import flambeau as fl
from flambeau import Tensor
from flambeau.nn.modules.attention import MultiheadAttention
from flambeau.nn.modules.container import ModuleList
from flambeau.nn.modules.linear import Linear
from flambeau.nn.modules.module import Module

__all__ = ["TransformerEncoderLayer", "TransformerDecoderLayer", "TransformerEncoder", "TransformerDecoder",
           "Transformer"]


def _layers():
    """LayerNorm and Dropout, looked up when a layer is built (their modules live beside this one)."""
    from flambeau.nn import modules

    return modules.LayerNorm, modules.Dropout


def _get_activation_fn(activation):
    if activation == "relu":
        return fl.relu
    if activation == "gelu":
        return fl.gelu
    raise RuntimeError(f"activation should be relu/gelu, not {activation}")


def _get_clones(module: Module, n: int) -> ModuleList:
    return ModuleList([copy.deepcopy(module) for _ in range(n)])


def _generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
    dtype = fl.float32 if dtype is None else dtype
    return fl.full((sz, sz), float("-inf"), dtype=dtype, device=device).triu(diagonal=1)


def _attention_block(attn, dropout, x, kv, attn_mask, key_padding_mask, is_causal):
    """``dropout(attn(x, kv, kv))`` without the attention weights: the layers' attention sublayers."""
    x = attn(x, kv, kv, attn_mask=attn_mask, key_padding_mask=key_padding_mask, need_weights=False,
             is_causal=is_causal)[0]
    return dropout(x)


class TransformerEncoderLayer(Module):
    """Self-attention then feed-forward, each with a residual connection and layer norm.

    Args:
        d_model: model dimension.
        nhead: attention heads.
        dim_feedforward: hidden size of the feed-forward network.
        dropout: dropout probability (attention weights, feed-forward, residual branches).
        activation: ``'relu'``, ``'gelu'`` or a callable.
        layer_norm_eps: LayerNorm epsilon.
        batch_first: ``(N, S, E)`` instead of ``(S, N, E)``.
        norm_first: pre-norm (``x + f(norm(x))``) instead of post-norm (``norm(x + f(x))``).
        bias: biases in the Linear and LayerNorm layers.
        device, dtype: of the parameters.
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation="relu", layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        layer_norm, drop = _layers()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias, batch_first=batch_first, **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = drop(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = layer_norm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = layer_norm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = drop(dropout)
        self.dropout2 = drop(dropout)
        self.activation = _get_activation_fn(activation) if isinstance(activation, str) else activation

    def forward(self, src: Tensor, src_mask=None, src_key_padding_mask=None, is_causal: bool = False) -> Tensor:
        """Encode ``src`` ``(S, N, E)`` (or ``(N, S, E)``, or unbatched ``(S, E)``).

        Args:
            src: the sequence.
            src_mask: ``(S, S)`` or ``(N * nhead, S, S)`` attention mask (bool True: not allowed).
            src_key_padding_mask: ``(N, S)`` keys to ignore.
            is_causal: hint that ``src_mask`` is the causal mask.

        Returns:
            tensor of ``src``'s shape.
        """
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        return _attention_block(self.self_attn, self.dropout1, x, x, attn_mask, key_padding_mask, is_causal)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerDecoderLayer(Module):
    """Self-attention, attention over ``memory``, then feed-forward; residuals and layer norms.

    Takes the arguments of :class:`TransformerEncoderLayer` (d_model, nhead, dim_feedforward, dropout,
    activation, layer_norm_eps, batch_first, norm_first, bias, device, dtype).
    """

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int = 2048, dropout: float = 0.1,
                 activation="relu", layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        layer_norm, drop = _layers()
        kw = {"device": device, "dtype": dtype}
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias, **kw)
        self.multihead_attn = MultiheadAttention(d_model, nhead, dropout=dropout, batch_first=batch_first, bias=bias,
                                                 **kw)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, **kw)
        self.dropout = drop(dropout)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, **kw)
        self.norm_first = norm_first
        self.norm1 = layer_norm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm2 = layer_norm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.norm3 = layer_norm(d_model, eps=layer_norm_eps, bias=bias, **kw)
        self.dropout1 = drop(dropout)
        self.dropout2 = drop(dropout)
        self.dropout3 = drop(dropout)
        self.activation = _get_activation_fn(activation) if isinstance(activation, str) else activation

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal: bool = False, memory_is_causal: bool = False) -> Tensor:
        """Decode ``tgt`` ``(T, N, E)`` attending to ``memory`` ``(S, N, E)`` (batch first if so built).

        Args:
            tgt: the target sequence; memory: the encoder's output.
            tgt_mask, memory_mask: attention masks for the two attention blocks.
            tgt_key_padding_mask, memory_key_padding_mask: ``(N, T)`` / ``(N, S)`` keys to ignore.
            tgt_is_causal, memory_is_causal: hints that the masks are causal.

        Returns:
            tensor of ``tgt``'s shape.
        """
        x = tgt
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), tgt_mask, tgt_key_padding_mask, tgt_is_causal)
            x = x + self._mha_block(self.norm2(x), memory, memory_mask, memory_key_padding_mask, memory_is_causal)
            x = x + self._ff_block(self.norm3(x))
        else:
            x = self.norm1(x + self._sa_block(x, tgt_mask, tgt_key_padding_mask, tgt_is_causal))
            x = self.norm2(x + self._mha_block(x, memory, memory_mask, memory_key_padding_mask, memory_is_causal))
            x = self.norm3(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        return _attention_block(self.self_attn, self.dropout1, x, x, attn_mask, key_padding_mask, is_causal)

    def _mha_block(self, x, mem, attn_mask, key_padding_mask, is_causal):
        return _attention_block(self.multihead_attn, self.dropout2, x, mem, attn_mask, key_padding_mask, is_causal)

    def _ff_block(self, x):
        return self.dropout3(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """A stack of ``num_layers`` copies of ``encoder_layer`` (deep copies), then ``norm`` if given.

    Args:
        encoder_layer: a :class:`TransformerEncoderLayer` (copied).
        num_layers: number of layers.
        norm: optional final layer norm.
        enable_nested_tensor, mask_check: accepted for torch compatibility (no effect).
    """

    def __init__(self, encoder_layer: Module, num_layers: int, norm=None, enable_nested_tensor: bool = True,
                 mask_check: bool = True) -> None:
        super().__init__()
        self.layers = _get_clones(encoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, src: Tensor, mask=None, src_key_padding_mask=None, is_causal=None) -> Tensor:
        """Run every layer on ``src`` (arguments as :meth:`TransformerEncoderLayer.forward`)."""
        out = src
        for mod in self.layers:
            out = mod(out, src_mask=mask, src_key_padding_mask=src_key_padding_mask, is_causal=bool(is_causal))
        if self.norm is not None:
            out = self.norm(out)
        return out


class TransformerDecoder(Module):
    """A stack of ``num_layers`` copies of ``decoder_layer`` (deep copies), then ``norm`` if given.

    Args:
        decoder_layer: a :class:`TransformerDecoderLayer` (copied).
        num_layers: number of layers.
        norm: optional final layer norm.
    """

    def __init__(self, decoder_layer: Module, num_layers: int, norm=None) -> None:
        super().__init__()
        self.layers = _get_clones(decoder_layer, num_layers)
        self.num_layers = num_layers
        self.norm = norm

    def forward(self, tgt: Tensor, memory: Tensor, tgt_mask=None, memory_mask=None, tgt_key_padding_mask=None,
                memory_key_padding_mask=None, tgt_is_causal=None, memory_is_causal: bool = False) -> Tensor:
        """Run every layer (arguments as :meth:`TransformerDecoderLayer.forward`)."""
        out = tgt
        for mod in self.layers:
            out = mod(out, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                      tgt_key_padding_mask=tgt_key_padding_mask, memory_key_padding_mask=memory_key_padding_mask,
                      tgt_is_causal=bool(tgt_is_causal), memory_is_causal=memory_is_causal)
        if self.norm is not None:
            out = self.norm(out)
        return out


class Transformer(Module):
    """Encoder-decoder transformer (``Attention Is All You Need``), as ``torch.nn.Transformer``.

    Args:
        d_model, nhead: model dimension and heads.
        num_encoder_layers, num_decoder_layers: depth of each stack.
        dim_feedforward: as :class:`TransformerEncoderLayer`, like dropout, activation,
            layer_norm_eps, batch_first, norm_first and bias.
        custom_encoder, custom_decoder: modules used instead of the default stacks.
        device, dtype: of the parameters.
    """

    def __init__(self, d_model: int = 512, nhead: int = 8, num_encoder_layers: int = 6, num_decoder_layers: int = 6,
                 dim_feedforward: int = 2048, dropout: float = 0.1, activation="relu", custom_encoder=None,
                 custom_decoder=None, layer_norm_eps: float = 1e-5, batch_first: bool = False,
                 norm_first: bool = False, bias: bool = True, device=None, dtype=None) -> None:
        super().__init__()
        layer_norm, _ = _layers()
        kw = {"device": device, "dtype": dtype}
        common = {"dim_feedforward": dim_feedforward, "dropout": dropout, "activation": activation,
                  "layer_norm_eps": layer_norm_eps, "batch_first": batch_first, "norm_first": norm_first,
                  "bias": bias, **kw}
        if custom_encoder is not None:
            self.encoder = custom_encoder
        else:
            layer = TransformerEncoderLayer(d_model, nhead, **common)
            self.encoder = TransformerEncoder(layer, num_encoder_layers,
                                              layer_norm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        if custom_decoder is not None:
            self.decoder = custom_decoder
        else:
            layer = TransformerDecoderLayer(d_model, nhead, **common)
            self.decoder = TransformerDecoder(layer, num_decoder_layers,
                                              layer_norm(d_model, eps=layer_norm_eps, bias=bias, **kw))
        self.d_model = d_model
        self.nhead = nhead
        self.batch_first = batch_first

    def forward(self, src: Tensor, tgt: Tensor, src_mask=None, tgt_mask=None, memory_mask=None,
                src_key_padding_mask=None, tgt_key_padding_mask=None, memory_key_padding_mask=None,
                src_is_causal=None, tgt_is_causal=None, memory_is_causal: bool = False) -> Tensor:
        """Encode ``src`` and decode ``tgt`` against it; returns a tensor of ``tgt``'s shape."""
        memory = self.encoder(src, mask=src_mask, src_key_padding_mask=src_key_padding_mask,
                              is_causal=src_is_causal)
        return self.decoder(tgt, memory, tgt_mask=tgt_mask, memory_mask=memory_mask,
                            tgt_key_padding_mask=tgt_key_padding_mask,
                            memory_key_padding_mask=memory_key_padding_mask, tgt_is_causal=tgt_is_causal,
                            memory_is_causal=memory_is_causal)

    @staticmethod
    def generate_square_subsequent_mask(sz: int, device=None, dtype=None) -> Tensor:
        """The ``(sz, sz)`` causal mask: ``-inf`` above the diagonal, 0 elsewhere."""
        return _generate_square_subsequent_mask(sz, device, dtype)
