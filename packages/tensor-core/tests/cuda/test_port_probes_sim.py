"""Cases a probe of PyTorch idioms on CUDA found failing (tier 2: numba's simulator; also on a GPU): each runs on
'cuda' and on the CPU, and the two must agree (or raise the CPU's error)."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl


def test_sorting_a_0_dim_tensor_gives_tensors_of_its_device():
    for dev in ("cpu", "cuda"):
        x = fl.tensor(2.5, device=dev)
        for out in (x.sort(), x.sort(descending=True), x.topk(1), x.kthvalue(1)):
            assert out.values.device.type == out.indices.device.type == dev
            assert out.values.item() == 2.5 and out.indices.item() == 0 and repr(out.indices)
        assert x.argsort().item() == 0 and x.msort().item() == 2.5


def test_lu_and_lu_unpack_on_cuda():
    a = np.array([[1.0, 2.0, 0.5], [3.0, 4.0, 1.0], [0.0, 1.0, 5.0]])
    for dev in ("cpu", "cuda"):
        A = fl.tensor(a, device=dev)
        P, L, U = fl.linalg.lu(A)
        assert P.device.type == dev
        np.testing.assert_allclose((P @ L @ U).cpu().numpy(), a, atol=1e-12)
        P2, L2, U2 = fl.lu_unpack(*fl.linalg.lu_factor(A))
        np.testing.assert_array_equal(P2.cpu().numpy(), P.cpu().numpy())


def test_integer_powers_with_negative_exponents():
    base, exps = [2, 1, -1, 3, -2, 5], [-1, -2, -3, 2, 3, 0]
    want = (fl.tensor(base) ** fl.tensor(exps)).tolist()
    assert want == [0, 1, -1, 9, -8, 1]  # torch's integer rule
    assert (fl.tensor(base, device="cuda") ** fl.tensor(exps, device="cuda")).tolist() == want
    for dev in ("cpu", "cuda"):
        with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
            fl.tensor([2, 3], device=dev) ** -1
        with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
            fl.tensor([2, 3], device=dev).pow_(-2)


def test_a_device_is_a_context_manager_for_the_factories():
    assert fl.get_default_device() == fl.device("cpu")
    with fl.device("cuda"):
        assert fl.zeros(2).device.type == fl.randn(2).device.type == fl.tensor([1.0]).device.type == "cuda"
        with fl.device("cpu"):
            assert fl.ones(1).device.type == "cpu"
        assert fl.arange(3).device.type == "cuda"
        with pytest.raises(ZeroDivisionError):
            with fl.device("cpu"):
                1 / 0  # noqa: B018
        assert fl.empty(1).device.type == "cuda"
    assert fl.zeros(1).device.type == "cpu" and fl.get_default_device() == fl.device("cpu")
