"""Direct kernel launches (Note [Direct kernel launches]) checked without a device.

- The parameter buffer a plan packs has the layout of the kernel's PTX parameter list, for every
  argument signature any flambeau kernel is compiled with (``ptx_cases`` of every family).
- Argument keys give numba's own types for scalars and tuples, and the layout rule for arrays.
- A :class:`Kernel` against a fake dispatcher and a fake driver: what it hands ``cuLaunchKernel``,
  one compilation per argument types, the dispatcher for what the direct path does not take.
- The CUDA backend's cheap views: address, extent, numba's lazily made pieces.

On a GPU the CUDA tier runs every kernel through this path (``tools/gpu_session.sh``).
"""

from __future__ import annotations

import re
import struct
import types as pytypes

import numpy as np
import pytest

numba = pytest.importorskip("numba")
ncuda = pytest.importorskip("numba.cuda")

SIM = bool(numba.config.ENABLE_CUDASIM)
pytestmark = pytest.mark.skipif(SIM, reason="the direct path is for devices; the simulator uses numba's dispatcher")

if not SIM:
    from numba.core import types

    from flambeau._kernels.cuda import _direct

# PTX parameter types: (bytes, is a float)
_PTX_TYPES = {f"{k}{b}": (b // 8, k == "f") for k in "ubsf" for b in (8, 16, 32, 64)}
_STRUCT_FLOAT = set("fd")


def _ptx_params(sig) -> list:
    """(bytes, is a float) of each PTX parameter of a kernel of numba signature ``sig``: a kernel that
    does nothing has the same parameter list as any other of that signature."""
    names = ", ".join(f"a{i}" for i in range(len(sig)))
    namespace: dict = {}
    exec(f"def nothing({names}):\n    pass\n", namespace)
    ptx, _ = ncuda.compile_ptx(namespace["nothing"], sig, cc=(8, 0))
    entry = re.search(r"\.entry\s+\S+\s*\((.*?)\)", ptx, re.S).group(1)
    return [_PTX_TYPES[t] for t in re.findall(r"\.param\s+(?:\.align\s+\d+\s+)?\.(\w+)\s", entry)]


def _format_params(fmt: str) -> list:
    return [(struct.calcsize("@" + c), c in _STRUCT_FLOAT) for c in fmt.lstrip("@")]


def test_packed_layout_matches_ptx_for_every_kernel_signature():
    from flambeau._kernels import cuda as families

    signatures = {tuple(sig): label for f in families.FAMILIES for label, _, sig in f.ptx_cases()}
    assert len(signatures) > 100
    for sig, label in signatures.items():
        fmt = _direct.param_format(sig)
        assert _format_params(fmt) == _ptx_params(sig), f"{label}: {sig} packs as {fmt}"


def test_packed_layout_of_every_scalar_kind():
    kinds = [types.int8, types.uint8, types.int16, types.uint16, types.int32, types.uint32, types.int64,
             types.uint64, types.float16, types.float32, types.float64, types.complex64, types.complex128,
             types.boolean]
    sig = tuple(kinds) + (types.Array(types.float32, 3, "A"), types.Tuple((types.boolean, types.float64)))
    assert _format_params(_direct.param_format(sig)) == _ptx_params(sig)


@pytest.mark.parametrize("value", [3, -2**40, 2.5, True, np.float32(1.5), np.float16(2), np.int32(-7), np.uint8(9),
                                   np.int64(5), np.bool_(False), np.complex64(1 + 2j), np.complex128(3j),
                                   (1, 2), (1, 2.0), (np.float32(1), (True, 3)), ()])
def test_scalar_and_tuple_keys_give_numbas_types(value):
    key = _direct.arg_key(value)
    assert key is not None
    assert _direct.numba_type(key) == numba.typeof(value)


def test_array_layout_rule():
    f4 = np.dtype(np.float32)
    assert _direct.layout_of((3, 4), (16, 4), 4) == "C"
    assert _direct.layout_of((3, 1, 4), (16, 999, 4), 4) == "C"  # a length-1 dim's stride is never used
    assert _direct.layout_of((3, 4), (4, 12), 4) == "A"  # transposed
    assert _direct.layout_of((3, 4), (0, 4), 4) == "A"  # broadcast
    assert _direct.layout_of((5,), (8,), 4) == "A"
    assert _direct.layout_of((), (), 4) == "C"
    assert _direct.numba_type((f4, 2, "C")) == numba.typeof(np.empty((3, 4), np.float32))
    assert _direct.numba_type((f4, 1, "A")) == types.Array(types.float32, 1, "A")
    assert _direct.arg_key(np.empty(3)) is None  # a host array: numba's dispatcher copies it


class FakeArray:
    """Stands for a device array: what the packer reads."""

    def __init__(self, shape, strides, dtype, ptr):
        self.shape, self.strides, self.dtype, self._fl_ptr = shape, strides, np.dtype(dtype), ptr
        self.size = int(np.prod(shape))


class FakeCompiled:
    debug = cooperative = launch_config_sensitive = False
    extensions = ()

    def __init__(self, handle):
        self._codelibrary = pytypes.SimpleNamespace(get_cufunc=lambda: pytypes.SimpleNamespace(handle=handle))


class CUkernel(int):
    """A handle of the class name cuda.core gives context-independent kernels."""


class FakeDispatcher:
    def __init__(self, handle=None):
        self.compiled, self.launched = [], []
        self.handle = CUkernel(0xBEEF) if handle is None else handle
        self.py_func = lambda: None

    def compile(self, argtypes):
        self.compiled.append(argtypes)
        return FakeCompiled(self.handle)

    def __getitem__(self, config):
        return lambda *args: self.launched.append((config, args))


def _read_extra(extra) -> tuple:
    """The markers and the parameter bytes of ``cuLaunchKernel``'s ``extra`` (cffi or ctypes memory, as a plan's
    slot makes it)."""
    ffi = _direct._ffi()
    if ffi is not None and isinstance(extra, ffi.CData):
        markers = tuple(int(ffi.cast("uintptr_t", extra[i])) for i in (0, 2, 4))
        size = ffi.cast("size_t *", extra[3])[0]
        return markers, ffi.buffer(ffi.cast("char *", extra[1]), size)[:]
    import ctypes

    size = ctypes.c_size_t.from_address(extra[3]).value
    return (extra[0], extra[2], extra[4] or 0), ctypes.string_at(extra[1], size)


@pytest.fixture
def fake_driver(monkeypatch):
    calls = []

    def launch(func, gx, gy, gz, bx, by, bz, shared, stream, params, extra):
        markers, buffer = _read_extra(extra)
        assert params == 0
        assert markers == (_direct._PARAM_BUFFER_POINTER, _direct._PARAM_BUFFER_SIZE, _direct._PARAM_END)
        calls.append((func, (gx, gy, gz), (bx, by, bz), shared, stream, buffer))
        return 0

    monkeypatch.setattr(_direct, "_DRIVER", [(launch, None)])
    monkeypatch.setattr(_direct, "_ARRAY_CLASSES", {FakeArray})
    return calls


def test_kernel_packs_and_launches_through_the_driver(fake_driver):
    d = FakeDispatcher()
    k = _direct.Kernel(d)
    a = FakeArray((2, 3), (24, 4), np.float32, 0x7000)  # a transposed-like view: layout A
    stream = pytypes.SimpleNamespace(handle=pytypes.SimpleNamespace(value=0x55))  # a ctypes-style handle
    k[(4, 2), 128, stream](a, (7, 8), np.float32(1.5), True, 9)
    k[1, (16, 16), 0, 64](a, (0, 0), np.float32(0), False, 1)
    assert len(d.compiled) == 1 and not d.launched  # one overload, both launches direct
    argtypes = d.compiled[0]
    assert argtypes == (types.Array(types.float32, 2, "A"), types.UniTuple(types.int64, 2), types.float32,
                        types.boolean, types.int64)
    (func, grid, block, shared, s, buf), second = fake_driver
    assert func == 0xBEEF and grid == (4, 2, 1) and block == (128, 1, 1) and shared == 0 and s == 0x55
    values = struct.unpack(_direct.param_format(argtypes), buf)
    assert values == (0, 0, 6, 4, 0x7000, 2, 3, 24, 4, 7, 8, 1.5, True, 9)
    assert second[1:5] == ((1, 1, 1), (16, 16, 1), 64, 0)


class NumbaStyleArray:
    """A device array as numba's own: its address only through its memory pointer (no ``_fl_ptr``)."""

    def __init__(self, shape, strides, dtype, ptr):
        self.shape, self.strides, self.dtype = shape, strides, np.dtype(dtype)
        self.size = int(np.prod(shape))
        self.gpu_data = pytypes.SimpleNamespace(device_pointer_value=ptr)


def test_arrays_without_a_kept_address_pack_their_memory_pointer(fake_driver, monkeypatch):
    monkeypatch.setattr(_direct, "_ARRAY_CLASSES", {FakeArray, NumbaStyleArray})
    k = _direct.Kernel(FakeDispatcher())
    k[1, 32, 0](FakeArray((3,), (4,), np.float32, 0x1000), 3)
    k[1, 32, 0](NumbaStyleArray((3,), (4,), np.float32, 0x2000), 3)  # same types: the plan of the first
    (_, _, _, _, _, first), (_, _, _, _, _, second) = fake_driver
    fmt = _direct.param_format((types.Array(types.float32, 1, "C"), types.int64))
    assert struct.unpack(fmt, first)[4] == 0x1000 and struct.unpack(fmt, second)[4] == 0x2000


_STUB = r"""
#include <stddef.h>
#include <stdint.h>
#include <string.h>
/* cuLaunchKernel's prototype (cuda.h); records what it is given */
uintptr_t seen[9]; unsigned char params[256]; size_t nparams;
int cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                   unsigned shared, void *stream, void **kernelParams, void **extra) {
    uintptr_t v[9] = {(uintptr_t)f, gx, gy, gz, bx, by, bz, shared, (uintptr_t)stream};
    memcpy(seen, v, sizeof v);
    if (kernelParams != NULL || (uintptr_t)extra[0] != 1 || (uintptr_t)extra[2] != 2 || extra[4] != NULL) return 1;
    nparams = *(size_t *)extra[3];
    memcpy(params, extra[1], nparams < sizeof params ? nparams : sizeof params);
    return 0;
}
"""


@pytest.mark.parametrize("through", ["cffi", "ctypes"])
def test_the_driver_receives_what_a_launch_passes(through, tmp_path, monkeypatch):
    """A launch's arguments reach a C function of ``cuLaunchKernel``'s prototype intact, through cffi (the
    handles declared ``uintptr_t``) and through ctypes: the ABI a GPU would see."""
    import ctypes
    import shutil
    import subprocess
    import sysconfig

    if through == "cffi":
        pytest.importorskip("cffi")
    cc = (sysconfig.get_config_var("CC") or "cc").split()[0]
    if shutil.which(cc) is None:
        pytest.skip("no C compiler")
    (tmp_path / "stub.c").write_text(_STUB)
    lib_path = tmp_path / "libstub.so"
    subprocess.run([cc, "-O1", "-shared", "-fPIC", str(tmp_path / "stub.c"), "-o", str(lib_path)], check=True)
    if through == "cffi":
        ffi = _direct._ffi()
        lib = ffi.dlopen(str(lib_path))
        monkeypatch.setattr(_direct, "_DRIVER", [(lib.cuLaunchKernel, None)])
    else:
        monkeypatch.setattr(_direct, "_FFI", [None])
        fn = ctypes.CDLL(str(lib_path)).cuLaunchKernel
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
        monkeypatch.setattr(_direct, "_DRIVER", [(fn, None)])
    monkeypatch.setattr(_direct, "_ARRAY_CLASSES", {FakeArray})
    k = _direct.Kernel(FakeDispatcher(handle=CUkernel(0x7F00DEADBEEF)))
    stream = pytypes.SimpleNamespace(handle=pytypes.SimpleNamespace(value=0x7F0012345678))
    k[(70000, 3), (32, 8), stream, 96](FakeArray((5,), (4,), np.float32, 0x7F00AAAA0000), 2.5, 11)
    stub = ctypes.CDLL(str(lib_path))
    seen = list((ctypes.c_size_t * 9).in_dll(stub, "seen"))
    assert seen == [0x7F00DEADBEEF, 70000, 3, 1, 32, 8, 1, 96, 0x7F0012345678]
    fmt = _direct.param_format((types.Array(types.float32, 1, "C"), types.float64, types.int64))
    size = ctypes.c_size_t.in_dll(stub, "nparams").value
    assert size == struct.calcsize(fmt)
    values = struct.unpack(fmt, bytes((ctypes.c_ubyte * 256).in_dll(stub, "params"))[:size])
    assert values == (0, 0, 5, 4, 0x7F00AAAA0000, 5, 4, 2.5, 11)


def test_kernel_falls_back_to_the_dispatcher(fake_driver):
    d = FakeDispatcher()
    k = _direct.Kernel(d)
    host = np.zeros(3)
    k[1, 32, 0](host, 3)  # a host array: numba copies it, the direct path does not
    assert d.launched == [((1, 32, 0), (host, 3))] and not d.compiled and not fake_driver
    old = FakeDispatcher(handle=0x1234)  # a CUfunction of an older cuda.core: per context, not direct
    k = _direct.Kernel(old)
    k[1, 32, 0](FakeArray((3,), (4,), np.float32, 8), 3)
    k[1, 32, 0](FakeArray((3,), (4,), np.float32, 8), 3)
    assert len(old.compiled) == 1 and len(old.launched) == 2 and not fake_driver


def test_a_geometry_no_unsigned_int_holds_goes_to_the_dispatcher(monkeypatch):
    """cffi refuses a grid or shared size out of ``unsigned int`` range before the call (OverflowError): numba's
    dispatcher then launches, and says what is wrong."""
    def launch(*args):
        raise OverflowError("integer 4294967296 does not fit 'unsigned int'")

    monkeypatch.setattr(_direct, "_DRIVER", [(launch, None)])
    monkeypatch.setattr(_direct, "_ARRAY_CLASSES", {FakeArray})
    d = FakeDispatcher()
    _direct.Kernel(d)[1 << 32, 32, 0](FakeArray((3,), (4,), np.float32, 8), 3)
    assert len(d.launched) == 1 and d.launched[0][0] == (1 << 32, 32, 0)


def test_refused_launch_goes_through_the_dispatcher_with_a_warning(fake_driver, monkeypatch):
    refused = []
    monkeypatch.setattr(_direct, "_DRIVER", [(lambda *a: refused.append(a) or 701, None)])
    monkeypatch.setattr(_direct, "_error_name", lambda code: "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")
    d = FakeDispatcher()
    d.py_func.__name__ = "unary"
    k = _direct.Kernel(d)
    with pytest.warns(RuntimeWarning, match="kernel 'unary'.*OUT_OF_RESOURCES.*numba's dispatcher launched it"):
        k[1, 256, 0](3)
    assert len(refused) == 1 and d.launched == [((1, 256, 0), (3,))]
    k[1, 256, 0](4)  # these argument types now go to the dispatcher
    assert len(refused) == 1 and d.launched[-1] == ((1, 256, 0), (4,))


# --- the backend's views ---------------------------------------------------------------------------
class FakeMemory:
    def __init__(self):
        self.views = []

    def view(self, start, stop):
        self.views.append((start, stop))
        return ("view", start, stop)


def test_backend_views_know_their_address_and_make_numbas_pieces_lazily():
    from numba.cuda.cudadrv import dummyarray

    from flambeau._backends import cuda as be

    base = pytypes.SimpleNamespace(_fl_ptr=0x1000, stream=0, gpu_data=FakeMemory())
    v = be._DevArray.view_of(base, (3, 2), (32, 4), np.dtype(np.float32), start=8)
    assert (v.shape, v.strides, v.size, v.ndim, v._fl_ptr, v.alloc_size) == ((3, 2), (32, 4), 6, 2, 0x1008, 72)
    assert base.gpu_data.views == []  # nothing made until numba needs it
    assert v.gpu_data == ("view", 8, 80) and base.gpu_data.views == [(8, 80)]
    assert v._dummy.shape == dummyarray.Array.from_desc(0, (3, 2), (32, 4), 4).shape
    assert v._numba_type_ == types.Array(types.float32, 2, "A")
    assert be.data_ptr(v) == 0x1008
    flat = be.flat_view(v)
    assert (flat.shape, flat.strides, flat._fl_ptr, flat._numba_type_.layout) == ((18,), (4,), 0x1008, "C")
    col = be._DevArray.view_of(v, (3,), (32,), v.dtype)
    assert col.reshape(3, 1).strides == (32, 32) and col.reshape(3, 1)._fl_ptr == 0x1008
    assert col.reshape((3,)) is col
    empty = be._DevArray.view_of(v, (0, 4), (16, 4), v.dtype)
    assert empty.size == 0 and empty._fl_ptr == 0 and empty.alloc_size == 0


# --- coalescing the launch geometry -----------------------------------------------------------------
def _offsets(shape, strides, i):
    """Element offset of flat C-order index ``i`` of ``shape`` with element ``strides`` (the templates'
    addressing, written out)."""
    off = 0
    for n, s in zip(reversed(shape), reversed(strides)):
        off += (i % n) * s
        i //= n
    return off


@pytest.mark.parametrize("seed", range(20))
def test_coalesced_geometry_addresses_the_same_elements(seed):
    from flambeau._kernels.cuda._launch import coalesce, strides_for

    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.integers(1, 4, size=rng.integers(0, 5)))
    base = np.empty(tuple(2 * n for n in shape) or (1,), np.float32)
    views = [base[tuple(slice(None, n) for n in shape)] if shape else base[:1].reshape(()),  # strided slice
             np.empty(shape, np.float32),  # contiguous
             np.broadcast_to(np.empty(shape[-1:], np.float32), shape),  # broadcast along all but the last dim
             np.empty(shape[::-1], np.float32).T]  # transposed
    strides = [strides_for(v, shape) if shape else (0,) for v in views]
    size = int(np.prod(shape))
    # all operands at once (an elementwise launch), and each alone (a reduction's kept or reduced dims)
    for group in [strides] + [[st] for st in strides]:
        kshape, *kstrides = coalesce(shape, *group)
        assert int(np.prod(kshape)) == size and len(kshape) <= max(len(shape), 1)
        for st, kst in zip(group, kstrides):
            assert [_offsets(shape, st, i) for i in range(size)] == [_offsets(kshape, kst, i) for i in range(size)]


def test_contiguous_operations_coalesce_to_one_dim():
    from flambeau._kernels.cuda._launch import coalesce

    assert coalesce((4, 5, 6), (30, 6, 1), (30, 6, 1), (0, 0, 0)) == ((120,), (1,), (1,), (0,))
    assert coalesce((4, 1, 6), (6, 99, 1), (0, 0, 1)) == ((4, 6), (6, 1), (0, 1))
    assert coalesce((), ) == ((1,),)
    assert coalesce((2, 3)) == ((6,),) and coalesce((0, 3)) == ((0,),) and coalesce((1, 1)) == ((1,),)
    assert coalesce((1, 1), (0, 0)) == ((1,), (0,))
    # one operand (a reduction's dims)
    assert coalesce((4, 5, 6), (30, 6, 1)) == ((120,), (1,))
    assert coalesce((4, 1, 6), (6, 99, 1)) == ((24,), (1,))
    assert coalesce((32, 16, 16), (16384, 16, 1)) == ((32, 256), (16384, 1))  # (N, H, W) of an NCHW tensor
    assert coalesce((3, 4), (1, 3)) == ((3, 4), (1, 3))  # transposed: nothing merges
    assert coalesce((1, 1), (0, 0)) == ((1,), (0,)) and coalesce((), ()) == ((1,), (0,))


def test_the_memory_pointer_takes_over_freeing_an_allocation(monkeypatch):
    """Note [Who frees an allocation]: freed with the array while numba has no pointer to it; once numba's
    pointer exists, freed when the last holder of the pointer lets go of it."""
    import gc

    from flambeau._backends import cuda as be

    monkeypatch.setattr(be, "_context", lambda index: pytypes.SimpleNamespace(device=index))
    freed = []
    dtype = np.dtype(np.float32)
    a = be._DevArray.allocation((4,), (4,), dtype, 0, 0x2000, 16, 0, freed.append)
    del a
    gc.collect()
    assert freed == [0x2000]
    b = be._DevArray.allocation((4,), (4,), dtype, 0, 0x3000, 16, 0, freed.append)
    pointer = b.gpu_data  # what numba's views and dtype views share
    assert pointer.device_pointer_value == 0x3000 and pointer.size == 16
    del b
    gc.collect()
    assert freed == [0x2000]  # the pointer is still held
    del pointer
    gc.collect()
    assert freed == [0x2000, 0x3000]
    import copy

    c = be._DevArray.allocation((4,), (4,), dtype, 0, 0x4000, 16, 0, freed.append)
    clone = copy.copy(c)  # numba's bind() copies: the copy must not free the memory a second time
    assert clone._fl_ptr == 0x4000
    del c
    gc.collect()
    assert freed == [0x2000, 0x3000]  # the clone keeps the array alive
    del clone
    gc.collect()
    assert freed == [0x2000, 0x3000, 0x4000]


def test_keyed_launches_type_the_arguments_once_per_key(fake_driver, monkeypatch):
    d = FakeDispatcher()
    k = _direct.Kernel(d)
    typed = []
    real = _direct.arg_key
    monkeypatch.setattr(_direct, "arg_key", lambda v: typed.append(v) or real(v))
    a = FakeArray((4,), (4,), np.float32, 0x100)
    counts = []
    for ptr in (0x100, 0x200, 0x300):
        k[1, 32, 0].keyed(("f4", 1), FakeArray((4,), (4,), np.float32, ptr), (1,), 4)
        counts.append(len(typed))
    assert counts[0] >= 3 and counts[0] == counts[1] == counts[2]  # typed on the first launch only
    assert len(d.compiled) == 1
    assert [struct.unpack(_direct.param_format(d.compiled[0]), call[-1])[4] for call in fake_driver] == \
        [0x100, 0x200, 0x300]  # each launch packs its own arguments
    k[1, 32, 0](a, (1,), 4)  # the unkeyed path finds the same overload
    assert len(d.compiled) == 1
