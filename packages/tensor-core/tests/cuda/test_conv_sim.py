"""CUDA convolution kernels against the CPU ones, beyond the operator samples (tier 2; also runs on a GPU).

Autograd through ``conv1d`` / ``conv2d`` / ``conv_transpose2d`` on 'cuda' (input, weight and bias
gradients: the transposed convolution, ``convolution_backward_weight`` and a sum), strided inputs,
float16 and integer dtypes, and the errors raised on the host before any launch. Shapes are tiny:
the simulator runs every thread in Python.
"""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau._ops.conv import convolution_backward_weight

RNG = np.random.default_rng(0)


def _t(shape, dtype=fl.float64, requires_grad=False):
    return fl.tensor(RNG.uniform(-2, 2, shape).astype(dtype.np), requires_grad=requires_grad)


def _cuda_leaf(t):
    return t.detach().to("cuda").requires_grad_(t.requires_grad)


def _close(got, want, rtol=1e-6, atol=1e-8):
    assert got.device.type == "cuda" and got.dtype is want.dtype and tuple(got.shape) == tuple(want.shape)
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=rtol, atol=atol)


@pytest.mark.parametrize("fn, xs, ws, kw", [
    (fl.conv2d, (2, 2, 4, 3), (3, 2, 2, 2), {"stride": (2, 1), "padding": 1}),
    (fl.conv2d, (1, 2, 4, 4), (2, 1, 3, 3), {"padding": 1, "groups": 2}),  # depthwise
    (fl.conv1d, (2, 2, 5), (2, 1, 2), {"dilation": 2, "groups": 2}),
    (fl.conv_transpose2d, (1, 2, 3, 2), (2, 2, 2, 2), {"stride": 2, "output_padding": (1, 0)}),
])
def test_autograd_matches_cpu(fn, xs, ws, kw):
    x, w = _t(xs, requires_grad=True), _t(ws, requires_grad=True)
    b = _t((ws[1] * kw.get("groups", 1) if fn is fl.conv_transpose2d else ws[0],), requires_grad=True)
    out = fn(x, w, b, **kw)
    g = _t(tuple(out.shape))
    out.backward(g)
    xc, wc, bc = _cuda_leaf(x), _cuda_leaf(w), _cuda_leaf(b)
    outc = fn(xc, wc, bc, **kw)
    _close(outc, out)
    outc.backward(g.to("cuda"))
    for got, want in ((xc, x), (wc, w), (bc, b)):
        _close(got.grad, want.grad)


@pytest.mark.parametrize("fn, xs, ws, kw", [
    # a channel multiplier of 2, stride, padding and dilation; rows of 3 * 4 * 2 = 24 terms: split in two
    (fl.conv2d, (3, 2, 6, 5), (4, 1, 3, 2), {"stride": (1, 2), "padding": (1, 0), "dilation": (2, 1), "groups": 2}),
    # transposed: its weight gradient is a depthwise one with the roles of input and gradient swapped
    (fl.conv_transpose2d, (2, 4, 3, 3), (4, 1, 2, 2), {"stride": 2, "groups": 2}),
])
def test_depthwise_autograd_without_im2col(fn, xs, ws, kw, monkeypatch):
    """Depthwise convolutions take the direct kernels in every direction, the weight gradient's row
    reduction (split over blocks) included: no im2col columns, and every gradient as on the CPU."""
    from flambeau._kernels.cuda import conv

    monkeypatch.setattr(conv, "_im2col", lambda *a: pytest.fail("a depthwise convolution built im2col columns"))
    test_autograd_matches_cpu(fn, xs, ws, kw)


def test_strided_inputs():
    h = _t((2, 5, 3))
    x, xc = h.transpose(1, 2), h.to("cuda").transpose(1, 2)  # (2, 3, 5) views: the 1-D input is not contiguous
    assert not xc.is_contiguous()
    w = _t((4, 3, 2))
    _close(fl.conv1d(xc, w.to("cuda"), padding=1), fl.conv1d(x, w, padding=1))
    hw = _t((3, 3, 2, 2))
    x2 = _t((1, 3, 3, 4))
    _close(fl.conv2d(x2.to("cuda"), hw.to("cuda").transpose(2, 3)), fl.conv2d(x2, hw.transpose(2, 3)))


@pytest.mark.parametrize("dtype", [fl.float32, fl.float16, fl.int64, fl.int32])
def test_dtypes(dtype):
    x, w, b = _t((1, 2, 3, 3), dtype), _t((2, 2, 2, 2), dtype), _t((2,), dtype)
    want = fl.conv2d(x, w, b, padding=1)
    got = fl.conv2d(x.to("cuda"), w.to("cuda"), b.to("cuda"), padding=1)
    tol = {fl.float16: 2e-3, fl.float32: 1e-5}.get(dtype, 0)
    _close(got, want, rtol=tol, atol=tol)
    g = _t(tuple(want.shape), dtype)
    args = ([2, 2, 2, 2], [1, 1], [1, 1], [1, 1], False, [0, 0], 1)
    _close(convolution_backward_weight(g.to("cuda"), x.to("cuda"), *args), convolution_backward_weight(g, x, *args),
           rtol=tol * 5, atol=tol * 5)


