"""Random numbers drawn on the device (Note [Philox on the device] in flambeau._kernels.cuda.random).

The reference is an independent numpy implementation of Philox4x32-10 (Salmon et al., SC'11, the
published round constants): the device's samples must equal it bit for bit, whatever the launch
shape. Distributions are checked by their moments on small draws (the simulator is slow).
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl

M0, M1, W0, W1 = 0xD2511F53, 0xCD9E8D57, 0x9E3779B9, 0xBB67AE85


def philox_reference(counters: np.ndarray, seed: int, offset: int) -> np.ndarray:
    """Philox4x32-10 of counters ``(g, offset)`` under key ``seed``: an ``(n, 4)`` uint64 array of words."""
    g = counters.astype(np.uint64)
    mask = np.uint64(0xFFFFFFFF)
    c = [g & mask, g >> np.uint64(32), np.full_like(g, offset & 0xFFFFFFFF), np.full_like(g, offset >> 32)]
    k0, k1 = seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF
    for _ in range(10):
        p0 = np.uint64(M0) * c[0]
        p1 = np.uint64(M1) * c[2]
        c = [(p1 >> np.uint64(32)) ^ c[1] ^ np.uint64(k0), p1 & mask,
             (p0 >> np.uint64(32)) ^ c[3] ^ np.uint64(k1), p0 & mask]
        k0, k1 = (k0 + W0) & 0xFFFFFFFF, (k1 + W1) & 0xFFFFFFFF
    return np.stack(c, axis=1)


def test_uniform_float32_is_philox_bit_for_bit():
    g = fl.Generator("cuda").manual_seed(1234)
    n = 37
    got = fl.rand(n, device="cuda", generator=g).cpu().numpy()
    words = philox_reference(np.arange((n + 3) // 4), 1234, 0).reshape(-1)[:n]
    want = (words >> np.uint64(8)).astype(np.float64) * 2.0 ** -24
    np.testing.assert_array_equal(got, want.astype(np.float32))
    # the second launch uses offset 1
    got2 = fl.rand(n, device="cuda", generator=g).cpu().numpy()
    words = philox_reference(np.arange((n + 3) // 4), 1234, 1).reshape(-1)[:n]
    np.testing.assert_array_equal(got2, ((words >> np.uint64(8)).astype(np.float64) * 2.0 ** -24).astype(np.float32))


def test_uniform_float64_uses_two_words_per_sample():
    g = fl.Generator("cuda").manual_seed(7)
    got = fl.rand(9, device="cuda", dtype=fl.float64, generator=g).cpu().numpy()
    w = philox_reference(np.arange(5), 7, 0)  # two samples per group
    bits = np.stack([(w[:, 0] << np.uint64(32)) | w[:, 1], (w[:, 2] << np.uint64(32)) | w[:, 3]], 1).reshape(-1)[:9]
    np.testing.assert_array_equal(got, (bits >> np.uint64(11)).astype(np.float64) * 2.0 ** -53)


def test_strided_destination_gets_samples_in_logical_order():
    g = fl.Generator("cuda").manual_seed(3)
    t = fl.zeros(4, 6, device="cuda").t()  # (6, 4), column-major
    t.uniform_(generator=g)
    g.manual_seed(3)
    want = fl.rand(6, 4, device="cuda", generator=g)
    np.testing.assert_array_equal(t.cpu().numpy(), want.cpu().numpy())


def test_seeding_reproduces_and_manual_seed_reaches_cuda():
    fl.manual_seed(11)
    a = fl.randn(20, device="cuda").cpu().numpy()
    fl.manual_seed(11)
    b = fl.randn(20, device="cuda").cpu().numpy()
    np.testing.assert_array_equal(a, b)
    fl.cuda.manual_seed(5)
    assert fl.cuda.initial_seed() == 5
    c = fl.randn(20, device="cuda").cpu().numpy()
    assert not np.array_equal(a, c)


def test_state_round_trip_is_torch_shaped():
    g = fl.Generator("cuda").manual_seed(99)
    fl.rand(3, device="cuda", generator=g)
    state = g.get_state()
    assert state.dtype is fl.uint8 and state.numel() == 16
    x = fl.rand(10, device="cuda", generator=g).cpu().numpy()
    g.set_state(state)
    np.testing.assert_array_equal(fl.rand(10, device="cuda", generator=g).cpu().numpy(), x)
    s = fl.cuda.get_rng_state()
    y = fl.rand(4, device="cuda").cpu().numpy()
    fl.cuda.set_rng_state(s)
    np.testing.assert_array_equal(fl.rand(4, device="cuda").cpu().numpy(), y)
    with pytest.raises(RuntimeError, match="wrong size"):
        g.set_state(fl.zeros(56, dtype=fl.uint8))


def test_generator_of_the_wrong_device_type_is_refused():
    with pytest.raises(RuntimeError, match="Expected a 'cuda' device type for generator but found 'cpu'"):
        fl.rand(3, device="cuda", generator=fl.Generator())
    with pytest.raises(RuntimeError, match="Expected a 'cpu' device type"):
        fl.rand(3, generator=fl.Generator("cuda"))


N = 4000


@pytest.mark.parametrize("dtype", [fl.float32, fl.float64])
@pytest.mark.parametrize("method, args, mean, var", [
    ("uniform_", (-2.0, 4.0), 1.0, 3.0),
    ("normal_", (1.5, 2.0), 1.5, 4.0),
    ("exponential_", (2.0,), 0.5, 0.25),
    ("geometric_", (0.25,), 4.0, 12.0),
    ("log_normal_", (0.0, 0.5), np.exp(0.125), (np.exp(0.25) - 1) * np.exp(0.25)),
    ("bernoulli_", (0.3,), 0.3, 0.21),
])
def test_distribution_moments(dtype, method, args, mean, var):
    t = fl.empty(N, device="cuda", dtype=dtype)
    getattr(t, method)(*args)
    x = t.cpu().numpy().astype(np.float64)
    se = np.sqrt(var / N)
    assert abs(x.mean() - mean) < 5 * se, (x.mean(), mean)
    assert abs(x.var() - var) < 0.25 * var


def test_cauchy_median_and_geometric_support():
    t = fl.empty(N, device="cuda").cauchy_(3.0, 0.5)
    assert abs(np.median(t.cpu().numpy()) - 3.0) < 0.1
    g = fl.empty(N, device="cuda").geometric_(0.9).cpu().numpy()
    assert g.min() == 1 and np.all(g == np.floor(g))


def test_integers_cover_the_range_uniformly():
    r = fl.randint(-3, 5, (N,), device="cuda").cpu().numpy()
    assert r.dtype == np.int64 and r.min() == -3 and r.max() == 4
    counts = np.bincount(r + 3)
    assert counts.min() > N / 8 * 0.8
    u8 = fl.empty(500, dtype=fl.uint8, device="cuda").random_().cpu().numpy()
    assert u8.max() > 200
    f = fl.empty(500, device="cuda").random_(10).cpu().numpy()
    assert set(np.unique(f)) <= set(range(10))


def test_other_dtypes_are_drawn_and_cast():
    h = fl.empty(300, dtype=fl.float16, device="cuda").uniform_(-1, 1).cpu().numpy()
    assert h.dtype == np.float16 and -1 <= h.min() and h.max() <= 1
    b = fl.empty(N, dtype=fl.bool, device="cuda").bernoulli_(0.7).cpu().numpy()
    assert b.dtype == np.bool_ and abs(b.mean() - 0.7) < 0.05


def test_bernoulli_with_probability_tensors():
    p = fl.tensor([0.0, 1.0] * 500, device="cuda")
    out = fl.bernoulli(p).cpu().numpy()
    np.testing.assert_array_equal(out, p.cpu().numpy())
    t = fl.zeros(3, 400, device="cuda").bernoulli_(fl.tensor([[0.0], [0.5], [1.0]], device="cuda"))
    rows = t.cpu().numpy().mean(axis=1)
    assert rows[0] == 0 and rows[2] == 1 and 0.35 < rows[1] < 0.65


def test_dropout_on_the_device_keeps_and_scales_and_backpropagates():
    x = fl.ones(N, device="cuda", requires_grad=True)
    y = fl.dropout(x, 0.25)
    out = y.detach().cpu().numpy()
    kept = out != 0
    assert abs(kept.mean() - 0.75) < 0.05
    np.testing.assert_allclose(out[kept], 1 / 0.75, rtol=1e-6)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.cpu().numpy() != 0, kept)


def test_drawing_does_not_synchronise():
    before = fl.cuda.host_sync_count()
    t = fl.empty(64, device="cuda")
    t.normal_()
    fl.rand(8, device="cuda")
    fl.randint(0, 3, (5,), device="cuda")
    fl.dropout(t, 0.5)
    assert fl.cuda.host_sync_count() == before
