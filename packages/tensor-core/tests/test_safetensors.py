"""flambeau.safetensors reads and writes the files safetensors.torch does, with its checks and errors."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
from flambeau import _dtype as dt
from flambeau.safetensors import load, load_file, save, save_file

torch = pytest.importorskip("torch")
st_torch = pytest.importorskip("safetensors.torch")

NAMES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "float32", "float64"]
HAS_BF16 = isinstance(getattr(dt, "bfloat16", None), dt.dtype)
needs_bf16 = pytest.mark.skipif(not HAS_BF16, reason="this flambeau has no bfloat16")


def _torch_tensors() -> dict:
    g = torch.Generator().manual_seed(0)
    out = {name: (torch.randn(3, 4, generator=g) * 50).to(getattr(torch, name)) for name in NAMES}
    out["scalar"] = torch.tensor(2.5)
    out["empty"] = torch.zeros(0, 3)
    out["long_1d"] = torch.arange(7)
    return out


def _to_fl(t):
    return fl.from_numpy(t.numpy().copy())


def _assert_same(f, t) -> None:
    assert f.dtype.name == str(t.dtype).removeprefix("torch."), (f.dtype, t.dtype)
    assert tuple(f.shape) == tuple(t.shape)
    np.testing.assert_array_equal(f.float().numpy() if f.dtype.name == "bfloat16" else f.numpy(),
                                  t.float().numpy() if t.dtype == torch.bfloat16 else t.numpy())


def test_files_written_by_torch_load_with_their_values_and_dtypes(tmp_path):
    ref = _torch_tensors()
    st_torch.save_file(ref, tmp_path / "t.safetensors", metadata={"format": "pt"})
    got = load_file(tmp_path / "t.safetensors")
    assert set(got) == set(ref)
    for k in ref:
        _assert_same(got[k], ref[k])
    got["float32"][0, 0] = 123.0  # loaded tensors own writable memory
    assert float(got["float32"][0, 0]) == 123.0


def test_files_written_by_flambeau_load_in_torch(tmp_path):
    ref = _torch_tensors()
    save_file({k: _to_fl(v) for k, v in ref.items()}, str(tmp_path / "f.safetensors"), metadata={"k": "v"})
    back = st_torch.load_file(tmp_path / "f.safetensors")
    for k in ref:
        assert back[k].dtype == ref[k].dtype and torch.equal(back[k], ref[k]), k
    from safetensors import safe_open

    with safe_open(tmp_path / "f.safetensors", framework="pt") as f:
        assert f.metadata() == {"k": "v"}


def test_bytes_round_trip_both_ways():
    ref = _torch_tensors()
    got = load(st_torch.save(ref))
    for k in ref:
        _assert_same(got[k], ref[k])
    back = st_torch.load(save(got))
    for k in ref:
        assert torch.equal(back[k], ref[k]), k
    assert save({k: _to_fl(v) for k, v in ref.items()}) == st_torch.save(ref)  # byte for byte the same file


@needs_bf16
def test_bfloat16_both_ways(tmp_path):
    ref = {"w": torch.randn(5, 3).to(torch.bfloat16), "b": torch.tensor([1.5, -2.0, 3e38], dtype=torch.bfloat16),
           "f": torch.ones(2)}
    st_torch.save_file(ref, tmp_path / "bf.safetensors")
    got = load_file(tmp_path / "bf.safetensors")
    assert got["w"].dtype == dt.bfloat16 and got["f"].dtype == fl.float32
    for k in ref:
        _assert_same(got[k], ref[k])
    save_file(got, tmp_path / "back.safetensors")
    back = st_torch.load_file(tmp_path / "back.safetensors")
    for k in ref:
        assert back[k].dtype == ref[k].dtype and torch.equal(back[k], ref[k]), k


def test_state_dict_round_trip_into_a_module(tmp_path):
    nn = pytest.importorskip("flambeau.nn")
    fl.manual_seed(0)
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    model(fl.randn(8, 3))  # running statistics and num_batches_tracked are buffers in the file too
    save_file(model.state_dict(), tmp_path / "m.safetensors")
    fresh = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2))
    result = fresh.load_state_dict(load_file(tmp_path / "m.safetensors"))
    assert not result.missing_keys and not result.unexpected_keys
    for (k, a), (_, b) in zip(model.state_dict().items(), fresh.state_dict().items()):
        assert a.dtype == b.dtype and fl.equal(a, b), k
    # and a torch model reads the same file
    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.Linear(4, 2))
    tmodel.load_state_dict(st_torch.load_file(tmp_path / "m.safetensors"))
    np.testing.assert_allclose(tmodel[0].weight.detach().numpy(), model[0].weight.detach().numpy())


def test_pieces_of_one_buffer_that_do_not_overlap_are_saved():
    x = fl.arange(10.0)
    got = load(save({"a": x[:5], "b": x[5:]}))
    assert got["a"].tolist() == [0, 1, 2, 3, 4] and got["b"].tolist() == [5, 6, 7, 8, 9]
    tx = torch.arange(10.0)
    assert save({"a": x[:5], "b": x[5:]}) == st_torch.save({"a": tx[:5], "b": tx[5:]})


def _torch_error(tensors):
    with pytest.raises(Exception) as info:
        st_torch.save(tensors)
    return info


@pytest.mark.parametrize("case", ["shared", "tied", "non_contiguous", "not_a_dict", "not_a_tensor"])
def test_bad_input_raises_as_safetensors_torch_does(case, tmp_path):
    x, tx = fl.zeros(10), torch.zeros(10)
    fl_in, torch_in, match = {
        "shared": ({"a": x, "b": x[2:5]}, {"a": tx, "b": tx[2:5]}, "share memory.*'a', 'b'|'b', 'a'"),
        "tied": ({"a": x, "b": x}, {"a": tx, "b": tx}, "share memory"),
        "non_contiguous": ({"a": fl.zeros(3, 4).t()}, {"a": torch.zeros(3, 4).t()}, "non contiguous tensor: `a`"),
        "not_a_dict": ([x], [tx], "Expected a dict of"),
        "not_a_tensor": ({"a": 1}, {"a": 1}, "Key `a` is invalid"),
    }[case]
    expected = _torch_error(torch_in).type
    with pytest.raises(expected, match=match):
        save(fl_in)
    with pytest.raises(expected, match=match):
        save_file(fl_in, tmp_path / "x.safetensors")
    assert not (tmp_path / "x.safetensors").exists()


def test_unsupported_dtype_in_a_file_names_the_tensor(tmp_path):
    st_torch.save_file({"ok": torch.ones(2), "u16": torch.ones(2, dtype=torch.uint16)}, tmp_path / "u.safetensors")
    with pytest.raises(TypeError, match="'u16' has dtype U16"):
        load_file(tmp_path / "u.safetensors")


def test_not_a_safetensors_file():
    from safetensors import SafetensorError

    with pytest.raises(SafetensorError):
        load(b"not a safetensors file")


def test_device_argument(tmp_path):
    save_file({"a": fl.ones(2)}, tmp_path / "a.safetensors")
    assert load_file(tmp_path / "a.safetensors", device=fl.device("cpu"))["a"].device == fl.device("cpu")
    if not fl.cuda.is_available():
        with pytest.raises(Exception, match="(?i)cuda"):
            load_file(tmp_path / "a.safetensors", device="cuda")
        with pytest.raises(Exception, match="(?i)cuda"):
            load_file(tmp_path / "a.safetensors", device=0)


@pytest.mark.skipif(not fl.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_tensors_save_through_the_host_and_load_on_the_device(tmp_path):
    src = {"w": fl.randn(3, 4, device="cuda"), "i": fl.arange(5, device="cuda")}
    save_file(src, tmp_path / "c.safetensors")
    back = st_torch.load_file(tmp_path / "c.safetensors")
    np.testing.assert_array_equal(back["w"].numpy(), src["w"].cpu().numpy())
    got = load_file(tmp_path / "c.safetensors", device="cuda")
    assert got["w"].device.type == "cuda" and fl.equal(got["w"].cpu(), src["w"].cpu())


def test_without_the_safetensors_package_the_error_says_what_to_install(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "safetensors", None)
    with pytest.raises(ImportError, match=r"pip install 'safetensors>=0.8'"):
        save({"a": fl.ones(2)})


def test_an_old_safetensors_package_is_named(monkeypatch):
    import types

    old = types.ModuleType("safetensors")
    old.__version__ = "0.4.5"
    monkeypatch.setitem(__import__("sys").modules, "safetensors", old)
    with pytest.raises(ImportError, match="needs safetensors 0.8 or later, found 0.4.5"):
        load(b"")


def _tied(nn):
    class Tied(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.Embedding(6, 4)
            self.decoder = nn.Linear(4, 6)
            self.decoder.weight = self.encoder.weight

    return Tied()


def test_save_model_and_load_model_keep_one_name_of_tied_weights_as_torch_does(tmp_path):
    from safetensors import safe_open

    from flambeau.safetensors import load_model, save_model

    nn = pytest.importorskip("flambeau.nn")
    model = _tied(nn)
    with pytest.raises(RuntimeError, match="share memory"):
        save_file(model.state_dict(), tmp_path / "plain.safetensors")
    save_model(model, tmp_path / "fl.safetensors")
    tmodel = _tied(torch.nn)
    st_torch.save_model(tmodel, tmp_path / "torch.safetensors")
    for name in ("fl", "torch"):  # the same names kept, and the same record of the dropped one
        with safe_open(tmp_path / f"{name}.safetensors", framework="pt") as f:
            assert sorted(f.keys()) == ["decoder.bias", "decoder.weight"]
            assert f.metadata() == {"encoder.weight": "decoder.weight"}
    fresh = _tied(nn)
    assert load_model(fresh, tmp_path / "torch.safetensors") == (set(), [])
    np.testing.assert_array_equal(fresh.encoder.weight.detach().numpy(), tmodel.encoder.weight.detach().numpy())
    assert fresh.decoder.weight is fresh.encoder.weight
    st_torch.load_model(tmodel, tmp_path / "fl.safetensors")
    np.testing.assert_array_equal(tmodel.encoder.weight.detach().numpy(), model.encoder.weight.detach().numpy())


def test_load_model_strict_names_what_is_missing(tmp_path):
    from flambeau.safetensors import load_model

    nn = pytest.importorskip("flambeau.nn")
    save_file({"weight": fl.ones(2, 3)}, tmp_path / "w.safetensors")
    model, tmodel = nn.Linear(3, 2), torch.nn.Linear(3, 2)
    with pytest.raises(RuntimeError) as ours:
        load_model(model, tmp_path / "w.safetensors")
    with pytest.raises(RuntimeError) as theirs:
        st_torch.load_model(tmodel, tmp_path / "w.safetensors")
    assert str(ours.value) == str(theirs.value)
    assert load_model(model, tmp_path / "w.safetensors", strict=False) == ({"bias"}, [])


@pytest.mark.skipif(not isinstance(getattr(dt, "complex64", None), dt.dtype), reason="this flambeau has no complex64")
def test_complex64_both_ways(tmp_path):
    ref = {"z": torch.randn(3, 2, dtype=torch.complex64)}
    st_torch.save_file(ref, tmp_path / "z.safetensors")
    got = load_file(tmp_path / "z.safetensors")
    assert got["z"].dtype == dt.complex64
    np.testing.assert_array_equal(got["z"].numpy(), ref["z"].numpy())
    back = st_torch.load(save(got))
    assert back["z"].dtype == torch.complex64 and torch.equal(back["z"], ref["z"])


@pytest.mark.skipif(not hasattr(fl, "sparse_coo_tensor"), reason="this flambeau has no sparse tensors")
def test_sparse_tensors_are_refused_as_torch_does():
    indices, values = [[0, 1], [1, 0]], [1.0, 2.0]
    sparse = torch.sparse_coo_tensor(torch.tensor(indices), torch.tensor(values), (2, 2), check_invariants=True)
    with pytest.raises(ValueError) as theirs:
        st_torch.save({"s": sparse})
    with pytest.raises(ValueError) as ours:
        save({"s": fl.sparse_coo_tensor(fl.tensor(indices), fl.tensor(values), (2, 2))})
    assert str(ours.value) == str(theirs.value)
