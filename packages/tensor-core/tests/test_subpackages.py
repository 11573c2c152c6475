"""PyTorch's spellings: ``fl.nn`` without importing it first, ``flambeau.utils.data``, install hints.

The wheels of test_namespace.py check the same with distributions really absent; these run in the
development environment, hiding a distribution by taking its folder off ``sys.path``.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys

import pytest

import flambeau as fl

LAZY = {"autograd": "flambeau-autograd", "func": "flambeau-autograd", "amp": "flambeau-autograd",
        "nn": "flambeau-nn", "optim": "flambeau-nn", "data": "flambeau-data",
        "multiprocessing": "flambeau-multiproc", "cuda_alloc": "flambeau-cuda-alloc"}


def _python(code: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", sorted(LAZY))
def test_subpackage_resolves_on_first_attribute_access(name):
    pytest.importorskip(f"flambeau.{name}")
    result = _python(f"""
import json, sys
import flambeau as fl
before = "flambeau.{name}" in sys.modules
module = fl.{name}
print(json.dumps({{"before": before, "module": module.__name__, "same": module is sys.modules["flambeau.{name}"]}}))
""")
    assert result == {"before": False, "module": f"flambeau.{name}", "same": True}


def test_torch_style_first_lines():
    pytest.importorskip("flambeau.nn")
    layer = fl.nn.Linear(3, 2)
    optimizer = fl.optim.SGD(layer.parameters(), lr=0.1)
    layer(fl.ones(4, 3)).sum().backward()
    optimizer.step()
    assert "nn" in dir(fl) and "utils" in dir(fl)


def test_utils_data_is_flambeau_data():
    data = pytest.importorskip("flambeau.data")
    import flambeau.utils.data as utils_data
    from flambeau.utils.data import DataLoader, TensorDataset
    from flambeau.utils.data.distributed import DistributedSampler
    from flambeau.utils.data.sampler import RandomSampler

    assert utils_data is data and fl.utils.data is data
    assert DataLoader is data.DataLoader and TensorDataset is data.TensorDataset
    assert DistributedSampler is importlib.import_module("flambeau.data.distributed").DistributedSampler
    assert RandomSampler is importlib.import_module("flambeau.data.sampler").RandomSampler
    assert sys.modules["flambeau.utils.data.sampler"] is sys.modules["flambeau.data.sampler"]
    assert data.__spec__.name == "flambeau.data"  # the alias does not rename the real module
    batches = list(DataLoader(TensorDataset(fl.arange(5)), batch_size=2))
    assert [b[0].tolist() for b in batches] == [[0, 1], [2, 3], [4]]


def test_torch_vmap_and_checkpoint_paths():
    func = pytest.importorskip("flambeau.func")
    from flambeau.utils.checkpoint import checkpoint

    assert fl.vmap is func.vmap and "vmap" in dir(fl)
    assert fl.utils.checkpoint.checkpoint is checkpoint
    assert fl.vmap(fl.sum)(fl.ones(3, 2)).tolist() == [2.0, 2.0, 2.0]


def test_unknown_attribute_is_a_plain_attribute_error():
    assert not hasattr(fl, "no_such_thing")
    with pytest.raises(AttributeError, match="module 'flambeau' has no attribute 'no_such_thing'"):
        fl.no_such_thing  # noqa: B018
    with pytest.raises(AttributeError, match="has no attribute 'no_such_thing'"):
        fl.utils.no_such_thing  # noqa: B018


HIDE_AND_PROBE = """
import importlib, json, sys
hidden = {hidden!r}
sys.path[:] = [p for p in sys.path if not p.replace("\\\\\\\\", "/").endswith(f"packages/{{hidden}}/src")]
import flambeau as fl
out = {{}}
for name in {names!r}:
    try:
        importlib.import_module("flambeau." + name)
        out[name] = ["imported"]
    except ModuleNotFoundError as error:
        out[name] = [type(error).__name__, str(error)]
    out[name].append(hasattr(fl, name))
    try:
        getattr(fl, name)
    except AttributeError as error:
        out[name].append(str(error))
try:
    from flambeau.utils.data import DataLoader
    out["utils.data"] = "imported"
except ModuleNotFoundError as error:
    out["utils.data"] = str(error)
print(json.dumps(out))
"""


@pytest.mark.parametrize("hidden, names", [("nn", ["nn", "optim"]), ("data", ["data"]),
                                           ("autograd", ["autograd", "func", "amp"]),
                                           ("multiproc", ["multiprocessing"])])
def test_absent_distribution_names_what_to_install(hidden, names):
    if not os.path.isdir(os.path.join(os.path.dirname(__file__), "..", "..", hidden, "src")):
        pytest.skip("not run from a checkout of the monorepo")
    result = _python(HIDE_AND_PROBE.format(hidden=hidden, names=names))
    if result[names[0]] == ["imported", True]:
        pytest.skip(f"flambeau-{hidden} is installed regularly here, not from the checkout")
    for name in names:
        kind, message, has, attribute_message = result[name]
        hint = f"pip install {LAZY[name]}"
        assert kind == "ModuleNotFoundError" and hint in message, message
        assert has is False and hint in attribute_message, attribute_message
    if hidden == "data":
        assert "pip install flambeau-data" in result["utils.data"], result["utils.data"]
    else:
        assert result["utils.data"] == "imported"
