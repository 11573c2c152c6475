"""Fused CPU update kernels of the optimizers: one numba pass over a parameter and its state.

torch's single-tensor optimizers run each update as a chain of in-place operators (``lerp_``,
``mul_``, ``addcmul_``, ``sqrt``, ``add_``, ``addcdiv_``), each a full pass over the parameter's
memory. Here the same arithmetic, operation for operation and in the parameter's own dtype, runs
as one loop per element: every buffer is read and written once.

Note [Fused optimizer kernels]
    * One kernel per optimizer family, ``kernel(lo, hi, param, grad, bufs..., sc, flags...)``
      updating elements ``[lo, hi)`` of flat, C-contiguous float32 or float64 arrays in place. The
      kernel slices its arrays to ``[lo, hi)`` and loops from 0: an index numba knows to be
      non-negative needs no wrap-around check, which would keep LLVM from vectorising the loop.
      The scalars (learning rate, betas, bias corrections ...) arrive packed in ``sc``, a small
      array of the parameter's dtype (:func:`pack`), so that a float32 kernel computes in float32
      like torch's float32 operators (a Python float would make numba compute in float64), and a
      call passes one array instead of a dozen scalars (numba's dispatcher checks every argument's
      type on every call: numpy scalars are its slow path). Options are boolean flags tested
      inside the loop; LLVM hoists them out of it, and the loop vectorises
      (``error_model="numpy"``: no zero-division branch).
    * Kernels release the GIL: tensors of ``PARALLEL_MIN`` elements or more are split into one
      chunk per thread (``flambeau.get_num_threads()``) run on a small thread pool. This keeps one
      compiled function per family and dtype (a ``parallel=True`` twin would double CI's
      compile time, and a numba function calling another is never served from the disk cache).
    * Kernels are built on first use (``functools.cache``) with ``cache=True``; importing
      flambeau.optim compiles nothing.
    * :func:`launch` bumps the version counter of every tensor a kernel wrote (parameter and state),
      as the in-place operators of the unfused path would (Note [Version counter] in
      tensor-core), so autograd still detects a parameter modified after it was saved.

:func:`fused_dtype` says whether a parameter takes the kernel path, which :func:`launch` checks and runs;
CUDA parameters are queued by :func:`launch` and updated together by :func:`flush` (Note [Multi-tensor
CUDA updates] in ``_cuda_kernels``); other parameters (float16, non-contiguous), and those whose state a
kernel cannot update in place, run the optimizer's formula in flambeau tensor operators.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import numpy as np

import flambeau as fl
from flambeau.optim._functional import check_grad

__all__ = ["kernels", "fused_dtype", "launch", "flush", "run", "cast", "pack"]

_FLOAT_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_ndarray = np.ndarray
# Below this many elements a chunk hand-off to a thread (~20 µs) costs more than it saves
# (an Adam update runs at about 1 ns per float32 element on one core).
PARALLEL_MIN = 1 << 17

_SPECS: dict = {}  # what launch() checks of each kernel's arguments, filled by kernels(): Note [Fused kernel arguments]


@functools.cache
def kernels() -> SimpleNamespace:
    """The update kernels, compiled on first use (float32 and float64 specialisations)."""
    import numba

    jit = numba.njit(cache=True, nogil=True, error_model="numpy")

    # lerp(a, b, w) as torch computes it: a + w * (b - a) for |w| < 0.5, else b - (b - a) * (1 - w).

    @jit
    def sgd(lo, hi, p, g, buf, sc, maximize, use_buf, first, nesterov):
        wd, momentum, one_minus_damp, neg_lr = sc[0], sc[1], sc[2], sc[3]
        p, g, buf = p[lo:hi], g[lo:hi], buf[lo:hi]
        for i in range(p.shape[0]):
            gi = -g[i] if maximize else g[i]
            if wd != 0:
                gi = gi + wd * p[i]
            if use_buf:
                if first:
                    b = gi
                else:
                    b = buf[i] * momentum + one_minus_damp * gi
                buf[i] = b
                gi = gi + momentum * b if nesterov else b
            p[i] = p[i] + neg_lr * gi

    @jit
    def adam(lo, hi, p, g, m, v, vmax, sc, maximize, decoupled, small_w1, amsgrad):
        wd, decay, w1, omw1, b2, omb2 = sc[0], sc[1], sc[2], sc[3], sc[4], sc[5]
        bc2_sqrt, eps, neg_step = sc[6], sc[7], sc[8]
        p, g, m, v, vmax = p[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi], vmax[lo:hi]
        for i in range(p.shape[0]):
            gi = -g[i] if maximize else g[i]
            pi = p[i]
            if wd != 0:
                if decoupled:
                    pi = pi * decay
                else:
                    gi = gi + wd * pi
            mi = m[i]
            mi = mi + w1 * (gi - mi) if small_w1 else gi - (gi - mi) * omw1
            m[i] = mi
            vi = v[i] * b2 + omb2 * gi * gi
            v[i] = vi
            if amsgrad:
                vm = vmax[i]
                if vi > vm or vi != vi:
                    vm = vi
                vmax[i] = vm
                vi = vm
            denom = math.sqrt(vi) / bc2_sqrt + eps
            p[i] = pi + neg_step * mi / denom

    @jit
    def rmsprop(lo, hi, p, g, sq, gavg, buf, sc, small_oma, maximize, centered, use_buf):
        wd, alpha, oma, alpha_w, eps, momentum = sc[0], sc[1], sc[2], sc[3], sc[4], sc[5]
        neg_lr = sc[6]
        p, g, sq, gavg, buf = p[lo:hi], g[lo:hi], sq[lo:hi], gavg[lo:hi], buf[lo:hi]
        for i in range(p.shape[0]):
            gi = -g[i] if maximize else g[i]
            if wd != 0:
                gi = gi + wd * p[i]
            s = sq[i] * alpha + oma * gi * gi
            sq[i] = s
            if centered:
                ga = gavg[i]
                ga = ga + oma * (gi - ga) if small_oma else gi - (gi - ga) * alpha_w
                gavg[i] = ga
                avg = math.sqrt(s - ga * ga)
            else:
                avg = math.sqrt(s)
            avg = avg + eps
            if use_buf:
                b = buf[i] * momentum + gi / avg
                buf[i] = b
                p[i] = p[i] + neg_lr * b
            else:
                p[i] = p[i] + neg_lr * gi / avg

    @jit
    def adagrad(lo, hi, p, g, ssum, sc, maximize):
        wd, eps, neg_clr = sc[0], sc[1], sc[2]
        p, g, ssum = p[lo:hi], g[lo:hi], ssum[lo:hi]
        for i in range(p.shape[0]):
            gi = -g[i] if maximize else g[i]
            if wd != 0:
                gi = gi + wd * p[i]
            s = ssum[i] + gi * gi
            ssum[i] = s
            p[i] = p[i] + neg_clr * gi / (math.sqrt(s) + eps)

    @jit
    def adadelta(lo, hi, p, g, sq, acc, sc, maximize):
        wd, rho, omr, eps, neg_lr = sc[0], sc[1], sc[2], sc[3], sc[4]
        p, g, sq, acc = p[lo:hi], g[lo:hi], sq[lo:hi], acc[lo:hi]
        for i in range(p.shape[0]):
            gi = -g[i] if maximize else g[i]
            if wd != 0:
                gi = gi + wd * p[i]
            s = sq[i] * rho + omr * gi * gi
            sq[i] = s
            std = math.sqrt(s + eps)
            a = acc[i]
            delta = math.sqrt(a + eps) / std * gi
            acc[i] = a * rho + omr * delta * delta
            p[i] = p[i] + neg_lr * delta

    @jit
    def adamax(lo, hi, p, g, m, u, sc, maximize, small_w1):
        wd, w1, omw1, b2, eps, neg_clr = sc[0], sc[1], sc[2], sc[3], sc[4], sc[5]
        p, g, m, u = p[lo:hi], g[lo:hi], m[lo:hi], u[lo:hi]
        for i in range(p.shape[0]):
            gi = -g[i] if maximize else g[i]
            if wd != 0:
                gi = gi + wd * p[i]
            mi = m[i]
            mi = mi + w1 * (gi - mi) if small_w1 else gi - (gi - mi) * omw1
            m[i] = mi
            ui = u[i] * b2
            ag = abs(gi) + eps
            if ag > ui or ag != ag:
                ui = ag
            u[i] = ui
            p[i] = p[i] + neg_clr * mi / ui

    @jit
    def nadam(lo, hi, p, g, m, v, sc, maximize, decoupled, small_w1):
        wd, decay, w1, omw1, b2, omb2 = sc[0], sc[1], sc[2], sc[3], sc[4], sc[5]
        bc2, eps, c_grad, c_avg = sc[6], sc[7], sc[8], sc[9]
        p, g, m, v = p[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi]
        for i in range(p.shape[0]):
            gi = -g[i] if maximize else g[i]
            pi = p[i]
            if wd != 0:
                if decoupled:
                    pi = pi * decay
                else:
                    gi = gi + wd * pi
            mi = m[i]
            mi = mi + w1 * (gi - mi) if small_w1 else gi - (gi - mi) * omw1
            m[i] = mi
            vi = v[i] * b2 + omb2 * gi * gi
            v[i] = vi
            denom = math.sqrt(vi / bc2) + eps
            pi = pi + c_grad * gi / denom
            p[i] = pi + c_avg * mi / denom

    @jit
    def radam(lo, hi, p, g, m, v, sc, maximize, decoupled, small_w1, rectify):
        wd, decay, w1, omw1, b2, omb2 = sc[0], sc[1], sc[2], sc[3], sc[4], sc[5]
        bc1, lr, bc2_sqrt, eps, rect, one = sc[6], sc[7], sc[8], sc[9], sc[10], sc[11]
        p, g, m, v = p[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi]
        for i in range(p.shape[0]):
            gi = -g[i] if maximize else g[i]
            pi = p[i]
            if wd != 0:
                if decoupled:
                    pi = pi * decay
                else:
                    gi = gi + wd * pi
            mi = m[i]
            mi = mi + w1 * (gi - mi) if small_w1 else gi - (gi - mi) * omw1
            m[i] = mi
            vi = v[i] * b2 + omb2 * gi * gi
            v[i] = vi
            upd = mi / bc1 * lr
            if rectify:
                # torch: scalar / tensor is tensor.reciprocal() * scalar
                adaptive = (one / (math.sqrt(vi) + eps)) * bc2_sqrt
                upd = upd * adaptive * rect
            p[i] = pi - upd

    # Note [Fused kernel arguments]: the kernels index every array by the parameter's flat index
    # with no bounds check, so launch() checks each call against this table: (shape of ``sc``,
    # per state buffer None if always read, else the index in ``args`` of the flag that reads it;
    # a None buffer, passed as a zero-length array, needs that flag off).
    _SPECS.update({sgd: ((4,), (2,)), adam: ((9,), (None, None, 4)), rmsprop: ((7,), (None, 3, 4)),
                   adagrad: ((3,), (None,)), adadelta: ((5,), (None, None)), adamax: ((6,), (None, None)),
                   nadam: ((10,), (None, None)), radam: ((12,), (None, None))})
    return SimpleNamespace(sgd=sgd, adam=adam, rmsprop=rmsprop, adagrad=adagrad, adadelta=adadelta,
                           adamax=adamax, nadam=nadam, radam=radam)


def fused_dtype(p) -> np.dtype | None:
    """The numpy dtype of ``p`` when it can be updated in place by a fused kernel (a writable
    C-contiguous float32 or float64 CPU tensor, or a C-contiguous float32/float64 CUDA tensor: Note
    [Multi-tensor CUDA updates]); None otherwise (the tensor-operator path)."""
    d = p._data
    if d.__class__ is not _ndarray:
        return d.dtype if p._device.type == "cuda" and _cuda().is_cuda_param(d) else None
    if d.dtype not in _FLOAT_DTYPES:
        return None
    flags = d.flags
    return d.dtype if flags.c_contiguous and flags.writeable else None


def _cuda():
    ck = sys.modules.get("flambeau.optim._cuda_kernels")  # (an import statement costs a lookup per parameter)
    if ck is None:
        from flambeau.optim import _cuda_kernels as ck
    return ck


def flush() -> None:
    """Run the CUDA updates :func:`launch` queued (one launch per group: Note [Multi-tensor CUDA
    updates]); every optimizer's functional form calls it after its loop over the parameters."""
    ck = sys.modules.get("flambeau.optim._cuda_kernels")
    if ck is not None and ck._pending:
        ck.flush()


