"""Activation checkpointing: trade compute for memory, as ``torch.utils.checkpoint``.

``checkpoint(f, *args)`` runs ``f`` without keeping the tensors its operators save for backward;
backward runs ``f`` again (with the random state it had) to get them back.

Note [Non-reentrant checkpoint]
The default (``use_reentrant=False``) is torch's non-reentrant design, built on
:class:`flambeau.autograd.graph.saved_tensors_hooks`: during the forward, every tensor an operator
saves is packed into a small handle instead (the graph itself is recorded as usual, so
``autograd.grad``, ``backward(inputs=...)``, double backward and tensors detached inside ``f`` all
work). When backward first unpacks a handle of this call, ``f`` runs again on the saved inputs
under hooks that collect the tensors saved this time, in the same order, and hands each handle its
tensor (the recomputation stops as soon as every handle still alive has one). A handle dies with
the node that held it, and its recomputed tensor with it. The determinism check compares each
recomputed tensor's shape, dtype and device with the original's.

``use_reentrant=True`` is torch's older design: a custom Function runs ``f`` under no_grad and its
backward reruns ``f`` with grad enabled and backpropagates through that.
"""

from __future__ import annotations

import contextlib
import warnings
import weakref

import flambeau as fl
from flambeau import Tensor
from flambeau.autograd.function import Function
from flambeau.autograd.graph import saved_tensors_hooks

__all__ = ["checkpoint", "checkpoint_sequential", "CheckpointError", "noop_context_fn"]


class CheckpointError(RuntimeError):
    """The recomputation in backward did not match the original forward."""


def noop_context_fn():
    """The default ``context_fn``: no context around the forward or the recomputation."""
    return contextlib.nullcontext(), contextlib.nullcontext()


class _Handle:
    """What a saved tensor of a checkpointed forward is packed into (weakly referenced by its frame)."""

    __slots__ = ("__weakref__",)


class _StopRecomputation(Exception):
    pass


class _Frame:
    """One call of a non-reentrant checkpoint: how to recompute, and the handles waiting for tensors."""

    def __init__(self, recompute, determinism_check: str, early_stop: bool):
        self.recompute = recompute
        self.check = determinism_check
        self.early_stop = early_stop
        self.handles: list = []  # weak references to the handles, in the order the tensors were saved
        self.metadata: list = []  # (shape, dtype, device) of each saved tensor
        self.recomputed = weakref.WeakKeyDictionary()  # handle -> recomputed tensor

    def pack(self, t: Tensor) -> _Handle:
        handle = _Handle()
        self.handles.append(weakref.ref(handle))
        self.metadata.append((tuple(t.shape), t.dtype, t.device))
        return handle

    def unpack(self, handle: _Handle) -> Tensor:
        t = self.recomputed.get(handle)
        if t is None:
            self._recompute()
            t = self.recomputed.get(handle)
            if t is None:
                raise CheckpointError("flambeau.utils.checkpoint: the recomputation saved fewer tensors than the "
                                      "original forward did, so a saved tensor could not be recovered (the "
                                      "checkpointed function behaves differently when run again)")
        return t

    def _recompute(self) -> None:
        counter = [0]
        frame = self
        waiting = [sum(1 for h in self.handles if h() is not None and h() not in self.recomputed)]

        def pack(t):
            i = counter[0]
            counter[0] += 1
            if i >= len(frame.handles):
                raise CheckpointError("flambeau.utils.checkpoint: trying to save more tensors during recomputation "
                                      "than during the original forward pass.")
            if frame.check == "default":
                expected = frame.metadata[i]
                got = (tuple(t.shape), t.dtype, t.device)
                if got != expected:
                    raise CheckpointError(
                        "flambeau.utils.checkpoint: Recomputed values for the following tensors have different "
                        f"metadata than during the forward pass.\ntensor at position {i}:\nsaved metadata: "
                        f"{{'shape': {list(expected[0])}, 'dtype': {expected[1]}, 'device': {expected[2]}}}\n"
                        f"recomputed metadata: {{'shape': {list(got[0])}, 'dtype': {got[1]}, 'device': {got[2]}}}")
            handle = frame.handles[i]()
            if handle is not None and handle not in frame.recomputed:
                frame.recomputed[handle] = t.detach()
                waiting[0] -= 1
            if frame.early_stop and waiting[0] <= 0:
                raise _StopRecomputation
            return t

        def unpack(t):
            return t

        try:
            with saved_tensors_hooks(pack, unpack), fl.enable_grad():
                self.recompute()
        except _StopRecomputation:
            pass


@contextlib.contextmanager
def _rng_restored(state, enabled: bool):
    """Run with the default generator at ``state``, restoring the current state afterwards."""
    if not enabled:
        yield
        return
    current = fl.get_rng_state()
    fl.set_rng_state(state)
    try:
        yield
    finally:
        fl.set_rng_state(current)


def _checkpoint_without_reentrant(function, preserve_rng_state, context_fn, determinism_check, early_stop,
                                  *args, **kwargs):
    rng_state = fl.get_rng_state() if preserve_rng_state else None
    forward_context, recompute_context = context_fn()

    def recompute():
        with _rng_restored(rng_state, preserve_rng_state), recompute_context:
            function(*args, **kwargs)

    if not fl.is_grad_enabled():  # nothing is recorded, nothing saved: plain call
        with forward_context:
            return function(*args, **kwargs)
    frame = _Frame(recompute, determinism_check, early_stop)
    with saved_tensors_hooks(frame.pack, frame.unpack), forward_context:
        return function(*args, **kwargs)


