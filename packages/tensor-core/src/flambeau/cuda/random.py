"""``flambeau.cuda`` random state, as ``torch.cuda.random``: one Philox generator per device.

The generators themselves are :class:`flambeau.Generator` objects on ``cuda:<i>`` (Note [Philox on
the device] in ``flambeau._kernels.cuda.random``); ``flambeau.manual_seed`` seeds them too.
"""

from __future__ import annotations

# flambeau._random (which owns Generator and every device's default one) sets this when it is
# imported: ``device -> its default Generator``. Asked through this hook, not imported, because
# flambeau._random imports the backends, which import this package.
_DEFAULT_FOR: list = [None]

__all__ = ["manual_seed", "manual_seed_all", "seed", "seed_all", "initial_seed", "get_rng_state",
           "get_rng_state_all", "set_rng_state", "set_rng_state_all", "default_generator"]


def default_generator(device=None):
    """The default generator of CUDA device ``device`` (default: the current device)."""
    from flambeau._device import to_device
    from flambeau.cuda import _lazy_init

    _lazy_init()
    return _DEFAULT_FOR[0](to_device("cuda" if device is None else device))


def _all():
    from flambeau.cuda import device_count

    return [default_generator(i) for i in range(device_count())]


def _usable() -> bool:
    """Whether CUDA can be used here. torch queues seeding calls until CUDA starts, so that seeding on a machine
    without it does nothing; flambeau seeds at once where CUDA is available and ignores the call elsewhere."""
    from flambeau.cuda import is_available

    return is_available()


def manual_seed(seed) -> None:
    """Seed the current device's generator (nothing without CUDA, as torch)."""
    if _usable():
        default_generator().manual_seed(seed)


def manual_seed_all(seed) -> None:
    """Seed every device's generator."""
    for g in _all():
        g.manual_seed(seed)


def seed() -> None:
    """Seed the current device's generator from a non-deterministic source (nothing without CUDA)."""
    if _usable():
        default_generator().seed()


def seed_all() -> None:
    """Seed every device's generator with one non-deterministic seed (nothing without CUDA)."""
    gens = _all()
    if not gens:
        return
    s = gens[0].seed()
    for g in gens[1:]:
        g.manual_seed(s)


def initial_seed() -> int:
    """The seed the current device's generator started from."""
    return default_generator().initial_seed()


def get_rng_state(device="cuda"):
    """The generator state of ``device`` as a 16-byte ``uint8`` CPU tensor (seed, Philox offset)."""
    return default_generator(device).get_state()


def set_rng_state(new_state, device="cuda") -> None:
    """Restore a state of :func:`get_rng_state` on ``device``."""
    default_generator(device).set_state(new_state)


def get_rng_state_all() -> list:
    """Every device's state."""
    return [g.get_state() for g in _all()]


def set_rng_state_all(new_states) -> None:
    """Restore every device's state from :func:`get_rng_state_all`."""
    for g, s in zip(_all(), new_states):
        g.set_state(s)
