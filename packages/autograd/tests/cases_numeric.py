"""Gradcheck cases of the numeric operators (flambeau._ops.numeric), merged into test_derivatives.CASES.

Every one of them is a composite: these cases check that the operators it is written with give the
right gradient at the composite's arguments (sorting, gathering, scattering, the in-place copy)."""

from __future__ import annotations

import numpy as np

import flambeau as fl

RNG = np.random.default_rng(1313)


def t(*shape, scale=1.0, requires_grad=True):
    return fl.tensor(RNG.uniform(-scale, scale, size=shape), dtype=fl.float64, requires_grad=requires_grad)


def distinct(*shape):
    """A leaf with well-separated values (order statistics stay put under finite differences)."""
    values = RNG.permutation(int(np.prod(shape))).reshape(shape) * 0.37 + RNG.uniform(-0.05, 0.05, size=shape)
    return fl.tensor(values, dtype=fl.float64, requires_grad=True)


def with_nan(*shape):
    x = distinct(*shape).detach()
    x[0, 1] = float("nan")
    return x.requires_grad_(True)


def nc(*shape):
    """A non-contiguous (transposed) leaf of the given shape."""
    base = t(*reversed(shape)).detach()
    return base.permute(*reversed(range(len(shape)))).requires_grad_(True)


def _inplace(name, *args, **kwargs):
    """``(a * 1).<name>_(...)``: the in-place twin on a non-leaf copy."""
    return lambda a, *others: getattr(a * 1, name)(*others, *args, **kwargs)


_IDX = fl.tensor([0, 3, 0, 1])
_COORDS = fl.tensor([0.0, 0.5, 1.7, 2.0, 3.1], dtype=fl.float64)
_X = fl.tensor([0.0, 0.4, 1.0, 1.1], dtype=fl.float64)

