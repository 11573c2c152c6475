"""Module, Parameter and containers: registration, traversal, state_dict, casts, hooks, repr (vs torch)."""

from __future__ import annotations

import copy
import pickle
import re
from collections import OrderedDict

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
from flambeau.nn import Parameter

torch = pytest.importorskip("torch")
tnn = torch.nn


# --- models built the same way in both libraries -------------------------------------------------
def _make_models(lib, L):
    """A model exercising nesting, sharing, buffers (persistent or not), None entries and containers."""

    class Block(L.Module):
        def __init__(self, n):
            super().__init__()
            self.fc = L.Linear(n, n)
            self.register_buffer("running", lib.zeros(n))
            self.register_buffer("scratch", lib.ones(2), persistent=False)
            self.register_buffer("empty", None)
            self.register_parameter("absent", None)
            self.scale = L.Parameter(lib.ones(1))

        def forward(self, x):
            return self.fc(x) * self.scale

    class Net(L.Module):
        def __init__(self):
            super().__init__()
            self.first = L.Linear(3, 4)
            self.blocks = L.ModuleList([Block(4), Block(4)])
            self.head = L.Sequential(OrderedDict([("act", L.ReLU()), ("out", L.Linear(4, 2, bias=False))]))
            self.shared = self.first  # the same module twice
            self.table = L.ModuleDict({"b": L.Identity(), "a": L.Linear(2, 2)})
            self.plist = L.ParameterList([L.Parameter(lib.zeros(2)), L.Parameter(lib.ones(3))])
            self.pdict = L.ParameterDict({"z": L.Parameter(lib.zeros(1)), "y": L.Parameter(lib.zeros(2))})
            self.nothing = None
            self.tied = self.first.weight  # a parameter registered twice

        def forward(self, x):
            x = self.first(x)
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    return Net()


@pytest.fixture(scope="module")
def models():
    return _make_models(fl, nn), _make_models(torch, tnn)


def _names(it):
    return [n for n, _ in it]


@pytest.mark.parametrize("kwargs", [{}, {"prefix": "m"}, {"recurse": False}, {"remove_duplicate": False}])
def test_named_parameters_and_buffers_like_torch(models, kwargs):
    ours, theirs = models
    assert _names(ours.named_parameters(**kwargs)) == _names(theirs.named_parameters(**kwargs))
    assert _names(ours.named_buffers(**kwargs)) == _names(theirs.named_buffers(**kwargs))


def test_named_modules_children_like_torch(models):
    ours, theirs = models
    assert _names(ours.named_modules()) == _names(theirs.named_modules())
    assert _names(ours.named_modules(prefix="p")) == _names(theirs.named_modules(prefix="p"))
    assert _names(ours.named_modules(remove_duplicate=False)) == _names(theirs.named_modules(remove_duplicate=False))
    assert _names(ours.named_children()) == _names(theirs.named_children())
    assert [type(m).__name__ for m in ours.modules()] == [type(m).__name__ for m in theirs.modules()]
    assert [type(m).__name__ for m in ours.children()] == [type(m).__name__ for m in theirs.children()]
    assert len(list(ours.parameters())) == len(list(theirs.parameters()))
    assert len(list(ours.buffers())) == len(list(theirs.buffers()))


def test_state_dict_keys_and_values(models):
    ours, theirs = models
    sd = ours.state_dict()
    assert isinstance(sd, OrderedDict)
    assert list(sd) == list(theirs.state_dict())
    assert list(ours.state_dict(prefix="x.")) == list(theirs.state_dict(prefix="x."))
    # detached, sharing storage; keep_vars keeps the parameter objects
    w = sd["first.weight"]
    assert not isinstance(w, Parameter) and not w.requires_grad
    assert w.data_ptr() == ours.first.weight.data_ptr()
    assert ours.state_dict(keep_vars=True)["first.weight"] is ours.first.weight
    assert list(sd._metadata) == list(theirs.state_dict()._metadata)


def _as_ours(text: str) -> str:
    """torch's repr as flambeau's: ``torch.float32`` reads ``flambeau.float32``; legacy type names
    (``torch.FloatTensor``) stay, as flambeau spells them like torch (Note [Legacy type names])."""
    return re.sub(r"torch\.(?!(cuda\.)?\w*Tensor\b)", "flambeau.", text)


def test_repr_like_torch(models):
    ours, theirs = models
    assert repr(ours) == _as_ours(repr(theirs))


