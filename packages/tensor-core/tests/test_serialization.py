"""flambeau.save / flambeau.load: exact round trips, shared storage, map_location, and malformed files
(truncated, corrupted, crafted) that must raise a clear error and never crash or run code."""

from __future__ import annotations

import io
import json
import math
import pathlib
import pickle
import struct
import zlib
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flambeau as fl
from flambeau import _serialization as ser

RNG = np.random.default_rng(3)
DTYPES = [fl.bool, fl.uint8, fl.int8, fl.int16, fl.int32, fl.int64, fl.float16, fl.float32, fl.float64]


def _roundtrip(obj, **kw):
    buf = io.BytesIO()
    fl.save(obj, buf)
    buf.seek(0)
    return fl.load(buf, **kw)


def _array(shape, d):
    if d is fl.bool:
        return np.asarray(RNG.random(shape) > 0.5)
    if d.is_floating_point:
        return RNG.standard_normal(shape).astype(d.np)
    info = np.iinfo(d.np)
    return np.asarray(RNG.integers(info.min, info.max, size=shape, dtype=d.np, endpoint=True))


@pytest.mark.parametrize("d", DTYPES, ids=str)
@pytest.mark.parametrize("shape", [(), (0,), (5,), (3, 0, 2), (4, 7), (2, 3, 4)])
def test_tensor_round_trip_exact(d, shape):
    a = _array(shape, d)
    t = fl.from_numpy(a.copy())
    r = _roundtrip(t)
    assert isinstance(r, fl.Tensor) and r.dtype is d and tuple(r.shape) == shape
    np.testing.assert_array_equal(r.numpy(), a)
    assert r.data_ptr() != t.data_ptr() or t.numel() == 0


def test_special_float_values_round_trip():
    t = fl.tensor([0.0, -0.0, float("inf"), float("-inf"), float("nan"), 5e-324, 1.7976931348623157e308],
                  dtype=fl.float64)
    r = _roundtrip(t)
    assert r.numpy().tobytes() == t.numpy().tobytes()
    obj = [0.1, -0.0, float("inf"), float("nan"), 1e-310, 2**70, -(2**63)]
    back = _roundtrip(obj)
    assert back[0] == 0.1 and math.copysign(1, back[1]) == -1 and back[2] == math.inf and math.isnan(back[3])
    assert back[4] == 1e-310 and back[5] == 2**70 and back[6] == -(2**63)


def test_views_and_shared_storage():
    base = fl.arange(24.0).reshape(4, 6)
    views = {"base": base, "row": base[1], "col": base[:, 2], "t": base.t(), "strided": base[::2, 1::3],
             "other": fl.ones(3)}
    r = _roundtrip(views)
    for k, v in views.items():
        np.testing.assert_array_equal(r[k].numpy(), v.numpy())
        assert r[k].stride() == v.stride()
    r["base"][1, 2] = -1.0
    assert r["row"][2].item() == -1.0 and r["col"][1].item() == -1.0 and r["t"][2, 1].item() == -1.0
    assert r["other"].untyped_storage() is not r["base"].untyped_storage()
    # a tensor saved twice comes back as one storage
    a, b = _roundtrip([base, base])
    a.zero_()
    assert b.sum().item() == 0


def test_nested_containers_and_scalars():
    obj = {
        "state": {0: {"step": 10, "exp_avg": fl.ones(2)}, 1: {"momentum_buffer": None}},
        "param_groups": [{"lr": 0.01, "betas": (0.9, 0.999), "nesterov": False, "params": [0, 1], "name": "g"}],
        "od": OrderedDict([("z", 1), ("a", 2)]),
        (1, "x"): b"\x00\xffbytes",
        "dtype": fl.float16,
        "device": fl.device("cpu"),
        "size": fl.Size([2, 3]),
        "empty": [[], {}, ()],
        "unicode": "héllo ✓",
    }
    r = _roundtrip(obj)
    assert r["state"][0]["step"] == 10 and r["state"][1]["momentum_buffer"] is None
    assert r["state"][0]["exp_avg"].tolist() == [1.0, 1.0]
    assert r["param_groups"][0]["betas"] == (0.9, 0.999) and isinstance(r["param_groups"][0]["betas"], tuple)
    assert r["param_groups"][0]["nesterov"] is False and r["param_groups"][0]["params"] == [0, 1]
    assert type(r["od"]) is OrderedDict and list(r["od"]) == ["z", "a"]
    assert type(r["state"]) is dict and list(r["state"]) == [0, 1]
    assert r[(1, "x")] == b"\x00\xffbytes"
    assert r["dtype"] is fl.float16 and r["device"] == fl.device("cpu")
    assert isinstance(r["size"], fl.Size) and r["size"] == (2, 3)
    assert r["empty"] == [[], {}, ()] and r["unicode"] == "héllo ✓"


