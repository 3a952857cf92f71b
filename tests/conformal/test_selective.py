"""Unit tests of the selective-prediction rule (:mod:`kgwise.conformal.selective`); its guarantee over
many random splits of real logs is in ``tests/guarantees/test_selective.py``."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import beta

from kgwise.conformal.selective import (
    SelectiveConfig,
    SelectiveRiskControl,
    choose_confidence,
    questions_needed,
    selective_p_values,
)
from kgwise.errors import ConfigError


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 200), st.floats(0.0, 1.0), st.sampled_from([0.1, 0.2, 0.3]),
       st.sampled_from([0.05, 0.1]))
def test_p_value_rejects_exactly_when_the_clopper_pearson_bound_is_below_alpha(
        n: int, frac: float, alpha: float, delta: float) -> None:
    k = int(frac * n)
    p = float(selective_p_values([n], [k], alpha)[0])
    upper = 1.0 if k == n else float(beta.ppf(1 - delta, k + 1, n - k))  # one-sided CP upper bound
    if abs(upper - alpha) > 1e-9:
        assert (p <= delta) == (upper <= alpha)


def draw(n: int, rng: np.random.Generator, skill: float = 3.0) -> tuple[np.ndarray, np.ndarray]:
    """Confidence uniform on (0.25, 1); correct with probability rising with it (calibrated-ish)."""
    c = rng.uniform(0.25, 1.0, n)
    ok = rng.random(n) < 1 / (1 + np.exp(-skill * (c - 0.45) * 4))
    return c, ok


def test_certifies_a_threshold_whose_answered_accuracy_holds_on_fresh_questions() -> None:
    rng = np.random.default_rng(0)
    rule = SelectiveRiskControl(SelectiveConfig(alpha=0.1)).fit(*draw(400, rng))
    rule.conformalize(*draw(400, rng))
    assert rule.certified and rule.threshold_ is not None
    c, ok = draw(50_000, rng)
    answered = rule.predict(c)
    assert 0.2 < answered.mean() < 1.0  # answers some, not all
    assert ok[answered].mean() >= 0.9
    assert rule.accuracy_ is not None and rule.accuracy_ >= 0.9 - 0.05
    assert "accuracy ≥ 0.9" in rule.promise()


def test_answers_everything_when_the_arm_is_good_and_nothing_when_data_are_few() -> None:
    rng = np.random.default_rng(1)
    c = rng.uniform(0.5, 1.0, 300)
    good = SelectiveRiskControl(SelectiveConfig(alpha=0.2)).fit(c, np.ones(300, bool))
    good.conformalize(c[:100], np.ones(100, bool))
    assert good.threshold_ == -np.inf and good.predict([0.0]).all()
    few = SelectiveRiskControl(SelectiveConfig(alpha=0.2)).fit(c, np.ones(300, bool))
    few.conformalize(c[:5], np.ones(5, bool))  # (0.8)^5 = 0.33 > δ: no threshold can be certified
    assert not few.certified and not few.predict([1.0]).any() and few.promise() == ""


def test_sequence_uses_only_the_tuning_figures_and_the_calibration_size() -> None:
    rng = np.random.default_rng(2)
    rule = SelectiveRiskControl().fit(*draw(200, rng))
    order = rule.sequence(50)
    assert rule.grid_ is not None
    assert order[-1] == rule.grid_.size - 1 and (np.diff(order) == 1).all()  # down to "answer all"
    a = rule.conformalize(*draw(50, rng)).order_
    b = rule.conformalize(*draw(50, rng)).order_
    assert a is not None and b is not None and (a == b).all()


def test_bad_input_is_refused() -> None:
    with pytest.raises(ConfigError, match="alpha"):
        SelectiveConfig(alpha=1.0)
    with pytest.raises(ConfigError, match="delta"):
        SelectiveConfig(delta=0.0)
    with pytest.raises(ConfigError, match="fit"):
        SelectiveRiskControl().conformalize([0.5], [True])
    with pytest.raises(ConfigError, match="2 confidences for 1"):
        SelectiveRiskControl().fit([0.5, 0.6], [True])
    with pytest.raises(ConfigError, match="NaN"):
        SelectiveRiskControl().fit([float("nan")], [True])
    with pytest.raises(ConfigError, match="no tuning"):
        SelectiveRiskControl().fit([], [])


def test_questions_needed_matches_ltt() -> None:
    assert questions_needed(0.2, 0.05, 1.0) == 14  # (0.8)^14 = 0.044 ≤ 0.05 < (0.8)^13
    assert questions_needed(0.2, 0.05, 0.7) is None
    n = questions_needed(0.2, 0.05, 0.9)
    assert n is not None and n > 14


def test_the_score_the_tuning_answers_predict_to_answer_more_is_chosen() -> None:
    rng = np.random.default_rng(3)
    ok = rng.random(400) < 0.7
    informative = np.where(ok, rng.uniform(0.4, 1.0, 400), rng.uniform(0.0, 0.6, 400))
    noise = rng.random(400)
    config = SelectiveConfig(alpha=0.1)
    share = {k: SelectiveRiskControl(config).fit(c, ok).predicted_share(300)
             for k, c in (("noise", noise), ("informative", informative))}
    assert share["informative"] > 0.3 and share["noise"] == 0.0  # 0.7 < 0.9 with no ranking: none
    assert choose_confidence({"noise": noise, "informative": informative}, ok, 300, config) == "informative"
    assert choose_confidence({"a": noise, "b": noise}, ok, 300, config) == "a"  # ties: the first
