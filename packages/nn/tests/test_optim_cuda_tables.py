"""The multi-tensor CUDA update's launch arguments (Note [Multi-tensor CUDA updates]), without a device.

The table, sizes and chunks travel as one uploaded int64 array viewed four ways, and uploads are reused
while the same bytes come again. Here the backend is numpy (uploads are host arrays, views are numpy
views) and the kernel records what it is given; the CUDA tier runs the real kernel on a GPU.
"""

from __future__ import annotations

import contextlib
import types

import numpy as np
from numpy.lib.stride_tricks import as_strided

from flambeau.optim import _cuda_kernels as ck


class HostBackend:
    """The backend calls _launch_multi makes, over host arrays: a device address is the array's index."""

    def __init__(self, arrays):
        self.arrays = arrays

    def data_ptr(self, a):
        return 1000 + [id(x) for x in self.arrays].index(id(a))

    def as_strided(self, buffer, shape, strides, offset):
        item = buffer.dtype.itemsize
        return as_strided(buffer[offset:], shape, tuple(s * item for s in strides))


def test_launch_multi_passes_the_table_sizes_and_chunks(monkeypatch):
    launched = []

    class Recorder:
        def __getitem__(self, config):
            return lambda *args: launched.append((config, [np.array(a) for a in args[:4]], args[4:]))

    uploads = []
    monkeypatch.setattr(ck, "_kernel", lambda family, multi: Recorder())
    monkeypatch.setattr(ck, "_upload", lambda host: uploads.append(host) or host)
    p0, g0, m0 = np.zeros(3), np.zeros(3), np.zeros(3)
    p1, g1 = np.zeros(ck.CHUNK + 5), np.zeros(ck.CHUNK + 5)
    p2, g2 = np.zeros(0), np.zeros(0)  # an empty parameter: a row, no chunk
    be = HostBackend([p0, g0, m0, p1, g1, p2, g2])
    rows = [(p0, g0, (m0, None, None)), (p1, g1, (None, None, None)), (p2, g2, (None, None, None))]
    ck._launch_multi("adam", rows, "sc", (True, False, False, False), "stream", be)
    (config, (table, sizes, chunk_row, chunk_start), rest), = launched
    assert config == (3, ck._BLOCK, "stream") and rest == ("sc", True, False, False, False)
    np.testing.assert_array_equal(table, [[1000, 1001, 1002, 0, 0], [1003, 1004, 0, 0, 0], [1005, 1006, 0, 0, 0]])
    np.testing.assert_array_equal(sizes, [3, ck.CHUNK + 5, 0])
    np.testing.assert_array_equal(chunk_row, [0, 1, 1])
    np.testing.assert_array_equal(chunk_start, [0, 0, ck.CHUNK])
    assert len(uploads) == 1 and uploads[0].dtype == np.int64


def test_uploads_are_reused_for_the_same_bytes_and_replaced_for_new_ones(monkeypatch):
    import flambeau.cuda
    from flambeau import _backends

    copies = []
    stream = types.SimpleNamespace(device_index=0, cuda_stream=0)
    monkeypatch.setattr(ck, "_UPLOADS", {})
    monkeypatch.setattr(flambeau.cuda, "current_stream", lambda: stream)
    monkeypatch.setattr(ck, "upload_memory", lambda index: contextlib.nullcontext())  # (no device: no pools)
    monkeypatch.setattr(_backends, "backend", lambda name: types.SimpleNamespace(
        from_numpy=lambda host: copies.append(host.copy()) or copies[-1]))
    a = ck._upload(np.array([1, 2, 3]))
    assert ck._upload(np.array([1, 2, 3])) is a and len(copies) == 1
    assert ck._upload(np.array([1.0, 2.0, 3.0])) is not a and len(copies) == 2  # another dtype
    stream.cuda_stream = 0x50  # another stream: its own copy (nothing orders it after the first one's)
    assert ck._upload(np.array([1, 2, 3])) is not a and len(copies) == 3
    stream.cuda_stream = 0
    # new bytes of the same slot (a table of gradients allocated anew) replace its copy: nothing piles up
    b = ck._upload(np.array([4, 5, 6]))
    assert b is not a and len(copies) == 4 and len(ck._UPLOADS) == 3
    assert all(entry[1] is not a for entry in ck._UPLOADS.values())
    assert ck._upload(np.array([4, 5, 6])) is b and len(copies) == 4
    for i in range(ck._MAX_UPLOADS + 1):
        ck._upload(np.arange(i + 1))
    assert len(ck._UPLOADS) <= ck._MAX_UPLOADS
