"""The protocol's values: softmax, ChoiceScores, Generation, Message."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kgwise.llm import ChoiceScores, Generation, Message, as_messages, softmax
from kgwise.types import Usage

finite = st.floats(min_value=-1e4, max_value=1e4, allow_nan=False)


@given(st.lists(finite, min_size=1, max_size=8))
def test_softmax_is_a_distribution(values: list[float]) -> None:
    p = softmax(values)
    assert len(p) == len(values)
    assert all(0.0 <= x <= 1.0 for x in p)
    assert math.isclose(sum(p), 1.0, rel_tol=1e-9)


@given(st.lists(finite, min_size=1, max_size=8), st.floats(min_value=-100, max_value=100))
def test_softmax_is_shift_invariant_and_order_preserving(values: list[float], shift: float) -> None:
    p, q = softmax(values), softmax([v + shift for v in values])
    assert all(math.isclose(a, b, abs_tol=1e-9) for a, b in zip(p, q, strict=True))
    for i in range(len(values)):
        for j in range(len(values)):
            if values[i] > values[j] + 1e-6:
                assert p[i] >= p[j]


def test_softmax_handles_minus_infinity() -> None:
    assert softmax([0.0, -math.inf]) == (1.0, 0.0)
    assert softmax([-math.inf, -math.inf]) == (0.5, 0.5)


def test_choice_scores() -> None:
    s = ChoiceScores((-2.0, -1.0, -6.0), (-1.0, -1.0, -0.5), Usage(10, 0, 1), (2, 1, 12))
    assert s.best() == 1
    assert s.best("mean") == 2
    assert sum(s.probabilities) == pytest.approx(1.0)
    p = s.probabilities
    assert p[1] / p[0] == pytest.approx(math.e)
    assert ChoiceScores.from_dict(s.to_dict()) == s
    with pytest.raises(ValueError):
        ChoiceScores((0.0,), (0.0, 1.0))


def test_pmi_ranks_by_the_gain_over_the_prior() -> None:
    """PMI = log P(c | context) − log P(c | prior): a choice that is likely anyway gains nothing."""
    s = ChoiceScores((-2.0, -3.0, -9.0), (-2.0, -1.5, -3.0))
    prior = ChoiceScores((-1.0, -5.0, -8.0), (-1.0, -2.5, -2.7))
    assert s.values("pmi", prior) == (-1.0, 2.0, -1.0)
    assert s.best("pmi", prior) == 1 and s.best("sum") == 0
    p = s.ranked_probabilities("pmi", prior)
    assert sum(p) == pytest.approx(1.0) and p[1] / p[0] == pytest.approx(math.e**3)
    assert s.ranked_probabilities("mean") == softmax(s.normalised)
    with pytest.raises(ValueError, match="prior"):
        s.values("pmi")
    with pytest.raises(ValueError, match="prior"):
        s.values("pmi", ChoiceScores((0.0,), (0.0,)))
    with pytest.raises(ValueError, match="unknown scoring rule"):
        s.values("max")  # type: ignore[arg-type]


def test_generation_round_trip_and_messages() -> None:
    g = Generation("hi", Usage(3, 1, 1, 0.5, 0.01), "stop", (-0.1,), ({"hi": -0.1},), attempts=2)
    assert Generation.from_dict(g.to_dict()) == g
    assert as_messages("q") == (Message("user", "q"),)
    with pytest.raises(ValueError):
        Message("robot", "x")
    with pytest.raises(ValueError):
        as_messages([])
