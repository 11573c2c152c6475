"""Idioms of PyTorch programs that a probe of ported scripts found failing, against torch."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn

torch = pytest.importorskip("torch")


def test_module_bfloat16_and_compile():
    for lib in (fl, torch):
        m = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.Embedding(4, 2))
        assert m.bfloat16() is m and m[0].weight.dtype is lib.bfloat16
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert hasattr(m, "compile") and (m.compile() if lib is fl else None) is None


def test_old_lr_scheduler_base_class():
    lrs = []
    for lib in (fl, torch):
        class Halving(lib.optim.lr_scheduler._LRScheduler):
            def get_lr(self):
                return [g["lr"] * 0.5 for g in self.optimizer.param_groups]

        opt = lib.optim.SGD([lib.nn.Parameter(lib.ones(1))], lr=1.0)
        sched = Halving(opt)
        for _ in range(3):
            opt.step()
            sched.step()
        lrs.append(opt.param_groups[0]["lr"])
        assert Halving.__mro__[1].__name__ == "_LRScheduler"
    assert lrs[0] == lrs[1]


def test_legacy_tensor_constructor_shapes():
    assert tuple(fl.Tensor().shape) == tuple(torch.Tensor().shape) == (0,)
    assert tuple(fl.Tensor(2, 3).shape) == (2, 3) and fl.Tensor([1, 2]).dtype is fl.float32
    assert isinstance(nn.Linear(1, 1).weight, fl.Tensor)


@pytest.mark.parametrize("p", [2.0, 1.0, float("inf"), 0.5])
def test_pdist_matches_torch(p):
    import numpy as np

    x = np.random.default_rng(0).standard_normal((5, 3))
    ours, theirs = fl.from_numpy(x).requires_grad_(), torch.from_numpy(x).requires_grad_()
    a, b = nn.functional.pdist(ours, p), torch.nn.functional.pdist(theirs, p)
    (a * fl.arange(1.0, 11.0, dtype=fl.float64)).sum().backward()
    (b * torch.arange(1.0, 11.0, dtype=torch.float64)).sum().backward()
    np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-10)
    assert tuple(nn.functional.pdist(fl.ones(1, 3)).shape) == (0,)


def test_torchs_module_paths_of_layer_helpers():
    # imports that ported layers and scripts make (they raised ModuleNotFoundError)
    from flambeau.nn.attention import SDPBackend, sdpa_kernel
    from flambeau.nn.common_types import _size_2_t  # noqa: F401
    from flambeau.nn.modules.activation import MultiheadAttention
    from flambeau.nn.modules.utils import (
        _pair,
        _quadruple,
        _reverse_repeat_tuple,
        consume_prefix_in_state_dict_if_present,
    )
    from flambeau.utils._pytree import tree_flatten, tree_leaves, tree_map
    from flambeau.utils.hooks import RemovableHandle

    tutils = torch.nn.modules.utils

    assert MultiheadAttention is fl.nn.MultiheadAttention and RemovableHandle is fl.nn.utils.hooks.RemovableHandle
    for value in (3, (1, 2), [4, 5]):
        assert _pair(value) == tutils._pair(value) and _quadruple(value) == tutils._quadruple(value)
    assert _reverse_repeat_tuple((1, 2), 2) == tutils._reverse_repeat_tuple((1, 2), 2)
    state = {"module.w": 1, "module.b": 2, "other": 3}
    consume_prefix_in_state_dict_if_present(state, "module.")
    assert state == {"w": 1, "b": 2, "other": 3}
    assert tree_leaves({"a": [1, 2], "b": (3,)}) == tree_flatten({"a": [1, 2], "b": (3,)})[0] == [1, 2, 3]
    assert tree_map(lambda v: v * 2, [1, (2,)]) == [2, (4,)]
    q = fl.randn(1, 2, 4, 8)
    with sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]):  # (flambeau's kernels run: the module's note)
        got = fl.nn.functional.scaled_dot_product_attention(q, q, q)
    np.testing.assert_allclose(got.numpy(), fl.nn.functional.scaled_dot_product_attention(q, q, q).numpy())
    with pytest.raises(TypeError, match="SDPBackend"):
        with sdpa_kernel("flash"):
            pass
    assert {b.name: int(b) for b in SDPBackend} == {name: int(b) for name, b in
                                                    torch.nn.attention.SDPBackend.__members__.items()}


def test_older_backward_hooks_see_the_last_operation():
    grads = []
    for lib in (fl, torch):
        lib.manual_seed(0)
        conv = lib.nn.Conv2d(1, 2, 3)
        conv.weight.data.copy_(lib.tensor(np.linspace(-1, 1, 18).reshape(2, 1, 3, 3), dtype=lib.float32))
        seen = {}

        def hook(module, grad_input, grad_output, seen=seen):
            seen["out"] = grad_output[0].numpy().copy()
            return (grad_input[0] * 2, *grad_input[1:])  # what it returns replaces grad_input

        conv.register_backward_hook(hook)
        x = lib.ones(1, 1, 5, 5, requires_grad=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (conv(x) * lib.arange(18.0).reshape(1, 2, 3, 3)).sum().backward()
        grads.append((seen["out"], x.grad.numpy()))
        with pytest.raises(RuntimeError, match="Cannot use both regular backward hooks and full backward hooks"):
            conv.register_full_backward_hook(hook)
    for got, want in zip(*grads):
        np.testing.assert_allclose(got, want, rtol=1e-5)


def test_hook_based_weight_and_spectral_norm():
    # torch's older forms, still in GAN and vocoder code: parameters, values, gradients and removal against torch
    results = []
    for lib in (fl, torch):
        lin = lib.nn.Linear(4, 3)
        lin.weight.data.copy_(lib.tensor(np.linspace(-1, 1, 12).reshape(3, 4), dtype=lib.float32))
        lin.bias.data.zero_()
        with pytest.warns(FutureWarning, match="weight_norm` is deprecated in favor of"):
            lib.nn.utils.weight_norm(lin)
        names = sorted(n for n, _ in lin.named_parameters())
        x = lib.tensor(np.linspace(0, 1, 8).reshape(2, 4), dtype=lib.float32)
        y = lin(x)
        (y * y).sum().backward()
        grads = (lin.weight_g.grad.numpy().copy(), lin.weight_v.grad.numpy().copy())
        lib.nn.utils.remove_weight_norm(lin)
        conv = lib.nn.Conv2d(2, 3, 2)
        conv.bias.data.zero_()
        conv.weight.data.copy_(lib.tensor(np.linspace(-1, 1, 24).reshape(3, 2, 2, 2), dtype=lib.float32))
        lib.nn.utils.spectral_norm(conv, n_power_iterations=2)
        conv.weight_u.copy_(lib.tensor([0.6, 0.8, 0.0]))
        conv.weight_v.copy_(lib.ones(8) / 8 ** 0.5)
        z = conv(lib.ones(1, 2, 3, 3))
        (z * z).sum().backward()
        conv.eval()
        frozen = conv(lib.ones(1, 2, 3, 3)).detach().numpy()
        keys = sorted(conv.state_dict())
        lib.nn.utils.remove_spectral_norm(conv)
        results.append((names, sorted(n for n, _ in lin.named_parameters()), keys,
                        sorted(n for n, _ in conv.named_parameters()), y.detach().numpy(), *grads, z.detach().numpy(),
                        frozen, conv.weight.detach().numpy()))
        with pytest.raises(ValueError, match="weight_norm of 'weight' not found"):
            lib.nn.utils.remove_weight_norm(lin)
    for got, want in zip(*results):
        if isinstance(got, list):
            assert got == want
        else:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_checkpoints_with_objects_beyond_tensors(tmp_path):
    # torch.save({"model": ..., "args": Namespace(...)}) and torch.save(model): saved as torch's archive, read as
    # torch.load reads it (weights only by default, with the safe globals, or everything with weights_only=False)
    import argparse

    args = argparse.Namespace(lr=0.1, name="run")
    model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
    path = tmp_path / "ck.pt"
    fl.save({"model": model.state_dict(), "args": args, "step": 5}, path)
    with pytest.raises(RuntimeError, match="Weights only load failed: the global argparse.Namespace is not allowed"):
        fl.load(path)
    loaded = fl.load(path, weights_only=False)
    assert loaded["args"] == args and loaded["step"] == 5
    np.testing.assert_array_equal(loaded["model"]["0.weight"].numpy(), model[0].weight.detach().numpy())
    with fl.serialization.safe_globals([argparse.Namespace]):
        assert fl.load(path)["args"] == args
    assert fl.serialization.get_safe_globals() == []
    theirs = torch.load(path, weights_only=False)  # torch reads it too
    assert theirs["args"] == args and theirs["model"]["0.weight"].shape == (2, 3)
    fl.save(model, whole := tmp_path / "model.pt")
    again = fl.load(whole, weights_only=False)
    assert type(again) is nn.Sequential and type(again[0].weight) is nn.Parameter
    np.testing.assert_array_equal(again(fl.ones(1, 3)).detach().numpy(), model(fl.ones(1, 3)).detach().numpy())
    torch.save({"args": args, "w": torch.ones(2)}, from_torch := tmp_path / "torch.pt")
    read = fl.load(from_torch, weights_only=False)
    assert read["args"] == args and read["w"].tolist() == [1.0, 1.0]


def test_small_spellings_ported_code_uses():
    for lib in (fl, torch):
        with pytest.warns(FutureWarning, match=r"`sample_n\(n\)` will be deprecated"):
            assert tuple(lib.distributions.Normal(lib.zeros(2), lib.ones(2)).sample_n(3).shape) == (3, 2)
        values, indices = lib.nn.functional.max_pool2d_with_indices(lib.arange(16.0).reshape(1, 1, 4, 4), 2,
                                                                    return_indices=True)
        assert indices.tolist() == [[[[5, 7], [13, 15]]]]
        assert lib.nn.functional.max_pool1d_with_indices(lib.arange(8.0).reshape(1, 1, 8), 2,
                                                         return_indices=False)[1].tolist() == [[[1, 3, 5, 7]]]
