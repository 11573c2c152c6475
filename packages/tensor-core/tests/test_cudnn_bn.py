"""Batch norm through cuDNN (Note [Batch norm through cuDNN] in ``flambeau._kernels.cuda._cudnn_bn``) against a
fake libcudnn: the arguments of each call, which calls cuDNN takes and which fall back to flambeau's kernels, and
the descriptors kept per shape. The fake's functions take the real calls' parameters, one by one, so a call with
an argument too many or too few fails here. The real library runs in the CUDA tier on a GPU, where batch_norm is
compared with the CPU.
"""

from __future__ import annotations

import itertools
import types

import numpy as np
import pytest

cffi = pytest.importorskip("cffi")

from flambeau._kernels.cuda import _cudnn, _cudnn_bn, _launch  # noqa: E402
from flambeau.cuda import _streams  # noqa: E402


class FakeCudnn:
    """The functions the batch norm calls use, recording what they are given."""

    def __init__(self, ffi):
        self.ffi, self.ids = ffi, itertools.count(1)
        self.live, self.tensors, self.derived, self.calls = set(), {}, [], []
        self.status = 0  # what the batch norm calls return

    def _id(self, d) -> int:
        return int(self.ffi.cast("uintptr_t", d))

    def cudnnCreateTensorDescriptor(self, p):
        p[0] = self.ffi.cast("void *", next(self.ids))
        self.live.add(self._id(p[0]))
        return 0

    def cudnnDestroyTensorDescriptor(self, d):
        self.live.remove(self._id(d))
        return 0

    def cudnnSetTensorNdDescriptor(self, d, dtype, n, dims, strides):
        self.tensors[self._id(d)] = (dtype, list(dims[0:n]), list(strides[0:n]))
        return 0

    def cudnnDeriveBNTensorDescriptor(self, bn, x, mode):
        self.derived.append((self._id(bn), self._id(x), mode))
        return 0

    def cudnnBatchNormalizationForwardTraining(self, h, mode, alpha, beta, x_desc, x, y_desc, y, bn_desc, scale, bias,
                                               factor, running_mean, running_var, eps, save_mean, save_invstd):
        self.calls.append(("forward", dict(
            mode=mode, alpha=alpha[0], beta=beta[0], x_desc=self._id(x_desc), x=x, y_desc=self._id(y_desc), y=y,
            bn_desc=self._id(bn_desc), scale=scale, bias=bias, factor=factor, running_mean=running_mean,
            running_var=running_var, eps=eps, save_mean=save_mean, save_invstd=save_invstd)))
        return self.status

    def cudnnBatchNormalizationBackward(self, h, mode, alpha_data, beta_data, alpha_param, beta_param, x_desc, x,
                                        dy_desc, dy, dx_desc, dx, bn_desc, scale, dscale, dbias, eps, save_mean,
                                        save_invstd):
        self.calls.append(("backward", dict(
            mode=mode, scalars=(alpha_data[0], beta_data[0], alpha_param[0], beta_param[0]), x_desc=self._id(x_desc),
            x=x, dy_desc=self._id(dy_desc), dy=dy, dx_desc=self._id(dx_desc), dx=dx, bn_desc=self._id(bn_desc),
            scale=scale, dscale=dscale, dbias=dbias, eps=eps, save_mean=save_mean, save_invstd=save_invstd)))
        return self.status


def _ptr(a) -> int:
    return a.__array_interface__["data"][0]