_EMPTY = {dt: np.empty(0, dt) for dt in _FLOAT_DTYPES}


def launch(kernel, p, g, bufs: tuple, *args) -> bool:
    """``kernel(lo, hi, param, grad, *bufs, *args)`` over the flat data of a parameter that
    :func:`fused_dtype` accepted, its gradient (copied only when strided) and its state tensors (a
    None buffer passes a zero-length array); then bumps the version counters of the tensors written.

    Every fused update passes here, so here the arrays are checked against what the kernels index
    without bounds checks (Note [Gradient checks], Note [Fused kernel arguments]): a writable
    C-contiguous float32/float64 CPU parameter; a gradient of its shape, dtype and device; state
    tensors of its shape, or None where the flags never read them; ``sc`` (``args[0]``) of the
    kernel's length in the parameter's dtype. Nothing runs when a check fails.

    Returns:
        True; False, running nothing, when a state tensor has the parameter's shape but not its dtype,
        or is strided or read-only: the caller then runs the tensor-operator update.

    Raises:
        RuntimeError: naming the argument, what was expected and what was given.
    """
    pd, gd = p._data, g._data
    if pd.__class__ is not _ndarray and p._device.type == "cuda":
        return _queue_cuda(kernel, p, g, bufs, args)
    if pd.__class__ is not _ndarray or pd.dtype not in _FLOAT_DTYPES:
        _bad_param(p)
    flags = pd.flags  # (flags and the checks written out: a helper's call would cost more than them)
    if not (flags.c_contiguous and flags.writeable):
        _bad_param(p)
    dtype, shape = pd.dtype, pd.shape
    if gd.__class__ is not _ndarray or gd.dtype != dtype or gd.shape != shape:
        check_grad(p, g)  # raises for another shape, dtype or device
        gd = np.asarray(gd, dtype=dtype)  # an ndarray subclass (np.memmap ...) or another byte order
    sc_shape, needs = _SPECS[kernel]
    sc = args[0]
    if sc.__class__ is not _ndarray or sc.dtype != dtype or sc.shape != sc_shape:
        _bad_sc(dtype, sc_shape, sc)
    if len(bufs) != len(needs):
        _bad_bufs(needs, bufs)
    arrays = [pd.ravel(), gd.ravel()]  # (ravel: views, but copies a strided gradient)
    i = -1
    for b in bufs:  # (a loop: cheaper than a comprehension for a few items)
        i += 1
        if b is None:
            if needs[i] is None or args[needs[i]]:
                _missing_buf(i, shape)
            arrays.append(_EMPTY[dtype])
            continue
        a = b._data
        if a.shape != shape:
            _wrong_buf_shape(i, shape, b)
        if a.__class__ is not _ndarray or a.dtype != dtype:
            return False
        flags = a.flags
        if not (flags.c_contiguous and flags.writeable):
            return False
        arrays.append(a.ravel())
    n = pd.size
    if n < PARALLEL_MIN:
        kernel(0, n, *arrays, *args)
    else:
        run(kernel, n, *arrays, *args)
    p._storage._version += 1
    for b in bufs:
        if b is not None:
            b._storage._version += 1
    return True


