"""Operators that search sorted sequences (``searchsorted``, ``bucketize``), and the composites of
``torch.functional`` that programs reach for beside them: ``cdist``, ``meshgrid``, ``atleast_1d/2d/3d``.

Kernel convention (every device): ``searchsorted`` kernels take
``kernel(boundaries, values, right, sorter, out_dtype) -> array``: ``boundaries`` a C-contiguous
``(B, M)`` array, ``values`` a C-contiguous ``(B, K)`` array of the same dtype, ``sorter`` None or
a C-contiguous int64 ``(B, M)`` array of permutations that sort each row, ``out_dtype`` int32 or
int64; the result is the ``(B, K)`` array of insertion points ``i`` in ``[0, M]`` such that row
``b``'s boundaries before ``i`` are ``< v`` (``right``: ``<= v``) and the others are not, found by
binary search with torch's comparisons (a NaN value goes after every boundary). ``bucketize`` is
``searchsorted`` with 1-d boundaries.

The composites run no kernel of their own: autograd records the operators they are made of.
"""

from __future__ import annotations

import math

from flambeau import _dtype as dt
from flambeau._ops._common import check_tensor, common_device
from flambeau._ops._registry import declare
from flambeau._ops._samples import FLOAT, FLOAT_INT, SampleInput, cases
from flambeau._tensor import Tensor, _wrap

__all__ = ["searchsorted", "bucketize", "cdist", "meshgrid", "atleast_1d", "atleast_2d", "atleast_3d"]

SEARCHSORTED = declare(
    "searchsorted(Tensor sorted_sequence, Tensor self, *, bool out_int32=False, bool right=False, "
    "str? side=None, Tensor? sorter=None) -> Tensor", differentiable=False, method=False, category="searching")


def _searchsorted_args(sorted_sequence, values, sorter, side, right: bool) -> bool:
    """Check the arguments as torch does; return ``right`` resolved with ``side``."""
    check_tensor(sorted_sequence, "sorted_sequence", "searchsorted")
    if side is not None:
        if side not in ("left", "right"):
            raise RuntimeError(f"flambeau.searchsorted(): side can only be 'left' or 'right' but got {side}")
        if right and side == "left":
            raise RuntimeError("flambeau.searchsorted(): side and right can't be set to opposites, got side of left "
                               "while right was True")
        right = side == "right"
    bshape = tuple(sorted_sequence.shape)
    if not bshape:
        raise RuntimeError("flambeau.searchsorted(): boundaries tensor should have positive dimension, but got 0 "
                           "dimension")
    if isinstance(values, Tensor):
        vshape = tuple(values.shape)
        if len(bshape) > 1 and not vshape:
            raise RuntimeError("flambeau.searchsorted(): input value can be a scalar only when boundaries tensor "
                               f"dimension is 1, but we got boundaries tensor dim({len(bshape)}) and input value's "
                               f"dim(0) numel(1)")
        if len(bshape) > 1 and (len(vshape) != len(bshape) or vshape[:-1] != bshape[:-1]):
            raise RuntimeError("flambeau.searchsorted(): boundaries tensor should be 1 dimension or the first N-1 "
                               "dimensions of boundaries tensor and input value tensor must match, but we got "
                               f"boundaries tensor {list(bshape)} and input value tensor {list(vshape)}")
    elif len(bshape) > 1:
        raise RuntimeError("flambeau.searchsorted(): input value can be a scalar only when boundaries tensor "
                           f"dimension is 1, but we got boundaries tensor dim({len(bshape)}) and input value's "
                           "dim(0) numel(1)")
    if sorter is not None:
        check_tensor(sorter, "sorter", "searchsorted")
        if sorter.dtype is not dt.int64:
            raise RuntimeError(f"flambeau.searchsorted(): sorter must be a tensor of long dtype but got dtype "
                               f"{sorter.dtype.scalar_name}")
        if tuple(sorter.shape) != bshape:
            raise RuntimeError(f"flambeau.searchsorted(): boundary and sorter must have the same size, but got "
                               f"boundary tensor {list(bshape)}and got sorter tensor {list(sorter.shape)}")
    return bool(right)