def test_dir_lists_members(models):
    ours, _ = models
    d = dir(ours)
    for name in ("first", "blocks", "head", "forward", "training", "tied"):
        assert name in d
    assert "0" not in dir(ours.blocks)


# --- registration -------------------------------------------------------------------------------
class _Empty(nn.Module):
    def forward(self, x):
        return x


def test_setattr_registers_and_moves_between_kinds():
    m = _Empty()
    m.a = Parameter(fl.zeros(2))
    assert "a" in m._parameters and m.a is m._parameters["a"]
    m.a = None
    assert m._parameters["a"] is None and m.a is None
    with pytest.raises(TypeError, match="cannot assign 'torch.FloatTensor' as parameter 'a'"):
        m.a = fl.zeros(2)
    m.sub = nn.Linear(1, 1)
    assert m._modules["sub"] is m.sub
    with pytest.raises(TypeError, match="cannot assign 'int' as child module 'sub'"):
        m.sub = 3
    m.register_buffer("b", fl.zeros(1))
    m.b = fl.ones(3)
    assert m._buffers["b"].shape == (3,)
    with pytest.raises(TypeError, match="cannot assign 'int' as buffer 'b'"):
        m.b = 1
    m.plain = 5
    assert m.__dict__["plain"] == 5
    # a Parameter replacing a plain attribute or a buffer
    m.plain = Parameter(fl.zeros(1))
    assert "plain" not in m.__dict__ and "plain" in m._parameters
    m.b = None
    m.b2 = nn.Buffer(fl.zeros(2), persistent=False)
    assert "b2" in m._buffers and "b2" in m._non_persistent_buffers_set and type(m.b2) is fl.Tensor
    assert "b2" not in m.state_dict()
    del m.a, m.sub, m.b, m.plain
    assert "a" not in m._parameters and "sub" not in m._modules and "b" not in m._buffers
    with pytest.raises(AttributeError, match="'_Empty' object has no attribute 'a'"):
        _ = m.a


def test_registration_errors_like_torch():
    m = _Empty()
    t = tnn.Module()
    for fn, tfn, args, targs, exc in [
        (m.register_buffer, t.register_buffer, ("a.b", fl.zeros(1)), ("a.b", torch.zeros(1)), KeyError),
        (m.register_buffer, t.register_buffer, ("", fl.zeros(1)), ("", torch.zeros(1)), KeyError),
        (m.register_buffer, t.register_buffer, ("training", fl.zeros(1)), ("training", torch.zeros(1)), KeyError),
        (m.register_parameter, t.register_parameter, ("a.b", None), ("a.b", None), KeyError),
        (m.register_parameter, t.register_parameter, ("", None), ("", None), KeyError),
        (m.add_module, t.add_module, ("a.b", None), ("a.b", None), KeyError),
        (m.add_module, t.add_module, ("", None), ("", None), KeyError),
        (m.add_module, t.add_module, ("forward", None), ("forward", None), KeyError),
    ]:
        with pytest.raises(exc) as theirs:
            tfn(*targs)
        with pytest.raises(exc) as ours:
            fn(*args)
        assert str(ours.value) == str(theirs.value)
    with pytest.raises(TypeError, match="parameter name should be a string. Got int"):
        m.register_parameter(1, None)
    with pytest.raises(TypeError, match="cannot assign 'torch.FloatTensor' object to parameter 'p'"):
        m.register_parameter("p", fl.zeros(1))
    with pytest.raises(ValueError, match="Cannot assign non-leaf Tensor to parameter 'q'"):
        m.register_parameter("q", _nonleaf_param())
    with pytest.raises(TypeError, match="cannot assign 'int' object to buffer 'x'"):
        m.register_buffer("x", 3)
    with pytest.raises(TypeError, match="int is not a Module subclass"):
        m.add_module("x", 3)


def _nonleaf_param():
    p = Parameter(fl.zeros(1))
    p.grad_fn = (Parameter(fl.zeros(1)) * 2).grad_fn  # simulate a Parameter with history
    return p


def test_assign_before_init():
    class Bad(nn.Module):
        def __init__(self):
            self.w = Parameter(fl.zeros(1))

    with pytest.raises(AttributeError, match=r"cannot assign parameters before Module.__init__\(\) call"):
        Bad()

    class Bad2(nn.Module):
        def __init__(self):
            self.m = nn.Linear(1, 1)

    with pytest.raises(AttributeError, match=r"cannot assign module before Module.__init__\(\) call"):
        Bad2()
    with pytest.raises(TypeError, match="unexpected keyword argument 'foo'"):
        nn.Module(foo=1)


