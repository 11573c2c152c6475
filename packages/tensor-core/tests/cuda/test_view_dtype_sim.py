"""Tensor.view(dtype) on CUDA: the same bytes as the CPU's view, shared storage, views of the view."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl


@pytest.mark.parametrize("src, dst", [("float32", "int32"), ("float32", "int16"), ("int16", "int32"),
                                      ("float32", "complex64"), ("bfloat16", "int16")])
def test_view_dtype_on_cuda_matches_the_cpu(src, dst):
    x = fl.tensor((np.arange(24).reshape(4, 6) % 7 - 3).astype(np.float32)).to(getattr(fl, src))
    want = x[1:].view(getattr(fl, dst))
    got = x.cuda()[1:].view(getattr(fl, dst))
    assert got.device.type == "cuda" and got.dtype is want.dtype
    assert tuple(got.shape) == tuple(want.shape) and got.stride() == want.stride()
    assert got.storage_offset() == want.storage_offset()
    assert got.cpu().view(fl.uint8).numpy().tobytes() == want.view(fl.uint8).numpy().tobytes()


def test_view_dtype_on_cuda_shares_storage():
    x = fl.zeros(4, device="cuda")
    y = x.view(fl.int32)
    y[1] = 1065353216  # the bits of 1.0f
    assert x[1].item() == 1.0
    z = y.view(fl.int16)[2:6]
    z.fill_(0)
    assert x.cpu().numpy().tolist() == [0.0, 0.0, 0.0, 0.0]