CASES = {
    "addr": (lambda a, u, v: fl.addr(a, u, v, beta=0.5, alpha=2.0), (t(3, 4), t(3), t(4))),
    "addr#broadcast_inplace": (lambda a, b, u, v: (a * 1).addr_(u, v) + b, (t(3, 4), t(4), t(3), t(4))),
    "frexp": (lambda a: fl.frexp(a * 7).mantissa, (t(3, 4),)),
    "ldexp": (lambda a: fl.ldexp(a, fl.tensor([1, -2, 0, 3])), (t(2, 4),)),
    "ldexp#inplace": (lambda a: (a * 1).ldexp_(fl.tensor([2])), (t(3),)),
    "logcumsumexp": (lambda a: fl.logcumsumexp(a, 1), (t(3, 6, scale=3.0),)),
    "logcumsumexp#dim0": (lambda a: a.logcumsumexp(0), (nc(5, 2),)),
    "nanmedian": (lambda a: fl.nanmedian(a), (with_nan(3, 4),)),
    "nanmedian#dim": (lambda a: fl.nanmedian(a, 1, keepdim=True).values, (with_nan(3, 4),)),
    "quantile": (lambda a: fl.quantile(a, fl.tensor([0.2, 0.5, 0.9], dtype=fl.float64), 1), (distinct(3, 5),)),
    "quantile#all_midpoint": (lambda a: fl.quantile(a, 0.3, interpolation="midpoint"), (distinct(2, 5),)),
    "nanquantile": (lambda a: fl.nanquantile(a, 0.4, 1, keepdim=True), (with_nan(3, 5),)),
    "take_along_dim": (lambda a: fl.take_along_dim(a, fl.tensor([[0, 2], [1, 1], [2, 0]]), 1), (t(3, 3),)),
    "take_along_dim#flat": (lambda a: a.take_along_dim(fl.tensor([5, 0, 5])), (t(2, 3),)),
    "diagflat": (lambda a: fl.diagflat(a, 1), (t(2, 2),)),
    "dist": (lambda a, b: fl.dist(a, b, 3.0), (t(3, 2), t(2))),
    "trapezoid": (lambda y: fl.trapezoid(y, dx=0.5), (t(3, 5),)),
    "trapezoid#x": (lambda y, x: fl.trapezoid(y, x), (t(2, 4), t(2, 4))),
    "trapezoid#coords": (lambda y: fl.trapz(y, _X, dim=0), (t(4, 2),)),
    "cumulative_trapezoid": (lambda y: fl.cumulative_trapezoid(y, _X), (t(3, 4),)),
    "cumulative_trapezoid#dx": (lambda y: fl.cumulative_trapezoid(y, dx=2.0, dim=0), (t(3, 4),)),
    "gradient": (lambda a: fl.gradient(a), (t(3, 4),)),
    "gradient#edge2_coords": (lambda a: fl.gradient(a, spacing=[_COORDS], dim=1, edge_order=2), (t(2, 5),)),
    "combinations": (lambda a: fl.combinations(a, 2), (t(4),)),
    "combinations#replacement": (lambda a: fl.combinations(a, 3, with_replacement=True), (t(3),)),
    "select_scatter": (lambda a, s: fl.select_scatter(a, s, 1, 0), (t(3, 4), t(3))),
    "slice_scatter": (lambda a, s: fl.slice_scatter(a, s, 1, 0, None, 2), (nc(3, 4), t(3, 2))),
    "diagonal_scatter": (lambda a, s: fl.diagonal_scatter(a, s, -1), (t(4, 3), t(3))),
    "as_strided_scatter": (lambda a, s: fl.as_strided_scatter(a, s, (2, 2), (1, 3), 1), (t(3, 3), t(2, 2))),
    # reduce='prod' differentiates through scatter_reduce(reduce='prod'), which has no derivative yet
    "index_reduce": (lambda a, s: fl.index_reduce(a, 0, _IDX, s, "amin"), (distinct(4, 2), distinct(4, 2))),
    "index_reduce#mean": (lambda a, s: fl.index_reduce(a, 0, _IDX, s, "mean", include_self=False), (t(4, 2), t(4, 2))),
    "index_reduce#amax_inplace": (lambda a, s: (a * 1).index_reduce_(0, _IDX, s, "amax"), (distinct(4, 2),
                                                                                        distinct(4, 2))),
    "segment_reduce": (lambda d: fl.segment_reduce(d, "mean", lengths=fl.tensor([2, 1, 2])), (t(5, 2),)),
    "segment_reduce#sum_empty": (lambda d: fl.segment_reduce(d, "sum", lengths=fl.tensor([2, 0, 3]), initial=0.5),
                                 (t(5, 2),)),
    "segment_reduce#max_initial": (lambda d: fl.segment_reduce(d, "max", offsets=fl.tensor([0, 3, 5]), initial=-9.0),
                                   (distinct(5, 2),)),
    "ravel": (lambda a: fl.ravel(a), (nc(2, 3),)),
    "fill": (lambda a, v: fl.fill(a, v) * a, (t(2, 3), t())),
    "unsafe_chunk": (lambda a: fl.unsafe_chunk(a, 2, 1), (t(2, 4),)),
    "unsafe_split": (lambda a: a.unsafe_split(2, 0), (t(3, 2),)),
    "unsafe_split_with_sizes": (lambda a: fl.unsafe_split_with_sizes(a, [1, 2], 1), (t(2, 3),)),
    "constant_pad_nd": (lambda a: fl.constant_pad_nd(a, (1, -1, 2, 0), 0.5), (t(2, 3),)),
    "pdist": (lambda a: fl.pdist(a), (t(4, 3),)),
    "pdist#p1": (lambda a: fl.pdist(a, 1.5), (t(3, 2),)),
    "pairwise_distance": (lambda a, b: fl.pairwise_distance(a, b), (t(3, 4), t(4))),
    "cosine_similarity": (lambda a, b: fl.cosine_similarity(a, b, 1), (t(3, 4), t(3, 4))),
    "bilinear": (lambda a, b, w, c: fl.bilinear(a, b, w, c), (t(3, 2), t(3, 4), t(2, 2, 4), t(2))),
    "nuclear_norm": (lambda a: fl.nuclear_norm(a), (t(3, 2),)),
    "frobenius_norm": (lambda a: fl.frobenius_norm(a, (0, 2)), (t(2, 3, 2),)),
    "sum_to_size": (lambda a: a.sum_to_size(1, 3), (t(2, 4, 3),)),
    "cumsum_": (_inplace("cumsum_", 1), (t(2, 3),)),
    "cumprod_": (_inplace("cumprod_", 0), (t(3, 2),)),
    "addmm_": (_inplace("addmm_", beta=0.5, alpha=2.0), (t(2, 3), t(2, 4), t(4, 3))),
    "addbmm_": (_inplace("addbmm_"), (t(2, 3), t(2, 2, 4), t(2, 4, 3))),
    "baddbmm_": (_inplace("baddbmm_", alpha=0.5), (t(2, 2, 3), t(2, 2, 4), t(2, 4, 3))),
    "addmv_": (_inplace("addmv_"), (t(2), t(2, 3), t(3))),
    "renorm_": (_inplace("renorm_", 2, 0, 0.5), (t(3, 4),)),
    "conj_physical_": (_inplace("conj_physical_"), (t(3),)),
    "fill_diagonal_": (_inplace("fill_diagonal_", 0.25, True), (t(5, 2),)),
}