@pytest.fixture
def fake(monkeypatch):
    ffi = cffi.FFI()
    ffi.cdef(_cudnn._CDEF)  # (the real declarations: the scalars are cffi pointers, as on a GPU)
    lib = FakeCudnn(ffi)
    monkeypatch.setattr(_cudnn, "_lib", lambda: (ffi, lib))
    monkeypatch.setattr(_cudnn, "_handle", lambda ffi, lib, stream: ffi.cast("void *", 7))
    monkeypatch.setattr(_cudnn, "available", lambda: True)
    monkeypatch.setattr(_cudnn, "_PLANS", {})
    monkeypatch.setattr(_launch, "stream", lambda: None)
    monkeypatch.setattr(_launch, "be", lambda: types.SimpleNamespace(
        empty=lambda shape, dtype: np.empty(shape, dtype), data_ptr=_ptr,
        is_c_contiguous=lambda a: a.flags.c_contiguous))
    monkeypatch.setattr(_streams, "current_device", lambda: 0)
    return lib


def _bn_inputs(shape=(4, 3, 5, 6), dtype=np.float32, running=True):
    c = shape[1]
    x = np.zeros(shape, dtype)
    w, b = np.ones(c, dtype), np.zeros(c, dtype)
    rm, rv = (np.zeros(c, dtype), np.ones(c, dtype)) if running else (None, None)
    return x, rm, rv, w, b


def test_forward_passes_its_arrays_where_cudnn_reads_them(fake):
    x, rm, rv, w, b = _bn_inputs()
    out, mean, invstd = _cudnn_bn.forward(x, rm, rv, w, b, 0.25, 1e-3)
    assert out.shape == x.shape and mean.shape == invstd.shape == (3,) and out.dtype == x.dtype
    (kind, call), = fake.calls
    assert kind == "forward" and call["mode"] == _cudnn_bn.CUDNN_BATCHNORM_SPATIAL
    assert (call["alpha"], call["beta"]) == (1.0, 0.0)
    assert (call["x"], call["y"], call["scale"], call["bias"]) == (_ptr(x), _ptr(out), _ptr(w), _ptr(b))
    assert (call["running_mean"], call["running_var"]) == (_ptr(rm), _ptr(rv))
    assert (call["save_mean"], call["save_invstd"]) == (_ptr(mean), _ptr(invstd))
    assert call["factor"] == 0.25 and call["eps"] == 1e-3  # momentum is cuDNN's exponential average factor
    # the input's descriptor (float32, C-contiguous) serves x and y; the per-channel one is derived from it
    assert call["x_desc"] == call["y_desc"]
    assert fake.tensors[call["x_desc"]] == (0, [4, 3, 5, 6], [90, 30, 6, 1])
    assert fake.derived == [(call["bn_desc"], call["x_desc"], _cudnn_bn.CUDNN_BATCHNORM_SPATIAL)]


def test_forward_without_running_statistics_passes_null(fake):
    x, rm, rv, w, b = _bn_inputs(running=False)
    assert _cudnn_bn.forward(x, rm, rv, w, b, 0.1, 1e-5) is not None
    assert (fake.calls[0][1]["running_mean"], fake.calls[0][1]["running_var"]) == (0, 0)


def test_backward_passes_its_arrays_where_cudnn_reads_them(fake):
    x, _, _, w, _ = _bn_inputs(shape=(2, 3, 7), dtype=np.float64)
    dy = np.zeros_like(x)
    mean, invstd = np.zeros(3), np.ones(3)
    dx, dw, db = _cudnn_bn.backward(dy, x, w, mean, invstd)
    assert dx.shape == x.shape and dw.shape == db.shape == (3,) and dx.dtype == np.float64
    (kind, call), = fake.calls
    assert kind == "backward" and call["mode"] == _cudnn_bn.CUDNN_BATCHNORM_SPATIAL
    assert call["scalars"] == (1.0, 0.0, 1.0, 0.0)  # gradients written, not accumulated
    assert (call["x"], call["dy"], call["dx"]) == (_ptr(x), _ptr(dy), _ptr(dx))
    assert (call["scale"], call["dscale"], call["dbias"]) == (_ptr(w), _ptr(dw), _ptr(db))
    assert (call["save_mean"], call["save_invstd"]) == (_ptr(mean), _ptr(invstd))
    assert call["eps"] == _cudnn_bn.MIN_EPS  # (unused: the saved statistics are given)
    # an (N, C, L) input is described as (N, C, L, 1), in float64
    assert fake.tensors[call["x_desc"]] == (1, [2, 3, 7, 1], [21, 7, 1, 1])
    assert call["x_desc"] == call["dy_desc"] == call["dx_desc"] and fake.derived[0][0] == call["bn_desc"]


