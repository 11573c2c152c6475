"""CUDA backend, tiers 1 and 2 without a device (DESIGN.md, "Execution").

- Every CUDA kernel of flambeau compiles to PTX for sm_80 and sm_90 (``numba.cuda.compile_ptx``
  works without a GPU): each kernel template for each dtype it supports, and every device
  function (one per operator) for each dtype it supports; and every (operator, dtype, arch) instantiation
  of each kernel family whose sources changed since it last compiled (Note [PTX matrix cached by source] in
  ``ptx_cache.py``; ``FLAMBEAU_PTX_FULL=1``: every family, about 11 minutes).
- Logic that needs no device: allocator selection and the native allocator, stream and event
  bookkeeping against a fake driver, registration of the CUDA kernels (``flambeau._kernels.cuda``)
  in the kernel table, ``flambeau.cuda.is_available()`` without CUDA.

Runs in the main test run (no simulator). Simulator tests are in ``tests/cuda``.
"""

from __future__ import annotations

import inspect
import os
import pkgutil
import subprocess
import sys
import types as pytypes

import numpy as np
import ptx_cache
import pytest

import flambeau as fl
from flambeau._kernels import cuda as cuda_kernels
from flambeau._kernels.cuda import elementwise
from flambeau._ops import OPS
from flambeau._ops._registry import KERNELS
from flambeau.cuda import _allocator, _streams

numba = pytest.importorskip("numba")
ncuda = pytest.importorskip("numba.cuda")

SIM = bool(numba.config.ENABLE_CUDASIM)
needs_compiler = pytest.mark.skipif(SIM, reason="compile_ptx needs numba-cuda without the simulator")


@pytest.fixture(scope="module")
def kernels():
    """flambeau._kernels.cuda, with device functions compiling for a fixed arch when no GPU is present
    (:func:`ptx_cache.fixed_arch`)."""
    with ptx_cache.fixed_arch():
        yield cuda_kernels


def _nbtype(name):
    from numba.np.numpy_support import from_dtype

    return from_dtype(np.dtype(name))


# --- every kernel template, every dtype, both archs ---------------------------------------------
def _template_cases(K):
    from numba import types

    idx = types.UniTuple(types.int64, 2)
    cases = []
    for dn in ("int8", "int16", "uint8", "float16"):  # copies into every storage dtype (identity)
        t = _nbtype(dn)
        arr = types.Array(t, 1, "C")
        ident = K.elementwise._unary_py(K.elementwise._device_fn("unary", "identity"), np.dtype(dn).type)
        cases.append((f"copy[{dn}]", ident, (arr, idx, arr, idx, idx, types.int64)))
    for dn in ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool"):
        t = _nbtype(dn)
        cases.append((f"fill[{dn}]", K.core._fill_py(), (types.Array(t, 1, "C"), idx, t, idx, types.int64)))
    for acc, ins in (("float32", ("float32",)), ("float64", ("float64", "float32")),
                     ("int64", ("int32", "int64", "bool"))):
        for dn in ins:
            sig = (types.Array(_nbtype(acc), 1, "C"), types.Array(_nbtype(dn), 1, "C"), idx, idx, idx, idx,
                   types.int64, types.int64)
            cases.append((f"sum[{acc}<-{dn}]", K.reduction._sum_py(np.dtype(acc).type), sig))
    b1 = types.UniTuple(types.int64, 1)
    for dn in ("float32", "float64", "int32", "int64"):
        arr = types.Array(_nbtype(dn), 1, "C")
        sig = (arr, arr, b1, types.int64, types.int64, arr, b1, types.int64, types.int64, b1,
               types.int64, types.int64, types.int64)
        cases.append((f"matmul[{dn}]", K.linalg._matmul_py(np.dtype(dn).type), sig))
    return cases


