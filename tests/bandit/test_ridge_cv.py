"""Ridge weight by leave-one-out error with the one-standard-error rule."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgwise.bandit import select_ridge
from kgwise.errors import ConfigError


def _brute_force_loo(X: np.ndarray, y: np.ndarray, lam: float, intercept: bool) -> np.ndarray:
    """Refit without each row in turn; with ``intercept`` a constant feature that is not penalised."""
    C = np.c_[X, np.ones(len(y))] if intercept else X
    penalty = np.diag([lam] * X.shape[1] + [0.0] * intercept)
    out = []
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        w = np.linalg.solve(C[keep].T @ C[keep] + penalty, C[keep].T @ y[keep])
        out.append((y[i] - C[i] @ w) ** 2)
    return np.array(out)


@settings(max_examples=20, deadline=None)
@given(st.integers(4, 25), st.integers(1, 12), st.integers(0, 10_000), st.booleans())
def test_loo_errors_and_the_one_se_rule(n: int, d: int, seed: int, intercept: bool) -> None:
    rng = np.random.default_rng(seed)
    X, y = rng.normal(size=(n, d)), rng.integers(2, size=n).astype(float)
    grid = (0.1, 1.0, 10.0, 100.0)
    choice = select_ridge(X, y, grid, intercept=intercept)
    errors = np.array([_brute_force_loo(X, y, g, intercept) for g in grid])
    assert np.allclose(choice.loo_mse, errors.mean(axis=1), rtol=1e-6, atol=1e-9)
    assert np.allclose(choice.loo_se, errors.std(axis=1, ddof=1) / np.sqrt(n), rtol=1e-6, atol=1e-9)
    # the rule, on the reported errors: the largest weight within one standard error of the best
    mse, se = np.array(choice.loo_mse), np.array(choice.loo_se)
    best = int(np.argmin(mse))
    assert choice.ridge == max(g for g, m in zip(grid, mse, strict=True) if m <= mse[best] + se[best])
    plain = select_ridge(X, y, grid, one_se=False, intercept=intercept)
    assert plain.loo_mse[grid.index(plain.ridge)] == min(plain.loo_mse)


def test_signal_gets_a_small_weight_and_noise_a_large_one() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 20))
    grid = tuple(float(g) for g in np.logspace(-2, 4, 13))
    signal = X[:, 0] * 2.0 + 0.1 * rng.normal(size=200)
    noise = rng.integers(2, size=200).astype(float)
    assert select_ridge(X, signal, grid).ridge <= 1.0
    assert select_ridge(X, noise, grid).ridge >= 1000.0


def test_bad_inputs_are_named() -> None:
    with pytest.raises(ConfigError, match="grid"):
        select_ridge(np.ones((4, 2)), np.ones(4), [0.0, 1.0])
    with pytest.raises(ConfigError, match="rows"):
        select_ridge(np.ones((4, 2)), np.ones(3), [1.0])
