"""Where an optimizer's state and the fused kernels' uploaded tables live on a GPU: memory pools of their own.

Note [Optimizer state in a memory pool of its own]
    An optimizer makes most of its state (SGD's momentum buffers, Adam's moments) at its first step,
    after that step's forward and backward have filled the caching allocator's cache with the blocks
    of activations and gradients. Taken from that cache, the state keeps blocks that the next
    forward needs, and the second step reserves new segments: on the benchmark models of
    ``benchmarks/train.py`` (their sizes, the caching allocator over a simulated device) the
    ResNet-18's second step made 2 raw device allocations, MobileNetV2's 1, the GPT's (Adam) 5.

    So the state of a CUDA parameter is allocated in a memory pool (:class:`flambeau.cuda.MemPool`)
    that the optimizer keeps for the parameter's device: its segments hold the state and nothing
    else, every step after the first finds the cache as the step before left it, and no step after
    the first makes a raw allocation. The price is the unused tail of the pool's segments: at most
    one 2 MiB segment of the small pool and one 20 MiB segment of the large pool per device and
    optimizer (the benchmark ResNet-18: 142 MiB reserved instead of 122). The pool goes when the
    optimizer does; state tensors still referenced then keep their memory until they are freed.

    Without flambeau-cuda-alloc's caching allocator there are no pools, and the state comes from the
    device's allocator as any tensor does. CPU parameters are not concerned. Where the step runs inside a
    pool of the caller's (``use_mem_pool``) on the parameter's device, the state goes to that pool, as every
    other allocation there does (and as torch's optimizers' state does): the caller chose where it lives.

Note [Uploaded tables in a pool of their own]
    The fused updates and ``clip_grad_norm_`` upload small host arrays each step (the scalars, the table of
    addresses: ``_cuda_kernels._upload``). A slot's copy is replaced when its bytes change (Adam's scalars
    every step, the address table whenever the gradients were allocated anew), so each copy is made near
    the end of one step and freed near the end of the next: it lives through the next step's forward and
    backward, in blocks that the first step's forward and backward had to themselves. Taken from the
    common cache, these copies made a later step find the cache laid out differently from the first, and
    reserve a segment more (the caching allocator over a simulated device: GNMT of Table 1 at its second
    step, the GPT of ``benchmarks/train.py`` at its GPU size at its third, MobileNetV2 at its seventh). So
    the copies come from one memory pool per device (:func:`upload_memory`), kept for the life
    of the process: one 2 MiB segment of the small pool per device where tables stay under 1 MiB. As for
    the state, a step inside a pool of the caller's uploads into the caller's pool.
"""

from __future__ import annotations

import contextlib
import weakref

import flambeau as fl

__all__ = ["state_memory", "upload_memory"]

# optimizer -> {device index: MemPool, or None where the device's allocator has no pools}; kept beside the
# optimizer, not in it, so that copying or pickling an optimizer never meets a pool
_POOLS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def state_memory(optimizer, params) -> contextlib.AbstractContextManager:
    """A context in which the allocations on the devices of the CUDA tensors among ``params`` come from
    ``optimizer``'s pools (Note [Optimizer state in a memory pool of its own]); enter it while making the
    state of those parameters."""
    indices = {p._device.index for p in params if p._device.type == "cuda"}
    if not indices:
        return contextlib.nullcontext()
    pools = _POOLS.get(optimizer)
    if pools is None:
        pools = _POOLS[optimizer] = {}
    stack = contextlib.ExitStack()
    for index in sorted(indices):
        if _in_callers_pool(index):
            continue
        if index not in pools:
            pools[index] = _new_pool(index)
        if pools[index] is not None:
            stack.enter_context(fl.cuda.use_mem_pool(pools[index], index))
    return stack


# (device index, pool id) -> the pools made here (optimizers' state, uploads): not a caller's
_OURS: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
_UPLOAD_POOLS: dict = {}  # device index -> the uploads' MemPool, or None where the device's allocator has no pools


def upload_memory(index: int) -> contextlib.AbstractContextManager:
    """A context in which the allocations on CUDA device ``index`` come from the pool of the uploaded tables
    (Note [Uploaded tables in a pool of their own]); enter it while making an upload's device copy. Inside
    an optimizer's state pool (the first step uploads while it makes the state) the uploads still go to
    their own pool: in the state's, the second step's uploads would be the first in a pool of their own,
    and reserve its segment then."""
    if _in_callers_pool(index):
        return contextlib.nullcontext()
    pool = _UPLOAD_POOLS.get(index, False)
    if pool is False:
        pool = _UPLOAD_POOLS[index] = _new_pool(index)
    return contextlib.nullcontext() if pool is None else fl.cuda.use_mem_pool(pool, index)


def _in_callers_pool(index: int) -> bool:
    """Whether the calling thread allocates from a memory pool of the caller's on CUDA device ``index`` (the
    caching allocator's ``current_pool``, one not made here)."""
    current = getattr(fl.cuda.get_allocator(index), "current_pool", None)
    pool_id = None if current is None else current()
    return pool_id is not None and (index, pool_id) not in _OURS


def _new_pool(index: int):
    """A memory pool on CUDA device ``index``, or None if its allocator makes none."""
    with fl.cuda.device(index):
        try:
            pool = fl.cuda.MemPool()
        except RuntimeError:  # not a caching allocator (flambeau-cuda-alloc is not installed)
            return None
    _OURS[index, pool.id[1]] = pool
    return pool
