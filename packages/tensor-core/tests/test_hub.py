"""flambeau.hub: local hub repositories, cached downloads with hash checks, state dicts from URLs (file:// URLs:
no network in tests)."""

import hashlib
import pathlib

import numpy as np
import pytest

import flambeau as fl
import flambeau.hub as hub


@pytest.fixture
def hub_dir(tmp_path):
    saved = hub._HUB_DIR[0]
    hub.set_dir(tmp_path / "hub")
    yield tmp_path / "hub"
    hub._HUB_DIR[0] = saved


def test_load_calls_an_entrypoint_of_a_local_hubconf(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "mymodels.py").write_text("def scaled(x, k):\n    return x * k\n")
    (repo / "hubconf.py").write_text(
        "dependencies = ['numpy']\nfrom mymodels import scaled\n\n"
        "def doubler(k=2):\n    '''Multiplies by k.'''\n    return lambda x: scaled(x, k)\n\n_private = 1\n")
    fn = hub.load(str(repo), "doubler", source="local", k=3)
    assert fn(fl.ones(2)).tolist() == [3.0, 3.0]
    with pytest.raises(RuntimeError, match="Cannot find callable nope in hubconf"):
        hub.load(str(repo), "nope", source="local")
    with pytest.raises(ValueError, match='Unknown source: "ftp"'):
        hub.load(str(repo), "doubler", source="ftp")
    (repo / "hubconf.py").write_text("dependencies = ['surely_not_a_module_xyz']\n")
    with pytest.raises(RuntimeError, match="Missing dependencies: surely_not_a_module_xyz"):
        hub.load(str(repo), "doubler", source="local")


def test_download_checks_the_hash_and_leaves_no_partial_file(tmp_path):
    src = tmp_path / "blob.bin"
    src.write_bytes(b"flambeau" * 1000)
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    dst = tmp_path / "out" / "blob.bin"
    hub.download_url_to_file(src.as_uri(), str(dst), hash_prefix=digest[:8], progress=False)
    assert dst.read_bytes() == src.read_bytes()
    bad = tmp_path / "out" / "bad.bin"
    with pytest.raises(RuntimeError, match="invalid hash value"):
        hub.download_url_to_file(src.as_uri(), str(bad), hash_prefix="0000", progress=False)
    assert not bad.exists() and sorted(p.name for p in (tmp_path / "out").iterdir()) == ["blob.bin"]


def test_load_state_dict_from_url_downloads_once_into_the_cache(tmp_path, hub_dir):
    weights = {"w": fl.arange(6, dtype=fl.float32).reshape(2, 3), "b": fl.zeros(3)}
    src = tmp_path / "model.pt"
    fl.save(weights, str(src))
    digest = hashlib.sha256(src.read_bytes()).hexdigest()
    named = tmp_path / f"model-{digest[:8]}.pt"
    named.write_bytes(src.read_bytes())
    got = hub.load_state_dict_from_url(named.as_uri(), progress=False, check_hash=True)
    np.testing.assert_array_equal(got["w"].numpy(), weights["w"].numpy())
    cached = pathlib.Path(hub.get_dir()) / "checkpoints" / named.name
    assert cached.exists()
    named.unlink()  # a second call reads the cache, not the URL
    assert hub.load_state_dict_from_url(named.as_uri(), progress=False)["b"].shape == (3,)
    with pytest.raises(ValueError, match="weights only"):
        hub.load_state_dict_from_url(named.as_uri(), weights_only=False)


def test_dir_and_names_like_torch(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setenv("FLAMBEAU_HOME", "/tmp/fl_home")
    saved = hub._HUB_DIR[0]
    hub._HUB_DIR[0] = None
    try:
        assert hub.get_dir() == "/tmp/fl_home/hub"
    finally:
        hub._HUB_DIR[0] = saved
    assert fl.hub is hub and callable(hub.tqdm)
    assert set(torch.hub.__all__) <= set(hub.__all__)
    with pytest.raises(ValueError, match="repo_owner/repo_name"):
        hub._parse_repo("no_slash")