@needs_compiler
@pytest.mark.parametrize("kind", ["copy", "fill", "sum", "matmul"])
def test_kernel_templates_compile_to_ptx(kernels, kind):
    """Each other kernel template, for each dtype it supports, for sm_80 and sm_90."""
    for label, fn, sig in _template_cases(kernels):
        if not label.startswith(kind + "["):
            continue
        try:
            ptx_cache.ptx_all_archs(fn, sig)
        except Exception as e:  # name the failing kernel
            raise AssertionError(f"{label} failed to compile: {e}") from e


def _all_ops_kernel(K, table: str, names: list, dn: str):
    """The strided elementwise template of ``table`` over a device function calling every device
    function of ``names``: one compilation covers the template and every operator for ``dn``."""
    from numba import cuda, types

    arity = 2 if table == "binary" else 1
    E = K.elementwise
    env = {f"f{i}": E._device_fn(table, n, np.dtype(dn).kind) for i, n in enumerate(names)}
    args = "x, y" if arity == 2 else "x"
    body = "\n".join(f"    acc += f{i}({args})" for i in range(len(names)))
    exec(f"def all_ops({args}):\n    acc = 0.0\n{body}\n    return acc\n", env)
    combo = cuda.jit(device=True)(env["all_ops"])
    t = _nbtype(dn)
    arr = types.Array(t, 1, "C")
    out = types.Array(types.float64, 1, "C")
    idx = types.UniTuple(types.int64, 2)
    if arity == 2:
        fn = E._binary_py(combo, np.dtype(dn).type)
        return fn, (out, idx, arr, idx, t, types.boolean, arr, idx, t, types.boolean, idx, types.int64)
    return E._unary_py(combo, np.dtype(dn).type), (out, idx, arr, idx, idx, types.int64)


@needs_compiler
@pytest.mark.parametrize("table", ["binary", "unary"])
@pytest.mark.parametrize("dn", ["float32", "float64", "int32", "int64", "bool"])
def test_elementwise_template_and_every_device_function_compile(kernels, table, dn):
    """The elementwise template of each arity, for each compute dtype, over every operator's
    device function supporting that dtype (the copy kernel's identity included), for sm_80 and sm_90."""
    tab = elementwise._TABLES[table]
    names = [n for n, (_, kinds) in tab.items() if dn in elementwise.dtypes_for(kinds)]
    assert names
    fn, sig = _all_ops_kernel(kernels, table, names, dn)
    for ptx in ptx_cache.ptx_all_archs(fn, sig):
        assert ptx.count("st.global") >= 1


@needs_compiler
@pytest.mark.timeout(1800)  # (over pytest.ini's 300 s: the reductions take about 7 minutes on one core)
@pytest.mark.parametrize("family", [ptx_cache.family_name(f) for f in cuda_kernels.FAMILIES])
def test_every_instantiation_compiles_to_ptx(kernels, family):
    """Every (kernel, dtype) instantiation of a family compiles for sm_80 and sm_90, unless the family compiled at
    these very sources before (Note [PTX matrix cached by source]; ``FLAMBEAU_PTX_FULL=1``: compiled anyway)."""
    module = next(f for f in kernels.FAMILIES if ptx_cache.family_name(f) == family)
    key = ptx_cache.family_key(module)
    if os.environ.get("FLAMBEAU_PTX_FULL") != "1" and ptx_cache.recorded().get(family) == key:
        pytest.skip(f"{family} compiled to PTX at these sources (tests/ptx_compiled.json)")
    failures = ptx_cache.compile_family(module)
    assert not failures, "\n".join(failures)


