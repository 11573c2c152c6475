"""CUDA kernels of normalisation, pooling and upsampling against the CPU (numba's simulator; also runs on a GPU).

What the operators' samples (``test_op_samples_sim.py``) do not cover: backward through autograd on
'cuda' against the CPU, float16 and integer inputs, strided views, the in-place running statistics
of batch_norm with no host synchronisation, the device error flag of max_pool2d_backward, and
errors raised on the host before any launch. Shapes are tiny: the simulator runs every thread in Python.
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau._ops.pooling import max_pool2d_backward

RNG = np.random.default_rng(0)


def _pair(shape, dtype=fl.float32, grad=False, low=-3.0, high=3.0):
    h = RNG.uniform(low, high, shape)
    c = fl.tensor(h.astype(dtype.np) if dtype.is_floating_point else np.trunc(h).astype(dtype.np))
    d = c.to("cuda")
    if grad:
        c.requires_grad_(True)
        d.requires_grad_(True)
    return c, d


def _close(got, want, rtol=1e-5, atol=1e-5):
    assert got.device.type == "cuda"
    assert got.dtype is want.dtype, (got.dtype, want.dtype)
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().cpu().numpy().astype(np.float64),
                               want.detach().numpy().astype(np.float64), rtol=rtol, atol=atol)


def _backward_matches(fn, *shapes, rtol=1e-5, atol=1e-5):
    """``fn(*tensors)`` and its gradients w.r.t. every tensor: CUDA equals CPU."""
    pairs = [_pair(s, grad=True) for s in shapes]
    cpu = [p[0] for p in pairs]
    dev = [p[1] for p in pairs]
    want, got = fn(*cpu), fn(*dev)
    _close(got, want, rtol, atol)
    w = fl.tensor(RNG.uniform(-1, 1, tuple(want.shape)).astype(np.float32))
    (want * w).sum().backward()
    (got * w.to("cuda")).sum().backward()
    for c, d in zip(cpu, dev):
        _close(d.grad, c.grad, rtol, atol)


# --- backward through autograd ---------------------------------------------------------------------------
@pytest.mark.parametrize("case", [
    "batch_norm_train", "batch_norm_eval", "layer_norm", "group_norm", "max_pool2d", "avg_pool2d",
    "adaptive_avg_pool2d", "adaptive_max_pool2d", "max_pool1d", "nearest2d", "bilinear2d", "linear1d"])
def test_backward_matches_cpu(case):
    F = fl.nn.functional
    if case.startswith("batch_norm"):
        train = case.endswith("train")
        rm = np.zeros(3, np.float32)
        rv = np.ones(3, np.float32)

        def bn(x, w, b):
            d = x.device
            return fl.batch_norm(x, fl.tensor(rm, device=d), fl.tensor(rv, device=d), w, b, train, 0.1, 1e-5)

        _backward_matches(bn, (4, 3, 2), (3,), (3,))
    elif case == "layer_norm":
        _backward_matches(lambda x, w, b: fl.layer_norm(x, (3, 2), w, b), (4, 3, 2), (3, 2), (3, 2))
    elif case == "group_norm":
        _backward_matches(lambda x, w, b: fl.group_norm(x, 2, w, b), (2, 4, 3), (4,), (4,))
    elif case == "max_pool2d":
        _backward_matches(lambda x: F.max_pool2d(x, 3, 1, 1), (1, 2, 4, 4))  # overlapping windows
    elif case == "avg_pool2d":
        _backward_matches(lambda x: F.avg_pool2d(x, 3, 2, 1, True, False), (1, 2, 5, 4))
    elif case == "adaptive_avg_pool2d":
        _backward_matches(lambda x: F.adaptive_avg_pool2d(x, (3, 2)), (1, 2, 5, 4))
    elif case == "adaptive_max_pool2d":
        _backward_matches(lambda x: F.adaptive_max_pool2d(x, (3, 2)), (1, 2, 5, 4))
    elif case == "max_pool1d":
        _backward_matches(lambda x: F.max_pool1d(x, 2, 1), (2, 2, 5))
    elif case == "nearest2d":
        _backward_matches(lambda x: fl.upsample_nearest2d(x, (5, 3)), (1, 2, 3, 2))
    elif case == "bilinear2d":
        _backward_matches(lambda x: fl.upsample_bilinear2d(x, (5, 3), False), (1, 2, 3, 2))
    else:
        _backward_matches(lambda x: fl.upsample_linear1d(x, (7,), True), (2, 2, 4))


# --- long rows: split over several blocks ------------------------------------------------------------------
def _launches_in_modes(monkeypatch) -> list:
    """``(template, mode)`` of the normalisation launches made from now on (the split paths' modes "partial"
    and "parts")."""
    from flambeau._kernels.cuda import normalization

    modes = []
    kernel = normalization._kernel

    def recording(which, acc="", block=0, mode="final"):
        modes.append((which, mode))
        return kernel(which, acc, block, mode)

    monkeypatch.setattr(normalization, "_kernel", recording)
    return modes


@pytest.mark.cudasim(reason="tiny shapes take this path with the simulator's blocks of 2 to 8 threads (a GPU's take "
                            "it in test_large_shapes_gpu.py)")
@pytest.mark.parametrize("case", ["batch_norm", "group_norm", "layer_norm"])
def test_long_rows_split_over_blocks_match_cpu(case, monkeypatch):
    """Rows longer than 8 blocks' worth (16 elements under the simulator, 2 threads a block) reduce in
    partial blocks that a second launch combines (Note [Split rows] in the CUDA normalisation kernels): the
    statistics, the running statistics and every gradient as on the CPU, for lengths that split unevenly."""
    modes = _launches_in_modes(monkeypatch)
    if case == "batch_norm":  # 3 channels of 5 * 7 = 35 elements: 3 parts each
        rm = np.linspace(-1, 1, 3).astype(np.float32)
        rv = np.linspace(0.5, 2, 3).astype(np.float32)
        running = {}

        def bn(x, w, b):
            d = x.device.type
            running[d] = fl.tensor(rm, device=d), fl.tensor(rv, device=d)
            return fl.batch_norm(x, *running[d], w, b, True, 0.3, 1e-5)

        _backward_matches(bn, (5, 3, 7), (3,), (3,))
        for got, want in zip(running["cuda"], running["cpu"]):
            _close(got, want)
    elif case == "group_norm":  # rows of 2 * 9 = 18 elements, and per channel 3 * 9 = 27 for the weight's
        _backward_matches(lambda x, w, b: fl.group_norm(x, 2, w, b), (3, 4, 9), (4,), (4,))
    else:  # rows of 17 elements, and 19 rows to sum per column for the weight's gradient
        _backward_matches(lambda x, w, b: fl.layer_norm(x, (17,), w, b), (19, 17), (17,), (17,))
    assert {"partial", "parts"} <= {mode for _, mode in modes}, modes


@pytest.mark.parametrize("affine", ["weight and bias", "weight", "none"])
def test_layer_norm_rows_take_one_launch_each_way(affine, monkeypatch):
    """Rows one block holds: the forward is one launch, the input gradient one more (Note [Layer norm rows in one
    launch]), and the values and every gradient are the CPU's, with and without the affine parameters."""
    modes = _launches_in_modes(monkeypatch)
    if affine == "weight and bias":
        _backward_matches(lambda x, w, b: fl.layer_norm(x, (3, 2), w, b), (5, 3, 2), (3, 2), (3, 2))
    elif affine == "weight":
        _backward_matches(lambda x, w: fl.layer_norm(x, (5,), w), (2, 3, 5), (5,))
    else:
        _backward_matches(lambda x: fl.layer_norm(x, (7,)), (4, 7))
    templates = [which for which, _ in modes]
    assert templates[:2] == ["ln_forward", "ln_grad_input"], templates
    assert set(templates) <= {"ln_forward", "ln_grad_input", "column_sums"}, templates


