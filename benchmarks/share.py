"""Passing a tensor through a Queue to another process and back: a handle, not a copy.

    python benchmarks/share.py [--quick]

For 1 MB, 10 MB and 100 MB float32 tensors, one round trip is timed: the parent puts the tensor
on a Queue, a child process (started once, with ``fork``) gets it and puts it back on a second
Queue, the parent gets it. flambeau.multiprocessing is compared with torch.multiprocessing
(both move the storage into shared memory on the first send, then send a handle), and with the
standard library's multiprocessing pickling the same numpy array (a copy each way). The time of
the first two should hardly depend on the size; the copy's grows with it.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys

import _harness  # noqa: I001 - first: pins every library to 2 threads before they are imported
import numpy as np

import flambeau as fl
import flambeau.multiprocessing as fmp

SIZES_MB = (1, 10, 100)


def _echo(inbox, outbox):
    while True:
        obj = inbox.get()
        if obj is None:
            return
        outbox.put(obj)


class Echo:
    """A child process that sends back whatever it gets, over queues of ``ctx``."""

    def __init__(self, ctx):
        self.inbox, self.outbox = ctx.Queue(), ctx.Queue()
        self.proc = ctx.Process(target=_echo, args=(self.inbox, self.outbox), daemon=True)
        self.proc.start()

    def __call__(self, obj):
        self.inbox.put(obj)
        return self.outbox.get()

    def close(self):
        self.inbox.put(None)
        self.proc.join(30)
        for q in (self.inbox, self.outbox):
            q.close()
            q.join_thread()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    args = parser.parse_args()
    r = _harness.Report("share", "Tensors through a Queue (benchmarks/share.py)", repeat=3 if args.quick else 7,
                        target=0.05 if args.quick else 0.2)
    torch = r.torch
    ours = Echo(fmp.get_context("fork"))
    stdlib = Echo(multiprocessing.get_context("fork"))
    theirs = None
    if torch is not None:
        import torch.multiprocessing as tmp

        theirs = Echo(tmp.get_context("fork"))
    r.header()
    times = {}
    try:
        for mb in SIZES_MB:
            n = mb * (1 << 20) // 4
            size = f"{mb} MB float32"
            a = fl.ones(n)
            arr = np.ones(n, np.float32)
            ta = torch.ones(n) if torch is not None else None
            back = ours(a)
            assert back._storage is a._storage, "the round trip should return a view of the same storage"
            t_fl, t_th = r.compare("Queue round trip", size, lambda a=a: ours(a),
                                   (lambda ta=ta: theirs(ta)) if theirs is not None else None,
                                   note="torch.multiprocessing")
            t_fl2, t_np = r.compare("Queue round trip vs copy", size, lambda a=a: ours(a),
                                    lambda arr=arr: stdlib(arr),
                                    note="torch column: stdlib multiprocessing pickling the numpy array",
                                    baseline_required=False)
            times[mb] = (min(t_fl, t_fl2), t_th, t_np)
    finally:
        ours.close()
        stdlib.close()
        if theirs is not None:
            theirs.close()
    lo, hi = SIZES_MB[0], SIZES_MB[-1]
    note = (f"100x the bytes: flambeau's round trip takes {times[hi][0] / times[lo][0]:.2f}x the time of "
            f"{lo} MB's; stdlib pickling {times[hi][2] / times[lo][2]:.0f}x")
    if times[lo][1] is not None:
        note += f"; torch {times[hi][1] / times[lo][1]:.2f}x"
    r.add_note(note + ".")
    r.add_note("Both processes use fork; the strategy is each library's default (file_descriptor).")
    r.finish()


if __name__ == "__main__":
    sys.exit(main())
