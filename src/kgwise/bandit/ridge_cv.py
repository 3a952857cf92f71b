"""Choosing a ridge weight from an arm's own history: leave-one-out error with the one-standard-error rule.

The leave-one-out squared errors of ridge regression for every weight on a grid come in closed form
(scikit-learn's ``RidgeCV``, efficient LOO). The rule then takes the *largest* weight whose mean LOO
error is within one standard error of the smallest (Hastie, Tibshirani & Friedman, *Elements of
Statistical Learning*, §7.10): the simplest model the data cannot tell apart from the best one.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kgwise.errors import ConfigError

__all__ = ["RidgeChoice", "select_ridge"]


@dataclass(frozen=True)
class RidgeChoice:
    """The chosen weight, and the mean and standard error of the LOO squared error per grid weight."""

    ridge: float
    grid: tuple[float, ...]
    loo_mse: tuple[float, ...]
    loo_se: tuple[float, ...]


def select_ridge(
    contexts: npt.ArrayLike,
    rewards: npt.ArrayLike,
    grid: Sequence[float],
    one_se: bool = True,
    intercept: bool = True,
) -> RidgeChoice:
    """The ridge weight for ``rewards ≈ contexts · w (+ b)`` among ``grid`` by leave-one-out error;
    ``intercept``: fit an unpenalised ``b``; ``one_se``: apply the one-standard-error rule."""
    from sklearn.linear_model import RidgeCV

    X = np.asarray(contexts, dtype=np.float64)
    y = np.asarray(rewards, dtype=np.float64).reshape(-1)
    lams = tuple(sorted(float(g) for g in grid))
    if not lams or lams[0] <= 0:
        raise ConfigError(f"ridge grid must hold weights > 0, got {list(grid)}")
    if X.ndim != 2 or X.shape[0] != y.shape[0] or X.shape[0] < 2:
        raise ConfigError(f"select_ridge needs ≥ 2 rows of contexts and one reward each, got {X.shape} "
                          f"and {y.shape}")
    cv = RidgeCV(alphas=lams, fit_intercept=intercept, store_cv_results=True).fit(X, y)
    errors = np.asarray(cv.cv_results_).reshape(len(y), len(lams))  # squared LOO error per sample, weight
    mse = errors.mean(axis=0)
    se = errors.std(axis=0, ddof=1) / np.sqrt(len(y))
    best = int(np.argmin(mse))
    pick = max(i for i in range(len(lams)) if mse[i] <= mse[best] + se[best]) if one_se else best
    return RidgeChoice(lams[pick], lams, tuple(mse.tolist()), tuple(se.tolist()))