@pytest.mark.cudasim(reason="tiny shapes take this path with the simulator's blocks of 2 to 8 threads (a GPU's take "
                            "it in test_large_shapes_gpu.py)")
@pytest.mark.parametrize("case", ["layer_norm", "batch_norm_2d", "group_norm_2d"])
def test_column_sums_match_cpu(case, monkeypatch):
    """Sums over the rows of a row-major (K, C) gradient run as column tiles (Note [Column sums]), split into
    partial sums under the simulator's 2 x 2 tiles for 19 rows or more: layer_norm's weight and bias
    gradients (the statistic of row k), batch_norm's (channel c) and group_norm's (row k, group of c)."""
    modes = _launches_in_modes(monkeypatch)
    if case == "layer_norm":
        _backward_matches(lambda x, w, b: fl.layer_norm(x, (17,), w, b), (19, 17), (17,), (17,))
    elif case == "batch_norm_2d":
        _backward_matches(lambda x, w, b: fl.batch_norm(x, None, None, w, b, True), (21, 5), (5,), (5,))
    else:
        _backward_matches(lambda x, w, b: fl.group_norm(x, 2, w, b), (23, 4), (4,), (4,))
    assert {("column_sums", "partial"), ("column_sums", "parts")} <= set(modes), modes


# --- dtypes and layouts ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["batch_norm", "layer_norm", "group_norm", "max_pool2d", "avg_pool2d",
                                  "adaptive_avg_pool2d", "nearest2d", "bilinear2d"])