def test_ptx_cache_keys_follow_the_sources_the_kernels_are_made_of(monkeypatch):
    # Note [PTX matrix cached by source]: a family's key covers its module and the device code it imports
    import pathlib

    root = ptx_cache._source_root()
    files = {str(f.relative_to(root)) for f in ptx_cache._closure(pathlib.Path(cuda_kernels.conv.__file__), root)}
    assert {"_kernels/cuda/conv.py", "_kernels/cuda/elementwise.py", "_kernels/cuda/_launch.py",
            "_kernels/cuda/linalg.py", "_kernels/cuda/_index_math.py", "_dtype.py"} <= files
    assert "_kernels/cuda/rnn.py" not in files and "_kernels/cuda/__init__.py" not in files
    key = ptx_cache.family_key(cuda_kernels.conv)
    assert ptx_cache.family_key(cuda_kernels.conv) == key
    assert ptx_cache.family_key(cuda_kernels.rnn) != key
    monkeypatch.setattr(ptx_cache, "_versions", lambda: "another numba")
    assert ptx_cache.family_key(cuda_kernels.conv) != key
    real_read = pathlib.Path.read_bytes
    monkeypatch.undo()
    monkeypatch.setattr(pathlib.Path, "read_bytes",
                        lambda self: real_read(self) + (b"#" if self.name == "_index_math.py" else b""))
    assert ptx_cache.family_key(cuda_kernels.conv) != key  # a helper two imports away changed


def _all_ptx_cases(K) -> list:
    return [case for family in K.FAMILIES for case in family.ptx_cases()]


def test_ptx_cases_cover_every_table_entry():
    # ptx_cases is pure bookkeeping: one case per (op, supported dtype) plus the other kernels.
    labels = {c[0] for c in _all_ptx_cases(cuda_kernels)}
    for name, (_, kinds) in elementwise.BINARY.items():
        for dn in elementwise.dtypes_for(kinds):
            assert f"binary:{name}:{dn}" in labels
    for name, (_, kinds) in elementwise.UNARY.items():
        for dn in elementwise.dtypes_for(kinds):
            assert f"unary:{name}:{dn}" in labels
    assert any(lbl.startswith("sum:") for lbl in labels) and any(lbl.startswith("matmul:") for lbl in labels)
    assert any(lbl.startswith("fill:") for lbl in labels) and "unary:identity:float32" in labels


def test_every_family_module_is_walked():
    # A new family module of flambeau._kernels.cuda is registered and PTX-compiled only if listed.
    modules = {m.name for m in pkgutil.iter_modules(cuda_kernels.__path__) if not m.name.startswith("_")}
    assert modules == {f.__name__.rsplit(".", 1)[1] for f in cuda_kernels.FAMILIES}
    assert all(callable(getattr(f, "ptx_cases", None)) for f in cuda_kernels.FAMILIES)


# --- registration and dispatch --------------------------------------------------------------------
EXPECTED_CUDA = ["to_copy", "clone", "contiguous", "copy_", "fill_", "zero_", "add", "sub", "mul", "div",
                 "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "neg", "abs", "exp", "log",
                 "sqrt", "sin", "cos", "tanh", "sigmoid", "relu", "sum", "matmul", "mm", "bmm"]


def _ours(k) -> bool:
    """Whether kernel ``k`` is one of flambeau's own CUDA kernels."""
    return getattr(k, "__module__", "").startswith("flambeau._kernels.cuda.")


@pytest.mark.parametrize("name", EXPECTED_CUDA)
def test_cuda_kernel_registered(name):
    if name not in OPS:
        pytest.skip(f"operator {name} is not declared (yet)")
    k = OPS[name].kernels.get("cuda")
    assert k is not None, f"{name} has no CUDA kernel"
    assert _ours(k)
    assert OPS[name].kernel("cuda") is KERNELS[name]["cuda"]