def test_requires_grad_and_parameters():
    t = fl.randn(3, requires_grad=True)
    r = _roundtrip({"t": t, "nongrad": fl.ones(1), "nonleaf": t * 2})
    assert r["t"].requires_grad and r["t"].is_leaf and not r["nongrad"].requires_grad
    assert r["nonleaf"].requires_grad and r["nonleaf"].is_leaf
    nn = pytest.importorskip("flambeau.nn")
    m = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    sd = m.state_dict()
    r = _roundtrip(sd)
    assert type(r) is OrderedDict and list(r) == list(sd)
    for k in sd:
        np.testing.assert_array_equal(r[k].numpy(), sd[k].numpy())
        assert not isinstance(r[k], nn.Parameter)
    r = _roundtrip(m.state_dict(keep_vars=True))
    assert isinstance(r["0.weight"], nn.Parameter) and r["0.weight"].requires_grad
    m2 = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    m2.load_state_dict(_roundtrip(sd))
    x = fl.randn(5, 3)
    np.testing.assert_array_equal(m(x).detach().numpy(), m2(x).detach().numpy())


def test_paths_and_file_objects(tmp_path):
    t = fl.arange(6).reshape(2, 3)
    p = tmp_path / "t.fl"
    fl.save(t, p)
    assert fl.load(p).tolist() == t.tolist()
    fl.save({"a": t}, str(p))
    assert fl.load(str(p))["a"].tolist() == t.tolist()
    with open(p, "wb") as f:
        fl.save([t], f)
    with open(p, "rb") as f:
        assert fl.load(f)[0].tolist() == t.tolist()
    assert fl.load(pathlib.Path(p), weights_only=True)[0].dtype is fl.int64
    with pytest.raises(TypeError, match="f must be a path or a file object"):
        fl.save(t, 3)
    with pytest.raises(TypeError, match="f must be a path or a file object"):
        fl.load(3.5)
    with open(p, "r") as f, pytest.raises(TypeError, match="binary mode"):  # noqa: UP015
        fl.load(f)


def test_map_location():
    t = fl.arange(4.0)
    assert _roundtrip(t, map_location="cpu").device == fl.device("cpu")
    assert _roundtrip(t, map_location=fl.device("cpu")).device == fl.device("cpu")
    assert _roundtrip(t, map_location={"cuda:0": "cpu"}).tolist() == t.tolist()
    seen = []
    r = _roundtrip({"a": t}, map_location=lambda tensor, loc: seen.append(loc) or tensor * 2)
    assert seen == ["cpu"] and r["a"].tolist() == [0.0, 2.0, 4.0, 6.0]


def _file(header: dict, data: bytes = b"", *, version=ser.VERSION, magic=ser.MAGIC, fix_crc=True) -> bytes:
    """A file with an arbitrary header and data section (valid checksums unless told)."""
    hb = json.dumps(header).encode()
    prefix = struct.pack("<8sIIQQII", magic, version, 0, len(hb), len(data), zlib.crc32(hb) if fix_crc else 0,
                         zlib.crc32(data) if fix_crc else 0)
    pad = b"\0" * ((-(len(prefix) + len(hb))) % 64)
    return prefix + hb + pad + data


NAME = "checkpoint-under-test.flambeau"


def _load_bytes(raw, **kw):
    buf = io.BytesIO(raw)
    buf.name = NAME  # what a file object opened from a path has: load names it in every error
    return fl.load(buf, **kw)


