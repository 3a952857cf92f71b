"""Split conformal: the Eq. 1 quantile is the ⌈(n+1)(1−α)⌉-th order statistic; LAC/APS sets."""

from __future__ import annotations

import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgwise.conformal.split import (
    SplitConformal,
    SplitConformalConfig,
    aps_scores,
    conformal_quantile,
    conformal_rank,
    label_set,
    lac_scores,
)
from kgwise.errors import ConfigError, DataError

alphas = st.sampled_from([0.01, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.5, 0.7, 0.9, 0.99])


@settings(deadline=None)
@given(st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=300), alphas)
def test_quantile_is_the_order_statistic(scores: list[float], alpha: float) -> None:
    n = len(scores)
    rank = math.ceil((n + 1) * (1 - Fraction(str(alpha))))  # exact rational arithmetic
    q = conformal_quantile(scores, alpha)
    assert conformal_rank(n, alpha) == rank
    if rank > n:
        assert q == math.inf
    else:
        assert q == sorted(scores)[rank - 1]


def test_quantile_known_values() -> None:
    s = np.arange(1, 20, dtype=float)  # n = 19: rank ⌈20·0.9⌉ = 18
    assert conformal_quantile(s, 0.1) == 18.0
    assert conformal_quantile(s, 0.04) == math.inf  # ⌈20·0.96⌉ = 20 > 19
    assert conformal_quantile([3.0, math.inf, 1.0], 0.5) == 3.0
    with pytest.raises(ConfigError):
        conformal_quantile([], 0.1)
    with pytest.raises(ConfigError):
        conformal_quantile([1.0, float("nan")], 0.1)


def test_lac_and_aps_scores() -> None:
    p = np.array([[0.5, 0.3, 0.2], [0.1, 0.6, 0.3]])
    np.testing.assert_allclose(lac_scores(p), 1 - p)
    np.testing.assert_allclose(aps_scores(p), [[0.5, 0.8, 1.0], [1.0, 0.6, 0.9]])


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["lac", "aps"]), st.sampled_from([0.1, 0.2, 0.3]))
def test_marginal_coverage_on_synthetic_classifier(seed: int, score: str, alpha: float) -> None:
    """Averaged over many exchangeable calibration/test draws, coverage is ≥ 1 − α (minus MC noise)."""
    rng = np.random.default_rng(seed)
    n_cal, n_test, k = 200, 2000, 4
    logits = rng.normal(size=(n_cal + n_test, k)) * 2
    probs = np.exp(logits) / np.exp(logits).sum(axis=1, keepdims=True)
    y = np.array([rng.choice(k, p=row) for row in probs])
    cp = SplitConformal(SplitConformalConfig(alpha=alpha, score=score))  # type: ignore[arg-type]
    cp.conformalize(probs[:n_cal], y[:n_cal])
    sets = cp.predict_set(probs[n_cal:])
    coverage = sets[np.arange(n_test), y[n_cal:]].mean()
    # one draw: coverage ~ Beta around ≥ 1−α; 5 standard errors of the calibration noise
    assert coverage >= 1 - alpha - 5 * math.sqrt(alpha * (1 - alpha) / n_cal)


def test_label_set_for_an_answer() -> None:
    cp = SplitConformal(SplitConformalConfig(alpha=0.2)).conformalize(
        np.array([[0.7, 0.2, 0.1], [0.6, 0.3, 0.1], [0.2, 0.7, 0.1], [0.5, 0.4, 0.1]]), [0, 0, 1, 1])
    # scores of the true labels: 0.3, 0.4, 0.3, 0.6 → rank ⌈5·0.8⌉ = 4 → q = 0.6
    assert cp.quantile() == pytest.approx(0.6)
    assert label_set(cp, {"A": 0.5, "B": 0.45, "C": 0.05}) == ("A", "B")
    with pytest.raises(ConfigError):
        SplitConformal().predict_set(np.ones((1, 2)) / 2)
    with pytest.raises(ConfigError):
        cp.conformalize(np.ones((2, 3)) / 3, [0, 3])


def test_save_load_round_trip_and_ragged_calibration(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    probs = rng.dirichlet(np.ones(4), size=30)
    labels = rng.integers(0, 4, size=30)
    dense = SplitConformal(SplitConformalConfig(0.2, "aps")).conformalize(probs, labels)
    rows = SplitConformal(SplitConformalConfig(0.2, "aps")).conformalize(list(probs), labels)
    np.testing.assert_allclose(dense.calibration_scores_, rows.calibration_scores_)  # type: ignore[arg-type]
    ragged = [rng.dirichlet(np.ones(k)) for k in (3, 5, 4, 5)]
    gold = [0, 4, 1, 2]
    cp = SplitConformal().conformalize(ragged, gold)
    assert cp.calibration_scores_ is not None
    np.testing.assert_allclose(cp.calibration_scores_, [1 - r[y] for r, y in zip(ragged, gold, strict=True)])
    with pytest.raises(ConfigError):
        SplitConformal().conformalize(ragged, [0, 5, 1, 2])  # label outside the 5 choices
    path = dense.save(tmp_path / "cal.json", {"llm": "test"})
    back = SplitConformal.load(path)
    assert back.config == dense.config and back.quantile() == dense.quantile()
    np.testing.assert_array_equal(back.predict_set(probs), dense.predict_set(probs))
    (tmp_path / "bad.json").write_text('{"kind": "other"}')
    with pytest.raises(DataError, match=r"bad\.json"):
        SplitConformal.load(tmp_path / "bad.json")
    with pytest.raises(DataError, match=r"missing\.json"):
        SplitConformal.load(tmp_path / "missing.json")
    with pytest.raises(ConfigError):
        SplitConformal().save(tmp_path / "empty.json")


def test_the_pac_rank_certifies_coverage_with_confidence() -> None:
    from scipy.stats import beta

    from kgwise.conformal.split import pac_conformal_quantile, pac_rank

    for n, alpha, delta in [(100, 0.1, 0.05), (500, 0.2, 0.1), (59, 0.05, 0.05)]:
        k = pac_rank(n, alpha, delta)
        if k <= n:  # the k-th order statistic: coverage ~ Beta(k, n − k + 1), below 1 − α w.p. ≤ δ
            assert beta.cdf(1 - alpha, k, n - k + 1) <= delta < beta.cdf(1 - alpha, k - 1, n - k + 2)
        assert k >= conformal_rank(n, alpha)  # never smaller than the marginal one
    assert pac_rank(10, 0.1, 0.05) == 11  # too few scores: every choice
    scores = np.arange(100, dtype=float)
    assert pac_conformal_quantile(scores, 0.1, 0.05) == pac_rank(100, 0.1, 0.05) - 1
    assert pac_conformal_quantile(scores[:10], 0.1, 0.05) == float("inf")
    with pytest.raises(ConfigError, match="delta"):
        pac_rank(100, 0.1, 1.0)
    # training-conditional: over 2000 calibration draws, the population coverage is ≥ 1 − α in ≥ 95 %
    rng = np.random.default_rng(0)
    q = [pac_conformal_quantile(rng.random(200), 0.1, 0.05) for _ in range(2000)]
    assert np.mean(np.asarray(q) >= 0.9) >= 0.95 - 3 * np.sqrt(0.05 * 0.95 / 2000)
