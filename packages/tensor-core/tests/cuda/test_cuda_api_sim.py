"""torch.cuda's memory, device and stream API in flambeau.cuda: under numba's simulator, and on a GPU (``gpu``).

Under the simulator the caching allocator (flambeau-cuda-alloc) keeps its books over a simulated device of
16 GiB, so the memory fraction, pools, raw blocks and snapshots are tested for real there.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import types
import warnings

import pytest

import flambeau as fl
import flambeau.cuda as cuda

torch = pytest.importorskip("torch")

MiB = 1 << 20


@pytest.fixture
def caching():
    """The caching allocator of device 0 (the entry point's); its memory fraction restored afterwards."""
    alloc = cuda.get_allocator(0)
    if not hasattr(alloc, "create_pool"):
        pytest.skip("needs flambeau-cuda-alloc's caching allocator")
    yield alloc
    alloc.set_memory_fraction(1.0)
    alloc.set_caching_enabled(True)


def _sim_only():
    if not cuda.is_simulator():
        pytest.skip("simulator-specific numbers")


# --- the names ------------------------------------------------------------------------------------------------
def test_every_public_name_of_torch_cuda_in_the_brief_exists():
    names = ["mem_get_info", "memory_stats_as_nested_dict", "memory_snapshot", "memory_usage", "utilization",
             "temperature", "power_draw", "clock_rate", "list_gpu_processes", "device_memory_used",
             "max_memory_cached", "memory_cached", "reset_accumulated_memory_stats", "reset_max_memory_allocated",
             "reset_max_memory_cached", "set_per_process_memory_fraction", "get_per_process_memory_fraction",
             "caching_allocator_alloc", "caching_allocator_delete", "caching_allocator_enable",
             "caching_allocator_disabled", "get_allocator_backend", "change_current_allocator",
             "CUDAPluggableAllocator", "MemPool", "use_mem_pool", "host_memory_stats",
             "host_memory_stats_as_nested_dict", "reset_accumulated_host_memory_stats", "reset_peak_host_memory_stats",
             "ipc_collect", "init", "is_initialized", "Device", "device_of", "can_device_access_peer",
             "get_arch_list", "get_gencode_flags", "is_bf16_supported", "is_tf32_supported", "has_half", "has_magma",
             "StreamContext", "ExternalStream", "get_stream_from_external", "current_blas_handle",
             "current_solver_handle", "default_generators", "CudaError", "DeferredCudaCallError",
             "is_current_stream_capturing"]
    missing = [n for n in names if not hasattr(cuda, n)]
    assert not missing
    assert set(names) <= set(cuda.__all__)
    if tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 13):  # the test's pinned torch
        assert all(hasattr(torch.cuda, n) for n in names)  # the spec's names


# --- memory ---------------------------------------------------------------------------------------------------
def test_mem_get_info_is_the_simulated_device():
    _sim_only()
    free, total = cuda.mem_get_info()
    assert total == 16 << 30 and 0 <= free <= total
    assert isinstance(free, int) and isinstance(total, int)
    assert free == total - cuda.get_allocator(0).backend.used


def test_snapshot_agrees_with_memory_allocated(caching):
    x = fl.ones(1000, device="cuda")  # noqa: F841 (a live block of 4000 bytes, rounded to 4096)
    segments = [s for s in cuda.memory_snapshot() if s["device"] == 0]
    keys = {"device", "address", "total_size", "allocated_size", "active_size", "requested_size", "stream",
            "segment_type", "segment_pool_id", "is_expandable", "frames", "blocks"}
    assert segments and all(set(s) == keys for s in segments)
    assert sum(s["allocated_size"] for s in segments) == cuda.memory_allocated()
    assert sum(s["total_size"] for s in segments) == cuda.memory_reserved()
    blocks = [b for s in segments for b in s["blocks"]]
    assert {"address", "size", "requested_size", "state", "frames"} <= set(blocks[0])
    assert any(b["state"] == "active_allocated" and b["requested_size"] == 4000 for b in blocks)


