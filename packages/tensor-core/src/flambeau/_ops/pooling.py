"""Pooling operators (max/avg/adaptive pooling). Being written."""

__all__: list[str] = []