def test_forward_missing():
    with pytest.raises(NotImplementedError, match=r'Module \[Module\] is missing the required "forward" function'):
        nn.Module()(1)


def test_get_submodule_parameter_buffer(models):
    ours, theirs = models
    assert ours.get_submodule("blocks.1.fc") is ours.blocks[1].fc
    assert ours.get_submodule("") is ours
    assert ours.get_parameter("blocks.0.fc.weight") is ours.blocks[0].fc.weight
    assert ours.get_buffer("blocks.0.running") is ours.blocks[0].running
    for target in ("blocks.7", "first.weight.x", "nope"):
        with pytest.raises(AttributeError) as t:
            theirs.get_submodule(target)
        with pytest.raises(AttributeError) as o:
            ours.get_submodule(target)
        assert str(o.value) == str(t.value)
    with pytest.raises(AttributeError, match="`running` is not an nn.Parameter"):
        ours.get_parameter("blocks.0.running")


# --- parameters -----------------------------------------------------------------------------------
def test_parameter_basics():
    p = Parameter(fl.randn(2, 3))
    assert isinstance(p, fl.Tensor) and p.requires_grad and p.is_leaf
    assert repr(p).startswith("Parameter containing:\ntensor(")
    assert not Parameter(fl.randn(2), requires_grad=False).requires_grad
    assert Parameter().shape == (0,)
    with pytest.raises(RuntimeError, match="only Tensors of floating point"):
        Parameter(fl.zeros(2, dtype=fl.int64))
    assert not Parameter(fl.zeros(2, dtype=fl.int64), requires_grad=False).requires_grad
    with pytest.raises(TypeError):
        Parameter([1.0])
    # shares storage with its data
    t = fl.zeros(3)
    p = Parameter(t)
    t.add_(1)
    assert p.tolist() == [1.0, 1.0, 1.0]


def test_parameter_operators_and_autograd():
    a = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    p = Parameter(fl.from_numpy(a.copy()))
    tp = tnn.Parameter(torch.from_numpy(a.copy()))
    ours = ((p * 2 - 1) @ p.t()).exp().sum() + fl.cat([p, p]).mean() + p[1:, ::2].sum() + fl.stack([p, p]).sum()
    theirs = ((tp * 2 - 1) @ tp.t()).exp().sum() + torch.cat([tp, tp]).mean() + tp[1:, ::2].sum() \
        + torch.stack([tp, tp]).sum()
    ours.backward()
    theirs.backward()
    assert type(p * 2) is fl.Tensor
    np.testing.assert_allclose(ours.item(), theirs.item(), rtol=1e-5)
    np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-5)
    with fl.no_grad():
        p.add_(1)
    assert p.is_leaf and isinstance(p, Parameter)


def test_parameter_deepcopy_pickle():
    p = Parameter(fl.randn(3))
    p.grad = fl.ones(3)
    q = copy.deepcopy(p)
    assert type(q) is Parameter and q.requires_grad and q.data_ptr() != p.data_ptr()
    assert q.grad.tolist() == [1.0] * 3
    r = pickle.loads(pickle.dumps(Parameter(fl.randn(2), requires_grad=False)))
    assert type(r) is Parameter and not r.requires_grad


def test_module_deepcopy_and_pickle(models):
    ours, _ = models
    c = copy.deepcopy(ours)
    assert c.shared is c.first and c.tied is c.first.weight
    assert c.first.weight.data_ptr() != ours.first.weight.data_ptr()
    assert list(c.state_dict()) == list(ours.state_dict())
    d = pickle.loads(pickle.dumps(nn.Sequential(nn.Linear(2, 2), nn.ReLU())))
    assert isinstance(d[0].weight, Parameter)


