"""Bandit policies speaking one set of verbs (:class:`Policy`: ``pull`` / ``update`` / state round trip):
LinUCB (ridge + Sherman–Morrison) and Beta–Bernoulli Thompson sampling; ridge weights by leave-one-out
error."""

from kgwise.bandit.base import Policy
from kgwise.bandit.linucb import LinUCB, LinUCBConfig, gamma_from_delta
from kgwise.bandit.ridge_cv import RidgeChoice, select_ridge
from kgwise.bandit.thompson import BetaThompson, ThompsonConfig, beta_prior_from_accuracy

__all__ = [
    "BetaThompson",
    "LinUCB",
    "LinUCBConfig",
    "Policy",
    "RidgeChoice",
    "ThompsonConfig",
    "beta_prior_from_accuracy",
    "gamma_from_delta",
    "select_ridge",
]
