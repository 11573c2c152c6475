"""CUDA kernels of softmax, log_softmax and embedding against the CPU, beyond the operator samples.

Strided rows along any dim, float16, NaN rows, autograd through the CUDA kernels, device-side index
errors, ``max_norm`` on the device and the atomic embedding backward. Tiny sizes (simulator).
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau.cuda._sync import host_sync_count

RNG = np.random.default_rng(0)


def _close(got, want, rtol=1e-5, atol=1e-6):
    assert got.device.type == "cuda"
    assert got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=rtol, atol=atol, equal_nan=True)


def test_softmax_strided_every_dim():
    base = fl.tensor(RNG.standard_normal((2, 3, 4)).astype(np.float32))
    x = base.permute(2, 0, 1)[1:, :, ::2]  # non-contiguous, offset, stride 2
    xc = base.to("cuda").permute(2, 0, 1)[1:, :, ::2]
    for f, dim in ((fl.softmax, 0), (fl.log_softmax, 1), (fl.softmax, -1)):
        _close(f(xc, dim), f(x, dim))


def test_softmax_float16_nan_rows_and_edge_shapes():
    h = np.array([[1.0, -np.inf, 2.0], [-np.inf, -np.inf, -np.inf], [np.inf, 0.0, 1.0], [np.nan, 0.0, 1.0]],
                 np.float16)
    x = fl.tensor(h)
    for f in (fl.softmax, fl.log_softmax):
        _close(f(x.to("cuda"), 1), f(x, 1), rtol=1e-3, atol=1e-3)
        _close(f(fl.tensor(2.5).to("cuda"), 0), f(fl.tensor(2.5), 0))
        _close(f(fl.zeros(0, 3).to("cuda"), 1), f(fl.zeros(0, 3), 1))


@pytest.mark.parametrize("past_held", [-27, 0, 1, 38])
def test_softmax_rows_held_and_read_three_times(past_held):
    """Rows of up to HELD * B elements (32 under the simulator's 4 threads, 1,024 on a GPU) are held in registers,
    longer ones read three times (Note [Softmax rows held]): both as on the CPU, NaN and infinite rows included."""
    from flambeau._kernels.cuda import nn_ops

    n = nn_ops.HELD * nn_ops.block() + past_held
    h = RNG.standard_normal((4, n)).astype(np.float32) * 3
    h[1, n // 2] = np.nan
    h[2] = -np.inf
    h[3, 0] = np.inf
    x = fl.tensor(h)
    for f in (fl.softmax, fl.log_softmax):
        _close(f(x.to("cuda"), 1), f(x, 1))
        _close(f(x.to("cuda").t(), 0), f(x.t(), 0))  # strided rows


def test_softmax_backward_matches_cpu():
    h = RNG.standard_normal((2, 3))
    g = fl.tensor(RNG.standard_normal((2, 3)))
    for f in (fl.softmax, fl.log_softmax):
        x = fl.tensor(h, requires_grad=True)
        xc = fl.tensor(h).to("cuda").requires_grad_()
        (f(x, 0) * g).sum().backward()
        (f(xc, 0) * g.to("cuda")).sum().backward()
        _close(xc.grad, x.grad, rtol=1e-10, atol=1e-12)


def test_embedding_strided_and_int32_indices():
    base = fl.tensor(RNG.standard_normal((3, 6)))
    w, wc = base.t(), base.to("cuda").t()  # (6, 3), non-contiguous
    idx = fl.tensor(np.array([[5, 0], [2, 2]], np.int32))
    _close(fl.embedding(idx.to("cuda"), wc), fl.embedding(idx, w))
    _close(fl.embedding(fl.tensor(4).to("cuda"), wc), fl.embedding(fl.tensor(4), w))


def test_embedding_bad_index_raises_at_next_sync():
    w = fl.tensor(RNG.standard_normal((5, 2)).astype(np.float32)).to("cuda")
    n = host_sync_count()
    out = fl.embedding(fl.tensor(np.array([1, 7, 0])).to("cuda"), w)
    assert host_sync_count() == n  # the index is checked on the device: no wait
    with pytest.raises(RuntimeError, match="index 7 is out of bounds for dimension with size 5"):
        out.sum().item()
    out.sum().item()  # reported once


def test_embedding_max_norm_on_device():
    h = RNG.standard_normal((6, 3)) * 2
    w, wc = fl.tensor(h), fl.tensor(h).to("cuda")
    idx = fl.tensor(np.array([[0, 3], [3, 5]]))
    for p in (2.0, 1.0, 3.0):
        _close(fl.embedding(idx.to("cuda"), wc, max_norm=1.5, norm_type=p),
               fl.embedding(idx, w, max_norm=1.5, norm_type=p))
        _close(wc, w)  # rescaled in place, the same rows


def test_embedding_backward_padding_idx():
    h = RNG.standard_normal((5, 3))
    idx = fl.tensor(np.array([[0, 2], [4, 2]]))
    w = fl.tensor(h, requires_grad=True)
    wc = fl.tensor(h).to("cuda").requires_grad_()
    g = fl.tensor(RNG.standard_normal((2, 2, 3)))
    (fl.embedding(idx, w, padding_idx=2) * g).sum().backward()
    (fl.embedding(idx.to("cuda"), wc, padding_idx=2) * g.to("cuda")).sum().backward()
    _close(wc.grad, w.grad, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("scale", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_embedding_backward_kernel_atomics(dtype, scale):
    from flambeau._backends import backend
    from flambeau._kernels.cuda.nn_ops import embedding_backward

    idx = np.array([[0, 2, 4], [2, 2, 0]])
    g = RNG.standard_normal((2, 3, 4)).astype(dtype)
    rows = g.reshape(-1, 4).astype(np.float64)
    if scale:  # scale_grad_by_freq: each row divided by its index's count
        rows = rows / np.bincount(idx.reshape(-1), minlength=5)[idx.reshape(-1), None]
    want = np.zeros((5, 4), np.float64)
    np.add.at(want, idx.reshape(-1), rows)
    want[4] = 0  # padding_idx
    gc = fl.tensor(g).to("cuda")
    got = embedding_backward(gc._data, fl.tensor(idx).to("cuda")._data, 5, 4, scale)
    assert got.dtype == dtype
    tol = 1e-2 if dtype == np.float16 else 1e-12
    np.testing.assert_allclose(backend("cuda").to_numpy(got), want, rtol=tol, atol=tol)


def test_errors_before_launch():
    x = fl.tensor(RNG.standard_normal((2, 3)))
    with pytest.raises(RuntimeError, match="same device"):
        fl.embedding(fl.tensor(np.array([0, 1])), x.to("cuda"))
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        fl.softmax(fl.tensor(np.array([1, 2])).to("cuda"), 0)


def test_embedding_and_its_backward_refuse_indices_on_another_device():
    # a 0-d CPU tensor may join a CUDA operation as a scalar, but never as indices the kernels read
    from flambeau._ops import OPS

    w = fl.tensor(RNG.standard_normal((5, 3))).to("cuda")
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        fl.embedding(fl.tensor(1), w)
    with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device"):
        OPS["embedding_dense_backward"].fn(fl.ones(3).to("cuda"), fl.tensor(1), 5, -1, False)