def test_memory_stats_as_nested_dict_matches_flat():
    flat = cuda.memory_stats()
    nested = cuda.memory_stats_as_nested_dict()
    for key, value in flat.items():
        node = nested
        for part in key.split("."):
            node = node[part]
        assert node == value


def test_deprecated_aliases_warn_as_torch():
    with pytest.warns(FutureWarning,
                      match="`flambeau.cuda.memory_cached` has been renamed to `flambeau.cuda.memory_reserved`"):
        assert cuda.memory_cached() == cuda.memory_reserved()
    with pytest.warns(FutureWarning, match="max_memory_cached` has been renamed to `flambeau.cuda.max_memory_reserved"):
        assert cuda.max_memory_cached() == cuda.max_memory_reserved()
    keep = fl.ones(300_000, device="cuda")
    del keep
    with pytest.warns(FutureWarning,
                      match="reset_max_memory_allocated now calls flambeau.cuda.reset_peak_memory_stats"):
        cuda.reset_max_memory_allocated()
    assert cuda.max_memory_allocated() == cuda.memory_allocated()
    with pytest.warns(FutureWarning, match="reset_max_memory_cached now calls"):
        cuda.reset_max_memory_cached()
    assert cuda.max_memory_reserved() == cuda.memory_reserved()


def test_reset_accumulated_memory_stats(caching):
    fl.ones(10, device="cuda")
    assert cuda.memory_stats()["allocation.all.allocated"] > 0
    cuda.reset_accumulated_memory_stats()
    stats = cuda.memory_stats()
    assert stats["allocation.all.allocated"] == 0 and stats["allocated_bytes.all.freed"] == 0
    assert stats["allocated_bytes.all.current"] == cuda.memory_allocated()