# --- state dict loading ------------------------------------------------------------------------------
def test_load_state_dict_round_trip_and_in_place():
    a, b = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2)), nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    w = b[0].weight
    ptr = w.data_ptr()
    res = b.load_state_dict(a.state_dict())
    assert repr(res) == "<All keys matched successfully>"
    assert res.missing_keys == [] and res.unexpected_keys == []
    assert b[0].weight is w and w.data_ptr() == ptr and w.requires_grad and w.grad_fn is None
    np.testing.assert_array_equal(b[0].weight.numpy(force=True), a[0].weight.numpy(force=True))
    # load_state_dict from torch tensors converted through numpy
    t = tnn.Sequential(tnn.Linear(3, 4), tnn.Linear(4, 2))
    b.load_state_dict({k: fl.from_numpy(v.numpy().copy()) for k, v in t.state_dict().items()})
    np.testing.assert_array_equal(b[1].bias.numpy(force=True), t[1].bias.detach().numpy())


def test_load_state_dict_errors_like_torch():
    ours = nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 2))
    theirs = tnn.Sequential(tnn.Linear(3, 4), tnn.Linear(4, 2))
    sd_o = ours.state_dict()
    sd_t = theirs.state_dict()
    for mutate in ("missing", "unexpected", "shape"):
        o, t = OrderedDict(sd_o), OrderedDict(sd_t)
        if mutate == "missing":
            del o["1.bias"], t["1.bias"]
        elif mutate == "unexpected":
            o["2.weight"], t["2.weight"] = fl.zeros(1), torch.zeros(1)
            o["extra"], t["extra"] = fl.zeros(1), torch.zeros(1)
        else:
            o["0.weight"], t["0.weight"] = fl.zeros(5, 3), torch.zeros(5, 3)
        with pytest.raises(RuntimeError) as et:
            theirs.load_state_dict(t)
        with pytest.raises(RuntimeError) as eo:
            ours.load_state_dict(o)
        assert str(eo.value) == str(et.value).replace("torch.", "flambeau.")
        if mutate != "shape":
            ro, rt = ours.load_state_dict(o, strict=False), theirs.load_state_dict(t, strict=False)
            assert ro.missing_keys == rt.missing_keys and ro.unexpected_keys == rt.unexpected_keys
    assert "size mismatch for 0.weight: copying a param with shape flambeau.Size([5, 3]) from checkpoint, the " \
           "shape in current model is flambeau.Size([4, 3])." in str(eo.value)
    with pytest.raises(TypeError, match="Expected state_dict to be dict-like"):
        ours.load_state_dict([1, 2])


def test_load_state_dict_assign_and_casts():
    m = nn.Linear(2, 2)
    sd = {"weight": fl.ones(2, 2, dtype=fl.float64), "bias": fl.zeros(2)}
    m.load_state_dict(sd)  # copies with a cast into the float32 parameter
    assert m.weight.dtype == fl.float32 and m.weight.tolist() == [[1.0, 1.0], [1.0, 1.0]]
    new_w = fl.full((2, 2), 3.0)
    m.load_state_dict({"weight": new_w, "bias": fl.zeros(2)}, assign=True)
    assert isinstance(m.weight, Parameter) and m.weight.requires_grad and m.weight.data_ptr() == new_w.data_ptr()


def test_extra_state_and_state_dict_hooks():
    class WithExtra(nn.Module):
        def __init__(self):
            super().__init__()
            self.value = 1

        def get_extra_state(self):
            return {"value": self.value}

        def set_extra_state(self, state):
            self.value = state["value"]

    m = nn.Sequential(WithExtra())
    sd = m.state_dict()
    assert list(sd) == ["0._extra_state"]
    sd["0._extra_state"] = {"value": 7}
    m.load_state_dict(sd)
    assert m[0].value == 7
    with pytest.raises(RuntimeError, match='Missing key.*"0._extra_state"'):
        m.load_state_dict({})
    calls = []
    h = m.register_state_dict_pre_hook(lambda mod, prefix, keep_vars: calls.append(prefix))
    h2 = m.register_load_state_dict_post_hook(lambda mod, keys: calls.append(tuple(keys.missing_keys)))
    m.state_dict()
    m.load_state_dict(sd)
    assert calls == ["", ()]
    h.remove()
    h2.remove()
    m.state_dict()
    assert len(calls) == 2


# --- modes, grads, casts ------------------------------------------------------------------------------
def test_train_eval_requires_grad_zero_grad(models):
    ours, _ = models
    ours.eval()
    assert all(not m.training for m in ours.modules())
    ours.train()
    assert all(m.training for m in ours.modules())
    with pytest.raises(ValueError, match="training mode is expected to be boolean"):
        ours.train(1)
    ours.requires_grad_(False)
    assert not any(p.requires_grad for p in ours.parameters())
    ours.requires_grad_()
    out = ours(fl.randn(2, 3)).sum()
    out.backward()
    assert ours.first.weight.grad is not None
    ours.zero_grad(set_to_none=False)
    assert ours.first.weight.grad.abs().sum().item() == 0
    ours.zero_grad()
    assert ours.first.weight.grad is None


