"""nn.MultiheadAttention and the Transformer layers on CUDA with boolean masks: the CPU's results (the additive
mask a boolean one becomes was made on the CPU, and the layers raised a device mismatch)."""

from __future__ import annotations

import copy

import numpy as np

import flambeau as fl
import flambeau.nn as nn


def _both(module, *args, **kwargs):
    """``module``'s output on the CPU and on CUDA (a copy of it), from the same parameters and inputs."""
    out = []
    for dev in ("cpu", "cuda"):
        m = copy.deepcopy(module).to(dev).eval()
        moved = [a.to(dev) for a in args]
        res = m(*moved, **{k: v.to(dev) for k, v in kwargs.items()})
        out.append((res[0] if isinstance(res, tuple) else res).detach().cpu().numpy())
    return out


def test_boolean_masks_on_cuda_match_the_cpu():
    fl.manual_seed(0)
    x = fl.randn(2, 3, 4)
    pad = fl.tensor([[False, False, True], [False, False, False]])
    causal = fl.ones(3, 3, dtype=fl.bool).triu(1)
    mha = nn.MultiheadAttention(4, 2, batch_first=True)
    for kwargs in ({"key_padding_mask": pad}, {"attn_mask": causal}, {"key_padding_mask": pad, "attn_mask": causal}):
        cpu, cuda = _both(mha, x, x, x, **kwargs)
        np.testing.assert_allclose(cuda, cpu, rtol=1e-5, atol=1e-6)
    layer = nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True)
    cpu, cuda = _both(layer, x, src_key_padding_mask=pad)
    np.testing.assert_allclose(cuda, cpu, rtol=1e-5, atol=1e-6)
