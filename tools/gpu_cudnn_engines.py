"""Every engine cuDNN's graph API offers for a convolution, its notes and its time: which one flambeau takes.

Run on a lent GPU (``tools/gpu_session.sh``, stage ``engines``), from the repository root:

    python tools/gpu_cudnn_engines.py              # ResNet-18's 3x3 convolutions of benchmarks/gpu.py
    python tools/gpu_cudnn_engines.py --fake       # the tool's own check on the fake device (no GPU)

For each configuration (forward, data and filter gradients; float32 with TF32 allowed and without), the engine
configurations the heuristics list (instant mode, then the fallback list) in their order: the engine's global
index, its numerical and behaviour notes, its workspace, and the time per call of its plan (20 calls queued
back to back, their variant pack kept as flambeau keeps it: the host's time to queue them, then until the device
finished). ``flambeau`` marks the one ``flambeau._kernels.cuda._cudnn_graph.GraphPlan`` takes; ``torch`` the one
torch's filter would (it refuses down-converting engines, non-deterministic ones where determinism is asked, and
tensor-core ones for float32 without TF32; it keeps engines that compile at run time, which this tool does not
time).
"""

from __future__ import annotations

import functools
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import gpu_profile  # noqa: E402

if "--fake" in sys.argv:  # (the fake device of tools/host_overhead.py: the tool's own check, without a GPU)
    import host_overhead

    host_overhead.fake_device()
import flambeau as fl  # noqa: E402
from flambeau._kernels.cuda import _cudnn, _launch  # noqa: E402
from flambeau._kernels.cuda import _cudnn_graph as graph  # noqa: E402

ENGINE_GLOBAL_INDEX = 1301
NOTE_NAMES = {0: "TENSOR_CORE", 1: "DOWN_CONVERT", 2: "REDUCED_PRECISION", 3: "FFT", 4: "NONDETERMINISTIC",
              5: "WINOGRAD", 6: "WINOGRAD_4x4", 7: "WINOGRAD_6x6", 8: "WINOGRAD_13x13", 9: "STRICT_NAN_PROP"}
CALLS = 20


class _Survey(graph.GraphPlan):
    """A GraphPlan that lists and times every engine configuration before taking its own."""

    rows: list = []
    buffers: tuple = ()

    def _first_plan(self, h, op_graph, unwanted, workspace_limit):
        self.unwanted, self.limit = unwanted, workspace_limit  # (flambeau's filter, to mark its pick)
        ffi, lib = self.ffi, self.lib
        count, index = ffi.new("int64_t *"), ffi.new("int64_t *")
        for mode, mode_name in ((graph.HEUR_INSTANT, "instant"), (graph.HEUR_FALLBACK, "fallback")):
            try:
                configs = self._configs(op_graph, mode)
            except graph.GraphRefused:
                continue
            for i, config in enumerate(configs):
                engine = self._new(graph.ENGINE)
                lib.cudnnBackendGetAttribute(config, graph.ENGINECFG_ENGINE, graph.T_DESCRIPTOR, 1, count,
                                             ffi.new("cudnnBackendDescriptor_t[]", [engine]))
                lib.cudnnBackendGetAttribute(engine, ENGINE_GLOBAL_INDEX, graph.T_INT64, 1, count, index)
                numerical = self._notes(engine, graph.ENGINE_NUMERICAL_NOTE, graph.T_NUMERICAL_NOTE,
                                        graph.NUMERICAL_NOTES)
                behaviour = self._notes(engine, graph.ENGINE_BEHAVIOR_NOTE, graph.T_BEHAVIOR_NOTE,
                                        graph.BEHAVIOR_NOTES)
                found = self._candidate(h, config, set(), 1 << 40)  # (None: it compiles at run time, or fails)
                times = self._time(found[:2]) if found else None
                self.rows.append((mode_name, i, int(index[0]), numerical, behaviour,
                                  found[1] if found else None, times))
        return super()._first_plan(h, op_graph, unwanted, workspace_limit)

    def _time(self, found):
        """``(host µs, µs in all)`` per call of candidate plan ``found = (plan, workspace bytes)`` on the survey's
        buffers, run as this plan (its variant packs kept as flambeau keeps them, then destroyed); None where it
        fails."""
        self.plan, nbytes = found
        ws = fl.empty(max(nbytes, 1), dtype=fl.uint8, device="cuda")
        a, b, out = (t.data_ptr() for t in _Survey.buffers)
        run = functools.partial(graph.execute, self.ffi, self.lib, self.handle, self, a, b, out,
                                ws.data_ptr() if nbytes else 0)
        try:
            if any(run() for _ in range(3)):
                return None
            return gpu_profile.queued_us(run, CALLS, fl.cuda.synchronize, warmup=0)
        finally:
            self._drop_packs()
            self.plan = None


