"""Recording every operator call while a profile runs (Note [Profiling at zero cost] in ``_state``).

Starting a profile rebinds each variant of each operator of the table (``flambeau.<name>``,
``Tensor.<name>``, ``Tensor.<name>_``, the operator dunders, the aliases) to a wrapper that records
a ``cpu_op`` span named ``flambeau::<name>``: its input shapes and dtypes (``record_shapes``), the
bytes of the new tensors it returned (``profile_memory``), the sequence number of the autograd node
it created (which the span of that node in backward carries too), and, for operators on CUDA
tensors, a pair of timing events on the current stream that give its device time when the profile
stops. Stopping puts the front functions back. The rebinding is tensor-core's dispatch-mode machinery
(Note [Dispatch modes] in ``flambeau._ops._modes``): the recorder is a global mode, seen by every thread.
"""

from __future__ import annotations

import weakref

from flambeau._ops._modes import pop_global_mode, push_global_mode
from flambeau.profiler._state import active, now_ns, register_hook

__all__ = ["install"]


def _describe(args) -> tuple[list, list]:
    from flambeau._tensor import Tensor

    dims, types = [], []
    for a in args:
        if isinstance(a, Tensor):
            dims.append(list(a.shape))
            types.append(str(a.dtype).replace("flambeau.", ""))
        elif isinstance(a, (list, tuple)) and a and isinstance(a[0], Tensor):
            dims.append([list(t.shape) for t in a])
            types.append("TensorList")
        else:
            dims.append([])
            types.append("Scalar" if isinstance(a, (int, float, bool)) else "")
    return dims, types


def _cuda_input(args) -> bool:
    from flambeau._tensor import Tensor

    for a in args:
        if isinstance(a, Tensor):
            return a._device.type == "cuda"
    return False


def _outputs(out):
    from flambeau._tensor import Tensor

    if isinstance(out, Tensor):
        return (out,)
    if isinstance(out, (tuple, list)):
        return tuple(o for o in out if isinstance(o, Tensor))
    return ()


def _record_memory(recorder, args, out, when: int) -> None:
    """Allocation records for the outputs whose storage is new (not one of the inputs')."""
    from flambeau._tensor import Tensor

    seen = {id(a._storage) for a in args if isinstance(a, Tensor)}
    for o in _outputs(out):
        st = o._storage
        if id(st) in seen:
            continue
        seen.add(id(st))
        nbytes = o.numel() * o.element_size()
        device_type = o._device.type
        addr = o.data_ptr() if nbytes else 0
        recorder.add_memory(device_type, nbytes, addr, when)  # inside the operator's span
        try:
            weakref.finalize(st, recorder.add_memory, device_type, -nbytes, addr)
        except TypeError:  # a storage without weak references: its free is not recorded
            pass


class _Recording:
    """The global dispatch mode (Note [Dispatch modes]) that records a span for every operator call."""

    def dispatch(self, name: str, fn, args: tuple, kwargs: dict):
        rec = active()
        if rec is None:
            return fn(*args, **kwargs)
        name = "flambeau::" + name
        extra = None
        if rec.record_shapes:
            dims, types = _describe(args)
            extra = {"Input Dims": dims, "Input type": types}
        events = None
        if rec.cuda and _cuda_input(args):
            from flambeau.cuda import Event

            events = (Event(enable_timing=True), Event(enable_timing=True))
            events[0].record()
        start = now_ns()
        out = fn(*args, **kwargs)
        end = now_ns()
        seq = None
        for o in _outputs(out):
            node = o.grad_fn
            if node is not None:
                seq = getattr(node, "_sequence_nr", None)
                break
        if seq is not None:
            extra = extra if extra is not None else {}
            extra["Sequence number"] = seq
        if events is not None:
            events[1].record()
            extra = extra if extra is not None else {}
            rec.device_spans.append((name, events, start, extra))
        rec.add_span("cpu_op", name, start, end, extra)
        if rec.profile_memory:
            _record_memory(rec, args, out, end)
        return out


_MODE = _Recording()


def _start(recorder) -> None:
    push_global_mode(_MODE)


def _stop() -> None:
    pop_global_mode(_MODE)


def install() -> None:
    """Register the operator instrumentation (done once, when flambeau.profiler is imported)."""
    register_hook("flambeau.operators", _start, _stop)