_last_sc: list = [None, None, None, None]  # (sc, dtype, kernel, the kernel's needs) last checked by _queue_cuda


def _queue_cuda(kernel, p, g, bufs: tuple, args: tuple) -> bool:
    """:func:`launch` for a CUDA parameter: the same checks, then the update is queued for :func:`flush`."""
    ck = _cuda()
    is_param = ck.is_cuda_param
    pd = p._data
    if not is_param(pd):
        raise RuntimeError(f"param: expected a C-contiguous float32 or float64 CUDA tensor, got {_describe(p)}")
    dtype, shape = pd.dtype, pd.shape
    gd = g._data
    if g._device is not p._device or g.dtype is not p.dtype or tuple(gd.shape) != shape:
        check_grad(p, g)  # raises for another shape, dtype or device
    if not is_param(gd):
        gd = g.contiguous()._data
    sc = args[0]
    last = _last_sc
    if sc is not last[0] or dtype is not last[1] or kernel is not last[2]:  # (a group's parameters share them)
        sc_shape, needs = _SPECS[kernel]
        if sc.__class__ is not _ndarray or sc.dtype != dtype or sc.shape != sc_shape:
            _bad_sc(dtype, sc_shape, sc)
        last[:] = sc, dtype, kernel, needs
    needs = last[3]
    if len(bufs) != len(needs):
        _bad_bufs(needs, bufs)
    arrays = []
    for i, b in enumerate(bufs):
        if b is None:
            if needs[i] is None or args[needs[i]]:
                _missing_buf(i, shape)
            arrays.append(None)
            continue
        a = b._data
        if tuple(a.shape) != shape:
            _wrong_buf_shape(i, shape, b)
        if b._device is not p._device or a.dtype != dtype or not is_param(a):
            return False
        arrays.append(a)
    ck.add(kernel.__name__, pd, gd, tuple(arrays), sc, args[1:])
    p._storage._version += 1
    for b in bufs:
        if b is not None:
            b._storage._version += 1
    return True


