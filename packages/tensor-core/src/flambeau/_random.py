"""Random number generation: :class:`Generator`, ``manual_seed`` and the random factories.

Every random number flambeau draws comes from a :class:`Generator`, a thin wrapper around a numpy
``np.random.Generator`` on the PCG64 bit generator (``Generator._np``: other modules, such as
``dropout``, draw from ``flambeau._random.default_generator._np`` or from the ``_np`` of a
generator the user passed). Numbers are drawn on the host and copied to the tensor's device, so a
seed gives the same numbers on every device. Random *functions* (``rand``, ``randn`` ...) live here
and are exported through ``__all__``; the in-place ``Tensor`` methods (``normal_``, ``uniform_``
...) are declared in the operator table (non-differentiable, method only) so that they bump the
version counter like every in-place operator.

Kernel convention of the in-place random ops: ``kernel(dst_array, host_values)`` writes the host
numpy array ``host_values`` (already of dst's dtype and shape) into ``dst_array``. Only a CPU kernel
is registered; on another device the backend's ``copy_(dst, host_array)`` does the write.
"""

from __future__ import annotations

import math
import numbers
import os

import numpy as np

from flambeau import _dtype as dt
from flambeau._backends import backend
from flambeau._device import CPU, to_device
from flambeau._factories import _finish as _finish_host
from flambeau._kernels.cpu.core import copy_kernel
from flambeau._ops._common import inplace_by_engine, inplace_needs_engine, normalize_shape
from flambeau._ops._registry import OpDef, declare
from flambeau._storage import allocation_error
from flambeau._tensor import Tensor, _wrap

__all__ = ["Generator", "default_generator", "manual_seed", "seed", "initial_seed", "get_rng_state",
           "set_rng_state", "rand", "randn", "randint", "randperm", "rand_like", "randn_like",
           "randint_like", "normal", "poisson"]

_DEFAULT_SEED = 67280421310721  # torch's default_generator.initial_seed()
_STATE_BYTES = 16 + 16 + 8 + 8 + 8  # PCG64 state, increment, has_uint32, uinteger, initial seed
_U64 = (1 << 64) - 1


class Generator:
    """A source of random numbers with its own state: ``Generator(device='cpu')``.

    Pass it as ``generator=`` to any random function to draw from it instead of the global
    :data:`default_generator`. The numbers come from numpy's PCG64 bit generator, reachable as
    the ``_np`` attribute (an ``np.random.Generator``) for code that draws numbers itself.

    Attributes:
        device: the :class:`flambeau.device` the generator is meant for (numbers are drawn on the
            host and copied there).
    """

    __slots__ = ("device", "_np", "_seed", "__weakref__")

    def __init__(self, device="cpu"):
        self.device = to_device(device)
        self.manual_seed(_DEFAULT_SEED)

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
        """The generator's state as a 1-d ``uint8`` CPU tensor (of 56 bytes), for :meth:`set_state`."""
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
        if new_state.numel() != _STATE_BYTES:
            raise RuntimeError(f"RNG state is wrong size: expected {_STATE_BYTES} bytes, got {new_state.numel()}")
        b = np.ascontiguousarray(new_state.numpy(force=True)).reshape(-1).tobytes()
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


def _gen(generator) -> np.random.Generator:
    """The numpy generator behind ``generator`` (the default one when None)."""
    if generator is None:
        return default_generator._np
    if not isinstance(generator, Generator):
        raise TypeError(f"generator must be a flambeau.Generator, got {type(generator).__name__}")
    return generator._np


