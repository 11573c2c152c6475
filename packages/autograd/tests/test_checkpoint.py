"""flambeau.utils.checkpoint (shipped by flambeau-autograd as flambeau/utils/checkpoint.py)."""

from __future__ import annotations

import weakref

import numpy as np
import pytest

import flambeau as fl
from flambeau.utils.checkpoint import CheckpointError, checkpoint, checkpoint_sequential

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(2)
VARIANTS = [False, True]  # use_reentrant


def arr(*shape):
    return RNG.standard_normal(shape)


def block(lib):
    """A function of a few layers, written once for both libraries."""

    def f(x, w, *, scale=1.0):
        h = (x @ w).tanh()
        h = (h * h.sigmoid()).softmax(-1)
        return (h @ w.T).exp().sum(1) * scale

    return f


def leaves(*arrays):
    return ([fl.tensor(a, requires_grad=True) for a in arrays],
            [torch.tensor(a, requires_grad=True) for a in arrays])


@pytest.mark.parametrize("use_reentrant", VARIANTS)
def test_gradients_equal_the_plain_run_and_torch(use_reentrant):
    x, w = arr(4, 5), arr(5, 5)
    (xf, wf), (xt, wt) = leaves(x, w)
    checkpoint(block(fl), xf, wf, use_reentrant=use_reentrant).sum().backward()
    torch.utils.checkpoint.checkpoint(block(torch), xt, wt, use_reentrant=use_reentrant).sum().backward()
    for a, b in ((xf, xt), (wf, wt)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10)
    (xp, wp), _ = leaves(x, w)
    block(fl)(xp, wp).sum().backward()
    np.testing.assert_allclose(xf.grad.numpy(), xp.grad.numpy(), rtol=1e-12)


def test_keyword_arguments_autograd_grad_and_inputs():
    x, w = arr(3, 4), arr(4, 4)
    (xf, wf), (xt, wt) = leaves(x, w)
    y = checkpoint(block(fl), xf, wf, scale=2.0)
    yt = torch.utils.checkpoint.checkpoint(block(torch), xt, wt, scale=2.0, use_reentrant=False)
    (gx,) = fl.autograd.grad(y.sum(), xf)
    (gxt,) = torch.autograd.grad(yt.sum(), xt)
    np.testing.assert_allclose(gx.numpy(), gxt.numpy(), rtol=1e-10)
    y = checkpoint(block(fl), xf, wf)
    y.sum().backward(inputs=[wf])
    assert xf.grad is None and wf.grad is not None


def test_double_backward_through_checkpoint_matches_torch():
    x, w = arr(3, 4), arr(4, 4)
    (xf, wf), (xt, wt) = leaves(x, w)
    (gx,) = fl.autograd.grad(checkpoint(block(fl), xf, wf).sum(), xf, create_graph=True)
    (gxt,) = torch.autograd.grad(torch.utils.checkpoint.checkpoint(block(torch), xt, wt, use_reentrant=False).sum(),
                                 xt, create_graph=True)
    (ggw,) = fl.autograd.grad((gx ** 2).sum(), wf)
    (ggwt,) = torch.autograd.grad((gxt ** 2).sum(), wt)
    np.testing.assert_allclose(ggw.numpy(), ggwt.numpy(), rtol=1e-9)


@pytest.mark.parametrize("use_reentrant", VARIANTS)
def test_dropout_draws_the_same_mask_when_recomputed(use_reentrant):
    masks = []

    def f(x):
        m = fl.dropout(fl.ones_like(x), 0.5, True)
        masks.append(m)
        return (x * m).sin()

    x = fl.tensor(arr(6, 20), requires_grad=True)
    fl.manual_seed(3)
    y = checkpoint(f, x, use_reentrant=use_reentrant)
    after_forward = fl.rand(1)  # the generator moved on after the forward ...
    y.sum().backward()
    assert len(masks) == 2 and bool((masks[0] == masks[1]).all())
    fl.manual_seed(3)
    f(fl.tensor(arr(6, 20)))
    assert bool((fl.rand(1) == after_forward).all())  # ... and the recomputation did not move it
    plain = fl.tensor(x.detach().numpy(), requires_grad=True)
    (plain * masks[0]).sin().sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), plain.grad.numpy())


def test_without_preserving_rng_state_the_mask_changes():
    masks = []

    def f(x):
        m = fl.dropout(fl.ones_like(x), 0.5, True)
        masks.append(m)
        return x * m

    x = fl.tensor(arr(6, 20), requires_grad=True)
    checkpoint(f, x, preserve_rng_state=False).sum().backward()
    assert not bool((masks[0] == masks[1]).all())


def _storages_alive(use_checkpoint: bool):
    """How many of the intermediate tensors of a forward stay alive until backward."""
    refs = []

    def f(x, w):
        h = x
        for _ in range(4):
            h = (h @ w).tanh().exp()
            refs.append(weakref.ref(h.untyped_storage()))
        return h.sum()

    x, w = fl.randn(8, 8, requires_grad=True), fl.randn(8, 8, requires_grad=True)
    y = checkpoint(f, x, w) if use_checkpoint else f(x, w)
    alive = sum(r() is not None for r in refs)
    y.backward()
    return alive, x.grad


def test_saved_tensors_are_freed_during_the_forward():
    alive_plain, g_plain = _storages_alive(False)
    alive_ckpt, g_ckpt = _storages_alive(True)
    assert alive_plain == 4  # exp saves its result: every layer output stays for backward
    assert alive_ckpt == 0
    assert g_plain.shape == g_ckpt.shape


