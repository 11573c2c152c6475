"""``vmap``: run a function written for one example on a batch of examples, as ``torch.func.vmap``.

Note [Batched tensors]
Inside ``vmap(f)``, ``f`` receives :class:`BatchedTensor` s: tensors that report the shape of one
example while holding the whole batch (``_value``, the batch dimension first). Every operator
reached through a Tensor method or operator (``x.sum(0)``, ``x @ w``, ``x[i]``, ``x.T``) goes to
:func:`dispatch`, which finds the operator's batching rule by name in
:mod:`flambeau.func._batch_rules` and runs the operator *once* on the whole batch (``x.sum(0)``
becomes ``value.sum(1)``). An operator without a rule runs once per example and the results are
stacked (the fallback); every operator that fell back is reported once with a
:class:`VmapFallbackWarning` and counted in :func:`vmap_fallbacks`.

Nested ``vmap`` calls each open a level; a batched tensor of level ``L`` holds a value batched at
the lower levels (outer vmaps first in the physical dims), and a rule of level ``L`` calls
operators on those values, which dispatch again at their own level.

Note [Module-level functions under vmap]
tensor-core's operator front functions reached otherwise than through a batched tensor's own
methods (``flambeau.cat``, ``flambeau.where``, everything ``nn.functional`` calls, ``w @ x`` and
``w[i]`` on an unbatched ``w``) see the batch through tensor-core's dispatch modes (Note [Dispatch
modes] in ``flambeau._ops._modes``): while a vmap runs in a thread, :class:`_VmapMode` is active
there and sends every operator call with a batched tensor among its arguments (one list deep) to
:func:`dispatch`, with the same rules. A batched tensor's own methods go through the modes too.
The mode sits at the bottom of the thread's modes, so the others act first (autocast casts the
batched arguments, and its casts are batched), as torch batches after autocast; and it is
*reentrant*: the rules' own operator calls go through it again, so a value batched at an outer
level is batched there. A batched tensor that reaches tensor-core's internals by another way (a
front function called directly by another, inside the operator modules) still raises an error
saying so, instead of computing on the wrong dimensions.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import sys
import threading
import warnings

import flambeau as fl
from flambeau import Tensor
from flambeau._ops import OPS
from flambeau._ops._keywords import rewrap
from flambeau._ops._modes import call as call_modes
from flambeau._ops._modes import pop_mode, push_mode
from flambeau.func._pytree import TreeSpec, tree_flatten, tree_unflatten

__all__ = ["vmap", "BatchedTensor", "VmapFallbackWarning", "vmap_fallbacks", "dispatch"]

_RANDOMNESS = ("error", "different", "same")


class VmapFallbackWarning(UserWarning):
    """An operator without a batching rule ran once per example inside :func:`vmap` (a Python loop)."""


class _Level:
    """One active vmap: its batch size and randomness mode."""

    __slots__ = ("id", "size", "randomness", "alive")

    def __init__(self, id_: int, size: int, randomness: str):
        self.id = id_
        self.size = size
        self.randomness = randomness
        self.alive = True

    def __repr__(self) -> str:
        return f"<vmap level {self.id}, batch size {self.size}>"


class _State(threading.local):
    def __init__(self):
        self.levels: list = []
        self.rules: list = []  # (operator, level) of the rules running, innermost last


_state = _State()
_ids = itertools.count(1)


def active_levels() -> tuple:
    """The vmap levels open in this thread, outermost first."""
    return tuple(_state.levels)


_DATA_DEPENDENT = ("vmap: It looks like you're attempting to use a Tensor in some data-dependent control flow "
                   "or to read its values (.item(), .tolist(), bool(), printing). A batched tensor holds one value "
                   "per example; write it with tensor operators (flambeau.where instead of if) or do it outside "
                   "vmap.")


class BatchedTensor(Tensor):
    """A tensor of one example's shape that holds a whole batch (see Note [Batched tensors]).

    Users never create these: :func:`vmap` hands them to the function it maps.
    """

    __slots__ = ("_value", "_level")

    # --- what a tensor-core front function would read: see Note [Module-level functions under vmap] ---
    @property
    def _data(self):
        raise RuntimeError(_escape_message())

    # --- metadata of one example ------------------------------------------------------------------
    @property
    def shape(self):
        return fl.Size(self._value.shape[1:])

    def size(self, dim=None):
        shape = self._value.shape[1:]
        if dim is None:
            return fl.Size(shape)
        return shape[_wrap_dim(dim, len(shape))]

    @property
    def ndim(self) -> int:
        return self._value.dim() - 1

    def dim(self) -> int:
        return self._value.dim() - 1

    ndimension = dim

    def numel(self) -> int:
        n = 1
        for s in self._value.shape[1:]:
            n *= s
        return n

    nelement = numel

    @property
    def nbytes(self) -> int:
        return self.numel() * self.dtype.itemsize

    def stride(self, dim=None):
        strides = self._value.stride()[1:]
        return strides if dim is None else strides[_wrap_dim(dim, len(strides))]

    def is_contiguous(self, memory_format=None) -> bool:
        shape, strides, expected = self._value.shape[1:], self._value.stride()[1:], 1
        for n, s in zip(reversed(shape), reversed(strides)):
            if n != 1:
                if s != expected:
                    return False
                expected *= n
        return True

    @property
    def _version(self) -> int:
        return self._value._version

    @property
    def data(self):
        return _make(self._value.data, self._level)

    def detach(self):
        return _make(self._value.detach(), self._level)

    def to(self, *args, **kwargs):
        return _make(self._value.to(*args, **kwargs), self._level)

    def __len__(self) -> int:
        if self.dim() == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._value.shape[1]

    def __iter__(self):
        if self.dim() == 0:
            raise TypeError("iteration over a 0-d tensor")
        return iter(self.unbind(0))

    def __repr__(self) -> str:
        return f"BatchedTensor(lvl={self._level.id}, bdim=0, value=\n{self._value!r}\n)"

    __str__ = __repr__

    def __format__(self, spec) -> str:
        return repr(self)

    @property
    def T(self):
        return self.permute(*reversed(range(self.dim())))

    @property
    def mT(self):
        if self.dim() < 2:
            raise RuntimeError(f"tensor.mT is only supported on matrices or batches of matrices. Got {self.dim()}-D "
                               "tensor.")
        return self.transpose(-2, -1)

    mH = mT

    @property
    def H(self):
        if self.dim() > 2:
            raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors). Got {self.dim()}-D tensor.")
        return self.T

    # --- what a batch cannot answer ---------------------------------------------------------------
    def _data_dependent(self, *args, **kwargs):
        raise RuntimeError(_DATA_DEPENDENT)

    item = tolist = numpy = __array__ = __bool__ = __float__ = __int__ = __index__ = _data_dependent
    __dlpack__ = __cuda_array_interface__ = data_ptr = storage_offset = untyped_storage = _data_dependent

    def _not_in_vmap(self, *args, **kwargs):
        raise RuntimeError("vmap: autograd calls on a batched tensor (backward, register_hook, requires_grad_, "
                           "retain_grad) are not supported inside vmap; use flambeau.func.grad or vjp inside the "
                           "vmapped function instead.")

    backward = register_hook = requires_grad_ = retain_grad = detach_ = _not_in_vmap
    share_memory_ = pin_memory = __deepcopy__ = __reduce_ex__ = _not_in_vmap


def _wrap_dim(dim: int, ndim: int) -> int:
    lo, hi = (-1, 0) if ndim == 0 else (-ndim, ndim - 1)
    if dim < lo or dim > hi:
        raise IndexError(f"Dimension out of range (expected to be in range of [{lo}, {hi}], but got {dim})")
    return dim % max(ndim, 1)


_new = object.__new__


def _make(value: Tensor, level: _Level) -> BatchedTensor:
    """``value`` (batch dimension first) as a batched tensor of ``level``."""
    bt = _new(BatchedTensor)
    bt._value = value
    bt._level = level
    bt.dtype = value.dtype
    bt._device = value._device
    bt._storage = value._storage
    bt._requires_grad = value._requires_grad
    bt._grad = None
    bt.grad_fn = None
    bt._base = None
    bt._autograd_meta = None
    return bt


def _escape_message() -> str:
    name = _calling_op()
    where = f"flambeau.{name}" if name else "a flambeau function"
    return (f"vmap: a batched tensor reached the internals of {where} without going through an operator's "
            "front function (flambeau.<op>, a Tensor method or operator), so the batch cannot be seen there. "
            "Call the operator through flambeau.<op> or a tensor method inside vmap (see flambeau.func.vmap's "
            "documentation).")


_CODES: dict = {}


def _calling_op() -> str | None:
    """The operator whose front function is reading a batched tensor (for the error message)."""
    if not _CODES:
        for op in OPS.values():
            for fn, name in ((op.fn, op.name), (op.inplace_fn, op.name + "_")):
                if fn is not None:
                    _CODES.setdefault(_unwrapped(fn).__code__, set()).add(name)
    frame = sys._getframe(2)
    for _ in range(8):
        if frame is None:
            return None
        names = _CODES.get(frame.f_code)
        if names:
            if len(names) == 1:
                return next(iter(names))
            local = frame.f_locals.get("name")
            return local if local in names else None
        frame = frame.f_back
    return None


# --- dispatch ---------------------------------------------------------------------------------------
def _top_level(args, kwargs):
    """The innermost vmap level among the batched tensors in ``args``/``kwargs`` (one list deep), or None."""
    top = None
    for x in itertools.chain(args, kwargs.values()):
        if x.__class__ is BatchedTensor:
            if top is None or x._level.id > top.id:
                top = x._level
        elif isinstance(x, (list, tuple)):
            for y in x:
                if y.__class__ is BatchedTensor and (top is None or y._level.id > top.id):
                    top = y._level
    return top


_rule_for: list = [lambda op, fn, inplace: None]  # the lookup of flambeau.func._batch_rules, installed below it


def install_rules(lookup) -> None:
    """Install ``lookup(op, fn, inplace) -> rule or None`` (done by :mod:`flambeau.func._batch_rules` on import)."""
    _rule_for[0] = lookup


def dispatch(op, fn, args: tuple, kwargs: dict, inplace: bool = False):
    """Run operator ``op`` (an OpDef) whose front is ``fn`` on ``args``, batching it if they hold batched tensors.

    This is the entry point of every operator called on a :class:`BatchedTensor`; without one among
    the arguments it simply calls ``fn``. ``inplace`` says that ``fn`` modifies ``args[0]``.
    """
    level = _top_level(args, kwargs)
    if level is None:
        return fn(*args, **kwargs)
    if not level.alive:
        raise RuntimeError("vmap: a batched tensor was used after the vmap that made it returned (it escaped "
                           "through a global, a closure or a non-tensor output)")
    if is_random(op, args, kwargs):
        if level.randomness == "error":
            raise RuntimeError("vmap: called random operation while in randomness error mode. Please either use the "
                               "'same' or 'different' randomness flags on vmap or perform the randomness operation "
                               "out of vmap")
        if level.randomness == "same":  # every example draws from the same generator state
            return fallback(op, fn, level, args, kwargs, inplace, same_randomness=True)
    rule = _rule_for[0](op, fn, inplace)
    key = (op.name, level.id)
    # A rule that calls its own operator again at its own level left a batched tensor where it does not
    # look (inside a container argument, say): the per-example fallback handles any argument structure.
    if rule is not None and key not in _state.rules:
        _state.rules.append(key)
        try:
            result = rule(op, fn, level, args, kwargs)
        finally:
            _state.rules.pop()
        if result is not NotImplemented:
            return result
    return fallback(op, fn, level, args, kwargs, inplace)


# --- the fallback ---------------------------------------------------------------------------------
_FALLBACKS: dict = {}
_WARNED: set = set()


def vmap_fallbacks(reset: bool = False) -> dict:
    """``{operator name: calls}`` of the operators that ran once per example inside :func:`vmap`.

    Each such operator is also reported once per process with a :class:`VmapFallbackWarning`.

    Args:
        reset: clear the record after returning it.
    """
    record = dict(_FALLBACKS)
    if reset:
        _FALLBACKS.clear()
    return record


def _note_fallback(name: str, size: int) -> None:
    _FALLBACKS[name] = _FALLBACKS.get(name, 0) + 1
    if name not in _WARNED:
        _WARNED.add(name)
        warnings.warn(f"flambeau.func.vmap: there is no batching rule for {name}, so it ran once per example (a "
                      f"Python loop over {size} examples) and the results were stacked; flambeau.func."
                      "vmap_fallbacks() lists every operator that did.", VmapFallbackWarning, stacklevel=4)


def _select(x, level, i):
    if x.__class__ is BatchedTensor and x._level is level:
        return x._value.select(0, i)
    if isinstance(x, (list, tuple)) and any(y.__class__ is BatchedTensor and y._level is level for y in x):
        return type(x)(_select(y, level, i) for y in x)
    return x


def fallback(op, fn, level: _Level, args: tuple, kwargs: dict, inplace: bool, name: str | None = None,
             same_randomness: bool = False):
    """Run ``fn`` once per example of ``level`` and stack the results (or write each example in place).

    With ``same_randomness`` every example starts from the same state of the generator it draws from
    (randomness='same'); the state afterwards is the one after a single example.
    """
    name = name or (op.name + "_" if inplace else op.name)
    if not same_randomness:
        _note_fallback(name, level.size)
    if inplace:
        check_inplace(args, level, name)
    gen = (kwargs.get("generator") or fl.default_generator) if same_randomness else None
    state = gen.get_state() if gen is not None else None
    results = []
    for i in range(level.size):
        if gen is not None and i:
            gen.set_state(state)
        example_kwargs = {k: _select(v, level, i) for k, v in kwargs.items()}
        results.append(fn(*(_select(a, level, i) for a in args), **example_kwargs))
    if inplace:
        return args[0]
    return _stack(results, level, name)


def check_inplace(args, level, name) -> None:
    """torch's error for an in-place operator whose ``self`` is not batched while another argument is."""
    self = args[0]
    if not (self.__class__ is BatchedTensor and self._level is level):
        raise RuntimeError(f"vmap: {name}(self, *extra_args) is not possible because there exists a Tensor `other` "
                           "in extra_args that has more elements than `self`. This happened due to `other` being "
                           "vmapped over but `self` not being vmapped over in a vmap. Please try to use out-of-place "
                           "operators instead of inplace arithmetic.")


