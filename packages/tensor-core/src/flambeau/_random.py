"""Random number generation: :class:`Generator`, ``manual_seed`` and the random factories.

A :class:`Generator` belongs to a device type. A CPU generator wraps a numpy ``np.random.Generator``
on the PCG64 bit generator (``Generator._np``); a CUDA generator is a Philox seed and offset that
the device kernels draw from without any state on the device (Note [Philox on the device] in
``flambeau._kernels.cuda.random``), one default per device (``flambeau.cuda.default_generators``).
``manual_seed`` seeds them all, as torch's does. A seed therefore gives reproducible numbers on
each device, but the CPU and CUDA streams differ (as in torch).

Random *functions* (``rand``, ``randn`` ...) live here and are exported through ``__all__``; the
in-place ``Tensor`` methods (``normal_``, ``uniform_`` ...) are declared in the operator table
(non-differentiable, method only) so that they bump the version counter like every in-place
operator. Their kernels (``flambeau._kernels.<device>.random``) take ``kernel(dst, draw)``: fill
``dst`` in place with samples of ``draw``, a :class:`Draw` (distribution, parameters, generator).
The factories on a device other than the CPU allocate there and call the same kernels, so no
sample crosses the bus.
"""

from __future__ import annotations

import numbers
import os
from typing import NamedTuple

import numpy as np

from flambeau import _dtype as dt
from flambeau._backends import backend
from flambeau._default_device import DEFAULT as _DEFAULT_DEVICE
from flambeau._device import CPU, to_device
from flambeau._factories import _finish as _finish_host
from flambeau._kernels.cpu.random import host_samples
from flambeau._memory_format import like_layout
from flambeau._ops._common import inplace_by_engine, inplace_needs_engine, normalize_shape
from flambeau._ops._registry import OpDef, declare
from flambeau._storage import allocation_error
from flambeau._tensor import Tensor, _wrap
from flambeau.cuda import random as _cuda_random

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed", "get_rng_state",
           "set_rng_state", "rand", "randn", "randint", "randperm", "rand_like", "randn_like",
           "randint_like", "normal", "poisson"]

_DEFAULT_SEED = 67280421310721  # torch's default_generator.initial_seed()
_STATE_BYTES = 16 + 16 + 8 + 8 + 8  # PCG64 state, increment, has_uint32, uinteger, initial seed
_PHILOX_STATE_BYTES = 16  # seed, offset
_U64 = (1 << 64) - 1


