"""Without CUDA every path that needs a device raises ``RuntimeError: CUDA is not available: <why>``.

torch raises "Torch not compiled with CUDA enabled" / "Found no NVIDIA driver on your system" from its
``_lazy_init``; flambeau's ``flambeau.cuda._lazy_init`` says which of numba-cuda, the driver or a GPU is
missing. numba-cuda's own errors (``CudaSupportError`` and its advice about ``NUMBA_CUDA_DRIVER``) never
reach the user, and ``flambeau.cuda.is_available()`` answers False without raising.
"""

from __future__ import annotations

import sys

import pytest

import flambeau as fl

pytestmark = pytest.mark.skipif(fl.cuda.is_available(), reason="CUDA (or numba's simulator) is available here")

NEEDS_A_DEVICE = {
    "Tensor.to('cuda')": lambda: fl.ones(2).to("cuda"),
    "Tensor.to('cuda:0')": lambda: fl.ones(2).to("cuda:0"),
    "Tensor.to(device=device('cuda', 1))": lambda: fl.ones(2).to(device=fl.device("cuda", 1)),
    "Tensor.to(other, device='cuda')": lambda: fl.ones(2).to(fl.zeros(1), device="cuda"),
    "Tensor.cuda()": lambda: fl.ones(2).cuda(),
    "zeros(device='cuda')": lambda: fl.zeros(3, device="cuda"),
    "ones(device=0)": lambda: fl.ones(3, device=0),
    "tensor(device='cuda')": lambda: fl.tensor([1.0], device="cuda"),
    "randn(device='cuda')": lambda: fl.randn(2, device="cuda"),
    "arange(device='cuda')": lambda: fl.arange(3, device="cuda"),
    "empty_like(device='cuda')": lambda: fl.empty_like(fl.ones(2), device="cuda"),
    "cuda.synchronize()": lambda: fl.cuda.synchronize(),
    "cuda.current_device()": lambda: fl.cuda.current_device(),
    "cuda.set_device(0)": lambda: fl.cuda.set_device(0),
    "cuda.device(0)": lambda: fl.cuda.device(0).__enter__(),
    "cuda.Stream()": lambda: fl.cuda.Stream(),
    "cuda.current_stream()": lambda: fl.cuda.current_stream(),
    "cuda.default_stream()": lambda: fl.cuda.default_stream(),
    "cuda.Event().record()": lambda: fl.cuda.Event().record(),
}


@pytest.mark.parametrize("call", sorted(NEEDS_A_DEVICE))
def test_paths_that_need_a_device_say_cuda_is_not_available(call):
    with pytest.raises(RuntimeError, match=r"^CUDA is not available: \S") as info:
        NEEDS_A_DEVICE[call]()
    assert type(info.value) is RuntimeError  # not numba-cuda's CudaSupportError
    assert "NUMBA_" not in str(info.value)


def test_queries_answer_without_raising():
    assert fl.cuda.is_available() is False
    assert fl.cuda.device_count() == 0
    assert fl.cuda.memory_allocated() == 0
    fl.cuda.empty_cache()
    d = fl.device("cuda")  # naming a device needs no device, as in torch
    assert d.type == "cuda" and d.index is None
    # seeding helpers call these unconditionally: torch queues them until CUDA starts (never, here)
    fl.cuda.manual_seed(0)
    fl.cuda.manual_seed_all(0)
    fl.cuda.seed()
    fl.cuda.seed_all()
    try:  # an except clause naming torch's class must not fail with an AttributeError
        raise ValueError
    except fl.cuda.OutOfMemoryError:
        raise AssertionError("not an out-of-memory error") from None
    except ValueError:
        pass
    assert fl.OutOfMemoryError is fl.cuda.OutOfMemoryError and issubclass(fl.OutOfMemoryError, RuntimeError)


@pytest.fixture
def fresh(monkeypatch):
    """Forget the cached answer of is_available() for the test; the fixture's end restores it."""
    monkeypatch.setattr(fl.cuda, "_available", [])
    monkeypatch.setattr(fl.cuda, "_why_not", [None])
    return monkeypatch


def test_reason_numba_cuda_not_installed(fresh):
    import numba

    fresh.delattr(numba, "cuda", raising=False)
    fresh.setitem(sys.modules, "numba.cuda", None)  # `from numba import cuda` now fails as if not installed
    assert fl.cuda.is_available() is False
    with pytest.raises(RuntimeError, match=r"CUDA is not available: numba-cuda is not installed \(pip install"):
        fl.zeros(2, device="cuda")


def test_reason_no_driver(fresh):
    from numba import cuda as ncuda

    fresh.setattr(ncuda, "is_available", lambda: False)
    fresh.setattr(ncuda, "cuda_error", lambda: "\nCUDA driver library cannot be found.\nEnsure that a compatible "
                                               "NVIDIA driver is installed and available on your system path.\n")
    with pytest.raises(RuntimeError, match=r"^CUDA is not available: no CUDA driver was found "
                                           r"\(CUDA driver library cannot be found\)$"):
        fl.cuda.synchronize()


def test_reason_no_gpu(fresh):
    from numba import cuda as ncuda

    fresh.setattr(ncuda, "is_available", lambda: False)
    fresh.setattr(ncuda, "cuda_error", lambda: "Error at driver init: Call to cuInit results in "
                                               "CUDA_ERROR_NO_DEVICE (100)")
    with pytest.raises(RuntimeError, match=r"^CUDA is not available: no CUDA GPU was found"):
        fl.ones(1).cuda()


def test_reason_when_numba_raises(fresh):
    from numba import cuda as ncuda

    def boom():
        raise OSError("libcuda.so: cannot open shared object file")

    fresh.setattr(ncuda, "is_available", boom)
    assert fl.cuda.is_available() is False
    with pytest.raises(RuntimeError, match="CUDA is not available: libcuda.so: cannot open shared object file"):
        fl.cuda.current_device()
