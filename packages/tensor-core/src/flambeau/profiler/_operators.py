"""Recording every operator call while a profile runs (Note [Profiling at zero cost] in ``_state``).

Starting a profile rebinds each variant of each operator of the table (``flambeau.<name>``,
``Tensor.<name>``, ``Tensor.<name>_``, the operator dunders, the aliases) to a wrapper that records
a ``cpu_op`` span named ``flambeau::<name>``: its input shapes and dtypes (``record_shapes``), the
bytes of the new tensors it returned (``profile_memory``), the sequence number of the autograd node
it created (which the span of that node in backward carries too), and, for operators on CUDA
tensors, a pair of timing events on the current stream that give its device time when the profile
stops. Stopping puts the front functions back.
"""

from __future__ import annotations

import functools
import sys
import weakref

from flambeau.profiler._state import active, now_ns, register_hook

__all__ = ["install"]

_saved: list = []  # (owner, attribute, original) of every rebinding, to put back


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


def _recording(fn, name: str):
    """``fn`` wrapped to record a span named ``name`` while a profile runs."""

    @functools.wraps(fn)
    def recorded(*args, **kwargs):
        rec = active()
        if rec is None:
            return fn(*args, **kwargs)
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

    return recorded


def _rebind(owner, attribute: str, name: str, bound) -> None:
    """Wrap ``owner.attribute`` if it is ``bound``, the function the table bound there (a property or
    another function of the same name, e.g. ``Tensor.mT``, is left alone)."""
    original = owner.__dict__.get(attribute) if isinstance(owner, type) else getattr(owner, attribute, None)
    if original is not bound:
        return
    wrapper = _recording(original, name)
    wrapper._profiled = True
    _saved.append((owner, attribute, original))
    setattr(owner, attribute, wrapper)


def _held_elsewhere(labels: dict) -> None:
    """Rebind the references to operator fronts that other flambeau modules hold as their own globals or
    static methods (``conv2d = fl.conv2d`` in flambeau.nn.functional, ``Conv2d._conv_fn``): calls through
    them are operator calls too. The operator modules themselves (``flambeau._ops``, ``flambeau._kernels``)
    are left alone: a front calling another is one operator, as the program called it."""
    for name, module in list(sys.modules.items()):
        if module is None or not name.startswith("flambeau.") or name.startswith(_OWN):
            continue
        for attribute, value in list(vars(module).items()):
            label = labels.get(id(value))
            if label is not None:
                _rebind(module, attribute, label, value)
            elif isinstance(value, type) and value.__module__ == name:
                for cls_attr, member in list(vars(value).items()):
                    if isinstance(member, staticmethod) and id(member.__func__) in labels:
                        _rebind_static(value, cls_attr, labels[id(member.__func__)], member)


_OWN = ("flambeau._ops", "flambeau._kernels", "flambeau.profiler")


def _rebind_static(owner: type, attribute: str, name: str, member: staticmethod) -> None:
    wrapper = _recording(member.__func__, name)
    wrapper._profiled = True
    _saved.append((owner, attribute, member))
    setattr(owner, attribute, staticmethod(wrapper))


def _start(recorder) -> None:
    import flambeau
    from flambeau._ops._registry import OPS
    from flambeau._tensor import Tensor

    labels = {}
    for op in OPS.values():
        if op.fn is not None:
            labels[id(op.fn)] = f"flambeau::{op.name}"
        if op.inplace_fn is not None:
            labels[id(op.inplace_fn)] = f"flambeau::{op.name}_"
    _held_elsewhere(labels)
    for op in OPS.values():
        label = f"flambeau::{op.name}"
        for alias in (op.name, *op.aliases):
            if op.fn is not None:
                if op.function:
                    _rebind(flambeau, alias, label, op.fn)
                if op.method:
                    _rebind(Tensor, alias, label, op.fn)
            if op.inplace_fn is not None:
                _rebind(Tensor, alias + "_", label + "_", op.inplace_fn)
        for dunder, fn in op.dunders.items():
            if callable(fn):  # (properties such as Tensor.mT run the operator they call: recorded there)
                _rebind(Tensor, dunder, label, fn)
        if op.fn is not None and not op.function and not op.method:
            # internal operators (batch_norm_backward ...) are called as OPS[name].fn by the derivatives
            _rebind(op, "fn", label, op.fn)


def _stop() -> None:
    while _saved:
        owner, attribute, original = _saved.pop()
        setattr(owner, attribute, original)


def install() -> None:
    """Register the operator instrumentation (done once, when flambeau.profiler is imported)."""
    register_hook("flambeau.operators", _start, _stop)
