"""torch's low-level autocast setters (torch.set_autocast_enabled ...), against torch 2.13 on CPU."""

import pytest

import flambeau as fl
from flambeau.amp import autocast_mode

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _restore():
    yield
    fl.set_autocast_enabled("cpu", False)
    fl.set_autocast_cpu_dtype(fl.bfloat16)
    fl.set_autocast_cache_enabled(True)
    torch.set_autocast_enabled("cpu", False)
    torch.set_autocast_cpu_dtype(torch.bfloat16)
    assert autocast_mode._state.mode is None


def _mm_dtype(m):
    a = m.ones(2, 2)
    return str((a @ a).dtype).split(".")[1]


def test_set_autocast_enabled_without_a_region():
    for m in (fl, torch):
        m.set_autocast_enabled("cpu", True)
    assert _mm_dtype(fl) == _mm_dtype(torch) == "bfloat16"
    assert fl.is_autocast_enabled("cpu") and fl.is_autocast_cpu_enabled() and not fl.is_autocast_enabled()
    for m in (fl, torch):
        m.set_autocast_enabled("cpu", False)
    assert _mm_dtype(fl) == _mm_dtype(torch) == "float32"
    assert autocast_mode._state.mode is None  # the dispatch mode is gone: no cost off


def test_deprecated_cpu_setters_and_dtypes():
    for m in (fl, torch):
        m.set_autocast_cpu_enabled(True)
        m.set_autocast_dtype("cpu", m.float16)
    assert fl.get_autocast_cpu_dtype() is fl.float16 and fl.get_autocast_dtype("cpu") is fl.float16
    assert _mm_dtype(fl) == _mm_dtype(torch) == "float16"
    fl.set_autocast_gpu_dtype(fl.bfloat16)
    assert fl.get_autocast_gpu_dtype() is fl.bfloat16
    fl.set_autocast_gpu_dtype(fl.float16)
    assert fl.get_autocast_gpu_dtype() is torch_dtype_of(torch.get_autocast_gpu_dtype())


def torch_dtype_of(dtype):
    return getattr(fl, str(dtype).split(".")[1])


def test_nesting_and_cache():
    assert [fl.autocast_increment_nesting(), fl.autocast_increment_nesting(), fl.autocast_decrement_nesting(),
            fl.autocast_decrement_nesting()] == [torch.autocast_increment_nesting(), torch.autocast_increment_nesting(),
                                                 torch.autocast_decrement_nesting(), torch.autocast_decrement_nesting()]
    fl.set_autocast_cache_enabled(False)
    assert not fl.is_autocast_cache_enabled()
    fl.clear_autocast_cache()


def test_region_inside_setter_restores_it():
    fl.set_autocast_enabled("cpu", True)
    with fl.autocast("cpu", enabled=False):
        assert _mm_dtype(fl) == "float32"
    assert _mm_dtype(fl) == "bfloat16" and fl.is_autocast_enabled("cpu")


def test_setter_errors_match_torch():
    def kind(fn):
        try:
            fn()
        except Exception as error:  # noqa: BLE001
            return type(error)
        return None

    assert kind(lambda: fl.set_autocast_enabled("cpu", 1)) is kind(lambda: torch.set_autocast_enabled("cpu", 1))
    assert kind(lambda: fl.set_autocast_cache_enabled(1)) is TypeError
    assert kind(lambda: fl.set_autocast_enabled("xyz", True)) is RuntimeError
    fl.set_autocast_enabled(True)  # torch's one-argument overload: CUDA
    assert fl.is_autocast_enabled()
    fl.set_autocast_enabled(False)
