"""``flambeau.autograd.profiler``: the older spelling of the profiler, and backward's spans in it.

``profile(use_cuda=..., record_shapes=..., profile_memory=...)`` and ``record_function`` are those of
:mod:`flambeau.profiler` (``torch.autograd.profiler.profile`` is the legacy form of
``torch.profiler.profile``). Importing flambeau.autograd also registers its instrumentation with
the profiler (Note [Profiling at zero cost] in tensor-core's ``flambeau/profiler/_state.py``):
while a profile runs, each node the engine evaluates in backward is a span named
``autograd::engine::evaluate_function: <Node>`` carrying the node's sequence number, which the span
of the forward operator that created the node carries too (the trace links them with a flow arrow).
"""

from __future__ import annotations

from flambeau.autograd import _engine
from flambeau.profiler import ProfilerActivity, now_ns, record_function, register_hook
from flambeau.profiler import profile as _profile

__all__ = ["profile", "record_function"]


class profile(_profile):
    """The legacy profiler: ``with profile(use_cuda=True, record_shapes=True) as prof: ...``.

    ``enabled=False`` records nothing; ``use_cuda``/``use_device='cuda'`` add device time.
    ``prof.key_averages().table(...)``, ``prof.export_chrome_trace(path)`` and
    ``prof.function_events`` are as in :class:`flambeau.profiler.profile`.
    """

    def __init__(self, enabled: bool = True, *, use_cuda: bool = False, use_device: str | None = None,
                 record_shapes: bool = False, with_flops: bool = False, profile_memory: bool = False,
                 with_stack: bool = False, with_modules: bool = False, use_kineto: bool = False,
                 use_cpu: bool = True, experimental_config=None, acc_events: bool = False):
        activities = [ProfilerActivity.CPU]
        if use_cuda or use_device == "cuda":
            activities.append(ProfilerActivity.CUDA)
        super().__init__(activities=activities, record_shapes=record_shapes, profile_memory=profile_memory,
                         with_stack=with_stack)
        self.enabled = enabled

    def __enter__(self):
        if self.enabled:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        if self.enabled:
            self.stop()


_original_call_node = _engine._call_node


def _recording_call_node(node, grads, keep_graph):
    from flambeau.profiler import current_recorder

    rec = current_recorder()
    if rec is None:
        return _original_call_node(node, grads, keep_graph)
    start = now_ns()
    try:
        return _original_call_node(node, grads, keep_graph)
    finally:
        rec.add_span("autograd", f"autograd::engine::evaluate_function: {node.name()}", start, now_ns(),
                     {"Sequence number": node._sequence_nr})


def _start(recorder) -> None:
    _engine._call_node = _recording_call_node


def _stop() -> None:
    _engine._call_node = _original_call_node


register_hook("flambeau.autograd", _start, _stop)
