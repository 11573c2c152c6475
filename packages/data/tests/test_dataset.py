"""Datasets and random_split (flambeau/data/dataset.py), against torch.utils.data's behaviour."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import flambeau as fl
from flambeau.data import (
    ChainDataset,
    ConcatDataset,
    Dataset,
    IterableDataset,
    StackDataset,
    Subset,
    TensorDataset,
    random_split,
)


class Squares(Dataset):
    def __init__(self, n):
        self.n = n

    def __getitem__(self, i):
        if not 0 <= i < self.n:
            raise IndexError(i)
        return i * i

    def __len__(self):
        return self.n


class Stream(IterableDataset):
    def __init__(self, items):
        self.items = list(items)

    def __iter__(self):
        return iter(self.items)

    def __len__(self):
        return len(self.items)


def test_base_classes_raise_not_implemented():
    with pytest.raises(NotImplementedError, match="should implement __getitem__"):
        Dataset()[0]
    with pytest.raises(NotImplementedError):
        iter(IterableDataset())


def test_tensor_dataset_rows_and_length():
    x, y = fl.arange(12).reshape(4, 3), fl.tensor([5, 6, 7, 8])
    ds = TensorDataset(x, y)
    assert len(ds) == 4
    a, b = ds[2]
    assert a.tolist() == [6, 7, 8] and b.item() == 7
    a, b = ds[1:3]  # slices pass through, as in torch
    assert a.shape == (2, 3) and b.tolist() == [6, 7]
    with pytest.raises(AssertionError, match="Size mismatch between tensors"):
        TensorDataset(x, fl.zeros(3))


def test_concat_dataset_indexing_and_add():
    a, b = Squares(3), Squares(2)
    ds = a + b
    assert isinstance(ds, ConcatDataset)
    assert len(ds) == 5 and ds.cumulative_sizes == [3, 5]
    assert [ds[i] for i in range(5)] == [0, 1, 4, 0, 1]
    assert ds[-1] == 1 and ds[-5] == 0
    with pytest.raises(ValueError, match="absolute value of index should not exceed dataset length"):
        ds[-6]
    with pytest.raises(AssertionError, match="should not be an empty iterable"):
        ConcatDataset([])
    with pytest.raises(AssertionError, match="does not support IterableDataset"):
        ConcatDataset([a, Stream([1])])


def test_chain_dataset_and_iterable_add():
    ds = Stream([1, 2]) + Stream([3])
    assert isinstance(ds, ChainDataset)
    assert list(ds) == [1, 2, 3] and len(ds) == 3
    with pytest.raises(AssertionError, match="only supports IterableDataset"):
        list(ChainDataset([Squares(2)]))
    with pytest.raises(AssertionError, match="only supports IterableDataset"):
        len(ChainDataset([Squares(2)]))


def test_subset_and_getitems():
    base = Squares(10)
    sub = Subset(base, [9, 2, 4])
    assert len(sub) == 3 and sub[0] == 81 and sub.__getitems__([1, 2]) == [4, 16]

    class Batched(Squares):
        def __getitems__(self, idx):
            return [("batched", i) for i in idx]

    assert Subset(Batched(5), [4, 3]).__getitems__([0, 1]) == [("batched", 4), ("batched", 3)]

    class Bad(Subset):
        def __getitem__(self, i):
            return 0

    with pytest.raises(NotImplementedError, match="overrides __getitem__ but not __getitems__"):
        Bad(base, [0])


def test_stack_dataset_tuple_and_dict():
    a, b = Squares(3), TensorDataset(fl.arange(3))
    t = StackDataset(a, b)
    assert len(t) == 3 and t[2][0] == 4 and t[2][1][0].item() == 2
    assert [s[0] for s in t.__getitems__([0, 2])] == [0, 4]
    d = StackDataset(x=a, y=Squares(3))
    assert d[1] == {"x": 1, "y": 1} and d.__getitems__([2]) == [{"x": 4, "y": 4}]
    with pytest.raises(ValueError, match="Size mismatch between datasets"):
        StackDataset(a, Squares(4))
    with pytest.raises(ValueError, match="At least one dataset should be passed"):
        StackDataset()
    with pytest.raises(ValueError, match="but both types are given"):
        StackDataset(a, y=a)


@pytest.mark.parametrize("n, lengths", [(10, [3, 7]), (10, [0.3, 0.7]), (7, [0.5, 0.5]), (11, [0.1, 0.2, 0.7])])
def test_random_split_lengths_match_torch(n, lengths):
    torch = pytest.importorskip("torch")
    from torch.utils.data import random_split as torch_split

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours = random_split(Squares(n), lengths, generator=fl.Generator().manual_seed(0))
        theirs = torch_split(range(n), lengths, generator=torch.Generator().manual_seed(0))
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    everything = sorted(i for s in ours for i in s.indices)
    assert everything == list(range(n))  # a partition


def test_random_split_remainder_round_robin_and_determinism():
    parts = random_split(Squares(5), [0.3, 0.3, 0.4], generator=fl.Generator().manual_seed(3))
    assert [len(p) for p in random_split(Squares(10), [0.25, 0.25, 0.5])] == [3, 2, 5]
    assert [len(p) for p in parts] == [2, 1, 2]  # floors 1, 1, 2; the remainder 1 goes to the first
    again = random_split(Squares(5), [0.3, 0.3, 0.4], generator=fl.Generator().manual_seed(3))
    assert [p.indices for p in parts] == [p.indices for p in again]
    other = random_split(Squares(50), [25, 25], generator=fl.Generator().manual_seed(4))
    assert other[0].indices != random_split(Squares(50), [25, 25], generator=fl.Generator().manual_seed(5))[0].indices
    fl.manual_seed(7)
    a = random_split(Squares(20), [10, 10])[0].indices
    fl.manual_seed(7)
    assert random_split(Squares(20), [10, 10])[0].indices == a  # default generator


def test_random_split_errors_and_zero_warning():
    with pytest.raises(ValueError, match="Sum of input lengths does not equal the length of the input dataset"):
        random_split(Squares(5), [2, 2])
    with pytest.raises(ValueError, match="Fraction at index 1 is not between 0 and 1"):
        random_split(Squares(5), [0.5, -0.5, 1.0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        random_split(Squares(2), [0.9, 0.05, 0.05])
    assert [str(w.message)[:30] for w in caught] == ["Length of split at index 1 is ", "Length of split at index 2 is "]


def test_random_split_matches_torch_when_permutation_is_given():
    # the split is a function of the permutation: feed both the same one
    perm = np.random.default_rng(0).permutation(9).tolist()
    ours = [perm[o - n:o] for o, n in zip(np.cumsum([2, 3, 4]), [2, 3, 4])]
    assert [len(p) for p in ours] == [2, 3, 4] and sum(ours, []) == perm