def test_cuda_saved_without_cuda():
    hdr = {"storages": [{"offset": 0, "nbytes": 8, "device": "cuda:0"}],
           "root": {"k": "tensor", "storage": 0, "dtype": "float32", "shape": [2], "strides": [4], "offset": 0}}
    raw = _file(hdr, np.arange(2, dtype=np.float32).tobytes())
    if not fl.cuda.is_available():
        with pytest.raises(RuntimeError, match="map_location=flambeau.device\\('cpu'\\)"):
            _load_bytes(raw)
    r = fl.load(io.BytesIO(raw), map_location="cpu")
    assert r.tolist() == [0.0, 1.0] and r.device == fl.device("cpu")
    assert fl.load(io.BytesIO(raw), map_location={"cuda:0": "cpu"}).device == fl.device("cpu")


def test_unsupported_objects_on_save():
    class Thing:  # (a local class: pickle cannot name it either)
        pass

    with pytest.raises(TypeError, match="cannot save an object of type .*Thing.*nor can it be pickled"):
        fl.save({"x": Thing()}, io.BytesIO())
    fl.save({1, 2}, buf := io.BytesIO())  # (torch's archive: Note [Objects beyond the format])
    assert _load_bytes(buf.getvalue()) == {1, 2}
    cyc: list = []
    cyc.append(cyc)
    with pytest.raises(ValueError, match="reference cycle"):
        fl.save(cyc, io.BytesIO())


# --- malformed files --------------------------------------------------------------------------------
def _valid_bytes():
    buf = io.BytesIO()
    fl.save({"w": fl.randn(4, 3), "step": 3, "names": ["a", "b"], "t": (1.5, None)}, buf)
    return buf.getvalue()


VALID = _valid_bytes()


def test_not_a_flambeau_file():
    with pytest.raises(RuntimeError, match="not a valid PyTorch checkpoint: not a valid zip archive"):
        _load_bytes(b"PK\x03\x04 a zip")  # a zip archive is read as torch.save's format
    for raw, msg in [(b"", "empty"), (pickle.dumps({"a": 1}), "bad magic"),
                     (b"FLAMB", "truncated"), (b"FLAMBEAX" + VALID[8:], "bad magic")]:
        with pytest.raises(RuntimeError, match=f"not a valid flambeau file: .*{msg}"):
            _load_bytes(raw)
    with pytest.raises(RuntimeError, match="unsupported format version 2"):
        _load_bytes(_file({"storages": [], "root": {"k": "none"}}, version=2))


def test_pickle_payload_is_never_executed(tmp_path):
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (pathlib.Path.touch, (marker,))

    with pytest.raises(RuntimeError, match="bad magic"):
        _load_bytes(pickle.dumps(Evil()))
    assert not marker.exists()


def test_every_truncation_raises_cleanly():
    for n in range(len(VALID)):
        with pytest.raises(RuntimeError, match="not a valid flambeau file"):
            _load_bytes(VALID[:n])
    with pytest.raises(RuntimeError, match="unexpected bytes after the data"):
        _load_bytes(VALID + b"\0")


@settings(max_examples=150, deadline=None)
@given(pos=st.integers(0, len(VALID) - 1), value=st.integers(0, 255))
def test_byte_corruptions_raise_cleanly(pos, value):
    raw = bytearray(VALID)
    if raw[pos] == value:
        return
    raw[pos] = value
    try:
        out = _load_bytes(bytes(raw))
    except RuntimeError as e:
        assert "not a valid flambeau file" in str(e) and NAME in str(e)
    else:  # only the zero padding between header and data may change harmlessly
        assert set(out) == {"w", "step", "names", "t"}


_T = {"k": "tensor", "storage": 0, "dtype": "float32", "shape": [2], "strides": [4], "offset": 0}


