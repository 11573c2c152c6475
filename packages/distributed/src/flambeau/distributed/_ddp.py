"""DistributedDataParallel: one model replica per process, gradients averaged across the group.

At wrap time rank 0's parameters and buffers are broadcast to every rank (after checking that all
ranks hold the same parameter shapes). Gradients are averaged in *buckets*: flat buffers of about
``bucket_cap_mb`` each, filled in reverse parameter order (the order backward produces them; the
first bucket is capped at 1 MiB, unless ``bucket_cap_mb`` is given, so that communication starts
early), and each bucket's all-reduce
is launched, asynchronously, as soon as all its gradients are in, while backward goes on computing
the gradients of earlier layers. Backward returns once every bucket is averaged and written to
``param.grad``. With a CUDA module and a group whose backend has NCCL, the buckets' all-reduces are
NCCL operations on the current stream (the stream backward runs on), and the end of backward makes
the stream wait for them rather than the host (Note [NCCL on the current stream] in ``_nccl.py``).

Note [Gradient hooks]
    As torch's reducer: each parameter has a post-accumulate-grad hook
    (``Tensor.register_post_accumulate_grad_hook``), which runs once backward has accumulated the
    parameter's gradient into ``.grad``. It copies ``.grad`` into the parameter's bucket slice
    (with ``gradient_as_bucket_view``, ``.grad`` becomes that slice, and later accumulations add
    into it in place) and counts the parameter as ready; a bucket is launched, in bucket order,
    once all its parameters are ready. The first hook of a backward pass also marks ready the
    parameters found unused (``find_unused_parameters``). When the last bucket is launched, the
    hook queues a callback to run when the backward pass ends
    (:func:`flambeau.autograd.graph.queue_callback`): it waits for every bucket and copies the
    averages into ``.grad`` (which keeps its identity), so that ``backward()`` returns with the
    averaged gradients.
"""

from __future__ import annotations

import contextlib
import time
import weakref

import flambeau as fl
import flambeau.nn as nn
from flambeau import Tensor
from flambeau.distributed._collectives import ReduceOp, all_reduce, broadcast
from flambeau.distributed._nccl import cuda_index
from flambeau.distributed._objects import all_gather_object
from flambeau.distributed._process_group import ProcessGroup, _default

__all__ = ["DistributedDataParallel"]

_FIRST_BUCKET_BYTES = 1024 * 1024  # torch's dist._DEFAULT_FIRST_BUCKET_BYTES
_BROADCAST_BUCKET_BYTES = 250 * 1024 * 1024  # torch's broadcast bucket at wrap time