def test_early_stop_and_the_recomputed_tensors_are_released():
    calls = []

    def f(x):
        calls.append("start")
        y = x.exp()  # the last tensor saved for backward
        calls.append("end")
        return y * 2  # (multiplying by a number saves nothing)

    x = fl.randn(3, requires_grad=True)
    checkpoint(f, x).sum().backward()
    assert calls == ["start", "end", "start"]  # the recomputation stopped once exp's result was back
    calls.clear()
    checkpoint(f, x, early_stop=False).sum().backward()
    assert calls == ["start", "end", "start", "end"]


def test_nondeterministic_recomputation_raises():
    state = {"n": 3}

    def f(x):
        state["n"] += 1
        return (x[: state["n"] % 2 + 2] ** 2).sum()

    x = fl.randn(5, requires_grad=True)
    y = checkpoint(f, x)
    with pytest.raises(CheckpointError, match="different metadata than during the forward pass"):
        y.backward()


def test_nested_checkpoints_and_outputs_without_grad():
    x, w = arr(3, 4), arr(4, 4)
    (xf, wf), (xt, wt) = leaves(x, w)

    def inner(h, w):
        return (h @ w).sin(), h.argmax(-1)

    def outer(x, w):
        h, idx = checkpoint(inner, x, w)
        return checkpoint(block(fl), h, w) + idx.to(h.dtype)

    def outer_t(x, w):
        h, idx = torch.utils.checkpoint.checkpoint(lambda a, b: ((a @ b).sin(), a.argmax(-1)), x, w,
                                                   use_reentrant=False)
        return torch.utils.checkpoint.checkpoint(block(torch), h, w, use_reentrant=False) + idx.to(h.dtype)

    checkpoint(outer, xf, wf).sum().backward()
    outer_t(xt, wt).sum().backward()
    np.testing.assert_allclose(wf.grad.numpy(), wt.grad.numpy(), rtol=1e-10)


def test_no_grad_mode_just_runs():
    with fl.no_grad():
        y = checkpoint(block(fl), fl.randn(2, 3), fl.randn(3, 3))
    assert not y.requires_grad


def test_reentrant_errors_and_warning():
    x = fl.randn(2, 3)
    with pytest.raises(ValueError, match="Unexpected keyword arguments: scale"):
        checkpoint(block(fl), x, fl.randn(3, 3), scale=2.0, use_reentrant=True)
    with pytest.raises(ValueError, match="only supported when use_reentrant=False"):
        checkpoint(block(fl), x, fl.randn(3, 3), use_reentrant=True, debug=True)
    with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
        checkpoint(block(fl), x, fl.randn(3, 3), use_reentrant=True)
    with pytest.raises(ValueError, match="determinism_check should be one of"):
        checkpoint(block(fl), x, fl.randn(3, 3), determinism_check="strict")


def test_context_fn_wraps_forward_and_recomputation():
    seen = []

    class Note:
        def __init__(self, name):
            self.name = name

        def __enter__(self):
            seen.append(self.name)

        def __exit__(self, *exc):
            return False

    x = fl.randn(3, requires_grad=True)
    checkpoint(lambda v: v.exp().sum(), x, context_fn=lambda: (Note("forward"), Note("recompute"))).backward()
    assert seen == ["forward", "recompute"]


@pytest.mark.parametrize("use_reentrant", VARIANTS)
@pytest.mark.parametrize("segments", [1, 2, 3])
def test_checkpoint_sequential_matches_torch(segments, use_reentrant):
    ws = [arr(4, 4) for _ in range(4)]
    fw = [fl.tensor(w, requires_grad=True) for w in ws]
    tw = [torch.tensor(w, requires_grad=True) for w in ws]
    x = arr(3, 4)
    xf, xt = fl.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    f_layers = [lambda h, w=w: (h @ w).tanh() for w in fw]
    t_layers = [lambda h, w=w: (h @ w).tanh() for w in tw]
    out = checkpoint_sequential(f_layers, segments, xf, use_reentrant=use_reentrant)
    out_t = torch.utils.checkpoint.checkpoint_sequential(t_layers, segments, xt, use_reentrant=use_reentrant)
    np.testing.assert_allclose(out.detach().numpy(), out_t.detach().numpy(), rtol=1e-12)
    out.sum().backward()
    out_t.sum().backward()
    for a, b in zip(fw + [xf], tw + [xt]):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10)


def test_checkpoint_sequential_of_nn_sequential():
    nn = pytest.importorskip("flambeau.nn")
    model = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 2))
    x = fl.randn(5, 4, requires_grad=True)
    checkpoint_sequential(model, 2, x).sum().backward()
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    x2 = fl.tensor(x.detach().numpy(), requires_grad=True)
    model(x2).sum().backward()
    for g, p in zip(got, model.parameters()):
        np.testing.assert_allclose(g.numpy(), p.grad.numpy(), rtol=1e-6)
    with pytest.raises(ValueError, match="must not exceed the number of functions"):
        checkpoint_sequential(model, 9, x)


def test_checkpoint_is_importable_from_flambeau_utils():
    # flambeau-autograd ships only this module of flambeau.utils; tensor-core's package finds it.
    import flambeau.utils
    import flambeau.utils.checkpoint as module

    assert module.checkpoint is checkpoint
    assert module.__file__.replace("\\", "/").endswith("autograd/src/flambeau/utils/checkpoint.py") or \
        "flambeau_autograd" in module.__file__ or "site-packages" in module.__file__
    assert any(p.replace("\\", "/").endswith("flambeau/utils") for p in flambeau.utils.__path__)
