"""Indexing (``__getitem__``/``__setitem__``) and index operators: gather, scatter, index_select ..."""
