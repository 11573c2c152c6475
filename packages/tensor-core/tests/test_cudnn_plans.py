"""cuDNN plans (Note [cuDNN plans] in ``flambeau._kernels.cuda._cudnn``) against a fake libcudnn.

The heuristics are asked once per convolution configuration; another configuration, a requirement of
deterministic algorithms or another device asks again; each call gets the plan's descriptors,
algorithm and workspace; a failing query leaves nothing behind. The real library runs in the CUDA tier
on a GPU (conv2d compared with torch there).
"""

from __future__ import annotations

import itertools
import types

import numpy as np
import pytest

cffi = pytest.importorskip("cffi")

from flambeau._kernels.cuda import _cudnn, _launch  # noqa: E402
from flambeau.cuda import _streams  # noqa: E402


class FakeCudnn:
    """The functions _run calls, over cffi pointers: handles are counters; records queries and calls."""

    def __init__(self, ffi):
        self.ffi, self.ids = ffi, itertools.count(1)
        self.live, self.queries, self.calls = set(), [], []
        self.memory = (64, 128)  # the workspaces the heuristics report for their two algorithms
        for kind in ("Tensor", "Filter", "Convolution"):
            setattr(self, f"cudnnCreate{kind}Descriptor", self._create)
            setattr(self, f"cudnnDestroy{kind}Descriptor", self._destroy)
        for name in ("cudnnSetTensorNdDescriptor", "cudnnSetFilterNdDescriptor", "cudnnSetConvolutionNdDescriptor",
                     "cudnnSetConvolutionGroupCount", "cudnnSetConvolutionMathType"):
            setattr(self, name, lambda *args: 0)
        for op, perf in (("Forward", 2), ("BackwardData", 3), ("BackwardFilter", 4)):
            setattr(self, f"cudnnGetConvolution{op}Algorithm_v7", self._algos(op, perf))
            setattr(self, f"cudnnGetConvolution{op}WorkspaceSize", self._workspace)
        self.cudnnConvolutionForward = self._call("forward")
        self.cudnnConvolutionBackwardData = self._call("data")
        self.cudnnConvolutionBackwardFilter = self._call("filter")

    def _create(self, p):
        p[0] = self.ffi.cast("void *", next(self.ids))
        self.live.add(int(self.ffi.cast("uintptr_t", p[0])))
        return 0

    def _destroy(self, d):
        self.live.remove(int(self.ffi.cast("uintptr_t", d)))
        return 0

    def _algos(self, op, algo):
        def query(h, a, b, conv, c, k, n, perf):
            self.queries.append(op)
            n[0] = 2
            perf[0].algo, perf[0].status, perf[0].memory, perf[0].determinism = algo + 10, 0, self.memory[0], 0
            perf[1].algo, perf[1].status, perf[1].memory, perf[1].determinism = algo, 0, self.memory[1], 1
            return 0
        return query

    def _workspace(self, h, a, b, conv, c, algo, size):
        size[0] = 100 + algo
        return 0

    most = None  # bytes an allocation may take (None: any)

    def empty(self, shape, dtype):
        if self.most is not None and shape[0] > self.most:
            raise MemoryError(f"CUDA out of memory: tried to allocate {shape[0]} bytes")
        return np.empty(shape, dtype)

    def _call(self, kind):
        def call(h, alpha, d1, p1, d2, p2, conv, algo, ws, nbytes, beta, d3, p3):
            self.calls.append((kind, algo, nbytes))
            return 0
        return call


@pytest.fixture
def fake(monkeypatch):
    """The legacy calls' plans over :class:`FakeCudnn` (the graph API's are test_cuda_host_paths.py's)."""
    monkeypatch.setattr(_cudnn, "_GRAPH_API", False)
    ffi = cffi.FFI()
    ffi.cdef(_cudnn._CDEF)
    lib = FakeCudnn(ffi)
    device = [0]
    monkeypatch.setattr(_cudnn, "_lib", lambda: (ffi, lib))
    monkeypatch.setattr(_cudnn, "_handle", lambda ffi, lib, stream: ffi.cast("void *", 7))
    monkeypatch.setattr(_cudnn, "_PLANS", {})
    monkeypatch.setattr(_launch, "stream", lambda: None)
    monkeypatch.setattr(_launch, "be", lambda: types.SimpleNamespace(
        empty=lib.empty, data_ptr=lambda a: a.__array_interface__["data"][0]))
    monkeypatch.setattr(_cudnn, "_workspace_limit", lambda: 1 << 30)
    monkeypatch.setattr(_streams, "current_device", lambda: device[0])
    lib.device = device
    return lib