def test_empty_batch():
    x, w = _t((0, 2, 3, 3)), _t((2, 2, 2, 2))
    _close(fl.conv2d(x.to("cuda"), w.to("cuda")), fl.conv2d(x, w))
    g = _t((0, 2, 2, 2))
    args = ([2, 2, 2, 2], [1, 1], [0, 0], [1, 1], False, [0, 0], 1)
    _close(convolution_backward_weight(g.to("cuda"), x.to("cuda"), *args), convolution_backward_weight(g, x, *args))


def test_errors_before_launch():
    x, w = _t((1, 2, 3, 3)).to("cuda"), _t((2, 2, 2, 2))
    with pytest.raises(RuntimeError, match="same device"):
        fl.conv2d(x, w)
    with pytest.raises(RuntimeError, match="weight type"):
        fl.conv2d(x, w.to("cuda").to(fl.float32))
    with pytest.raises(RuntimeError, match="channels"):
        fl.conv2d(x, _t((2, 3, 2, 2)).to("cuda"))
    with pytest.raises(RuntimeError, match="grad_output"):
        convolution_backward_weight(_t((1, 2, 3, 3)).to("cuda"), x, [2, 2, 2, 2], [1, 1], [0, 0], [1, 1], False,
                                    [0, 0], 1)


# --- cuDNN (real GPUs only; the numba path everywhere else) ------------------------------------------
def test_cudnn_declarations_parse_and_simulator_skips_it():
    cffi = pytest.importorskip("cffi")
    from flambeau._kernels.cuda import _cudnn

    ffi = cffi.FFI()
    ffi.cdef(_cudnn._CDEF)  # the declarations are valid C for cffi
    assert ffi.sizeof("fwdPerf_t") >= 36
    from numba.core import config

    if config.ENABLE_CUDASIM:
        assert not _cudnn.available()


def test_cudnn_takes_no_empty_or_oversized_shapes():
    """cuDNN's descriptors refuse zero dims and count elements in int32: such calls stay on the numba path."""
    from flambeau._kernels.cuda import _cudnn

    f32 = np.dtype(np.float32)
    assert _cudnn._supported(f32, (2, 3, 8, 8), (4, 3, 3, 3))
    assert not _cudnn._supported(f32, (0, 3, 8, 8), (4, 3, 3, 3))  # an empty batch
    assert not _cudnn._supported(f32, (2, 3, 8, 8), (4, 3, 0, 3))
    assert not _cudnn._supported(f32, (1 << 16, 1 << 8, 1 << 4, 1 << 4))  # 2^32 elements
    assert _cudnn._supported(f32, (1 << 15, 1 << 8, 1 << 4, 1 << 3))  # 2^30
    assert not _cudnn._supported(np.dtype(np.int32), (2, 3, 8, 8))


class _FakeCudnn:
    """Stands in for libcudnn (through a real cffi FFI): records the calls, fails the one named ``fail``."""

    def __init__(self, ffi, fail=None):
        self.ffi, self.fail, self.calls, self.live = ffi, fail, [], 0

    def __getattr__(self, name):
        def call(*args):
            self.calls.append((name, args))
            if name == self.fail:
                return 3
            if name.startswith("cudnnCreate"):
                args[0][0] = self.ffi.cast("void *", len(self.calls))
                self.live += name != "cudnnCreate"
            elif name.startswith("cudnnDestroy"):
                self.live -= 1
            elif name.endswith("Algorithm_v7"):
                n, perf = args[-2:]
                n[0] = 3
                for i, (status, memory, det, algo) in enumerate(((0, 8, 0, 5), (0, 0, 1, 7), (1, 0, 1, 2))):
                    perf[i].status, perf[i].memory, perf[i].determinism, perf[i].algo = status, memory, det, algo
            elif name.endswith("WorkspaceSize"):
                args[-1][0] = 16
            return 0

        return call


@pytest.fixture
def fake_cudnn(monkeypatch):
    """The cuDNN path of the convolution kernels run against :class:`_FakeCudnn` (under the simulator)."""
    cffi = pytest.importorskip("cffi")
    import threading

    from flambeau._kernels.cuda import _cudnn, conv

    ffi = cffi.FFI()
    ffi.cdef(_cudnn._CDEF)

    def install(fail=None):
        lib = _FakeCudnn(ffi, fail)
        monkeypatch.setattr(_cudnn, "_lib", lambda: (ffi, lib))
        monkeypatch.setattr(_cudnn, "available", lambda: True)
        monkeypatch.setattr(_cudnn, "_tls", threading.local())
        monkeypatch.setattr(_cudnn, "_PLANS", {})  # Note [cuDNN plans]: this test's own
        monkeypatch.setattr(conv, "sim", lambda: False)
        return lib

    return install


