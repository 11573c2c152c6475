"""nn.utils.prune against torch.nn.utils.prune, and the small nn.utils modules beside it (fusion, memory_format,
stateless): masks, reparametrized modules, state dicts, gradients and errors."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.utils.prune as prune

torch = pytest.importorskip("torch")
import torch.nn.utils.prune as tprune  # noqa: E402 - torch imported by importorskip first


def _pair(kind: str = "conv"):
    torch.manual_seed(0)
    ref = torch.nn.Conv2d(3, 4, 3).double() if kind == "conv" else torch.nn.Linear(5, 4).double()
    ours = nn.Conv2d(3, 4, 3).double() if kind == "conv" else nn.Linear(5, 4).double()
    ours.load_state_dict({k: fl.from_numpy(v.detach().numpy().copy()) for k, v in ref.state_dict().items()})
    return ref, ours


def _same_state(ours, ref):
    mine, theirs = ours.state_dict(), ref.state_dict()
    assert list(mine) == list(theirs)
    for k in theirs:
        np.testing.assert_array_equal(mine[k].numpy(), theirs[k].numpy(), err_msg=k)
    np.testing.assert_array_equal(ours.weight.detach().numpy(), ref.weight.detach().numpy())


@pytest.mark.parametrize("steps", [
    [("l1_unstructured", {"name": "weight", "amount": 0.3})],
    [("l1_unstructured", {"name": "weight", "amount": 7})],
    [("ln_structured", {"name": "weight", "amount": 0.5, "n": 2, "dim": 0})],
    [("ln_structured", {"name": "weight", "amount": 1, "n": 1, "dim": 1})],
    [("ln_structured", {"name": "weight", "amount": 2, "n": float("inf"), "dim": -1})],
    [("identity", {"name": "bias"})],
    # a second pruning of the same parameter prunes only what the first left (a PruningContainer)
    [("l1_unstructured", {"name": "weight", "amount": 0.2}), ("ln_structured", {"name": "weight", "amount": 1,
                                                                                 "n": 2, "dim": 0})],
    [("ln_structured", {"name": "weight", "amount": 1, "n": 2, "dim": 0}), ("l1_unstructured", {"name": "weight",
                                                                                                 "amount": 0.5})],
    [("l1_unstructured", {"name": "weight", "amount": 0.2}), ("l1_unstructured", {"name": "bias", "amount": 2})],
])
def test_pruning_matches_torch(steps):
    ref, ours = _pair()
    for fn, kw in steps:
        getattr(tprune, fn)(ref, **kw)
        out = getattr(prune, fn)(ours, **kw)
        assert out is ours
    _same_state(ours, ref)
    assert prune.is_pruned(ours) and tprune.is_pruned(ref)
    # the pruned entries read as zero and get no gradient; the original keeps its values
    x = np.random.default_rng(0).standard_normal((2, 3, 5, 5))
    ours(fl.from_numpy(x)).sum().backward()
    ref(torch.from_numpy(x)).sum().backward()
    names = {kw["name"] for _, kw in steps}
    for name in names:
        mine, theirs = getattr(ours, name + "_orig").grad, getattr(ref, name + "_orig").grad
        np.testing.assert_allclose(mine.numpy(), theirs.numpy(), rtol=1e-12, atol=1e-12)
    for name in names:
        tprune.remove(ref, name)
        prune.remove(ours, name)
    _same_state(ours, ref)
    assert not prune.is_pruned(ours) and isinstance(ours.weight, nn.Parameter)


def test_importance_scores_and_custom_masks_match_torch():
    ref, ours = _pair("linear")
    scores = np.random.default_rng(1).standard_normal((4, 5))
    tprune.l1_unstructured(ref, "weight", amount=0.4, importance_scores=torch.from_numpy(scores))
    prune.l1_unstructured(ours, "weight", amount=0.4, importance_scores=fl.from_numpy(scores))
    mask = np.random.default_rng(2).random(4) > 0.5
    tprune.custom_from_mask(ref, "bias", torch.from_numpy(mask))
    prune.custom_from_mask(ours, "bias", fl.from_numpy(mask))
    _same_state(ours, ref)
    np.testing.assert_array_equal(ours.bias.detach().numpy(), ref.bias.detach().numpy())
    w = np.random.default_rng(3).standard_normal((4, 5))
    for method in (prune.L1Unstructured(amount=3), prune.LnStructured(amount=1, n=2, dim=0)):
        twin = getattr(tprune, type(method).__name__)(**vars(method))
        np.testing.assert_array_equal(method.prune(fl.from_numpy(w)).numpy(), twin.prune(torch.from_numpy(w)).numpy())


def test_global_unstructured_matches_torch():
    torch.manual_seed(0)
    refs = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Linear(4, 3)).double()
    ours = nn.Sequential(nn.Linear(5, 4), nn.Linear(4, 3)).double()
    ours.load_state_dict({k: fl.from_numpy(v.detach().numpy().copy()) for k, v in refs.state_dict().items()})
    tprune.l1_unstructured(refs[0], "weight", amount=2)  # an existing mask joins the global ranking
    prune.l1_unstructured(ours[0], "weight", amount=2)
    tprune.global_unstructured([(refs[0], "weight"), (refs[1], "weight"), (refs[1], "bias")],
                               pruning_method=tprune.L1Unstructured, amount=0.4)
    prune.global_unstructured([(ours[0], "weight"), (ours[1], "weight"), (ours[1], "bias")],
                              pruning_method=prune.L1Unstructured, amount=0.4)
    for a, b in zip(ours, refs):
        _same_state(a, b)


def test_random_pruning_counts():
    fl.manual_seed(0)
    m = nn.Conv2d(3, 8, 3)
    prune.random_unstructured(m, "weight", amount=0.25)
    assert int((m.weight_mask == 0).sum()) == round(0.25 * m.weight.numel())
    prune.random_structured(m, "weight", amount=3, dim=0)
    channels = m.weight_mask.reshape(8, -1).sum(1)
    assert int((channels == 0).sum()) >= 3 and int((m.weight == 0).sum()) >= round(0.25 * m.weight.numel())


def test_pruning_errors_match_torch():
    for lib, P in ((fl, prune), (torch, tprune)):
        m = (nn if lib is fl else torch.nn).Linear(3, 2)
        with pytest.raises(ValueError, match="should either be a float in the range"):
            P.l1_unstructured(m, "weight", amount=1.5)
        with pytest.raises(TypeError, match="Invalid type for amount"):
            P.l1_unstructured(m, "weight", amount="half")
        with pytest.raises(ValueError, match="should be smaller than the number of parameters to prune=6"):
            P.l1_unstructured(m, "weight", amount=7)
        assert "weight" in dict(m.named_parameters())  # a failed pruning leaves the parameter as it was
        with pytest.raises(ValueError, match="Structured pruning can only be applied to multidimensional tensors"):
            P.ln_structured(m, "bias", amount=1, n=2, dim=0)
        with pytest.raises(ValueError, match="has to be pruned before pruning can be removed"):
            P.remove(m, "weight")
        with pytest.raises(TypeError, match="Only \"unstructured\" PRUNING_TYPE supported"):
            P.global_unstructured([(m, "weight")], pruning_method=P.LnStructured, amount=1, n=2, dim=0)


def test_fusion_matches_torch():
    torch.manual_seed(0)
    for kind in ("conv", "transposed", "linear"):
        if kind == "linear":
            layer, bn = torch.nn.Linear(5, 4).double(), torch.nn.BatchNorm1d(4).double()
            x = torch.randn(3, 5, dtype=torch.float64)
        else:
            conv = torch.nn.Conv2d if kind == "conv" else torch.nn.ConvTranspose2d
            layer, bn = conv(3, 4, 3, bias=kind == "conv").double(), torch.nn.BatchNorm2d(4).double()
            x = torch.randn(2, 3, 6, 6, dtype=torch.float64)
        bn.train()
        bn(layer(x))  # running statistics away from 0 and 1
        layer.eval(), bn.eval()
        with torch.no_grad():
            bn.weight.uniform_(0.5, 2.0)
            bn.bias.uniform_(-1, 1)
        sizes, options = ((5, 4), {}) if kind == "linear" else ((3, 4, 3), {"bias": kind == "conv"})
        ours_layer = getattr(nn, type(layer).__name__)(*sizes, **options).double()
        ours_bn = getattr(nn, type(bn).__name__)(4).double()
        for o, t in ((ours_layer, layer), (ours_bn, bn)):
            o.load_state_dict({k: fl.from_numpy(v.detach().numpy().copy()) for k, v in t.state_dict().items()})
            o.eval()
        if kind == "linear":
            fused = nn.utils.fuse_linear_bn_eval(ours_layer, ours_bn)
            ref = torch.nn.utils.fuse_linear_bn_eval(layer, bn)
        else:
            fused = nn.utils.fuse_conv_bn_eval(ours_layer, ours_bn, transpose=kind == "transposed")
            ref = torch.nn.utils.fuse_conv_bn_eval(layer, bn, transpose=kind == "transposed")
        out = fused(fl.from_numpy(x.numpy()))
        np.testing.assert_allclose(out.detach().numpy(), ref(x).detach().numpy(), rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(out.detach().numpy(), ours_bn(ours_layer(fl.from_numpy(x.numpy()))).detach().numpy(),
                                   rtol=1e-10, atol=1e-12)
        assert isinstance(fused.weight, nn.Parameter) and fused is not ours_layer
    with pytest.raises(AssertionError, match="Fusion only for eval"):
        nn.utils.fuse_conv_bn_eval(nn.Conv2d(1, 1, 1), nn.BatchNorm2d(1))


def test_memory_format_and_stateless_helpers():
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.Sequential(nn.ConvTranspose2d(4, 2, 3)), nn.Linear(2, 2))
    assert nn.utils.convert_conv2d_weight_memory_format(m, fl.channels_last) is m
    assert m[0].weight.stride() == torch.nn.Conv2d(3, 4, 3).weight.contiguous(
        memory_format=torch.channels_last).stride()
    assert m[1][0].weight.is_contiguous(memory_format=fl.channels_last) and m[2].weight.is_contiguous()
    lin = nn.Linear(2, 1)
    params = {"weight": fl.ones(1, 2), "bias": fl.zeros(1)}
    with pytest.warns(FutureWarning, match="flambeau.func.functional_call"):
        out = nn.utils.stateless.functional_call(lin, params, (fl.tensor([[1.0, 2.0]]),))
    assert out.item() == 3.0
    p = nn.Parameter(fl.ones(3))
    p.grad = fl.full((3,), 4.0)
    nn.utils.clip_grads_with_norm_([p], 1.0, fl.tensor(8.0))
    np.testing.assert_allclose(p.grad.numpy(), np.full(3, 4.0 / (8.0 + 1e-6)), rtol=1e-6)
