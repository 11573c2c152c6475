"""The layers of issue 13 against torch: 3-D adaptive/LP/fractional pooling, ConvTranspose3d, lazy instance
norms, LRN, channel shuffle, distances, AdaptiveLogSoftmaxWithLoss, Container and DataParallel."""

from __future__ import annotations

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn as nn
import flambeau.nn.functional as F
import flambeau.optim as optim

torch = pytest.importorskip("torch")
TF = torch.nn.functional
RNG = np.random.default_rng(17)


def _compare(ours_fn, theirs_fn, *arrays, atol=1e-10):
    """Values (and indices) and the input gradients of a weighted sum of the (first) output."""
    theirs = [torch.tensor(a, requires_grad=True) for a in arrays]
    ours = [fl.tensor(a, requires_grad=True) for a in arrays]
    r, q = theirs_fn(*theirs), ours_fn(*ours)
    if isinstance(r, tuple):
        assert np.array_equal(q[1].numpy(), r[1].numpy()) and q[1].dtype == fl.int64
        r, q = r[0], q[0]
    assert tuple(q.shape) == tuple(r.shape)
    np.testing.assert_allclose(q.detach().numpy(), r.detach().numpy(), rtol=1e-9, atol=atol)
    w = np.linspace(-1, 2, r.numel()).reshape(tuple(r.shape))
    (r * torch.tensor(w)).sum().backward()
    (q * fl.tensor(w)).sum().backward()
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-8, atol=atol)


X5 = RNG.standard_normal((2, 3, 7, 6, 5))


@pytest.mark.parametrize("size", [(3, 4, 2), 2, (None, 3, 1)])
def test_adaptive_pool3d(size):
    _compare(lambda x: F.adaptive_avg_pool3d(x, size), lambda x: TF.adaptive_avg_pool3d(x, size), X5)
    _compare(lambda x: nn.AdaptiveMaxPool3d(size, return_indices=True)(x),
             lambda x: torch.nn.AdaptiveMaxPool3d(size, return_indices=True)(x), X5)
    _compare(lambda x: nn.AdaptiveAvgPool3d(size)(x), lambda x: torch.nn.AdaptiveAvgPool3d(size)(x), X5[0])
    _compare(lambda x: F.adaptive_max_pool3d_with_indices(x, size),
             lambda x: TF.adaptive_max_pool3d_with_indices(x, size),
             X5[0])


def test_lp_pool3d():
    _compare(lambda x: nn.LPPool3d(2, 2)(x), lambda x: torch.nn.LPPool3d(2, 2)(x), np.abs(X5) + 0.1)
    _compare(lambda x: F.lp_pool3d(x, 3.0, (2, 3, 2), stride=1), lambda x: TF.lp_pool3d(x, 3.0, (2, 3, 2), stride=1),
             np.abs(X5) + 0.1)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fractional_max_pool2d(dtype):
    x = RNG.standard_normal((2, 3, 9, 8)).astype(dtype)
    samples = RNG.random((2, 3, 2)).astype(dtype)
    for kw in ({"output_size": (5, 4)}, {"output_size": 3}, {"output_ratio": (0.5, 0.6)}):
        s_t, s_f = torch.tensor(samples), fl.tensor(samples)
        _compare(lambda a, s=s_f, k=kw: F.fractional_max_pool2d(a, 2, return_indices=True, _random_samples=s, **k),
                 lambda a, s=s_t, k=kw: TF.fractional_max_pool2d(a, 2, return_indices=True, _random_samples=s, **k),
                 x, atol=1e-6)
    ours = nn.FractionalMaxPool2d((3, 2), output_ratio=0.5, _random_samples=fl.tensor(samples))
    theirs = torch.nn.FractionalMaxPool2d((3, 2), output_ratio=0.5, _random_samples=torch.tensor(samples))
    _compare(ours, theirs, x, atol=1e-6)


