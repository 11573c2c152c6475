"""nn.utils.parametrize (``flambeau/nn/utils/parametrize.py``) against torch: registration, names, state_dict
keys, gradients, caching, removal and errors."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.utils.parametrize as P

torch = pytest.importorskip("torch")
TP = torch.nn.utils.parametrize

RNG = np.random.default_rng(8)


def symmetric(lib):
    class Symmetric(lib.nn.Module):
        def forward(self, x):
            return x.triu() + x.triu(1).t()

        def right_inverse(self, a):
            return a.triu()

    return Symmetric()


def scale(lib, factor):
    class Scale(lib.nn.Module):
        def forward(self, x):
            return x * factor

        def right_inverse(self, y):
            return y / factor

    return Scale()


def rank_one(lib):
    class RankOne(lib.nn.Module):
        def forward(self, x, y):
            return x.unsqueeze(-1) @ y.unsqueeze(-2)

        def right_inverse(self, z):
            return z[:, 0].clone(), z[0, :].clone() / z[0, 0]

    return RankOne()


def pair(weight):
    """A flambeau and a torch Linear(4, 4) with the same float64 weight and bias."""
    ours, theirs = nn.Linear(4, 4, dtype=fl.float64), torch.nn.Linear(4, 4, dtype=torch.float64)
    b = RNG.standard_normal(4)
    with torch.no_grad():
        theirs.weight.copy_(torch.from_numpy(weight))
        theirs.bias.copy_(torch.from_numpy(b))
    ours.load_state_dict({"weight": fl.from_numpy(weight.copy()), "bias": fl.from_numpy(b)})
    return ours, theirs


def same_state(ours, theirs):
    sd, tsd = ours.state_dict(), theirs.state_dict()
    assert list(sd) == list(tsd)
    for k in sd:
        np.testing.assert_allclose(sd[k].numpy(), tsd[k].numpy(), rtol=1e-13, atol=1e-14, err_msg=k)


def test_register_names_values_gradients_like_torch():
    ours, theirs = pair(RNG.standard_normal((4, 4)))
    P.register_parametrization(ours, "weight", symmetric(fl))
    TP.register_parametrization(theirs, "weight", symmetric(torch))
    assert type(ours).__name__ == "ParametrizedLinear" and isinstance(ours, nn.Linear)
    assert P.type_before_parametrizations(ours) is nn.Linear
    assert P.is_parametrized(ours) and P.is_parametrized(ours, "weight") and not P.is_parametrized(ours, "bias")
    assert repr(ours) == repr(theirs).replace("torch.float64", "flambeau.float64")
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()] == \
        ["bias", "parametrizations.weight.original"]
    same_state(ours, theirs)
    w = ours.weight.detach().numpy()
    np.testing.assert_array_equal(w, w.T)
    a = RNG.standard_normal((3, 4))
    ours(fl.from_numpy(a)).pow(2).sum().backward()
    theirs(torch.from_numpy(a)).pow(2).sum().backward()
    orig, torig = ours.parametrizations.weight.original, theirs.parametrizations.weight.original
    np.testing.assert_allclose(orig.grad.numpy(), torig.grad.numpy(), rtol=1e-12)
    # an optimizer on the parameters trains the original
    opt = fl.optim.SGD(ours.parameters(), lr=0.1)
    before = orig.detach().numpy().copy()
    opt.step()
    assert not np.allclose(orig.detach().numpy(), before)
    np.testing.assert_array_equal(ours.weight.detach().numpy(), ours.weight.detach().numpy().T)


def test_assignment_uses_right_inverse_and_chained_parametrizations():
    ours, theirs = pair(RNG.standard_normal((4, 4)))
    for lib, m in ((fl, ours), (torch, theirs)):
        lib_p = P if lib is fl else TP
        lib_p.register_parametrization(m, "weight", symmetric(lib))
        lib_p.register_parametrization(m, "weight", scale(lib, 3.0))
    same_state(ours, theirs)
    assert len(ours.parametrizations.weight) == 2
    s = RNG.standard_normal((4, 4))
    s = s + s.T
    original = ours.parametrizations.weight.original
    ours.weight = fl.from_numpy(s.copy())
    theirs.weight = torch.from_numpy(s.copy())
    assert ours.parametrizations.weight.original is original  # the same object: optimizers keep it
    np.testing.assert_allclose(ours.weight.detach().numpy(), s, rtol=1e-12)
    same_state(ours, theirs)


def test_several_originals_and_removal():
    w = RNG.uniform(1, 2, (4, 1)) @ RNG.uniform(1, 2, (1, 4))  # rank one: RankOne reproduces it
    ours, theirs = pair(w)
    P.register_parametrization(ours, "weight", rank_one(fl))
    TP.register_parametrization(theirs, "weight", rank_one(torch))
    assert list(ours.state_dict()) == list(theirs.state_dict()) == \
        ["bias", "parametrizations.weight.original0", "parametrizations.weight.original1"]
    same_state(ours, theirs)
    np.testing.assert_allclose(ours.weight.detach().numpy(), w, rtol=1e-12)
    with pytest.raises(ValueError, match="Cannot leave unparametrized"):
        P.remove_parametrizations(ours, "weight", leave_parametrized=False)
    P.remove_parametrizations(ours, "weight")
    TP.remove_parametrizations(theirs, "weight")
    assert type(ours) is nn.Linear and not hasattr(ours, "parametrizations")
    assert isinstance(ours.weight, nn.Parameter) and ours.weight.requires_grad
    same_state(ours, theirs)


@pytest.mark.parametrize("leave", [True, False])
def test_remove_keeps_the_original_object(leave):
    ours, theirs = pair(RNG.standard_normal((4, 4)))
    P.register_parametrization(ours, "weight", scale(fl, 2.0))
    TP.register_parametrization(theirs, "weight", scale(torch, 2.0))
    original = ours.parametrizations.weight.original
    P.remove_parametrizations(ours, "weight", leave_parametrized=leave)
    TP.remove_parametrizations(theirs, "weight", leave_parametrized=leave)
    assert ours.weight is original
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["bias", "weight"]
    same_state(ours, theirs)


def test_buffers_can_be_parametrized():
    ours, theirs = nn.BatchNorm1d(3), torch.nn.BatchNorm1d(3)
    P.register_parametrization(ours, "running_var", scale(fl, 2.0))
    TP.register_parametrization(theirs, "running_var", scale(torch, 2.0))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert "parametrizations.running_var.original" in ours.state_dict()
    np.testing.assert_array_equal(ours.running_var.numpy(), np.ones(3))


def test_cached_computes_once():
    calls = []

    class Count(nn.Module):
        def forward(self, x):
            calls.append(1)
            return x * 2

    m = P.register_parametrization(nn.Linear(3, 3), "weight", Count())
    calls.clear()
    with P.cached():
        a, b = m.weight, m.weight
        with P.cached():
            c = m.weight
    assert a is b is c and len(calls) == 1
    d = m.weight
    assert d is not a and len(calls) == 2


def test_state_dict_round_trip_and_deepcopy():
    src = P.register_parametrization(nn.Linear(4, 4), "weight", symmetric(fl))
    dst = P.register_parametrization(nn.Linear(4, 4), "weight", symmetric(fl))
    dst.load_state_dict(src.state_dict())
    np.testing.assert_array_equal(dst.weight.detach().numpy(), src.weight.detach().numpy())
    twin = copy.deepcopy(src)
    assert type(twin) is type(src) and twin.parametrizations.weight.original is not \
        src.parametrizations.weight.original
    np.testing.assert_array_equal(twin.weight.detach().numpy(), src.weight.detach().numpy())
    with pytest.raises(RuntimeError, match="Serialization of parametrized modules is only supported through "
                                           r"state_dict\(\)"):
        pickle.dumps(src)


def test_transfer_parametrizations_and_params():
    src = P.register_parametrization(nn.Linear(4, 4), "weight", symmetric(fl))
    dst = nn.Linear(4, 4)
    P.transfer_parametrizations_and_params(src, dst)
    assert dst.parametrizations.weight.original is src.parametrizations.weight.original
    np.testing.assert_array_equal(dst.weight.detach().numpy(), src.weight.detach().numpy())


def errors(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the test compares whatever torch raises
        return type(e), str(e)
    return None


def test_errors_match_torch():
    def shape_changer(lib):
        class Drop(lib.nn.Module):
            def forward(self, x):
                return x[:2]

        return Drop()

    def dtype_changer(lib):
        class Cast(lib.nn.Module):
            def forward(self, x):
                return x.float()

        return Cast()

    def not_a_tensor(lib):
        class Bad(lib.nn.Module):
            def forward(self, x):
                return 3

        return Bad()

    def no_inverse(lib):
        class Sq(lib.nn.Module):
            def forward(self, x):
                return x * x

        return Sq()

    calls = [
        lambda lib, p, m: p.register_parametrization(m, "weight", shape_changer(lib)),
        lambda lib, p, m: p.register_parametrization(m, "weight", dtype_changer(lib)),
        lambda lib, p, m: p.register_parametrization(m, "weight", not_a_tensor(lib)),
        lambda lib, p, m: p.remove_parametrizations(m, "weight"),
        lambda lib, p, m: setattr(p.register_parametrization(m, "weight", no_inverse(lib)), "weight",
                                  lib.zeros(4, 4, dtype=lib.float64)),
    ]
    for call in calls:
        ours = errors(lambda call=call: call(fl, P, pair(np.eye(4))[0]))
        theirs = errors(lambda call=call: call(torch, TP, pair(np.eye(4))[1]))
        assert theirs is not None and ours is not None and ours[0] is theirs[0], (ours, theirs)
        assert ours[1].split("\n")[0].replace("flambeau", "torch") == theirs[1].split("\n")[0], (ours, theirs)
    with pytest.raises(ValueError, match="does not have a parameter, a buffer, or a parametrized element with name "
                                         "'nope'"):
        P.register_parametrization(nn.Linear(2, 2), "nope", scale(fl, 2.0))
