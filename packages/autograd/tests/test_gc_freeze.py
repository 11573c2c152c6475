"""Note [Freezing the import-time heap]: after the process's first backward pass the collector runs once and
freezes what is alive, unless ``FLAMBEAU_GC_FREEZE=0``; objects made later are collected as usual. Each case
runs in a fresh interpreter (freezing is once per process)."""

from __future__ import annotations

import os
import subprocess
import sys

SCRIPT = """
import gc, weakref
import numba  # what the freeze is for (flambeau imports it when a CPU kernel first runs)
import flambeau as fl
import flambeau.autograd  # noqa: F401
assert gc.get_freeze_count() == 0
x = fl.ones(3, requires_grad=True)
(x * 2).sum().backward()
frozen = gc.get_freeze_count()
print(frozen)

class Cycle:
    pass

c = Cycle()
c.me = c  # made after the freeze: an unreachable cycle is still collected
ref = weakref.ref(c)
del c
gc.collect()
assert ref() is None
(x * 3).sum().backward()
assert gc.get_freeze_count() <= frozen  # once per process (frozen objects that die leave the count)
"""


def _frozen(env_value):
    env = {k: v for k, v in os.environ.items() if k != "FLAMBEAU_GC_FREEZE"}
    if env_value is not None:
        env["FLAMBEAU_GC_FREEZE"] = env_value
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[-1])


def test_the_heap_is_frozen_after_the_first_backward():
    assert _frozen(None) > 50_000  # numba's modules and flambeau's tables


def test_freezing_can_be_turned_off():
    assert _frozen("0") == 0
