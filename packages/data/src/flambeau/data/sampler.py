"""Samplers: iterables of dataset keys (or of lists of keys, for batch samplers).

A :class:`~flambeau.data.DataLoader` draws keys from its sampler and fetches the samples. These
follow ``torch.utils.data.sampler``: the same classes, arguments, checks and algorithms
(:class:`RandomSampler` without replacement is one ``randperm`` per pass over the data, drawn from
a generator seeded once per iteration from the default generator when none is given).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence, Sized

import numpy as np

import flambeau as fl

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "WeightedRandomSampler",
           "BatchSampler"]


class Sampler:
    """Base class of samplers: subclasses implement ``__iter__`` (keys) and, usually, ``__len__``."""

    def __init__(self, data_source: Sized | None = None) -> None:
        pass

    def __iter__(self) -> Iterator:
        raise NotImplementedError


class SequentialSampler(Sampler):
    """Keys ``0 .. len(data_source) - 1`` in order.

    Args:
        data_source: the dataset (anything with ``__len__``).
    """

    def __init__(self, data_source: Sized) -> None:
        self.data_source = data_source

    def __iter__(self) -> Iterator[int]:
        return iter(range(len(self.data_source)))

    def __len__(self) -> int:
        return len(self.data_source)


def _fresh_generator(generator):
    """``generator``, or a new one seeded from the default generator (torch's per-iteration seed)."""
    if generator is not None:
        return generator
    seed = int(fl.empty((), dtype=fl.int64).random_().item())
    return fl.Generator().manual_seed(seed)


class RandomSampler(Sampler):
    """Keys in random order: a shuffle of the dataset (no replacement) or independent uniform draws.

    Without replacement each pass over the data is one ``flambeau.randperm``; ``num_samples`` larger
    than the dataset takes several passes. With replacement keys are drawn with
    ``flambeau.randint`` in chunks of 32.

    Args:
        data_source: the dataset (anything with ``__len__``).
        replacement: draw with replacement.
        num_samples: how many keys to yield (default ``len(data_source)``).
        generator: the :class:`flambeau.Generator` to draw from; without one each iteration
            seeds a fresh generator from the default generator.
    """

    def __init__(self, data_source: Sized, replacement: bool = False, num_samples: int | None = None,
                 generator=None) -> None:
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError(f"replacement should be a boolean value, but got replacement={self.replacement}")
        if not isinstance(self.num_samples, int) or isinstance(self.num_samples, bool) or self.num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={self.num_samples}")

    @property
    def num_samples(self) -> int:
        """The number of keys one iteration yields."""
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def __iter__(self) -> Iterator[int]:
        n = len(self.data_source)
        generator = _fresh_generator(self.generator)
        if self.replacement:
            for _ in range(self.num_samples // 32):
                yield from fl.randint(high=n, size=(32,), dtype=fl.int64, generator=generator).tolist()
            yield from fl.randint(high=n, size=(self.num_samples % 32,), dtype=fl.int64, generator=generator).tolist()
        else:
            for _ in range(self.num_samples // n):
                yield from fl.randperm(n, generator=generator).tolist()
            yield from fl.randperm(n, generator=generator).tolist()[:self.num_samples % n]

    def __len__(self) -> int:
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given ``indices`` in random order (a fresh ``randperm`` each iteration).

    Args:
        indices: a sequence of keys.
        generator: the :class:`flambeau.Generator` to draw from (default generator if None).
    """

    def __init__(self, indices: Sequence[int], generator=None) -> None:
        self.indices = indices
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        for i in fl.randperm(len(self.indices), generator=self.generator).tolist():
            yield self.indices[i]

    def __len__(self) -> int:
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """Keys ``0 .. len(weights) - 1`` drawn with probabilities proportional to ``weights``.

    Args:
        weights: a 1-d sequence (or tensor) of non-negative weights, not necessarily summing to 1.
        num_samples: how many keys to draw.
        replacement: draw with replacement; without it no key repeats within an iteration.
        generator: the :class:`flambeau.Generator` to draw from (default generator if None).

    Attributes:
        weights: the weights as a float64 tensor of shape ``(len(weights),)``.
    """

    def __init__(self, weights: Sequence[float], num_samples: int, replacement: bool = True,
                 generator=None) -> None:
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError(f"num_samples should be a positive integer value, but got num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError(f"replacement should be a boolean value, but got replacement={replacement}")
        w = fl.as_tensor(weights.numpy(force=True) if isinstance(weights, fl.Tensor) else np.asarray(weights),
                         dtype=fl.float64)
        if w.dim() != 1:
            raise ValueError(f"weights should be a 1d sequence but given weights have shape {tuple(w.shape)}")
        self.weights = w
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def __iter__(self) -> Iterator[int]:
        draws = fl.multinomial(self.weights, self.num_samples, self.replacement, generator=self.generator)
        yield from iter(draws.tolist())

    def __len__(self) -> int:
        return self.num_samples


class BatchSampler(Sampler):
    """Groups the keys of ``sampler`` into lists of ``batch_size`` (the last one shorter unless dropped).

    Args:
        sampler: a sampler or any iterable of keys.
        batch_size: the number of keys per batch (positive).
        drop_last: drop the last batch when it is shorter than ``batch_size``.

    Example::

        >>> list(BatchSampler(SequentialSampler(range(10)), batch_size=3, drop_last=False))
        [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    """

    def __init__(self, sampler: Sampler | Iterable[int], batch_size: int, drop_last: bool) -> None:
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError(f"batch_size should be a positive integer value, but got batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def __iter__(self) -> Iterator[list[int]]:
        it = iter(self.sampler)
        if self.drop_last:
            for batch in zip(*[it] * self.batch_size):
                yield [*batch]
        else:
            batch = [*itertools.islice(it, self.batch_size)]
            while batch:
                yield batch
                batch = [*itertools.islice(it, self.batch_size)]

    def __len__(self) -> int:
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
