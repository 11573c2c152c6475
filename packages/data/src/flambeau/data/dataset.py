"""Datasets: map-style (:class:`Dataset`) and iterable (:class:`IterableDataset`), and combinators.

These follow ``torch.utils.data.dataset`` name for name and behaviour for behaviour: a map-style
dataset implements ``__getitem__`` (and usually ``__len__``); an iterable dataset implements
``__iter__``. :class:`Subset`, :class:`ConcatDataset`, :class:`StackDataset` combine map-style
datasets, :class:`ChainDataset` iterable ones, and :func:`random_split` cuts a dataset into
random non-overlapping :class:`Subset` objects.
"""

from __future__ import annotations

import bisect
import itertools
import math
import warnings
from collections.abc import Iterable, Sequence

import flambeau as fl

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "StackDataset", "ConcatDataset", "ChainDataset",
           "Subset", "random_split"]


class Dataset:
    """A map-style dataset: a mapping from keys (usually ``0 .. len-1``) to samples.

    Subclasses implement ``__getitem__(index)`` and, for samplers that need it, ``__len__``. They
    may also implement ``__getitems__(indices)`` to fetch a whole batch at once; the
    :class:`~flambeau.data.DataLoader` then calls it instead of ``__getitem__`` per index.
    ``dataset1 + dataset2`` is a :class:`ConcatDataset`.
    """

    def __getitem__(self, index):
        raise NotImplementedError("Subclasses of Dataset should implement __getitem__.")

    def __add__(self, other: Dataset) -> ConcatDataset:
        return ConcatDataset([self, other])


class IterableDataset(Dataset):
    """A dataset that is an iterable of samples (a stream), implementing ``__iter__``.

    With ``num_workers > 0`` every worker process gets a copy of the dataset and iterates it in
    full, so an iterable dataset that must not return duplicates splits its stream by
    :func:`~flambeau.data.get_worker_info` (``id`` and ``num_workers``), in ``__iter__`` or in the
    loader's ``worker_init_fn``. ``dataset1 + dataset2`` is a :class:`ChainDataset`.
    """

    def __iter__(self):
        raise NotImplementedError("Subclasses of IterableDataset should implement __iter__.")

    def __add__(self, other: Dataset) -> ChainDataset:
        return ChainDataset([self, other])


class TensorDataset(Dataset):
    """Samples are the rows of tensors sharing their first dimension: ``ds[i] == (t[i] for t in tensors)``.

    Args:
        *tensors: tensors with the same size ``N`` of dimension 0.
    """

    def __init__(self, *tensors) -> None:
        if any(tensors[0].size(0) != t.size(0) for t in tensors):
            raise AssertionError("Size mismatch between tensors")
        self.tensors = tensors

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self) -> int:
        return self.tensors[0].size(0)


class StackDataset(Dataset):
    """Zip datasets of equal length: ``StackDataset(a, b)[i] == (a[i], b[i])``,
    ``StackDataset(x=a, y=b)[i] == {"x": a[i], "y": b[i]}``.

    Args:
        *args: datasets whose samples form a tuple.
        **kwargs: datasets whose samples form a dict (not together with ``args``).
    """

    def __init__(self, *args, **kwargs) -> None:
        if args:
            if kwargs:
                raise ValueError("Supported either ``tuple``- (via ``args``) or``dict``- (via ``kwargs``) like "
                                 "input/output, but both types are given.")
            parts = args
        elif kwargs:
            parts = list(kwargs.values())
        else:
            raise ValueError("At least one dataset should be passed")
        self._length = len(parts[0])
        if any(self._length != len(d) for d in parts):
            raise ValueError("Size mismatch between datasets")
        self.datasets = args if args else kwargs

    def __getitem__(self, index):
        if isinstance(self.datasets, dict):
            return {k: d[index] for k, d in self.datasets.items()}
        return tuple(d[index] for d in self.datasets)

    def __getitems__(self, indices: list) -> list:
        def column(d):
            if callable(getattr(d, "__getitems__", None)):
                items = d.__getitems__(indices)
                if len(items) != len(indices):
                    raise ValueError(f"Nested dataset's output size mismatch. Expected {len(indices)}, "
                                     f"got {len(items)}")
                return items
            return [d[i] for i in indices]

        if isinstance(self.datasets, dict):
            cols = {k: column(d) for k, d in self.datasets.items()}
            return [{k: c[j] for k, c in cols.items()} for j in range(len(indices))]
        cols = [column(d) for d in self.datasets]
        return [tuple(c[j] for c in cols) for j in range(len(indices))]

    def __len__(self) -> int:
        return self._length


