"""Flat index to element offsets: how every strided CUDA kernel addresses its operands.

One implementation, :func:`offsets4`, compiled by each kernel family as a numba.cuda device function
(:func:`device`, which NVVM inlines): C-order position ``r`` of ``shape`` (``r < prod(shape)``) becomes its
element offsets under up to four stride tuples (unused ones are dead code once inlined), by one division a
dim and none for the outermost (its position is what is left of ``r``); a 1-d shape, what coalescing makes of
every contiguous operation, by none at all.

Note [Narrow index math]
    numba's ``//`` of int64 is Python's floor division: a 64-bit signed divide (which LLVM guards with a
    run-time test for operands that fit 32 bits) plus the sign fix-ups, and ``%`` another divide. On an H100
    that made a channel-bias add over 32x256x56x56 float32 take 314 us against 91 for torch (whose
    IntDivider multiplies instead), and the batch norm kernels 3 to 5 times the time of their memory traffic
    (tools/gpu_kernel_times.py). Below 2**31 (``narrow``) the divisions are unsigned 32-bit, the remainder
    by a multiply. An extent past 2**31 then divides as 2**31, which leaves the same quotient (0) and
    remainder (``r``) as the extent itself since ``r`` is below both; so ``narrow`` may be tested once per
    launch (``n < NARROW``: the elementwise templates) or per position (``r < NARROW``: the others). 64-bit
    launches keep 64-bit divisions; tests lower the bound to 0 under the simulator to run that path.
"""

from __future__ import annotations

import functools

import numpy as np

from flambeau._kernels.cuda._launch import NARROW, bind_numba_cuda

__all__ = ["offsets4", "device"]

cuda = None  # numba.cuda once a device function is built (Note [numba.cuda bound on first use] in _launch)


def offsets4(r, shape, narrow, s0, s1, s2, s3):
    """The element offsets of C-order position ``r`` of ``shape`` under strides ``s0`` to ``s3``; ``narrow``:
    ``r`` is below 2**31 (Note [Narrow index math])."""
    if len(shape) == 1:  # a compile-time constant: the other branch is not compiled for 1-d shapes
        return r * s0[0], r * s1[0], r * s2[0], r * s3[0]
    o0 = 0
    o1 = 0
    o2 = 0
    o3 = 0
    if narrow:
        u = np.uint32(r)
        for d in range(len(shape) - 1, 0, -1):
            ext = np.uint32(min(shape[d], NARROW))
            q = np.uint32(u // ext)
            c = np.int64(u - q * ext)
            u = q
            o0 += c * s0[d]
            o1 += c * s1[d]
            o2 += c * s2[d]
            o3 += c * s3[d]
        top = np.int64(u)
    else:
        w = r
        for d in range(len(shape) - 1, 0, -1):
            qw = w // shape[d]
            cw = w - qw * shape[d]
            w = qw
            o0 += cw * s0[d]
            o1 += cw * s1[d]
            o2 += cw * s2[d]
            o3 += cw * s3[d]
        top = w
    return o0 + top * s0[0], o1 + top * s1[0], o2 + top * s2[0], o3 + top * s3[0]


@functools.cache
def device(name: str):
    """A device function (compiled once): ``offsets4``; ``offsets3`` ``(r, shape, s0, s1, s2) -> 3 offsets``;
    ``offset`` ``(base, r, shape, st) -> base + offset``; ``row_offset`` ``(r, shape, st) -> offset``;
    ``quot`` ``(r, d) -> r // d``. All but ``offsets4`` test ``r < NARROW`` themselves."""
    bind_numba_cuda(globals())
    if name == "offsets4":
        return cuda.jit(device=True)(offsets4)
    four = device("offsets4")
    if name == "offsets3":
        def offsets3(r, shape, s0, s1, s2):
            o0, o1, o2, _ = four(r, shape, r < NARROW, s0, s1, s2, s2)
            return o0, o1, o2

        return cuda.jit(device=True)(offsets3)
    if name == "offset":
        def offset(base, r, shape, st):
            return base + four(r, shape, r < NARROW, st, st, st, st)[0]

        return cuda.jit(device=True)(offset)
    if name == "quot":
        def quot(r, d):  # the position along the outer dim of (r, d), r's extent never divided by
            return four(r, (r, d), r < NARROW, (1, 0), (1, 0), (1, 0), (1, 0))[0]

        return cuda.jit(device=True)(quot)

    def row_offset(r, shape, st):
        return four(r, shape, r < NARROW, st, st, st, st)[0]

    assert name == "row_offset", name
    return cuda.jit(device=True)(row_offset)
