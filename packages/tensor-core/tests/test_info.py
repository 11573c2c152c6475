"""flambeau.finfo / iinfo against torch's for every dtype."""

from __future__ import annotations

import pytest

import flambeau as fl

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64", "complex64", "complex128"])
def test_finfo_matches_torch(name):
    ours, theirs = fl.finfo(getattr(fl, name)), torch.finfo(getattr(torch, name))
    for attr in ("dtype", "bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution"):
        assert getattr(ours, attr) == getattr(theirs, attr), attr


@pytest.mark.parametrize("name", ["uint8", "int8", "int16", "int32", "int64"])
def test_iinfo_matches_torch(name):
    ours, theirs = fl.iinfo(getattr(fl, name)), torch.iinfo(getattr(torch, name))
    assert (ours.dtype, ours.bits, ours.min, ours.max) == (theirs.dtype, theirs.bits, theirs.min, theirs.max)


def test_finfo_of_the_default_dtype_and_errors():
    assert fl.finfo().dtype == "float32"
    with pytest.raises(TypeError, match="floating point"):
        fl.finfo(fl.int32)
    with pytest.raises(TypeError, match="integer"):
        fl.iinfo(fl.float32)