@pytest.mark.parametrize("header, msg", [
    ({"root": {"k": "none"}}, "no storage table"),
    ({"storages": []}, "no root"),
    ([], "no root"),
    ({"storages": [], "root": {"k": "pickle", "v": "cos\nsystem"}}, "unknown node kind 'pickle'"),
    ({"storages": [], "root": {"k": "int", "v": 3}}, "malformed int"),
    ({"storages": [], "root": {"k": "int", "v": "1e5"}}, "malformed int"),
    ({"storages": [], "root": {"k": "float", "v": "x"}}, "malformed float"),
    ({"storages": [], "root": {"k": "list", "v": {}}}, "malformed list"),
    ({"storages": [], "root": {"k": "dict", "items": [[{"k": "list", "v": []}, {"k": "none"}]]}}, "unhashable"),
    ({"storages": [], "root": {"k": "dict", "items": [[1]]}}, "malformed dict item"),
    ({"storages": [], "root": _T}, "storage 0, which does not exist"),
    ({"storages": [{"offset": 0, "nbytes": 99, "device": "cpu"}], "root": _T}, "outside the data section"),
    ({"storages": [{"offset": -8, "nbytes": 8, "device": "cpu"}], "root": _T}, "outside the data section"),
    ({"storages": [{"offset": 0, "nbytes": 8, "device": "cpu"}], "root": {**_T, "shape": [3]}}, "does not fit"),
    ({"storages": [{"offset": 0, "nbytes": 8, "device": "cpu"}], "root": {**_T, "shape": [10**12]}}, "does not fit"),
    ({"storages": [{"offset": 0, "nbytes": 8, "device": "cpu"}], "root": {**_T, "shape": [-2]}}, "negative"),
    ({"storages": [{"offset": 0, "nbytes": 8, "device": "cpu"}], "root": {**_T, "strides": [3]}}, "multiples"),
    ({"storages": [{"offset": 0, "nbytes": 8, "device": "cpu"}], "root": {**_T, "dtype": "object"}}, "unknown dtype"),
    ({"storages": [{"offset": 0, "nbytes": 8, "device": "cpu"}], "root": {**_T, "shape": "2"}}, "malformed tensor"),
    ({"storages": [{"offset": 0, "nbytes": 8, "device": "cpu"}], "root": {**_T, "storage": "0"}}, "does not exist"),
])
def test_crafted_headers_raise_cleanly(header, msg):
    with pytest.raises(RuntimeError, match=msg) as info:
        _load_bytes(_file(header, b"\0" * 8))
    assert NAME in str(info.value)


_ONE = [{"offset": 0, "nbytes": 8, "device": "cpu"}]


@pytest.mark.parametrize("header, msg", [
    ({"storages": _ONE, "root": {**_T, "shape": [2 ** 40, 2 ** 40], "strides": [0, 0]}}, "too large"),
    ({"storages": _ONE, "root": {**_T, "shape": [2 ** 62, 2 ** 62, 0], "strides": [0, 0, 0]}}, "too large"),
    ({"storages": _ONE, "root": {**_T, "shape": [2 ** 40, 2 ** 40], "strides": [2 ** 42, 4]}}, "too large"),
    ({"storages": _ONE, "root": {**_T, "shape": [2, 2 ** 40], "strides": [8, 0]}}, "does not fit"),
    ({"storages": _ONE, "root": {**_T, "shape": [1], "strides": [2 ** 70]}}, "too large"),
    ({"storages": _ONE, "root": {**_T, "offset": 2 ** 70}}, "does not fit|too large"),
    ({"storages": [{**_ONE[0], "device": "tpu:0"}], "root": _T}, "device 'tpu:0'"),
    ({"storages": [{**_ONE[0], "device": "cuda:x"}], "root": _T}, "device 'cuda:x'"),
    ({"storages": [{**_ONE[0], "device": 3}], "root": _T}, "malformed storage device"),
])
def test_overflowing_shapes_and_bad_devices_name_the_file(header, msg):
    """numpy's "array is too big" and the device parser's errors become RuntimeErrors naming the file."""
    with pytest.raises(RuntimeError, match=msg) as info:
        _load_bytes(_file(header, b"\0" * 8))
    assert type(info.value) is RuntimeError and NAME in str(info.value)