class Generator:
    """A source of random numbers with its own state: ``Generator(device='cpu')``.

    Pass it as ``generator=`` to any random function to draw from it instead of the global
    :data:`default_generator`. On the CPU the numbers come from numpy's PCG64 bit generator,
    reachable as the ``_np`` attribute (an ``np.random.Generator``) for code that draws numbers
    itself; on CUDA from Philox4x32-10 keyed by the seed, at a counter offset that each launch
    advances (``_offset``; Note [Philox on the device] in ``flambeau._kernels.cuda.random``).

    Attributes:
        device: the :class:`flambeau.device` whose tensors the generator fills.
    """

    __slots__ = ("device", "_np", "_seed", "_offset", "__weakref__")

    def __init__(self, device="cpu"):
        self.device = to_device(device)
        self._np = None
        self.manual_seed(_DEFAULT_SEED)

    @property
    def _philox(self) -> bool:
        return self.device.type != "cpu"

    def _philox_next(self) -> tuple:
        """``(seed, offset)`` for one device launch, advancing the offset (Note [Philox on the device])."""
        offset = self._offset
        self._offset = (offset + 1) & _U64
        return self._seed, offset

    def manual_seed(self, seed) -> Generator:
        """Reset the state from integer ``seed`` (negative seeds wrap modulo 2**64); return self."""
        if isinstance(seed, Tensor):
            seed = seed.item()
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise RuntimeError(f"manual_seed expected a long, but got {type(seed).__name__}")
        seed = int(seed)
        if seed < -(1 << 63) or seed > _U64:
            raise RuntimeError(f"Overflow when unpacking long: seed must be in [-2**63, 2**64), got {seed}")
        self._seed = seed & _U64
        self._offset = 0
        if not self._philox:
            self._np = np.random.Generator(np.random.PCG64(self._seed))
        return self

    def seed(self) -> int:
        """Seed from a non-deterministic source (the OS) and return the 64-bit seed used."""
        s = int.from_bytes(os.urandom(8), "little")
        self.manual_seed(s)
        return s

    def initial_seed(self) -> int:
        """The seed the current sequence started from."""
        return self._seed

    def get_state(self) -> Tensor:
        """The generator's state as a 1-d ``uint8`` CPU tensor for :meth:`set_state`: 56 bytes on the
        CPU (PCG64's state and the seed), 16 on CUDA (seed and Philox offset, as torch's)."""
        if self._philox:
            buf = self._seed.to_bytes(8, "little") + self._offset.to_bytes(8, "little")
            return _wrap(np.frombuffer(buf, np.uint8).copy(), CPU)
        st = self._np.bit_generator.state
        buf = bytearray()
        buf += st["state"]["state"].to_bytes(16, "little")
        buf += st["state"]["inc"].to_bytes(16, "little")
        buf += int(st["has_uint32"]).to_bytes(8, "little")
        buf += int(st["uinteger"]).to_bytes(8, "little")
        buf += self._seed.to_bytes(8, "little")
        return _wrap(np.frombuffer(bytes(buf), np.uint8).copy(), CPU)

    def set_state(self, new_state: Tensor) -> Generator:
        """Restore a state returned by :meth:`get_state` (a ``uint8`` CPU tensor); return self."""
        if not isinstance(new_state, Tensor):
            raise TypeError(f"expected a flambeau.ByteTensor, but got {type(new_state).__name__}")
        if new_state.dtype is not dt.uint8:
            raise TypeError(f"RNG state must be a flambeau.ByteTensor (uint8), got dtype {new_state.dtype}")
        size = _PHILOX_STATE_BYTES if self._philox else _STATE_BYTES
        if new_state.numel() != size:
            raise RuntimeError(f"RNG state is wrong size: expected {size} bytes, got {new_state.numel()}")
        b = np.ascontiguousarray(new_state.numpy(force=True)).reshape(-1).tobytes()
        if self._philox:
            self._seed = int.from_bytes(b[0:8], "little")
            self._offset = int.from_bytes(b[8:16], "little")
            return self
        bg = np.random.PCG64()
        bg.state = {
            "bit_generator": "PCG64",
            "state": {"state": int.from_bytes(b[0:16], "little"), "inc": int.from_bytes(b[16:32], "little")},
            "has_uint32": int.from_bytes(b[32:40], "little"),
            "uinteger": int.from_bytes(b[40:48], "little"),
        }
        self._np = np.random.Generator(bg)
        self._seed = int.from_bytes(b[48:56], "little")
        return self

    def __repr__(self) -> str:
        return f"<flambeau.Generator object on {self.device}>"


default_generator = Generator()
"""The global :class:`Generator` used when no ``generator=`` is given."""


# CUDA device index -> its default generator, made on first use and seeded with the last manual_seed.
_device_defaults: dict = {}
_last_seed = [_DEFAULT_SEED]


def device_default_generator(dev) -> Generator:
    """The default generator of device ``dev`` (a :class:`flambeau.device`): the CPU's, or a CUDA device's."""
    if dev.type == "cpu":
        return default_generator
    g = _device_defaults.get((dev.type, dev.index))
    if g is None:
        g = Generator(dev).manual_seed(_last_seed[0])
        _device_defaults[(g.device.type, g.device.index)] = g
    return g


_cuda_random._DEFAULT_FOR[0] = device_default_generator  # flambeau.cuda's seeding functions ask it


def _generator_for(generator, dev) -> Generator:
    """``generator`` (or the default one of device ``dev`` when None), checked to belong to ``dev``'s type."""
    if generator is None:
        return device_default_generator(dev)
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be a flambeau.Generator, got {type(generator).__name__}")
    if generator.device.type != dev.type:
        raise RuntimeError(f"Expected a '{dev.type}' device type for generator but found "
                           f"'{generator.device.type}'")
    return generator


def _gen(generator) -> np.random.Generator:
    """The numpy generator behind CPU ``generator`` (the default one when None)."""
    return _generator_for(generator, CPU)._np