@pytest.mark.parametrize("case", ["float16", "2-d", "6-d", "strided", "no weight", "no bias", "one running stat",
                                  "weight of another dtype", "eps below cuDNN's least", "empty"])
def test_forward_falls_back_where_cudnn_does_not_take_the_call(fake, case):
    x, rm, rv, w, b = _bn_inputs()
    eps = 1e-5
    if case == "float16":
        x = x.astype(np.float16)
    elif case == "2-d":
        x = np.zeros((4, 3), np.float32)
    elif case == "6-d":
        x = np.zeros((2, 3, 1, 1, 1, 2), np.float32)
    elif case == "strided":
        x = np.zeros((4, 3, 5, 12), np.float32)[..., ::2]
    elif case == "no weight":
        w = None
    elif case == "no bias":
        b = None
    elif case == "one running stat":
        rv = None
    elif case == "weight of another dtype":
        w = w.astype(np.float64)
    elif case == "eps below cuDNN's least":
        eps = 1e-6
    elif case == "empty":
        x = np.zeros((0, 3, 5, 6), np.float32)
    assert _cudnn_bn.forward(x, rm, rv, w, b, 0.1, eps) is None
    assert not fake.calls


def test_a_failing_call_or_a_missing_function_falls_back(fake, monkeypatch):
    x, rm, rv, w, b = _bn_inputs()
    fake.status = 3  # CUDNN_STATUS_BAD_PARAM
    assert _cudnn_bn.forward(x, rm, rv, w, b, 0.1, 1e-5) is None
    assert _cudnn_bn.backward(np.zeros_like(x), x, w, np.zeros(3, np.float32), np.ones(3, np.float32)) is None
    fake.status = 0
    monkeypatch.delattr(FakeCudnn, "cudnnBatchNormalizationForwardTraining")  # an old libcudnn
    assert _cudnn_bn.forward(x, rm, rv, w, b, 0.1, 1e-5) is None


def test_backward_falls_back_for_a_strided_gradient_or_no_weight(fake):
    x, _, _, w, _ = _bn_inputs()
    stats = np.zeros(3, np.float32), np.ones(3, np.float32)
    dy = np.zeros((4, 3, 5, 12), np.float32)[..., ::2]
    assert _cudnn_bn.backward(dy, x, w, *stats) is None
    assert _cudnn_bn.backward(np.zeros_like(x), x, None, *stats) is None
    assert _cudnn_bn.backward(np.zeros_like(x, dtype=np.float64), x, w, *stats) is None
    assert not fake.calls


def test_descriptors_are_made_once_per_shape_and_bounded(fake, monkeypatch):
    x, rm, rv, w, b = _bn_inputs()
    for _ in range(3):
        _cudnn_bn.forward(x, rm, rv, w, b, 0.1, 1e-5)
        _cudnn_bn.backward(np.zeros_like(x), x, w, np.zeros(3, np.float32), np.ones(3, np.float32))
    assert len(fake.derived) == 1 and len(fake.live) == 2  # one plan: the input's and the derived descriptor
    monkeypatch.setattr(_cudnn, "_MAX_PLANS", 1)
    x2, rm2, rv2, w2, b2 = _bn_inputs(shape=(2, 3, 4, 4))
    _cudnn_bn.forward(x2, rm2, rv2, w2, b2, 0.1, 1e-5)  # another shape: the plan kept is destroyed first
    assert len(_cudnn._PLANS) == 1 and len(fake.live) == 2 and len(fake.derived) == 2
