"""Tests of flambeau/_random.py: Generator, seeding, random factories and in-place random methods."""

import math

import numpy as np
import pytest

import flambeau as fl

FLOATS = [fl.float16, fl.float32, fl.float64]


# --- Generator and seeding -----------------------------------------------------------------------
def test_default_generator_is_a_generator_with_numpy_rng():
    assert isinstance(fl.default_generator, fl.Generator)
    assert isinstance(fl.default_generator._np, np.random.Generator)
    assert isinstance(fl.default_generator._np.bit_generator, np.random.PCG64)


def test_manual_seed_returns_generator_and_is_deterministic():
    g = fl.manual_seed(123)
    assert g is fl.default_generator
    a = fl.rand(5)
    fl.manual_seed(123)
    b = fl.rand(5)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert fl.initial_seed() == 123


def test_generator_manual_seed_returns_self():
    g = fl.Generator()
    assert g.manual_seed(7) is g
    assert g.initial_seed() == 7
    assert g.device == fl.device("cpu")


def test_generators_are_independent_of_default():
    g1 = fl.Generator().manual_seed(5)
    g2 = fl.Generator().manual_seed(5)
    fl.manual_seed(0)
    a = fl.randn(4, generator=g1)
    fl.randn(100)  # draws from the default generator do not disturb g2
    b = fl.randn(4, generator=g2)
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_different_seeds_differ():
    a = fl.rand(10, generator=fl.Generator().manual_seed(1))
    b = fl.rand(10, generator=fl.Generator().manual_seed(2))
    assert not np.array_equal(a.numpy(), b.numpy())


def test_negative_seed_wraps_like_torch():
    g = fl.Generator().manual_seed(-1)
    assert g.initial_seed() == 2**64 - 1


@pytest.mark.parametrize("bad", [1.5, "3"])
def test_manual_seed_rejects_non_integers(bad):
    with pytest.raises(RuntimeError, match="manual_seed expected a long"):
        fl.Generator().manual_seed(bad)


def test_seed_is_nondeterministic_and_recorded():
    g = fl.Generator()
    s1 = g.seed()
    assert g.initial_seed() == s1
    s2 = g.seed()
    assert s1 != s2
    assert 0 <= s1 < 2**64
    assert isinstance(fl.seed(), int)


def test_get_set_state_round_trip():
    g = fl.Generator().manual_seed(42)
    state = g.get_state()
    assert state.dtype is fl.uint8 and state.dim() == 1
    a = fl.randn(7, generator=g)
    g.set_state(state)
    b = fl.randn(7, generator=g)
    np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert g.initial_seed() == 42


def test_state_after_odd_number_of_32bit_draws_round_trips():
    g = fl.Generator().manual_seed(1)
    g._np.integers(0, 10, dtype=np.int32)  # leaves a buffered 32-bit half in PCG64
    state = g.get_state()
    a = g._np.integers(0, 2**31, size=5, dtype=np.int32)
    g.set_state(state)
    np.testing.assert_array_equal(a, g._np.integers(0, 2**31, size=5, dtype=np.int32))


def test_global_rng_state_round_trip():
    s = fl.get_rng_state()
    a = fl.rand(4)
    fl.set_rng_state(s)
    np.testing.assert_array_equal(a.numpy(), fl.rand(4).numpy())


def test_set_state_errors():
    g = fl.Generator()
    with pytest.raises(RuntimeError, match="RNG state is wrong size"):
        g.set_state(fl.zeros(3, dtype=fl.uint8))
    with pytest.raises(TypeError, match="ByteTensor"):
        g.set_state(fl.zeros(56))
    with pytest.raises(TypeError, match="ByteTensor"):
        g.set_state([1, 2])


def test_generator_argument_type_checked():
    with pytest.raises(TypeError, match="generator must be a flambeau.Generator"):
        fl.rand(2, generator=1)