def _conv(kind, x_shape=(2, 3, 8, 8), w_shape=(4, 3, 3, 3), y_shape=(2, 4, 6, 6), stride=(1, 1)):
    x, w, y = np.zeros(x_shape, np.float32), np.zeros(w_shape, np.float32), np.zeros(y_shape, np.float32)
    return _cudnn._run(kind, np.float32, x_shape, w_shape, y_shape, stride, (0, 0), (1, 1), 1, x, w, y)


def test_the_heuristics_are_asked_once_per_configuration(fake, monkeypatch):
    for _ in range(3):
        _conv("forward")
        _conv("data")
        _conv("filter")
    assert fake.queries == ["Forward", "BackwardData", "BackwardFilter"]
    # the heuristics' first choice, as torch takes it (a non-deterministic one here); its workspace size is
    # the one the call gets
    assert fake.calls[:3] == [("forward", 12, 112), ("data", 13, 113), ("filter", 14, 114)]
    assert len(fake.calls) == 9
    _conv("forward", stride=(2, 2), y_shape=(2, 4, 3, 3))  # another configuration
    fake.device[0] = 1
    _conv("forward")  # another device
    assert fake.queries.count("Forward") == 3
    monkeypatch.setattr(_cudnn, "deterministic", lambda: True)
    _conv("forward")
    assert fake.queries.count("Forward") == 4 and fake.calls[-1] == ("forward", 2, 102)


def test_plans_are_bounded_and_destroyed(fake, monkeypatch):
    monkeypatch.setattr(_cudnn, "_MAX_PLANS", 2)
    _conv("forward")
    _conv("data")
    assert len(fake.live) == 2 * 4  # four descriptors per plan
    _conv("filter")  # the third plan: the two kept are destroyed first
    assert len(_cudnn._PLANS) == 1 and len(fake.live) == 4


def test_a_failing_query_leaves_no_descriptor(fake, monkeypatch):
    monkeypatch.setattr(fake, "cudnnGetConvolutionForwardAlgorithm_v7", lambda *args: 3)
    with pytest.raises(_cudnn.CudnnUnavailable):
        _conv("forward")
    assert not fake.live and not _cudnn._PLANS


def test_workspaces_may_take_the_free_memory(fake, monkeypatch):
    """Note [cuDNN workspaces]: the heuristics' first algorithm is skipped only when its workspace exceeds what
    the device has free (here 1 GiB, the fixture's), and that is the driver's free memory plus the cache."""
    fake.memory = (1 << 40, 128)
    _conv("forward")
    assert fake.calls == [("forward", 2, 102)]  # the second: the first's terabyte does not fit
    fake.memory = (900 << 20, 128)
    _conv("forward", stride=(2, 2), y_shape=(2, 4, 3, 3))
    assert fake.calls[-1] == ("forward", 12, 112)  # 900 MiB does
    from flambeau import cuda

    monkeypatch.undo()
    monkeypatch.setattr(cuda, "mem_get_info", lambda device=None: (5 << 30, 80 << 30))
    monkeypatch.setattr(cuda, "memory_reserved", lambda device=None: 3 << 30)
    monkeypatch.setattr(cuda, "memory_allocated", lambda device=None: 1 << 30)
    monkeypatch.setattr(cuda, "get_per_process_memory_fraction", lambda device=None: 1.0)
    assert _cudnn._workspace_limit() == 7 << 30
    monkeypatch.setattr(cuda, "get_per_process_memory_fraction", lambda device=None: 0.05)  # 4 GiB, 1 taken
    assert _cudnn._workspace_limit() == 3 << 30
    monkeypatch.setattr(cuda, "mem_get_info", lambda device=None: 1 / 0)
    assert _cudnn._workspace_limit() == _cudnn.FALLBACK_WORKSPACE


def test_an_unallocatable_workspace_runs_the_leanest_algorithm(fake):
    fake.memory = (512, 64)  # the first algorithm (workspace 112 bytes) is faster, the second leaner (102)
    fake.most = 105
    _conv("forward")
    assert fake.calls == [("forward", 2, 102)]
    fake.most = 101  # neither fits: the allocator's error, as without cuDNN
    with pytest.raises(MemoryError):
        _conv("forward")
    fake.most = None
    _conv("forward")
    assert fake.calls[-1] == ("forward", 2, 102)  # the plan keeps the lean algorithm: one failed allocation