def test_to_and_casts_keep_parameter_objects():
    m = nn.Sequential(nn.Linear(2, 3), nn.Linear(3, 1))
    m.register_buffer("count", fl.zeros(1, dtype=fl.int64))
    w = m[0].weight
    m[0].weight.grad = fl.ones(3, 2)
    assert m.double() is m
    assert m[0].weight is w and w.dtype == fl.float64 and isinstance(w, Parameter) and w.requires_grad
    assert w.grad.dtype == fl.float64
    assert m.count.dtype == fl.int64
    m.float()
    assert w.dtype == fl.float32
    m.half()
    assert w.dtype == fl.float16
    m.to(fl.float64)
    assert w.dtype == fl.float64 and m.count.dtype == fl.int64
    m.to("cpu", fl.float32)
    assert w.dtype == fl.float32
    m.to(fl.zeros(1, dtype=fl.float64))
    assert w.dtype == fl.float64
    m.to(device="cpu", dtype=fl.float32, non_blocking=True)
    assert w.dtype == fl.float32 and m.cpu() is m
    with pytest.raises(TypeError, match="nn.Module.to only accepts floating point"):
        m.to(fl.int32)
    m.type(fl.float64)
    assert m.count.dtype == fl.float64  # type() casts everything, as torch
    x = fl.randn(4, 2, dtype=fl.float64)
    m(x).sum().backward()
    assert w.grad.dtype == fl.float64


def test_apply_and_share_memory_calls():
    m = nn.Sequential(nn.Linear(2, 2), nn.Sequential(nn.Linear(2, 2)))
    seen = []
    assert m.apply(lambda mod: seen.append(type(mod).__name__)) is m
    t = tnn.Sequential(tnn.Linear(2, 2), tnn.Sequential(tnn.Linear(2, 2)))
    tseen = []
    t.apply(lambda mod: tseen.append(type(mod).__name__))
    assert seen == tseen
    calls = []

    def fake(t):
        calls.append(t.shape)
        return t

    m._apply(fake)
    assert len(calls) == 4
    assert m.share_memory() is m


# --- hooks ------------------------------------------------------------------------------------------------
def test_forward_hooks_order_kwargs_and_remove():
    m = nn.Linear(2, 2)
    log = []
    h1 = m.register_forward_pre_hook(lambda mod, args: log.append("pre1"))
    h2 = m.register_forward_pre_hook(lambda mod, args: (args[0] * 0,))
    h3 = m.register_forward_hook(lambda mod, args, out: log.append(("fwd", out.shape)))
    h4 = m.register_forward_hook(lambda mod, args, out: out + 1)
    h5 = m.register_forward_pre_hook(lambda mod, args: log.append("pre0"), prepend=True)
    y = m(fl.randn(3, 2))
    np.testing.assert_allclose(y.detach().numpy(), (m.bias.detach() + 1).expand(3, 2).numpy(), rtol=1e-6)
    assert log == ["pre0", "pre1", ("fwd", (3, 2))]
    for h in (h1, h2, h3, h4, h5):
        h.remove()
    h1.remove()  # twice is fine
    assert not m._forward_hooks and not m._forward_pre_hooks
    kw = []

    class K(nn.Module):
        def forward(self, x, scale=1.0):
            return x * scale

    k = K()
    k.register_forward_pre_hook(lambda mod, args, kwargs: (args, {"scale": 3.0}), with_kwargs=True)
    k.register_forward_hook(lambda mod, args, kwargs, out: kw.append(kwargs), with_kwargs=True)
    assert k(fl.ones(1)).item() == 3.0 and kw == [{"scale": 3.0}]
    with nn.Identity().register_forward_hook(lambda *a: None) as h:
        assert isinstance(h.id, int)
    bad = nn.Identity()
    bad.register_forward_pre_hook(lambda mod, args, kwargs: 5, with_kwargs=True)
    with pytest.raises(RuntimeError, match="forward pre-hook must return None or a tuple"):
        bad(fl.ones(1))


