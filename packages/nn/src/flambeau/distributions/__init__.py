"""Probability distributions (``torch.distributions``): parameterised, sampleable distributions
with log-densities, entropies and moments, reparameterised sampling (``rsample``) for
pathwise gradients, transforms, and the KL-divergence registry.

The score-function (REINFORCE) estimator needs only ``sample`` and ``log_prob``::

    probs = policy(state)
    m = Categorical(probs)
    action = m.sample()
    next_state, reward = env.step(action)
    loss = -m.log_prob(action) * reward
    loss.backward()
"""

from flambeau.distributions import constraints, transforms
from flambeau.distributions.bernoulli import Bernoulli
from flambeau.distributions.beta import Beta
from flambeau.distributions.binomial import Binomial
from flambeau.distributions.categorical import Categorical
from flambeau.distributions.cauchy import Cauchy
from flambeau.distributions.chi2 import Chi2
from flambeau.distributions.constraint_registry import biject_to, transform_to
from flambeau.distributions.continuous_bernoulli import ContinuousBernoulli
from flambeau.distributions.dirichlet import Dirichlet
from flambeau.distributions.distribution import Distribution
from flambeau.distributions.exp_family import ExponentialFamily
from flambeau.distributions.exponential import Exponential
from flambeau.distributions.fishersnedecor import FisherSnedecor
from flambeau.distributions.gamma import Gamma
from flambeau.distributions.generalized_pareto import GeneralizedPareto
from flambeau.distributions.geometric import Geometric
from flambeau.distributions.gumbel import Gumbel
from flambeau.distributions.half_normal import HalfCauchy, HalfNormal
from flambeau.distributions.independent import Independent
from flambeau.distributions.inverse_gamma import InverseGamma, Kumaraswamy, LogisticNormal
from flambeau.distributions.kl import kl_divergence, register_kl
from flambeau.distributions.laplace import Laplace
from flambeau.distributions.lkj_cholesky import LKJCholesky
from flambeau.distributions.log_normal import LogNormal
from flambeau.distributions.lowrank_multivariate_normal import LowRankMultivariateNormal
from flambeau.distributions.mixture_same_family import MixtureSameFamily
from flambeau.distributions.multinomial import Multinomial
from flambeau.distributions.multivariate_normal import MultivariateNormal
from flambeau.distributions.negative_binomial import NegativeBinomial
from flambeau.distributions.normal import Normal
from flambeau.distributions.one_hot_categorical import OneHotCategorical, OneHotCategoricalStraightThrough
from flambeau.distributions.poisson import Poisson
from flambeau.distributions.relaxed_bernoulli import LogitRelaxedBernoulli, RelaxedBernoulli
from flambeau.distributions.relaxed_categorical import ExpRelaxedCategorical, RelaxedOneHotCategorical
from flambeau.distributions.student_t import StudentT
from flambeau.distributions.transformed_distribution import TransformedDistribution
from flambeau.distributions.transforms import (
    AbsTransform,
    AffineTransform,
    CatTransform,
    ComposeTransform,
    CorrCholeskyTransform,
    CumulativeDistributionTransform,
    ExpTransform,
    IndependentTransform,
    LowerCholeskyTransform,
    PositiveDefiniteTransform,
    PowerTransform,
    ReshapeTransform,
    SigmoidTransform,
    SoftmaxTransform,
    SoftplusTransform,
    StackTransform,
    StickBreakingTransform,
    TanhTransform,
    Transform,
    identity_transform,
)
from flambeau.distributions.uniform import Uniform
from flambeau.distributions.von_mises import VonMises
from flambeau.distributions.weibull import Pareto, Weibull
from flambeau.distributions.wishart import Wishart

__all__ = [
    "AbsTransform", "AffineTransform", "Bernoulli", "Beta", "Binomial", "CatTransform", "Categorical", "Cauchy",
    "Chi2", "ComposeTransform", "ContinuousBernoulli", "CorrCholeskyTransform", "CumulativeDistributionTransform",
    "Dirichlet", "Distribution", "ExpRelaxedCategorical", "ExpTransform", "Exponential", "ExponentialFamily",
    "FisherSnedecor", "Gamma", "GeneralizedPareto", "Geometric", "Gumbel", "HalfCauchy", "HalfNormal", "Independent",
    "IndependentTransform", "InverseGamma", "Kumaraswamy", "LKJCholesky", "Laplace", "LogNormal", "LogisticNormal",
    "LogitRelaxedBernoulli", "LowRankMultivariateNormal", "LowerCholeskyTransform", "MixtureSameFamily",
    "Multinomial", "MultivariateNormal", "NegativeBinomial", "Normal", "OneHotCategorical",
    "OneHotCategoricalStraightThrough", "Pareto", "Poisson", "PositiveDefiniteTransform", "PowerTransform",
    "RelaxedBernoulli", "RelaxedOneHotCategorical", "ReshapeTransform", "SigmoidTransform", "SoftmaxTransform",
    "SoftplusTransform", "StackTransform", "StickBreakingTransform", "StudentT", "TanhTransform", "Transform",
    "TransformedDistribution", "Uniform", "VonMises", "Weibull", "Wishart", "biject_to", "constraints",
    "identity_transform", "kl_divergence", "register_kl", "transform_to", "transforms",
]