def test_same_seed_same_numbers_for_every_function():
    def draw():
        g = fl.Generator().manual_seed(9)
        t = fl.empty(3)
        return [fl.rand(3, generator=g), fl.randn(3, generator=g), fl.randint(0, 9, (3,), generator=g),
                fl.randperm(5, generator=g), fl.normal(0.0, 1.0, (2,), generator=g),
                fl.bernoulli(fl.full((4,), 0.5), generator=g),
                fl.multinomial(fl.ones(6), 3, generator=g), t.normal_(generator=g).clone(),
                t.uniform_(generator=g).clone(), t.exponential_(generator=g).clone()]
    for a, b in zip(draw(), draw()):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


# --- rand / randn ------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 4), (2, 3, 4)])
def test_rand_shape_dtype_range(dtype, shape):
    t = fl.rand(*shape, dtype=dtype)
    assert tuple(t.shape) == shape and t.dtype is dtype
    a = t.numpy().astype(np.float64)
    assert np.all((a >= 0) & (a <= 1))


def test_rand_default_dtype_and_size_forms():
    assert fl.rand(2, 3).dtype is fl.float32
    assert tuple(fl.rand((2, 3)).shape) == (2, 3)
    assert tuple(fl.rand([2, 3]).shape) == (2, 3)
    assert tuple(fl.randn(fl.Size([4]))).__len__() == 4
    fl.set_default_dtype(fl.float64)
    try:
        assert fl.rand(2).dtype is fl.float64
    finally:
        fl.set_default_dtype(fl.float32)


def test_rand_requires_grad():
    t = fl.randn(3, requires_grad=True)
    assert t.requires_grad and t.is_leaf


@pytest.mark.parametrize("fn", [fl.rand, fl.randn])
def test_rand_rejects_integer_dtype(fn):
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        fn(3, dtype=fl.int64)


def test_rand_negative_size():
    with pytest.raises(RuntimeError, match="negative dimension"):
        fl.rand(-1)


def test_rand_uniform_statistics():
    a = fl.rand(100_000, generator=fl.Generator().manual_seed(0)).numpy().astype(np.float64)
    assert abs(a.mean() - 0.5) < 0.01
    assert abs(a.var() - 1 / 12) < 0.005


def test_randn_statistics():
    a = fl.randn(100_000, generator=fl.Generator().manual_seed(0), dtype=fl.float64).numpy()
    assert abs(a.mean()) < 0.02
    assert abs(a.std() - 1) < 0.02


# --- randint / randperm ------------------------------------------------------------------------------
def test_randint_forms_and_range():
    g = fl.Generator().manual_seed(0)
    t = fl.randint(10, (1000,), generator=g)
    assert t.dtype is fl.int64 and tuple(t.shape) == (1000,)
    a = t.numpy()
    assert a.min() >= 0 and a.max() <= 9 and len(np.unique(a)) == 10
    t = fl.randint(-3, 3, (2, 500), generator=g)
    assert tuple(t.shape) == (2, 500)
    assert t.numpy().min() == -3 and t.numpy().max() == 2
    t = fl.randint(0, 5, size=(4,), dtype=fl.float32)
    assert t.dtype is fl.float32
    assert tuple(fl.randint(3, 5, (2, 2)).shape) == (2, 2)


def test_randint_errors():
    with pytest.raises(RuntimeError, match="random_ expects 'from' to be less than 'to', but got from=5 >= to=5"):
        fl.randint(5, 5, (3,))
    with pytest.raises(RuntimeError, match="uint8"):
        fl.randint(-1, 300, (3,), dtype=fl.uint8)
    with pytest.raises(TypeError, match="randint"):
        fl.randint(1.5, 3, (2,))


@pytest.mark.parametrize("n", [0, 1, 7, 100])
def test_randperm_is_permutation(n):
    t = fl.randperm(n)
    assert t.dtype is fl.int64 and tuple(t.shape) == (n,)
    np.testing.assert_array_equal(np.sort(t.numpy()), np.arange(n))