def manual_seed(seed) -> Generator:
    """Seed the default generator of the CPU and of every CUDA device with integer ``seed``; return
    the CPU's (as torch's ``manual_seed``)."""
    g = default_generator.manual_seed(seed)
    _last_seed[0] = g.initial_seed()
    for dg in _device_defaults.values():
        dg.manual_seed(_last_seed[0])
    return g


def seed() -> int:
    """Seed the default generators (CPU and CUDA) from a non-deterministic source; return the seed."""
    s = default_generator.seed()
    manual_seed(s)
    return s


def initial_seed() -> int:
    """The initial seed of the default generator."""
    return default_generator.initial_seed()


def get_rng_state() -> Tensor:
    """The default generator's state as a ``uint8`` tensor."""
    return default_generator.get_state()


def set_rng_state(new_state: Tensor) -> None:
    """Restore the default generator's state from a ``uint8`` tensor of :func:`get_rng_state`."""
    default_generator.set_state(new_state)


# --- helpers ------------------------------------------------------------------------------------
def _finish(arr: np.ndarray, d: dt.dtype, device, requires_grad: bool) -> Tensor:
    """Wrap host array ``arr`` (converted to ``d``) as a tensor on ``device``."""
    if arr.dtype != d.np:
        with np.errstate(all="ignore"):  # values beyond float16's range become inf, as in torch
            arr = arr.astype(d.np)
    return _finish_host(np.asarray(arr), device, requires_grad)


def _float_dtype(dtype, name: str) -> dt.dtype:
    d = dt.get_default_dtype() if dtype is None else dt.to_dtype(dtype)
    if not d.is_floating_point:
        raise NotImplementedError(f"\"{name}\" not implemented for '{d.scalar_name}'")
    return d




class Draw(NamedTuple):
    """What a random kernel draws (module docstring): a distribution, its parameters, a generator."""

    dist: str
    params: tuple
    generator: Generator


def _empty_on(dev, shape: tuple, np_dtype):
    """An uninitialised backend array of ``shape`` on device ``dev``."""
    if dev is CPU:
        return np.empty(shape, np_dtype)
    return backend(dev.type).empty(shape, np_dtype, dev)


def _sampled(name: str, shape: tuple, d: dt.dtype, device, requires_grad: bool, dist: str, params: tuple,
             generator) -> Tensor:
    """A new tensor of ``shape``/``d`` on ``device`` holding samples of ``dist``, drawn on that device."""
    dev = _DEFAULT_DEVICE[0] if device is None else to_device(device)
    draw = Draw(dist, params, _generator_for(generator, dev))
    if dev is CPU:
        return _finish(_draw(name, shape, d, lambda: host_samples(draw, shape, d.np)), d, dev, requires_grad)
    data = _empty_on(dev, shape, d.np)
    UNIFORM_.kernel(dev.type)(data, draw)  # every random operator's kernel samples any distribution
    t = _wrap(data, dev, None, d)
    if requires_grad:
        t.requires_grad_(True)
    return t


def dropout_mask(shape: tuple, p: float, np_dtype, device, generator=None):
    """The scaled keep mask of dropout on ``device``: ``(u >= p) / (1 - p)`` in ``np_dtype`` (a backend array).

    ``p`` in ``[0, 1)``; drawn from the device's default generator unless ``generator`` is given.
    """
    dev = CPU if device is None else to_device(device)
    draw = Draw("dropout", (p,), _generator_for(generator, dev))
    mask = _empty_on(dev, shape, np_dtype)
    UNIFORM_.kernel(dev.type)(mask, draw)
    return mask


def _check_tensor(x, argname, opname) -> Tensor:
    if not isinstance(x, Tensor):
        raise TypeError(f"{opname}(): argument '{argname}' must be Tensor, not {type(x).__name__}")
    return x


def _size(size: tuple, kw: dict) -> tuple:
    """The shape from ``f(2, 3)``, ``f((2, 3))`` or ``f(size=(2, 3))``."""
    if kw:
        if set(kw) != {"size"} or size:
            raise TypeError(f"unexpected keyword arguments {sorted(kw)} (only 'size' is accepted besides the "
                            "documented ones, and not together with positional sizes)")
        size = (kw["size"],)
    return normalize_shape(size)