def test_always_call_forward_hook():
    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")

    m = Boom()
    seen = []
    m.register_forward_hook(lambda mod, args, out: seen.append(out), always_call=True)
    with pytest.raises(ValueError, match="boom"):
        m(fl.ones(1))
    assert seen == [None]


def _grad_lists(lib, L, x_np, with_return):
    lin = L.Linear(3, 2).double()
    with (torch.no_grad() if lib is torch else fl.no_grad()):
        lin.weight.copy_(lib.from_numpy(np.arange(6.0).reshape(2, 3) / 10))
        lin.bias.copy_(lib.from_numpy(np.array([0.5, -0.5])))
    seen = []

    def hook(mod, gin, gout):
        seen.append(([None if g is None else g.detach().numpy().copy() for g in gin],
                     [None if g is None else g.detach().numpy().copy() for g in gout]))
        if with_return:
            return tuple(None if g is None else g * 2 for g in gin)

    pre_seen = []

    def pre(mod, gout):
        pre_seen.append(len(gout))

    lin.register_full_backward_hook(hook)
    lin.register_full_backward_pre_hook(pre)
    x = lib.from_numpy(x_np.copy()).requires_grad_()
    (lin(x) ** 2).sum().backward()
    return seen, pre_seen, x.grad.numpy(), lin.weight.grad.numpy()


@pytest.mark.parametrize("with_return", [False, True])
def test_full_backward_hook_like_torch(with_return):
    x = np.random.default_rng(1).standard_normal((4, 3))
    ours = _grad_lists(fl, nn, x, with_return)
    theirs = _grad_lists(torch, tnn, x, with_return)
    assert ours[1] == theirs[1] == [1]
    assert len(ours[0]) == len(theirs[0]) == 1
    (gi_o, go_o), (gi_t, go_t) = ours[0][0], theirs[0][0]
    assert len(gi_o) == len(gi_t) and len(go_o) == len(go_t)
    for a, b in zip(gi_o + go_o, gi_t + go_t):
        np.testing.assert_allclose(a, b, rtol=1e-12)
    np.testing.assert_allclose(ours[2], theirs[2], rtol=1e-12)
    np.testing.assert_allclose(ours[3], theirs[3], rtol=1e-12)


def test_full_backward_hook_input_without_grad():
    lin = nn.Linear(3, 2)
    seen = []
    lin.register_full_backward_hook(lambda mod, gin, gout: seen.append((gin, gout[0].shape)))
    lin(fl.randn(4, 3)).sum().backward()
    assert seen == [((None,), (4, 2))]
    bad = nn.Linear(3, 2)
    bad.register_full_backward_hook(lambda mod, gin, gout: (fl.ones(4, 3),))
    with pytest.raises(RuntimeError, match="no input requires gradient should always return None"):
        bad(fl.randn(4, 3)).sum().backward()


def test_global_forward_hook():
    from flambeau.nn.modules.module import register_module_forward_hook

    seen = []
    h = register_module_forward_hook(lambda mod, args, out: seen.append(type(mod).__name__))
    try:
        nn.Sequential(nn.Identity())(fl.ones(1))
    finally:
        h.remove()
    nn.Identity()(fl.ones(1))
    assert seen == ["Identity", "Sequential"]


# --- containers ----------------------------------------------------------------------------------------------
def test_sequential_like_torch():
    layers = [nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)]
    s = nn.Sequential(*layers)
    assert len(s) == 3 and s[0] is layers[0] and s[-1] is layers[2] and list(s) == layers
    sub = s[1:]
    assert isinstance(sub, nn.Sequential) and list(sub._modules) == ["1", "2"]
    s.append(nn.Identity())
    assert len(s) == 4
    del s[1]
    assert list(s._modules) == ["0", "1", "2"] and s[1] is layers[2]
    s.insert(0, nn.Tanh())
    assert isinstance(s[0], nn.Tanh) and len(s) == 4
    s[0] = nn.Sigmoid()
    assert isinstance(s[0], nn.Sigmoid)
    assert isinstance(s.pop(0), nn.Sigmoid) and len(s) == 3
    assert len(s + nn.Sequential(nn.ReLU())) == 4 and len(s * 2) == 6
    s2 = nn.Sequential(OrderedDict([("a", nn.ReLU()), ("b", nn.Tanh())]))
    assert list(s2._modules) == ["a", "b"] and s2.a is s2[0]
    with pytest.raises(IndexError, match="index 5 is out of range"):
        s[5]
    x = fl.randn(4, 2)
    s3 = nn.Sequential(layers[0], nn.ReLU(), layers[2])
    ref = layers[2](fl.relu(layers[0](x)))
    np.testing.assert_allclose(s3(x).detach().numpy(), ref.detach().numpy())
    s.extend([nn.ReLU()])
    assert len(s) == 4


