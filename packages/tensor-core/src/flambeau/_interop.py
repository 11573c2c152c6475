"""Interoperability: DLPack import (``from_dlpack``)."""

__all__: list = []