def test_randperm_errors():
    with pytest.raises(RuntimeError, match="n must be non-negative"):
        fl.randperm(-1)
    with pytest.raises(RuntimeError, match="too large"):
        fl.randperm(300, dtype=fl.uint8)
    assert fl.randperm(4, dtype=fl.float32).dtype is fl.float32


# --- *_like ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("fn", [fl.rand_like, fl.randn_like])
def test_rand_like(fn):
    x = fl.zeros(3, 4, dtype=fl.float64).t()
    r = fn(x)
    assert tuple(r.shape) == (4, 3) and r.dtype is fl.float64
    assert fn(x, dtype=fl.float16).dtype is fl.float16
    with pytest.raises(TypeError, match="must be Tensor"):
        fn([1.0])


def test_randint_like():
    x = fl.zeros(2, 3, dtype=fl.int32)
    r = fl.randint_like(x, 5)
    assert r.dtype is fl.int32 and tuple(r.shape) == (2, 3)
    assert r.numpy().max() < 5
    r = fl.randint_like(x, 10, 12)
    assert set(np.unique(r.numpy())) <= {10, 11}


# --- normal ------------------------------------------------------------------------------------------
def test_normal_float_float_size():
    t = fl.normal(3.0, 2.0, (20000,), generator=fl.Generator().manual_seed(0))
    assert t.dtype is fl.float32
    a = t.numpy().astype(np.float64)
    assert abs(a.mean() - 3) < 0.05 and abs(a.std() - 2) < 0.05


def test_normal_tensor_forms_broadcast():
    mean = fl.tensor([[0.0], [100.0]], dtype=fl.float64)
    std = fl.tensor([1e-6, 1e-6, 1e-6], dtype=fl.float64)
    t = fl.normal(mean, std)
    assert tuple(t.shape) == (2, 3) and t.dtype is fl.float64
    np.testing.assert_allclose(t.numpy(), np.broadcast_to(mean.numpy(), (2, 3)), atol=1e-3)
    t = fl.normal(fl.full((1000,), 5.0), 0.0)
    np.testing.assert_array_equal(t.numpy(), 5.0)
    t = fl.normal(-2.0, fl.zeros(4))
    np.testing.assert_array_equal(t.numpy(), -2.0)


def test_normal_errors_match_torch():
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0, but found std -1"):
        fl.normal(0.0, -1.0, (3,))
    with pytest.raises(RuntimeError, match="normal expects std >= 0.0"):
        fl.normal(fl.zeros(3), -1.0)
    with pytest.raises(RuntimeError, match="normal expects all elements of std >= 0.0"):
        fl.normal(fl.zeros(3), -fl.ones(3))
    with pytest.raises(RuntimeError, match="must broadcast"):
        fl.normal(fl.zeros(3), fl.ones(2))
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        fl.normal(fl.zeros(3, dtype=fl.int64), 1.0)
    with pytest.raises(TypeError, match="size"):
        fl.normal(0.0, 1.0)


def test_poisson():
    p = fl.poisson(fl.from_numpy(np.tile(np.array([0.0, 1.0, 50.0], np.float32), (2000, 1))))
    a = p.numpy()
    assert p.dtype is fl.float32
    assert np.all(a[:, 0] == 0) and abs(a[:, 2].mean() - 50) < 1
    with pytest.raises(RuntimeError, match="invalid Poisson rate"):
        fl.poisson(fl.tensor([-1.0]))


# --- bernoulli ---------------------------------------------------------------------------------------
def test_bernoulli_probabilities():
    probs = np.tile(np.array([0.0, 1.0, 0.3], np.float32), (20000, 1))
    out = fl.bernoulli(fl.from_numpy(probs), generator=fl.Generator().manual_seed(0))
    assert out.dtype is fl.float32 and tuple(out.shape) == (20000, 3)
    a = out.numpy()
    assert set(np.unique(a)) <= {0.0, 1.0}
    assert a[:, 0].sum() == 0 and a[:, 1].all() and abs(a[:, 2].mean() - 0.3) < 0.02