def _stack(results: list, level: _Level, name: str):
    first = results[0]
    if first is None or first is NotImplemented:  # (a dunder declining a foreign operand: Python raises)
        return first
    if isinstance(first, Tensor):
        try:
            stacked = dispatch(OPS["stack"], OPS["stack"].fn, (results, 0), {})
        except RuntimeError as e:
            raise RuntimeError(f"vmap: {name} gave outputs of different shapes for different examples (a "
                               f"data-dependent shape), which cannot be batched: {e}") from None
        return _make(stacked, level)
    if isinstance(first, (tuple, list)):
        parts = [_stack([r[j] for r in results], level, name) for j in range(len(first))]
        if hasattr(type(first), "_fields"):
            return type(first)(*parts)
        return type(first)(parts)
    raise RuntimeError(f"vmap: {name} returned a Python {type(first).__name__}, a value that depends on the data of "
                       "each example, which vmap cannot batch")


# --- randomness --------------------------------------------------------------------------------------
def is_random(op, args, kwargs) -> bool:
    """Whether this call of ``op`` draws random numbers."""
    if op.category == "random":
        return True
    if op.name == "dropout":
        arguments = bound(op.fn, args, kwargs).arguments
        return bool(arguments["training"]) and arguments["p"] > 0
    if op.name == "scaled_dot_product_attention":
        return bound(op.fn, args, kwargs).arguments["dropout_p"] > 0
    return False