# The messages of launch()'s and _queue_cuda()'s checks (the checks stay inline: they run per parameter).
def _bad_sc(dtype, sc_shape, sc) -> None:
    raise RuntimeError(f"sc: expected a {dtype} array of the kernel's {sc_shape[0]} scalars (see pack()), got {sc!r}")


def _bad_bufs(needs, bufs) -> None:
    raise RuntimeError(f"bufs: expected {len(needs)} state tensors (None where unused), got {len(bufs)}")


def _missing_buf(i: int, shape) -> None:
    raise RuntimeError(f"bufs[{i}]: expected a state tensor of shape {list(shape)} (the kernel reads it with these "
                       "flags), got None")


def _wrong_buf_shape(i: int, shape, b) -> None:
    raise RuntimeError(f"bufs[{i}]: expected a state tensor of shape {list(shape)} (the parameter's), got "
                       f"{list(b.shape)}; was the parameter's .data replaced after its state was created?")


def _bad_param(p) -> None:
    raise RuntimeError(f"param: expected a writable C-contiguous float32 or float64 CPU tensor, got {_describe(p)}")


def _describe(t) -> str:
    """A tensor's dtype, shape, device and layout, for the messages of :func:`launch`."""
    layout = ""
    if isinstance(t._data, np.ndarray):
        flags = t._data.flags
        layout = (", C-contiguous" if flags.c_contiguous else ", strided") + ("" if flags.writeable else ", read-only")
    return f"a {t.dtype} tensor of shape {list(t.shape)} on {t.device}{layout}"


