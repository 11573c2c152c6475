"""fl.load reads torch.save's checkpoints as torch.load(weights_only=True) does; fl.save(format="torch")
writes files torch.load(weights_only=True) reads (Note [Reading torch checkpoints safely])."""

from __future__ import annotations

import io
import pathlib
import pickle
import warnings
import zipfile
from collections import OrderedDict

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import flambeau as fl

torch = pytest.importorskip("torch")


def _torch_bytes(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


def _load(raw: bytes, **kwargs):
    return fl.load(io.BytesIO(raw), **kwargs)


def _same(fl_t, th_t):
    assert str(fl_t.dtype).split(".")[-1] == str(th_t.dtype).split(".")[-1]
    np.testing.assert_array_equal(fl_t.detach().numpy(), th_t.detach().numpy())


def test_state_dict_of_every_dtype_views_and_containers():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4))
    base = torch.arange(12).reshape(3, 4)
    obj = {"model": model.state_dict(), "step": 7, "lr": 0.1, "name": "run", "flags": [True, None],
           "pair": (1, 2.5), "shape": torch.Size([2, 3]), "dtype": torch.float16, "blob": b"\x00\xff",
           "half": torch.ones(2, dtype=torch.float16), "mask": torch.tensor([True, False]),
           "i8": torch.tensor([-3], dtype=torch.int8), "u8": torch.tensor([250], dtype=torch.uint8),
           "f64": torch.tensor([1e-300], dtype=torch.float64), "base": base, "view": base.t()[1:],
           "param": torch.nn.Parameter(torch.ones(2))}
    got = _load(_torch_bytes(obj))
    assert isinstance(got["model"], OrderedDict) and list(got["model"]) == list(model.state_dict())
    for k, v in model.state_dict().items():
        _same(got["model"][k], v)
    for k in ("half", "mask", "i8", "u8", "f64", "base", "view"):
        _same(got[k], obj[k])
    assert got["step"] == 7 and got["lr"] == 0.1 and got["name"] == "run" and got["flags"] == [True, None]
    assert got["pair"] == (1, 2.5) and tuple(got["shape"]) == (2, 3) and got["dtype"] is fl.float16
    assert got["blob"] == b"\x00\xff"
    got["view"][0, 0] = 100  # views of one storage share memory, as in torch
    assert got["base"][0, 1].item() == 100
    assert type(got["param"]).__name__ == "Parameter" and got["param"].requires_grad


def test_bfloat16_loads_as_bfloat16_exactly():
    t = torch.tensor([1.5, -2.25, 3e38], dtype=torch.bfloat16)
    got = _load(_torch_bytes({"t": t}))["t"]
    assert got.dtype is fl.bfloat16
    np.testing.assert_array_equal(got.float().numpy(), t.float().numpy())


def test_map_location_applies():
    raw = _torch_bytes({"w": torch.ones(2)})
    seen = []
    out = _load(raw, map_location=lambda t, where: (seen.append(where), t * 2)[1])
    assert seen == ["cpu"] and out["w"].tolist() == [2.0, 2.0]


def test_code_in_a_checkpoint_is_refused_and_never_run(tmp_path):
    with pytest.raises(RuntimeError, match=r"global torch\.nn\.modules\.linear\.Linear is not allowed"):
        _load(_torch_bytes(torch.nn.Linear(2, 2)))
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (pathlib.Path.touch, (marker,))

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps(Evil(), protocol=2))
    with pytest.raises(RuntimeError, match="Weights only load failed: the global .* is not allowed"):
        _load(buf.getvalue())
    assert not marker.exists()


def test_saved_in_torch_format_torch_reads_it():
    import flambeau.nn as nn

    model = nn.Linear(3, 2)
    w = model.weight
    fl.save({"sd": model.state_dict(), "p": model.bias, "view": w.t(), "w": w, "dt": fl.int64,
             "dev": fl.device("cpu"), "n": (1, "a", None), "h": fl.ones(2, dtype=fl.float16)}, buf := io.BytesIO(),
            format="torch")
    back = torch.load(io.BytesIO(buf.getvalue()), weights_only=True)
    _same(model.weight, back["sd"]["weight"])
    assert isinstance(back["p"], torch.nn.Parameter)
    assert back["view"].data_ptr() == back["w"].data_ptr() and back["view"].stride() == (1, 3)
    assert back["dt"] is torch.int64 and back["dev"] == torch.device("cpu") and back["n"] == (1, "a", None)
    _same(fl.ones(2, dtype=fl.float16), back["h"])
    again = fl.load(io.BytesIO(buf.getvalue()))
    _same(again["w"], back["w"])
    with pytest.raises(ValueError, match="format must be"):
        fl.save({}, io.BytesIO(), format="pickle")


VALID = _torch_bytes(OrderedDict(w=torch.arange(6.0).reshape(2, 3), step=3, names=["a", "b"]))


def test_every_truncation_raises_cleanly():
    for n in range(0, len(VALID), 7):
        with pytest.raises(RuntimeError, match="flambeau.load"):
            _load(VALID[:n])


@settings(max_examples=200, deadline=None)
@given(pos=st.integers(0, len(VALID) - 1), value=st.integers(0, 255))
def test_byte_corruptions_raise_runtime_errors_or_load_the_same_keys(pos, value):
    raw = bytearray(VALID)
    raw[pos] = value
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            out = _load(bytes(raw))
        except RuntimeError as e:
            assert "flambeau.load" in str(e)
        else:  # bytes zip ignores (timestamps, the serialization id, stored data values) change nothing else
            assert isinstance(out, dict)