def test_bernoulli_scalar_p_and_method():
    x = fl.zeros(5000, dtype=fl.float64)
    out = fl.bernoulli(x, 0.25)
    assert out.dtype is fl.float64 and abs(out.numpy().mean() - 0.25) < 0.03
    assert fl.full((3,), 1.0).bernoulli().numpy().tolist() == [1.0, 1.0, 1.0]


def test_bernoulli_errors():
    with pytest.raises(RuntimeError, match="Expected p_in >= 0 && p_in <= 1"):
        fl.bernoulli(fl.tensor([0.5, 2.0]))
    with pytest.raises(NotImplementedError, match="not implemented for 'Long'"):
        fl.bernoulli(fl.tensor([1, 0]))
    with pytest.raises(TypeError, match="must be Tensor"):
        fl.bernoulli([0.5])


# --- multinomial -------------------------------------------------------------------------------------
def test_multinomial_with_replacement_frequencies():
    w = fl.tensor([1.0, 0.0, 3.0, 6.0])
    s = fl.multinomial(w, 20000, replacement=True, generator=fl.Generator().manual_seed(0))
    assert s.dtype is fl.int64 and tuple(s.shape) == (20000,)
    counts = np.bincount(s.numpy(), minlength=4) / 20000
    assert counts[1] == 0
    np.testing.assert_allclose(counts, [0.1, 0.0, 0.3, 0.6], atol=0.02)


def test_multinomial_without_replacement_is_distinct():
    w = fl.rand(50, 10) + 0.01
    s = fl.multinomial(w, 10)
    assert tuple(s.shape) == (50, 10)
    for row in s.numpy():
        assert sorted(row.tolist()) == list(range(10))


def test_multinomial_without_replacement_weights():
    # The first pick follows the weights.
    w = fl.tensor([[1.0, 3.0]] * 20000)
    first = fl.multinomial(w, 1, generator=fl.Generator().manual_seed(3)).numpy()[:, 0]
    assert abs(first.mean() - 0.75) < 0.02


def test_multinomial_zero_weights_come_last_like_torch():
    assert fl.multinomial(fl.tensor([1.0, 0.0, 0.0]), 2).tolist() == [0, 1]


def test_multinomial_method():
    assert fl.ones(3).multinomial(2).shape == (2,)


@pytest.mark.parametrize("args, exc, msg", [
    ((fl.tensor([1.0, -1.0, 0.0]), 1), RuntimeError, "probability tensor contains either `inf`, `nan` or element < 0"),
    ((fl.tensor([1.0, float("nan")]), 1), RuntimeError, "probability tensor contains"),
    ((fl.tensor([0.0, 0.0]), 1), RuntimeError, r"invalid multinomial distribution \(sum of probabilities <= 0\)"),
    ((fl.tensor([1, 2]), 1), RuntimeError, "multinomial only supports floating-point dtypes for input, got: Long"),
    ((fl.ones(1, 1, 2), 1), RuntimeError, "prob_dist must be 1 or 2 dim"),
    ((fl.ones(2), 3), RuntimeError, r"cannot sample n_sample > prob_dist.size\(-1\) samples without replacement"),
    ((fl.ones(2), 0), RuntimeError, "cannot sample n_sample <= 0 samples"),
])
def test_multinomial_errors(args, exc, msg):
    with pytest.raises(exc, match=msg):
        fl.multinomial(*args)


def test_multinomial_matches_torch_errors():
    torch = pytest.importorskip("torch")
    for w, n in [([1.0, -1.0], 1), ([0.0, 0.0], 1), ([1.0, 1.0], 3)]:
        with pytest.raises(RuntimeError) as te:
            torch.multinomial(torch.tensor(w), n)
        with pytest.raises(RuntimeError) as fe:
            fl.multinomial(fl.tensor(w), n)
        assert str(fe.value) in str(te.value)


# --- in-place methods --------------------------------------------------------------------------------
INPLACE = [
    ("normal_", (), {}),
    ("uniform_", (), {}),
    ("bernoulli_", (), {}),
    ("random_", (), {}),
    ("exponential_", (), {}),
    ("geometric_", (0.5,), {}),
    ("cauchy_", (), {}),
    ("log_normal_", (), {}),
]


