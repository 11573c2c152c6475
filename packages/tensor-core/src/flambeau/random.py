"""``flambeau.random``: the global random state, as ``torch.random``.

``manual_seed``, ``seed``, ``initial_seed``, ``get_rng_state`` and ``set_rng_state`` are the
top-level functions of the same names (``flambeau._random``); :func:`fork_rng` saves the CPU and
CUDA generators' states around a block and restores them after it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from flambeau._random import Generator, get_rng_state, initial_seed, manual_seed, seed, set_rng_state

__all__ = ["Generator", "fork_rng", "get_rng_state", "initial_seed", "manual_seed", "seed", "set_rng_state"]


@contextlib.contextmanager
def fork_rng(devices=None, enabled: bool = True, _caller: str = "fork_rng", _devices_kw: str = "devices",
             device_type: str = "cuda") -> Iterator[None]:
    """Inside the ``with`` block draw freely; after it, the random state is what it was before.

    Args:
        devices: the CUDA device indices whose default generators are restored too; None: every
            CUDA device (none where CUDA is not available). The CPU generator is always restored.
        enabled: False: do nothing (the generators keep what the block drew).
        device_type: only ``"cuda"`` (or ``"meta"``, which forks nothing), as torch's.
    """
    if device_type == "meta" or not enabled:
        yield
        return
    if device_type != "cuda":
        raise RuntimeError(f"fork_rng(): device_type must be 'cuda', got {device_type!r}")
    from flambeau import cuda

    if devices is None:
        devices = range(cuda.device_count()) if cuda.is_available() else ()
    devices = list(devices)  # a generator would be exhausted before the states are restored
    cpu_state = get_rng_state()
    device_states = [cuda.get_rng_state(d) for d in devices]
    try:
        yield
    finally:
        set_rng_state(cpu_state)
        for d, state in zip(devices, device_states):
            cuda.set_rng_state(state, d)
