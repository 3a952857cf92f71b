"""The learned success predictor: it learns which arm is right where, its probabilities are calibrated on
held-out rows, and it keeps learning."""

from __future__ import annotations

import numpy as np
import pytest

from kgwise.errors import ConfigError
from kgwise.route.predictor import PredictorConfig, SuccessPredictor, calibration, cross_fitted


def _data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    p = 1 / (1 + np.exp(-np.column_stack([2 * X[:, 0], -2 * X[:, 0], np.zeros(n)])))
    return X, (rng.random(p.shape) < p).astype(float)


def test_it_learns_which_arm_is_right_where_and_is_calibrated_out_of_sample() -> None:
    X, Y = _data(2000)
    Xt, Yt = _data(2000, seed=1)
    pred = SuccessPredictor(3).fit(X, Y)
    P = pred.predict(Xt)
    assert P[Xt[:, 0] > 1, 0].mean() > 0.8 and P[Xt[:, 0] > 1, 1].mean() < 0.2
    assert abs(P[:, 2].mean() - 0.5) < 0.05
    cal = calibration(P, Yt)
    assert cal["ece"] < 0.05 and cal["brier"] < cal["base_rate_brier"]


def test_ungraded_outcomes_are_left_out_and_updates_refit() -> None:
    X, Y = _data(600)
    Y[:300, 1] = np.nan
    pred = SuccessPredictor(3, PredictorConfig(ridges=(1.0,))).fit(X, Y)
    before = pred.predict(X[:5]).copy()
    Y2 = Y[300:].copy()
    Y2[:, 0] = 1 - Y2[:, 0]  # the world turns around for arm 0
    for _ in range(3):
        pred.update(X[300:], Y2)
    after = pred.predict(X[:5])
    assert not np.allclose(before[:, 0], after[:, 0]) and np.all(np.isfinite(after))


def test_cross_fitted_predictions_never_see_their_own_row() -> None:
    X, Y = _data(300)
    folds = [np.arange(k, 300, 3) for k in range(3)]
    P = cross_fitted(X, Y, folds)
    assert P.shape == Y.shape and not np.isnan(P).any()
    own = SuccessPredictor(3).fit(X, Y).predict(X)
    assert not np.allclose(P, own)


def test_bad_input_is_refused() -> None:
    with pytest.raises(ConfigError, match="outcomes"):
        SuccessPredictor(2).fit(np.zeros((3, 2)), np.zeros((3, 3)))
    with pytest.raises(ConfigError, match="not been fitted"):
        SuccessPredictor(2).predict(np.zeros((1, 2)))
    with pytest.raises(ConfigError):
        PredictorConfig(ridges=(0.0,))