def _draw(name: str, shape: tuple, d: dt.dtype, draw) -> np.ndarray:
    """``draw()``'s samples of ``shape``; a size too large to allocate raises flambeau's error naming it."""
    try:
        return draw()
    except (MemoryError, ValueError, OverflowError) as error:
        raise allocation_error(error, name, shape, d) from None


# --- random factories ---------------------------------------------------------------------------
def rand(*size, generator=None, dtype=None, device=None, requires_grad: bool = False, **kw) -> Tensor:
    """Uniform samples from ``[0, 1)`` of shape ``size``; floating ``dtype`` (default dtype if None)."""
    d, shape = _float_dtype(dtype, "check_uniform_bounds"), _size(size, kw)
    return _sampled("rand", shape, d, device, requires_grad, "uniform", (0.0, 1.0), generator)


def randn(*size, generator=None, dtype=None, device=None, requires_grad: bool = False, **kw) -> Tensor:
    """Standard normal samples of shape ``size``; floating ``dtype`` (default dtype if None)."""
    d, shape = _float_dtype(dtype, "normal_kernel_cpu"), _size(size, kw)
    return _sampled("randn", shape, d, device, requires_grad, "normal", (0.0, 1.0), generator)


def _int_bounds(d: dt.dtype):
    """The half-open range ``[lo, hi)`` of integers ``d`` can hold exactly (floats: their mantissa)."""
    if d is dt.bool:
        return 0, 2
    if d.is_floating_point:
        m = {dt.float16: 11, dt.float32: 24, dt.float64: 53}[d]
        return -(1 << m), (1 << m) + 1
    info = np.iinfo(d.np)
    return int(info.min), int(info.max) + 1


def _check_int_range(low: int, high: int, d: dt.dtype, name: str = "random_") -> None:
    """RuntimeError unless ``[low, high)`` is a non-empty range that ``d`` holds exactly."""
    if low >= high:
        raise RuntimeError(f"{name} expects 'from' to be less than 'to', but got from={low} >= to={high}")
    lo, hi = _int_bounds(d)
    if low < lo or high > hi:
        raise RuntimeError(
            f"{name} expects 'from' and 'to' to be within [{lo}, {hi}] for dtype {d}, got from={low}, to={high}"
        )


def randint(*args, low=None, high=None, size=None, generator=None, dtype=None, device=None,
            requires_grad: bool = False) -> Tensor:
    """Integers drawn uniformly from ``[low, high)``: ``randint(high, size)`` or ``randint(low, high, size)``.

    ``low`` (default 0), ``high`` and ``size`` may also be keywords. ``size`` is a tuple of ints;
    the dtype is int64 unless given.
    """
    if high is not None:
        args = (0 if low is None else low, high) + args
    elif low is not None:
        raise TypeError("randint(): 'low' given without 'high'")
    if size is None:
        if not args:
            raise TypeError("randint() missing required argument 'size'")
        args, size = args[:-1], args[-1]
    if len(args) == 1:
        low, high = 0, args[0]
    elif len(args) == 2:
        low, high = args
    else:
        raise TypeError(f"randint() takes (high, size) or (low, high, size), got {len(args) + 1} positional arguments")
    low, high = (int(v.item()) if isinstance(v, Tensor) else v for v in (low, high))
    for name, v in (("low", low), ("high", high)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            raise TypeError(f"randint(): argument '{name}' must be int, not {type(v).__name__}")
    d = dt.int64 if dtype is None else dt.to_dtype(dtype)
    shape = normalize_shape((size,) if not isinstance(size, int) else ((size,),))
    _check_int_range(int(low), int(high), d)
    return _sampled("randint", shape, d, device, requires_grad, "integers", (int(low), int(high)), generator)


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad: bool = False) -> Tensor:
    """A random permutation of ``0 .. n-1`` as a 1-d tensor (int64 unless ``dtype`` is given)."""
    if isinstance(n, bool) or not isinstance(n, numbers.Integral):
        raise TypeError(f"randperm(): argument 'n' must be int, not {type(n).__name__}")
    if n < 0:
        raise RuntimeError(f"n must be non-negative, got{n}")
    d = dt.int64 if dtype is None else dt.to_dtype(dtype)
    if n > 0 and n - 1 >= _int_bounds(d)[1]:
        raise RuntimeError(f"n is too large for result tensor type: '{d}'")
    return _finish(_gen(generator).permutation(int(n)), d, device, requires_grad)