class _CheckpointFunction(Function):
    """The reentrant checkpoint: forward under no_grad, backward reruns the function and backpropagates."""

    @staticmethod
    def forward(ctx, run_function, preserve_rng_state, *args):
        ctx.run_function = run_function
        ctx.preserve_rng_state = preserve_rng_state
        if preserve_rng_state:
            ctx.rng_state = fl.get_rng_state()
        ctx.inputs = []
        ctx.tensor_indices = []
        tensors = []
        for i, a in enumerate(args):
            if isinstance(a, Tensor):
                tensors.append(a)
                ctx.tensor_indices.append(i)
                ctx.inputs.append(None)
            else:
                ctx.inputs.append(a)
        ctx.save_for_backward(*tensors)
        with fl.no_grad():
            return run_function(*args)

    @staticmethod
    def backward(ctx, *grads):
        inputs = list(ctx.inputs)
        for i, t in zip(ctx.tensor_indices, ctx.saved_tensors):
            inputs[i] = t
        detached = [a.detach().requires_grad_(a.requires_grad) if isinstance(a, Tensor) else a for a in inputs]
        state = ctx.rng_state if ctx.preserve_rng_state else None
        with _rng_restored(state, ctx.preserve_rng_state), fl.enable_grad():
            outputs = ctx.run_function(*detached)
        if isinstance(outputs, Tensor):
            outputs = (outputs,)
        pairs = [(o, g) for o, g in zip(outputs, grads) if isinstance(o, Tensor) and o.requires_grad]
        if not pairs:
            raise RuntimeError("none of output has requires_grad=True, this checkpoint() is not necessary")
        fl.autograd.backward([o for o, _ in pairs], [g for _, g in pairs])
        return (None, None) + tuple(a.grad if isinstance(a, Tensor) else None for a in detached)


def checkpoint(function, *args, use_reentrant: bool | None = False, context_fn=noop_context_fn,
               determinism_check: str = "default", debug: bool = False, early_stop: bool = True, **kwargs):
    """Run ``function(*args, **kwargs)`` without keeping its saved tensors; recompute them in backward.

    Gradients equal those of the plain call; memory holds only the inputs of ``function`` (and its
    outputs) instead of every activation inside it, at the cost of running ``function`` twice. The
    random state (the default generator) is saved before the forward and restored for the
    recomputation, so dropout draws the same mask twice (``preserve_rng_state=False`` skips that).

    Unlike torch, ``use_reentrant`` defaults to False (the variant torch recommends) and no warning
    is given when it is omitted.

    Args:
        function: what to run; it may take tensors and anything else, positionally and by keyword.
        args: its positional arguments.
        use_reentrant: False (default): the non-reentrant variant (Note [Non-reentrant checkpoint]);
            True: torch's reentrant variant (no keyword arguments, only ``backward()`` without
            ``inputs``, at least one input requiring grad).
        context_fn: returns two context managers, entered around the forward and the recomputation.
        determinism_check: ``"default"`` compares the shape, dtype and device of every recomputed
            tensor with the original; ``"none"`` skips the check.
        debug: accepted for torch compatibility (no operator trace is kept).
        early_stop: stop the recomputation once every needed tensor is recomputed.
        preserve_rng_state (keyword): restore the random state for the recomputation (default True).
        kwargs: keyword arguments of ``function`` (non-reentrant variant only).

    Returns:
        What ``function`` returns.

    Raises:
        CheckpointError: the recomputation saved different tensors than the forward (e.g. the
            function depends on global state that changed).
    """
    preserve = kwargs.pop("preserve_rng_state", True)
    if determinism_check not in ("default", "none"):
        raise ValueError(f"determinism_check should be one of ['default', 'none'], but got {determinism_check}")
    if use_reentrant is None:
        use_reentrant = False
    if use_reentrant:
        if kwargs:
            raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
        if context_fn is not noop_context_fn or debug:
            raise ValueError("Passing `context_fn` or `debug` is only supported when use_reentrant=False.")
        if fl.is_grad_enabled() and not any(isinstance(a, Tensor) and a.requires_grad for a in args):
            warnings.warn("None of the inputs have requires_grad=True. Gradients will be None", stacklevel=2)
        return _CheckpointFunction.apply(function, preserve, *args)
    return _checkpoint_without_reentrant(function, preserve, context_fn, determinism_check, early_stop,
                                         *args, **kwargs)


def checkpoint_sequential(functions, segments: int, input, use_reentrant: bool | None = False, **kwargs):
    """Run a sequence of functions (or an ``nn.Sequential``) in ``segments`` checkpointed chunks.

    The functions are split into ``segments`` consecutive chunks; every chunk but the last runs
    under :func:`checkpoint`, so only the chunk boundaries stay in memory. The last chunk runs
    normally (its activations are needed right away by backward).

    Args:
        functions: a sequence of callables (an ``nn.Sequential`` or a list of modules).
        segments: the number of chunks (at most the number of functions).
        input: the input of the first function.
        use_reentrant: as :func:`checkpoint`.
        preserve_rng_state (keyword): as :func:`checkpoint`.

    Returns:
        The output of the last function.
    """
    preserve = kwargs.pop("preserve_rng_state", True)
    if kwargs:
        raise ValueError("Unexpected keyword arguments: " + ",".join(kwargs))
    if hasattr(functions, "children") and callable(functions.children):
        functions = list(functions.children())
    functions = list(functions)
    if not isinstance(segments, int) or segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be a positive int, got {segments!r}")
    if segments > len(functions):
        raise ValueError(f"checkpoint_sequential: segments ({segments}) must not exceed the number of functions "
                         f"({len(functions)})")

    def run(start: int, end: int):
        def forward(x):
            for j in range(start, end + 1):
                x = functions[j](x)
            return x

        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        input = checkpoint(run(start, end), input, use_reentrant=use_reentrant, preserve_rng_state=preserve)
    return run(end + 1, len(functions) - 1)(input)
