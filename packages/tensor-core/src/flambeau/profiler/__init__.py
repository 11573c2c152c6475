"""``flambeau.profiler``: what a program spends its time and memory on, as ``torch.profiler``.

::

    from flambeau.profiler import profile, record_function, ProfilerActivity

    with profile(activities=[ProfilerActivity.CPU], record_shapes=True, profile_memory=True) as prof:
        with record_function("train_step"):
            loss = model(x).sum()
            loss.backward()
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10))
    prof.export_chrome_trace("trace.json")

Off by default at no cost (Note [Profiling at zero cost] in ``_state``). Libraries add their own
spans with :func:`trace_attributes` (methods or functions wrapped while a profile runs), or with
:func:`register_hook` (instrumentation started and stopped with each profile) and
:func:`current_recorder` (``recorder.add_span(category, name, start_ns, end_ns, args)`` with times
from :func:`now_ns`).
"""

from flambeau.profiler._events import EventList, FunctionEvent, FunctionEventAvg
from flambeau.profiler._profile import (
    ProfilerAction,
    ProfilerActivity,
    profile,
    record_function,
    schedule,
    supported_activities,
)
from flambeau.profiler._state import active as current_recorder
from flambeau.profiler._state import now_ns, register_hook, trace_attributes
from flambeau.profiler._trace import tensorboard_trace_handler

__all__ = ["profile", "record_function", "schedule", "ProfilerActivity", "ProfilerAction", "supported_activities",
           "tensorboard_trace_handler", "EventList", "FunctionEvent", "FunctionEventAvg", "register_hook",
           "trace_attributes", "current_recorder", "now_ns"]

from flambeau.profiler import _operators  # noqa: E402

_operators.install()  # the operator instrumentation, started with each profile
