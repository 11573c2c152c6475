"""The CUDA kernels' paths for large shapes against the CPU, on a real GPU only (tier 3).

Under the simulator a block has 2 to 8 threads, so tiny shapes already take the paths that a GPU, with
256-thread blocks, takes only for large ones: rows split over blocks (Note [Split rows]: norm rows of more
than 32,768 elements, depthwise weight rows of more than 8,192), column tiles (Note [Column tiles]: more
than 2,048 rows; Note [Column sums]: more than a million elements), grouped loads (Note [Grouped loads]: a
million elements or more). The simulator cannot run such shapes (each GPU thread is a Python thread), so these
run where a GPU is: every path above with its real block sizes and warp shuffles, against the CPU.
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl

pytestmark = pytest.mark.gpu
DEVICE = "cuda"  # (the checks below also run CPU against CPU, to test the tests without a GPU)
RNG = np.random.default_rng(11)


def _leaf(h, device, grad=True):
    t = fl.tensor(h, device=device)
    return t.requires_grad_(grad) if grad else t


def _close(got, want, rtol, atol):
    assert got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().cpu().numpy().astype(np.float64),
                               want.detach().cpu().numpy().astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)


def _value_and_grads(fn, arrays, device):
    """``fn(*tensors)`` on ``device`` and the gradients of ``sum(fn(...) * w)`` for a fixed ``w``."""
    leaves = [_leaf(a, device) for a in arrays]
    out = fn(*leaves)
    w = fl.tensor(np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)).astype(arrays[0].dtype), device=device)
    (out * w).sum().backward()
    return out, [leaf.grad for leaf in leaves]


def _matches_cpu(fn, *arrays, rtol=1e-4, atol=1e-5, grad_atol=0.0):
    """The value and the gradients of ``fn`` on the GPU as on the CPU. A gradient is a sum of many terms
    that may cancel (a bias's gradient of 40,000 terms of either sign), so its error is bounded by its
    largest element's, not its own: each gradient is compared to ``rtol`` of its largest magnitude, or to
    ``grad_atol`` where its terms cancel to less than that bounds."""
    out_d, grads_d = _value_and_grads(fn, arrays, DEVICE)
    out_c, grads_c = _value_and_grads(fn, arrays, "cpu")
    _close(out_d, out_c, rtol, atol)
    for gd, gc in zip(grads_d, grads_c):
        _close(gd, gc, rtol, max(atol, grad_atol, rtol * float(gc.abs().max())))


def _normal(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


def test_norms_with_split_rows():
    """Rows of 40,000 elements: statistics and backward sums in partial blocks, the running statistics too."""
    running = {}

    def bn(x, w, b):
        d = x.device.type
        running[d] = fl.zeros(3, device=d), fl.ones(3, device=d)
        return fl.batch_norm(x, *running[d], w, b, True, 0.1, 1e-5)

    _matches_cpu(bn, _normal(4, 3, 100, 100), _normal(3), _normal(3))
    for got, want in zip(running[DEVICE], running["cpu"]):
        _close(got, want, 1e-5, 1e-6)
    _matches_cpu(lambda x, w, b: fl.group_norm(x, 2, w, b), _normal(2, 8, 100, 100), _normal(8), _normal(8))
    _matches_cpu(lambda x, w, b: fl.layer_norm(x, (40_000,), w, b), _normal(3, 40_000), _normal(40_000),
                 _normal(40_000))


def test_column_sums_of_norm_gradients():
    """layer_norm's weight and bias gradients over 20,000 rows of 70 and batch_norm's over (400000, 3): column
    tiles of 32 x 8 threads, split over partial tiles past a million elements (Note [Column sums]); and 3,000
    rows of 70 in one launch."""
    for rows in (20_000, 3000):
        _matches_cpu(lambda x, w, b: fl.layer_norm(x, (70,), w, b), _normal(rows, 70), _normal(70), _normal(70))
    # Each channel's bias gradient sums 400,000 weights of -1 to 1 (200,000 in magnitude) that cancel to -2/3,
    # 0 and 2/3: two float32 summation orders of them differ by about 1e-9 of that magnitude (2.6e-4 seen on
    # an H200), far above 1e-4 of the result's own magnitude.
    _matches_cpu(lambda x, w, b: fl.batch_norm(x, None, None, w, b, True), _normal(400_000, 3), _normal(3),
                 _normal(3), grad_atol=2e-3)


def test_elementwise_with_grouped_loads():
    """A million elements and more: four a thread, contiguous, broadcast and transposed, and the tail."""
    n = (1 << 20) + 3
    a, b = _normal(n), _normal(n)
    for device_fn in (lambda x, y: x + y, lambda x, y: x * 2 - y, lambda x, y: fl.where(x > 0, x, y).relu()):
        _close(device_fn(fl.tensor(a, device=DEVICE), fl.tensor(b, device=DEVICE)), device_fn(fl.tensor(a),
               fl.tensor(b)), 1e-6, 1e-6)
    m, v = _normal(1025, 1024), _normal(1024)
    _close(fl.tensor(m, device=DEVICE) + fl.tensor(v, device=DEVICE), fl.tensor(m) + fl.tensor(v), 1e-6, 1e-6)
    _close(fl.tensor(m, device=DEVICE).t() * 3, fl.tensor(m).t() * 3, 1e-6, 1e-6)
    _matches_cpu(lambda x: fl.nn.functional.gelu(x) * x, _normal(1030, 1024))


def test_reductions_with_column_tiles_and_grouped_loads():
    """Columns of 3,000 and 5,000 rows (tiles, split), rows of 100,000 (tree, split): every kind of state."""
    for shape in ((5000, 3), (3000, 70)):
        h = RNG.integers(-3, 4, shape).astype(np.float32)  # ties for max/argmax
        h[7, 1] = np.nan
        d, c = fl.tensor(h, device=DEVICE), fl.tensor(h)
        for fn in (lambda t: t.sum(0), lambda t: t.nansum(0), lambda t: t.amax(0), lambda t: t.logsumexp(0)):
            _close(fn(d), fn(c), 1e-5, 1e-4)
        # float32 variances of 3,000 terms by two summation orders (Chan's merges, the CPU's passes) differ by
        # a few 1e-5 relative (3.6e-5 seen on an H100); both within float32's rounding of such sums
        _close(d.var(0), c.var(0), 2e-4, 1e-4)
        hi = np.nan_to_num(h).astype(np.int64)
        di, ci = fl.tensor(hi, device=DEVICE), fl.tensor(hi)
        np.testing.assert_array_equal(di.argmax(0).cpu().numpy(), ci.argmax(0).numpy())
        np.testing.assert_array_equal(di.sum(0).cpu().numpy(), ci.sum(0).numpy())
    h = _normal(3, 100_000)
    d, c = fl.tensor(h, device=DEVICE), fl.tensor(h)
    _close(d.sum(1), c.sum(1), 1e-5, 1e-3)
    got, want = d.max(1), c.max(1)
    _close(got[0], want[0], 0, 0)
    np.testing.assert_array_equal(got[1].cpu().numpy(), want[1].numpy())
    _matches_cpu(lambda x: x.sum((0, 2, 3)), _normal(16, 8, 40, 40), rtol=1e-4, atol=1e-3)  # a conv bias gradient


@pytest.mark.parametrize("by_cudnn", [False, True])
@pytest.mark.parametrize("stride", [1, 2])
def test_depthwise_convolution_with_split_weight_rows(stride, by_cudnn, monkeypatch):
    """Depthwise weight rows of 4 x 64 x 64 = 16,384 terms (split), a channel multiplier of 2, float64: by
    flambeau's direct kernels and by cuDNN (``DEPTHWISE_BY_CUDNN``)."""
    from flambeau._kernels.cuda import conv

    monkeypatch.setattr(conv, "DEPTHWISE_BY_CUDNN", by_cudnn)
    _matches_cpu(lambda x, w: fl.nn.functional.conv2d(x, w, None, stride, 1, 1, 3),
                 _normal(4, 3, 64, 64, dtype=np.float64), _normal(6, 1, 3, 3, dtype=np.float64), rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("shape", [(8, 16, 14, 14), (4, 6, 33), (2, 3, 4, 5, 6)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_batch_norm_through_cudnn_matches_flambeaus_kernels(shape, dtype, monkeypatch):
    """Note [Batch norm through cuDNN]: the training forward (output, running statistics with the unbiased
    variance, momentum as cuDNN's average factor) and the three gradients through cuDNN are flambeau's kernels',
    and cuDNN ran them (where it loads)."""
    from flambeau._kernels.cuda import _cudnn, _cudnn_bn

    if not _cudnn.available():
        pytest.skip("cuDNN does not load here")
    c = shape[1]
    x, w, b, g = _normal(*shape, dtype=dtype), _normal(c, dtype=dtype), _normal(c, dtype=dtype), _normal(*shape,
                                                                                                          dtype=dtype)
    calls = []
    real = _cudnn_bn.forward, _cudnn_bn.backward

    def run():
        leaves = [_leaf(a, DEVICE) for a in (x, w, b)]
        running = [fl.tensor(np.linspace(-1, 1, c).astype(dtype), device=DEVICE),
                   fl.tensor(np.linspace(0.5, 2, c).astype(dtype), device=DEVICE)]
        out = fl.batch_norm(leaves[0], *running, leaves[1], leaves[2], True, 0.3, 1e-4)
        out.backward(fl.tensor(g, device=DEVICE))
        return [out, *running, *[leaf.grad for leaf in leaves]]

    def taken(i):  # cuDNN's entry point i, noting whether cuDNN took the call
        def call(*args):
            result = real[i](*args)
            calls.append(result is not None)
            return result
        return call

    monkeypatch.setattr(_cudnn_bn, "forward", taken(0))
    monkeypatch.setattr(_cudnn_bn, "backward", taken(1))
    through_cudnn = run()
    assert calls == [True, True]
    monkeypatch.setattr(_cudnn_bn, "forward", lambda *a: None)
    monkeypatch.setattr(_cudnn_bn, "backward", lambda *a: None)
    ours = run()
    rtol = 1e-4 if dtype == np.float32 else 1e-10
    for got, want in zip(through_cudnn, ours):
        _close(got, want, rtol, rtol * max(1.0, float(want.abs().max())))