def test_foreign_kernels_are_kept():
    # flambeau's CUDA kernels register when flambeau._ops is imported, before anyone else can call
    # register_kernel; nothing registers them again later (flambeau.cuda, the CUDA backend).
    code = ("import flambeau as fl, importlib\n"
            "from flambeau._ops import OPS, register_kernel\n"
            "mine = OPS['mul'].kernel('cuda')\n"
            "assert mine.__module__ == 'flambeau._kernels.cuda.elementwise', mine.__module__\n"
            "def foreign(a, b, dtype, out=None):\n"
            "    return a\n"
            "register_kernel('mul', 'cuda', foreign)\n"
            "import flambeau.cuda, flambeau._kernels.cuda\n"
            "importlib.import_module('flambeau._kernels.cuda.elementwise')\n"
            "try:\n"
            "    import flambeau._backends.cuda\n"
            "except ImportError:\n"
            "    pass\n"
            "assert OPS['mul'].kernel('cuda') is foreign\n"
            "assert OPS['add'].kernel('cuda').__module__ == 'flambeau._kernels.cuda.elementwise'\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr


def _call_shape(fn) -> tuple:
    """(required positional parameters, optional parameter names) of a kernel: how fronts call it."""
    params = inspect.signature(fn).parameters.values()
    required = tuple(p.name for p in params if p.kind is p.POSITIONAL_OR_KEYWORD and p.default is p.empty)
    optional = frozenset(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
                         and p.default is not p.empty)
    return required, optional


def _schema_params(signature: str) -> tuple:
    """(positional parameter types, number of keyword-only parameters) of a torch-style schema."""
    params = signature.split("(", 1)[1].rsplit(")", 1)[0]
    positional, _, keyword = params.partition("*")
    types_ = tuple(p.split()[0] for p in positional.split(",") if p.strip())
    return types_, len([p for p in keyword.split(",") if p.strip()])


def test_registration_is_explicit_and_follows_family_conventions():
    """Every flambeau CUDA kernel belongs to a declared operator and can be called as its front calls
    the CPU kernel; the elementwise tables list exactly operators of elementwise signature."""
    ours = {name: row["cuda"] for name, row in KERNELS.items() if _ours(row.get("cuda"))}
    assert set(EXPECTED_CUDA) <= set(ours)
    assert set(elementwise.BINARY) | set(elementwise.UNARY) <= set(ours)
    for name, k in ours.items():
        assert name in OPS, f"CUDA kernel registered for undeclared operator {name!r}"
        if name in elementwise.BINARY:
            assert _call_shape(k) == (("a", "b", "dtype"), {"out"}), name
            positional, _ = _schema_params(OPS[name].signature)
            assert positional == ("Tensor", "Tensor"), f"{name}: not a binary signature: {OPS[name].signature}"
        elif name in elementwise.UNARY:
            assert _call_shape(k) == (("a", "dtype"), {"out"}), name
            assert _schema_params(OPS[name].signature) == (("Tensor",), 0), \
                f"{name}: not a unary elementwise signature: {OPS[name].signature}"
        cpu = OPS[name].kernels.get("cpu")
        if cpu is not None:  # composites may have none
            assert _call_shape(k) == _call_shape(cpu), f"{name}: CUDA {_call_shape(k)}, CPU {_call_shape(cpu)}"


def test_missing_cuda_kernel_raises_not_implemented():
    missing = [op for op in OPS.values() if "cuda" not in op.kernels]
    if not missing:
        pytest.skip("every operator has a CUDA kernel")
    op = missing[0]
    with pytest.raises(NotImplementedError, match=rf"flambeau\.{op.name} has no kernel for device type 'cuda'"):
        op.kernel("cuda")


def test_import_flambeau_does_not_import_numba():
    code = ("import sys, flambeau, flambeau.cuda; "
            "bad = [m for m in sys.modules if m == 'numba' or m.startswith('numba.')]; "
            "print(bad); assert not bad")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


def test_is_available_without_cuda_is_false_and_quiet(monkeypatch):
    monkeypatch.setattr(fl.cuda, "_available", [])

    def boom():
        raise RuntimeError("driver exploded")

    monkeypatch.setattr(ncuda, "is_available", boom)
    assert fl.cuda.is_available() is False
    monkeypatch.setattr(fl.cuda, "_available", [])
    monkeypatch.setattr(ncuda, "is_available", lambda: False)
    assert fl.cuda.is_available() is False
    assert fl.cuda.device_count() == 0


@pytest.mark.skipif(SIM or ncuda.is_available(), reason="checks the machine without CUDA")
def test_is_available_false_on_this_machine():
    r = subprocess.run([sys.executable, "-c", "import flambeau as fl; print(fl.cuda.is_available())"],
                       capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "False"


# --- allocator seam -------------------------------------------------------------------------------
class FakeMem:
    def __init__(self, address):
        self.device_pointer_value = address


class FakeAlloc:
    def __init__(self, index=0):
        self.index = index
        self.calls = []

    def malloc(self, size, stream):
        self.calls.append(("malloc", size, stream))
        return 4096

    def free(self, address):
        self.calls.append(("free", address))

    def record_stream(self, address, stream):
        self.calls.append(("record_stream", address, stream))

    def empty_cache(self):
        self.calls.append(("empty_cache",))

    def memory_allocated(self):
        return 123

    def memory_reserved(self):
        return 456


class FakeEntryPoint:
    def __init__(self, name, obj=None, error=None):
        self.name = name
        self.obj = obj
        self.error = error

    def load(self):
        if self.error:
            raise self.error
        return self.obj


@pytest.fixture
def clean_alloc(monkeypatch):
    monkeypatch.delenv(_allocator.ENV_VAR, raising=False)
    _allocator._reset()
    yield
    _allocator._reset()


def test_native_allocator_counts_and_frees(clean_alloc):
    addresses = iter(range(0x1000, 0x100000, 0x1000))
    made = []

    def memalloc(size):
        m = FakeMem(next(addresses))
        made.append((m, size))
        return m

    a = _allocator.NativeAllocator(0, memalloc=memalloc)
    p1 = a.malloc(100, None)
    p2 = a.malloc(50, None)
    assert p1 != p2
    assert a.memory_allocated() == 150 and a.memory_reserved() == 150
    a.free(p1)
    assert a.memory_allocated() == 50
    with pytest.raises(ValueError, match="was not allocated"):
        a.free(p1)
    with pytest.raises(ValueError, match="non-negative"):
        a.malloc(-1, None)
    assert a.memory_stats()["allocated_bytes.all.peak"] == 150
    a.record_stream(p2, object())
    a.empty_cache()
    assert isinstance(a, _allocator.Allocator)


def test_set_allocator_explicit_wins_and_forwards(clean_alloc, monkeypatch):
    fake = FakeAlloc()
    fl.cuda.set_allocator(fake, 0)
    assert fl.cuda.get_allocator(0) is fake
    assert fl.cuda.memory_allocated(0) == 123
    assert fl.cuda.memory_reserved(0) == 456
    assert fl.cuda.memory_stats(0) == {}
    monkeypatch.setattr(_streams, "current_device", lambda: 0)
    fl.cuda.empty_cache()
    assert fake.calls[-1] == ("empty_cache",)
    fl.cuda.set_allocator(None, 0)
    monkeypatch.setattr(_allocator, "_entry_points", lambda: [])
    assert isinstance(fl.cuda.get_allocator(0), _allocator.NativeAllocator)


def test_set_allocator_rejects_incomplete_objects(clean_alloc):
    with pytest.raises(TypeError, match="must have methods .*record_stream"):
        fl.cuda.set_allocator(pytypes.SimpleNamespace(malloc=lambda s, st: 0, free=lambda a: None), 0)
    with pytest.raises(ValueError, match="device"):
        fl.cuda.set_allocator(FakeAlloc(), -1)


def test_entry_point_selection(clean_alloc, monkeypatch):
    made = {}

    def factory(index):
        made[index] = FakeAlloc(index)
        return made[index]

    eps = [FakeEntryPoint("zzz", FakeAlloc()), FakeEntryPoint("caching", factory)]
    monkeypatch.setattr(_allocator, "_entry_points", lambda: sorted(eps, key=lambda e: e.name))
    a = _allocator.get_allocator(1)
    assert a is made[1]  # first by name, factory called with the device index
    # an explicit environment choice
    _allocator._reset()
    monkeypatch.setenv(_allocator.ENV_VAR, "zzz")
    assert _allocator.get_allocator(0) is eps[0].obj
    _allocator._reset()
    monkeypatch.setenv(_allocator.ENV_VAR, "native")
    assert isinstance(_allocator.get_allocator(0), _allocator.NativeAllocator)
    _allocator._reset()
    monkeypatch.setenv(_allocator.ENV_VAR, "nope")
    with pytest.raises(RuntimeError, match="no entry point of that name.*caching, zzz"):
        _allocator.get_allocator(0)


def test_broken_entry_point_falls_back_with_warning(clean_alloc, monkeypatch):
    eps = [FakeEntryPoint("broken", error=ImportError("no module"))]
    monkeypatch.setattr(_allocator, "_entry_points", lambda: eps)
    with pytest.warns(RuntimeWarning, match="broken.*plain device allocation"):
        a = _allocator.get_allocator(0)
    assert isinstance(a, _allocator.NativeAllocator)


def test_real_entry_point_group_is_queried(clean_alloc):
    # The group may be empty here; querying it must work and give a list.
    assert isinstance(_allocator._entry_points(), list)


# --- streams bookkeeping against a fake driver -------------------------------------------------
class FakeStream:
    count = 0

    def __init__(self, handle):
        self.handle = pytypes.SimpleNamespace(value=handle)
        self.synced = 0

    def synchronize(self):
        self.synced += 1


class FakeEvent:
    def __init__(self, timing):
        self.timing = timing
        self.recorded_on = None
        self.waited = []
        self.done = False

    def record(self, s):
        self.recorded_on = s

    def wait(self, s):
        self.waited.append(s)

    def query(self):
        return self.done

    def synchronize(self):
        self.done = True

    def elapsed_time(self, end):
        return 2.5


class FakeDriver:
    _is_simulator = False

    def __init__(self):
        self.next = 0x100
        self.selected = []
        self.synced = 0
        self.default = FakeStream(0)

    def stream(self):
        self.next += 0x10
        return FakeStream(self.next)

    def default_stream(self):
        return self.default

    def event(self, timing=True):
        return FakeEvent(timing)

    def synchronize(self):
        self.synced += 1

    def select_device(self, i):
        self.selected.append(i)


@pytest.fixture
def driver(monkeypatch):
    d = FakeDriver()
    _streams._set_driver(d)
    monkeypatch.setattr(fl.cuda, "device_count", lambda: 2)
    yield d
    _streams._set_driver(None)


def test_default_and_current_stream(driver):
    s0 = fl.cuda.default_stream()
    assert s0 is fl.cuda.default_stream(0)
    assert fl.cuda.current_stream() is s0
    assert s0.cuda_stream == 0 and s0._cai_stream() == 1
    s = fl.cuda.Stream()
    assert s.cuda_stream == 0x110 and s._cai_stream() == 0x110
    assert s != s0 and s == s
    with fl.cuda.stream(s) as got:
        assert got is s
        assert fl.cuda.current_stream() is s
        inner = fl.cuda.Stream()
        with fl.cuda.stream(inner):
            assert fl.cuda.current_stream() is inner
        assert fl.cuda.current_stream() is s
    assert fl.cuda.current_stream() is s0
    with fl.cuda.stream(None):
        assert fl.cuda.current_stream() is s0
    with pytest.raises(TypeError, match="flambeau.cuda.Stream"):
        with fl.cuda.stream("s"):
            pass


def test_current_stream_is_per_thread(driver):
    import threading

    s = fl.cuda.Stream()
    seen = []
    with fl.cuda.stream(s):
        t = threading.Thread(target=lambda: seen.append(fl.cuda.current_stream()))
        t.start()
        t.join()
        assert fl.cuda.current_stream() is s
    assert seen[0] is fl.cuda.default_stream()
    assert driver.selected == [0, 0]  # each thread bound device 0's context on its first request


def test_stream_restored_after_exception(driver):
    s = fl.cuda.Stream()
    with pytest.raises(ZeroDivisionError):
        with fl.cuda.stream(s):
            raise ZeroDivisionError
    assert fl.cuda.current_stream() is fl.cuda.default_stream()


def test_devices_and_streams_per_device(driver):
    assert fl.cuda.current_device() == 0
    with fl.cuda.device(1):
        assert fl.cuda.current_device() == 1
        s1 = fl.cuda.Stream()
        assert s1.device_index == 1 and str(s1.device) == "cuda:1"
        assert fl.cuda.current_stream() is fl.cuda.default_stream(1)
    assert fl.cuda.current_device() == 0
    # the thread's first stream request binds the current device's context (Note [A CUDA context on
    # every thread]), then leaving the block selects device 0 again
    assert driver.selected == [1, 1, 0]
    with fl.cuda.stream(s1):  # entering a stream of another device switches device
        assert fl.cuda.current_device() == 1
        assert fl.cuda.current_stream(1) is s1
        assert fl.cuda.current_stream(0) is fl.cuda.default_stream(0)
    assert fl.cuda.current_device() == 0
    with pytest.raises(RuntimeError, match="invalid device ordinal 5"):
        fl.cuda.set_device(5)
    with pytest.raises(ValueError, match="cuda device"):
        fl.cuda.set_device("cpu")
    fl.cuda.set_device("cuda:1")
    assert fl.cuda.current_device() == 1
    fl.cuda.set_device(0)


def test_events(driver):
    s = fl.cuda.Stream()
    e = fl.cuda.Event(enable_timing=True)
    assert e.query() is True  # never recorded: nothing to wait for
    e.record(s)
    assert e.numba.recorded_on is s.numba and e.numba.timing is True
    assert e.query() is False
    e.synchronize()
    assert e.query() is True
    other = fl.cuda.Stream()
    other.wait_event(e)
    assert e.numba.waited == [other.numba]
    end = fl.cuda.Event(enable_timing=True)
    end.record()
    assert end.numba.recorded_on is fl.cuda.default_stream().numba
    assert e.elapsed_time(end) == 2.5
    with pytest.raises(RuntimeError, match="enable_timing=True"):
        fl.cuda.Event().elapsed_time(end)
    with pytest.raises(RuntimeError, match="recorded"):
        fl.cuda.Event(enable_timing=True).elapsed_time(end)
    ev = s.record_event()
    assert isinstance(ev, fl.cuda.Event) and ev.numba.recorded_on is s.numba
    other.wait_stream(s)
    with pytest.raises(NotImplementedError):
        fl.cuda.Event(interprocess=True)


def test_synchronize_calls_driver(driver):
    fl.cuda.synchronize()
    assert driver.synced == 1
    s = fl.cuda.Stream()
    s.synchronize()
    assert s.numba.synced == 1


# --- cuBLAS loader --------------------------------------------------------------------------------
def test_cublas_is_optional():
    from flambeau._kernels.cuda import _cublas

    path = _cublas.find_library()
    assert path is None or "cublas" in path
    if SIM or not ncuda.is_available():
        assert _cublas.available() is False


def test_cublas_layouts():
    from flambeau._kernels.cuda import _cublas

    assert _cublas._layout(5, 1, 3, 5) == (_cublas.CUBLAS_OP_N, 5)  # row-major
    assert _cublas._layout(1, 3, 3, 5) == (_cublas.CUBLAS_OP_T, 3)  # transposed view
    assert _cublas._layout(10, 2, 3, 5) is None  # strided columns: numba kernel

