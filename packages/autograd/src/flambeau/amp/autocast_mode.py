"""Automatic mixed precision: ``autocast`` runs chosen operators in a lower precision (torch's ``torch.autocast``).

Note [Autocast as a dispatch mode]
    Inside ``with autocast(device_type):`` each operator call on floating tensors of that device
    type is looked up in torch's per-device cast policies (``_POLICIES``, copied from ATen's
    ``autocast_mode.cpp`` and mapped to flambeau's operator names):

    * ``lower``: matrix products, convolutions, attention, the RNN cells: every eligible input is
      cast to the autocast dtype (float16 on CUDA, bfloat16 on CPU by default) and the operator
      runs in it;
    * ``fp32``: operators that lose accuracy in a low precision (exp, log, pow, the losses, the
      norms on CUDA ...): inputs cast to float32;
    * ``fp32_first``: torch's ``fp32_set_opt_dtype``/``fp32_append_dtype`` (softmax, sum, cumsum,
      prod, norm ...): when the first input is eligible and no ``dtype`` is given, it is cast to
      float32, so the result is float32 as torch's ``dtype=torch.float32`` gives;
    * ``promote``: operators mixing several inputs (cat, stack, addcmul, index_put, scatter_add
      ...): inputs cast to the widest floating dtype among them;
    * anything else runs on its inputs as they are.

    *Eligible* means floating, on the autocast device type and not float64, as torch's
    ``is_eligible``. The casts are ordinary ``Tensor.to`` calls recorded by autograd, so backward
    sends gradients through them and a float32 parameter gets a float32 ``.grad``. Casts of leaf
    float32 tensors that require grad (the weights) to the lower dtype are cached for the region
    (``cache_enabled``), as torch's ``cached_cast``, so a weight used twice is cast once; the cache is
    cleared when the outermost region exits.

    The machinery is tensor-core's dispatch modes (Note [Dispatch modes] in ``flambeau._ops._modes``):
    the outermost ``autocast`` region of a thread pushes one :class:`_AutocastMode` that reads the
    thread's autocast state; nested regions (``enabled=False``, another dtype, another device type)
    change only that state. The state is per thread, as torch's. Outside every region nothing is
    rebound: no cost.

    torch's low-level setters (``torch.set_autocast_enabled("cpu", True)``,
    ``autocast_increment_nesting`` ...) change the same state without a region. The mode is active
    while some device type has autocast on or a region is open (:func:`_sync_mode`), so the setters
    really turn autocast on and off; ``autocast``'s ``__enter__``/``__exit__`` are those setters in
    torch's order.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Callable

import flambeau as fl
from flambeau import Tensor
from flambeau._dtype import bfloat16  # (flambeau.bfloat16 once the top level exports it)
from flambeau._ops._modes import pop_mode, push_mode

__all__ = ["autocast", "is_autocast_enabled", "get_autocast_dtype", "is_autocast_available",
           "is_autocast_cache_enabled", "clear_autocast_cache", "custom_fwd", "custom_bwd",
           "set_autocast_enabled", "set_autocast_dtype", "set_autocast_cache_enabled", "is_autocast_cpu_enabled",
           "set_autocast_cpu_enabled", "get_autocast_cpu_dtype", "set_autocast_cpu_dtype", "get_autocast_gpu_dtype",
           "set_autocast_gpu_dtype", "autocast_increment_nesting", "autocast_decrement_nesting"]

_DEVICE_TYPES = ("cpu", "cuda")


def _policy(**groups: str) -> dict:
    return {name: policy for policy, names in groups.items() for name in names.split()}


# torch's lists (aten/src/ATen/autocast_mode.{h,cpp}): CUDA uses the generic AT_FORALL_* lists, CPU its own.
# Only names of flambeau operators; bilinear is a composite of matmul/mul here (linear is an operator).
_POLICIES = {
    "cuda": _policy(
        lower="conv1d conv2d conv_transpose1d conv_transpose2d convolution prelu addmm addmv matmul einsum mm mv "
              "linear addbmm baddbmm bmm lstm_cell gru_cell rnn_tanh_cell rnn_relu_cell scaled_dot_product_attention",
        fp32="acos asin cosh erfinv exp expm1 log log10 log2 log1p reciprocal rsqrt sinh tan pow softplus "
             "layer_norm group_norm nll_loss cross_entropy kl_div l1_loss smooth_l1_loss huber_loss mse_loss "
             "binary_cross_entropy_with_logits logsumexp upsample_nearest1d upsample_nearest2d "
             "upsample_linear1d upsample_bilinear2d",
        fp32_first="prod softmax log_softmax cumprod cumsum sum norm",
        promote="addcdiv addcmul atan2 cross dot vdot index_put tensordot scatter_add",
        banned="binary_cross_entropy",
    ),
    "cpu": _policy(
        lower="conv1d conv2d bmm mm baddbmm addmm addbmm matmul linear conv_transpose1d conv_transpose2d prelu "
              "scaled_dot_product_attention",
        fp32="binary_cross_entropy prod trace mse_loss nll_loss smooth_l1_loss cross_entropy l1_loss huber_loss "
             "kl_div binary_cross_entropy_with_logits",
        promote="stack cat index_copy",
    ),
}

_BANNED = (
    "flambeau.nn.functional.binary_cross_entropy and flambeau.nn.BCELoss are unsafe to autocast.\n"
    "Many models use a sigmoid layer right before the binary cross entropy layer.\n"
    "In this case, combine the two layers using flambeau.nn.functional.binary_cross_entropy_with_logits\n"
    "or flambeau.nn.BCEWithLogitsLoss.  binary_cross_entropy_with_logits and BCEWithLogits are\n"
    "safe to autocast."
)


# --- the per-thread state --------------------------------------------------------------------------
class _State(threading.local):
    def __init__(self) -> None:
        self.enabled = {"cpu": False, "cuda": False}
        self.dtype = {"cpu": bfloat16, "cuda": fl.float16}
        self.cache_enabled = True
        self.nesting = 0
        self.cache: dict = {}  # id(leaf) -> (leaf, its cast): keeps the leaf alive, so the id stays its own
        self.mode = None


_state = _State()


def _check_device_type(device_type, fn: str) -> str:
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if device_type not in _DEVICE_TYPES:
        raise RuntimeError(f"{fn}(): unsupported autocast device_type '{device_type}' "
                           f"(expected one of {', '.join(_DEVICE_TYPES)})")
    return device_type


def is_autocast_available(device_type: str) -> bool:
    """Whether autocast supports ``device_type`` (``"cpu"`` and ``"cuda"``)."""
    return device_type in _DEVICE_TYPES


def _check_bool(value, fn: str, name: str, position: int) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"{fn}(): argument '{name}' (position {position}) must be bool, not {type(value).__name__}")


def _check_dtype(value, fn: str) -> None:
    if not isinstance(value, fl.dtype):
        raise TypeError(f"{fn}(): argument 'dtype' must be flambeau.dtype, not {type(value).__name__}")


def _deprecated(name: str, instead: str) -> None:
    warnings.warn(f"flambeau.{name}() is deprecated. Please use flambeau.{instead} instead.", DeprecationWarning,
                  stacklevel=3)


def _sync_mode() -> None:
    """Push this thread's autocast dispatch mode when some device type has autocast on or a region is open;
    pop it when neither (Note [Autocast as a dispatch mode]). A mode pushed above it since stays above:
    it is popped once it is the top again (until then it calls on unchanged)."""
    state = _state
    needed = state.nesting > 0 or any(state.enabled.values())
    if needed and state.mode is None:
        state.mode = _AutocastMode()
        push_mode(state.mode)
    elif not needed and state.mode is not None:
        try:
            pop_mode(state.mode)
        except RuntimeError:  # another mode is on top: leave ours below it, inert
            return
        state.mode = None


def is_autocast_enabled(device_type: str | None = None) -> bool:
    """Whether autocast is on for ``device_type`` in this thread (``"cuda"`` when omitted, as torch's)."""
    return _state.enabled[_check_device_type("cuda" if device_type is None else device_type,
                                             "is_autocast_enabled")]


def set_autocast_enabled(device_type, enabled=None) -> None:
    """Turn autocast on or off for ``device_type`` in this thread, without a region (``torch.set_autocast_enabled``).

    ``set_autocast_enabled(True)`` (one argument, torch's deprecated overload) is ``("cuda", True)``.
    Operators then cast as inside ``autocast(device_type)`` until it is turned off.
    """
    if enabled is None:
        device_type, enabled = "cuda", device_type
        _check_bool(enabled, "set_autocast_enabled", "enabled", 1)
    else:
        _check_device_type(device_type, "set_autocast_enabled")
        _check_bool(enabled, "set_autocast_enabled", "enabled", 2)
    _state.enabled[device_type] = enabled
    _sync_mode()


def is_autocast_cpu_enabled() -> bool:
    """Deprecated: ``is_autocast_enabled("cpu")``."""
    _deprecated("is_autocast_cpu_enabled", "is_autocast_enabled('cpu')")
    return _state.enabled["cpu"]


def set_autocast_cpu_enabled(enabled: bool) -> None:
    """Deprecated: ``set_autocast_enabled("cpu", enabled)``."""
    _deprecated("set_autocast_cpu_enabled", "set_autocast_enabled('cpu', enabled)")
    set_autocast_enabled("cpu", enabled)


def get_autocast_dtype(device_type: str) -> fl.dtype:
    """The dtype autocast casts to on ``device_type`` (float16 on ``"cuda"``, bfloat16 on ``"cpu"`` by default)."""
    return _state.dtype[_check_device_type(device_type, "get_autocast_dtype")]


def set_autocast_dtype(device_type: str, dtype: fl.dtype) -> None:
    """Set the dtype autocast casts to on ``device_type`` (any dtype is recorded, as torch's setter)."""
    _check_dtype(dtype, "set_autocast_dtype")
    _state.dtype[_check_device_type(device_type, "set_autocast_dtype")] = dtype


def get_autocast_cpu_dtype() -> fl.dtype:
    """Deprecated: ``get_autocast_dtype("cpu")``."""
    _deprecated("get_autocast_cpu_dtype", "get_autocast_dtype('cpu')")
    return _state.dtype["cpu"]


def set_autocast_cpu_dtype(dtype: fl.dtype) -> None:
    """Deprecated: ``set_autocast_dtype("cpu", dtype)``."""
    _deprecated("set_autocast_cpu_dtype", "set_autocast_dtype('cpu', dtype)")
    set_autocast_dtype("cpu", dtype)


def get_autocast_gpu_dtype() -> fl.dtype:
    """Deprecated: ``get_autocast_dtype("cuda")``."""
    _deprecated("get_autocast_gpu_dtype", "get_autocast_dtype('cuda')")
    return _state.dtype["cuda"]


def set_autocast_gpu_dtype(dtype: fl.dtype) -> None:
    """Deprecated: ``set_autocast_dtype("cuda", dtype)``."""
    _deprecated("set_autocast_gpu_dtype", "set_autocast_dtype('cuda', dtype)")
    set_autocast_dtype("cuda", dtype)


def is_autocast_cache_enabled() -> bool:
    """Whether the casts of weights are cached inside autocast regions of this thread."""
    return _state.cache_enabled


def set_autocast_cache_enabled(enabled: bool) -> None:
    """Turn the caching of weight casts on or off in this thread."""
    _check_bool(enabled, "set_autocast_cache_enabled", "enabled", 1)
    _state.cache_enabled = enabled


def autocast_increment_nesting() -> int:
    """Count one more open autocast region in this thread; return the count."""
    _state.nesting += 1
    _sync_mode()
    return _state.nesting


def autocast_decrement_nesting() -> int:
    """Count one fewer open autocast region; return the count (the caller clears the cache at 0, as torch)."""
    _state.nesting -= 1
    _sync_mode()
    return _state.nesting


def clear_autocast_cache() -> None:
    """Forget the cached casts (done when the outermost autocast region exits)."""
    _state.cache.clear()


# --- the casts --------------------------------------------------------------------------------------
def _eligible(t, device_type: str) -> bool:
    return isinstance(t, Tensor) and t.is_floating_point() and t.dtype is not fl.float64 \
        and t.device.type == device_type


def _cached_cast(t, dtype, device_type: str):
    """``t`` cast to ``dtype`` if eligible; casts of weights to the lower dtype come from the cache."""
    if not _eligible(t, device_type) or t.dtype is dtype:
        return t
    state = _state
    if (state.cache_enabled and dtype is state.dtype[device_type] and t.dtype is fl.float32 and t.requires_grad
            and t.is_leaf and t._base is None and fl.is_grad_enabled()):
        hit = state.cache.get(id(t))
        if hit is None:
            hit = state.cache[id(t)] = (t, t.to(dtype))
        return hit[1]
    return t.to(dtype)


def _cast_all(value, dtype, device_type: str):
    if isinstance(value, Tensor):
        return _cached_cast(value, dtype, device_type)
    if isinstance(value, (list, tuple)) and any(isinstance(v, Tensor) for v in value):
        return type(value)(_cached_cast(v, dtype, device_type) for v in value)
    return value


def _tensors(args: tuple, kwargs: dict):
    for a in (*args, *kwargs.values()):
        if isinstance(a, Tensor):
            yield a
        elif isinstance(a, (list, tuple)):
            yield from (v for v in a if isinstance(v, Tensor))


class _AutocastMode:
    """The dispatch mode of a thread's autocast regions (Note [Autocast as a dispatch mode])."""

    def dispatch(self, name: str, fn: Callable, args: tuple, kwargs: dict):
        first = next(_tensors(args, kwargs), None)
        if first is None:
            return fn(*args, **kwargs)
        device_type = first.device.type
        policy = _POLICIES.get(device_type, {}).get(name)
        if policy is None or not _state.enabled.get(device_type, False) or kwargs.get("out") is not None:
            return fn(*args, **kwargs)  # (out= variants are not autocast, as torch's)
        if policy == "lower":
            dtype = _state.dtype[device_type]
        elif policy == "fp32":
            dtype = fl.float32
        elif policy == "fp32_first":
            if not _eligible(first, device_type) or kwargs.get("dtype") is not None \
                    or any(isinstance(a, fl.dtype) for a in args):
                return fn(*args, **kwargs)
            return fn(_cast_all(args[0], fl.float32, device_type), *args[1:], **kwargs)
        elif policy == "promote":
            dtype = _state.dtype[device_type]
            for t in _tensors(args, kwargs):
                if _eligible(t, device_type):
                    dtype = fl.promote_types(dtype, t.dtype)
        else:  # banned
            raise RuntimeError(_BANNED)
        args = tuple(_cast_all(a, dtype, device_type) for a in args)
        kwargs = {k: _cast_all(v, dtype, device_type) for k, v in kwargs.items()}
        return fn(*args, **kwargs)


# --- the region -------------------------------------------------------------------------------------
class autocast:  # noqa: N801 - torch's name
    """Run the operators of a region in mixed precision (Note [Autocast as a dispatch mode]).

    Use it as a context manager or a decorator, as ``torch.autocast``::

        with flambeau.autocast("cuda"):          # or "cpu"; dtype=flambeau.bfloat16 ...
            out = model(x)                       # matmuls/convs in float16, softmax/losses in float32
            loss = loss_fn(out, y)
        scaler.scale(loss).backward()            # backward outside the region, as torch recommends

    Inside, matrix products and convolutions return the lower dtype; float32 parameters keep float32
    gradients. Regions nest: ``autocast(..., enabled=False)`` inside one turns it off (cast the
    lower-precision tensors with ``.float()`` there yourself).

    Args:
        device_type: ``"cuda"`` or ``"cpu"``: only tensors of that device type are cast.
        dtype: the lower dtype; default float16 on ``"cuda"``, bfloat16 on ``"cpu"`` (the current
            autocast dtype of the device). On CPU float16 and bfloat16 are supported (flambeau runs
            both through float32 kernels: the results are rounded as the dtype's, the speed is not
            a GPU's). Another dtype warns and disables the region, as torch does.
        enabled: False makes the region turn autocast off.
        cache_enabled: cache the casts of weights inside the region (None: the current setting,
            True by default).
    """

    def __init__(self, device_type: str, dtype: fl.dtype | None = None, enabled: bool = True,
                 cache_enabled: bool | None = None) -> None:
        self.device = _check_device_type(device_type, "autocast")
        self.fast_dtype = get_autocast_dtype(device_type) if dtype is None else dtype
        if not isinstance(self.fast_dtype, fl.dtype):
            raise ValueError(f"autocast(): dtype must be a flambeau.dtype, got {type(dtype).__name__}")
        self._cache_enabled = is_autocast_cache_enabled() if cache_enabled is None else cache_enabled
        if enabled and device_type == "cpu" and self.fast_dtype not in (bfloat16, fl.float16):
            warnings.warn("In CPU autocast, but the target dtype is not supported. Disabling autocast.\n"
                          "CPU Autocast only supports dtype of flambeau.bfloat16, flambeau.float16 currently.",
                          stacklevel=2)
            enabled = False
        if enabled and device_type == "cuda":
            if not fl.cuda.is_available():
                warnings.warn("User provided device_type of 'cuda', but CUDA is not available. Disabling",
                              stacklevel=2)
                enabled = False
            elif self.fast_dtype not in (fl.float16, bfloat16):
                warnings.warn("In CUDA autocast, but the target dtype is not supported. Disabling autocast.\n"
                              "CUDA Autocast only supports dtypes of flambeau.float16 and flambeau.bfloat16.",
                              stacklevel=2)
                enabled = False
        self._enabled = enabled

    def __enter__(self):
        state = _state
        self._prev = (state.enabled[self.device], state.dtype[self.device], state.cache_enabled)
        state.enabled[self.device] = self._enabled
        state.dtype[self.device] = self.fast_dtype
        state.cache_enabled = self._cache_enabled
        autocast_increment_nesting()
        return self

    def __exit__(self, *exc) -> bool:
        state = _state
        if autocast_decrement_nesting() == 0:
            state.cache.clear()
        state.enabled[self.device], state.dtype[self.device], state.cache_enabled = self._prev
        _sync_mode()
        return False

    def __call__(self, func: Callable) -> Callable:
        """Decorate ``func`` to run inside a region with these settings."""

        @functools.wraps(func)
        def decorate_autocast(*args, **kwargs):
            with autocast(self.device, self.fast_dtype, self._enabled, self._cache_enabled):
                return func(*args, **kwargs)

        return decorate_autocast


# --- custom autograd Functions ----------------------------------------------------------------------
def _cast(value, device_type: str, dtype):
    if isinstance(value, Tensor):
        return value.to(dtype) if _eligible(value, device_type) else value
    if isinstance(value, (str, bytes)):
        return value
    if isinstance(value, dict):
        return {_cast(k, device_type, dtype): _cast(v, device_type, dtype) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast(v, device_type, dtype) for v in value)
    return value


def custom_fwd(fwd: Callable | None = None, *, device_type: str, cast_inputs: fl.dtype | None = None):
    """Decorator for the ``forward`` of a custom :class:`flambeau.autograd.Function` (torch's ``custom_fwd``).

    With ``cast_inputs=None`` forward runs under the autocast state it was called in, and
    :func:`custom_bwd` makes backward run under the same. With a dtype, inside an autocast region the
    floating tensors of ``device_type`` among the arguments are cast to it and forward runs with
    autocast off (outside a region the arguments are left alone).
    """
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if fwd is None:
        return functools.partial(custom_fwd, device_type=device_type, cast_inputs=cast_inputs)

    @functools.wraps(fwd)
    def decorate_fwd(*args, **kwargs):
        ctx = args[0]
        ctx._dtype = get_autocast_dtype(device_type)
        if cast_inputs is None:
            ctx._fwd_used_autocast = is_autocast_enabled(device_type)
            return fwd(*args, **kwargs)
        ctx._fwd_used_autocast = False
        if is_autocast_enabled(device_type):
            with autocast(device_type, enabled=False):
                return fwd(*_cast(args, device_type, cast_inputs), **_cast(kwargs, device_type, cast_inputs))
        return fwd(*args, **kwargs)

    return decorate_fwd


def custom_bwd(bwd: Callable | None = None, *, device_type: str):
    """Decorator for the ``backward`` of a custom Function whose forward has :func:`custom_fwd`: backward
    runs under the autocast state forward ran under."""
    if not isinstance(device_type, str):
        raise ValueError(f"Expected `device_type` of type `str`, got: `{type(device_type)}`")
    if bwd is None:
        return functools.partial(custom_bwd, device_type=device_type)

    @functools.wraps(bwd)
    def decorate_bwd(*args, **kwargs):
        ctx = args[0]
        with autocast(device_type, dtype=ctx._dtype, enabled=ctx._fwd_used_autocast):
            return bwd(*args, **kwargs)

    return decorate_bwd
