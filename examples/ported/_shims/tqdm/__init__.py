"""A stand-in for tqdm (not installed here): iterates, ``set_postfix``/``update``/``close``, prints nothing.

``torch.hub`` re-exports tqdm when it is installed and otherwise a fake that cannot be iterated;
the vision_transformer example iterates ``torch.hub.tqdm(loader)``.
"""

from __future__ import annotations

__all__ = ["tqdm"]


class tqdm:  # noqa: N801 - tqdm's name
    def __init__(self, iterable=None, *args, **kwargs):
        self.iterable = iterable
        self.n = 0

    def __iter__(self):
        for item in self.iterable:
            self.n += 1
            yield item

    def __len__(self) -> int:
        return len(self.iterable)

    def set_postfix(self, *args, **kwargs) -> None:
        pass

    def set_description(self, *args, **kwargs) -> None:
        pass

    def update(self, n: int = 1) -> None:
        self.n += n

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