def _like_args(input, dtype, device, name):
    _check_tensor(input, "input", name)
    return tuple(input.shape), input.dtype if dtype is None else dt.to_dtype(dtype), \
        input.device if device is None else device


def rand_like(input: Tensor, *, generator=None, dtype=None, device=None, requires_grad: bool = False,
              memory_format=None) -> Tensor:
    """:func:`rand` with the shape, dtype and device of ``input`` (unless given)."""
    _, d, dev = _like_args(input, dtype, device, "rand_like")
    out = like_layout(input, memory_format, lambda shape: rand(shape, generator=generator, dtype=d, device=dev))
    return out.requires_grad_(True) if requires_grad else out


def randn_like(input: Tensor, *, generator=None, dtype=None, device=None, requires_grad: bool = False,
               memory_format=None) -> Tensor:
    """:func:`randn` with the shape, dtype and device of ``input`` (unless given)."""
    _, d, dev = _like_args(input, dtype, device, "randn_like")
    out = like_layout(input, memory_format, lambda shape: randn(shape, generator=generator, dtype=d, device=dev))
    return out.requires_grad_(True) if requires_grad else out


def randint_like(input: Tensor, low=0, high=None, *, generator=None, dtype=None, device=None,
                 requires_grad: bool = False, memory_format=None) -> Tensor:
    """:func:`randint` with the shape, dtype and device of ``input``: ``randint_like(input, high)``
    or ``randint_like(input, low, high)``."""
    _, d, dev = _like_args(input, dtype, device, "randint_like")
    if high is None:
        low, high = 0, low
    out = like_layout(input, memory_format, lambda shape: randint(low, high, shape, generator=generator, dtype=d,
                                                                  device=dev))
    return out.requires_grad_(True) if requires_grad else out


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """Normal samples with the given ``mean`` and ``std``.

    Forms (as torch): ``normal(mean: Tensor, std: Tensor)`` (broadcast shapes),
    ``normal(mean: Tensor, std: float = 1.0)``, ``normal(mean: float, std: Tensor)``, and
    ``normal(mean: float, std: float, size)``. The result is floating (the dtype of the tensor
    arguments, else ``dtype`` or the default dtype); std must be non-negative.
    """
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not mt and not st:
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments: with float mean and std, "
                            "'size' is required")
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
        d = _float_dtype(dtype, "normal_kernel_cpu")
        shape = normalize_shape((size,))
        return _sampled("normal", shape, d, device, requires_grad, "normal", (mean, std), generator)
    if size is not None:
        raise TypeError("normal(): 'size' may only be given when mean and std are numbers")
    tensors = [x for x in (mean, std) if isinstance(x, Tensor)]
    for t in tensors:
        if not t.dtype.is_floating_point:
            raise NotImplementedError(f"\"normal_kernel_cpu\" not implemented for '{t.dtype.scalar_name}'")
    d = dt.result_type(*tensors) if dtype is None else dt.to_dtype(dtype)
    dev = tensors[0].device
    m = mean.numpy(force=True) if mt else mean
    s = std.numpy(force=True) if st else std
    if np.any(np.asarray(s) < 0):
        raise RuntimeError("normal expects all elements of std >= 0.0" if st
                           else f"normal expects std >= 0.0, but found std {std:g}")
    try:
        shape = np.broadcast_shapes(np.shape(m), np.shape(s))
    except ValueError:
        raise RuntimeError(f"normal(): the shapes of mean {list(mean.shape)} and std {list(std.shape)} "
                           "must broadcast") from None
    if dev is CPU:
        z = host_samples(Draw("normal", (0.0, 1.0), _generator_for(generator, dev)), shape, d.np)
        return _finish(z * s + m, d, dev, requires_grad)
    # On a device: standard normals drawn there, scaled and shifted by device operators (the std
    # check above read std on the host: one synchronisation, for this rare form only).
    z = _sampled("normal", tuple(shape), d, dev, False, "normal", (0.0, 1.0), generator)
    out = (z * std + mean).to(d)
    if requires_grad:
        out.requires_grad_(True)
    return out