class ConcatDataset(Dataset):
    """The concatenation of map-style datasets: indices run through each dataset in turn.

    Args:
        datasets: a non-empty iterable of map-style datasets (with ``__len__``).

    Attributes:
        cumulative_sizes: the running totals of the lengths (the last is ``len(self)``).
    """

    @staticmethod
    def cumsum(sequence) -> list[int]:
        """Running totals of the lengths of the datasets in ``sequence``."""
        out, s = [], 0
        for e in sequence:
            s += len(e)
            out.append(s)
        return out

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = list(datasets)
        if len(self.datasets) == 0:
            raise AssertionError("datasets should not be an empty iterable")
        for d in self.datasets:
            if isinstance(d, IterableDataset):
                raise AssertionError("ConcatDataset does not support IterableDataset")
        self.cumulative_sizes = self.cumsum(self.datasets)

    def __len__(self) -> int:
        return self.cumulative_sizes[-1]

    def __getitem__(self, idx):
        if idx < 0:
            if -idx > len(self):
                raise ValueError("absolute value of index should not exceed dataset length")
            idx = len(self) + idx
        i = bisect.bisect_right(self.cumulative_sizes, idx)
        return self.datasets[i][idx if i == 0 else idx - self.cumulative_sizes[i - 1]]


class ChainDataset(IterableDataset):
    """The chaining of iterable datasets: iterates each in turn (lazily, as ``itertools.chain``).

    Args:
        datasets: an iterable of :class:`IterableDataset`.
    """

    def __init__(self, datasets: Iterable[Dataset]) -> None:
        self.datasets = datasets

    def __iter__(self):
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            yield from d

    def __len__(self) -> int:
        total = 0
        for d in self.datasets:
            if not isinstance(d, IterableDataset):
                raise AssertionError("ChainDataset only supports IterableDataset")
            total += len(d)
        return total


class Subset(Dataset):
    """The samples of ``dataset`` at ``indices``: ``Subset(ds, idx)[i] == ds[idx[i]]``.

    Args:
        dataset: a map-style dataset.
        indices: a sequence of keys of ``dataset``.
    """

    def __init__(self, dataset: Dataset, indices: Sequence[int]) -> None:
        self.dataset = dataset
        self.indices = indices
        if type(self).__getitem__ is not Subset.__getitem__ and type(self).__getitems__ is Subset.__getitems__:
            raise NotImplementedError(
                f"{type(self).__name__} overrides __getitem__ but not __getitems__. When subclassing Subset and "
                "overriding __getitem__, you must also override __getitems__ to ensure DataLoader works correctly "
                "with your custom logic. A simple implementation:\n\ndef __getitems__(self, indices):\n"
                "    return [self.__getitem__(idx) for idx in indices]")

    def __getitem__(self, idx):
        if isinstance(idx, list):
            return self.dataset[[self.indices[i] for i in idx]]
        return self.dataset[self.indices[idx]]

    def __getitems__(self, indices: list[int]) -> list:
        if callable(getattr(self.dataset, "__getitems__", None)):
            return self.dataset.__getitems__([self.indices[i] for i in indices])
        return [self.dataset[self.indices[i]] for i in indices]

    def __len__(self) -> int:
        return len(self.indices)


_DEFAULT = object()


def random_split(dataset: Dataset, lengths: Sequence[int | float], generator=_DEFAULT) -> list[Subset]:
    """Split ``dataset`` into non-overlapping random :class:`Subset` objects of the given lengths.

    ``lengths`` are either integers summing to ``len(dataset)``, or fractions summing to 1: each
    split then gets ``floor(len(dataset) * frac)`` samples and the remainder is handed out one by
    one round-robin from the first split (as torch does). The order comes from
    ``flambeau.randperm(len(dataset), generator=generator)``, so a seeded generator gives the same
    split every time.

    Args:
        dataset: the map-style dataset to split.
        lengths: the lengths or fractions of the splits.
        generator: the :class:`flambeau.Generator` for the permutation (the default generator if
            not given).

    Returns:
        list[Subset]: one subset per entry of ``lengths``.
    """
    if generator is _DEFAULT:
        generator = None
    if math.isclose(sum(lengths), 1) and sum(lengths) <= 1:
        sizes = []
        for i, frac in enumerate(lengths):
            if frac < 0 or frac > 1:
                raise ValueError(f"Fraction at index {i} is not between 0 and 1")
            sizes.append(math.floor(len(dataset) * frac))
        remainder = len(dataset) - sum(sizes)
        for i in range(remainder):
            sizes[i % len(sizes)] += 1
        lengths = sizes
        for i, n in enumerate(lengths):
            if n == 0:
                warnings.warn(f"Length of split at index {i} is 0. This might result in an empty dataset.",
                              stacklevel=2)
    if sum(lengths) != len(dataset):
        raise ValueError("Sum of input lengths does not equal the length of the input dataset!")
    indices = fl.randperm(sum(lengths), generator=generator).tolist()
    return [Subset(dataset, indices[offset - n:offset]) for offset, n in zip(itertools.accumulate(lengths), lengths)]
