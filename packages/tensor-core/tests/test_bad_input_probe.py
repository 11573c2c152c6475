"""What a probe of mutated operator calls (40k calls, each in a subprocess) found, against torch: two hangs,
silently wrong results and unchecked arguments, each fixed."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest

import flambeau as fl

torch = pytest.importorskip("torch")
NAN = float("nan")


@pytest.mark.parametrize("kind", ["t", "u", "v", "w"])
def test_chebyshev_polynomials_of_huge_orders_return(kind):
    # torch's loops stop at a NaN term: outside [-1, 1] an order of 2**40 ran the recurrence for ever
    name = f"chebyshev_polynomial_{kind}"
    x = [[2.0, -3.0, 1.0, -1.0, 1.5]]
    start = time.perf_counter()
    got = getattr(fl.special, name)(fl.tensor(x, dtype=fl.float64), 2**40).numpy()
    assert time.perf_counter() - start < 10
    want = getattr(torch.special, name)(torch.tensor(x, dtype=torch.float64), 2**40).numpy()
    np.testing.assert_allclose(got, want, equal_nan=True)


def test_vander_of_a_huge_order_fails_at_once():
    start = time.perf_counter()
    with pytest.raises(RuntimeError, match="not enough memory"):
        fl.vander(fl.tensor([1.0, 2.0]), N=2**40)
    assert time.perf_counter() - start < 10


def test_addcmul_and_addcdiv_into_complex_keep_the_value():
    # a real value was truncated to an int for complex results: value=0.5 left the input unchanged
    for value in (0.5, 2.0, 1.5j):
        results = []
        for lib in (fl, torch):
            z = lib.tensor([0.125 - 1j, -0.25 + 2j], dtype=lib.complex128)
            a, b = lib.tensor([1.0, 2.0], dtype=lib.float64), lib.tensor([3.0, 4.0], dtype=lib.float64)
            results.append([lib.addcmul(z, a, b, value=value).numpy(), lib.addcdiv(z, a, b, value=value).numpy(),
                            z.clone().addcmul_(a, b, value=value).numpy()])
        for got, want in zip(*results):
            np.testing.assert_allclose(got, want, rtol=1e-12)


def test_logsumexp_of_complex_keeps_the_imaginary_part():
    values = [[1 + 1j, 2 - 1j, 0.5 + 3j], [-1 - 1j, 0j, 4 + 0.5j]]
    results = []
    for lib in (fl, torch):
        x = lib.tensor(values, dtype=lib.complex128, requires_grad=True)
        y = lib.logsumexp(x, 1)
        z = lib.logsumexp(x, (0, 1), keepdim=True)
        (y.abs().sum() + z.real.sum()).backward()
        results.append([y.detach().numpy(), z.detach().numpy(), x.grad.numpy()])
    for got, want in zip(*results):
        np.testing.assert_allclose(got, want, rtol=1e-10)


@pytest.mark.parametrize("make", [
    lambda lib: lib.zeros(3, dtype=lib.int64).masked_fill(lib.tensor([True, False, True]), NAN),
    lambda lib: lib.zeros(2, dtype=lib.int32).masked_fill_(lib.tensor([True, True]), 2**40),
    lambda lib: lib.full((2,), NAN, dtype=lib.int64),
    lambda lib: lib.full((2,), 300, dtype=lib.uint8),
    lambda lib: lib.tensor(NAN, dtype=lib.int64),
    lambda lib: lib.tensor([300], dtype=lib.uint8),
    lambda lib: lib.tensor([1.0, float("inf")], dtype=lib.int32),
])
def test_values_an_integer_dtype_cannot_hold_are_refused(make):
    # numpy's casts made values up (INT64_MIN for NaN, 44 for 300 in uint8)
    with pytest.raises(RuntimeError, match="value cannot be converted to type .* without overflow"):
        make(torch)
    with pytest.raises(RuntimeError, match="value cannot be converted to type (int64|int32|uint8) without overflow"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # (and no numpy warning on the way)
            make(fl)


def test_values_an_integer_dtype_can_hold_are_taken():
    for make in (lambda lib: lib.tensor([1.7, -2.5], dtype=lib.int64), lambda lib: lib.full((2,), -1, dtype=lib.int8),
                 lambda lib: lib.tensor([True, False], dtype=lib.uint8),
                 lambda lib: lib.tensor([2**63 - 1], dtype=lib.int64),
                 lambda lib: lib.zeros(2).masked_fill(lib.tensor([True, False]), float("-inf"))):
        assert make(fl).tolist() == make(torch).tolist()


def test_index_copy_and_add_need_a_source():
    # a None source wrote NaN rows
    x = fl.zeros(4, 4)
    for fn in (fl.index_copy, fl.index_add):
        with pytest.raises(TypeError, match="argument 'source' must be Tensor, not NoneType"):
            fn(x, 0, fl.tensor([0, 1]), None)


def test_lu_solve_checks_the_pivots_shape():
    a = torch.tensor([[4.0, 1.0, 2.0], [1.0, 3.0, 0.0], [2.0, 0.0, 5.0]], dtype=torch.float64)
    lu, pivots = torch.linalg.lu_factor(a)
    lu, pivots, b = fl.tensor(lu.numpy()), fl.tensor(pivots.numpy()), fl.ones(3, 1, dtype=fl.float64)
    for bad in (pivots[:1], pivots[None].expand(2, 3)):  # (too few row swaps solved with a wrong answer)
        with pytest.raises(RuntimeError, match=r"LU_pivots must have shape \[3\]"):
            fl.linalg.lu_solve(lu, bad, b)
    np.testing.assert_allclose((fl.tensor(a.numpy()) @ fl.linalg.lu_solve(lu, pivots, b)).numpy(), b.numpy())


def test_searchsorted_refuses_complex_as_torch():
    for lib in (fl, torch):
        with pytest.raises(NotImplementedError, match="not implemented for 'ComplexFloat'"):
            lib.bucketize(lib.ones(3).to(lib.complex64), lib.tensor([0.0, 1.0]))


@pytest.mark.parametrize("call, match", [
    (lambda lib: lib.nn.functional.conv2d(lib.randn(1, 2, 4, 4), lib.randn(3, 2, 0, 2)),
     "kernel size should be greater than zero"),
    (lambda lib: lib.nn.functional.batch_norm(lib.randn(4, 3), lib.zeros(3), None, training=True),
     "running_mean and running_var must either both be None or neither be None"),
    (lambda lib: lib.nn.functional.batch_norm(lib.randn(4, 3), lib.zeros(3), lib.ones(3), training=True, eps=0.0),
     "batch_norm eps must be positive during training"),
    (lambda lib: lib.nn.functional.rrelu(lib.randn(3), 0.5, 0.1), "Lower bound should be less than or equal"),
])
def test_argument_checks_torch_has(call, match):
    # each returned a result (zeros for the empty kernel, a division by sqrt(var) for eps 0)
    for lib in (torch, fl):
        with pytest.raises((RuntimeError, ValueError), match=match):
            call(lib)
    with pytest.raises(RuntimeError, match=r"running_mean should be a 1-D tensor of 3 elements, got shape \[3, 1\]"):
        fl.nn.functional.batch_norm(fl.randn(4, 3), fl.zeros(3, 1), fl.ones(3, 1))


def test_binary_cross_entropy_checks_the_target_range_on_the_cpu():
    for lib in (torch, fl):
        with pytest.raises(RuntimeError, match="all elements of target should be between 0 and 1"):
            lib.nn.functional.binary_cross_entropy(lib.full((3,), 0.5), lib.tensor([0.0, 2.0, 1.0]))