def manual_seed(seed) -> Generator:
    """Seed the default generator with integer ``seed`` and return it."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    """Seed the default generator from a non-deterministic source; return the seed."""
    return default_generator.seed()


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




def _uniform(rng: np.random.Generator, shape, d: dt.dtype, low=0.0, high=1.0) -> np.ndarray:
    u = rng.random(shape, dtype=np.float32 if d.np != np.float64 else np.float64)
    if low != 0.0 or high != 1.0:
        u *= high - low
        u += low
    return u


def _standard_normal(rng: np.random.Generator, shape, d: dt.dtype) -> np.ndarray:
    return rng.standard_normal(shape, dtype=np.float32 if d.np != np.float64 else np.float64)


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
    d, shape, rng = _float_dtype(dtype, "check_uniform_bounds"), _size(size, kw), _gen(generator)
    return _finish(_draw("rand", shape, d, lambda: _uniform(rng, shape, d)), d, device, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad: bool = False, **kw) -> Tensor:
    """Standard normal samples of shape ``size``; floating ``dtype`` (default dtype if None)."""
    d, shape, rng = _float_dtype(dtype, "normal_kernel_cpu"), _size(size, kw), _gen(generator)
    return _finish(_draw("randn", shape, d, lambda: _standard_normal(rng, shape, d)), d, device, requires_grad)


def _int_bounds(d: dt.dtype):
    """The half-open range ``[lo, hi)`` of integers ``d`` can hold exactly (floats: their mantissa)."""
    if d is dt.bool:
        return 0, 2
    if d.is_floating_point:
        m = {dt.float16: 11, dt.float32: 24, dt.float64: 53}[d]
        return -(1 << m), (1 << m) + 1
    info = np.iinfo(d.np)
    return int(info.min), int(info.max) + 1


def _randint_values(rng, low: int, high: int, shape, d: dt.dtype, name: str = "random_") -> np.ndarray:
    if low >= high:
        raise RuntimeError(f"{name} expects 'from' to be less than 'to', but got from={low} >= to={high}")
    lo, hi = _int_bounds(d)
    if low < lo or high > hi:
        raise RuntimeError(
            f"{name} expects 'from' and 'to' to be within [{lo}, {hi}] for dtype {d}, got from={low}, to={high}"
        )
    return rng.integers(low, high, size=shape, dtype=np.int64 if high <= (1 << 63) else np.uint64)


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
    rng = _gen(generator)
    values = _draw("randint", shape, d, lambda: _randint_values(rng, int(low), int(high), shape, d))
    return _finish(values, d, device, requires_grad)


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
    shape, d, dev = _like_args(input, dtype, device, "rand_like")
    return rand(shape, generator=generator, dtype=d, device=dev, requires_grad=requires_grad)


def randn_like(input: Tensor, *, generator=None, dtype=None, device=None, requires_grad: bool = False,
               memory_format=None) -> Tensor:
    """:func:`randn` with the shape, dtype and device of ``input`` (unless given)."""
    shape, d, dev = _like_args(input, dtype, device, "randn_like")
    return randn(shape, generator=generator, dtype=d, device=dev, requires_grad=requires_grad)


def randint_like(input: Tensor, low=0, high=None, *, generator=None, dtype=None, device=None,
                 requires_grad: bool = False, memory_format=None) -> Tensor:
    """:func:`randint` with the shape, dtype and device of ``input``: ``randint_like(input, high)``
    or ``randint_like(input, low, high)``."""
    shape, d, dev = _like_args(input, dtype, device, "randint_like")
    if high is None:
        low, high = 0, low
    return randint(low, high, shape, generator=generator, dtype=d, device=dev, requires_grad=requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad: bool = False) -> Tensor:
    """Normal samples with the given ``mean`` and ``std``.

    Forms (as torch): ``normal(mean: Tensor, std: Tensor)`` (broadcast shapes),
    ``normal(mean: Tensor, std: float = 1.0)``, ``normal(mean: float, std: Tensor)``, and
    ``normal(mean: float, std: float, size)``. The result is floating (the dtype of the tensor
    arguments, else ``dtype`` or the default dtype); std must be non-negative.
    """
    rng = _gen(generator)
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    if not mt and not st:
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments: with float mean and std, "
                            "'size' is required")
        if std < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
        d = _float_dtype(dtype, "normal_kernel_cpu")
        shape = normalize_shape((size,))
        z = _draw("normal", shape, d, lambda: _standard_normal(rng, shape, d))
        return _finish(z * std + mean, d, device, requires_grad)
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
    z = _standard_normal(rng, shape, d)
    return _finish(z * s + m, d, dev, requires_grad)


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
    rng = _gen(generator)
    if p is None:
        if not input.dtype.is_floating_point:
            raise NotImplementedError(
                f"\"bernoulli_tensor_cpu_p_\" not implemented for '{input.dtype.scalar_name}'")
        probs = _host_probs(input)
        if not np.all((probs >= 0) & (probs <= 1)):
            raise RuntimeError("Expected p_in >= 0 && p_in <= 1 to be true, but got false.")
    else:
        probs = _check_p(p, "bernoulli")
    out = rng.random(input.shape) < probs
    return _finish(out, input.dtype, input.device, False)


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
    return declare(signature, differentiable=False, function=False, category="random",
                   kernels={"cpu": copy_kernel})


def _write(op, self: Tensor, values: np.ndarray, attrs: dict) -> Tensor:
    """Write host ``values`` into ``self`` in place through ``op``'s kernel; bump the version."""
    dev = self._device
    if values.dtype != self.dtype.np:
        with np.errstate(all="ignore"):
            values = values.astype(self.dtype.np)
    if inplace_needs_engine(self):
        # Under autograd the engine writes the samples (zero gradient to the old value, as torch's
        # NormalBackward0), after refusing leaves that require grad.
        return inplace_by_engine(op, (self, _wrap(values, CPU)), attrs)
    kernel = op.kernels.get(dev.type)
    if kernel is not None:
        kernel(self._data, values)
    else:  # no kernel registered for the device: its backend copies host values in
        backend(dev.type).copy_(self._data, np.ascontiguousarray(values))
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
    values = _standard_normal(_gen(generator), self._data.shape, self.dtype)
    if std != 1.0:
        values *= std
    if mean != 0.0:
        values += mean
    return _write(NORMAL_, self, values, {"inplace": True, "mean": mean, "std": std})


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
    values = _uniform(_gen(generator), self.shape, self.dtype, a, b)
    return _write(UNIFORM_, self, values, {"inplace": True, "from": a, "to": b})


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
    else:
        probs = _check_p(p, "bernoulli_")
    values = _gen(generator).random(self.shape) < probs
    return _write(BERNOULLI_, self, values, {"inplace": True, "p": p})


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
    values = _randint_values(_gen(generator), low, int(high), self.shape, self.dtype)
    return _write(RANDOM_, self, values, {"inplace": True, "from": low, "to": high})


