"""Collectives on small picklable Python objects: ``broadcast_object_list`` and ``all_gather_object``.

Objects travel as their pickles: first the byte counts, then the bytes, so each call is two
collectives. As in torch, unpickling runs arbitrary code: exchange objects only between ranks you
trust, and keep them small (tensors inside are copied, use the tensor collectives for data).
"""

from __future__ import annotations

import pickle

import numpy as np

from flambeau.distributed._collectives import _root
from flambeau.distributed._process_group import ProcessGroup, resolve_group

__all__ = ["broadcast_object_list", "all_gather_object"]


def broadcast_object_list(object_list: list, src: int = 0, group: ProcessGroup | None = None, device=None) -> None:
    """Replace ``object_list``'s items on every rank with those of rank ``src``, in place.

    Args:
        object_list: a list of the same length on every rank; on ``src``, the objects to send.
        src: the global rank that sends.
        group: the process group (default: all ranks).
        device: accepted for compatibility (ignored: objects travel through host memory).
    """
    pg = resolve_group(group, "broadcast_object_list")
    if pg is None:
        return
    if not isinstance(object_list, list):
        raise TypeError(f"broadcast_object_list: object_list must be a list, got {type(object_list).__name__}")
    root = _root(pg, src, "src", "broadcast_object_list")
    pg.check("broadcast_object_list")
    mine = pg.rank() == root
    pickles = [pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL) for obj in object_list] if mine else []
    sizes = np.array([len(p) for p in pickles], np.int64) if mine else np.zeros(len(object_list), np.int64)
    pg.check_consistency("broadcast_object_list", [5, len(object_list), root],
                         lambda fp: f"a list of {fp[1]} objects, src {fp[2]}")
    pg.collective("broadcast_object_list", [pg.comm.Ibcast(sizes, root=root)], async_op=False).wait()
    data = np.frombuffer(b"".join(pickles), np.uint8).copy() if mine else np.empty(int(sizes.sum()), np.uint8)
    pg.collective("broadcast_object_list", [pg.comm.Ibcast(data, root=root)], async_op=False).wait()
    if not mine:
        offset = 0
        for i, size in enumerate(sizes):
            object_list[i] = pickle.loads(data[offset:offset + size].tobytes())
            offset += int(size)


def all_gather_object(object_list: list, obj, group: ProcessGroup | None = None) -> None:
    """Gather every rank's ``obj`` into ``object_list`` (``object_list[i]`` from rank i) on every rank.

    Args:
        object_list: a list with one slot per rank of the group; overwritten.
        obj: this rank's picklable object.
        group: the process group (default: all ranks).
    """
    pg = resolve_group(group, "all_gather_object")
    if pg is None:
        return
    if not isinstance(object_list, list) or len(object_list) != pg.size():
        given = len(object_list) if isinstance(object_list, list) else type(object_list).__name__
        raise ValueError(f"all_gather_object: object_list must be a list with one slot per rank of the group "
                         f"({pg.size()}), got {given}")
    pg.check("all_gather_object")
    mine = np.frombuffer(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), np.uint8)
    sizes = np.zeros(pg.size(), np.int64)
    count = np.array([mine.size], np.int64)
    pg.collective("all_gather_object", [pg.comm.Iallgather(count, sizes)], async_op=False).wait()
    data = np.empty(int(sizes.sum()), np.uint8)
    counts = [int(s) for s in sizes]
    offsets = [int(x) for x in np.concatenate([[0], np.cumsum(counts)[:-1]])]
    pg.collective("all_gather_object", [pg.comm.Iallgatherv(mine, [data, (counts, offsets)])], async_op=False).wait()
    for i in range(pg.size()):
        object_list[i] = pickle.loads(data[offsets[i]:offsets[i] + counts[i]].tobytes())
