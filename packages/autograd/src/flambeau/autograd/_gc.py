"""The collector and the import-time heap.

Note [Freezing the import-time heap]
    numba and numba-cuda leave about 100,000 container objects alive once imported (their type
    systems, lowering tables, the CUDA driver bindings), and flambeau's operator tables 20,000 more;
    none of them ever becomes garbage. CPython's collector walks every one of them on each full
    collection, which training triggers every 10 to 30 steps (the autograd graph's objects live
    through a step, get promoted, and count towards the next full collection): 45 to 65 ms each on
    a 2-core AMD EPYC, where a small model's step takes 2 to 30 ms. torch's graph lives in C++ and
    never meets the collector; ours is made of Python objects.

    So after the process's first backward pass, once the kernels' libraries are loaded and the
    model is built, the collector is run once and everything alive is frozen (``gc.freeze``, as
    long-running services do after start-up): later full collections walk only what was made
    since. Frozen objects are still freed when their reference count drops to zero; only a cycle
    of them that becomes unreachable is never collected. ``FLAMBEAU_GC_FREEZE=0`` in the
    environment turns this off; nothing is frozen when numba was never imported.
"""

from __future__ import annotations

import gc
import os
import sys

__all__ = ["freeze_after_first_backward"]

_DONE: list = []


def freeze_after_first_backward() -> None:
    """Freeze the heap once per process, after its first backward pass (Note [Freezing the import-time heap])."""
    if _DONE:
        return
    _DONE.append(True)
    if os.environ.get("FLAMBEAU_GC_FREEZE", "1") == "0" or "numba" not in sys.modules:
        return
    gc.collect()
    gc.freeze()