def test_fractional_max_pool3d_and_random_samples():
    samples = RNG.random((2, 3, 3))
    _compare(lambda a: nn.FractionalMaxPool3d(2, output_size=(4, 3, 2), return_indices=True,
                                              _random_samples=fl.tensor(samples))(a),
             lambda a: torch.nn.FractionalMaxPool3d(2, output_size=(4, 3, 2), return_indices=True,
                                                    _random_samples=torch.tensor(samples))(a), X5)
    # without samples they are drawn from flambeau's generator: the same seed gives the same windows
    fl.manual_seed(3)
    a = F.fractional_max_pool2d(fl.tensor(X5[:, :, 0]), 2, output_size=3)
    fl.manual_seed(3)
    assert np.array_equal(a.numpy(), F.fractional_max_pool2d(fl.tensor(X5[:, :, 0]), 2, output_size=3).numpy())
    with pytest.raises(ValueError, match="output_ratio must be between 0 and 1"):
        nn.FractionalMaxPool2d(2, output_ratio=1.5)
    with pytest.raises(ValueError, match="either an output size"):
        nn.FractionalMaxPool2d(2)
    with pytest.raises(RuntimeError, match="too large"):
        F.fractional_max_pool2d(fl.tensor(X5[:, :, 0]), 4, output_size=5)


@pytest.mark.parametrize("kw", [{}, {"stride": 2, "padding": 1, "output_padding": 1},
                                {"stride": (2, 1, 3), "padding": (2, 0, 1), "groups": 2, "dilation": (1, 2, 1),
                                 "output_padding": (1, 0, 2)}])
def test_conv_transpose3d(kw):
    x = RNG.standard_normal((2, 4, 3, 4, 2))
    w = RNG.standard_normal((4, 3, 3, 2, 2))
    b = RNG.standard_normal(3 * kw.get("groups", 1))
    _compare(lambda *t: F.conv_transpose3d(*t, **kw), lambda *t: TF.conv_transpose3d(*t, **kw), x, w, b)
    _compare(lambda *t: F.conv_transpose3d(*t, **kw), lambda *t: TF.conv_transpose3d(*t, **kw), x[0], w)


