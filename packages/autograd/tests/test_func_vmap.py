"""flambeau.func.vmap (flambeau/func/_vmap.py, _batch_rules.py) against torch.func.vmap.

Every case runs the same function on flambeau and torch tensors and compares the results; a case
whose operator has a batching rule must not fall back to the per-example loop (that is what the
rule is for), which the fixture checks.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import flambeau as fl
from flambeau._ops import get_op  # the operators behind nn.functional.one_hot / pad
from flambeau.func import BatchedTensor, VmapFallbackWarning, grad, vmap, vmap_fallbacks

torch = pytest.importorskip("torch")
F = torch.nn.functional

RNG = np.random.default_rng(0)


def arr(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def idx(high, *shape):
    return RNG.integers(0, high, size=shape)


def to_fl(a):
    if isinstance(a, np.ndarray):
        return fl.tensor(a)
    if isinstance(a, (list, tuple)):
        return type(a)(to_fl(x) for x in a)
    return a


def to_torch(a):
    if isinstance(a, np.ndarray):
        return torch.from_numpy(a.copy())
    if isinstance(a, (list, tuple)):
        return type(a)(to_torch(x) for x in a)
    return a


def assert_same(got, expected, atol=1e-6):
    if isinstance(expected, torch.Tensor):
        assert isinstance(got, fl.Tensor) and not isinstance(got, BatchedTensor), type(got)
        assert tuple(got.shape) == tuple(expected.shape), (tuple(got.shape), tuple(expected.shape))
        assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1], (got.dtype, expected.dtype)
        np.testing.assert_allclose(got.numpy().astype(np.float64), expected.numpy().astype(np.float64), atol=atol,
                                   rtol=1e-6)
    else:
        assert len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_same(g, e, atol)


@pytest.fixture(autouse=True)
def no_fallback_unless_asked(request):
    vmap_fallbacks(reset=True)
    yield
    if "fallback" not in request.node.name:
        assert vmap_fallbacks(reset=True) == {}, "an operator with a batching rule fell back to the loop"


def run(fn_fl, fn_torch, args, in_dims=0, out_dims=0, atol=1e-6):
    got = vmap(fn_fl, in_dims, out_dims)(*to_fl(args))
    expected = torch.vmap(fn_torch, in_dims, out_dims)(*to_torch(args))
    assert_same(got, expected, atol)


# --- operators reached through Tensor methods and operators (the same code runs on both libraries) ---------
METHOD_CASES = {
    # elementwise, with broadcasting against unbatched tensors
    "add_unbatched": (lambda x, y: x + y, [arr(5, 3), arr(3)], (0, None)),
    "add_both": (lambda x, y: x + y, [arr(5, 2, 3), arr(5, 3)], 0),
    "radd_scalar": (lambda x: 2.0 - x * 3, [arr(5, 3)], 0),
    "div_rank_mismatch": (lambda x, y: x / (y.abs() + 1), [arr(5, 3), arr(4, 3)], (0, None)),
    "pow_rpow": (lambda x: x.abs() ** 1.5 + 2 ** x, [arr(5, 3)], 0),
    "unary_chain": (lambda x: x.sin().exp().tanh().sigmoid().neg().abs(), [arr(4, 2, 3)], 0),
    "clamp": (lambda x: x.clamp(min=-0.5, max=0.5), [arr(5, 3)], 0),
    "compare_where": (lambda x, y: x.where(x > y, y), [arr(5, 3), arr(5, 3)], 0),
    "masked_fill": (lambda x: x.masked_fill(x > 0, 0.0), [arr(5, 3)], 0),
    "lerp_addcmul": (lambda x, y, z: x.lerp(y, 0.3).addcmul(y, z, value=0.5), [arr(5, 3), arr(3), arr(5, 1)],
                     (0, None, 0)),
    "maximum_atan2": (lambda x, y: x.maximum(y) + x.atan2(y), [arr(5, 3), arr(3)], (0, None)),
    "logical": (lambda x, y: ((x > 0) & (y < 0)) | (x > 1), [arr(5, 3), arr(5, 3)], 0),
    "to_dtype": (lambda x: x.float().double() * 2, [arr(5, 3)], 0),
    "zero_dim_example": (lambda x, y: x * y + x.exp(), [arr(5), arr(3)], (0, None)),
    "in_dim_1": (lambda x: x.cos() * 2, [arr(3, 6)], 1),
    "in_dim_negative": (lambda x: x.sum(0), [arr(3, 4, 6)], -1),
    # reductions and scans
    "sum_all": (lambda x: x.sum(), [arr(5, 3, 2)], 0),
    "sum_dims": (lambda x: x.sum((0, -1), keepdim=True), [arr(5, 3, 4, 2)], 0),
    "mean_var_std": (lambda x: x.mean(1) + x.var(0).sum() + x.std(1, correction=0), [arr(5, 3, 4)], 0),
    "amax_amin": (lambda x: x.amax(0) - x.amin(), [arr(5, 3, 4)], 0),
    "max_dim": (lambda x: x.max(1), [arr(5, 3, 4)], 0),
    "min_keepdim": (lambda x: x.min(0, keepdim=True), [arr(5, 3, 4)], 0),
    "max_all": (lambda x: x.max() + x.min(), [arr(5, 3, 4)], 0),
    "argmax": (lambda x: x.argmax(), [arr(5, 3, 4)], 0),
    "argmin_dim": (lambda x: x.argmin(1, keepdim=True), [arr(5, 3, 4)], 0),
    "prod_median": (lambda x: x.prod(1) + x.median(), [arr(5, 3, 4)], 0),
    "logsumexp_norm": (lambda x: x.logsumexp(1) + x.norm() + x.norm(dim=0).sum(), [arr(5, 3, 4)], 0),
    "all_any": (lambda x: (x > 0).all(1) | (x > 1).any(), [arr(5, 3, 4)], 0),
    "cumsum_cumprod": (lambda x: x.cumsum(0) + x.cumprod(-1), [arr(5, 3, 4)], 0),
    "cummax": (lambda x: x.cummax(1), [arr(5, 3, 4)], 0),
    "softmax": (lambda x: x.softmax(-1) + x.log_softmax(0), [arr(5, 3, 4)], 0),
    "scalar_reductions": (lambda x: x.sum() + x.softmax(0) + x.cumsum(0), [arr(5)], 0),
    "scalar_max": (lambda x: (x.max(), x.argmax(), x.median(), x.max(0), x.amax(), x.var(0)), [arr(5)], 0),
    "sort_topk": (lambda x: (x.sort(1)[0], x.argsort(0, descending=True), x.topk(2, 1)[0]), [arr(5, 3, 4)], 0),
    "kthvalue": (lambda x: x.kthvalue(2, 1), [arr(5, 3, 4)], 0),
    # shape operators
    "view_reshape": (lambda x: x.view(-1) + x.reshape(4, 3).reshape(-1), [arr(5, 3, 4)], 0),
    "view_in_dim_1": (lambda x: x.view(2, 2), [arr(4, 5)], 1),
    "permute_transpose": (lambda x: x.permute(2, 0, 1) + x.transpose(0, 2).transpose(1, 2), [arr(5, 3, 4, 2)], 0),
    "t_T_mT": (lambda x: x.t() + x.T + x.mT, [arr(5, 3, 3)], 0),
    "unsqueeze_squeeze": (lambda x: x.unsqueeze(0).unsqueeze(-1).squeeze(), [arr(5, 3, 1, 4)], 0),
    "squeeze_dim": (lambda x: x.squeeze(1), [arr(5, 3, 1, 4)], 0),
    "expand": (lambda x: x.expand(2, 3, 4), [arr(5, 3, 1)], 0),
    "expand_as": (lambda x, y: x.expand_as(y) + y, [arr(5, 1, 4), arr(3, 4)], (0, None)),
    "flatten_unflatten": (lambda x: x.flatten(1).unflatten(1, (2, 2)), [arr(5, 3, 2, 2)], 0),
    "flatten_all": (lambda x: x.flatten(), [arr(5, 3, 2)], 0),
    "movedim_narrow_select": (lambda x: x.movedim(0, 2).narrow(0, 1, 2).select(1, 1), [arr(5, 3, 4, 2)], 0),
    "unbind_split_chunk": (lambda x: (*x.unbind(1), *x.split(1, 0), *x.chunk(2, 1)), [arr(5, 2, 4)], 0),
    "flip_roll_rot90": (lambda x: x.flip(0) + x.roll(1, 1) + x.roll(2) + x.rot90(1, (0, 1)), [arr(5, 3, 3)], 0),
    "keyword_dims": (lambda x: x.flip(dims=[0]) + x.permute(dims=(1, 0)) + x.sum(axis=0, keepdims=True), [arr(5, 3, 3)],
                     0),
    "tril_triu_diag": (lambda x: x.tril() + x.triu(1) + x.diagonal().sum() + x.diag().sum() + x.trace(),
                       [arr(5, 3, 3)], 0),
    "diag_embed": (lambda x: x.diag_embed(), [arr(5, 3)], 0),
    "repeat_tile": (lambda x: (x.repeat(2, 1, 2), x.tile(2), x.repeat_interleave(2, 0), x.repeat_interleave(2)),
                    [arr(5, 2, 3)], 0),
    "unfold": (lambda x: x.unfold(1, 2, 1), [arr(5, 3, 4)], 0),
    "broadcast_to": (lambda x: x.broadcast_to((2, 3, 4)), [arr(5, 3, 4)], 0),
    # indexing
    "index_basic": (lambda x: x[0] + x[:, 1].sum() + x[..., None][1, :, 0], [arr(5, 3, 4)], 0),
    "index_slices_none": (lambda x: x[None, 1:, ::2], [arr(5, 3, 4)], 0),
    "index_unbatched_array": (lambda x, i: x[i], [arr(5, 6, 2), idx(6, 4)], (0, None)),
    "index_array_second": (lambda x, i: x[:, i], [arr(5, 3, 6), idx(6, 4)], (0, None)),
    "index_arrays_apart": (lambda x, i, j: x[i, :, j], [arr(5, 6, 3, 7), idx(6, 4), idx(7, 4)], (0, None, None)),
    "index_mask_unbatched": (lambda x, m: x[m], [arr(5, 6), np.array([True, False, True, True, False, True])],
                             (0, None)),
    "index_batched_array": (lambda x, i: x[i], [arr(5, 6, 2), idx(6, 5, 3)], 0),
    "index_batched_array_second": (lambda x, i: x[:, i], [arr(5, 2, 6), idx(6, 5, 3)], 0),
    "index_batched_scalar": (lambda x, i: x[i], [arr(5, 6, 2), idx(6, 5)], 0),
    "gather": (lambda x, i: x.gather(1, i), [arr(5, 3, 4), idx(4, 5, 3, 2)], 0),
    "gather_unbatched_index": (lambda x, i: x.gather(0, i), [arr(5, 3, 4), idx(3, 2, 4)], (0, None)),
    "scatter_add": (lambda x, i, s: x.scatter_add(1, i, s), [arr(5, 3, 4), idx(4, 5, 3, 2), arr(5, 3, 2)], 0),
    "index_select": (lambda x, i: x.index_select(1, i), [arr(5, 3, 4), idx(4, 3)], (0, None)),
    "index_select_batched": (lambda x, i: x.index_select(0, i), [arr(5, 6, 4), idx(6, 5, 3)], 0),
    "take": (lambda x, i: x.take(i), [arr(5, 3, 4), idx(12, 5, 2)], 0),
    # matrix products
    "matmul_unbatched_right": (lambda x, w: x @ w, [arr(5, 3), arr(3, 2)], (0, None)),
    "matmul_unbatched_left": (lambda w, x: w @ x, [arr(2, 3), arr(5, 3, 4)], (None, 0)),
    "matmul_both": (lambda x, y: x @ y, [arr(5, 2, 3), arr(5, 3, 4)], 0),
    "matmul_vectors": (lambda x, y: (x @ y, x.matmul(y)), [arr(5, 3), arr(5, 3)], 0),
    "matmul_broadcast_batch": (lambda x, y: x @ y, [arr(5, 2, 2, 3), arr(3, 4)], (0, None)),
    "matrix_vector": (lambda m, v: (m @ v, v @ m.mT, m.mv(v)), [arr(5, 2, 3), arr(3)], (0, None)),
    "mm_bmm": (lambda a, b, c: (a.mm(b), c.bmm(c.mT)), [arr(5, 2, 3), arr(3, 4), arr(5, 2, 3, 4)], (0, None, 0)),
    "dot_outer": (lambda x, y: (x.dot(y), x.outer(y)), [arr(5, 3), arr(3)], (0, None)),
    "addmm_family": (lambda c, a, b: c.addmm(a, b, beta=0.5, alpha=2.0), [arr(5, 2, 4), arr(2, 3), arr(5, 3, 4)],
                     (0, None, 0)),
    # composites written by users
    "mlp": (lambda x, w1, w2: ((x @ w1).relu() @ w2).log_softmax(-1), [arr(5, 4), arr(4, 8), arr(8, 3)],
            (0, None, None)),
    "attention": (lambda q, k, v: ((q @ k.mT) / 2.0).softmax(-1) @ v, [arr(5, 4, 8), arr(5, 6, 8), arr(6, 8)],
                  (0, 0, None)),
}


@pytest.mark.parametrize("case", sorted(METHOD_CASES))
def test_method_operators_match_torch(case):
    fn, args, in_dims = METHOD_CASES[case]
    run(fn, fn, args, in_dims)


FLOAT32_CASES = ["add_unbatched", "sum_dims", "softmax", "matmul_both", "index_batched_array", "mlp", "attention",
                 "cumsum_cumprod", "gather", "zero_dim_example"]


@pytest.mark.parametrize("case", FLOAT32_CASES)
def test_float32_matches_torch(case):
    fn, args, in_dims = METHOD_CASES[case]
    args = [a.astype(np.float32) if a.dtype == np.float64 else a for a in args]
    run(fn, fn, args, in_dims, atol=1e-5)


@pytest.mark.parametrize("case", ["add_unbatched", "max_dim", "matmul_both", "index_batched_array", "softmax"])
def test_nested_vmap_matches_torch(case):
    fn, args, in_dims = METHOD_CASES[case]
    args = [a if d is None else np.stack([a, a[::-1] if a.dtype.kind == "i" else a[::-1] * 2]) for a, d in
            zip(args, in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args))]
    outer = tuple(None if d is None else 0 for d in (in_dims if isinstance(in_dims, tuple) else (0,) * len(args)))
    inner = in_dims
    got = vmap(vmap(fn, inner), outer)(*to_fl(args))
    expected = torch.vmap(torch.vmap(fn, inner), outer)(*to_torch(args))
    assert_same(got, expected)


# --- operators of the table called directly as the mapped function ---------------------------------------------
FUNCTION_CASES = {  # (flambeau operator, torch function, arguments, in_dims); other arguments pass with None
    "cat": (fl.cat, torch.cat, [[arr(5, 2, 3), arr(5, 1, 3)]], 0),
    "cat_unbatched": (fl.cat, torch.cat, [[arr(5, 2, 3), arr(2, 4)], 1], ([0, None], None)),
    "stack": (fl.stack, torch.stack, [[arr(5, 2, 3), arr(5, 2, 3)], -1], (0, None)),
    "where": (fl.where, torch.where, [arr(5, 3) > 0, arr(5, 3), arr(3)], (0, 0, None)),
    "einsum": (fl.einsum, torch.einsum, ["ij,jk->ik", arr(5, 2, 3), arr(3, 4)], (None, 0, None)),
    "einsum_implicit": (fl.einsum, torch.einsum, ["ij,jk", arr(5, 2, 3), arr(5, 3, 4)], (None, 0, 0)),
    "conv2d": (fl.conv2d, F.conv2d, [arr(5, 2, 3, 6, 6), arr(4, 3, 3, 3), arr(4)], (0, None, None)),
    "conv2d_single_image": (fl.conv2d, F.conv2d, [arr(5, 3, 6, 6), arr(4, 3, 3, 3)], (0, None)),
    "conv2d_batched_weight": (fl.conv2d, F.conv2d, [arr(2, 3, 6, 6), arr(5, 4, 3, 3, 3), arr(5, 4)], (None, 0, 0)),
    "conv1d_both": (fl.conv1d, F.conv1d, [arr(5, 2, 3, 7), arr(5, 4, 3, 2)], 0),
    "max_pool2d": (fl.max_pool2d, F.max_pool2d, [arr(5, 2, 3, 6, 6), 2], (0, None)),
    "avg_pool1d": (fl.avg_pool1d, F.avg_pool1d, [arr(5, 3, 8), 2], (0, None)),
    "layer_norm": (fl.layer_norm, F.layer_norm, [arr(5, 3, 4), [4], arr(4)], (0, None, None)),
    "layer_norm_batched_weight": (fl.layer_norm, F.layer_norm, [arr(5, 3, 4), [4], arr(5, 4)], (0, None, 0)),
    "batch_norm_training": (fl.batch_norm, F.batch_norm, [arr(5, 4, 3, 2), None, None, arr(3), arr(3), True],
                            (0, None, None, None, None, None)),
    "batch_norm_eval": (fl.batch_norm, F.batch_norm, [arr(5, 4, 3), arr(3), np.abs(arr(3)) + 0.5],
                        (0, None, None)),
    "group_norm": (fl.group_norm, F.group_norm, [arr(5, 4, 6, 3), 2, arr(6)], (0, None, None)),
    "cross_entropy": (fl.cross_entropy, F.cross_entropy, [arr(5, 4, 3), idx(3, 5, 4)], 0),
    "cross_entropy_weight_ignore": (fl.cross_entropy, F.cross_entropy, [arr(5, 6, 3), idx(3, 5, 6), np.abs(arr(3))],
                                    (0, 0, None), {"ignore_index": 1}),
    "cross_entropy_single": (fl.cross_entropy, F.cross_entropy, [arr(5, 3), idx(3, 5)], 0, {"reduction": "sum"}),
    "cross_entropy_single_mean_weight": (fl.cross_entropy, F.cross_entropy, [arr(5, 3), idx(3, 5), np.abs(arr(3))],
                                         (0, 0, None), {}),
    "cross_entropy_smoothing": (fl.cross_entropy, F.cross_entropy, [arr(5, 4, 3), idx(3, 5, 4)], 0,
                                {"label_smoothing": 0.1}),
    "cross_entropy_probabilities": (fl.cross_entropy, F.cross_entropy, [arr(5, 4, 3), np.abs(arr(5, 4, 3))], 0, {}),
    "nll_loss_none": (fl.nll_loss, F.nll_loss, [arr(5, 4, 3), idx(3, 5, 4)], 0, {"reduction": "none"}),
    "mse_loss": (fl.mse_loss, F.mse_loss, [arr(5, 4, 3), arr(4, 3)], (0, None)),
    "bce_logits": (fl.binary_cross_entropy_with_logits, F.binary_cross_entropy_with_logits,
                   [arr(5, 4), np.abs(arr(5, 4)) % 1], 0),
    "embedding": (fl.embedding, F.embedding, [idx(7, 5, 3), arr(7, 4)], (0, None)),
    "embedding_batched_weight": (fl.embedding, F.embedding, [idx(7, 5, 3), arr(5, 7, 4)], 0),
    "one_hot": (get_op("one_hot").fn, F.one_hot, [idx(4, 5, 3), 4], (0, None)),
    "pad": (get_op("pad").fn, F.pad, [arr(5, 3, 4), (1, 2)], (0, None)),
    "leaky_relu": (fl.leaky_relu, F.leaky_relu, [arr(5, 3)], 0),
    "softmax_fn": (fl.softmax, torch.softmax, [arr(5, 3, 4), 1], (0, None)),
    "hstack": (fl.hstack, torch.hstack, [[arr(5, 3), arr(3)]], ([0, None],)),
    "vstack": (fl.vstack, torch.vstack, [[arr(5, 3), arr(3)]], ([0, None],)),
    "sdpa": (fl.scaled_dot_product_attention, F.scaled_dot_product_attention,
             [arr(5, 2, 4, 8), arr(2, 6, 8), arr(5, 2, 6, 8)], (0, None, 0)),
}


@pytest.mark.parametrize("case", sorted(FUNCTION_CASES))
def test_operator_functions_match_torch(case):
    fn, fn_torch, args, in_dims, *kwargs = FUNCTION_CASES[case]
    kwargs = kwargs[0] if kwargs else {}
    got = vmap(fn, in_dims)(*to_fl(args), **kwargs)
    expected = torch.vmap(fn_torch, in_dims)(*to_torch(args), **kwargs)
    assert_same(got, expected, atol=1e-5)


MODULE_LEVEL_CASES = {  # functions reaching operators through module-level fronts (Note [Module-level functions ...])
    "cat": (lambda lib, x, w: lib.cat([x, x * 2]), (0, None)),
    "where": (lambda lib, x, w: lib.where(x > 0, x, lib.zeros(3)), (0, None)),
    "linear": (lambda lib, x, w: lib.nn.functional.linear(x, w), (0, None)),
    "softmax_layer_norm": (lambda lib, x, w: lib.nn.functional.layer_norm(lib.softmax(x, -1), (3,)), (0, None)),
    "unbatched_matmul": (lambda lib, x, w: w @ x, (0, None)),
    "unbatched_index": (lambda lib, i, w: w[i.long()], (0, None)),
    "nested": (lambda lib, x, w: lib.stack([lib.exp(x), lib.add(x, w[0])]), (0, None)),
}


@pytest.mark.parametrize("case", MODULE_LEVEL_CASES)
def test_module_level_functions_see_the_batch(case):
    fn, in_dims = MODULE_LEVEL_CASES[case]
    x, w = (idx(4, 5, 3) if case == "unbatched_index" else arr(5, 3)), arr(4, 3)
    got = vmap(lambda a, b: fn(fl, a, b), in_dims)(*to_fl([x, w]))
    expected = torch.func.vmap(lambda a, b: fn(torch, a, b), in_dims)(*(torch.from_numpy(v) for v in (x, w)))
    assert_same(got, expected, atol=1e-5)
    assert fl.cat is fl._ops.OPS["cat"].bindings[0]
    assert fl.Tensor.__matmul__ is fl._ops.OPS["matmul"].dunders["__matmul__"]


def test_module_level_functions_under_nested_vmap():
    x = arr(4, 5, 3)
    got = vmap(vmap(lambda a: fl.cat([fl.exp(a), fl.sum(a, 0, keepdim=True)])))(fl.tensor(x))
    expected = torch.func.vmap(torch.func.vmap(lambda a: torch.cat([torch.exp(a), torch.sum(a, 0, keepdim=True)])))(
        torch.from_numpy(x))
    assert_same(got, expected, atol=1e-5)


# --- in-place operators ------------------------------------------------------------------------------------------
def test_inplace_on_batched_self_writes_the_inputs():
    x = arr(5, 3)
    xf, xt = fl.tensor(x), torch.from_numpy(x.copy())
    y = arr(3)

    def f(lib):
        def body(a, b):
            a.mul_(2).add_(b)
            a[0] = 7.0
            a.clamp_(max=5.0)
            return a
        return body

    got = vmap(f(fl), (0, None))(xf, fl.tensor(y))
    expected = torch.vmap(f(torch), (0, None))(xt, torch.from_numpy(y))
    assert_same(got, expected)
    assert_same(xf, xt)  # written through to the caller's tensor, as in torch


def test_setitem_with_batched_value():
    x, v = arr(5, 3, 4), arr(5, 4)

    def body(a, b):
        a = a.clone()
        a[1] = b
        a[:, 0] = 0.0
        return a

    run(body, body, [x, v], 0)


def test_inplace_on_unbatched_self_with_batched_other_raises():
    with pytest.raises(RuntimeError, match="vmapped over but `self` not being vmapped"):
        vmap(fl.Tensor.add_, (None, 0))(fl.randn(3), fl.randn(4, 3))


# --- fallback ---------------------------------------------------------------------------------------------------
def test_fallback_runs_per_example_and_is_reported():
    x, y = arr(4, 2, 3), arr(3, 2)
    with pytest.warns(VmapFallbackWarning, match="no batching rule for kron"):
        got = vmap(lambda a: a.kron(fl.tensor(y)))(fl.tensor(x))
    expected = torch.vmap(lambda a: a.kron(torch.from_numpy(y)))(torch.from_numpy(x))
    assert_same(got, expected)
    assert vmap_fallbacks(reset=True) == {"kron": 1}


def test_fallback_warns_once_per_operator():
    x = fl.randn(4, 3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        vmap(lambda a: a.inner(a))(x)
        vmap(lambda a: a.inner(a))(x)
    assert sum(issubclass(w.category, VmapFallbackWarning) for w in caught) <= 1
    assert vmap_fallbacks(reset=True) == {"inner": 2}


def test_fallback_data_dependent_shapes_raise():
    x = fl.tensor([[1.0, 0.0], [1.0, 1.0]])
    with pytest.raises(RuntimeError, match="data-dependent shape"), pytest.warns(VmapFallbackWarning):
        vmap(lambda a: a.nonzero())(x)


# --- randomness --------------------------------------------------------------------------------------------------
def test_randomness_error_default():
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(lambda x: x.bernoulli())(fl.rand(4, 3))
    with pytest.raises(RuntimeError, match="randomness error mode"):
        vmap(fl.dropout)(fl.rand(4, 3))


def test_randomness_same_and_different():
    x = fl.ones(6, 50)
    same = vmap(lambda a: fl.dropout(a, 0.5) if False else a.clone().bernoulli_(0.5), randomness="same")(x)
    assert all(bool((same[i] == same[0]).all()) for i in range(6))
    different = vmap(lambda a: a.clone().bernoulli_(0.5), randomness="different")(x)
    assert not all(bool((different[i] == different[0]).all()) for i in range(6))
    d = vmap(fl.dropout, randomness="same")(x)
    assert all(bool((d[i] == d[0]).all()) for i in range(6))
    with pytest.raises(RuntimeError, match="Only allowed values for randomness"):
        vmap(lambda a: a, randomness="sometimes")


# --- errors, in_dims/out_dims, chunking -------------------------------------------------------------------------
def test_in_dims_out_dims_and_pytrees():
    x, y = arr(3, 4), arr(4, 3)

    def f(d):
        return {"s": d["a"] + d["b"], "t": (d["a"] * 2,)}

    got = vmap(f, in_dims=({"a": 0, "b": 1},), out_dims={"s": 1, "t": (0,)})({"a": fl.tensor(x), "b": fl.tensor(y)})
    expected = torch.vmap(f, in_dims=({"a": 0, "b": 1},), out_dims={"s": 1, "t": (0,)})(
        {"a": torch.from_numpy(x), "b": torch.from_numpy(y)})
    assert_same(got["s"], expected["s"])
    assert_same(got["t"], expected["t"])


def test_unbatched_output_is_expanded_and_out_dims_none():
    out = vmap(lambda x, y: (x * 2, y), in_dims=(0, None), out_dims=(0, None))(fl.ones(4, 2), fl.zeros(3))
    assert tuple(out[0].shape) == (4, 2) and tuple(out[1].shape) == (3,)
    assert tuple(vmap(lambda x: fl.ones(2))(fl.ones(4, 2)).shape) == (4, 2)
    with pytest.raises(ValueError, match="can not return a BatchedTensor when out_dim is None"):
        vmap(lambda x: x, out_dims=None)(fl.ones(4, 2))


@pytest.mark.parametrize("call, message", [
    (lambda: vmap(lambda x: x, in_dims=(0, 0))(fl.ones(3)), "in_dims is not compatible with the structure"),
    (lambda: vmap(lambda x, y: x + y)(fl.ones(3, 2), fl.ones(4, 2)), "same size in the mapped dimension"),
    (lambda: vmap(lambda x: x, in_dims=2)(fl.ones(3, 2)), "expected in_dim to satisfy -2 <= in_dim < 2"),
    (lambda: vmap(lambda x: x, in_dims=None)(fl.ones(3)), "at least one Tensor to vmap over"),
    (lambda: vmap(lambda x: x, in_dims=0)(3.0), "We cannot vmap over non-Tensor arguments"),
    (lambda: vmap(lambda x: 3.0)(fl.ones(3)), "must only return Tensors"),
    (lambda: vmap(lambda x: x)(), "got no inputs"),
    (lambda: vmap(lambda x: x, chunk_size=0), "chunk_size should be None or greater than 0"),
])
def test_errors_as_torch(call, message):
    with pytest.raises((ValueError, RuntimeError), match=message):
        call()


def test_data_dependent_control_flow_raises():
    with pytest.raises(RuntimeError, match="data-dependent control flow"):
        vmap(lambda x: x if x.sum() > 0 else -x)(fl.randn(3, 2))
    with pytest.raises(RuntimeError, match="data-dependent"):
        vmap(lambda x: x.item())(fl.randn(3))


def test_chunk_size_gives_the_same_result():
    x = arr(7, 3)

    def f(a):
        return (a.sin() @ a.cos().unsqueeze(-1)).squeeze(-1), a.sum()

    for chunk in (1, 2, 3, 7, 10):
        assert_same(vmap(f, chunk_size=chunk)(fl.tensor(x)), torch.vmap(f, chunk_size=chunk)(torch.from_numpy(x)))


def test_batched_tensor_reports_one_example():
    def f(x):
        assert isinstance(x, BatchedTensor)
        assert tuple(x.shape) == (3, 2) and x.dim() == 2 and x.numel() == 6 and len(x) == 3
        assert x.size(-1) == 2 and x.dtype is fl.float32
        return x

    vmap(f, in_dims=1)(fl.ones(3, 4, 2))


def test_type_promotion_of_batched_zero_dim_tensors():
    # A float64 scalar per example against a float32 vector: torch keeps float32 (0-dim tensors do not promote).
    run(lambda s, v: s * v, lambda s, v: s * v, [arr(4), arr(3, dtype=np.float32)], (0, None))


# --- composition with grad ---------------------------------------------------------------------------------------
def test_per_example_gradients_match_torch():
    x, y, w = arr(6, 4), arr(6), arr(4)

    def loss(lib):
        def f(w, x, y):
            return ((x @ w).tanh() - y) ** 2
        return f

    got = vmap(grad(loss(fl)), in_dims=(None, 0, 0))(fl.tensor(w), fl.tensor(x), fl.tensor(y))
    expected = torch.vmap(torch.func.grad(loss(torch)), in_dims=(None, 0, 0))(
        torch.from_numpy(w), torch.from_numpy(x), torch.from_numpy(y))
    assert_same(got, expected)


def test_grad_of_vmap_matches_torch():
    x = arr(5, 3)

    def f(a):
        return (a.sin() * a).sum(-1)

    got = grad(lambda a: vmap(f)(a).sum())(fl.tensor(x))
    expected = torch.func.grad(lambda a: torch.vmap(f)(a).sum())(torch.from_numpy(x))
    assert_same(got, expected)