# --- argument binding (rules read arguments by their names in the front's signature) ----------------
_SIGNATURES: dict = {}


def bound(fn, args, kwargs) -> inspect.BoundArguments:
    """``args``/``kwargs`` bound to the parameters of front ``fn``, defaults applied."""
    sig = _SIGNATURES.get(fn)
    if sig is None:
        sig = _SIGNATURES[fn] = inspect.signature(fn)
    ba = sig.bind(*args, **kwargs)
    ba.apply_defaults()
    return ba


# --- the Tensor API of batched tensors ------------------------------------------------------------
_REFLECTED = {"__radd__", "__rsub__", "__rmul__", "__rtruediv__", "__rfloordiv__", "__rmod__", "__rpow__",
              "__rand__", "__ror__", "__rxor__", "__rlshift__", "__rrshift__", "__rmatmul__"}


_INPLACE_DUNDERS = {"__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__",
                    "__iand__", "__ior__", "__ixor__", "__ilshift__", "__irshift__", "__imatmul__"}


def _method(op, fn, inplace):
    name = op.name + "_" if inplace and fn is op.inplace_fn else op.name

    def method(self, *args, **kwargs):
        if self._level.alive:  # through the modes (autocast, the profiler), to _VmapMode at last
            return call_modes(name, fn, (self, *args), kwargs)
        return dispatch(op, fn, (self, *args), kwargs, inplace)  # (which says the tensor escaped its vmap)

    method.__name__ = fn.__name__
    method.__doc__ = fn.__doc__
    return method


