"""F.gumbel_softmax (``flambeau/nn/_functional/activation.py``) against torch and against its distribution.

torch draws its Gumbel noise as ``-log(Exponential(1))``; the exact-value tests replay torch's draw
(same seed, same ``exponential_`` call) and give that noise to flambeau's sampler.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import flambeau as fl
import flambeau.nn.functional as F
from flambeau.nn._functional.activation import _gumbel_softmax_sample

torch = pytest.importorskip("torch")


def torch_noise(shape, seed, dtype=torch.float64):
    torch.manual_seed(seed)
    return -torch.empty(shape, dtype=dtype).exponential_().log()


@pytest.mark.parametrize("hard", [False, True])
@pytest.mark.parametrize("tau,dim,shape", [(1.0, -1, (4, 5)), (0.3, 0, (6, 3)), (2.0, 1, (2, 4, 3))], ids=str)
def test_value_and_gradient_match_torch_with_the_same_noise(hard, tau, dim, shape):
    rng = np.random.default_rng(0)
    logits = rng.standard_normal(shape)
    g = rng.standard_normal(shape)
    torch.manual_seed(11)
    tx = torch.from_numpy(logits).requires_grad_(True)
    ty = torch.nn.functional.gumbel_softmax(tx, tau=tau, hard=hard, dim=dim)
    ty.backward(torch.from_numpy(g))
    noise = torch_noise(shape, 11)
    x = fl.from_numpy(logits.copy()).requires_grad_(True)
    y = _gumbel_softmax_sample(x, fl.from_numpy(noise.numpy()), tau, hard, dim)
    y.backward(fl.from_numpy(g))
    np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_hard_is_one_hot_with_the_soft_gradient():
    logits = fl.from_numpy(np.random.default_rng(1).standard_normal((8, 6))).requires_grad_(True)
    g = fl.from_numpy(np.random.default_rng(2).standard_normal((8, 6)))
    fl.manual_seed(3)
    y_hard = F.gumbel_softmax(logits, tau=0.5, hard=True)
    y = y_hard.detach().numpy()
    assert set(np.unique(y)) == {0.0, 1.0} and (y.sum(1) == 1).all()
    (y_hard * g).sum().backward()
    grad_hard = logits.grad.numpy().copy()
    logits.grad = None
    fl.manual_seed(3)  # the same noise: the soft sample whose argmax the hard one is
    y_soft = F.gumbel_softmax(logits, tau=0.5)
    assert (y_soft.detach().numpy().argmax(1) == y.argmax(1)).all()
    (y_soft * g).sum().backward()
    np.testing.assert_allclose(grad_hard, logits.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_samples_follow_the_softmax_of_the_logits():
    # Gumbel-max: argmax(logits + G) ~ Categorical(softmax(logits)); the soft sample sums to 1
    probs = np.array([0.05, 0.15, 0.3, 0.5])
    n = 20000
    logits = fl.from_numpy(np.tile(np.log(probs), (n, 1)))
    fl.manual_seed(0)
    y = F.gumbel_softmax(logits, tau=0.7, hard=True).numpy()
    freq = y.mean(0)
    sd = np.sqrt(probs * (1 - probs) / n)
    assert (np.abs(freq - probs) < 5 * sd).all(), (freq, probs)
    soft = F.gumbel_softmax(logits, tau=0.7).numpy()
    np.testing.assert_allclose(soft.sum(1), 1.0, rtol=1e-12)
    assert (soft > 0).all()
    # a lower temperature concentrates the soft samples: their largest entry grows
    colder = F.gumbel_softmax(logits, tau=0.1).numpy()
    assert colder.max(1).mean() > soft.max(1).mean() + 0.1


def test_deprecated_eps_warns_and_dtype_is_kept():
    x = fl.zeros(2, 3, dtype=fl.float32)
    with pytest.warns(UserWarning, match="`eps` parameter is deprecated and has no effect."):
        F.gumbel_softmax(x, eps=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert F.gumbel_softmax(x).dtype == fl.float32