def _tensors_in(obj, out: list) -> list:
    """Every tensor inside a (nested) output: tensors, lists, tuples, dicts."""
    if isinstance(obj, Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            _tensors_in(x, out)
    elif isinstance(obj, dict):
        for x in obj.values():
            _tensors_in(x, out)
    return out


def _reachable_leaves(outputs: list[Tensor]) -> set[int]:
    """ids of the leaf tensors whose gradient backward from ``outputs`` would reach."""
    seen, found = set(), set()
    stack = [t.grad_fn for t in outputs if t.grad_fn is not None]
    found.update(id(t) for t in outputs if t.grad_fn is None and t.requires_grad)
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        variable = getattr(node, "variable", None)  # AccumulateGrad: the leaf
        if variable is not None:
            found.add(id(variable))
        stack.extend(nxt for nxt, _nr in node.next_functions if nxt is not None)
    return found


def _broadcast_coalesced(tensors: list[Tensor], src: int, group: ProcessGroup, cap_bytes: int) -> None:
    """Broadcast ``tensors`` from global rank ``src`` in flat buffers of at most ``cap_bytes`` per dtype."""
    by_dtype: dict = {}
    for t in tensors:
        by_dtype.setdefault((t.dtype, t.device), []).append(t)
    mine = group.ranks[group.rank()] == src
    for chunk in _chunks(by_dtype, cap_bytes):
        flat = fl.cat([t.detach().reshape(-1) for t in chunk])
        broadcast(flat, src, group)
        if not mine:
            offset = 0
            with fl.no_grad():
                for t in chunk:
                    n = t.numel()
                    t.detach().copy_(flat[offset:offset + n].view(tuple(t.shape)))
                    offset += n


def _chunks(by_dtype: dict, cap_bytes: int):
    for tensors in by_dtype.values():
        chunk, size = [], 0
        for t in tensors:
            chunk.append(t)
            size += t.numel() * t.element_size()
            if size >= cap_bytes:
                yield chunk
                chunk, size = [], 0
        if chunk:
            yield chunk


def _assign_buckets(params: list[Tensor], caps: list[int]) -> list[list[int]]:
    """Indices of ``params`` per bucket, in reverse parameter order (torch's bucket assignment by size).

    Parameters are taken from the last to the first; a bucket of one (dtype, device) closes once
    it holds at least its cap (the first cap is small so that communication starts early; the
    later ones are ``bucket_cap_mb``); buckets are ordered by their first parameter.
    """
    open_buckets: dict = {}
    limits: dict = {}
    closed: list[list[int]] = []
    for i in reversed(range(len(params))):
        p = params[i]
        key = (p.dtype, p.device)
        bucket = open_buckets.setdefault(key, {"indices": [], "bytes": 0})
        bucket["indices"].append(i)
        bucket["bytes"] += p.numel() * p.element_size()
        level = limits.setdefault(key, 0)
        if bucket["bytes"] >= caps[min(level, len(caps) - 1)]:
            closed.append(bucket["indices"])
            del open_buckets[key]
            limits[key] = level + 1
    closed += [b["indices"] for b in open_buckets.values()]
    return sorted(closed, key=lambda idx: len(params) - 1 - idx[0])


class _Bucket:
    __slots__ = ("indices", "buffer", "pending", "work", "launched_at")

    def __init__(self, indices: list[int], buffer: Tensor):
        self.indices = indices
        self.buffer = buffer
        self.pending = len(indices)
        self.work = None
        self.launched_at = 0.0


class _Reducer:
    """Buckets, the gradient hooks and the bookkeeping of one backward pass (Note [Gradient hooks])."""

    def __init__(self, params: list[Tensor], names: list[str], group: ProcessGroup, caps: list[int],
                 find_unused: bool, as_view: bool):
        self.params = params
        self.names = names
        self.group = group
        self.find_unused = find_unused
        self.as_view = as_view
        self.buckets: list[_Bucket] = []
        self.bucket_of: list[int] = [0] * len(params)
        self.views: list[Tensor] = [None] * len(params)  # type: ignore[list-item]
        for b, indices in enumerate(_assign_buckets(params, caps)):
            first = params[indices[0]]
            total = sum(params[i].numel() for i in indices)
            buffer = fl.zeros(total, dtype=first.dtype, device=first.device)
            offset = 0
            for i in indices:
                n = params[i].numel()
                self.views[i] = buffer[offset:offset + n].view(tuple(params[i].shape))
                self.bucket_of[i] = b
                offset += n
            self.buckets.append(_Bucket(indices, buffer))
        if as_view:  # gradients that exist already move into their buckets; the others follow at backward
            for p, view in zip(params, self.views):
                if p.grad is not None:
                    view.copy_(p.grad)
                    p.grad = view
        self.armed = False
        self.hook_fired = False
        self.ready = [False] * len(params)
        self.next_bucket = 0
        self.used = [True] * len(params)
        self.used_work = None
        self.used_flags = None
        self.stats = {"backward_syncs": 0, "wait_s": 0.0, "comm_s": 0.0}
        ref = weakref.ref(self)
        self.handles = [p.register_post_accumulate_grad_hook(_make_hook(ref, i)) for i, p in enumerate(params)]

    # --- one iteration ------------------------------------------------------------------------
    def prepare(self, outputs) -> None:
        """Arm the hooks for the backward pass of ``outputs`` (called at the end of DDP's forward)."""
        self.check_previous()
        self.armed = True
        self.hook_fired = False
        self.ready = [False] * len(self.params)
        self.next_bucket = 0
        for bucket in self.buckets:
            bucket.pending = len(bucket.indices)
            bucket.work = None
        self.used_work = None
        if self.find_unused:  # the unused parameters are marked ready by the first hook (as torch)
            reached = _reachable_leaves(_tensors_in(outputs, []))
            self.used = [id(p) in reached for p in self.params]

    def check_previous(self) -> None:
        """Raise torch's error if the last backward pass did not give every expected parameter a gradient."""
        if not self.armed:
            return
        self.armed = False
        launched = [b.work for b in self.buckets if b.work is not None]
        for work in launched + ([self.used_work] if self.used_work is not None else []):
            work.wait()
        if not self.hook_fired:
            return  # a forward without backward: nothing was reduced
        missing = [self.names[i] for i, r in enumerate(self.ready) if not r]
        rank = self.group.ranks[self.group.rank()]
        raise RuntimeError(
            "Expected to have finished reduction in the prior iteration before starting a new one. This error "
            "indicates that your module has parameters that were not used in producing loss. You can enable "
            "unused parameter detection by passing the keyword argument `find_unused_parameters=True` to "
            "`flambeau.distributed.DistributedDataParallel`, and by making sure all `forward` function outputs "
            f"participate in calculating loss. Parameters which did not receive grad for rank {rank}: "
            f"{', '.join(missing)}")

    def on_grad_ready(self, i: int) -> None:
        """The hook of parameter ``i``, after its ``.grad`` was accumulated (Note [Gradient hooks])."""
        if not self.armed:
            return
        if self.ready[i]:
            raise RuntimeError(
                f"Expected to mark a variable ready only once. Parameter {self.names[i]} received a gradient "
                f"twice in one backward pass under DistributedDataParallel (a second backward through the same "
                f"forward, or reentrant backward); use no_sync() for all but the last one")
        if not self.hook_fired:
            self.hook_fired = True
            if self.find_unused:
                for j, used in enumerate(self.used):
                    if not used:
                        self.copy_grad_to_bucket(j)  # what it accumulated under no_sync, or zeros
                        self.mark_ready(j)
        self.copy_grad_to_bucket(i)
        self.mark_ready(i)

    def copy_grad_to_bucket(self, i: int) -> None:
        p, view = self.params[i], self.views[i]
        g = p.grad
        with fl.no_grad():
            if g is None:
                view.zero_()
            elif g is not view:
                view.copy_(g)
                if self.as_view:
                    p.grad = view

    def mark_ready(self, i: int) -> None:
        self.ready[i] = True
        self.buckets[self.bucket_of[i]].pending -= 1
        launched = False
        while self.next_bucket < len(self.buckets) and self.buckets[self.next_bucket].pending == 0:
            bucket = self.buckets[self.next_bucket]
            op = ReduceOp.AVG if bucket.buffer.dtype.is_floating_point else ReduceOp.SUM
            bucket.launched_at = time.perf_counter()
            bucket.work = all_reduce(bucket.buffer, op, self.group, async_op=True)
            self.next_bucket += 1
            launched = True
        if launched and self.next_bucket == len(self.buckets):  # every parameter is ready: once per pass
            if self.find_unused:
                # Note: a parameter unused on every rank keeps its .grad (torch's globally-unused map).
                device = self.buckets[0].buffer.device  # the group's backend may take only CUDA tensors
                self.used_flags = fl.tensor([1 if u else 0 for u in self.used], dtype=fl.int32, device=device)
                self.used_work = all_reduce(self.used_flags, ReduceOp.MAX, self.group, async_op=True)
            # Imported here: importing flambeau.distributed does not load the engine (the first tensor
            # that requires grad does), and ranks reach their first collective sooner without it.
            from flambeau.autograd.graph import queue_callback

            queue_callback(self.finalize)  # runs when this backward pass ends

    def finalize(self) -> None:
        """End of backward: wait for every bucket and copy the averages into ``.grad``."""
        start = time.perf_counter()
        for bucket in self.buckets:
            bucket.work.wait()
        globally_used = None
        if self.used_work is not None:
            self.used_work.wait()
            globally_used = self.used_flags.tolist()
        end = time.perf_counter()
        self.stats["backward_syncs"] += 1
        self.stats["wait_s"] += end - start
        self.stats["comm_s"] += sum(b.work.completed_at - b.work.issued_at for b in self.buckets)
        self.armed = False
        with fl.no_grad():
            for j, (p, view) in enumerate(zip(self.params, self.views)):
                if globally_used is not None and not globally_used[j]:
                    continue  # unused on every rank: .grad stays as it was
                if self.as_view:
                    p.grad = view
                elif p.grad is None:
                    p.grad = view.clone()
                else:
                    p.grad.copy_(view)

    def remove_hooks(self) -> None:
        for handle in self.handles:
            handle.remove()
        self.handles = []


def _single_cuda_device(devices: set, device_ids, output_device) -> bool:
    """Whether ``device_ids``/``output_device`` name the one CUDA device of the parameters (torch's single-device
    module), e.g. ``device_ids=[local_rank]``."""
    if len(devices) != 1:
        return False
    (device,) = devices
    index = cuda_index(device)
    if index is None:
        return False
    ids_ok = device_ids is None or (isinstance(device_ids, (list, tuple)) and len(device_ids) == 1
                                    and cuda_index(device_ids[0]) == index)
    return ids_ok and (output_device is None or cuda_index(output_device) == index)


def _make_hook(ref, i: int):
    def hook(param):
        reducer = ref()
        if reducer is not None:
            reducer.on_grad_ready(i)
    return hook


class DistributedDataParallel(nn.Module):
    """Data parallelism across processes: wraps ``module`` and averages its gradients over the group.

    Every rank runs the same model on its own share of the data (``DistributedSampler``). At
    wrap time the parameters and buffers of rank 0 are broadcast to all; each forward broadcasts
    the buffers again (``broadcast_buffers``); each backward averages the gradients across the
    group in buckets, overlapped with the rest of backward, so that after ``loss.backward()``
    every rank holds the same averaged ``.grad`` and the optimizer steps keep the replicas equal.

    Args:
        module: the model, its parameters on the CPU or on one CUDA device (averaged through NCCL with
            backend ``"nccl"`` or ``"cpu:mpi,cuda:nccl"``, through host memory with ``"mpi"``).
        device_ids: None, or for a CUDA module the list of its one device (``[local_rank]``), as in torch.
        output_device: None, or for a CUDA module its device.
        dim: accepted for compatibility (inputs are not scattered).
        broadcast_buffers: broadcast rank 0's buffers at the start of every forward.
        process_group: the group to average over (default: all ranks).
        bucket_cap_mb: bucket size in MiB (default 25, with a first bucket of 1 MiB, as in torch).
        find_unused_parameters: look, after each forward, for parameters that the output does not
            depend on, and count them as ready (their gradient is what they accumulated, or zero);
            parameters unused on every rank keep their ``.grad`` unchanged.
        check_reduction: ignored (deprecated in torch).
        gradient_as_bucket_view: make each parameter's ``.grad`` a view of its bucket (saves the
            memory of one copy of the gradients; ``.grad`` must not be replaced by another tensor
            of a different layout).
        static_graph: accepted (the same graph every iteration needs no special handling here).
        init_sync: broadcast rank 0's parameters and buffers at wrap time.

    Shape: as ``module``.

    Example::

        dist.init_process_group("mpi")
        model = DistributedDataParallel(Net())
        with model.no_sync():            # accumulate locally for a few micro-batches
            loss_fn(model(x1), y1).backward()
        loss_fn(model(x2), y2).backward()  # then average the sum once
    """

    def __init__(self, module: nn.Module, device_ids=None, output_device=None, dim: int = 0,
                 broadcast_buffers: bool = True, process_group: ProcessGroup | None = None,
                 bucket_cap_mb: float | None = None, find_unused_parameters: bool = False,
                 check_reduction: bool = False, gradient_as_bucket_view: bool = False, static_graph: bool = False,
                 init_sync: bool = True) -> None:
        super().__init__()
        if not isinstance(module, nn.Module):
            raise TypeError(f"DistributedDataParallel: module must be a flambeau.nn.Module, got "
                            f"{type(module).__name__}")
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have any parameter "
                               "that requires a gradient.")
        devices = {p.device.type for _, p in named}
        if (device_ids is not None or output_device is not None) and not _single_cuda_device(
                {p.device for _, p in named}, device_ids, output_device):
            raise ValueError(f"DistributedDataParallel device_ids and output_device arguments only work with "
                             f"single-device/multiple-device GPU modules or CPU modules, but got device_ids "
                             f"{device_ids}, output_device {output_device}, and module parameters on {devices}; "
                             f"leave both None, or for a CUDA module pass its device ([local_rank])")
        if len({p.device for _, p in named}) > 1:
            raise ValueError(f"DistributedDataParallel: the module's parameters must all be on one device, got "
                             f"{sorted(str(p.device) for _, p in named)}")
        caps_default = bucket_cap_mb is None
        if caps_default:
            bucket_cap_mb = 25
        if not bucket_cap_mb > 0:
            raise ValueError(f"DistributedDataParallel: bucket_cap_mb must be positive, got {bucket_cap_mb}")
        self.module = module
        self.process_group = _default("DistributedDataParallel") if process_group is None else process_group
        self.device_ids = None if device_ids is None else list(device_ids)
        self.output_device = output_device
        self.dim = dim
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.static_graph = static_graph
        self.bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)
        self.require_backward_grad_sync = True
        self.require_forward_param_sync = True
        self._verify_same_parameters(named)
        if init_sync:
            src = self.process_group.ranks[0]
            _broadcast_coalesced([p for _, p in module.named_parameters()] + list(module.buffers()), src,
                                 self.process_group, _BROADCAST_BUCKET_BYTES)
        # torch: the first bucket is 1 MiB (communication starts early) unless bucket_cap_mb was given.
        caps = [_FIRST_BUCKET_BYTES, self.bucket_bytes_cap] if caps_default else [self.bucket_bytes_cap]
        self._reducer = _Reducer([p for _, p in named], [n for n, _ in named], self.process_group, caps,
                                 find_unused_parameters, gradient_as_bucket_view)
        weakref.finalize(self, _Reducer.remove_hooks, self._reducer)

    def _verify_same_parameters(self, named) -> None:
        mine = [(n, tuple(p.shape), p.dtype.name) for n, p in named]
        everyone = [None] * self.process_group.size()
        all_gather_object(everyone, mine, self.process_group)
        for r, theirs in enumerate(everyone):
            if theirs == mine:
                continue
            rank = self.process_group.ranks[r]
            me = self.process_group.ranks[self.process_group.rank()]
            if len(theirs) != len(mine):
                raise ValueError(f"DDP expects same model across all ranks, but Rank {me} has {len(mine)} params, "
                                 f"while rank {rank} has inconsistent {len(theirs)} params.")
            for a, b in zip(mine, theirs):
                if a != b:
                    raise ValueError(f"DDP expects same model across all ranks, but parameter {a[0]} has shape "
                                     f"{a[1]} and dtype {a[2]} on rank {me}, while rank {rank} has {b[0]} with "
                                     f"shape {b[1]} and dtype {b[2]}.")

    def forward(self, *inputs, **kwargs):
        """Run the wrapped module (after broadcasting buffers) and arm the gradient averaging of its backward."""
        if self.require_forward_param_sync and self.broadcast_buffers and self.process_group.size() > 1:
            buffers = list(self.module.buffers())
            if buffers:
                _broadcast_coalesced(buffers, self.process_group.ranks[0], self.process_group,
                                     self.bucket_bytes_cap)
        self._reducer.check_previous()
        outputs = self.module(*inputs, **kwargs)
        if fl.is_grad_enabled() and self.require_backward_grad_sync:
            self._reducer.prepare(outputs)
        return outputs

    @contextlib.contextmanager
    def no_sync(self):
        """Within this context, backward accumulates gradients locally without averaging them.

        The first backward after the context averages the sum of everything accumulated.
        """
        previous = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = previous

    def _get_ddp_logging_data(self) -> dict:
        """Counters of the gradient averaging: synced backward passes, seconds the end of backward waited
        for communication (``wait_s``), and seconds the buckets' all-reduces were in flight (``comm_s``)."""
        return dict(self._reducer.stats)
