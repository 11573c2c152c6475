"""The distributions added for issue 13 against torch.distributions: values and gradients of
log_prob, cdf, icdf, entropy and the moments (float64), samples' shape, dtype, support,
reproducibility and first moment, validation messages, and their KL pairs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from _dist_helpers import assert_same, build, check_samples, tensor_pair

import flambeau as fl
import flambeau.distributions as D

torch = pytest.importorskip("torch")

_RNG = np.random.default_rng(5)
_W = _RNG.standard_normal((2, 3, 2)).tolist()
_LOGITS = [[0.2, -1.3, 0.5], [2.0, 0.6, 0.3]]
_A = _RNG.standard_normal((2, 3, 3))
_COV = (_A @ _A.transpose(0, 2, 1) + np.eye(3)).tolist()
_CORR_CHOL = [(np.linalg.cholesky(c) / np.sqrt(np.diag(c))[:, None] * 0 + np.linalg.cholesky(
    np.asarray(c) / np.sqrt(np.outer(np.diag(c), np.diag(c))))).tolist() for c in np.asarray(_COV)]

# name, parameters, a value in the support (batch (2,) unless said), the methods to compare.
CASES = [
    ("Cauchy", {"loc": [0.3, -1.2], "scale": [0.5, 2.0]}, [0.1, 1.5], "cdf icdf entropy mean mode variance"),
    ("HalfNormal", {"scale": [0.5, 2.0]}, [0.1, 1.5], "cdf icdf entropy mean mode variance"),
    ("HalfCauchy", {"scale": [0.5, 2.0]}, [0.1, 1.5], "cdf icdf entropy mean mode variance"),
    ("StudentT", {"df": [0.8, 1.5], "loc": [0.3, -1.0], "scale": [0.5, 2.0]}, [0.1, 1.5], "entropy mean mode variance"),
    ("StudentT", {"df": [3.0, 7.5]}, [0.1, -2.5], "entropy mean variance"),
    ("Chi2", {"df": [0.8, 5.0]}, [0.3, 4.1], "cdf entropy mean mode variance"),
    ("Gamma", {"concentration": [0.7, 30.0], "rate": [1.5, 0.5]}, [0.4, 55.0], "cdf"),
    ("Weibull", {"scale": [0.5, 2.0], "concentration": [0.7, 3.0]}, [0.3, 1.7], "cdf icdf entropy mean mode variance"),
    ("Pareto", {"scale": [0.5, 2.0], "alpha": [0.7, 3.0]}, [0.6, 2.7], "cdf icdf entropy mean mode variance"),
    ("NegativeBinomial", {"total_count": [3.0, 0.5], "probs": [0.3, 0.8]}, [0.0, 4.0], "mean mode variance"),
    ("NegativeBinomial", {"total_count": 4.0, "logits": [-0.3, 1.2]}, [2.0, 7.0], "mean mode variance"),
    ("Multinomial", {"total_count": 6, "probs": [[0.2, 0.3, 0.5], [0.1, 0.6, 0.3]]}, [[1.0, 2.0, 3.0], [0, 6.0, 0]],
     "entropy mean variance"),
    ("Multinomial", {"total_count": 4, "logits": _LOGITS}, [[1.0, 2.0, 1.0], [0, 0, 4.0]], "mean variance"),
    ("VonMises", {"loc": [0.3, -1.0], "concentration": [0.5, 6.0]}, [0.1, 2.5], "mean mode variance"),
    ("LowRankMultivariateNormal", {"loc": [[0.1, 0.2, -0.3], [1.0, 0.0, 2.0]], "cov_factor": _W,
                                   "cov_diag": [[0.5, 1.0, 2.0], [1.5, 0.7, 0.3]]},
     [[0.5, -0.2, 0.1], [1.0, 1.0, 1.0]], "entropy mean mode variance"),
    ("ContinuousBernoulli", {"probs": [0.2, 0.4995]}, [0.3, 0.9], "cdf icdf entropy mean variance"),
    ("ContinuousBernoulli", {"logits": [-1.3, 2.0]}, [0.7, 0.05], "cdf icdf entropy mean variance"),
    ("FisherSnedecor", {"df1": [1.5, 4.0], "df2": [5.0, 9.0]}, [0.4, 2.5], "mean mode variance"),
    ("Kumaraswamy", {"concentration1": [0.7, 2.0], "concentration0": [1.5, 3.0]}, [0.3, 0.6],
     "cdf icdf entropy mean mode variance"),
    ("InverseGamma", {"concentration": [1.5, 4.0], "rate": [0.5, 2.0]}, [0.3, 1.7], "entropy mean mode variance"),
    ("LogisticNormal", {"loc": [[0.2, -0.4], [1.0, 0.5]], "scale": [[0.5, 1.2], [0.8, 0.3]]},
     [[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]], ""),
    ("LKJCholesky", {"dim": 3, "concentration": [0.5, 2.0]}, _CORR_CHOL, ""),
    ("Wishart", {"df": [3.5, 5.0], "covariance_matrix": _COV}, _COV, "entropy mean mode variance"),
]
IDS = [f"{c[0]}-{'-'.join(c[1])}" for c in CASES]


def _case(name):
    return next(c for c in CASES if c[0] == name)


@pytest.mark.parametrize("name,params,value,methods", CASES, ids=IDS)
def test_values_and_gradients_match_torch(name, params, value, methods):
    ours, theirs, fl_params, t_params = build(name, params, torch)
    assert tuple(ours.batch_shape) == tuple(theirs.batch_shape)
    assert tuple(ours.event_shape) == tuple(theirs.event_shape)
    v_ours, v_theirs = tensor_pair(value, torch)
    lp_ours, lp_theirs = ours.log_prob(v_ours), theirs.log_prob(v_theirs)
    assert_same(lp_ours, lp_theirs)
    loss_ours, loss_theirs = lp_ours.sum(), lp_theirs.sum()
    for method in methods.split():
        if method in ("cdf", "icdf"):
            arg, targ = (v_ours, v_theirs) if method == "cdf" else tensor_pair([0.3, 0.8], torch)
            o, t = getattr(ours, method)(arg), getattr(theirs, method)(targ)
            assert_same(o, t, atol=1e-9)  # torch's gammainc is good to ~2e-10 (ours to ~1e-15)
            if method != "cdf" or name not in ("Gamma", "Chi2"):  # no derivative w.r.t. the shape
                loss_ours, loss_theirs = loss_ours + o.sum(), loss_theirs + t.sum()
        elif method == "entropy":
            # torch's Multinomial.entropy takes lgamma(n + 1) of an int64 tensor, in float32.
            assert_same(ours.entropy(), theirs.entropy(), rtol=1e-7 if name == "Multinomial" else 1e-9)
            loss_ours, loss_theirs = loss_ours + ours.entropy().sum(), loss_theirs + theirs.entropy().sum()
        else:
            o, t = getattr(ours, method), getattr(theirs, method)
            assert_same(o, t)
            finite = np.isfinite(t.detach().numpy())
            if finite.all() and o.requires_grad:
                loss_ours, loss_theirs = loss_ours + o.sum(), loss_theirs + t.sum()
    loss_ours.backward()
    loss_theirs.backward()
    for key, p in fl_params.items():
        if isinstance(p, fl.Tensor) and t_params[key].grad is not None:
            assert_same(p.grad, t_params[key].grad)


def test_gamma_cdf_gradient_wrt_value_and_rate_and_none_wrt_shape():
    ours, theirs, p, tp = build("Gamma", {"concentration": [0.7, 30.0], "rate": [1.5, 0.5]}, torch)
    x, tx = tensor_pair([0.4, 55.0], torch)
    x.requires_grad_(True)
    tx.requires_grad_(True)
    p["concentration"].requires_grad_(False)
    tp["concentration"].detach_()
    ours = D.Gamma(p["concentration"].detach(), p["rate"])
    theirs = torch.distributions.Gamma(tp["concentration"].detach(), tp["rate"])
    ours.cdf(x).sum().backward()
    theirs.cdf(tx).sum().backward()
    assert_same(x.grad, tx.grad)
    assert_same(p["rate"].grad, tp["rate"].grad)
    with pytest.raises(NotImplementedError, match="the derivative for 'igamma: input' is not implemented"):  # torch's
        D.Gamma(fl.tensor([2.0], requires_grad=True), 1.0).cdf(fl.tensor([1.0])).sum().backward()


def _mixture(lib, params):
    mix = lib.Categorical(logits=params["logits"])
    comp = lib.Independent(lib.Normal(params["loc"], params["scale"]), 1)
    return lib.MixtureSameFamily(mix, comp)


def test_mixture_same_family_matches_torch():
    arrays = {"logits": np.array(_LOGITS), "loc": _RNG.standard_normal((2, 3, 2)),
              "scale": _RNG.uniform(0.5, 2.0, (2, 3, 2))}
    fp = {k: fl.tensor(v, dtype=fl.float64, requires_grad=True) for k, v in arrays.items()}
    tp = {k: torch.tensor(v, dtype=torch.float64, requires_grad=True) for k, v in arrays.items()}
    ours, theirs = _mixture(D, fp), _mixture(torch.distributions, tp)
    assert tuple(ours.batch_shape) == (2,) and tuple(ours.event_shape) == (2,)
    x, tx = tensor_pair(_RNG.standard_normal((4, 2, 2)), torch)
    assert_same(ours.log_prob(x), theirs.log_prob(tx))
    assert_same(ours.mean, theirs.mean)
    assert_same(ours.variance, theirs.variance)
    (ours.log_prob(x).sum() + ours.variance.sum()).backward()
    (theirs.log_prob(tx).sum() + theirs.variance.sum()).backward()
    for k in fp:
        assert_same(fp[k].grad, tp[k].grad)
    fl.manual_seed(0)
    s = ours.sample((20000,))
    assert tuple(s.shape) == (20000, 2, 2) and not s.requires_grad
    np.testing.assert_allclose(s.numpy().mean(0), theirs.mean.detach().numpy(), atol=0.06)
    np.testing.assert_allclose(s.numpy().var(0), theirs.variance.detach().numpy(), rtol=0.06)
    # Univariate components: cdf is the mixture of the components' cdfs.
    uni = D.MixtureSameFamily(D.Categorical(logits=fp["logits"]), D.Normal(fp["loc"][..., 0], fp["scale"][..., 0]))
    tuni = torch.distributions.MixtureSameFamily(torch.distributions.Categorical(logits=tp["logits"]),
                                                 torch.distributions.Normal(tp["loc"][..., 0], tp["scale"][..., 0]))
    v, tv = tensor_pair([0.3, -0.4], torch)
    assert_same(uni.cdf(v), tuni.cdf(tv))
    assert_same(uni.expand((5, 2)).log_prob(v), tuni.expand((5, 2)).log_prob(tv))
    with pytest.raises(ValueError, match="does not equal"):
        D.MixtureSameFamily(D.Categorical(logits=fl.zeros(4)), D.Normal(fl.zeros(3), fl.ones(3)))


def test_lowrank_matrices_match_torch():
    ours, theirs, p, tp = build("LowRankMultivariateNormal", _case("LowRankMultivariateNormal")[1], torch)
    for attr in ("covariance_matrix", "precision_matrix", "scale_tril"):
        assert_same(getattr(ours, attr), getattr(theirs, attr))
    assert_same(ours.expand((3, 2)).log_prob(fl.zeros(3, 2, 3, dtype=fl.float64)),
                theirs.expand((3, 2)).log_prob(torch.zeros(3, 2, 3, dtype=torch.float64)))


# Samples: shape, dtype, support, reproducibility, and the first moment over 8k draws.
SAMPLED = [c for c in CASES if not (c[0] == "StudentT" and "loc" in c[1])]


@pytest.mark.filterwarnings("ignore:Singular sample detected")  # torch's Wishart sampler, on its draws
@pytest.mark.parametrize("name,params,value,methods", SAMPLED, ids=[f"{c[0]}-{'-'.join(c[1])}" for c in SAMPLED])
def test_samples_shape_dtype_support_and_mean(name, params, value, methods):
    ours, theirs, _, _ = build(name, params, torch, grad=False)
    n = 8000
    samples, expected = check_samples(ours, theirs, n)
    x = samples.numpy()
    if name in ("Cauchy", "HalfCauchy", "Pareto"):  # heavy tails: compare medians instead
        np.testing.assert_allclose(np.median(x, 0), theirs.icdf(torch.tensor(0.5, dtype=torch.float64)).numpy(),
                                   rtol=0.05)
    elif name == "LogisticNormal":  # no closed-form mean: against torch's Monte Carlo one
        np.testing.assert_allclose(x.mean(0), expected.numpy().mean(0), atol=0.025)
    elif name == "LKJCholesky":  # no moments: the correlations' means are 0
        corr = x @ x.transpose(0, 1, 3, 2)
        np.testing.assert_allclose(corr.mean(0), np.broadcast_to(np.eye(3), (2, 3, 3)), atol=0.04)
    elif name == "VonMises":  # circular: the mean direction and resultant length
        c, s = np.cos(x).mean(0), np.sin(x).mean(0)
        np.testing.assert_allclose(np.arctan2(s, c), theirs.loc.numpy(), atol=0.1)
        np.testing.assert_allclose(1 - np.hypot(c, s), theirs.variance.numpy(), atol=0.03)
    else:
        mean, std = theirs.mean.detach().numpy(), theirs.stddev.detach().numpy()
        np.testing.assert_array_less(np.abs(x.mean(0) - mean), 5 * std / math.sqrt(n) + 1e-12)


def test_rsample_gradients_flow_to_every_parameter():
    for name in ("Cauchy", "HalfNormal", "StudentT", "Weibull", "Pareto", "LowRankMultivariateNormal", "Chi2"):
        params = _case(name)[1]
        ours, theirs, p, _ = build(name, params, torch)
        assert ours.has_rsample == theirs.has_rsample
        ours.rsample((3,)).sum().backward()
        for key, value in p.items():
            if isinstance(value, fl.Tensor):
                assert value.grad is not None and bool(fl.isfinite(value.grad).all()), (name, key)
    # Cauchy's pathwise gradient: x = loc + eps * scale.
    ours, _, p, _ = build("Cauchy", {"loc": [0.3, -1.0], "scale": [0.5, 2.0]}, torch)
    x = ours.rsample((50,))
    x.sum().backward()
    eps = (x.detach().numpy() - p["loc"].detach().numpy()) / p["scale"].detach().numpy()
    np.testing.assert_allclose(p["scale"].grad.numpy(), eps.sum(0), rtol=1e-10)


@pytest.mark.parametrize("name,params,bad", [
    ("StudentT", {"df": [-1.0, 2.0]}, "df"),
    ("HalfNormal", {"scale": [0.0, 1.0]}, "scale"),
    ("Weibull", {"scale": [1.0, 1.0], "concentration": [1.0, -2.0]}, "concentration"),
    ("NegativeBinomial", {"total_count": 2.0, "probs": [1.0, 0.5]}, "probs"),
    ("VonMises", {"loc": [0.0, 1.0], "concentration": [0.0, 1.0]}, "concentration"),
])
def test_invalid_parameters_raise_torch_message(name, params, bad):
    for lib in (D, torch.distributions):
        args = {k: v if isinstance(v, float) else (fl.tensor(v) if lib is D else torch.tensor(v))
                for k, v in params.items()}
        with pytest.raises(ValueError, match=f"Expected parameter {bad} "):
            getattr(lib, name)(**args)


def test_invalid_values_raise():
    with pytest.raises(ValueError, match="within the support"):
        D.HalfNormal(fl.ones(2)).log_prob(fl.tensor([-1.0, 1.0]))
    with pytest.raises(ValueError, match="within the support"):
        D.Pareto(fl.ones(2), fl.ones(2)).log_prob(fl.tensor([0.5, 1.0]))
    with pytest.raises(ValueError, match="within the support"):
        D.Multinomial(3, fl.ones(3)).log_prob(fl.tensor([1.0, -1.0, 3.0]))
    with pytest.raises(NotImplementedError, match="inhomogeneous"):
        D.Multinomial(fl.tensor(3), fl.ones(3))


def test_expand_matches_torch():
    for name, params, value, _ in CASES:
        if name in ("Multinomial", "LowRankMultivariateNormal"):
            continue
        ours, theirs, _, _ = build(name, params, torch, grad=False)
        v, tv = tensor_pair(value, torch)
        e, te = ours.expand((3, 2)), theirs.expand((3, 2))
        assert tuple(e.batch_shape) == (3, 2)
        assert_same(e.log_prob(v), te.log_prob(tv))
        assert tuple(e.sample((4,)).shape) == (4, 3, 2) + tuple(theirs.event_shape)
    _, params, value, _ = _case("Multinomial")
    ours, theirs, _, _ = build("Multinomial", params, torch, grad=False)
    assert_same(ours.expand((3, 2)).log_prob(fl.tensor(value, dtype=fl.float64)),
                theirs.expand((3, 2)).log_prob(torch.tensor(value, dtype=torch.float64)))


def test_generalized_pareto_matches_torch_in_float32():
    # torch's GeneralizedPareto compares with a float32 zero, so it fails on float64 parameters.
    params = {"loc": [0.1, -1.0, 0.0], "scale": [0.5, 2.0, 1.0], "concentration": [0.3, -0.2, 0.0]}
    fp = {k: fl.tensor(v, requires_grad=True) for k, v in params.items()}
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    ours, theirs = D.GeneralizedPareto(**fp), torch.distributions.GeneralizedPareto(**tp)
    v, tv = tensor_pair([0.4, 2.5, 1.0], torch, "float32")
    u, tu = tensor_pair([0.3, 0.8, 0.5], torch, "float32")
    loss_o, loss_t = 0, 0
    pairs = [(ours.log_prob(v), theirs.log_prob(tv)), (ours.cdf(v), theirs.cdf(tv)), (ours.icdf(u), theirs.icdf(tu)),
             (ours.entropy(), theirs.entropy()), (ours.mean, theirs.mean), (ours.variance, theirs.variance),
             (ours.mode, theirs.mode)]
    for o, t in pairs:
        assert_same(o, t, rtol=2e-6, atol=1e-6)
        loss_o, loss_t = loss_o + o.sum(), loss_t + t.sum()
    loss_o.backward()
    loss_t.backward()
    for k in fp:
        assert_same(fp[k].grad, tp[k].grad, rtol=1e-5, atol=1e-5)
    assert_same(ours.support.upper_bound, theirs.support.upper_bound)
    fl.manual_seed(0)
    x = ours.sample((20000,))
    assert bool(ours.support.check(x).all()) and not x.requires_grad
    np.testing.assert_allclose(x.numpy().mean(0)[1:], theirs.mean.detach().numpy()[1:], rtol=0.03)


def test_wishart_and_lkj_match_torch_beyond_log_prob():
    ours, theirs, p, tp = build("Wishart", {"df": [3.5, 5.0], "covariance_matrix": _COV}, torch)
    for attr in ("precision_matrix", "scale_tril"):
        assert_same(getattr(ours, attr), getattr(theirs, attr))
    prec = {"df": 4.0, "precision_matrix": np.linalg.inv(np.asarray(_COV)).tolist()}
    o2, t2, _, _ = build("Wishart", prec, torch)
    assert_same(o2.log_prob(fl.tensor(_COV, dtype=fl.float64)), t2.log_prob(torch.tensor(_COV, dtype=torch.float64)))
    with pytest.raises(ValueError, match="expected to be greater than ndim - 1"):
        D.Wishart(1.5, covariance_matrix=fl.eye(3))
    # rsample: gradients reach the scale and df (through the chi-squared diagonal).
    fl.manual_seed(0)
    ours.rsample((2,)).sum().backward()
    assert p["df"].grad is not None and p["covariance_matrix"].grad is not None
    lkj = D.LKJCholesky(4, fl.tensor([0.5, 3.0], dtype=fl.float64))
    tlkj = torch.distributions.LKJCholesky(4, torch.tensor([0.5, 3.0], dtype=torch.float64))
    fl.manual_seed(1)
    sample = lkj.sample((3,))
    assert tuple(sample.shape) == (3, 2, 4, 4) and bool(D.constraints.corr_cholesky.check(sample).all())
    assert_same(lkj.log_prob(sample), tlkj.log_prob(torch.tensor(sample.numpy())))
    with pytest.raises(ValueError, match="greater than or equal to 2"):
        D.LKJCholesky(1)


def test_every_torch_distribution_class_exists_with_its_static_attributes():
    tc = torch.distributions.constraints
    classes = [n for n in dir(torch.distributions) if not n.startswith("_")
               and isinstance(getattr(torch.distributions, n), type)
               and issubclass(getattr(torch.distributions, n), torch.distributions.Distribution)]
    assert len(classes) > 40
    for name in classes:
        theirs, ours = getattr(torch.distributions, name), getattr(D, name)
        assert issubclass(ours, D.Distribution), name
        for attr in ("has_rsample", "has_enumerate_support"):
            if isinstance(getattr(theirs, attr), bool):
                assert getattr(ours, attr) == getattr(theirs, attr), (name, attr)
        t_args, o_args = theirs.arg_constraints, ours.arg_constraints
        if isinstance(t_args, dict):
            assert set(t_args) == set(o_args), name
            for key, constraint in t_args.items():
                if not tc.is_dependent(constraint):
                    assert repr(o_args[key]) == repr(constraint), (name, key)
        support = theirs.support
        if isinstance(support, tc.Constraint) and not tc.is_dependent(support):
            assert repr(ours.support) == repr(support), name
    assert issubclass(D.Normal, D.ExponentialFamily) and issubclass(D.Wishart, D.ExponentialFamily)
