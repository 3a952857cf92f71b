"""Bandit policies: LinUCB (ridge + Sherman–Morrison) and Beta–Bernoulli Thompson sampling."""

from kgwise.bandit.linucb import LinUCB, LinUCBConfig, gamma_from_delta
from kgwise.bandit.thompson import BetaThompson, ThompsonConfig, beta_prior_from_accuracy

__all__ = [
    "BetaThompson",
    "LinUCB",
    "LinUCBConfig",
    "ThompsonConfig",
    "beta_prior_from_accuracy",
    "gamma_from_delta",
]
