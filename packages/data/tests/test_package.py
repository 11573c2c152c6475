"""flambeau-data installs as its own distribution, imports, and exports what its docs list."""

from __future__ import annotations

import importlib
import os

import pytest

import flambeau.data as data

MODULES = ["flambeau.data", "flambeau.data.datasets", "flambeau.data.dataloader", "flambeau.data.dataset",
           "flambeau.data.sampler", "flambeau.data.distributed"]


@pytest.mark.parametrize("name", MODULES)
def test_importable_with_docstring(name):
    module = importlib.import_module(name)
    assert module.__doc__ and module.__doc__.strip(), f"{name} has no module docstring"


def test_installed_as_its_own_distribution():
    from importlib.metadata import distribution

    assert distribution("flambeau-data").metadata["Name"] == "flambeau-data"


@pytest.mark.parametrize("name", MODULES)
def test_public_names_have_docstrings(name):
    module = importlib.import_module(name)
    for n in getattr(module, "__all__", []):
        obj = getattr(module, n)
        assert getattr(obj, "__doc__", None), f"{name}.{n} has no docstring"


def test_torch_names_are_all_there():
    torch_data = pytest.importorskip("torch.utils.data")
    wanted = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset",
              "Subset", "random_split", "Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
              "WeightedRandomSampler", "BatchSampler", "DistributedSampler", "DataLoader", "get_worker_info",
              "default_collate", "default_convert"]
    for n in wanted:
        assert hasattr(torch_data, n) and hasattr(data, n), n


def test_digits_file_ships_inside_the_package():
    from flambeau.data.datasets import _digits

    folder = os.path.dirname(_digits._FILE)
    assert os.path.isfile(_digits._FILE)
    assert {"NOTICE.md", "LICENSE-scikit-learn.txt"} <= set(os.listdir(folder))
