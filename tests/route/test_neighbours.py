"""The neighbour success predictor: the shrunk share of right answers among the k most similar graded
questions; leaving a fitted question out equals fitting without it; ungraded outcomes are skipped."""

from __future__ import annotations

import numpy as np
import pytest

from kgwise.errors import ConfigError
from kgwise.route.neighbours import NeighbourConfig, NeighbourPredictor


def test_the_k_nearest_graded_questions_shrunk_to_the_arm_mean() -> None:
    X = np.array([[1.0, 0.0], [0.9, 0.1], [0.8, 0.2], [0.0, 1.0], [0.1, 0.9]])
    Y = np.array([[1, 0], [1, np.nan], [0, 0], [0, 1], [0, 1]], dtype=float)
    p = NeighbourPredictor(2, NeighbourConfig(k=2, prior=1.0)).fit(X, Y).predict([[1.0, 0.05]])[0]
    # arm 0: nearest two are rows 0 and 1 (1, 1), its mean 2/5; arm 1: rows 0 and 2 (row 1 ungraded), mean 2/4
    assert p[0] == pytest.approx((2 + 2 / 5) / 3)
    assert p[1] == pytest.approx((0 + 2 / 4) / 3)


def test_leaving_a_question_out_equals_fitting_without_it() -> None:
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 5))
    Y = (rng.random((30, 3)) < 0.5).astype(float)
    Y[rng.random((30, 3)) < 0.2] = np.nan
    cfg = NeighbourConfig(k=4, prior=2.0)
    loo = NeighbourPredictor(3, cfg).fit(X, Y).predict(X, exclude_self=True)
    for i in range(30):
        rest = np.arange(30) != i
        alone = NeighbourPredictor(3, cfg).fit(X[rest], Y[rest]).predict(X[i:i + 1])[0]
        assert loo[i] == pytest.approx(alone)


def test_update_adds_questions_and_bad_shapes_are_named() -> None:
    model = NeighbourPredictor(1, NeighbourConfig(k=1, prior=0.0)).fit([[1.0, 0.0]], [[0.0]])
    model.update([[0.0, 1.0]], [[1.0]])
    assert model.predict([[0.1, 1.0]])[0, 0] == 1.0
    with pytest.raises(ConfigError, match="outcomes must be"):
        model.update([[0.0, 1.0]], [[1.0, 0.0]])
    with pytest.raises(ConfigError, match="k ≥ 1"):
        NeighbourConfig(k=0)