def test_bad_map_location_and_cuda_errors_name_the_file(tmp_path):
    raw = _file({"storages": _ONE, "root": _T}, b"\0" * 8)
    with pytest.raises(RuntimeError, match=f"{NAME}.*map_location.*'tpu'") as info:
        _load_bytes(raw, map_location="tpu")
    assert type(info.value) is RuntimeError
    cuda = _file({"storages": [{**_ONE[0], "device": "cuda:0"}], "root": _T}, b"\0" * 8)
    path = tmp_path / "saved-on-gpu.flambeau"
    path.write_bytes(cuda)
    if not fl.cuda.is_available():
        with pytest.raises(RuntimeError, match="saved-on-gpu.flambeau.*map_location=flambeau.device"):
            fl.load(path)
    with pytest.raises(RuntimeError, match=f"{NAME}: map_location returned int, not a Tensor"):
        _load_bytes(raw, map_location=lambda t, loc: 3)
    assert _load_bytes(cuda, map_location={"cuda:0": "cpu"}).tolist() == [0.0, 0.0]


# --- fuzzing the header: every failure is a RuntimeError naming the file ------------------------------
_BIG = st.sampled_from([2 ** 31, 2 ** 40, 2 ** 62, 2 ** 63, 2 ** 64, 2 ** 100, -(2 ** 63)])
_INTS = st.one_of(st.integers(-2, 9), _BIG, st.integers(-(2 ** 70), 2 ** 70))
_SMALL = st.one_of(st.sampled_from([0, 0, 1, 2, 4, 8]), _INTS)  # mostly plausible: files that get far
_DEVICE = st.one_of(st.sampled_from(["cpu", "cuda", "cuda:0", "cuda:1", "cpu:1", "tpu:0", "cuda:x", "", "CPU"]),
                    st.integers(-1, 2), st.none())
_SCALARS = st.one_of(
    st.just({"k": "none"}), st.builds(lambda v: {"k": "bool", "v": v}, st.one_of(st.booleans(), st.integers(0, 1))),
    st.builds(lambda v: {"k": "int", "v": v}, st.one_of(st.integers().map(str), st.text(max_size=5), st.integers())),
    st.builds(lambda v: {"k": "float", "v": v}, st.one_of(st.floats().map(float.hex), st.text(max_size=5))),
    st.builds(lambda v: {"k": "str", "v": v}, st.one_of(st.text(max_size=5), st.integers())),
    st.builds(lambda v: {"k": "bytes", "v": v}, st.one_of(st.binary(max_size=4).map(bytes.hex), st.text(max_size=3))),
    st.builds(lambda v: {"k": "dtype", "v": v}, st.sampled_from(["float32", "int64", "bool", "object", 3])),
    st.builds(lambda v: {"k": "device", "v": v}, _DEVICE),
    st.builds(lambda v: {"k": "size", "v": v}, st.lists(_INTS, max_size=3)),
    st.builds(lambda k: {"k": k}, st.sampled_from(["pickle", "tensor", "list", "dict", 5])),
)
_TENSORS = st.integers(0, 4).flatmap(lambda ndim: st.fixed_dictionaries(
    {"k": st.just("tensor"), "storage": st.one_of(st.sampled_from([0, 0, 0, 1, -1, 3]), st.just("0")),
     "dtype": st.sampled_from(["float32", "float64", "int64", "uint8", "bool", "float16", "float32", "complex64", 1]),
     "shape": st.one_of(st.lists(_SMALL, min_size=ndim, max_size=ndim), st.lists(_BIG, min_size=ndim, max_size=ndim),
                        st.lists(_INTS, max_size=4), st.just("2")),
     "strides": st.one_of(st.lists(_SMALL, min_size=ndim, max_size=ndim), st.just([0] * ndim),
                          st.lists(_INTS, max_size=4)),
     "offset": _SMALL},
    optional={"requires_grad": st.one_of(st.booleans(), st.just(1)), "param": st.booleans()}))
_NODES = st.recursive(
    st.one_of(_TENSORS, _TENSORS, _TENSORS, _SCALARS),
    lambda kids: st.one_of(st.builds(lambda v: {"k": "list", "v": v}, st.lists(kids, max_size=3)),
                           st.builds(lambda v: {"k": "tuple", "v": v}, st.lists(kids, max_size=3)),
                           st.builds(lambda items: {"k": "dict", "items": items},
                                     st.lists(st.lists(kids, min_size=1, max_size=3), max_size=3))),
    max_leaves=6)
