"""Convolutions through cuDNN's graph (backend) API: an execution plan per configuration, one execute per call.

Note [cuDNN's graph API]
    cuDNN 9 keeps its legacy convolution calls (``cudnnConvolutionForward`` and the two backward ones) on top of
    its graph API, and each legacy call pays for that on the host: about 80 µs per call on an H200's host, 30% of
    a ResNet-18 training step's host time there (py-spy of ``tools/gpu_spy.py``), where torch's whole
    convolution operator takes a fraction of that. torch calls the graph API itself (through cudnn-frontend): a
    configuration's operation graph, engine and execution plan are made once and cached, and a call only packs
    its three device pointers and the workspace (a *variant pack*) and executes the plan. flambeau does the same,
    in C through cffi:

    * plan (once per configuration, Note [cuDNN plans]): tensor descriptors of x, w and y (NCHW, C-contiguous,
      unique ids 1, 2 and 3, the pointers' common alignment), the convolution descriptor, the operation
      (forward, backward data or backward filter), the operation graph, and the heuristics' engine configurations
      (every one the instant mode lists, then the fallback mode's), tried in their order until one finalizes into
      an execution plan whose workspace fits (Note [cuDNN workspaces]); what the refused ones made is destroyed at
      once.
      Configurations are skipped, as torch filters them, where they would compute otherwise than asked: inputs
      converted to a narrower type, non-deterministic ones under deterministic algorithms, tensor cores (TF32)
      and reduced-precision sums for float32 when ``backends.cudnn.allow_tf32`` is False, reduced-precision sums
      for float64; and those that compile kernels at run time (the first call would pay seconds of
      compilation).
    * call: a variant pack (ids, pointers, workspace), kept with the plan for the next call with the same pointers
      (Note [Variant packs kept]), and ``cudnnBackendExecute``.

    Anything the graph API refuses (no engine, a status other than success while planning) leaves that
    configuration to the legacy calls of ``_cudnn``, as does ``FLAMBEAU_CUDNN_GRAPH=0``. Each plan is built with
    the calling thread's handle, so the handle is part of the plan's key. The enumerations below are cuDNN 9's
    ``cudnn_graph.h`` (cuDNN 8's ``cudnn_backend.h``, the same values).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["CDEF", "GraphPlan", "execute"]

CDEF = """
typedef void* cudnnBackendDescriptor_t;
int cudnnBackendCreateDescriptor(int descriptorType, cudnnBackendDescriptor_t *descriptor);
int cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor);
int cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor);
int cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor, int attributeName, int attributeType,
    int64_t elementCount, const void *arrayOfElements);
int cudnnBackendGetAttribute(cudnnBackendDescriptor_t descriptor, int attributeName, int attributeType,
    int64_t requestedElementCount, int64_t *elementCount, void *arrayOfElements);
int cudnnBackendExecute(cudnnHandle_t handle, cudnnBackendDescriptor_t executionPlan,
    cudnnBackendDescriptor_t variantPack);
