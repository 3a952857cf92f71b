"""LTT pieces: binomial p-values (Theorem 2), FWER procedures on crafted p-values, λ selection."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binom

from kgwise.conformal.ltt import (
    LTTConfig,
    binomial_p_values,
    calibration_questions_needed,
    control_fwer,
    hoeffding_bentkus_p_values,
    learn_then_test,
    min_calibration_questions,
)
from kgwise.errors import ConfigError


@settings(deadline=None)
@given(st.integers(1, 400), st.floats(0.01, 0.99), st.data())
def test_binomial_p_value_is_the_lower_binomial_tail(n: int, alpha: float, data: st.DataObject) -> None:
    k = data.draw(st.lists(st.integers(0, n), min_size=1, max_size=5))
    p = binomial_p_values(k, n, alpha)
    np.testing.assert_allclose(p, binom.cdf(k, n, alpha), rtol=1e-10, atol=1e-300)
    if n <= 60:  # independent exact sum P(Binom(n, α) ≤ k)
        exact = [sum(math.comb(n, j) * alpha**j * (1 - alpha) ** (n - j) for j in range(kk + 1)) for kk in k]
        np.testing.assert_allclose(p, exact, rtol=1e-8, atol=1e-300)


@settings(deadline=None)
@given(st.integers(5, 2000), st.floats(0.02, 0.9), st.data())
def test_hoeffding_bentkus_is_valid_and_no_smaller_than_binomial(n: int, alpha: float, data: st.DataObject
                                                                 ) -> None:
    k = data.draw(st.lists(st.integers(0, n), min_size=1, max_size=5))
    hb = hoeffding_bentkus_p_values(k, n, alpha)
    assert ((hb >= binomial_p_values(k, n, alpha) - 1e-12) & (hb <= 1 + 1e-12)).all()


P = np.array([0.001, 0.02, 0.004, 0.5])


def test_bonferroni_rejects_below_delta_over_m() -> None:
    assert np.flatnonzero(control_fwer(P, 0.05, "bonferroni")).tolist() == [0, 2]  # δ/4 = 0.0125


def test_holm_steps_down() -> None:
    # 0.001 ≤ .05/4, 0.004 ≤ .05/3, 0.02 ≤ .05/2, 0.5 > .05
    assert np.flatnonzero(control_fwer(P, 0.05, "holm")).tolist() == [0, 1, 2]


def test_fixed_sequence_follows_the_order_and_stops_at_first_acceptance() -> None:
    assert np.flatnonzero(control_fwer(P, 0.05, "fixed_sequence")).tolist() == [0, 1, 2]
    assert np.flatnonzero(control_fwer(P, 0.05, "fixed_sequence", order=[2, 0, 3, 1])).tolist() == [0, 2]
    assert not control_fwer(P, 0.05, "fixed_sequence", order=[3, 0, 1, 2]).any()
    with pytest.raises(ConfigError):
        control_fwer(P, 0.05, "fixed_sequence", order=[0, 0, 1, 2])


def test_top_p_is_uncorrected() -> None:
    assert np.flatnonzero(control_fwer(P, 0.05, "top_p")).tolist() == [0, 1, 2]
    assert not LTTConfig(fwer="top_p").guaranteed
    assert LTTConfig(fwer="fixed_sequence").guaranteed


@settings(deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=40), st.floats(0.01, 0.5), st.randoms())
def test_fwer_procedures_match_reference_loops(p: list[float], delta: float, rnd: object) -> None:
    pv = np.asarray(p)
    order = list(range(len(p)))
    rnd.shuffle(order)  # type: ignore[attr-defined]
    ref = np.zeros(len(p), dtype=bool)
    for i in order:
        if pv[i] > delta:
            break
        ref[i] = True
    np.testing.assert_array_equal(control_fwer(pv, delta, "fixed_sequence", order), ref)
    from mapie.risk_control import control_fwer as mapie_control_fwer  # the vectorised scan = MAPIE's loop

    seq = np.asarray(order)
    assert sorted(seq[mapie_control_fwer(pv[seq], delta, fwer_method="fixed_sequence")].tolist()) == \
        np.flatnonzero(ref).tolist()
    np.testing.assert_array_equal(control_fwer(pv, delta, "bonferroni"), pv <= delta / len(p))
    holm = np.zeros(len(p), dtype=bool)
    for step, i in enumerate(np.argsort(pv, kind="stable")):
        if pv[i] > delta / (len(p) - step):
            break
        holm[i] = True
    # ties in p may be processed in another order by MAPIE; the rejected set is the same
    np.testing.assert_array_equal(control_fwer(pv, delta, "holm"), holm)


def test_learn_then_test_picks_smallest_valid_set() -> None:
    n = 1000
    losses = np.array([50, 60, 200, 70])  # risks .05 .06 .2 .07 at α = .1
    sizes = np.array([10.0, 3.0, 1.0, 5.0])
    res = learn_then_test(losses, n, 0.1, LTTConfig(fwer="bonferroni"), sizes)
    assert res.valid.tolist() == [True, True, False, True]
    assert res.chosen == 1
    none = learn_then_test(np.array([300, 400]), n, 0.1, LTTConfig(), np.array([1.0, 2.0]))
    assert none.chosen is None and not none.valid.any()


def test_min_calibration_questions_is_where_a_clean_record_first_certifies() -> None:
    from kgwise.conformal.ltt import binomial_p_values, min_calibration_questions

    for alpha, delta in [(0.1, 0.05), (0.3, 0.05), (0.2, 0.1)]:
        n = min_calibration_questions(alpha, delta)
        assert binomial_p_values([0], n, alpha)[0] <= delta < binomial_p_values([0], n - 1, alpha)[0]


def test_calibration_questions_needed_at_an_observed_miss_rate() -> None:
    for alpha in (0.1, 0.2, 0.4):
        assert calibration_questions_needed(alpha, 0.05, 0.0) == min_calibration_questions(alpha, 0.05)
        assert calibration_questions_needed(alpha, 0.05, alpha) is None
    need = calibration_questions_needed(0.1, 0.05, 1 / 30)  # the s22 open run: 1 miss in 30
    assert need is not None and need > 30
    ok = [binom.cdf(np.floor(n / 30 + 0.5), n, 0.1) <= 0.05 for n in range(1, need + 1)]
    assert ok[-1] and not any(ok[:-1])
    assert calibration_questions_needed(0.1, 0.05, 0.09, limit=100) is None
    with pytest.raises(ConfigError):
        calibration_questions_needed(0.1, 0.05, 1.5)