@pytest.mark.parametrize("name, args, kwargs", INPLACE)
def test_inplace_random_returns_self_and_bumps_version(name, args, kwargs):
    t = fl.zeros(4, 5)
    v = t._version
    view = t[1]
    out = getattr(t, name)(*args, **kwargs)
    assert out is t
    assert t._version == v + 1 and view._version == v + 1


@pytest.mark.parametrize("name, args, kwargs", INPLACE)
def test_inplace_random_declared_in_operator_table(name, args, kwargs):
    from flambeau._ops import get_op

    op = get_op(name)
    assert not op.differentiable and not op.function and op.method
    assert getattr(fl.Tensor, name) is op.fn
    assert not hasattr(fl, name)


@pytest.mark.parametrize("name, args, kwargs", INPLACE)
def test_inplace_random_deterministic_with_generator(name, args, kwargs):
    a = getattr(fl.zeros(10, dtype=fl.float64), name)(*args, generator=fl.Generator().manual_seed(4))
    b = getattr(fl.zeros(10, dtype=fl.float64), name)(*args, generator=fl.Generator().manual_seed(4))
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_inplace_on_non_contiguous_view_writes_only_the_view():
    base = fl.zeros(4, 6)
    v = base.t()
    v.uniform_(1.0, 2.0)
    a = base.numpy()
    assert np.all((a >= 1) & (a < 2))
    base = fl.zeros(10)
    base[::2].normal_(5.0, 1e-3)
    a = base.numpy()
    assert np.all(a[1::2] == 0) and np.all(np.abs(a[::2] - 5) < 0.1)


def test_normal_uniform_parameters():
    g = fl.Generator().manual_seed(0)
    a = fl.empty(50000, dtype=fl.float64).normal_(2.0, 3.0, generator=g).numpy()
    assert abs(a.mean() - 2) < 0.05 and abs(a.std() - 3) < 0.05
    a = fl.empty(50000).uniform_(-2.0, 4.0, generator=g).numpy()
    assert a.min() >= -2 and a.max() < 4 and abs(a.mean() - 1) < 0.05
    a = fl.empty(1000).uniform_(**{"from": 5.0, "to": 6.0}).numpy()
    assert a.min() >= 5 and a.max() < 6


def test_exponential_geometric_cauchy_lognormal_distributions():
    g = fl.Generator().manual_seed(1)
    e = fl.empty(50000, dtype=fl.float64).exponential_(2.0, generator=g).numpy()
    assert e.min() >= 0 and abs(e.mean() - 0.5) < 0.02
    geo = fl.empty(50000, dtype=fl.int64).geometric_(0.25, generator=g).numpy()
    assert geo.min() >= 1 and abs(geo.mean() - 4) < 0.1
    c = fl.empty(50001, dtype=fl.float64).cauchy_(3.0, 1.0, generator=g).numpy()
    assert abs(np.median(c) - 3) < 0.05
    ln = fl.empty(50000, dtype=fl.float64).log_normal_(0.0, 0.5, generator=g).numpy()
    assert ln.min() > 0 and abs(np.log(ln).std() - 0.5) < 0.02


def test_bernoulli_inplace_tensor_p():
    t = fl.zeros(3, 4000)
    p = fl.tensor([[0.0], [1.0], [0.5]])
    t.bernoulli_(p)
    a = t.numpy()
    assert a[0].sum() == 0 and a[1].all() and abs(a[2].mean() - 0.5) < 0.05
    t = fl.zeros(1000, dtype=fl.int64).bernoulli_(0.5)
    assert set(np.unique(t.numpy())) <= {0, 1}


@pytest.mark.parametrize("dtype, hi", [(fl.float32, 2**24), (fl.float16, 2**11), (fl.uint8, 255), (fl.int8, 127),
                                       (fl.int32, 2**31 - 1), (fl.int64, 2**63 - 1)])