def test_conv_transpose3d_module_and_lazy():
    torch.manual_seed(0)
    theirs = torch.nn.ConvTranspose3d(4, 6, (2, 3, 2), stride=2, groups=2).double()
    ours = nn.ConvTranspose3d(4, 6, (2, 3, 2), stride=2, groups=2, dtype=fl.float64)
    assert tuple(ours.weight.shape) == tuple(theirs.weight.shape)
    ours.load_state_dict({k: fl.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    x = RNG.standard_normal((1, 4, 2, 3, 2))
    _compare(lambda a: ours(a, output_size=(5, 7, 5)), lambda a: theirs(a, output_size=(5, 7, 5)), x)
    lazy = nn.LazyConvTranspose3d(5, 2)
    assert lazy(fl.tensor(x, dtype=fl.float32)).shape == (1, 5, 3, 4, 3)
    assert type(lazy) is nn.ConvTranspose3d and lazy.in_channels == 4


def test_lazy_instance_norm():
    x = RNG.standard_normal((2, 3, 4, 5))
    m = nn.LazyInstanceNorm2d(affine=True, track_running_stats=True)
    y = m(fl.tensor(x))
    assert type(m) is nn.InstanceNorm2d and m.num_features == 3 and m.weight.shape == (3,)
    theirs = torch.nn.LazyInstanceNorm2d(affine=True, track_running_stats=True).double()
    r = theirs(torch.tensor(x))
    np.testing.assert_allclose(y.detach().numpy(), r.detach().numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(m.running_var.numpy(), theirs.running_var.numpy(), rtol=1e-6)
    for cls, shape in ((nn.LazyInstanceNorm1d, (2, 3, 5)), (nn.LazyInstanceNorm3d, (2, 3, 2, 2, 2))):
        m = cls(affine=True)
        m(fl.randn(*shape))
        assert m.weight.shape == (3,)


def test_local_response_norm():
    x = RNG.standard_normal((2, 6, 4, 3))
    _compare(lambda a: nn.LocalResponseNorm(3)(a), lambda a: torch.nn.LocalResponseNorm(3)(a), x)
    _compare(lambda a: F.local_response_norm(a, 2, alpha=0.1, k=2.0),
             lambda a: TF.local_response_norm(a, 2, alpha=0.1, k=2.0), x[:, :, 0])
    _compare(lambda a: F.local_response_norm(a, 4, alpha=0.1), lambda a: TF.local_response_norm(a, 4, alpha=0.1),
             RNG.standard_normal((2, 5, 3, 2, 2)))
    with pytest.raises(ValueError, match="3D or higher"):
        F.local_response_norm(fl.ones(2, 3), 2)


@pytest.mark.parametrize("size", [1, 2, 3, 5, 8])
def test_cross_map_lrn2d_values(size):
    # values as torch's legacy implementation (its quirky running window included); torch's hand-written
    # backward is not the derivative of that forward (and fails for size 1), so only values are compared
    x = RNG.standard_normal((2, 7, 3, 4))
    q = nn.CrossMapLRN2d(size, 0.3, 0.7, 2)(fl.tensor(x))
    r = torch.nn.CrossMapLRN2d(size, 0.3, 0.7, 2)(torch.tensor(x))
    np.testing.assert_allclose(q.numpy(), r.numpy(), rtol=1e-12)
    with pytest.raises(ValueError, match="4D"):
        nn.CrossMapLRN2d(size)(fl.ones(2, 3, 4))


def test_channel_shuffle_and_distances():
    x = RNG.standard_normal((2, 6, 3))
    _compare(lambda a: nn.ChannelShuffle(3)(a), lambda a: torch.nn.ChannelShuffle(3)(a), x)
    assert np.array_equal(F.native_channel_shuffle(fl.tensor(x), 2).numpy(),
                          torch.native_channel_shuffle(torch.tensor(x), 2).numpy())
    assert repr(nn.ChannelShuffle(3)) == "ChannelShuffle(groups=3)"
    with pytest.raises(RuntimeError, match="divisible"):
        F.channel_shuffle(fl.tensor(x), 4)
    a, b = RNG.standard_normal((4, 5)), RNG.standard_normal((4, 5))
    _compare(lambda *t: nn.CosineSimilarity(dim=0)(*t), lambda *t: torch.nn.CosineSimilarity(dim=0)(*t), a, b)
    _compare(lambda *t: nn.PairwiseDistance(p=3.0, keepdim=True)(*t),
             lambda *t: torch.nn.PairwiseDistance(p=3.0, keepdim=True)(*t), a, b)


def test_container_is_deprecated_module():
    with pytest.warns(UserWarning, match="nn.Container is deprecated"):
        c = nn.Container(lin=nn.Linear(2, 3))
    assert isinstance(c, nn.Module) and list(dict(c.named_parameters())) == ["lin.weight", "lin.bias"]


def test_adaptive_log_softmax_with_loss():
    torch.manual_seed(0)
    theirs = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=2.0, head_bias=True).double()
    ours = nn.AdaptiveLogSoftmaxWithLoss(8, 10, [3, 6], div_value=2.0, head_bias=True, dtype=fl.float64)
    assert sorted(ours.state_dict()) == sorted(theirs.state_dict())
    ours.load_state_dict({k: fl.tensor(v.detach().numpy()) for k, v in theirs.state_dict().items()})
    x = RNG.standard_normal((6, 8))
    target = np.array([0, 4, 9, 2, 7, 5])
    xt, xf = torch.tensor(x, requires_grad=True), fl.tensor(x, requires_grad=True)
    r, q = theirs(xt, torch.tensor(target)), ours(xf, fl.tensor(target))
    np.testing.assert_allclose(q.output.detach().numpy(), r.output.detach().numpy(), rtol=1e-10)
    r.loss.backward()
    q.loss.backward()
    np.testing.assert_allclose(xf.grad.numpy(), xt.grad.numpy(), rtol=1e-8, atol=1e-12)
    np.testing.assert_allclose(ours.tail[1][0].weight.grad.numpy(), theirs.tail[1][0].weight.grad.numpy(), rtol=1e-8)
    np.testing.assert_allclose(ours.log_prob(xf).detach().numpy(), theirs.log_prob(xt).detach().numpy(), rtol=1e-10)
    assert ours.predict(xf).tolist() == theirs.predict(xt).tolist()
    np.testing.assert_allclose(ours(xf[0], fl.tensor(4)).output.item(), theirs(xt[0], torch.tensor(4)).output.item())
    with pytest.raises(ValueError, match="cutoffs"):
        nn.AdaptiveLogSoftmaxWithLoss(8, 10, [6, 3])
    with pytest.raises(RuntimeError, match="Target values should be in"):
        ours(xf, fl.tensor([0, 1, 2, 3, 4, 10]))


def test_data_parallel_without_cuda_runs_the_module():
    from flambeau.nn.parallel import DataParallel, data_parallel, gather, parallel_apply

    if fl.cuda.is_available():
        pytest.skip("the CPU path needs no CUDA device")
    lin = nn.Linear(3, 2)
    dp = DataParallel(lin)
    x = fl.randn(4, 3)
    assert dp.device_ids == [] and np.allclose(dp(x).detach().numpy(), lin(x).detach().numpy())
    assert nn.DataParallel is DataParallel and dp.module is lin
    with pytest.raises(RuntimeError, match="device type could not be determined"):
        data_parallel(lin, x)
    # the threaded application and the gathering work on any modules (the CUDA devices are not needed)
    outs = parallel_apply([lin, lin, lin], [(x[:2],), (x[2:3],), (x[3:],)])
    np.testing.assert_allclose(gather(outs, -1).detach().numpy(), lin(x).detach().numpy(), rtol=1e-6)
    with pytest.raises(ZeroDivisionError):
        parallel_apply([lambda: 1 / 0, lambda: 1], [(), ()])


def test_data_parallel_on_cuda():
    """Under ``NUMBA_ENABLE_CUDASIM=1`` (or a GPU): one device id, and two replicas on device 0."""
    from flambeau.nn.parallel import DataParallel, data_parallel, gather, parallel_apply, replicate, scatter

    if not fl.cuda.is_available():
        pytest.skip("needs a CUDA device or the simulator")
    lin = nn.Linear(3, 2)
    x = fl.randn(6, 3)
    dp = DataParallel(lin, device_ids=[0])
    y = dp(x)
    assert y.device == fl.device("cuda", 0) and lin.weight.device == fl.device("cuda", 0)
    y.sum().backward()
    expected = (fl.ones(6, 2).T @ x).numpy()
    np.testing.assert_allclose(lin.weight.grad.cpu().numpy(), expected, rtol=1e-5)
    lin.zero_grad()
    out = gather(parallel_apply(replicate(lin, [0, 0]), scatter((x,), [0, 0])), 0)
    out.sum().backward()  # the replicas' gradients sum into the module's parameters
    np.testing.assert_allclose(out.detach().cpu().numpy(), lin(x.to("cuda:0")).detach().cpu().numpy(), rtol=1e-6)
    np.testing.assert_allclose(lin.weight.grad.cpu().numpy(), expected, rtol=1e-5)
    assert DataParallel(lin, device_ids=[0, 0])(x).shape == (6, 2)
    assert data_parallel(lin, x, device_ids=[0]).shape == (6, 2)
    with pytest.raises(RuntimeError, match="module must have its parameters"):
        data_parallel(nn.Linear(3, 2), x, device_ids=[0])


def test_composites_run_on_cuda():
    """Under ``NUMBA_ENABLE_CUDASIM=1`` (or a GPU): the composites give the CPU's values on CUDA tensors."""
    if not fl.cuda.is_available():
        pytest.skip("needs a CUDA device or the simulator")
    x = RNG.standard_normal((1, 2, 5, 4)).astype(np.float32)
    samples = fl.tensor(RNG.random((1, 2, 2)).astype(np.float32))
    cases = [
        lambda t: F.ctc_loss(t.reshape(5, 2, 4).log_softmax(2), fl.tensor([[1, 2], [3, 0]]).to(t.device), (5, 4),
                             (2, 1)),
        lambda t: F.fractional_max_pool2d(t, 2, output_size=3, _random_samples=samples.to(t.device)),
        lambda t: F.adaptive_max_pool3d(t.unsqueeze(2), (1, 2, 2)),
        lambda t: F.adaptive_avg_pool3d(t.unsqueeze(2), (1, 3, 2)),
        lambda t: nn.CrossMapLRN2d(3)(t),
        lambda t: F.multilabel_margin_loss(t[0, 0], fl.tensor([[1, -1, 0, 0]] * 5).to(t.device)),
    ]
    for case in cases:
        cpu = fl.tensor(x, requires_grad=True)
        gpu = fl.tensor(x).to("cuda:0").requires_grad_()
        a, b = case(cpu), case(gpu)
        assert b.device == fl.device("cuda", 0)
        a.sum().backward()
        b.sum().backward()
        np.testing.assert_allclose(b.detach().cpu().numpy(), a.detach().numpy(), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(gpu.grad.cpu().numpy(), cpu.grad.numpy(), rtol=1e-4, atol=1e-5)
    p = fl.randn(4, 3, device="cuda:0", requires_grad=True)
    q = fl.tensor(p.detach().cpu().numpy(), requires_grad=True)
    grads = fl.randn(4, 3)
    for cls in (optim.Muon, optim.Adafactor):
        for param in (p, q):
            param.grad = grads.to(param.device)
            cls([param]).step()
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