def test_memory_fraction_caps_allocations_with_torch_message(caching):
    _sim_only()
    assert cuda.get_per_process_memory_fraction() == 1.0
    cuda.empty_cache()
    cuda.set_per_process_memory_fraction(64 * MiB / (16 << 30))  # 64 MiB of the 16 GiB device
    assert cuda.get_per_process_memory_fraction() == pytest.approx(64 * MiB / (16 << 30))
    small = fl.ones(MiB // 4, device="cuda")  # 1 MiB: fine
    # the allocator's error, as torch.OutOfMemoryError: a RuntimeError (and a MemoryError)
    with pytest.raises(RuntimeError, match=r"CUDA out of memory\. Tried to allocate 80\.00 MiB.*64\.00 MiB allowed; "):
        cuda.caching_allocator_alloc(80 * MiB)
    with pytest.raises(MemoryError):
        cuda.caching_allocator_alloc(80 * MiB)
    with pytest.raises(fl.cuda.OutOfMemoryError):  # torch's class (flambeau.OutOfMemoryError too)
        cuda.caching_allocator_alloc(80 * MiB)
    # a factory passes the allocator's error on, as torch (Note [Allocation errors] in flambeau/_storage.py)
    with pytest.raises(fl.OutOfMemoryError, match=r"CUDA out of memory\. Tried to allocate 80\.00 MiB.*64\.00 MiB "):
        fl.empty(20 * MiB, device="cuda")  # 80 MiB of float32
    cuda.set_per_process_memory_fraction(1.0)
    assert fl.empty(20 * MiB, device="cuda").numel() == 20 * MiB
    del small


def test_memory_fraction_arguments_as_torch():
    with pytest.raises(TypeError, match="Invalid type for fraction argument, must be `float`"):
        cuda.set_per_process_memory_fraction(1)
    with pytest.raises(ValueError, match=r"Invalid fraction value: 1\.5\. Allowed range: 0~1"):
        cuda.set_per_process_memory_fraction(1.5)


def test_mempool_routes_allocations_inside_the_context(caching):
    pool = cuda.MemPool()
    assert pool.id[0] == 0 and pool.id[1] >= 1 and pool.allocator is None
    with cuda.use_mem_pool(pool):
        inside = fl.ones(1000, device="cuda")
    outside = fl.ones(1000, device="cuda")
    in_pool = {b["address"] for s in pool.snapshot() for b in s["blocks"] if b["state"] == "active_allocated"}
    assert all(s["segment_pool_id"] == pool.id for s in pool.snapshot())
    assert len(in_pool) >= 1
    if not cuda.is_simulator():  # (under the simulator the data is numpy's, the pool's addresses are simulated)
        assert inside.untyped_storage().data_ptr() in in_pool
    default = {b["address"] for s in cuda.memory_snapshot((0, 0)) for b in s["blocks"]}
    assert not in_pool & default
    del inside, outside
    cuda.empty_cache()
    assert pool.snapshot()  # a live pool keeps its cached segment
    pool_id = pool.id
    del pool
    assert cuda.memory_snapshot(pool_id) == []
    with pytest.raises(NotImplementedError, match="use_on_oom"):
        cuda.MemPool(use_on_oom=True)
    with pytest.raises(TypeError, match="MemPool"):
        with cuda.use_mem_pool(object()):
            pass


def test_caching_allocator_alloc_and_delete(caching):
    before = cuda.memory_allocated()
    ptr = cuda.caching_allocator_alloc(5000)
    assert isinstance(ptr, int) and cuda.memory_allocated() == before + 5120  # 512-byte rounding
    s = cuda.Stream()
    ptr2 = cuda.caching_allocator_alloc(100, device=0, stream=s)
    cuda.caching_allocator_delete(ptr)
    cuda.caching_allocator_delete(ptr2)
    assert cuda.memory_allocated() == before
    with pytest.raises(RuntimeError, match="invalid device pointer"):
        cuda.caching_allocator_delete(ptr)
    with pytest.raises(TypeError, match="Invalid type for stream argument"):
        cuda.caching_allocator_alloc(10, stream="s")


def test_caching_allocator_disabled_returns_memory(caching):
    cuda.empty_cache()
    with cuda.caching_allocator_disabled():
        assert not caching.caching_enabled()
        # 4 MiB: a segment of its own (a small block could share a segment other tests left live blocks in)
        x = fl.ones(1 << 20, device="cuda")
        reserved = cuda.memory_reserved()
        del x
        assert cuda.memory_reserved() < reserved
    assert caching.caching_enabled()


def test_allocator_backend():
    assert cuda.get_allocator_backend() == ("native" if hasattr(cuda.get_allocator(), "create_pool") else "cudaMalloc")


def _build_so(tmp_path):
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "counting_alloc.c"
    src.write_text("""
#include <stdlib.h>
#include <sys/types.h>
long n_alloc = 0, n_free = 0, last_size = 0, last_device = -1;
void *my_alloc(ssize_t size, int device, void *stream) {
    n_alloc++; last_size = size; last_device = device; return malloc(size ? size : 1);
}
void my_free(void *ptr, size_t size, int device, void *stream) { n_free++; last_size = size; free(ptr); }
""")
    so = tmp_path / "libcounting_alloc.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(so), str(src)], check=True)
    return so


def test_pluggable_allocator_serves_storages(tmp_path):
    import ctypes

    so = _build_so(tmp_path)
    with pytest.raises(AttributeError):
        cuda.CUDAPluggableAllocator(str(so), "no_such_fn", "my_free")
    pluggable = cuda.CUDAPluggableAllocator(str(so), "my_alloc", "my_free")
    lib = ctypes.CDLL(str(so))
    n_alloc, n_free = ctypes.c_long.in_dll(lib, "n_alloc"), ctypes.c_long.in_dll(lib, "n_free")
    previous = cuda.get_allocator(0)
    try:
        cuda.change_current_allocator(pluggable)
        assert cuda.get_allocator_backend() == "pluggable"
        ptr = cuda.caching_allocator_alloc(123)
        assert n_alloc.value == 1 and ctypes.c_long.in_dll(lib, "last_size").value == 123
        assert ctypes.c_long.in_dll(lib, "last_device").value == 0
        cuda.caching_allocator_delete(ptr)
        assert n_free.value == 1
        if not cuda.is_simulator():
            return  # the library's memory is host memory: a kernel must not write there
        x = fl.ones(10, device="cuda")
        assert n_alloc.value == 2 and cuda.memory_allocated() == 40
        del x
        import gc

        gc.collect()
        assert n_free.value == 2 and cuda.memory_allocated() == 0
    finally:
        cuda.set_allocator(previous, 0)
    with pytest.raises(TypeError, match="CUDAPluggableAllocator"):
        cuda.change_current_allocator(previous)


def test_host_memory_stats_keys_as_torch():
    stats = cuda.host_memory_stats()
    expected = {"allocations.current", "allocated_bytes.peak", "active_requests.freed", "active_bytes.allocated",
                "num_host_alloc", "num_host_free", "host_alloc_time.avg", "host_free_time.count"}
    assert expected <= set(stats)
    nested = cuda.host_memory_stats_as_nested_dict()
    assert nested["allocations"]["current"] == stats["allocations.current"]
    cuda.reset_peak_host_memory_stats()
    cuda.reset_accumulated_host_memory_stats()


def test_ipc_collect_runs():
    assert cuda.ipc_collect() is None


# --- NVML -----------------------------------------------------------------------------------------------------
def test_nvml_functions_without_pynvml(monkeypatch):
    monkeypatch.setitem(sys.modules, "pynvml", None)
    with pytest.raises(ModuleNotFoundError, match="nvidia-ml-py does not seem to be installed"):
        cuda.utilization()
    with pytest.raises(ModuleNotFoundError, match="nvidia-ml-py"):
        cuda.temperature()
    assert cuda.list_gpu_processes() == "pynvml module not found, please install nvidia-ml-py"


def test_nvml_functions_read_pynvml(monkeypatch):
    from flambeau.cuda import _nvml

    calls = []
    fake = types.SimpleNamespace(
        nvmlInit=lambda: calls.append("init"),
        nvmlDeviceGetHandleByIndex=lambda i: ("h", i),
        nvmlDeviceGetHandleByUUID=lambda u: ("u", u),
        nvmlDeviceGetUtilizationRates=lambda h: types.SimpleNamespace(gpu=37, memory=12),
        nvmlDeviceGetTemperature=lambda h, sensor: 61 if sensor == 0 else -1,
        nvmlDeviceGetPowerUsage=lambda h: 71000,
        nvmlDeviceGetClockInfo=lambda h, kind: 1980 if kind == 1 else -1,
        nvmlDeviceGetMemoryInfo=lambda h: types.SimpleNamespace(used=123 * MiB),
        nvmlDeviceGetComputeRunningProcesses=lambda h: [types.SimpleNamespace(pid=4242, usedGpuMemory=3 * MiB)],
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(_nvml, "_initialized", [])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert (cuda.utilization(), cuda.memory_usage(), cuda.temperature()) == (37, 12, 61)
    assert (cuda.power_draw(), cuda.clock_rate(), cuda.device_memory_used()) == (71000, 1980, 123 * MiB)
    assert cuda.list_gpu_processes() == "GPU:0\nprocess       4242 uses        3.000 MB GPU memory"
    assert calls == ["init"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,1")
    assert _nvml._handle(0) == ("h", 3)
    assert cuda.list_gpu_processes().startswith("GPU:3\n")  # NVML's number, as torch prints it
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-abc")
    assert _nvml._handle(0) == ("u", "GPU-abc")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with pytest.raises(RuntimeError, match=r"device 0 is not visible \(CUDA_VISIBLE_DEVICES=\[\]\)"):
        _nvml._handle(0)


# --- devices, streams, handles, errors ---------------------------------------------------------------------------
def test_init_and_is_initialized():
    cuda.init()
    assert cuda.is_initialized() is True


def test_device_of_and_device_alias():
    x = fl.ones(2, device="cuda")
    with cuda.device_of(x):
        assert cuda.current_device() == 0
    with cuda.device_of(fl.ones(2)):  # a CPU tensor changes nothing
        assert cuda.current_device() == 0
    assert fl.device("cuda", 0).__class__ in cuda.Device.__args__ and str in cuda.Device.__args__


def test_stream_context_sets_and_restores():
    s = cuda.Stream()
    before = cuda.current_stream()
    ctx = cuda.stream(s)
    assert isinstance(ctx, cuda.StreamContext)
    with ctx as entered:
        assert entered is s and cuda.current_stream() == s
    assert cuda.current_stream() == before
    with cuda.StreamContext(None) as nothing:
        assert nothing is None and cuda.current_stream() == before
    with pytest.raises(TypeError, match="expected a flambeau.cuda.Stream or None"):
        cuda.StreamContext(3)


def test_peer_access_and_invalid_ids():
    assert cuda.can_device_access_peer(0, 0) is False
    with pytest.raises(AssertionError, match="Invalid device id"):
        cuda.can_device_access_peer(cuda.device_count(), 0)
    with pytest.raises(AssertionError, match="Invalid peer device id"):
        cuda.can_device_access_peer(0, cuda.device_count())


def test_arch_list_and_gencode_flags_agree():
    arch = cuda.get_arch_list()
    flags = cuda.get_gencode_flags()
    assert flags == " ".join(f"-gencode compute=compute_{a[3:]},code=sm_{a[3:]}" for a in arch)


def test_capabilities_and_flags():
    assert cuda.has_half is True and cuda.has_magma is False
    major = cuda.get_device_capability()[0]
    assert cuda.is_tf32_supported() is (major >= 8)
    assert cuda.is_bf16_supported(including_emulation=False) is (major >= 8)
    assert cuda.is_bf16_supported() is True  # bfloat16 tensors can be made on the device
    assert cuda.is_current_stream_capturing() is False


def test_default_generators_are_the_device_generators():
    gens = cuda.default_generators
    assert isinstance(gens, tuple) and len(gens) == cuda.device_count()
    cuda.manual_seed(7)
    assert gens[0].initial_seed() == 7


def test_blas_and_solver_handles():
    if cuda.is_simulator():
        with pytest.raises(RuntimeError, match="current_blas_handle: cuBLAS is not available"):
            cuda.current_blas_handle()
    with pytest.raises(RuntimeError, match="cuSOLVER"):
        cuda.current_solver_handle()


def test_error_classes():
    err = cuda.CudaError(2)
    assert isinstance(err, RuntimeError) and err.code == 2
    assert str(err) in ("out of memory (2)", "unrecognized error code (2)")
    assert issubclass(cuda.DeferredCudaCallError, Exception)


def test_external_stream_under_simulator_says_why():
    _sim_only()
    with pytest.raises(RuntimeError, match="External streams are unsupported in the simulator"):
        cuda.ExternalStream(1234)


def test_legacy_cuda_storages():
    if not hasattr(cuda, "FloatStorage"):
        pytest.skip("flambeau.TypedStorage is not there")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # TypedStorage's deprecation, as torch
        s = cuda.FloatStorage([1.0, 2.0])
        assert s.device.type == "cuda" and s.tolist() == [1.0, 2.0] and s.dtype is fl.float32
        assert isinstance(s, cuda.FloatStorage) and not isinstance(s, cuda.DoubleStorage)
        assert isinstance(fl.ones(3, dtype=fl.int64, device="cuda").storage(), cuda.LongStorage)
        assert not isinstance(fl.ones(3).storage(), cuda.FloatStorage)  # a CPU storage
        assert cuda.ByteStorage(3).tolist() == [0, 0, 0]


# --- a real GPU --------------------------------------------------------------------------------------------------
@pytest.mark.gpu
def test_gpu_mem_get_info_from_the_driver():
    free, total = cuda.mem_get_info()
    assert 0 < free <= total == cuda.get_device_properties().total_memory
    t_free, t_total = torch.cuda.mem_get_info() if torch.cuda.is_available() else (free, total)
    assert t_total == total


@pytest.mark.gpu
def test_gpu_external_stream_and_capture_state():
    from numba import cuda as ncuda

    raw = ncuda.stream()
    s = cuda.get_stream_from_external(int(raw))
    assert isinstance(s, cuda.ExternalStream) and s.cuda_stream == int(raw)
    with cuda.stream(s):
        y = fl.ones(1000, device="cuda") * 2
        assert cuda.is_current_stream_capturing() is False
    s.synchronize()
    assert float(y.sum()) == 2000.0


@pytest.mark.gpu
def test_gpu_blas_handle_and_arch_list():
    from flambeau._kernels.cuda import _cublas

    if not _cublas.available():
        pytest.skip("no libcublas")
    h = cuda.current_blas_handle()
    assert isinstance(h, int) and h != 0 and h == cuda.current_blas_handle()
    major, minor = cuda.get_device_capability()
    assert any(int(a[3:]) <= major * 10 + minor for a in cuda.get_arch_list())


@pytest.mark.gpu
def test_gpu_memory_fraction_on_the_device(caching):
    _, total = cuda.mem_get_info()
    cuda.empty_cache()
    cuda.set_per_process_memory_fraction(0.01)
    with pytest.raises((RuntimeError, MemoryError), match="memory"):
        fl.empty(int(total * 0.02) // 4, device="cuda")
    cuda.set_per_process_memory_fraction(1.0)


@pytest.mark.gpu
def test_gpu_peer_access_is_a_bool():
    count = cuda.device_count()
    for d in range(count):
        for p in range(count):
            assert isinstance(cuda.can_device_access_peer(d, p), bool)


def test_device_properties_name_the_physical_gpu():
    # the UUID names the GPU whatever its index here (NCCL's duplicate-GPU check compares it across ranks)
    props = cuda.get_device_properties(0)
    assert isinstance(props.uuid, str) and props.uuid
    assert props.uuid == cuda.get_device_properties().uuid


def test_queries_take_device_strings_as_torch():
    for fn in (cuda.memory_allocated, cuda.max_memory_allocated, cuda.memory_reserved, cuda.max_memory_reserved,
               cuda.memory_stats, cuda.reset_peak_memory_stats, cuda.get_device_name, cuda.get_device_properties,
               cuda.get_device_capability):
        assert fn("cuda") == fn("cuda:0") == fn(fl.device("cuda", 0)) == fn(0), fn.__name__
    with pytest.raises(ValueError, match="Expected a cuda device, but got: cpu"):
        cuda.memory_allocated("cpu")


def test_save_and_load_of_cuda_tensors_of_every_rank():
    import io

    bn = fl.nn.BatchNorm1d(2).to("cuda")  # num_batches_tracked: a 0-dim CUDA tensor
    saved = {"state": bn.state_dict(), "loss": fl.tensor(0.25, device="cuda"),
             "t": fl.arange(6.0, device="cuda").reshape(2, 3).t()}
    buf = io.BytesIO()
    fl.save(saved, buf)
    for where in (None, "cpu"):
        buf.seek(0)
        back = fl.load(buf, map_location=where)
        assert tuple(back["state"]["num_batches_tracked"].shape) == () and back["loss"].item() == 0.25
        assert back["t"].tolist() == [[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
        assert back["loss"].device.type == ("cuda" if where is None else "cpu")