def poisson(input: Tensor, generator=None) -> Tensor:
    """Poisson samples with rates ``input`` (floating, non-negative); same shape and dtype."""
    _check_tensor(input, "input", "poisson")
    lam = input.numpy(force=True)
    if not input.dtype.is_floating_point:
        raise NotImplementedError(f"\"poisson_cpu\" not implemented for '{input.dtype.scalar_name}'")
    if np.any(lam < 0) or np.any(np.isnan(lam)):
        raise RuntimeError("invalid Poisson rate, expected rate to be non-negative")
    return _finish(_gen(generator).poisson(lam.astype(np.float64)), input.dtype, input.device, False)


# --- bernoulli and multinomial (functions and methods, in the operator table) -----------------------
def _host_probs(p: Tensor) -> np.ndarray:
    return p.numpy(force=True)


BERNOULLI = declare("bernoulli(Tensor input, float? p=None, *, Generator? generator=None) -> Tensor",
                    differentiable=False, category="random")


@BERNOULLI.front
def bernoulli(input: Tensor, p=None, *, generator=None) -> Tensor:
    """0/1 samples: element ``i`` is 1 with probability ``input[i]`` (or with probability ``p`` if given).

    The result has the shape, dtype and device of ``input``; probabilities must lie in ``[0, 1]``.
    """
    _check_tensor(input, "input", "bernoulli")
    dev = input._device
    if p is None:
        if not input.dtype.is_floating_point:
            raise NotImplementedError(
                f"\"bernoulli_tensor_cpu_p_\" not implemented for '{input.dtype.scalar_name}'")
        probs = _host_probs(input)
        if not np.all((probs >= 0) & (probs <= 1)):
            raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
        if dev is not CPU:
            probs = input._data  # drawn against on the device (the check above read them: one sync)
    else:
        probs = _check_p(p, "bernoulli")
    if dev is CPU:
        out = _gen(generator).random(input.shape) < probs
        return _finish(out, input.dtype, dev, False)
    data = _empty_on(dev, tuple(input.shape), input.dtype.np)
    BERNOULLI_.kernel(dev.type)(data, Draw("bernoulli", (probs,), _generator_for(generator, dev)))
    return _wrap(data, dev, None, input.dtype)


def _check_p(p, name) -> float:
    if isinstance(p, Tensor):
        p = p.item()
    if not 0 <= p <= 1:
        raise RuntimeError(f"{name} expects p to be in [0, 1], but got p={p}")
    return p


MULTINOMIAL = declare("multinomial(Tensor input, int num_samples, bool replacement=False, *, "
                      "Generator? generator=None) -> Tensor", differentiable=False, category="random")


@MULTINOMIAL.front
def multinomial(input: Tensor, num_samples: int, replacement: bool = False, *, generator=None) -> Tensor:
    """Sample category indices from the (unnormalised, non-negative) weights in the rows of ``input``.

    ``input`` is 1-d ``(C,)`` or 2-d ``(N, C)`` floating; the result is int64 of shape
    ``(num_samples,)`` or ``(N, num_samples)``. Without replacement no index repeats within a row
    (so ``num_samples <= C`` and each row needs ``num_samples`` non-zero weights).
    """
    _check_tensor(input, "input", "multinomial")
    if input.dim() not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    if not input.dtype.is_floating_point:
        raise RuntimeError("multinomial only supports floating-point dtypes for input, got: "
                           f"{input.dtype.scalar_name}")
    if isinstance(num_samples, bool) or not isinstance(num_samples, numbers.Integral):
        raise TypeError(f"multinomial(): argument 'num_samples' must be int, not {type(num_samples).__name__}")
    if num_samples <= 0:
        raise RuntimeError("cannot sample n_sample <= 0 samples")
    n_cat = input.shape[-1]
    if not replacement and num_samples > n_cat:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if n_cat > (1 << 24):
        raise RuntimeError("number of categories cannot exceed 2^24")
    w = _host_probs(input).astype(np.float64).reshape(-1, n_cat)
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    sums = w.sum(axis=1)
    if np.any(sums <= 0):
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    rng = _gen(generator)
    rows = w.shape[0]
    if replacement:
        cdf = np.cumsum(w / sums[:, None], axis=1)
        cdf[:, -1] = 1.0
        u = rng.random((rows, num_samples))
        # One searchsorted over all rows: offset row r's CDF and draws by r (CDFs lie in [0, 1]).
        offs = np.arange(rows, dtype=np.float64)[:, None]
        idx = np.searchsorted((cdf + offs).ravel(), (u + offs).ravel(), side="right")
        idx = idx.reshape(rows, num_samples) - np.arange(rows)[:, None] * n_cat
        idx = np.minimum(idx, n_cat - 1)
        # An index of zero weight can only come from rounding at a CDF plateau: move it down to
        # the last category with weight.
        if np.any(np.take_along_axis(w, idx, 1) == 0):
            last = np.maximum.accumulate(np.where(w > 0, np.arange(n_cat), -1), axis=1)
            idx = np.take_along_axis(last, idx, 1)
    else:
        # Exponential race (as torch does): the k smallest E_i / w_i are a weighted sample without
        # replacement. Zero weights get infinite keys: they come last, in index order, as in torch.
        with np.errstate(divide="ignore"):
            keys = rng.standard_exponential(w.shape) / w
        idx = np.argsort(keys, axis=1, kind="stable")[:, :num_samples]
    out = idx.astype(np.int64).reshape(tuple(input.shape[:-1]) + (num_samples,))
    return _finish(out, dt.int64, input.device, False)