def test_float16_computes_in_float32(name):
    c, d = _pair((2, 4, 3, 2), fl.float16)
    calls = {
        "batch_norm": lambda x: fl.batch_norm(x, None, None, None, None, True),
        "layer_norm": lambda x: fl.layer_norm(x, (3, 2)),
        "group_norm": lambda x: fl.group_norm(x, 2),
        "max_pool2d": lambda x: fl.max_pool2d_with_indices(x, 2, 1)[0],
        "avg_pool2d": lambda x: fl.avg_pool2d(x, 2, 1),
        "adaptive_avg_pool2d": lambda x: fl.adaptive_avg_pool2d(x, (2, 1)),
        "nearest2d": lambda x: fl.upsample_nearest2d(x, (4, 3)),
        "bilinear2d": lambda x: fl.upsample_bilinear2d(x, (4, 3), True),
    }
    _close(calls[name](d), calls[name](c), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("dtype", [fl.int32, fl.int64])
def test_integer_pooling(dtype):
    c, d = _pair((1, 2, 4, 5), dtype, low=-9, high=9)
    for call in (lambda x: fl.avg_pool2d(x, 2, 1, 1, True, False), lambda x: fl.max_pool2d_with_indices(x, 3, 2, 1),
                 lambda x: fl.adaptive_max_pool2d(x, (2, 3), True)):
        got, want = call(d), call(c)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert g.dtype is w.dtype
            np.testing.assert_array_equal(g.cpu().numpy(), w.numpy())


def test_strided_views():
    c, d = _pair((3, 4, 5, 2))
    cv, dv = c.permute(0, 3, 1, 2), d.permute(0, 3, 1, 2)  # (3, 2, 4, 5), not contiguous
    _close(fl.avg_pool2d(dv, 2, 1), fl.avg_pool2d(cv, 2, 1))
    _close(fl.upsample_bilinear2d(dv, (5, 7), False), fl.upsample_bilinear2d(cv, (5, 7), False))
    _close(fl.group_norm(dv, 2), fl.group_norm(cv, 2))
    _close(fl.layer_norm(dv, (4, 5)), fl.layer_norm(cv, (4, 5)))
    wc, wd = _pair((5, 4))
    _close(fl.layer_norm(dv, (4, 5), wd.t()), fl.layer_norm(cv, (4, 5), wc.t()))  # a transposed weight
    rm_c, rm_d = fl.zeros(6)[::2], fl.zeros(6, device="cuda")[::2]  # strided running mean, updated in place
    rv_c, rv_d = fl.ones(3, dtype=fl.float64), fl.ones(3, dtype=fl.float64, device="cuda")  # another dtype
    x_c, x_d = c.reshape(10, 3, 4)[:, :, 1:], d.reshape(10, 3, 4)[:, :, 1:]
    _close(fl.batch_norm(x_d, rm_d, rv_d, None, None, True, 0.2), fl.batch_norm(x_c, rm_c, rv_c, None, None, True, 0.2))
    _close(rm_d, rm_c)
    _close(rv_d, rv_c)


def test_empty_batch():
    calls = [lambda x: fl.batch_norm(x, None, None, None, None, True), lambda x: fl.layer_norm(x, (3, 2)),
             lambda x: fl.group_norm(x, 2), lambda x: fl.max_pool2d_with_indices(x, 2)[0],
             lambda x: fl.avg_pool2d(x, 2), lambda x: fl.adaptive_avg_pool2d(x, 1),
             lambda x: fl.upsample_bilinear2d(x, (4, 3), False), lambda x: fl.upsample_nearest2d(x, (4, 3))]
    for call in calls:
        _backward_matches(call, (0, 4, 3, 2))
    _backward_matches(lambda x, w, b: fl.group_norm(x, 2, w, b), (0, 4, 3), (4,), (4,))
    _backward_matches(lambda x, w, b: fl.layer_norm(x, (3,), w, b), (0, 4, 3), (3,), (3,))


# --- batch_norm's running statistics -------------------------------------------------------------------
def test_batch_norm_training_updates_running_stats_on_device_without_sync():
    c, d = _pair((4, 3, 2), grad=True)
    rm_c, rv_c = fl.zeros(3), fl.ones(3)
    rm_d, rv_d = rm_c.to("cuda"), rv_c.to("cuda")
    fl.cuda.synchronize()
    before = fl.cuda.host_sync_count()
    out = fl.batch_norm(d, rm_d, rv_d, None, None, True, 0.3)
    out.sum().backward()
    fl.batch_norm(d, rm_d, rv_d, None, None, False)  # evaluation mode
    assert fl.cuda.host_sync_count() == before
    fl.batch_norm(c, rm_c, rv_c, None, None, True, 0.3)
    _close(rm_d, rm_c)
    _close(rv_d, rv_c)


def test_half_running_stats():
    c, d = _pair((4, 3), fl.float16)
    rm_c, rv_c = fl.zeros(3, dtype=fl.float16), fl.ones(3, dtype=fl.float16)
    rm_d, rv_d = rm_c.to("cuda"), rv_c.to("cuda")
    _close(fl.batch_norm(d, rm_d, rv_d, None, None, True), fl.batch_norm(c, rm_c, rv_c, None, None, True),
           rtol=2e-3, atol=2e-3)
    _close(rm_d, rm_c, rtol=2e-3, atol=2e-3)
    _close(rv_d, rv_c, rtol=2e-3, atol=2e-3)


# --- device error flag and host-side errors ---------------------------------------------------------------
def test_max_pool2d_backward_bad_index_reported_at_sync():
    g = fl.ones((1, 1, 2, 2), device="cuda")
    idx = fl.tensor(np.array([0, 3, 57, 1]).reshape(1, 1, 2, 2), device="cuda")
    out = max_pool2d_backward(g, idx, (1, 1, 3, 3))  # no sync: the kernel skips index 57
    with pytest.raises(RuntimeError, match="index 57 is out of bounds for dimension with size 9"):
        out.cpu()
    np.testing.assert_array_equal(out.cpu().numpy().reshape(-1), [1, 1, 0, 1, 0, 0, 0, 0, 0])


@pytest.mark.parametrize("call, match", [
    (lambda x: fl.layer_norm(x, (5,)), "normalized_shape"),
    (lambda x: fl.group_norm(x, 3), "divisible by num_groups"),
    (lambda x: fl.batch_norm(x, None, None, None, None, False), "must be defined in evaluation mode"),
    (lambda x: fl.max_pool2d(x, 5), "Output size is too small"),
    (lambda x: fl.avg_pool2d(x, 2, 1, 0, False, True, 0), "divisor must be not zero"),
    (lambda x: fl.upsample_bilinear2d(x[0], (3, 3), False), "Expected 4D input"),
])
def test_bad_input_raises_like_cpu(call, match):
    x = fl.ones((2, 4, 4, 4), device="cuda")
    for t in (x, x.cpu()):
        with pytest.raises(RuntimeError, match=match):
            call(t)


@pytest.mark.parametrize("call", [
    lambda x, w: fl.layer_norm(x, (4,), w),
    lambda x, w: fl.group_norm(x, 2, w),
    lambda x, w: fl.batch_norm(x, w, w, None, None, False),
])
def test_mixed_devices_raise(call):
    x = fl.ones((2, 4, 4), device="cuda")
    with pytest.raises(RuntimeError, match="same device"):
        call(x, fl.ones(4))
