"""Batch normalization in training through cuDNN: one library call each way instead of three kernel launches.

Note [Batch norm through cuDNN]
    A training step of a ResNet spends a third of its host time in batch norm (``tools/host_overhead.py``): the
    forward's statistics and affine pass are three launches (partial statistics, their sum, the affine pass)
    and the backward's three more, each launch a few microseconds of Python on the host, where a GPU waits for
    the host. torch runs the training forward and backward through cuDNN. So does flambeau where cuDNN takes the
    call: a real GPU with libcudnn (:func:`flambeau._kernels.cuda._cudnn.available`), ``training``, float32 or
    float64 inputs of 3 to 5 dims, C-contiguous, with a weight and a bias of the input's dtype (and running
    statistics of it, or none), ``eps`` at least 1e-5, and fewer than 2**31 elements (cuDNN indexes in 32
    bits). Everything else, evaluation mode, and any failure of the library, runs flambeau's kernels.

    The legacy calls (``cudnnBatchNormalizationForwardTraining``/``Backward``, in cuDNN 8 and 9) in spatial mode,
    which need neither workspace nor reserve space: the forward updates the running statistics in place with
    ``exponentialAverageFactor`` = ``momentum`` and the unbiased variance (torch's semantics, which torch gets
    from the same call), and returns the batch mean and ``1 / sqrt(var + eps)``, flambeau's ``save_mean`` and
    ``save_invstd``. The backward takes them back and returns the three gradients at once; given the saved
    statistics it does not recompute them, so its ``epsilon`` is never used (it is passed 1e-5, valid on every
    version). A descriptor pair (the input's, and the ``1 x C x 1 x 1`` one cuDNN derives from it) is kept per
    dtype, shape and device among the convolutions' plans (Note [cuDNN plans] in ``_cudnn``).

    These calls run only on a GPU; the tests check the arguments against a fake library, and the CUDA tier
    compares the results with the CPU's on the device.
"""

from __future__ import annotations

import numpy as np

from flambeau._kernels.cuda import _cudnn as cudnn
from flambeau._kernels.cuda import _launch
from flambeau.cuda import _streams

__all__ = ["forward", "backward"]

CUDNN_BATCHNORM_SPATIAL = 1
MIN_EPS = 1e-5  # cuDNN 7's CUDNN_BN_MIN_EPSILON (8 and 9: 0): the least eps given to the library
_MAX_N = 880801  # the batch sizes torch hands cuDNN's spatial training kernels (larger ones fail there)
_DTYPES = frozenset({np.dtype(np.float32), np.dtype(np.float64)})
_INT_MAX = 2**31 - 1


class _Plan:
    """The input's tensor descriptor (``x``) and the derived per-channel one (``bn``) of one dtype and shape."""

    def __init__(self, ffi, lib, dtype, shape):
        self.made = []
        try:
            dims = (*shape, *(1,) * (4 - len(shape)))  # (N, C, L) as (N, C, L, 1): cuDNN wants 4 or 5 dims
            self.x = cudnn.tensor_descriptor(ffi, lib, self.made, cudnn._DATA[dtype], dims)
            self.bn = cudnn.tensor_descriptor(ffi, lib, self.made)
            cudnn._check(lib.cudnnDeriveBNTensorDescriptor(self.bn, self.x, CUDNN_BATCHNORM_SPATIAL),
                         "cudnnDeriveBNTensorDescriptor")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        for destroy, d in reversed(self.made):
            destroy(d)
        self.made = []


def _vector(a, dtype, c: int) -> bool:
    """Whether ``a`` is a C-contiguous vector of ``c`` elements of ``dtype`` (what cuDNN reads per channel)."""
    return a.dtype == dtype and a.size == c and _launch.be().is_c_contiguous(a)


def _takes(x) -> bool:
    """Whether cuDNN takes input ``x`` (Note [Batch norm through cuDNN]), the per-channel arrays aside."""
    shape = x.shape
    return (x.dtype in _DTYPES and 3 <= len(shape) <= 5 and 0 < x.size <= _INT_MAX and shape[0] <= _MAX_N
            and _launch.be().is_c_contiguous(x) and cudnn.available())


def forward(x, running_mean, running_var, weight, bias, momentum: float, eps: float):
    """``(out, save_mean, save_invstd)`` of batch norm in training through cuDNN, the running statistics (both
    or neither) updated in place; None where cuDNN does not take the call (nothing is then written)."""
    if weight is None or bias is None or eps < MIN_EPS or not _takes(x):
        return None
    dtype, c = x.dtype, x.shape[1]
    stats = (weight, bias) if running_mean is None and running_var is None else (
        weight, bias, running_mean, running_var)
    if (running_mean is None) != (running_var is None) or not all(_vector(a, dtype, c) for a in stats):
        return None
    backend = _launch.be()
    out, mean, invstd = backend.empty(x.shape, dtype), backend.empty((c,), dtype), backend.empty((c,), dtype)
    ptr = backend.data_ptr
    ok = _call("cudnnBatchNormalizationForwardTraining", dtype, tuple(x.shape), lambda plan, one, zero: (
        one, zero, plan.x, ptr(x), plan.x, ptr(out), plan.bn, ptr(weight), ptr(bias), float(momentum),
        0 if running_mean is None else ptr(running_mean), 0 if running_var is None else ptr(running_var),
        float(eps), ptr(mean), ptr(invstd)))
    return (out, mean, invstd) if ok else None


def backward(grad, x, weight, save_mean, save_invstd):
    """``(grad_input, grad_weight, grad_bias)`` of batch norm in training through cuDNN, from the statistics the
    forward saved; None where cuDNN does not take the call."""
    if weight is None or grad.shape != x.shape or grad.dtype != x.dtype or not _takes(x):
        return None
    dtype, c = x.dtype, x.shape[1]
    backend = _launch.be()
    if not (backend.is_c_contiguous(grad) and all(_vector(a, dtype, c) for a in (weight, save_mean, save_invstd))):
        return None
    dx, dw, db = backend.empty(x.shape, dtype), backend.empty((c,), dtype), backend.empty((c,), dtype)
    ptr = backend.data_ptr
    ok = _call("cudnnBatchNormalizationBackward", dtype, tuple(x.shape), lambda plan, one, zero: (
        one, zero, one, zero, plan.x, ptr(x), plan.x, ptr(grad), plan.x, ptr(dx), plan.bn, ptr(weight), ptr(dw),
        ptr(db), MIN_EPS, ptr(save_mean), ptr(save_invstd)))
    return (dx, dw, db) if ok else None


def _call(name: str, dtype, shape: tuple, arguments) -> bool:
    """Run cuDNN's batch norm call ``name`` in spatial mode on the current stream, with the arguments after the
    mode that ``arguments(plan, one, zero)`` gives for the plan of ``dtype`` and ``shape`` and the scalars 1 and 0;
    False where the library failed or lacks the call (nothing was queued then)."""
    try:
        ffi, lib = cudnn._lib()
        h = cudnn._handle(ffi, lib, _launch.stream())
        one, zero = cudnn._scalars(ffi, dtype)
        with cudnn._PLANS_LOCK:
            plan = cudnn.cached_plan(("batch_norm", dtype, shape, _streams.current_device()),
                                     lambda: _Plan(ffi, lib, dtype, shape))
            rc = getattr(lib, name)(h, CUDNN_BATCHNORM_SPATIAL, *arguments(plan, one, zero))
        cudnn._check(rc, name)
    except (cudnn.CudnnUnavailable, AttributeError):  # (AttributeError: a libcudnn without the call)
        return False
    return True