_STORAGE = st.one_of(
    st.fixed_dictionaries({"offset": st.just(0), "nbytes": st.sampled_from([0, 8, 16, 64])},
                          optional={"device": st.one_of(st.just("cpu"), _DEVICE)}),
    st.fixed_dictionaries({"offset": _INTS, "nbytes": _INTS}, optional={"device": _DEVICE}))
_HEADERS = st.integers(0, 9).flatmap(lambda i: st.fixed_dictionaries(
    {"storages": st.lists(_STORAGE, min_size=1, max_size=3), "root": _NODES}) if i else st.fixed_dictionaries(
    {"storages": st.one_of(st.lists(_STORAGE, max_size=3), st.just({}))}, optional={"root": _NODES}))


# one tensor on one storage that exists: every example reaches the tensor and device code
_TENSOR_HEADERS = st.builds(
    lambda tensor, nbytes, device: {"storages": [{"offset": 0, "nbytes": nbytes, "device": device}],
                                    "root": {**tensor, "storage": 0}},
    _TENSORS, st.sampled_from([0, 4, 8, 64]), st.one_of(st.just("cpu"), _DEVICE))
_MAP_LOCATIONS = st.sampled_from([None, "cpu", {"cuda:0": "cpu", "cuda:1": "tpu"}])


@settings(max_examples=300, deadline=None)
@given(header=st.one_of(_HEADERS, _TENSOR_HEADERS), data=st.binary(min_size=64, max_size=96),
       map_location=_MAP_LOCATIONS)
def test_fuzzed_headers_fail_only_with_runtime_errors_naming_the_file(header, data, map_location):
    """Whatever the header holds, load returns or raises RuntimeError naming the file, and never allocates
    more than a small multiple of the file's size (a header cannot make it allocate absurd memory)."""
    _check_load(_file(header, data), map_location)


@settings(max_examples=300, deadline=None)
@given(header=_TENSOR_HEADERS, map_location=_MAP_LOCATIONS)
def test_fuzzed_tensor_entries_fail_only_with_runtime_errors_naming_the_file(header, map_location):
    _check_load(_file(header, bytes(64)), map_location)


def _check_load(raw: bytes, map_location) -> None:
    import tracemalloc

    tracemalloc.start()
    try:
        _load_bytes(raw, map_location=map_location)
    except RuntimeError as e:
        assert NAME in str(e), str(e)
    except Exception as e:  # pragma: no cover - the failure this test looks for
        pytest.fail(f"load raised {type(e).__name__}: {e}")
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak < 64 * len(raw) + (1 << 20), f"load of a {len(raw)}-byte file allocated {peak} bytes"


def test_deep_nesting_and_bad_json():
    for depth in (300, 100_000):  # beyond the format's limit, and beyond Python's recursion limit
        text = '{"storages": [], "root": ' + '{"k": "list", "v": [' * depth + '{"k": "none"}' + "]}" * depth + "}"
        hb = text.encode()
        prefix = struct.pack("<8sIIQQII", ser.MAGIC, 1, 0, len(hb), 0, zlib.crc32(hb), 0)
        with pytest.raises(RuntimeError, match="nested too deeply"):
            _load_bytes(prefix + hb + b"\0" * ((-(len(prefix) + len(hb))) % 64))
    deep: list = []
    for _ in range(1000):
        deep = [deep]
    with pytest.raises(ValueError, match="nested deeper than"):
        fl.save(deep, io.BytesIO())
    hb = b"{not json"
    prefix = struct.pack("<8sIIQQII", ser.MAGIC, 1, 0, len(hb), 0, zlib.crc32(hb), 0)
    with pytest.raises(RuntimeError, match="not valid JSON"):
        _load_bytes(prefix + hb + b"\0" * ((-(len(prefix) + len(hb))) % 64))
    with pytest.raises(RuntimeError, match="checksum mismatch"):
        _load_bytes(_file({"storages": [], "root": {"k": "none"}}, fix_crc=False))
