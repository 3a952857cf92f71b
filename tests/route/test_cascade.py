"""The learned cascade's rule: its arms, its threshold under the budget, and how it narrows a pull."""

from __future__ import annotations

import numpy as np
import pytest

from kgwise.errors import ConfigError
from kgwise.route.cascade import CascadeRule, fit_cascade


def _log(n: int = 200) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Arm 0 free and right when its predicted success is high; arm 1 dear (cost 2) and right 80 %."""
    rng = np.random.default_rng(0)
    p_free = rng.random(n)
    correct = np.stack([rng.random(n) < p_free, rng.random(n) < 0.8], axis=1).astype(float)
    contexts = np.stack([np.ones(n), p_free, np.full(n, 0.8)], axis=1)
    cost = np.stack([np.zeros(n), np.full(n, 2.0)], axis=1)
    return contexts, correct, cost


def test_the_cascade_escalates_where_the_free_arm_is_unsure_within_the_budget() -> None:
    X, Y, C = _log()
    rule = fit_cascade(X, Y, C, budget_per_question=0.6)  # affords escalating 30 % of the questions
    assert (rule.cheap, rule.strong) == (0, 1)
    assert 0 < rule.share <= 0.3 + 1e-9
    up = rule.escalate(X)
    assert up.mean() == pytest.approx(rule.share)
    assert X[up, 1].max() < X[~up, 1].min()  # the least confident free answers go up
    cascade = np.where(up, Y[:, 1], Y[:, 0]).mean()
    assert rule.accuracy == pytest.approx(cascade) and cascade > Y[:, 0].mean()


def test_the_threshold_is_read_from_the_deployed_predictors_rows() -> None:
    X, Y, C = _log()
    flat = X.copy()
    flat[:, 1] = 0.5 + 0.1 * (X[:, 1] - 0.5)  # a predictor that spreads its predictions less
    rule = fit_cascade(X, Y, C, 0.6, deployed=flat)
    assert rule.escalate(flat).mean() == pytest.approx(rule.share)  # the same share on its own rows
    assert fit_cascade(X, Y, C, 0.6).escalate(flat).mean() != pytest.approx(rule.share)


def test_narrow_keeps_the_rules_pick_among_affordable_arms() -> None:
    rule = CascadeRule(cheap=0, strong=2, threshold=0.1, share=0.5, accuracy=0.5)
    up, down = np.array([1.0, 0.2, 0.0, 0.9]), np.array([1.0, 0.9, 0.0, 0.2])
    assert rule.narrow(np.ones(3, dtype=bool), up).tolist() == [False, False, True]
    assert rule.narrow(np.ones(3, dtype=bool), down).tolist() == [True, False, False]
    # the strong arm unaffordable: the free one answers; neither: the mask stays as it was
    assert rule.narrow(np.array([True, True, False]), up).tolist() == [True, False, False]
    assert rule.narrow(np.array([False, True, False]), up).tolist() == [False, True, False]
    assert CascadeRule.from_dict(rule.to_dict(["a", "b", "c"]), ["a", "b", "c"]) == rule


def test_without_a_free_arm_the_cheapest_arm_answers_first_and_its_cost_counts() -> None:
    X, Y, C = _log()
    rule = fit_cascade(X, Y, C + 0.2, 0.6)  # (0.6 − 0.2) / 2.2 of the questions can go up
    assert (rule.cheap, rule.strong) == (0, 1)
    assert 0 < rule.share <= 0.4 / 2.2 + 1 / len(Y)  # the quantile escalates whole questions
    assert fit_cascade(X, Y, C, 0.6, shares=(1.0,)).share == pytest.approx(0.3)  # the whole budget
    with pytest.raises(ConfigError, match="two arms"):
        fit_cascade(X[:, :2], Y[:, :1], C[:, :1], 0.6)