EXPONENTIAL_ = _inplace("exponential_(Tensor self, float lambd=1, *, Generator? generator=None) -> Tensor")


@EXPONENTIAL_.front
def exponential_(self: Tensor, lambd: float = 1.0, *, generator=None) -> Tensor:
    """Fill ``self`` (floating) in place with exponential samples of rate ``lambd`` (> 0); return self."""
    _float_only(self, "exponential_cpu")
    if not lambd > 0:
        raise RuntimeError(f"exponential_ expects lambda > 0.0, but found lambda={lambd}")
    values = _gen(generator).standard_exponential(self.shape) / lambd
    return _write(EXPONENTIAL_, self, values, {"inplace": True, "lambd": lambd})


GEOMETRIC_ = _inplace("geometric_(Tensor self, float p, *, Generator? generator=None) -> Tensor")


@GEOMETRIC_.front
def geometric_(self: Tensor, p: float, *, generator=None) -> Tensor:
    """Fill ``self`` in place with geometric samples (trials until the first success, >= 1) of
    success probability ``p`` in ``(0, 1)``; return self."""
    _check_tensor(self, "self", "geometric_")
    if not 0 < p < 1:
        raise RuntimeError(f"geometric_ expects p to be in (0, 1), but got p={p}")
    values = _gen(generator).geometric(p, self.shape)
    return _write(GEOMETRIC_, self, values, {"inplace": True, "p": p})


CAUCHY_ = _inplace("cauchy_(Tensor self, float median=0, float sigma=1, *, Generator? generator=None) -> Tensor")


@CAUCHY_.front
def cauchy_(self: Tensor, median: float = 0.0, sigma: float = 1.0, *, generator=None) -> Tensor:
    """Fill ``self`` (floating) in place with Cauchy samples of location ``median`` and scale
    ``sigma`` (> 0); return self."""
    _float_only(self, "cauchy_cpu")
    if not sigma > 0:
        raise RuntimeError(f"cauchy_ expects sigma > 0.0, but found sigma={sigma}")
    values = median + sigma * np.tan(math.pi * (_gen(generator).random(self.shape) - 0.5))
    return _write(CAUCHY_, self, values, {"inplace": True, "median": median, "sigma": sigma})


LOG_NORMAL_ = _inplace("log_normal_(Tensor self, float mean=1, float std=2, *, Generator? generator=None) -> Tensor")


@LOG_NORMAL_.front
def log_normal_(self: Tensor, mean: float = 1.0, std: float = 2.0, *, generator=None) -> Tensor:
    """Fill ``self`` (floating) in place with log-normal samples: ``exp(x)`` for ``x`` normal of mean
    ``mean`` and standard deviation ``std``; return self."""
    _float_only(self, "log_normal_cpu")
    if not std > 0:
        raise RuntimeError(f"log_normal_ expects std > 0.0, but found std={std}")
    values = np.exp(_gen(generator).standard_normal(self.shape) * std + mean)
    return _write(LOG_NORMAL_, self, values, {"inplace": True, "mean": mean, "std": std})
