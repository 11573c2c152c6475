"""``DataParallel``: single-process, multi-GPU data parallelism (as ``torch.nn.DataParallel``).

Each forward scatters the inputs along ``dim`` over ``device_ids``, runs one replica of the module per
device in a thread, and gathers the outputs on ``output_device``. The replicas' parameters are
differentiable copies of the module's, so the gradients of all chunks sum into the module's own
parameters. As torch, with no CUDA device the module runs directly (``device_ids`` is then empty),
and with one device id the module is moved there and run on the (moved) inputs without replicas.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from itertools import chain

import flambeau as fl
from flambeau import Tensor
from flambeau.nn.modules.module import Module

__all__ = ["DataParallel", "data_parallel", "scatter", "scatter_kwargs", "gather", "replicate", "parallel_apply"]


def _device_index(device) -> int:
    if isinstance(device, int):
        return device
    device = fl.device(device)
    if device.type != "cuda":
        raise ValueError(f"Expected a cuda device, but got: {device}")
    return device.index if device.index is not None else fl.cuda.current_device()


def scatter(inputs, target_gpus: Sequence[int], dim: int = 0):
    """Split the tensors of ``inputs`` (recursively through tuples, lists and dicts) into one chunk per device.

    Returns a list with one element per chunk; non-tensors are repeated in each.
    """
    def scatter_map(obj):
        if isinstance(obj, Tensor):
            return [chunk.to(f"cuda:{gpu}") for chunk, gpu in zip(obj.chunk(len(target_gpus), dim), target_gpus)]
        if isinstance(obj, tuple) and len(obj) > 0:
            return [type(obj)(*args) if hasattr(obj, "_fields") else tuple(args)
                    for args in zip(*map(scatter_map, obj))]
        if isinstance(obj, list) and len(obj) > 0:
            return [list(args) for args in zip(*map(scatter_map, obj))]
        if isinstance(obj, dict) and len(obj) > 0:
            return [type(obj)(items) for items in zip(*map(scatter_map, obj.items()))]
        return [obj for _ in target_gpus]

    return scatter_map(inputs)


def scatter_kwargs(inputs, kwargs, target_gpus: Sequence[int], dim: int = 0) -> tuple[tuple, tuple]:
    """:func:`scatter` of the positional and keyword arguments, padded to the same number of chunks."""
    scattered = scatter(inputs, target_gpus, dim) if inputs else []
    scattered_kwargs = scatter(kwargs, target_gpus, dim) if kwargs else []
    if len(scattered) < len(scattered_kwargs):
        scattered.extend(() for _ in range(len(scattered_kwargs) - len(scattered)))
    elif len(scattered_kwargs) < len(scattered):
        scattered_kwargs.extend({} for _ in range(len(scattered) - len(scattered_kwargs)))
    return tuple(scattered), tuple(scattered_kwargs)


def gather(outputs, target_device, dim: int = 0):
    """Concatenate the per-device ``outputs`` along ``dim`` on ``target_device`` (``-1``: the CPU).

    0-dim tensors (per-replica losses) are stacked into a vector, as torch (which warns).
    """
    device = "cpu" if target_device == -1 or target_device == "cpu" else f"cuda:{_device_index(target_device)}"

    def gather_map(outs):
        out = outs[0]
        if isinstance(out, Tensor):
            if out.ndim == 0:
                return fl.stack([o.to(device) for o in outs])
            return fl.cat([o.to(device) for o in outs], dim)
        if out is None:
            return None
        if isinstance(out, Mapping):
            if not all(len(out) == len(d) for d in outs):
                raise ValueError("All dicts must have the same number of keys")
            return type(out)((k, gather_map([d[k] for d in outs])) for k in out)
        if isinstance(out, tuple) and hasattr(out, "_fields"):
            return type(out)(*map(gather_map, zip(*outs)))
        return type(out)(map(gather_map, zip(*outs)))

    return gather_map(outputs)


def _replica(module: Module, memo: dict, device: str) -> Module:
    copy = module.__new__(type(module))
    copy.__dict__ = module.__dict__.copy()
    copy._parameters = {name: (None if p is None else memo.setdefault(id(p), p.to(device)))
                        for name, p in module._parameters.items()}
    copy._buffers = {name: (None if b is None else b.to(device)) for name, b in module._buffers.items()}
    copy._modules = {name: (None if m is None else _replica(m, memo, device)) for name, m in module._modules.items()}
    return copy


def replicate(network: Module, devices: Sequence, detach: bool = False) -> list[Module]:
    """One copy of ``network`` per device whose parameters are differentiable copies (``detach``: detached)."""
    replicas = []
    for device in devices:
        memo: dict = {}
        with fl.no_grad() if detach else fl.enable_grad():
            replicas.append(_replica(network, memo, f"cuda:{_device_index(device)}"))
    return replicas


def parallel_apply(modules: Sequence, inputs: Sequence, kwargs_tup: Sequence | None = None,
                   devices: Sequence | None = None) -> list:
    """Run ``modules[i](*inputs[i], **kwargs_tup[i])`` in one thread per module; the outputs in order.

    An exception in a thread is raised again in the caller. Under numba's CUDA simulator (which runs
    kernels from one thread at a time) the modules run one after the other.
    """
    if len(modules) != len(inputs):
        raise AssertionError(f"The number of modules {len(modules)} is not equal to the number of inputs "
                             f"{len(inputs)}")
    kwargs_tup = kwargs_tup if kwargs_tup is not None else ({},) * len(modules)
    grad_enabled = fl.is_grad_enabled()
    results: dict[int, object] = {}

    def worker(i: int) -> None:
        try:
            with fl.set_grad_enabled(grad_enabled):
                args = inputs[i] if isinstance(inputs[i], (list, tuple)) else (inputs[i],)
                results[i] = modules[i](*args, **kwargs_tup[i])
        except Exception as error:  # noqa: BLE001 - re-raised in the caller below
            results[i] = error

    if len(modules) == 1 or _simulated():
        for i in range(len(modules)):  # the CUDA simulator runs kernels from one thread at a time
            worker(i)
    else:
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(len(modules))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    outputs = []
    for i in range(len(modules)):
        if isinstance(results[i], Exception):
            raise results[i]
        outputs.append(results[i])
    return outputs


def _simulated() -> bool:
    cuda = getattr(fl, "cuda", None)
    return cuda is not None and cuda.is_available() and cuda.is_simulator()


def _cuda_ids() -> list[int] | None:
    cuda = getattr(fl, "cuda", None)
    if cuda is None or not cuda.is_available():
        return None
    return list(range(cuda.device_count()))


def _check_on(module: Module, device_id: int) -> None:
    for t in chain(module.parameters(), module.buffers()):
        if t.device != fl.device("cuda", device_id):
            raise RuntimeError(f"module must have its parameters and buffers on device cuda:{device_id} "
                               f"(device_ids[0]) but found one of them on device: {t.device}")


class DataParallel(Module):
    """Data parallelism over the CUDA devices of one process (as ``torch.nn.DataParallel``).

    Args:
        module: the module to run.
        device_ids: CUDA devices (ints or devices); defaults to all.
        output_device: where the outputs are gathered; defaults to ``device_ids[0]``.
        dim: the dimension the inputs are split along and the outputs concatenated along.

    With no CUDA device the module runs unchanged on its inputs. The module's parameters and
    buffers must be on ``device_ids[0]``; buffers updated in a replica's forward (batch-norm
    running statistics) are not copied back, as in torch.
    """

    def __init__(self, module: Module, device_ids=None, output_device=None, dim: int = 0) -> None:
        super().__init__()
        available = _cuda_ids()
        self.module = module
        if available is None:
            self.device_ids = []
            return
        if device_ids is None:
            device_ids = available
        if not device_ids:
            raise RuntimeError("no available devices were found")
        self.dim = dim
        self.device_ids = [_device_index(d) for d in device_ids]
        self.output_device = _device_index(device_ids[0] if output_device is None else output_device)
        self.src_device_obj = fl.device("cuda", self.device_ids[0])
        if len(self.device_ids) == 1:
            self.module.to(self.src_device_obj)

    def forward(self, *inputs, **kwargs):
        """Scatter, run the replicas in parallel, gather (or run the module directly: see the class)."""
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        _check_on(self.module, self.device_ids[0])
        inputs, module_kwargs = self.scatter(inputs, kwargs, self.device_ids)
        if not inputs and not module_kwargs:
            inputs, module_kwargs = ((),), ({},)
        if len(self.device_ids) == 1:
            return self.module(*inputs[0], **module_kwargs[0])
        replicas = self.replicate(self.module, self.device_ids[:len(inputs)])
        outputs = self.parallel_apply(replicas, inputs, module_kwargs)
        return self.gather(outputs, self.output_device)

    def replicate(self, module: Module, device_ids) -> list[Module]:
        """The replicas of ``module`` on ``device_ids``."""
        return replicate(module, device_ids, not fl.is_grad_enabled())

    def scatter(self, inputs, kwargs, device_ids):
        """The per-device chunks of the positional and keyword arguments."""
        return scatter_kwargs(inputs, kwargs, device_ids, dim=self.dim)

    def parallel_apply(self, replicas, inputs, kwargs) -> list:
        """Run the replicas on their chunks in threads."""
        return parallel_apply(replicas, inputs, kwargs, self.device_ids[:len(replicas)])

    def gather(self, outputs, output_device):
        """The outputs concatenated on ``output_device``."""
        return gather(outputs, output_device, dim=self.dim)


def data_parallel(module: Module, inputs, device_ids=None, output_device=None, dim: int = 0, module_kwargs=None):
    """The functional form of :class:`DataParallel`: ``module(*inputs)`` evaluated in parallel on ``device_ids``.

    Raises:
        RuntimeError: with no CUDA device (as torch, which cannot determine a device type), or when the
            module's parameters are not on ``device_ids[0]``.
    """
    if not isinstance(inputs, tuple):
        inputs = (inputs,) if inputs is not None else ()
    available = _cuda_ids()
    if available is None:
        raise RuntimeError("device type could not be determined")
    device_ids = [_device_index(d) for d in (available if device_ids is None else device_ids)]
    if not device_ids:
        raise RuntimeError("no available devices were found")
    output_device = _device_index(device_ids[0] if output_device is None else output_device)
    _check_on(module, device_ids[0])
    inputs, module_kwargs = scatter_kwargs(inputs, module_kwargs, device_ids, dim)
    if not inputs and not module_kwargs:
        inputs, module_kwargs = ((),), ({},)
    if len(device_ids) == 1:
        return module(*inputs[0], **module_kwargs[0])
    used = device_ids[:len(inputs)]
    outputs = parallel_apply(replicate(module, used), inputs, module_kwargs, used)
    return gather(outputs, output_device, dim)