# --- in-place random methods (operator table: method only, not differentiable) -----------------------
def _inplace(signature: str) -> OpDef:
    return declare(signature, differentiable=False, function=False, category="random")


def _write(op, self: Tensor, dist: str, params: tuple, generator, attrs: dict) -> Tensor:
    """Fill ``self`` in place with samples of ``dist`` through ``op``'s kernel; bump the version."""
    dev = self._device
    draw = Draw(dist, params, _generator_for(generator, dev))
    kernel = op.kernel(dev.type)
    if inplace_needs_engine(self):
        # Under autograd the engine writes the samples (zero gradient to the old value, as torch's
        # NormalBackward0), after refusing leaves that require grad.
        values = _empty_on(dev, tuple(self.shape), self.dtype.np)
        kernel(values, draw)
        return inplace_by_engine(op, (self, _wrap(values, dev)), attrs)
    kernel(self._data, draw)
    self._storage._version += 1
    return self


def _float_only(self: Tensor, name: str) -> None:
    _check_tensor(self, "self", name)
    if not self.dtype.is_floating_point:
        raise NotImplementedError(f"\"{name}\" not implemented for '{self.dtype.scalar_name}'")


NORMAL_ = _inplace("normal_(Tensor self, float mean=0, float std=1, *, Generator? generator=None) -> Tensor")


@NORMAL_.front
def normal_(self: Tensor, mean: float = 0.0, std: float = 1.0, *, generator=None) -> Tensor:
    """Fill ``self`` (floating) in place with normal samples of mean ``mean`` and standard deviation
    ``std``; return self."""
    _float_only(self, "normal_kernel_cpu")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    return _write(NORMAL_, self, "normal", (mean, std), generator, {"inplace": True, "mean": mean, "std": std})


UNIFORM_ = _inplace("uniform_(Tensor self, float from=0, float to=1, *, Generator? generator=None) -> Tensor")


@UNIFORM_.front
def uniform_(self: Tensor, a: float = 0.0, b: float = 1.0, *, generator=None, **kwargs) -> Tensor:
    """Fill ``self`` (floating) in place with samples of the uniform distribution on ``[from, to)``.

    Called as ``t.uniform_(from, to)`` or ``t.uniform_(**{'from': a, 'to': b})``.
    """
    a = kwargs.pop("from", a)
    b = kwargs.pop("to", b)
    if kwargs:
        raise TypeError(f"uniform_() got an unexpected keyword argument {next(iter(kwargs))!r}")
    _float_only(self, "check_uniform_bounds")
    if a > b:
        raise RuntimeError(f"uniform_ expects to return a [from, to) range, but found from={a} > to={b}")
    return _write(UNIFORM_, self, "uniform", (a, b), generator, {"inplace": True, "from": a, "to": b})


BERNOULLI_ = _inplace("bernoulli_(Tensor self, Tensor p=0.5, *, Generator? generator=None) -> Tensor")