@SEARCHSORTED.front
def searchsorted(sorted_sequence: Tensor, input, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter: Tensor | None = None) -> Tensor:
    """Indices where ``input``'s elements would be inserted into ``sorted_sequence`` to keep it sorted.

    Args:
        sorted_sequence: ``(M,)``, or ``(*, M)`` sorted along its last dimension (then ``input``
            is ``(*, K)`` with the same leading dimensions).
        input: the values, a tensor of any shape (1-d boundaries) or a Python number.
        out_int32: int32 result instead of int64.
        right, side: ``right=True`` or ``side="right"`` gives the last suitable index (boundaries
            ``<= v`` before it) instead of the first (boundaries ``< v`` before it).
        sorter: int64 indices that sort ``sorted_sequence`` along its last dimension (when it is not
            sorted itself), of its shape.

    Returns:
        int64 (int32) indices in ``[0, M]`` of ``input``'s shape (0-d for a number). Both operands
        are compared in their promoted dtype; a NaN value goes after every boundary.
    """
    right = _searchsorted_args(sorted_sequence, input, sorter, side, right)
    scalar = not isinstance(input, Tensor)
    common = dt.result_type(sorted_sequence, input)
    if common.is_complex:  # (complex numbers have no order; the kernel's comparison failed to compile)
        raise NotImplementedError(f"\"searchsorted_out_{sorted_sequence.device.type}\" not implemented for "
                                  f"'{common.scalar_name}'")
    if common is dt.bool:
        raise NotImplementedError("\"searchsorted_out_cpu\" not implemented for 'Bool'")
    dev = sorted_sequence.device if scalar else common_device(sorted_sequence, input)
    from flambeau._factories import tensor

    values = tensor(input, dtype=common, device=dev) if scalar else input
    bshape, vshape = tuple(sorted_sequence.shape), tuple(values.shape)
    B = math.prod(bshape[:-1])
    K = vshape[-1] if len(bshape) > 1 else math.prod(vshape)
    out_dtype = dt.int32 if out_int32 else dt.int64
    if B * K == 0 or bshape[-1] == 0:  # nothing to search, or every insertion point is 0
        from flambeau._factories import zeros

        return zeros(vshape, dtype=out_dtype, device=dev)
    boundaries = sorted_sequence.to(common).contiguous()._data.reshape(B, bshape[-1])
    vals = values.to(common).contiguous()._data.reshape(B, K)
    order = None if sorter is None else sorter.contiguous()._data.reshape(B, bshape[-1])
    out = SEARCHSORTED.kernel(dev.type)(boundaries, vals, right, order, out_dtype.np)
    return _wrap(out.reshape(vshape), dev, dtype=out_dtype)


def _searchsorted_samples(device, dtype, requires_grad):
    import flambeau as fl

    boundaries = fl.tensor([-3, -1, 0, 0, 2, 5, 7], dtype=dtype, device=device)
    values = fl.tensor([[-4, 0, 1, 7], [8, 2, -1, 3]], dtype=dtype, device=device)
    yield SampleInput(boundaries, values).named("1d")
    yield SampleInput(boundaries, values, right=True).named("right")
    yield SampleInput(boundaries, values, side="right", out_int32=True).named("side int32")
    yield SampleInput(boundaries, 2).named("scalar")
    rows = fl.tensor([[1, 2, 3], [-2, 0, 0]], dtype=dtype, device=device)
    yield SampleInput(rows, fl.tensor([[2, 0], [0, 5]], dtype=dtype, device=device)).named("batched")
    unsorted = fl.tensor([[3, 1, 2], [0, -2, 0]], dtype=dtype, device=device)
    sorter = fl.tensor([[1, 2, 0], [1, 0, 2]], device=device)
    yield SampleInput(unsorted, fl.tensor([[2, 0], [0, 5]], dtype=dtype, device=device), sorter=sorter,
                      right=True).named("sorter")


SEARCHSORTED.samples(_searchsorted_samples, dtypes=FLOAT_INT)


BUCKETIZE = declare("bucketize(Tensor self, Tensor boundaries, *, bool out_int32=False, bool right=False) -> Tensor",
                    differentiable=False, method=False, category="searching")


@BUCKETIZE.front
def bucketize(input, boundaries: Tensor, *, out_int32: bool = False, right: bool = False) -> Tensor:
    """The index of the bucket of each element of ``input``: ``boundaries[i-1] < x <= boundaries[i]``
    (``right=True``: ``boundaries[i-1] <= x < boundaries[i]``).

    ``boundaries`` is 1-d and increasing; ``input`` a tensor of any shape or a number. Returns int64
    (``out_int32``: int32) indices in ``[0, len(boundaries)]`` of ``input``'s shape; it is
    :func:`searchsorted` ``(boundaries, input, right=right)``.
    """
    check_tensor(boundaries, "boundaries", "bucketize")
    if boundaries.ndim != 1:
        raise RuntimeError(f"boundaries tensor must be 1 dimension, but got dim({boundaries.ndim})")
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


def _bucketize_samples(device, dtype, requires_grad):
    import flambeau as fl

    boundaries = fl.tensor([-3, 0, 0, 2, 5], dtype=dtype, device=device)
    values = fl.tensor([[-4, 0, 1], [5, 6, 2]], dtype=dtype, device=device)
    yield SampleInput(values, boundaries)
    yield SampleInput(values, boundaries, right=True, out_int32=True).named("right int32")