def _reflected(op):
    def method(self, other):
        if self._level.alive:
            return call_modes(op.name, op.fn, (other, self), {})
        return dispatch(op, op.fn, (other, self), {})

    return method


def _bind_methods() -> None:
    """Give :class:`BatchedTensor` every operator method of Tensor, each going to :func:`dispatch`."""
    for op in OPS.values():
        names = (op.name, *op.aliases)
        if op.fn is not None and op.method:
            method = rewrap(op.bindings[1] if op.bindings else op.fn, _method(op, op.fn, False))  # (torch's keywords)
            for n in names:
                setattr(BatchedTensor, n, method)
        if op.inplace_fn is not None:
            for n in names:
                setattr(BatchedTensor, n + "_", _method(op, op.inplace_fn, True))
        for dunder, fn in op.dunders.items():
            if isinstance(fn, property) or dunder in ("T", "mT", "mH", "H"):
                continue  # defined on the class itself
            if dunder in _REFLECTED:
                setattr(BatchedTensor, dunder, _reflected(op))
                _DUNDER_KINDS[fn] = "reflected"
            elif dunder in _INPLACE_DUNDERS or dunder == "__setitem__":
                setattr(BatchedTensor, dunder, _method(op, fn, True))
                _DUNDER_KINDS[fn] = "inplace"
            elif dunder == "where":  # Tensor.where(condition, other) is where(condition, self, other)
                setattr(BatchedTensor, dunder, lambda self, condition, other, _op=op:
                        _reflected_where(_op, self, condition, other))
                _DUNDER_KINDS[fn] = "where"
            else:  # __add__, __getitem__, __neg__, __invert__, comparisons ...: fn(self, *others)
                setattr(BatchedTensor, dunder, _method(op, fn, False))


