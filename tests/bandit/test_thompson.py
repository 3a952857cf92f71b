"""Beta–Bernoulli Thompson sampling: conjugate posteriors (Eq. 5), sampling, state round trip."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgwise.bandit import BetaThompson, beta_prior_from_accuracy
from kgwise.errors import ConfigError


@settings(max_examples=60, deadline=None)
@given(
    priors=st.lists(st.tuples(st.floats(0.1, 20), st.floats(0.1, 20)), min_size=1, max_size=4),
    data=st.data(),
)
def test_posterior_matches_beta_conjugate(priors: list[tuple[float, float]], data: st.DataObject) -> None:
    n = len(priors)
    ts = BetaThompson(n, priors, seed=0)
    obs = data.draw(st.lists(st.tuples(st.integers(0, n - 1), st.sampled_from([0, 1])), max_size=50))
    for arm, r in obs:
        ts.update(arm, None, r)
    for a, (a0, b0) in enumerate(priors):
        s = sum(r for arm, r in obs if arm == a)
        f = sum(1 - r for arm, r in obs if arm == a)
        assert ts.alpha[a] == pytest.approx(a0 + s)  # Eq. 5: α + r
        assert ts.beta[a] == pytest.approx(b0 + f)  # Eq. 5: β + 1 − r
        assert ts.mean()[a] == pytest.approx((a0 + s) / (a0 + s + b0 + f))


def test_samples_follow_the_posterior() -> None:
    ts = BetaThompson(2, [(2.0, 8.0), (30.0, 10.0)], seed=5)
    draws = np.array([ts.sample() for _ in range(20000)])
    np.testing.assert_allclose(draws.mean(axis=0), [0.2, 0.75], atol=0.01)
    var = np.array([2 * 8 / (10**2 * 11), 30 * 10 / (40**2 * 41)])
    np.testing.assert_allclose(draws.var(axis=0), var, rtol=0.08)
    assert np.mean([ts.pull() for _ in range(2000)]) > 0.95


def test_state_round_trip_gives_identical_draws() -> None:
    ts = BetaThompson(3, seed=2)
    for i in range(20):
        ts.update(i % 3, None, i % 2)
    clone: BetaThompson[int] = BetaThompson.from_state_dict(json.loads(json.dumps(ts.state_dict())))
    for _ in range(10):
        np.testing.assert_array_equal(ts.sample(), clone.sample())


def test_prior_from_accuracy_and_errors() -> None:
    a, b = beta_prior_from_accuracy(0.7, strength=10)
    assert a == pytest.approx(7) and b == pytest.approx(3)
    with pytest.raises(ConfigError):
        beta_prior_from_accuracy(1.5)
    with pytest.raises(ConfigError):
        BetaThompson(2, [(1.0, 1.0)])
    with pytest.raises(ConfigError):
        BetaThompson(1, [(0.0, 1.0)])
    with pytest.raises(ConfigError):
        BetaThompson(1).update(0, None, 2.0)


def test_arms_are_labels() -> None:
    """Named arms: ``pull`` returns a name, ``update`` takes one (an unknown name is refused, naming the
    arms), and the labels survive a state round trip."""
    ts = BetaThompson(["KGM", "LLM"], [(1.0, 9.0), (9.0, 1.0)], seed=1)
    assert ts.arms == ("KGM", "LLM") and ts.pull() == "LLM"
    ts.update("KGM", None, 1.0)
    assert ts.alpha.tolist() == [2.0, 9.0]
    with pytest.raises(ConfigError, match="KGM, LLM"):
        ts.update("GPU", None, 1.0)
    clone: BetaThompson[str] = BetaThompson.from_state_dict(json.loads(json.dumps(ts.state_dict())))
    assert clone.arms == ("KGM", "LLM") and [clone.pull() for _ in range(5)] == [ts.pull() for _ in range(5)]
    with pytest.raises(ConfigError, match="unique"):
        BetaThompson(["a", "a"])
