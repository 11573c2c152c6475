"""Names a PyTorch program reaches for besides the operators: ``backends``, ``compile``, ``jit``, the
determinism and matmul-precision switches, ``random``, ``inference_mode``, layouts, device predicates
and ``range`` indexing, each checked against what torch does with the same call."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flambeau as fl  # noqa: E402
from flambeau import _compile, _determinism  # noqa: E402


@pytest.fixture(autouse=True)
def _restore_flags():
    saved = dict(_determinism.FLAGS)
    yield
    _determinism.FLAGS.clear()
    _determinism.FLAGS.update(saved)


# --- the top level --------------------------------------------------------------------------------
TORCH_NAMES = ["compile", "inference_mode", "is_inference_mode_enabled", "use_deterministic_algorithms",
               "are_deterministic_algorithms_enabled", "is_deterministic_algorithms_warn_only_enabled",
               "set_float32_matmul_precision", "get_float32_matmul_precision", "meshgrid", "cdist", "searchsorted",
               "bucketize", "atleast_1d", "atleast_2d", "atleast_3d", "strided", "sparse_coo", "layout",
               "bfloat16", "complex64", "complex128", "cfloat", "cdouble", "FloatTensor", "LongTensor",
               "DoubleTensor", "IntTensor", "ShortTensor", "ByteTensor", "CharTensor", "BoolTensor", "HalfTensor",
               "BFloat16Tensor", "backends", "jit", "random", "testing", "autocast", "is_autocast_enabled",
               "get_autocast_dtype"]


@pytest.mark.parametrize("name", TORCH_NAMES)
def test_torch_name_exists(name):
    assert hasattr(torch, name)
    assert getattr(fl, name) is not None
    assert name in dir(fl)


def test_import_flambeau_imports_neither_autograd_nor_numba():
    code = ("import sys, flambeau as fl; fl.backends.cudnn.enabled; fl.jit.is_scripting(); "
            "assert 'flambeau.autograd' not in sys.modules and 'numba' not in sys.modules, sorted(sys.modules); "
            "fl.is_inference_mode_enabled(); assert 'flambeau.autograd' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_inference_mode_is_autograd_s():
    from flambeau.autograd import inference_mode, is_inference_mode_enabled

    assert fl.inference_mode is inference_mode and fl.is_inference_mode_enabled is is_inference_mode_enabled
    assert not fl.is_inference_mode_enabled()
    with fl.inference_mode():
        assert fl.is_inference_mode_enabled()
        y = fl.ones(2, requires_grad=True) * 2
    assert not y.requires_grad


def test_unknown_attribute_still_raises():
    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        fl.no_such_name  # noqa: B018


# --- compile and jit --------------------------------------------------------------------------------
def _fresh_warnings():
    _compile._WARNED.clear()


def test_compile_returns_model_and_warns_once():
    _fresh_warnings()

    def f(x):
        return x + 1

    with pytest.warns(UserWarning, match="no fusion or graph compilation"):
        assert fl.compile(f) is f
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fl.compile(f, mode="max-autotune", fullgraph=True, dynamic=False, backend="inductor") is f

        @fl.compile
        def g(x):
            return x

        @fl.compile(mode="reduce-overhead")
        def h(x):
            return x

    assert g.__name__ == "g" and h.__name__ == "h" and h(3) == 3


def test_compile_disable_does_not_warn_and_errors_are_torchs():
    _fresh_warnings()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert fl.compile(len, disable=True) is len
    with pytest.raises(AssertionError, match="A callable function is expected"):
        torch.compile(3)
    with pytest.raises(AssertionError, match="A callable function is expected"):
        fl.compile(3)
    with pytest.raises(RuntimeError, match="Either mode or options can be specified"):
        fl.compile(len, mode="default", options={})


def test_jit():
    _fresh_warnings()
    calls = []

    def f(x):
        calls.append(x)
        return x

    with pytest.warns(UserWarning, match="jit.script"):
        assert fl.jit.script(f) is f
    with pytest.warns(UserWarning, match="jit.trace"):
        assert fl.jit.trace(f, (fl.zeros(2),)) is f
    assert calls == []  # trace runs nothing
    assert fl.jit.ignore(f) is f and fl.jit.ignore(drop=True)(f) is f
    assert fl.jit.unused(f) is f and fl.jit.export(f) is f
    assert fl.jit.is_scripting() is False and torch.jit.is_scripting() is False
    assert fl.jit.is_tracing() is False
    assert fl.jit.Final is torch.jit.Final
    assert fl.jit.annotate(int, 3) == 3 and fl.jit.wait(fl.jit.fork(f, 5)) == 5


# --- backends -------------------------------------------------------------------------------------
def test_cudnn_flags_read_and_write_the_one_table():
    cudnn = fl.backends.cudnn
    for name, default in (("benchmark", False), ("deterministic", False), ("allow_tf32", True)):
        assert getattr(cudnn, name) == getattr(torch.backends.cudnn, name) == default
    cudnn.enabled = False
    assert not _determinism.cudnn_enabled() and not _determinism.FLAGS["cudnn.enabled"]
    cudnn.enabled = True
    assert _determinism.cudnn_enabled()
    cudnn.deterministic = True
    assert _determinism.deterministic()
    cudnn.benchmark = True
    assert _determinism.FLAGS["cudnn.benchmark"] and cudnn.benchmark
    with pytest.raises(TypeError, match="must be a bool"):
        cudnn.enabled = "no"
    cudnn.other = 1  # other attributes are plain module attributes
    assert cudnn.other == 1
    del cudnn.other


def test_cudnn_flags_context_restores():
    cudnn = fl.backends.cudnn
    with cudnn.flags(enabled=False, deterministic=True):
        assert not cudnn.enabled and cudnn.deterministic and not cudnn.benchmark
    assert cudnn.enabled and not cudnn.deterministic


def test_availability_without_a_gpu():
    assert fl.backends.mps.is_available() is False and fl.backends.mps.is_built() is False
    assert fl.backends.cudnn.is_available() is False  # no GPU here (the simulator counts as none)
    assert fl.backends.cudnn.version() is None
    assert fl.backends.cuda.is_built() is True  # numba-cuda is installed
    assert fl.backends.opt_einsum.enabled is True
    assert fl.backends.cpu.get_cpu_capability() in ("DEFAULT", "AVX2", "AVX512")


def test_matmul_precision_and_allow_tf32_follow_each_other():
    matmul = fl.backends.cuda.matmul
    assert fl.get_float32_matmul_precision() == torch.get_float32_matmul_precision() == "highest"
    assert matmul.allow_tf32 is torch.backends.cuda.matmul.allow_tf32 is False
    fl.set_float32_matmul_precision("medium")
    assert matmul.allow_tf32 is True
    matmul.allow_tf32 = False
    assert fl.get_float32_matmul_precision() == "highest"
    matmul.allow_tf32 = True
    assert fl.get_float32_matmul_precision() == "high"
    with pytest.warns(UserWarning, match="is not one of 'highest', 'high', or 'medium'"):
        fl.set_float32_matmul_precision("fastest")
    assert fl.get_float32_matmul_precision() == "high"
    assert matmul.allow_fp16_reduced_precision_reduction is True
    matmul.allow_fp16_reduced_precision_reduction = False
    assert _determinism.FLAGS["cuda.matmul.allow_fp16_reduced_precision_reduction"] is False


def test_deterministic_algorithms_as_torch():
    assert fl.are_deterministic_algorithms_enabled() is False
    fl.use_deterministic_algorithms(True, warn_only=True)
    assert fl.are_deterministic_algorithms_enabled() and fl.is_deterministic_algorithms_warn_only_enabled()
    assert _determinism.deterministic()
    fl.use_deterministic_algorithms(False)
    assert not fl.are_deterministic_algorithms_enabled() and not fl.is_deterministic_algorithms_warn_only_enabled()
    _determinism.alert_not_deterministic("index_add_cuda_")  # off: nothing
    fl.use_deterministic_algorithms(True)
    with pytest.raises(RuntimeError, match="index_add_cuda_ does not have a deterministic implementation"):
        _determinism.alert_not_deterministic("index_add_cuda_")
    fl.use_deterministic_algorithms(True, warn_only=True)
    with pytest.warns(UserWarning, match="does not have a deterministic implementation"):
        _determinism.alert_not_deterministic("index_add_cuda_")
    fl.use_deterministic_algorithms(False)
    with pytest.raises(TypeError, match="argument 'mode' .*must be bool"):
        torch.use_deterministic_algorithms(1)
    with pytest.raises(TypeError, match="argument 'mode' must be bool, not int"):
        fl.use_deterministic_algorithms(1)


# --- random -----------------------------------------------------------------------------------------
def test_fork_rng_restores_the_cpu_generator():
    fl.manual_seed(3)
    want = fl.rand(4)
    fl.manual_seed(3)
    with fl.random.fork_rng():
        fl.rand(10)
    np.testing.assert_array_equal(fl.rand(4).numpy(), want.numpy())
    fl.manual_seed(3)
    with fl.random.fork_rng(enabled=False):
        fl.rand(4)
    assert not np.array_equal(fl.rand(4).numpy(), want.numpy())
    with fl.random.fork_rng(devices=iter([])):  # an iterator is read once
        pass


def test_random_module_is_the_global_state():
    r = fl.random
    assert r.manual_seed is fl.manual_seed and r.initial_seed is fl.initial_seed
    r.manual_seed(7)
    assert r.initial_seed() == 7
    state = r.get_rng_state()
    a = fl.rand(3)
    r.set_rng_state(state)
    np.testing.assert_array_equal(fl.rand(3).numpy(), a.numpy())
    assert isinstance(r.seed(), int)


# --- tensors ----------------------------------------------------------------------------------------
PREDICATES = ["is_sparse", "is_quantized", "is_meta", "is_mkldnn", "is_nested", "is_xpu", "is_mps", "is_vulkan",
              "is_ipu"]


@pytest.mark.parametrize("name", PREDICATES)
def test_device_predicates_are_false_like_torchs(name):
    assert getattr(fl.zeros(2), name) is getattr(torch.zeros(2), name) is False


def test_layout():
    x = fl.zeros(2)
    assert x.layout is fl.strided and x.layout == fl.strided and repr(fl.strided) == "flambeau.strided"
    assert fl.sparse_coo is not fl.strided and isinstance(fl.strided, fl.layout)
    import pickle

    assert pickle.loads(pickle.dumps(fl.sparse_coo)) is fl.sparse_coo


@pytest.mark.parametrize("key", [range(2), (range(3), [0, 1, 2]), (slice(None), range(1, 3)), range(0),
                                 (range(2), range(2)), ([0, 2], [1, 3]), ([[0, 1]], [[2, 3]]), []])
def test_indexing_with_range_and_lists(key):
    x, t = fl.arange(12.0).reshape(3, 4), torch.arange(12.0).reshape(3, 4)
    got, want = x[key], t[key]
    assert tuple(got.shape) == tuple(want.shape)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_setitem_with_range():
    x, t = fl.zeros(3, 4), torch.zeros(3, 4)
    x[range(3), fl.tensor([0, 1, 3])] = 5.0
    t[range(3), torch.tensor([0, 1, 3])] = 5.0
    x[range(1)] = 7.0
    t[range(1)] = 7.0
    np.testing.assert_array_equal(x.numpy(), t.numpy())
