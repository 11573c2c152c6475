"""Fetchers: turn what the sampler yields (a key, or a list of keys) into a collated batch.

Shared by the single-process iterator and the worker processes (torch's ``_utils.fetch``).
"""

from __future__ import annotations

MAP, ITERABLE = 0, 1  # dataset kinds


class _MapFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last) -> None:
        self.dataset, self.auto_collation, self.collate_fn = dataset, auto_collation, collate_fn
        getitems = getattr(dataset, "__getitems__", None)
        self._getitems = getitems if auto_collation and getitems else None

    def fetch(self, index):
        if self._getitems is not None:
            data = self._getitems(index)
        elif self.auto_collation:
            data = [self.dataset[i] for i in index]
        else:
            data = self.dataset[index]
        return self.collate_fn(data)


class _IterableFetcher:
    def __init__(self, dataset, auto_collation, collate_fn, drop_last) -> None:
        self.auto_collation, self.collate_fn, self.drop_last = auto_collation, collate_fn, drop_last
        self.dataset_iter = iter(dataset)
        self.ended = False

    def fetch(self, index):
        if self.ended:
            raise StopIteration
        if self.auto_collation:
            data = []
            for _ in index:
                try:
                    data.append(next(self.dataset_iter))
                except StopIteration:
                    self.ended = True
                    break
            if len(data) == 0 or (self.drop_last and len(data) < len(index)):
                raise StopIteration
        else:
            data = next(self.dataset_iter)
        return self.collate_fn(data)


def create_fetcher(kind: int, dataset, auto_collation: bool, collate_fn, drop_last: bool):
    """A fetcher for a dataset of ``kind`` (:data:`MAP` or :data:`ITERABLE`)."""
    cls = _MapFetcher if kind == MAP else _IterableFetcher
    return cls(dataset, auto_collation, collate_fn, drop_last)