BUCKETIZE.samples(_bucketize_samples, dtypes=FLOAT_INT)


# --- composites (torch.functional) ----------------------------------------------------------------
CDIST = declare("cdist(Tensor x1, Tensor x2, float p=2, str? compute_mode=None) -> Tensor", composite=True,
                method=False, category="distance")

_CDIST_MODES = ("use_mm_for_euclid_dist_if_necessary", "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist")


@CDIST.front
def cdist(x1: Tensor, x2: Tensor, p: float = 2.0,
          compute_mode: str = "use_mm_for_euclid_dist_if_necessary") -> Tensor:
    """The p-norm distance between each pair of rows of ``x1`` and ``x2``.

    Args:
        x1: ``(*B1, P, M)``; x2: ``(*B2, R, M)`` (batch dimensions broadcast), one floating dtype.
        p: the norm, ``>= 0`` (``inf`` allowed).
        compute_mode: for ``p=2``, ``"use_mm_for_euclid_dist_if_necessary"`` (a matmul when
            ``P > 25`` or ``R > 25``), ``"use_mm_for_euclid_dist"`` (always), or
            ``"donot_use_mm_for_euclid_dist"`` (never). The matmul form computes
            ``sqrt(|x|^2 - 2 x.y + |y|^2)`` with one matmul (faster, and less exact for near points).

    Returns:
        ``(*B, P, R)`` distances in ``x1``'s dtype; differentiable in both inputs.
    """
    check_tensor(x1, "x1", "cdist")
    check_tensor(x2, "x2", "cdist")
    if compute_mode not in _CDIST_MODES:
        raise ValueError(f"{compute_mode} is not a valid value for compute_mode")
    for name, x in (("X1", x1), ("X2", x2)):
        if not x.dtype.is_floating_point:
            raise RuntimeError(f"cdist only supports floating-point dtypes, {name} got: {x.dtype.scalar_name}")
    for name, x in (("X1", x1), ("X2", x2)):
        if x.ndim < 2:
            raise RuntimeError(f"cdist only supports at least 2D tensors, {name} got: {x.ndim}D")
    if x1.dtype is not x2.dtype:
        raise RuntimeError(f"expected scalar type {x1.dtype.scalar_name} but found {x2.dtype.scalar_name}")
    if x1.shape[-1] != x2.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: {x1.shape[-1]} X2: {x2.shape[-1]}")
    if not p >= 0:
        raise RuntimeError("cdist only supports non-negative p values")
    use_mm = p == 2 and (compute_mode == "use_mm_for_euclid_dist" or (
        compute_mode == "use_mm_for_euclid_dist_if_necessary" and (x1.shape[-2] > 25 or x2.shape[-2] > 25)))
    if use_mm:
        return _euclidean_by_matmul(x1, x2)
    diff = x1.unsqueeze(-2) - x2.unsqueeze(-3)  # (*B, P, R, M)
    return diff.norm(p=float(p), dim=-1)


def _euclidean_by_matmul(x1: Tensor, x2: Tensor) -> Tensor:
    """torch's ``_euclidean_dist``: ``[-2x, |x|^2, 1] . [y, 1, |y|^2]`` in one matmul, clamped, square-rooted."""
    from flambeau._ops.shape import cat

    x1_norm = x1.pow(2).sum(-1, keepdim=True)
    x2_norm = x2.pow(2).sum(-1, keepdim=True)
    x1_ = cat([x1 * -2, x1_norm, x1_norm.new_ones(x1_norm.shape)], dim=-1)
    x2_ = cat([x2, x2_norm.new_ones(x2_norm.shape), x2_norm], dim=-1)
    return x1_.matmul(x2_.transpose(-2, -1)).clamp_min(1e-30).sqrt()


def _cdist_samples(device, dtype, requires_grad):
    def build(p, mode="use_mm_for_euclid_dist_if_necessary", batch=()):
        return lambda mk, mki: SampleInput(mk((*batch, 3, 4)), mk((4, 4)), p, compute_mode=mode)

    yield from cases(build(2.0), build(2.0, "use_mm_for_euclid_dist"), build(1.0), build(3.0, batch=(2,)),
                     build(float("inf")))(device, dtype, requires_grad)


CDIST.samples(_cdist_samples, dtypes=FLOAT)


MESHGRID = declare("meshgrid(Tensor[] tensors, *, str? indexing=None) -> Tensor[]", composite=True, method=False,
                   category="shape")