@pytest.mark.parametrize("kind, call", [("forward", "cudnnConvolutionForward"),
                                        ("data", "cudnnConvolutionBackwardData"),
                                        ("filter", "cudnnConvolutionBackwardFilter")])
def test_cudnn_calls_and_algorithm_choice(fake_cudnn, kind, call):
    from flambeau._kernels.cuda import conv

    lib = fake_cudnn()
    a, b = _t((1, 2, 3, 3)).to("cuda")._data, _t((2, 2, 2, 2)).to("cuda")._data
    shape = {"forward": (1, 2, 2, 2), "data": (1, 2, 4, 4), "filter": (2, 2, 2, 2)}[kind]
    out = conv._cudnn(kind, a, b, shape, (1, 1), (0, 0), (1, 1), 1)
    assert out is not None and tuple(out.shape) == shape and out.dtype == np.float64
    (args,) = [args for name, args in lib.calls if name == call]
    assert args[7] == 5  # the first algorithm the heuristics rate usable, as torch takes it (not the deterministic 7)
    assert lib.live == 4  # the plan's four descriptors, kept for the next call (Note [cuDNN plans])
    conv._cudnn(kind, a, b, shape, (1, 1), (0, 0), (1, 1), 1)
    assert lib.live == 4 and sum(name.endswith("Algorithm_v7") for name, _ in lib.calls) == 1
    ints = fl.ones((1, 2, 3, 3), dtype=fl.int64).to("cuda")._data
    assert conv._cudnn(kind, ints, b, shape, (1, 1), (0, 0), (1, 1), 1) is None  # other dtypes: the numba path


def test_cudnn_failure_falls_back_to_numba(fake_cudnn):
    lib = fake_cudnn(fail="cudnnConvolutionForward")
    x, w = _t((1, 2, 4, 4)), _t((3, 2, 2, 2))
    _close(fl.conv2d(x.to("cuda"), w.to("cuda"), padding=1), fl.conv2d(x, w, padding=1))
    assert any(name == "cudnnConvolutionForward" for name, _ in lib.calls) and lib.live == 4  # one plan kept


@pytest.mark.gpu
@pytest.mark.parametrize("api", ["graph", "legacy", "benchmark"])
@pytest.mark.parametrize("dtype", [fl.float32, fl.float64])
def test_cudnn_matches_numba_path_and_cpu(dtype, api, monkeypatch):
    """cuDNN's results through its graph API (Note [cuDNN's graph API]), with the engines timed (Note [cuDNN
    benchmark mode]) and through the legacy calls, against the numba kernels' and the CPU's."""
    from flambeau import _determinism
    from flambeau._kernels.cuda import _cudnn

    if not _cudnn.available():
        pytest.skip("libcudnn not installed (pip install nvidia-cudnn-cu12)")
    tol = 1e-4 if dtype is fl.float32 else 1e-10
    cases = [((2, 4, 6, 5), (6, 2, 3, 3), dict(stride=(2, 1), padding=1, dilation=(1, 2), groups=2)),
             ((2, 3, 5, 5), (3, 1, 3, 3), dict(padding=1, groups=3)),
             ((3, 8, 9, 9), (16, 8, 3, 3), dict(padding=1))]
    for xs, ws, kw in cases:
        x, w = _t(xs, dtype, requires_grad=True), _t(ws, dtype, requires_grad=True)
        out = fl.conv2d(x, w, **kw)
        g = _t(tuple(out.shape), dtype)
        out.backward(g)
        results = []
        for use in (True, False):
            monkeypatch.setattr(_cudnn, "_GRAPH_API", api != "legacy")
            monkeypatch.setitem(_determinism.FLAGS, "cudnn.benchmark", api == "benchmark")
            monkeypatch.setattr(_cudnn, "_PLANS", {})
            if not use:
                monkeypatch.setattr(_cudnn, "available", lambda: False)
            xc, wc = _cuda_leaf(x), _cuda_leaf(w)
            outc = fl.conv2d(xc, wc, **kw)
            outc.backward(g.to("cuda"))
            if use:  # every configuration was planned through the API asked for
                plans = [plan for key, plan in _cudnn._PLANS.items() if key[0] in ("forward", "data", "filter")]
                assert plans and {plan.graph for plan in plans} == {api != "legacy"}, plans
            results.append((outc, xc.grad, wc.grad))
            for got, want in zip(results[-1], (out, x.grad, w.grad)):
                _close(got, want, rtol=tol, atol=tol)
        monkeypatch.undo()
    xt, wt = _t((1, 4, 3, 3), dtype), _t((4, 3, 2, 2), dtype)
    _close(fl.conv_transpose2d(xt.to("cuda"), wt.to("cuda"), stride=2, output_padding=1, groups=2),
           fl.conv_transpose2d(xt, wt, stride=2, output_padding=1, groups=2), rtol=tol, atol=tol)