# an operator dunder of Tensor -> how its arguments map to the operator's (the _VmapMode reads it)
_DUNDER_KINDS: dict = {}


def _reflected_where(op, self, condition, other):
    if self._level.alive:
        return call_modes(op.name, op.fn, (condition, self, other), {})
    return dispatch(op, op.fn, (condition, self, other), {})


_bind_methods()


# --- helpers for the other transforms (grad and friends inside vmap) ---------------------------------
def levels_of(t) -> list:
    """The vmap levels ``t`` is batched at, outermost first."""
    levels = []
    while t.__class__ is BatchedTensor:
        levels.append(t._level)
        t = t._value
    levels.reverse()
    return levels


def physical(t):
    """The plain tensor under every batched wrapper of ``t`` (its batch dimensions first, outermost first)."""
    while t.__class__ is BatchedTensor:
        t = t._value
    return t


def wrap_levels(p: Tensor, levels) -> Tensor:
    """The physical tensor ``p`` (one leading dim per level, outermost first) seen as batched at ``levels``."""
    for level in levels:
        p = _make(p, level)
    return p


def materialize(t, levels) -> Tensor:
    """The physical tensor of ``t`` with a batch dimension for each of ``levels`` (expanded where ``t`` has none)."""
    have = levels_of(t)
    p = physical(t)
    if have == list(levels):
        return p
    extra = [lv for lv in have if lv not in levels]
    if extra:
        raise RuntimeError(f"vmap: a tensor batched at {extra} reached a transform that runs outside that vmap")
    for i, level in enumerate(levels):
        if level not in have:
            p = p.unsqueeze(i)
    return p.expand(*(lv.size for lv in levels), *p.shape[len(levels):])