def test_modulelist_moduledict_like_torch():
    ml = nn.ModuleList([nn.ReLU(), nn.Tanh()])
    ml.append(nn.Sigmoid())
    ml.extend([nn.Identity()])
    ml.insert(1, nn.ReLU())
    assert [type(m).__name__ for m in ml] == ["ReLU", "ReLU", "Tanh", "Sigmoid", "Identity"]
    assert isinstance(ml[1:3], nn.ModuleList) and len(ml[1:3]) == 2
    del ml[0]
    assert list(ml._modules) == ["0", "1", "2", "3"]
    ml += [nn.ReLU()]
    assert len(ml) == 5 and len(ml + ml) == 10
    with pytest.raises(TypeError, match="ModuleList.extend should be called with an iterable"):
        ml.extend(3)
    tml = tnn.ModuleList([tnn.ReLU(), tnn.ReLU(), tnn.Linear(2, 2), tnn.ReLU()])
    oml = nn.ModuleList([nn.ReLU(), nn.ReLU(), nn.Linear(2, 2), nn.ReLU()])
    assert repr(oml) == repr(tml)
    assert repr(nn.ModuleList()) == repr(tnn.ModuleList())
    md = nn.ModuleDict({"b": nn.ReLU(), "a": nn.Tanh()})
    assert list(md.keys()) == ["b", "a"] and "a" in md and len(md) == 2
    md.update([("c", nn.Identity())])
    assert list(md) == ["b", "a", "c"]
    assert isinstance(md.pop("a"), nn.Tanh) and list(md) == ["b", "c"]
    md["z"] = nn.ReLU()
    assert [k for k, _ in md.items()] == ["b", "c", "z"]
    with pytest.raises(ValueError, match="has length 3; 2 is required"):
        md.update([("a", nn.ReLU(), 1)])
    md.clear()
    assert len(md) == 0


def test_parameterlist_parameterdict_like_torch():
    pl = nn.ParameterList([fl.zeros(2), Parameter(fl.ones(3))])
    tpl = tnn.ParameterList([torch.zeros(2), tnn.Parameter(torch.ones(3))])
    assert all(isinstance(p, Parameter) for p in pl) and len(pl) == 2
    assert repr(pl) == _as_ours(repr(tpl))
    pl.append(fl.zeros(1))
    assert _names(pl.named_parameters()) == ["0", "1", "2"]
    assert isinstance(pl[-1], Parameter) and len(pl[0:2]) == 2
    with pytest.raises(TypeError, match="ParameterList.extend should be called with an iterable"):
        pl.extend(fl.zeros(2))
    with pytest.raises(RuntimeError, match="ParameterList should not be called"):
        pl()
    pd = nn.ParameterDict({"b": fl.zeros(1), "a": fl.ones(1)})
    tpd = tnn.ParameterDict({"b": torch.zeros(1), "a": torch.ones(1)})
    assert list(pd) == list(tpd) and repr(pd) == _as_ours(repr(tpd))
    pd["c"] = fl.zeros(2)
    assert isinstance(pd["c"], Parameter) and "c" in pd and len(pd) == 3
    assert _names(pd.named_parameters()) == ["a", "b", "c"]
    assert pd.get("nope") is None and pd.pop("c").shape == (2,)
    assert list(pd.keys()) == ["a", "b"] and len(list(pd.values())) == 2
    k, v = pd.popitem()
    assert k == "b"
    assert len(pd | nn.ParameterDict({"q": fl.zeros(1)})) == 2
    with pytest.raises(TypeError, match="cannot be used as a key as it is not a string"):
        pd[1]
    pd.clear()
    assert len(pd) == 0


def test_call_fast_path_overhead_is_small():
    # no timing assertion: just that calling with and without hooks gives the same result
    m = nn.Linear(4, 4)
    x = fl.randn(2, 4)
    a = m(x)
    h = m.register_forward_hook(lambda *a: None)
    b = m(x)
    h.remove()
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
