"""flambeau.func's differentiation transforms and functional_call (flambeau/func/_eager.py,
_functional_call.py) against torch.func: values, gradients, structures and errors."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
import flambeau.autograd.forward_ad as fwAD
from flambeau.func import functional_call, grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp, vmap

torch = pytest.importorskip("torch")
tfunc = torch.func

RNG = np.random.default_rng(1)
DTYPES = [(np.float64, 1e-9), (np.float32, 1e-4)]


def arr(*shape, dtype=np.float64):
    return RNG.standard_normal(shape).astype(dtype)


def pair(a):
    return fl.tensor(a), torch.from_numpy(a.copy())


def close(got, expected, tol=1e-9):
    if isinstance(expected, torch.Tensor):
        assert isinstance(got, fl.Tensor), type(got)
        assert tuple(got.shape) == tuple(expected.shape), (tuple(got.shape), tuple(expected.shape))
        assert str(got.dtype).split(".")[-1] == str(expected.dtype).split(".")[-1]
        assert not got.requires_grad, "a transform result kept history it should not have"
        np.testing.assert_allclose(got.numpy(), expected.numpy(), rtol=tol * 10, atol=tol)
    elif isinstance(expected, dict):
        assert got.keys() == expected.keys()
        for k in expected:
            close(got[k], expected[k], tol)
    else:
        assert type(got) is type(expected) and len(got) == len(expected), (type(got), type(expected))
        for g, e in zip(got, expected):
            close(g, e, tol)


# The same function written once for both libraries (methods and operators only).
FUNCTIONS = {
    "sin_exp": lambda x: (x.sin() * x.exp()).sum(),
    "matmul_tanh": lambda x: (x @ x.T).tanh().sum(),
    "softmax": lambda x: (x.softmax(-1) * x).sum(),
    "norm_pow": lambda x: x.norm() ** 3 + x.pow(2).mean(),
    "logsumexp": lambda x: x.logsumexp(-1).sum() + x.sigmoid().prod(),
    "max_sort": lambda x: (x.max(-1).values ** 2).sum() + (x.sort(-1).values * x.cos()).sum(),  # saved indices
}


@pytest.mark.parametrize("dtype, tol", DTYPES)
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_grad_matches_torch(name, dtype, tol):
    f = FUNCTIONS[name]
    xf, xt = pair(arr(3, 4, dtype=dtype))
    close(grad(f)(xf), tfunc.grad(f)(xt), tol)
    g, v = grad_and_value(f)(xf)
    gt, vt = tfunc.grad_and_value(f)(xt)
    close(g, gt, tol)
    close(v, vt, tol)


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_hessian_and_nested_transforms_match_torch(name):
    f = FUNCTIONS[name]
    xf, xt = pair(arr(2, 3))
    expected = tfunc.hessian(f)(xt)
    close(hessian(f)(xf), expected, 1e-8)
    close(jacrev(jacrev(f))(xf), expected, 1e-8)
    close(jacfwd(jacfwd(f))(xf), expected, 1e-8)
    close(grad(lambda x: grad(f)(x).sum())(xf), tfunc.grad(lambda x: tfunc.grad(f)(x).sum())(xt), 1e-8)


def test_grad_argnums_pytrees_and_aux():
    def f(params, x, scale):
        out = ((x @ params["w"]) + params["b"][0]).tanh().sum() * scale
        return out, {"out": out, "x": [x]}

    w, b, x = arr(3, 2), arr(2), arr(4, 3)
    pf = {"w": fl.tensor(w), "b": [fl.tensor(b)]}
    pt = {"w": torch.from_numpy(w), "b": [torch.from_numpy(b)]}
    got, aux = grad(f, argnums=(0, 1), has_aux=True)(pf, fl.tensor(x), 2.0)
    exp, aux_t = tfunc.grad(f, argnums=(0, 1), has_aux=True)(pt, torch.from_numpy(x), 2.0)
    close(got, exp)
    close(aux, aux_t)
    with pytest.raises(RuntimeError, match="unsupported type <class 'int'>"):
        grad(lambda x: (x.sum(), 3), has_aux=True)(fl.ones(2))
    close(grad(f, argnums=-2, has_aux=True)(pf, fl.tensor(x), 2.0)[0],
          tfunc.grad(f, argnums=-2, has_aux=True)(pt, torch.from_numpy(x), 2.0)[0])


def test_grad_of_unused_input_is_zero_and_kwargs_pass_through():
    got = grad(lambda x, y, *, k: (y * k).sum())(fl.ones(3), fl.ones(2), k=2.0)
    assert got.tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("call, message", [
    (lambda: grad(lambda x: x * 2)(fl.ones(3)),
     "Expected f\\(\\*args\\) to return a scalar Tensor, got tensor with 1 dims"),
    (lambda: grad(lambda x: 3.0)(fl.ones(3)), "Expected f\\(\\*args\\) to return a Tensor"),
    (lambda: grad(lambda x: x.sum(), argnums=1)(fl.ones(3)), "Got argnums=1, but only 1 positional inputs"),
    (lambda: grad(lambda x: x.sum(), argnums=1.0)(fl.ones(3)), "argnums must be int or Tuple"),
    (lambda: grad(lambda x: x.sum(), argnums=())(fl.ones(3)), "argnums must be non-empty"),
    (lambda: grad(lambda x: x.sum())(fl.tensor([1, 2])), "floating point"),
    (lambda: grad(lambda x: x.sum(), has_aux=True)(fl.ones(3)), "should be a tuple: \\(output, aux\\)"),
])
def test_grad_errors_as_torch(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


def test_grad_composes_with_ordinary_autograd():
    # A closed-over tensor that requires grad keeps the gradient's history (torch.func does the same).
    w = fl.tensor([0.5, -1.0, 2.0], requires_grad=True)
    wt = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float32, requires_grad=True)
    x, xt = fl.tensor([1.0, 2.0, 3.0]), torch.tensor([1.0, 2.0, 3.0])
    g = grad(lambda x: (x * w).sin().sum())(x)
    gt = tfunc.grad(lambda x: (x * wt).sin().sum())(xt)
    assert g.requires_grad and gt.requires_grad
    (g ** 2).sum().backward()
    (gt ** 2).sum().backward()
    np.testing.assert_allclose(w.grad.numpy(), wt.grad.numpy(), rtol=1e-5)


def test_vjp_matches_torch_and_can_be_called_twice():
    def f(x, y):
        return x.sin() * y, (x @ y.unsqueeze(-1)).squeeze(-1)

    (xf, xt), (yf, yt) = pair(arr(4, 3)), pair(arr(3))
    out, fn = vjp(f, xf, yf)
    out_t, fn_t = tfunc.vjp(f, xt, yt)
    close(out, out_t)
    for _ in range(2):
        (c1f, c1t), (c2f, c2t) = pair(arr(4, 3)), pair(arr(4))
        close(fn((c1f, c2f)), fn_t((c1t, c2t)))
    with pytest.raises(RuntimeError, match="Expected pytree structure of cotangents"):
        fn(c1f)
    with pytest.raises(RuntimeError, match="Mismatch in shape"):
        fn((fl.ones(3), c2f))


def test_vjp_with_aux():
    xf, xt = pair(arr(3))
    out, fn, aux = vjp(lambda x: (x.exp(), x.cos()), xf, has_aux=True)
    out_t, fn_t, aux_t = tfunc.vjp(lambda x: (x.exp(), x.cos()), xt, has_aux=True)
    close(aux, aux_t)
    close(fn(fl.ones(3)), fn_t(torch.ones(3, dtype=torch.float64)))


@pytest.mark.parametrize("dtype, tol", DTYPES)
def test_jvp_matches_torch(dtype, tol):
    def f(x, y):
        return {"a": (x * y).tanh(), "b": (x.exp() @ y.T).sum(0)}

    (xf, xt), (yf, yt), (tx, txt), (ty, tyt) = (pair(arr(2, 3, dtype=dtype)) for _ in range(4))
    out, jv = jvp(f, (xf, yf), (tx, ty))
    out_t, jv_t = tfunc.jvp(f, (xt, yt), (txt, tyt))
    close(out, out_t, tol)
    close(jv, jv_t, tol)


def test_jvp_errors():
    x = fl.ones(3)
    with pytest.raises(RuntimeError, match="Expected primals to be a tuple"):
        jvp(lambda x: x, x, (x,))
    with pytest.raises(RuntimeError, match="same python structure"):
        jvp(lambda x: x, (x,), (x, x))
    with pytest.raises(RuntimeError, match="same shape"):
        jvp(lambda x: x, (x,), (fl.ones(2),))


@pytest.mark.parametrize("jac_fl, jac_t", [(jacrev, tfunc.jacrev), (jacfwd, tfunc.jacfwd)])
def test_jacobians_match_torch(jac_fl, jac_t):
    def f(x, y):
        return (x.sin() @ y, (x * 2).sum())

    (xf, xt), (yf, yt) = pair(arr(2, 3)), pair(arr(3, 4))
    close(jac_fl(f)(xf, yf), jac_t(f)(xt, yt))
    close(jac_fl(f, argnums=(0, 1))(xf, yf), jac_t(f, argnums=(0, 1))(xt, yt))
    close(jac_fl(lambda x: x.exp())(fl.tensor(2.0, dtype=fl.float64)),
          jac_t(lambda x: x.exp())(torch.tensor(2.0, dtype=torch.float64)))
    got, aux = jac_fl(lambda x: (x ** 2, x.sum()), has_aux=True)(xf)
    exp, aux_t = jac_t(lambda x: (x ** 2, x.sum()), has_aux=True)(xt)
    close(got, exp)
    close(aux, aux_t)


def test_hessian_argnums_tuple():
    def f(x, y):
        return (x.sin() * y).sum() + (x * x).sum() * y.sum()

    (xf, xt), (yf, yt) = pair(arr(3)), pair(arr(3))
    close(hessian(f, argnums=(0, 1))(xf, yf), tfunc.hessian(f, argnums=(0, 1))(xt, yt), 1e-8)


def test_vmap_of_jacrev_and_hessian_match_torch():
    x = arr(4, 3)
    xf, xt = fl.tensor(x), torch.from_numpy(x)
    close(vmap(jacrev(lambda r: r.sin() * r.sum()))(xf), torch.vmap(tfunc.jacrev(lambda r: r.sin() * r.sum()))(xt))
    close(vmap(hessian(lambda r: (r.exp() * r).sum()))(xf),
          torch.vmap(tfunc.hessian(lambda r: (r.exp() * r).sum()))(xt), 1e-8)


def test_jacrev_via_vmap_of_vjp_matches_torch():
    x = arr(3)
    xf, xt = fl.tensor(x), torch.from_numpy(x)
    _, fn = vjp(lambda v: v.sin() * 2, xf)
    _, fn_t = tfunc.vjp(lambda v: v.sin() * 2, xt)
    eye = np.eye(3)
    close(vmap(fn)(fl.tensor(eye)), torch.vmap(fn_t)(torch.from_numpy(eye)))


def test_forward_ad_over_reverse_keeps_saved_result_tangents():
    # flambeau/autograd/_saved.py: a saved result carries its tangent into backward (torch's SavedVariable does).
    x = arr(3)
    xt = torch.from_numpy(x)
    for k in range(3):
        e = np.zeros(3)
        e[k] = 1
        with fwAD.dual_level():
            dual = fwAD.make_dual(fl.tensor(x).requires_grad_(), fl.tensor(e))
            y = (dual.exp() * dual.tanh()).sum() + dual.softmax(0)[1]
            (g,) = fl.autograd.grad(y, dual, create_graph=True)
            tangent = fwAD.unpack_dual(g).tangent
        expected = tfunc.hessian(lambda v: (v.exp() * v.tanh()).sum() + v.softmax(0)[1])(xt)[k]
        np.testing.assert_allclose(tangent.numpy(), expected.numpy(), rtol=1e-10)


# --- functional_call ---------------------------------------------------------------------------------------
class _Linear:
    """A minimal module with torch's Module API (flambeau-autograd's tests run without flambeau-nn)."""

    def __init__(self, w, b, scale):
        self._parameters = {"weight": w, "bias": b}
        self._buffers = {"scale": scale}
        self._modules = {}

    def __getattr__(self, name):
        for table in ("_parameters", "_buffers", "_modules"):
            d = self.__dict__.get(table, {})
            if name in d:
                return d[name]
        raise AttributeError(name)

    def named_parameters(self, prefix="", remove_duplicate=True):
        yield from _named(self, "_parameters", prefix, remove_duplicate)

    def named_buffers(self, prefix="", remove_duplicate=True):
        yield from _named(self, "_buffers", prefix, remove_duplicate)

    def __call__(self, x):
        return (x @ self.weight.T + self.bias) * self.scale


class _Seq(_Linear):
    def __init__(self, *mods, tied=False):
        self._parameters, self._buffers = {}, {}
        self._modules = {str(i): m for i, m in enumerate(mods)}
        if tied:
            mods[1]._parameters["weight"] = mods[0]._parameters["weight"]

    def __call__(self, x):
        for m in self._modules.values():
            x = m(x)
        return x


def _named(module, table, prefix, remove_duplicate, seen=None):
    seen = set() if seen is None else seen
    for name, t in getattr(module, table).items():
        if t is None or (remove_duplicate and id(t) in seen):
            continue
        seen.add(id(t))
        yield prefix + name, t
    for mname, sub in module._modules.items():
        yield from _named(sub, table, prefix + mname + ".", remove_duplicate, seen)


def _models():
    w1, b1, w2, b2 = arr(3, 3), arr(3), arr(3, 3), arr(3)
    f_model = _Seq(_Linear(fl.tensor(w1), fl.tensor(b1), fl.tensor(2.0, dtype=fl.float64)),
                   _Linear(fl.tensor(w2), fl.tensor(b2), fl.tensor(1.0, dtype=fl.float64)))
    t_model = torch.nn.Sequential(torch.nn.Linear(3, 3).double(), torch.nn.Linear(3, 3).double())
    with torch.no_grad():
        for lin, w, b in ((t_model[0], w1, b1), (t_model[1], w2, b2)):
            lin.weight.copy_(torch.from_numpy(w))
            lin.bias.copy_(torch.from_numpy(b))
    return f_model, t_model


def test_functional_call_and_per_example_gradients_match_torch():
    f_model, t_model = _models()
    f_model._modules["0"]._buffers["scale"] = fl.tensor(1.0, dtype=fl.float64)  # torch's Linear has no scale
    x = arr(5, 3)
    new = {k: arr(*v.shape) for k, v in t_model.named_parameters()}
    out = functional_call(f_model, {k: fl.tensor(v) for k, v in new.items()}, (fl.tensor(x),))
    out_t = tfunc.functional_call(t_model, {k: torch.from_numpy(v) for k, v in new.items()}, (torch.from_numpy(x),))
    close(out, out_t)
    # the module's own tensors are back afterwards
    np.testing.assert_allclose(f_model._modules["0"].weight.numpy(), t_model[0].weight.detach().numpy())

    def loss(params, xi):
        return functional_call(f_model, params, (xi,)).pow(2).sum()

    def loss_t(params, xi):
        return tfunc.functional_call(t_model, params, (xi,)).pow(2).sum()

    got = vmap(grad(loss), in_dims=(None, 0))({k: fl.tensor(v) for k, v in new.items()}, fl.tensor(x))
    exp = torch.vmap(tfunc.grad(loss_t), in_dims=(None, 0))({k: torch.from_numpy(v) for k, v in new.items()},
                                                          torch.from_numpy(x))
    close(got, exp)


def test_functional_call_tied_weights_strict_and_errors():
    w, b = fl.tensor(arr(3, 3)), fl.tensor(arr(3))
    one = fl.tensor(1.0, dtype=fl.float64)
    model = _Seq(_Linear(w, b, one), _Linear(fl.tensor(arr(3, 3)), b, one), tied=True)
    x = fl.tensor(arr(2, 3))
    new_w = fl.tensor(arr(3, 3))
    tied = functional_call(model, {"0.weight": new_w}, x)
    untied = functional_call(model, {"0.weight": new_w}, x, tie_weights=False)
    h = x @ new_w.T + b
    np.testing.assert_allclose(tied.numpy(), (h @ new_w.T + b).numpy())
    np.testing.assert_allclose(untied.numpy(), (h @ w.T + b).numpy())
    with pytest.raises(ValueError, match="which are tied"):
        functional_call(model, {"0.weight": new_w, "1.weight": fl.tensor(arr(3, 3))}, x)
    with pytest.raises(RuntimeError, match="Missing key\\(s\\): '0.bias'"):
        functional_call(model, {"0.weight": new_w}, x, strict=True)
    with pytest.raises(RuntimeError, match="Unexpected key\\(s\\): 'extra'"):
        functional_call(model, {"extra": new_w}, x, strict=True)
    with pytest.raises(ValueError, match="appeared in multiple dictionaries"):
        functional_call(model, ({"0.bias": b}, {"0.bias": b}), x)
    with pytest.raises(ValueError, match="to be a dict, or a list/tuple of dicts"):
        functional_call(model, 3, x)
    assert model._modules["1"].weight is w  # restored, tied again


def test_functional_call_with_flambeau_nn():
    nn = pytest.importorskip("flambeau.nn")
    model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    t_model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    params = {k: arr(*v.shape, dtype=np.float32) for k, v in t_model.named_parameters()}
    x = arr(5, 3, dtype=np.float32)
    got = functional_call(model, {k: fl.tensor(v) for k, v in params.items()}, (fl.tensor(x),), strict=True)
    exp = tfunc.functional_call(t_model, {k: torch.from_numpy(v) for k, v in params.items()}, (torch.from_numpy(x),))
    np.testing.assert_allclose(got.detach().numpy(), exp.detach().numpy(), rtol=1e-5, atol=1e-6)
    g = grad(lambda p: functional_call(model, p, (fl.tensor(x),)).sum())({k: fl.tensor(v) for k, v in params.items()})
    gt = tfunc.grad(lambda p: tfunc.functional_call(t_model, p, (torch.from_numpy(x),)).sum())(
        {k: torch.from_numpy(v) for k, v in params.items()})
    for k in params:
        np.testing.assert_allclose(g[k].numpy(), gt[k].numpy(), rtol=1e-5, atol=1e-6)