# --- vmap itself ----------------------------------------------------------------------------------
def _name(func) -> str:
    if isinstance(func, functools.partial):
        return f"functools.partial({_name(func.func)}, ...)"
    return getattr(func, "__name__", repr(func))


def _broadcast_prefix(dims, tree, what: str, describe):
    """``dims`` (an int/None, or a container matching a prefix of ``tree``) given to every leaf of ``tree``."""
    if not isinstance(dims, (tuple, list, dict)):  # a leaf (validated by the caller) for the whole subtree
        return [dims] * len(tree_flatten(tree)[0])
    if isinstance(dims, (tuple, list)) and isinstance(tree, (tuple, list)) and len(dims) == len(tree):
        return [d for sub, t in zip(dims, tree) for d in _broadcast_prefix(sub, t, what, describe)]
    if isinstance(dims, dict) and isinstance(tree, dict) and dims.keys() == tree.keys():
        return [d for k in tree for d in _broadcast_prefix(dims[k], tree[k], what, describe)]
    raise ValueError(describe())


def _flat_in_dims(in_dims, args: tuple, spec: TreeSpec, name: str) -> list:
    if not (in_dims is None or isinstance(in_dims, (int, tuple))) or isinstance(in_dims, bool):
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int or a "
                         f"(potentially nested) tuple matching the structure of inputs, got: {type(in_dims)}.")
    if not args:
        raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are "
                         "trying to vmap over a function with no inputs. The latter is unsupported.")
    if isinstance(in_dims, tuple) and len(in_dims) != len(args):
        in_dims_spec = tree_flatten(in_dims)[1]
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the "
                         f"structure of `inputs`. in_dims has structure {in_dims_spec} but inputs has structure "
                         f"{spec}.")
    return _broadcast_prefix(in_dims, args, "in_dims", lambda: (
        f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the structure of "
        f"`inputs`. in_dims has structure {tree_flatten(in_dims)[1]} but inputs has structure {spec}."))


def _batch_size(flat_in_dims, flat_args, name, in_dims) -> int:
    sizes = []
    for d, a in zip(flat_in_dims, flat_args):
        if d is None:
            continue
        if not isinstance(d, int) or isinstance(d, bool):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input but "
                             "in_dim must be either an integer dimension or None.")
        if not isinstance(a, Tensor):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an input but the "
                             f"input is of type {type(a)}. We cannot vmap over non-Tensor arguments, please use None "
                             "as the respective in_dim")
        if not -a.dim() <= d < a.dim():
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for some input, but "
                             f"that input is a Tensor of dimensionality {a.dim()} so expected in_dim to satisfy "
                             f"-{a.dim()} <= in_dim < {a.dim()}.")
        sizes.append(a.shape[d])
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{sizes} for the mapped dimension")
    return sizes[0]


def _call_func(func, args, kwargs):
    op = getattr(func, "_opdef", None)
    if op is not None:  # an operator of the table: dispatch it directly
        front = _unwrapped(func)  # (OPS[name].fn of an internal operator is rebound while vmap's mode is active)
        if front is _unwrapped(op.fn):
            return dispatch(op, front, args, kwargs)
        if front is op.inplace_fn:
            return dispatch(op, front, args, kwargs, True)
    return func(*args, **kwargs)


