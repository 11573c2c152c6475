"""Samplers (flambeau/data/sampler.py) against torch.utils.data's semantics."""

from __future__ import annotations

import collections

import numpy as np
import pytest

import flambeau as fl
from flambeau.data import (
    BatchSampler,
    RandomSampler,
    SequentialSampler,
    SubsetRandomSampler,
    WeightedRandomSampler,
)

try:
    import torch.utils.data as tdata
except ImportError:  # the torch comparisons are skipped; the rest runs
    tdata = None

needs_torch = pytest.mark.skipif(tdata is None, reason="torch is not installed")


def test_sequential():
    s = SequentialSampler(range(5))
    assert list(s) == [0, 1, 2, 3, 4] and len(s) == 5


@pytest.mark.parametrize("num_samples", [None, 3, 10, 23])
def test_random_without_replacement_is_a_permutation_per_pass(num_samples):
    n = 7
    s = RandomSampler(range(n), num_samples=num_samples, generator=fl.Generator().manual_seed(1))
    out = list(s)
    expected = n if num_samples is None else num_samples
    assert len(out) == expected == len(s)
    for k in range(0, expected - expected % n, n):
        assert sorted(out[k:k + n]) == list(range(n))  # each full pass is a permutation
    assert len(set(out[expected - expected % n:])) == expected % n


def test_random_seeded_determinism_and_epochs():
    g = fl.Generator().manual_seed(5)
    s = RandomSampler(range(50), generator=g)
    first, second = list(s), list(s)
    assert first != second  # the generator advances between epochs
    g.manual_seed(5)
    assert list(s) == first
    # without a generator, the default generator seeds each iteration
    fl.manual_seed(3)
    a = list(RandomSampler(range(50)))
    fl.manual_seed(3)
    assert list(RandomSampler(range(50))) == a


def test_random_with_replacement_statistics():
    s = RandomSampler(range(4), replacement=True, num_samples=8000, generator=fl.Generator().manual_seed(0))
    out = list(s)
    assert len(out) == 8000 and set(out) <= {0, 1, 2, 3}
    counts = np.bincount(out, minlength=4)
    assert np.all(np.abs(counts - 2000) < 200)
    assert len(list(RandomSampler(range(4), replacement=True, num_samples=33))) == 33


@needs_torch
def test_random_sampler_errors_match_torch():
    for kwargs, exc, msg in [({"replacement": 1}, TypeError, "replacement should be a boolean value"),
                             ({"num_samples": 0}, ValueError, "num_samples should be a positive integer value"),
                             ({"num_samples": 2.5}, ValueError, "num_samples should be a positive integer value")]:
        with pytest.raises(exc, match=msg):
            RandomSampler(range(3), **kwargs)
        with pytest.raises(exc, match=msg):
            tdata.RandomSampler(range(3), **kwargs)


def test_subset_random_sampler():
    idx = [10, 20, 30, 40]
    g = fl.Generator().manual_seed(0)
    s = SubsetRandomSampler(idx, generator=g)
    out = list(s)
    assert sorted(out) == idx and len(s) == 4
    g.manual_seed(0)
    assert list(s) == out


def test_weighted_random_sampler_statistics_and_zero_weights():
    w = [0.1, 0.0, 0.6, 0.3]
    s = WeightedRandomSampler(w, 10000, generator=fl.Generator().manual_seed(0))
    counts = np.bincount(list(s), minlength=4) / 10000
    assert counts[1] == 0 and np.allclose(counts, w, atol=0.02)
    no_rep = list(WeightedRandomSampler([1.0, 2.0, 3.0, 4.0, 5.0], 5, replacement=False,
                                        generator=fl.Generator().manual_seed(0)))
    assert sorted(no_rep) == [0, 1, 2, 3, 4]
    assert s.weights.dtype is fl.float64 and len(s) == 10000
    # the heaviest weight comes first most often without replacement
    firsts = collections.Counter(next(iter(WeightedRandomSampler([1.0, 1.0, 20.0], 2, replacement=False)))
                                 for _ in range(200))
    assert firsts[2] > 150


@needs_torch
def test_weighted_random_sampler_errors_match_torch():
    cases = [((np.ones(3), 0), ValueError, "num_samples should be a positive integer value"),
             ((np.ones(3), True), ValueError, "num_samples should be a positive integer value"),
             ((np.ones((2, 2)), 2), ValueError,
              r"weights should be a 1d sequence but given weights have shape \(2, 2\)")]
    for args, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            WeightedRandomSampler(*args)
        with pytest.raises(exc, match=msg):
            tdata.WeightedRandomSampler(*args)
    with pytest.raises(ValueError, match="replacement should be a boolean value"):
        WeightedRandomSampler([1.0], 1, replacement=None)
    assert len(list(WeightedRandomSampler(fl.tensor([1.0, 2.0]), 3))) == 3


@needs_torch
@pytest.mark.parametrize("n, bs, drop", [(10, 3, False), (10, 3, True), (9, 3, True), (2, 5, False), (2, 5, True)])
def test_batch_sampler_matches_torch(n, bs, drop):
    ours = BatchSampler(SequentialSampler(range(n)), bs, drop)
    theirs = tdata.BatchSampler(tdata.SequentialSampler(range(n)), bs, drop)
    assert list(ours) == list(theirs) and len(ours) == len(theirs)


def test_batch_sampler_errors():
    with pytest.raises(ValueError, match="batch_size should be a positive integer value, but got batch_size=0"):
        BatchSampler(range(3), 0, False)
    with pytest.raises(ValueError, match="drop_last should be a boolean value, but got drop_last=1"):
        BatchSampler(range(3), 1, 1)