_CAST_CACHE: dict = {}


def cast(dtype: np.dtype, *values) -> tuple:
    """``values`` (Python floats) as numpy scalars of ``dtype``, memoised: making numpy scalars costs
    more than the update of a small parameter, and a step computes the same ones for every parameter."""
    key = (dtype, values)
    out = _CAST_CACHE.get(key)
    if out is None:
        if len(_CAST_CACHE) > 4096:
            _CAST_CACHE.clear()
        S = dtype.type
        out = _CAST_CACHE[key] = tuple(S(x) for x in values)
    return out


_PACK_CACHE: dict = {}


def pack(dtype: np.dtype, *values) -> np.ndarray:
    """``values`` as a 1-D array of ``dtype``, the ``sc`` argument of the kernels; memoised, so that
    the parameters of a step share one array (kernels never write it)."""
    key = (dtype, values)
    out = _PACK_CACHE.get(key)
    if out is None:
        if len(_PACK_CACHE) > 4096:
            _PACK_CACHE.clear()
        out = _PACK_CACHE[key] = np.array(values, dtype=dtype)
    return out


_pool_state: dict = {"pool": None, "threads": 0}
_pool_lock = threading.Lock()


def _pool(threads: int) -> ThreadPoolExecutor:
    pool = _pool_state["pool"]
    if pool is None or _pool_state["threads"] != threads:
        with _pool_lock:
            old = _pool_state["pool"]
            if old is not None:
                old.shutdown(wait=False)
            pool = _pool_state["pool"] = ThreadPoolExecutor(max_workers=threads - 1,
                                                            thread_name_prefix="flambeau-optim")
            _pool_state["threads"] = threads
    return pool


def _forget_pool_in_child() -> None:
    _pool_state["pool"] = None  # a forked child has none of the parent's threads


os.register_at_fork(after_in_child=_forget_pool_in_child)


def run(kernel, n: int, *args) -> None:
    """Run ``kernel(lo, hi, *args)`` over ``[0, n)``, split over threads for large ``n``."""
    threads = fl.get_num_threads() if n >= PARALLEL_MIN else 1
    if threads < 2:
        kernel(0, n, *args)
        return
    threads = min(threads, math.ceil(n / (PARALLEL_MIN // 2)))
    bounds = [n * i // threads for i in range(threads + 1)]
    pool = _pool(threads)
    futures = [pool.submit(kernel, bounds[i], bounds[i + 1], *args) for i in range(1, threads)]
    try:
        kernel(bounds[0], bounds[1], *args)
    finally:
        for f in futures:
            f.result()