def _unwrapped(fn):
    return getattr(fn, "__wrapped__", fn)


def _run(func, name, flat_args, flat_in_dims, spec, size, kwargs, out_dims, randomness):
    level = _Level(next(_ids), size, randomness)
    if not _state.levels:  # the outermost vmap of this thread: module-level functions see the batch
        push_mode(_MODE, bottom=True)
    _state.levels.append(level)
    try:
        batched = [a if d is None else _make(a if d % a.dim() == 0 else a.movedim(d, 0), level)
                   for a, d in zip(flat_args, flat_in_dims)]
        out = _call_func(func, tree_unflatten(batched, spec), kwargs)
        return _unbatch_outputs(out, out_dims, level, name)
    finally:
        _state.levels.pop()
        level.alive = False
        if not _state.levels:
            pop_mode(_MODE)


class _VmapMode:
    """The dispatch mode of a thread's vmaps (Note [Module-level functions under vmap])."""

    reentrant = True

    def dispatch(self, name: str, fn, args: tuple, kwargs: dict):
        if _top_level(args, kwargs) is None:
            return fn(*args, **kwargs)
        return _batched(name, fn.__wrapped__, *args, **kwargs)


def _batched(name: str, front, *args, **kwargs):
    """Operator ``name`` reached through ``front`` (a front, method or dunder of Tensor), batched."""
    op = OPS.get(name)
    if op is None:  # the in-place variant Tensor.<op>_
        return dispatch(OPS[name[:-1]], front, args, kwargs, True)
    kind = _DUNDER_KINDS.get(front)
    if kind == "reflected":  # Tensor.__rsub__(self, other) is sub(other, self)
        return dispatch(op, op.fn, (args[1], args[0]), {})
    if kind == "where":  # Tensor.where(condition, other) is where(condition, self, other)
        return dispatch(op, op.fn, (args[1], args[0], *args[2:]), kwargs)
    return dispatch(op, front, args, kwargs, kind == "inplace" or front is op.inplace_fn)


_MODE = _VmapMode()


def _unbatch_outputs(out, out_dims, level, name):
    flat, spec = tree_flatten(out)

    def incompatible():
        return ValueError(f"vmap({name}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with the "
                          f"structure of `outputs`. out_dims has structure {tree_flatten(out_dims)[1]} but outputs "
                          f"has structure {spec}.")

    if isinstance(out, Tensor):
        if out_dims is None or (isinstance(out_dims, int) and not isinstance(out_dims, bool)):
            flat_dims = [out_dims]
        elif isinstance(out_dims, tuple) and len(out_dims) == 1:
            flat_dims = list(out_dims)
        else:
            raise incompatible()
    else:
        try:
            flat_dims = _broadcast_prefix(out_dims, out, "out_dims", lambda: "")
        except ValueError:
            raise incompatible() from None
    for d in flat_dims:
        if not (d is None or (isinstance(d, int) and not isinstance(d, bool))):
            raise ValueError(f"vmap({name}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a python "
                             "collection of ints representing where in the outputs the vmapped dimension should "
                             "appear.")
    return tree_unflatten([_unbatch(o, d, level, name) for o, d in zip(flat, flat_dims)], spec)


def _unbatch(out, out_dim, level, name):
    batched = out.__class__ is BatchedTensor and out._level is level
    if out_dim is None:
        if batched:
            raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
        return out
    if not isinstance(out, Tensor):
        raise ValueError(f"vmap({name}, ...): `{name}` must only return Tensors, got type {type(out)}. Did you mean "
                         "to set out_dims= to None for output?")
    value = out._value if batched else out.unsqueeze(0).expand(level.size, *out.shape)
    d = _wrap_dim(out_dim, value.dim())
    return value if d == 0 else value.movedim(0, d)