def survey(kind, x_shape, w_shape, y_shape, stride, padding, allow_tf32: bool) -> None:
    ffi, lib = _cudnn._lib()
    h = _cudnn._handle(ffi, lib, _launch.stream())
    shapes = {"x": x_shape, "w": w_shape, "y": y_shape}
    _Survey.buffers = tuple(fl.randn(*shapes[role], device="cuda") for role in graph.ROLES[kind])
    _Survey.rows, _Survey.handle = [], h
    ptrs = [t.data_ptr() for t in _Survey.buffers]
    plan = _Survey(ffi, lib, h, kind, "float32", x_shape, w_shape, y_shape, stride, padding, (1, 1),
                   graph.alignment(*ptrs), _cudnn._workspace_limit(), False, allow_tf32)
    torch_unwanted = {graph.NOTE_DOWN_CONVERT} | (set() if allow_tf32 else {graph.NOTE_TENSOR_CORE})
    flambeau_pick = next((r for r in _Survey.rows if r[5] is not None and r[5] <= plan.limit
                          and not (r[3] & plan.unwanted if r[3] is not None else plan.unwanted)), None)
    torch_pick = next((r for r in _Survey.rows if r[5] is not None and r[6] is not None
                       and not (r[3] or set()) & torch_unwanted), None)
    print(f"\n=== {kind} x{x_shape} w{w_shape} stride {stride}, TF32 {'on' if allow_tf32 else 'off'}: "
          f"flambeau's plan has {plan.nbytes} bytes of workspace")
    for row in _Survey.rows:
        mode, i, index, numerical, behaviour, nbytes, times = row
        notes = ",".join(NOTE_NAMES.get(n, str(n)) for n in sorted(numerical or ())) or "-"
        rc = " runtime-compiled" if behaviour and graph.BEHAVIOR_RUNTIME_COMPILATION in behaviour else ""
        took = f"host {times[0]:7.1f} us  total {times[1]:8.1f} us" if times else "(not timed)"
        mark = (" <- flambeau" if row is flambeau_pick else "") + (" <- torch" if row is torch_pick else "")
        print(f"  {mode:8s} {i:2d} engine {index:3d}  ws {nbytes if nbytes is not None else '-':>10}  {took}  "
              f"{notes}{rc}{mark}")
    plan.close()


def main() -> None:
    fl.manual_seed(0)
    configs = [  # ResNet-18 of benchmarks/gpu.py (widths 32-64-128-256, batch 32, 32x32 images)
        ((32, 64, 16, 16), (64, 64, 3, 3), (32, 64, 16, 16), (1, 1), (1, 1)),
        ((32, 128, 8, 8), (128, 128, 3, 3), (32, 128, 8, 8), (1, 1), (1, 1)),
        ((32, 32, 32, 32), (64, 32, 3, 3), (32, 64, 16, 16), (2, 2), (1, 1)),
    ]
    for allow_tf32 in (True, False):
        for x, w, y, stride, padding in configs:
            for kind in ("forward", "data", "filter"):
                survey(kind, x, w, y, stride, padding, allow_tf32)
    print("\nflambeau takes the first engine (instant, then fallback) that has no unwanted note and does not "
          "compile at run time")


if __name__ == "__main__":
    main()