"""

# cudnnBackendDescriptorType_t
CONVOLUTION, ENGINE, ENGINECFG, ENGINEHEUR, EXECUTION_PLAN = 1, 2, 3, 4, 5
OPERATION = {"forward": 10, "filter": 11, "data": 12}
OPERATIONGRAPH, VARIANT_PACK, TENSOR = 15, 16, 17
# cudnnBackendAttributeType_t
T_HANDLE, T_DATA_TYPE, T_INT64, T_FLOAT, T_DOUBLE, T_VOID_PTR, T_CONV_MODE, T_HEUR_MODE = 0, 1, 3, 4, 5, 6, 7, 8
T_NUMERICAL_NOTE, T_DESCRIPTOR, T_BEHAVIOR_NOTE = 11, 15, 19
# cudnnBackendAttributeName_t
CONV_COMP_TYPE, CONV_MODE, CONV_DILATIONS, CONV_STRIDES, CONV_POST_PAD, CONV_PRE_PAD, CONV_DIMS = range(100, 107)
HEUR_MODE, HEUR_GRAPH, HEUR_RESULTS = 200, 201, 202
ENGINECFG_ENGINE = 300
PLAN_HANDLE, PLAN_ENGINE_CONFIG, PLAN_WORKSPACE_SIZE = 400, 401, 402
GRAPH_HANDLE, GRAPH_OPS = 800, 801
TENSOR_ALIGNMENT, TENSOR_DATA_TYPE, TENSOR_DIMS, TENSOR_STRIDES, TENSOR_UID = 900, 901, 902, 903, 906
PACK_UIDS, PACK_POINTERS, PACK_WORKSPACE = 1000, 1001, 1003
ENGINE_NUMERICAL_NOTE, ENGINE_BEHAVIOR_NOTE = 1303, 1305
# the operations' attributes: alpha, beta, the convolution, and its x, w and y in each operation's own names
_OPERATION_ATTRS = {  # kind -> (alpha, beta, conv, {role: attribute})
    "forward": (700, 701, 702, {"w": 703, "x": 704, "y": 705}),
    "data": (706, 707, 708, {"w": 709, "x": 710, "y": 711}),
    "filter": (712, 713, 714, {"w": 715, "x": 716, "y": 717}),
}
UID = {"x": 1, "w": 2, "y": 3}
# which roles ``_cudnn._run``'s operands a, b and out have in each kind of call
ROLES = {"forward": ("x", "w", "y"), "data": ("w", "y", "x"), "filter": ("x", "y", "w")}
CUDNN_CROSS_CORRELATION = 1
HEUR_INSTANT, HEUR_FALLBACK = 0, 2
NOTE_TENSOR_CORE, NOTE_DOWN_CONVERT, NOTE_REDUCED_PRECISION, NOTE_NONDETERMINISTIC = 0, 1, 2, 4
BEHAVIOR_RUNTIME_COMPILATION = 0
NUMERICAL_NOTES, BEHAVIOR_NOTES = 10, 4  # how many of each cuDNN 9 defines (CUDNN_*_NOTE_TYPE_COUNT)
# Engine configurations asked of each heuristics mode: all it lists (up to _CONFIGS; _CONFIGS_UNCOUNTED where it
# cannot say how many), as torch asks for all of them. With the first sixteen alone, ResNet-18's float32 step
# without TF32 ran the fallback list's legacy implicit-GEMM kernels on an H100, 11.3 ms of device time per step
# against torch's 2.7 (torch ran cuDNN's FFMA implicit-GEMM engines): for 5 of its 9 convolutions the instant
# list's first sixteen all use tensor cores (its first acceptable one was the 14th to 31st: tools/gpu_cudnn_engines.py
# on an H200). With every one asked for, flambeau takes torch's engine in each, and torch's device time.
_CONFIGS, _CONFIGS_UNCOUNTED = 256, 16


class GraphRefused(RuntimeError):
    """The graph API could not plan this configuration (the legacy calls take it)."""


def alignment(*pointers: int) -> int:
    """The largest power of two up to 16 bytes dividing every pointer (part of a plan's key: a plan for
    16-byte-aligned tensors may use vector loads that others cannot take)."""
    bits = 16
    for p in pointers:
        bits |= p
    return bits & -bits  # (the lowest set bit of them all, at most 16)


class GraphPlan:
    """An execution plan of one convolution configuration (Note [cuDNN's graph API]); ``nbytes`` is its
    workspace. Raises :class:`GraphRefused` where the graph API takes no engine for it."""

    graph = True

    def __init__(self, ffi, lib, h, kind, dtype, x_shape, w_shape, y_shape, stride, padding, dilation, align,
                 workspace_limit: int, deterministic: bool, allow_tf32: bool, timer=None):
        self.ffi, self.lib, self.made = ffi, lib, []
        self.packs: dict = {}  # (a, b, out, workspace) -> its finalized variant pack (Note [Variant packs kept])
        self.uids = ffi.new("int64_t[3]", [UID[role] for role in ROLES[kind]])
        # a new variant pack's pointers are written here (calls run under _cudnn's plans lock)
        self.pack_holder = ffi.new("cudnnBackendDescriptor_t *")
        self.pointers = ffi.new("uintptr_t[4]")  # a, b, out and the workspace
        self.workspace_pointer = self.pointers + 3
        try:
            dt = 0 if np.dtype(dtype) == np.float32 else 1  # cudnnDataType_t: FLOAT, DOUBLE
            tensors = {role: self._tensor(dt, shape, UID[role], align)
                       for role, shape in (("x", x_shape), ("w", w_shape), ("y", y_shape))}
            conv = self._new(CONVOLUTION)
            self._set(conv, CONV_COMP_TYPE, T_DATA_TYPE, "int[]", [dt])
            self._set(conv, CONV_MODE, T_CONV_MODE, "int[]", [CUDNN_CROSS_CORRELATION])
            self._set(conv, CONV_DIMS, T_INT64, "int64_t[]", [len(stride)])
            self._set(conv, CONV_DILATIONS, T_INT64, "int64_t[]", list(dilation))
            self._set(conv, CONV_STRIDES, T_INT64, "int64_t[]", list(stride))
            self._set(conv, CONV_PRE_PAD, T_INT64, "int64_t[]", list(padding))
            self._set(conv, CONV_POST_PAD, T_INT64, "int64_t[]", list(padding))
            self._finalize(conv)
            alpha, beta, conv_attr, roles = _OPERATION_ATTRS[kind]
            op = self._new(OPERATION[kind])
            for role, attr in roles.items():
                self._set(op, attr, T_DESCRIPTOR, "cudnnBackendDescriptor_t[]", [tensors[role]])
            self._set(op, conv_attr, T_DESCRIPTOR, "cudnnBackendDescriptor_t[]", [conv])
            scale_type, ctype = (T_FLOAT, "float[]") if dt == 0 else (T_DOUBLE, "double[]")
            self._set(op, alpha, scale_type, ctype, [1.0])
            self._set(op, beta, scale_type, ctype, [0.0])
            self._finalize(op)
            graph = self._new(OPERATIONGRAPH)
            self._set(graph, GRAPH_HANDLE, T_HANDLE, "cudnnHandle_t[]", [h])
            self._set(graph, GRAPH_OPS, T_DESCRIPTOR, "cudnnBackendDescriptor_t[]", [op])
            self._finalize(graph)
            unwanted = {NOTE_DOWN_CONVERT}  # (as torch: inputs converted to a narrower type, never)
            if deterministic:
                unwanted.add(NOTE_NONDETERMINISTIC)
            if dt == 0 and not allow_tf32:  # float32 without TF32 tensor cores
                unwanted |= {NOTE_TENSOR_CORE, NOTE_REDUCED_PRECISION}
            elif dt == 1:  # (float64's tensor cores compute in float64)
                unwanted.add(NOTE_REDUCED_PRECISION)
            if timer is None:
                self.plan, self.nbytes = self._first_plan(h, graph, unwanted, workspace_limit)
            else:
                self.plan, self.nbytes = self._fastest_plan(h, graph, unwanted, workspace_limit, timer)
        except BaseException:
            self.close()
            raise

    # --- building ---------------------------------------------------------------------------------------
    def _check(self, rc, what):
        if rc != 0:
            raise GraphRefused(f"{what} failed with cuDNN status {rc}")

    def _new(self, descriptor_type):
        p = self.ffi.new("cudnnBackendDescriptor_t *")
        self._check(self.lib.cudnnBackendCreateDescriptor(descriptor_type, p), "cudnnBackendCreateDescriptor")
        self.made.append(p[0])
        return p[0]

    def _set(self, d, name, attr_type, ctype, values):  # (cuDNN copies the values: the buffer need not live on)
        self._check(self.lib.cudnnBackendSetAttribute(d, name, attr_type, len(values), self.ffi.new(ctype, values)),
                    f"cudnnBackendSetAttribute({name})")

    def _finalize(self, d):
        self._check(self.lib.cudnnBackendFinalize(d), "cudnnBackendFinalize")

    def _tensor(self, dt, shape, uid, align):
        d = self._new(TENSOR)
        strides = [math.prod(shape[i + 1:]) for i in range(len(shape))]
        self._set(d, TENSOR_DATA_TYPE, T_DATA_TYPE, "int[]", [dt])
        self._set(d, TENSOR_DIMS, T_INT64, "int64_t[]", list(shape))
        self._set(d, TENSOR_STRIDES, T_INT64, "int64_t[]", strides)
        self._set(d, TENSOR_UID, T_INT64, "int64_t[]", [uid])
        self._set(d, TENSOR_ALIGNMENT, T_INT64, "int64_t[]", [align])
        self._finalize(d)
        return d

    def _notes(self, engine, name, attr_type, capacity: int) -> set | None:
        """The engine's notes of one kind (``capacity``: how many cuDNN defines), or None where it tells none."""
        count = self.ffi.new("int64_t *")
        notes = self.ffi.new(f"int[{capacity}]")
        if self.lib.cudnnBackendGetAttribute(engine, name, attr_type, capacity, count, notes):
            return None
        return {notes[i] for i in range(min(count[0], capacity))}

    def _configs(self, graph, mode) -> list:
        """The heuristics' engine configurations for ``graph`` in ``mode``, best first (the descriptors it did not
        fill are destroyed)."""
        heur = self._new(ENGINEHEUR)
        self._set(heur, HEUR_MODE, T_HEUR_MODE, "int[]", [mode])
        self._set(heur, HEUR_GRAPH, T_DESCRIPTOR, "cudnnBackendDescriptor_t[]", [graph])
        self._finalize(heur)
        count = self.ffi.new("int64_t *")  # how many it has: every one is asked for, as torch does (see _CONFIGS)
        rc = self.lib.cudnnBackendGetAttribute(heur, HEUR_RESULTS, T_DESCRIPTOR, 0, count, self.ffi.NULL)
        wanted = max(1, min(count[0], _CONFIGS)) if rc == 0 else _CONFIGS_UNCOUNTED
        configs = [self._new(ENGINECFG) for _ in range(wanted)]
        array = self.ffi.new("cudnnBackendDescriptor_t[]", configs)
        rc = self.lib.cudnnBackendGetAttribute(heur, HEUR_RESULTS, T_DESCRIPTOR, wanted, count, array)
        n = 0 if rc else max(0, min(count[0], wanted))
        self._drop(configs[n:])
        self._check(rc, "engine heuristics")
        return configs[:n]

    def _drop(self, descriptors) -> None:
        """Destroy ``descriptors`` now (candidates not taken), not with the plan."""
        for d in descriptors:
            self.made.remove(d)
            self.lib.cudnnBackendDestroyDescriptor(d)

    def _candidate(self, h, config, unwanted: set, workspace_limit: int):
        """``(plan, workspace bytes, engine)`` of engine configuration ``config``, or None where its engine has an
        ``unwanted`` numerical note or compiles at run time, its plan does not finalize, or its workspace is past
        the limit. What it made for a refused configuration is destroyed."""
        ffi, lib = self.ffi, self.lib
        engine, plan = self._new(ENGINE), self._new(EXECUTION_PLAN)
        count, size = ffi.new("int64_t *"), ffi.new("int64_t *")
        if lib.cudnnBackendGetAttribute(config, ENGINECFG_ENGINE, T_DESCRIPTOR, 1, count,
                                        ffi.new("cudnnBackendDescriptor_t[]", [engine])) == 0:
            numerical = self._notes(engine, ENGINE_NUMERICAL_NOTE, T_NUMERICAL_NOTE, NUMERICAL_NOTES)
            behaviour = self._notes(engine, ENGINE_BEHAVIOR_NOTE, T_BEHAVIOR_NOTE, BEHAVIOR_NOTES)
            # (an engine that tells no numerical notes is taken only where none is unwanted)
            wanted = (not unwanted if numerical is None else not numerical & unwanted) \
                and not (behaviour and BEHAVIOR_RUNTIME_COMPILATION in behaviour)
            handles = ffi.new("cudnnHandle_t[]", [h])
            configs = ffi.new("cudnnBackendDescriptor_t[]", [config])
            if (wanted and lib.cudnnBackendSetAttribute(plan, PLAN_HANDLE, T_HANDLE, 1, handles) == 0
                    and lib.cudnnBackendSetAttribute(plan, PLAN_ENGINE_CONFIG, T_DESCRIPTOR, 1, configs) == 0
                    and lib.cudnnBackendFinalize(plan) == 0
                    and lib.cudnnBackendGetAttribute(plan, PLAN_WORKSPACE_SIZE, T_INT64, 1, count, size) == 0
                    and 0 <= size[0] <= workspace_limit):
                return plan, int(size[0]), engine
        self._drop([plan, engine])
        return None

    def _candidates(self, h, graph, unwanted: set, workspace_limit: int):
        """Yield ``(plan, workspace bytes, descriptors it keeps)`` for each engine configuration :meth:`_candidate`
        takes, instant heuristics first, then fallback; a refused configuration is destroyed at once, and those not
        reached when the caller closes the generator are destroyed then."""
        for mode in (HEUR_INSTANT, HEUR_FALLBACK):
            try:
                configs = self._configs(graph, mode)
            except GraphRefused:
                continue
            try:
                while configs:
                    config = configs.pop(0)
                    found = self._candidate(h, config, unwanted, workspace_limit)
                    if found is None:
                        self._drop([config])
                    else:
                        plan, nbytes, engine = found
                        yield plan, nbytes, [plan, engine, config]
            finally:
                self._drop(configs)

    def _first_plan(self, h, graph, unwanted: set, workspace_limit: int):
        """The first engine configuration (instant heuristics, then fallback) that :meth:`_candidate` takes."""
        candidates = self._candidates(h, graph, unwanted, workspace_limit)
        try:
            for plan, nbytes, _ in candidates:
                return plan, nbytes
        finally:
            candidates.close()
        raise GraphRefused("no engine of cuDNN's graph API takes this convolution")

    def _fastest_plan(self, h, graph, unwanted: set, workspace_limit: int, timer):
        """Note [cuDNN benchmark mode]: of the first :data:`BENCHMARK_CANDIDATES` engine configurations that
        :meth:`_candidate` takes, the one ``timer`` finds fastest; what the others made is destroyed once they are
        timed."""
        best, best_time = None, None  # best: (plan, workspace bytes, the descriptors it keeps)
        candidates = self._candidates(h, graph, unwanted, workspace_limit)
        try:
            for timed, (plan, nbytes, kept) in enumerate(candidates, 1):
                self.plan, self.nbytes = plan, nbytes
                try:
                    seconds = timer(self)
                finally:
                    self._drop_packs()  # (made for this candidate's plan)
                    self.plan = None
                if seconds is not None and (best_time is None or seconds < best_time):
                    if best is not None:
                        self._drop(best[2])
                    best, best_time = (plan, nbytes, kept), seconds
                else:
                    self._drop(kept)
                if timed >= BENCHMARK_CANDIDATES:
                    break
        finally:
            candidates.close()
        if best is None:
            raise GraphRefused("no engine of cuDNN's graph API ran this convolution")
        return best[0], best[1]

    def _drop_packs(self) -> None:
        for pack in self.packs.values():
            self.lib.cudnnBackendDestroyDescriptor(pack)
        self.packs = {}

    def close(self) -> None:
        self._drop_packs()
        for d in reversed(self.made):
            self.lib.cudnnBackendDestroyDescriptor(d)
        self.made, self.plan = [], None  # (a closed plan cannot execute: None is refused)


# Note [Variant packs kept]
#     A call's variant pack (the ids, the three device pointers and the workspace's) took five cuDNN calls to make
#     and one to destroy around its cudnnBackendExecute: 10 µs of an H100 host's time per convolution, 0.6 ms of a
#     ResNet-18 step (tools/gpu_calls.py), and more of its Python. A finalized pack is only those values, so each
#     plan keeps its packs by pointers: the caching allocator hands a training step the same addresses every
#     step, and a kept pack makes the call one cudnnBackendExecute. A plan keeps at most _PACKS_KEPT (the oldest
#     goes first); they are destroyed with it.
_PACKS_KEPT = 32

# Note [cuDNN benchmark mode]
#     With ``backends.cudnn.benchmark`` True, as with torch's, a configuration's first call times the engines
#     instead of taking the heuristics' first: each candidate that computes as asked (the same filter) and whose
#     workspace fits runs on the call's own tensors, and the fastest is kept. flambeau times a candidate by the
#     wall time of a few calls queued back to back and waited for (``_cudnn``'s timer), so that an engine's host
#     time counts where the host is the bottleneck: on an H200 the heuristics' first engine for a ResNet-18
#     convolution took 35 µs of host time a call and 37.8 µs in all, the third 27 and 28.7 µs
#     (tools/gpu_cudnn_engines.py). torch's cudnnFind times the device alone. The first BENCHMARK_CANDIDATES
#     candidates are timed: a configuration's first call then takes milliseconds, paid once. The result differs
#     from the heuristics' engine's by the engines' rounding; deterministic algorithms still refuse the
#     non-deterministic engines.
BENCHMARK_CANDIDATES = 16


def execute(ffi, lib, h, plan: GraphPlan, a: int, b: int, out: int, workspace: int) -> int:
    """Run ``plan`` on device pointers ``a``, ``b`` and ``out`` (``_cudnn._run``'s operands) with ``workspace``
    (0: none); cuDNN's status. The caller holds ``_cudnn``'s plans lock (the plan's buffers and packs are its)."""
    packs = plan.packs
    pack = packs.get((a, b, out, workspace))
    if pack is None:
        holder, pointers = plan.pack_holder, plan.pointers
        rc = lib.cudnnBackendCreateDescriptor(VARIANT_PACK, holder)
        if rc:
            return rc
        pack = holder[0]
        pointers[0], pointers[1], pointers[2], pointers[3] = a, b, out, workspace
        rc = 1
        try:
            rc = (lib.cudnnBackendSetAttribute(pack, PACK_UIDS, T_INT64, 3, plan.uids)
                  or lib.cudnnBackendSetAttribute(pack, PACK_POINTERS, T_VOID_PTR, 3, pointers)
                  or lib.cudnnBackendSetAttribute(pack, PACK_WORKSPACE, T_VOID_PTR, 1, plan.workspace_pointer)
                  or lib.cudnnBackendFinalize(pack))
        finally:
            if rc:  # (not kept: refused, or an exception on the way)
                lib.cudnnBackendDestroyDescriptor(pack)
        if rc:
            return rc
        if len(packs) >= _PACKS_KEPT:
            lib.cudnnBackendDestroyDescriptor(packs.pop(next(iter(packs))))
        packs[a, b, out, workspace] = pack
    return lib.cudnnBackendExecute(h, plan.plan, pack)