def vmap(func, in_dims=0, out_dims=0, randomness: str = "error", *, chunk_size: int | None = None):
    """Vectorize ``func`` over a batch dimension of its inputs, as ``torch.func.vmap``.

    ``vmap(func)(x)`` is ``stack([func(x[i]) for i in range(x.shape[0])])``, computed by running each
    operator once on the whole batch (its batching rule) rather than once per example. Nested
    ``vmap`` calls map several dimensions; ``vmap`` composes with :func:`grad`, :func:`vjp`,
    :func:`jacrev` and the other transforms (``vmap(grad(f))`` gives per-example gradients).

    Inside ``func``, every operator sees the batch: Tensor methods and operators (``x.sum(0)``,
    ``x @ w``, ``x[i]``), module-level functions (``flambeau.cat``, ``flambeau.where``,
    ``nn.functional``), unbatched tensors meeting batched ones (``w @ x``, ``table[i]``), and an
    operator given as ``func`` itself (``vmap(flambeau.dot)``); see the module docstring. An operator
    without a batching rule runs once per example (:func:`vmap_fallbacks` lists them, a
    :class:`VmapFallbackWarning` reports each once). Reading values (``.item()``, ``if x > 0``)
    raises, as in torch.

    Args:
        func: a function of tensors (and other values), returning a tensor or a pytree of tensors.
        in_dims: the dimension of each input to map over: an int for all, None for an input not to
            map, or a (nested) tuple matching the positional arguments.
        out_dims: where the batch dimension goes in each output (int, None or a tuple per output).
        randomness: ``'error'`` (default: random operators on batched tensors raise),
            ``'different'`` (each example draws its own numbers) or ``'same'`` (all examples draw the
            same numbers). Random functions that take no batched tensor (``flambeau.rand``) are not seen.
        chunk_size: map at most this many examples at a time (less memory); None maps all at once.

    Returns:
        A function taking the same arguments as ``func``, whose outputs have the batch dimension at
        ``out_dims``.

    Example::

        >>> x = flambeau.randn(8, 5)
        >>> w = flambeau.randn(5, 3)
        >>> vmap(lambda row: row @ w)(x).shape      # a matrix product per row
        flambeau.Size([8, 3])
    """
    if randomness not in _RANDOMNESS:
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")
    if not (chunk_size is None or (isinstance(chunk_size, int) and chunk_size > 0)):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")
    name = _name(func)

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        flat_args, spec = tree_flatten(args)
        flat_in_dims = _flat_in_dims(in_dims, args, spec, name)
        size = _batch_size(flat_in_dims, flat_args, name, in_dims)
        if chunk_size is None or chunk_size >= size:
            return _run(func, name, flat_args, flat_in_dims, spec, size, kwargs, out_dims, randomness)
        return _chunked(func, name, flat_args, flat_in_dims, spec, size, kwargs, out_dims, randomness, chunk_size)

    return wrapped


def _chunked(func, name, flat_args, flat_in_dims, spec, size, kwargs, out_dims, randomness, chunk_size):
    """vmap over ``chunk_size`` examples at a time, the outputs joined along their out dims."""
    starts = range(0, size, chunk_size)
    state = fl.get_rng_state() if randomness == "same" else None
    results = []
    for start in starts:
        n = min(chunk_size, size - start)
        chunk_args = [a if d is None else a.narrow(d, start, n) for a, d in zip(flat_args, flat_in_dims)]
        if state is not None:
            fl.set_rng_state(state)
        results.append(_run(func, name, chunk_args, flat_in_dims, spec, n, kwargs, out_dims, randomness))
    flat0, out_spec = tree_flatten(results[0])
    if isinstance(results[0], Tensor):
        flat_dims = list(out_dims) if isinstance(out_dims, tuple) else [out_dims]
    else:
        flat_dims = _broadcast_prefix(out_dims, results[0], "out_dims", lambda: "")
    joined = []
    for j, d in enumerate(flat_dims):
        parts = [tree_flatten(r)[0][j] for r in results]
        if d is None:
            joined.append(parts[0])
        else:
            joined.append(dispatch(OPS["cat"], OPS["cat"].fn, (parts, d), {}))
    return tree_unflatten(joined, out_spec)