@BERNOULLI_.front
def bernoulli_(self: Tensor, p=0.5, *, generator=None) -> Tensor:
    """Fill ``self`` in place with 0/1 samples, 1 with probability ``p`` (a number or a tensor
    broadcastable to ``self``); return self."""
    _check_tensor(self, "self", "bernoulli_")
    if isinstance(p, Tensor) and p.numel() != 1:
        probs = _host_probs(p)
        if not np.all((probs >= 0) & (probs <= 1)):
            raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
        try:
            probs = np.broadcast_to(probs, self.shape)
        except ValueError:
            raise RuntimeError(f"bernoulli_: p of shape {list(p.shape)} does not broadcast to self of shape "
                               f"{list(self.shape)}") from None
        if self._device is not CPU:
            probs = p.to(self._device)._data  # drawn against on the device
    else:
        probs = _check_p(p, "bernoulli_")
    return _write(BERNOULLI_, self, "bernoulli", (probs,), generator, {"inplace": True, "p": p})


RANDOM_ = _inplace("random_(Tensor self, int from=0, int? to=None, *, Generator? generator=None) -> Tensor")


@RANDOM_.front
def random_(self: Tensor, *args, generator=None, **kwargs) -> Tensor:
    """Fill ``self`` in place with integers drawn uniformly: ``random_()`` from ``[0, 2**mantissa]``
    for floats (``[0, max]`` for integers), ``random_(to)`` from ``[0, to)``, ``random_(from, to)``
    from ``[from, to)``."""
    _check_tensor(self, "self", "random_")
    if len(args) > 2:
        raise TypeError(f"random_() takes at most 2 positional arguments ({len(args)} given)")
    low = kwargs.pop("from", None)
    high = kwargs.pop("to", None)
    if kwargs:
        raise TypeError(f"random_() got an unexpected keyword argument {next(iter(kwargs))!r}")
    if len(args) == 1:
        high = args[0]
    elif len(args) == 2:
        low, high = args
    lo, hi = _int_bounds(self.dtype)
    low = 0 if low is None else int(low)
    if high is None:
        high = hi  # floats: [0, 2**mantissa]; integers: [0, max]
    _check_int_range(low, int(high), self.dtype)
    return _write(RANDOM_, self, "integers", (low, int(high)), generator, {"inplace": True, "from": low, "to": high})


EXPONENTIAL_ = _inplace("exponential_(Tensor self, float lambd=1, *, Generator? generator=None) -> Tensor")


@EXPONENTIAL_.front
def exponential_(self: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    """Fill ``self`` (floating) in place with exponential samples of rate ``lambd`` (> 0); return self."""
    _float_only(self, "exponential_cpu")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    return _write(EXPONENTIAL_, self, "exponential", (lambd,), generator, {"inplace": True, "lambd": lambd})


GEOMETRIC_ = _inplace("geometric_(Tensor self, float p, *, Generator? generator=None) -> Tensor")


@GEOMETRIC_.front
def geometric_(self: Tensor, p: float, *, generator=None) -> Tensor:
    """Fill ``self`` in place with geometric samples (trials until the first success, >= 1) of
    success probability ``p`` in ``(0, 1)``; return self."""
    _check_tensor(self, "self", "geometric_")
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    return _write(GEOMETRIC_, self, "geometric", (p,), generator, {"inplace": True, "p": p})


CAUCHY_ = _inplace("cauchy_(Tensor self, float median=0, float sigma=1, *, Generator? generator=None) -> Tensor")


@CAUCHY_.front
def cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator=None) -> Tensor:
    """Fill ``self`` (floating) in place with Cauchy samples of location ``median`` and scale
    ``sigma`` (> 0); return self."""
    _float_only(self, "cauchy_cpu")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    return _write(CAUCHY_, self, "cauchy", (median, sigma), generator,
                  {"inplace": True, "median": median, "sigma": sigma})


LOG_NORMAL_ = _inplace("log_normal_(Tensor self, float mean=1, float std=2, *, Generator? generator=None) -> Tensor")


@LOG_NORMAL_.front
def log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0, *, generator=None) -> Tensor:
    """Fill ``self`` (floating) in place with log-normal samples: ``exp(x)`` for ``x`` normal of mean
    ``mean`` and standard deviation ``std``; return self."""
    _float_only(self, "log_normal_cpu")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    return _write(LOG_NORMAL_, self, "log_normal", (mean, std), generator,
                  {"inplace": True, "mean": mean, "std": std})