def test_random_default_range(dtype, hi):
    a = fl.zeros(2000, dtype=dtype).random_().numpy().astype(np.float64)
    assert a.min() >= 0 and a.max() <= hi


def test_random_from_to_forms():
    a = fl.zeros(1000).random_(5).numpy()
    assert set(np.unique(a)) <= set(range(5))
    a = fl.zeros(1000, dtype=fl.int64).random_(-3, 3).numpy()
    assert a.min() == -3 and a.max() == 2
    a = fl.zeros(10, dtype=fl.bool).random_().numpy()
    assert a.dtype == np.bool_


@pytest.mark.parametrize("call, exc, msg", [
    (lambda: fl.zeros(3).normal_(0, -1), RuntimeError, "normal expects std >= 0.0, but found std -1"),
    (lambda: fl.zeros(3, dtype=fl.int64).normal_(), NotImplementedError, "not implemented for 'Long'"),
    (lambda: fl.zeros(3).uniform_(1, 0), RuntimeError,
     r"uniform_ expects to return a \[from, to\) range, but found from=1 > to=0"),
    (lambda: fl.zeros(3, dtype=fl.int64).uniform_(), NotImplementedError, "not implemented for 'Long'"),
    (lambda: fl.zeros(3).bernoulli_(1.5), RuntimeError, r"bernoulli_ expects p to be in \[0, 1\], but got p=1.5"),
    (lambda: fl.zeros(3).bernoulli_(fl.tensor([0.5, 2.0, 0.0])), RuntimeError, "Expected p_in >= 0"),
    (lambda: fl.zeros(3).random_(5, 2), RuntimeError,
     "random_ expects 'from' to be less than 'to', but got from=5 >= to=2"),
    (lambda: fl.zeros(3, dtype=fl.uint8).random_(0, 300), RuntimeError, "uint8"),
    (lambda: fl.zeros(3).exponential_(-1), RuntimeError, "exponential_ expects lambda > 0.0, but found lambda=-1"),
    (lambda: fl.zeros(3).geometric_(0), RuntimeError, r"geometric_ expects p to be in \(0, 1\), but got p=0"),
    (lambda: fl.zeros(3).cauchy_(0, -1), RuntimeError, "cauchy_ expects sigma > 0.0, but found sigma=-1"),
    (lambda: fl.zeros(3).log_normal_(0, -1), RuntimeError, "log_normal_ expects std > 0.0, but found std=-1"),
])
def test_inplace_errors(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


def test_inplace_on_empty_and_zero_dim():
    assert fl.zeros(0).normal_().shape == (0,)
    t = fl.zeros(())
    t.uniform_(2.0, 3.0)
    assert 2 <= t.item() < 3


def test_float16_values_are_finite():
    t = fl.empty(10000, dtype=fl.float16).normal_()
    assert np.all(np.isfinite(t.numpy()))
    assert math.isfinite(float(fl.rand(1, dtype=fl.float16).item()))


def test_randint_keyword_forms():
    t = fl.randint(low=2, high=5, size=(400,))
    assert t.numpy().min() >= 2 and t.numpy().max() < 5
    assert fl.randint(high=3, size=(2,)).shape == (2,)
    assert fl.randint(10, size=(3,)).shape == (3,)
    with pytest.raises(TypeError, match="randint"):
        fl.randint(low=2, size=(3,))


@pytest.mark.parametrize("call", [lambda n: fl.rand(n), lambda n: fl.randn(n), lambda n: fl.randint(0, 5, (n,)),
                                  lambda n: fl.normal(0.0, 1.0, (n,)), lambda n: fl.rand(n, n)],
                         ids=["rand", "randn", "randint", "normal", "rand-2d"])
@pytest.mark.parametrize("n", [10**13, 2**62])
def test_huge_sizes_raise_flambeau_errors_naming_the_size(call, n):
    with pytest.raises(RuntimeError, match=rf"\(\): .*size=\[{n}") as info:
        call(n)
    assert "bytes" in str(info.value)