@MESHGRID.front
def meshgrid(*tensors, indexing: str | None = None) -> tuple:
    """Coordinate grids from N 1-d (or 0-d) tensors of sizes ``n1, ..., nN``: N views of shape
    ``(n1, ..., nN)`` (``indexing="ij"``, the default) or ``(n2, n1, n3, ...)`` (``"xy"``: the first two
    swapped, as numpy's default), each varying along its own tensor's dimension.

    ``meshgrid(a, b)`` and ``meshgrid([a, b])`` both work; every tensor must have the same dtype and
    device. The results are expanded views (they share memory with the inputs).
    """
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if not tensors:
        raise RuntimeError("meshgrid expects a non-empty TensorList")
    indexing = "ij" if indexing is None else indexing
    if indexing not in ("ij", "xy"):
        raise RuntimeError(f'flambeau.meshgrid: indexing must be one of "xy" or "ij", but received: {indexing}')
    for i, t in enumerate(tensors):
        check_tensor(t, f"tensors[{i}]", "meshgrid")
        if t.ndim > 1:
            raise RuntimeError(f"flambeau.meshgrid: Expected 0D or 1D tensor in the tensor list but got: {t!r}")
    if any(t.dtype is not tensors[0].dtype for t in tensors):
        raise RuntimeError("meshgrid expects all tensors to have the same dtype")
    common_device(*tensors)
    swap = indexing == "xy" and len(tensors) >= 2
    order = list(tensors)
    if swap:  # "xy" is "ij" on the first two inputs swapped, its first two results swapped back
        order[0], order[1] = order[1], order[0]
    sizes = [t.numel() for t in order]
    grids = []
    for d, t in enumerate(order):
        view = [1] * len(order)
        view[d] = -1
        grids.append(t.reshape(view).expand(sizes))
    if swap:
        grids[0], grids[1] = grids[1], grids[0]
    return tuple(grids)


MESHGRID.samples(cases(lambda mk, mki: SampleInput(mk((3,)), mk((2,))),
                       lambda mk, mki: SampleInput(mk((3,)), mk((2,)), mk(()), indexing="xy").named("xy"),
                       lambda mk, mki: SampleInput(mk((4,)), indexing="ij").named("one")), dtypes=FLOAT_INT)


def _atleast(nd: int, name: str, tensors: tuple):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return tuple(_atleast(nd, name, (t,)) for t in tensors[0])
    if len(tensors) != 1:
        return tuple(_atleast(nd, name, (t,)) for t in tensors)
    x = tensors[0]
    if not isinstance(x, Tensor):
        raise TypeError(f"{name}() received an invalid combination of arguments - got ({type(x).__name__}), but "
                        "expected one of: (Tensor input) or (tuple of Tensors tensors)")
    if x.ndim >= nd:
        return x
    if nd == 3 and x.ndim == 1:
        return x.reshape(1, -1, 1)
    if nd == 3 and x.ndim == 2:
        return x.unsqueeze(-1)
    return x.reshape((1,) * (nd - x.ndim) + tuple(x.shape))


ATLEAST_1D = declare("atleast_1d(Tensor self) -> Tensor", composite=True, method=False, category="shape")
ATLEAST_2D = declare("atleast_2d(Tensor self) -> Tensor", composite=True, method=False, category="shape")
ATLEAST_3D = declare("atleast_3d(Tensor self) -> Tensor", composite=True, method=False, category="shape")


@ATLEAST_1D.front
def atleast_1d(*tensors):
    """``input`` with at least 1 dimension (a 0-d tensor becomes ``(1,)``), as a view; given several
    tensors (or one list or tuple of them), a tuple of each."""
    return _atleast(1, "atleast_1d", tensors)


@ATLEAST_2D.front
def atleast_2d(*tensors):
    """``input`` with at least 2 dimensions (``()`` -> ``(1, 1)``, ``(n,)`` -> ``(1, n)``), as a view;
    given several tensors (or one list or tuple of them), a tuple of each."""
    return _atleast(2, "atleast_2d", tensors)


@ATLEAST_3D.front
def atleast_3d(*tensors):
    """``input`` with at least 3 dimensions (``()`` -> ``(1, 1, 1)``, ``(n,)`` -> ``(1, n, 1)``,
    ``(m, n)`` -> ``(m, n, 1)``), as a view; given several tensors (or one list or tuple of them), a
    tuple of each."""
    return _atleast(3, "atleast_3d", tensors)


for _op in (ATLEAST_1D, ATLEAST_2D, ATLEAST_3D):
    _op.samples(cases(lambda mk, mki: SampleInput(mk(())).named("0d"),
                      lambda mk, mki: SampleInput(mk((3,))).named("1d"),
                      lambda mk, mki: SampleInput(mk((2, 3))).named("2d"),
                      lambda mk, mki: SampleInput(mk((2, 1, 2, 1))).named("4d"),
                      lambda mk, mki: SampleInput([mk(()), mk((2,))]).named("list")), dtypes=FLOAT)
