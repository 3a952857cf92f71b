"""LinUCB: Sherman–Morrison state equals the closed-form ridge solution (Eq. 11–13); state round-trips."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgwise.bandit import LinUCB, gamma_from_delta
from kgwise.errors import ConfigError


@settings(max_examples=40, deadline=None)
@given(
    n_arms=st.integers(1, 4),
    dim=st.integers(1, 6),
    n=st.integers(0, 30),
    ridge=st.floats(0.1, 5.0),
    alpha=st.floats(0.0, 3.0),
    seed=st.integers(0, 2**31 - 1),
)
def test_matches_closed_form_ridge(
    n_arms: int, dim: int, n: int, ridge: float, alpha: float, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    pol = LinUCB(n_arms, dim, alpha=alpha, ridge=ridge, seed=seed)
    X = rng.normal(size=(n, dim))
    arms = rng.integers(0, n_arms, size=n)
    r = rng.normal(size=n)
    for x, a, y in zip(X, arms, r, strict=True):
        pol.update(int(a), x, float(y))
    q = rng.normal(size=dim)
    expected_scores = []
    for a in range(n_arms):
        Qa, ra = X[arms == a], r[arms == a]
        A = Qa.T @ Qa + ridge * np.eye(dim)
        mu = np.linalg.solve(A, Qa.T @ ra)  # Eq. 11
        np.testing.assert_allclose(pol.theta[a], mu, rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(pol.A_inv[a], np.linalg.inv(A), rtol=1e-6, atol=1e-8)
        expected_scores.append(q @ mu + alpha * np.sqrt(q @ np.linalg.solve(A, q)))  # Eq. 12–13
        assert pol.counts[a] == len(ra)
    np.testing.assert_allclose(pol.scores(q), expected_scores, rtol=1e-6, atol=1e-8)


def test_pull_picks_best_learned_arm() -> None:
    rng = np.random.default_rng(0)
    pol = LinUCB(3, 4, alpha=0.0, ridge=1.0, seed=1)
    w = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0]], dtype=float)
    for _ in range(300):
        x = rng.normal(size=4)
        a = int(rng.integers(3))
        pol.update(a, x, float(w[a] @ x))
    assert pol.pull([0, 0, 5, 0]) == 2
    assert pol.pull([5, 0, 0, 0]) == 0
    assert pol.pull([5, 0, 0, 0], mask=[False, True, True]) in (1, 2)


def test_ties_are_broken_by_seed_and_cover_all_arms() -> None:
    picks = {LinUCB(4, 3, seed=s).pull(np.zeros(3)) for s in range(50)}
    assert picks == {0, 1, 2, 3}
    a = [LinUCB(4, 3, seed=7).pull(np.ones(3)) for _ in range(5)]
    assert len(set(a)) == 1


def test_state_round_trip_gives_identical_decisions() -> None:
    rng = np.random.default_rng(3)
    pol = LinUCB(5, 8, alpha=1.5, seed=11)
    for _ in range(40):
        x = rng.normal(size=8)
        pol.update(pol.pull(x), x, float(rng.random() < 0.5))
    clone: LinUCB[int] = LinUCB.from_state_dict(json.loads(json.dumps(pol.state_dict())))
    for _ in range(60):
        x = rng.normal(size=8) * (rng.random() < 0.3)  # many all-zero contexts → ties
        a, b = pol.pull(x), clone.pull(x)
        assert a == b
        y = float(rng.random() < 0.5)
        pol.update(a, x, y)
        clone.update(b, x, y)
    np.testing.assert_array_equal(pol.A_inv, clone.A_inv)


def test_scores_of_a_context_seen_before_follow_every_change_of_the_arms() -> None:
    """The products ``A⁻¹q`` kept from the last scoring are reused only while no update or refit changed
    ``A⁻¹``: the scores always equal those of a fresh copy of the policy."""
    rng = np.random.default_rng(5)
    pol = LinUCB(3, 6, alpha=1.2, seed=2)
    x = rng.normal(size=6)
    for step in range(12):
        first = pol.scores(x)
        np.testing.assert_array_equal(pol.scores(x.copy()), first)  # the same context: the same scores
        fresh: LinUCB[int] = LinUCB.from_state_dict(json.loads(json.dumps(pol.state_dict())))
        np.testing.assert_allclose(first, fresh.scores(x), rtol=1e-12)
        if step % 4 == 3:
            pol.refit(step % 3, rng.normal(size=(5, 6)), rng.random(5), 1.0)
        else:
            pol.update(step % 3, x if step % 2 else rng.normal(size=6), float(rng.random() < 0.5))


def test_bad_inputs_raise() -> None:
    with pytest.raises(ConfigError):
        LinUCB(0, 3)
    with pytest.raises(ConfigError):
        LinUCB(2, 3, ridge=0.0)
    pol = LinUCB(2, 3)
    with pytest.raises(ConfigError):
        pol.scores(np.ones(4))
    with pytest.raises(ConfigError):
        pol.update(2, np.ones(3), 1.0)
    with pytest.raises(ConfigError):
        pol.update(0, np.array([1.0, np.nan, 0.0]), 1.0)
    with pytest.raises(ConfigError):
        pol.pull(np.ones(3), mask=[False, False])
    with pytest.raises(ConfigError):
        gamma_from_delta(0.0)


def test_gamma_from_delta() -> None:
    assert gamma_from_delta(0.05) == pytest.approx(1 + np.sqrt(np.log(40) / 2))


def test_float32_storage_tracks_the_ridge_solution() -> None:
    rng = np.random.default_rng(5)
    pol32 = LinUCB(3, 16, alpha=1.0, seed=0, precision="float32")
    pol64 = LinUCB(3, 16, alpha=1.0, seed=0)
    assert pol32.A_inv.dtype == np.float32
    for _ in range(500):
        x = rng.normal(size=16)
        x /= np.linalg.norm(x)
        a = int(rng.integers(3))
        y = float(rng.random() < 0.5)
        pol32.update(a, x, y)
        pol64.update(a, x, y)
    q = rng.normal(size=16)
    np.testing.assert_allclose(pol32.scores(q), pol64.scores(q), rtol=1e-4, atol=1e-5)
    clone: LinUCB[int] = LinUCB.from_state_dict(json.loads(json.dumps(pol32.state_dict())))
    assert clone.A_inv.dtype == np.float32
    np.testing.assert_array_equal(clone.scores(q), pol32.scores(q))
    with pytest.raises(ConfigError):
        LinUCB(2, 3, precision="float16")


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 30), st.integers(0, 10_000), st.floats(0.05, 50.0))
def test_refit_equals_the_closed_form_and_updates_go_on_from_it(n: int, seed: int, ridge: float) -> None:
    rng = np.random.default_rng(seed)
    X, r = rng.normal(size=(n, 4)), rng.normal(size=n)
    policy = LinUCB(2, 4, ridge=1.0)
    policy.update(0, rng.normal(size=4), 1.0)  # history that the refit replaces
    policy.refit(0, X, r, ridge)
    A = ridge * np.eye(4) + X.T @ X
    assert np.allclose(policy.theta[0], np.linalg.solve(A, X.T @ r), atol=1e-8)
    assert policy.counts[0] == n and policy.counts[1] == 0
    x = rng.normal(size=4)
    policy.update(0, x, 0.5)
    A += np.outer(x, x)
    assert np.allclose(policy.theta[0], np.linalg.solve(A, X.T @ r + 0.5 * x), atol=1e-8)
    assert np.allclose(policy.A_inv[0], np.linalg.inv(A), atol=1e-8)
    weights = np.array([ridge, ridge, ridge, 1e-3])  # one weight per feature: a free last coordinate
    policy.refit(1, X, r, weights)
    assert np.allclose(policy.theta[1], np.linalg.solve(np.diag(weights) + X.T @ X, X.T @ r), atol=1e-6)
    with pytest.raises(ConfigError, match="ridge"):
        policy.refit(1, X, r, 0.0)


def test_arms_are_labels_and_old_states_load() -> None:
    """Named arms: ``pull`` returns a name and ``update`` takes one; a state written before arms had labels
    (no ``arms`` key) loads with the labels ``0 … n−1``."""
    pol = LinUCB(["P_sub", "P_RL"], 2, alpha=0.0, seed=0)
    pol.update("P_RL", [1.0, 0.0], 1.0)
    assert pol.pull([1.0, 0.0]) == "P_RL" and pol.index("P_RL") == 1
    with pytest.raises(ConfigError, match="P_sub, P_RL"):
        pol.update("P_XX", [1.0, 0.0], 1.0)
    old = LinUCB(2, 2, seed=0).state_dict()
    del old["arms"]
    assert LinUCB.from_state_dict(old).arms == (0, 1)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.integers(2, 9), st.integers(0, 40), st.integers(0, 10_000),
       st.sampled_from(["float64", "float32"]))
def test_tracked_contexts_stay_equal_to_a_fresh_computation(arms: int, dim: int, updates: int, seed: int,
                                                            precision: str) -> None:
    rng = np.random.default_rng(seed)
    policy = LinUCB(arms, dim, alpha=1.3, seed=seed, precision=precision)
    Z = rng.normal(size=(7, dim))
    tracked = policy.track(Z)
    for k in range(updates):
        x = rng.normal(size=dim)
        if k % 3 == 0:
            policy.scores(x)  # the update then reuses the cached A⁻¹x
        policy.update(int(rng.integers(arms)), x, float(rng.random()))
        if k == updates // 2:
            policy.refit(0, rng.normal(size=(5, dim)), rng.random(5), 1.0)
    tol = 1e-4 if precision == "float32" else 1e-9
    want = np.stack([policy.scores(z) for z in Z])
    np.testing.assert_allclose(tracked.scores(policy), want, rtol=tol, atol=tol)
    policy.untrack(tracked)
    before = tracked.quad.copy()
    policy.update(0, rng.normal(size=dim), 1.0)
    assert np.array_equal(tracked.quad, before)  # no longer kept


def test_a_deep_copy_neither_carries_nor_updates_the_tracked_contexts() -> None:
    import copy

    policy = LinUCB(2, 3, alpha=1.0, seed=0)
    tracked = policy.track(np.eye(3))
    clone = copy.deepcopy(policy)
    assert clone._tracked == [] and policy._tracked == [tracked]
    before = tracked.quad.copy()
    clone.update(0, [1.0, 0.0, 0.0], 1.0)  # the copy learns: the original's tracker does not move
    assert np.array_equal(tracked.quad, before) and np.array_equal(clone.A_inv[1], policy.A_inv[1])
    policy.update(0, [1.0, 0.0, 0.0], 1.0)
    np.testing.assert_allclose(clone.A_inv, policy.A_inv)
    assert not np.array_equal(tracked.quad, before)


def test_argmax_never_picks_a_masked_arm_even_when_every_value_is_minus_infinity_or_nan() -> None:
    bandit = LinUCB(3, 2, seed=0)
    for values in ([-np.inf, -np.inf, -np.inf], [np.nan, -np.inf, np.nan], [np.nan, np.nan, np.nan]):
        picks = {bandit.argmax(values, [False, True, False]) for _ in range(20)}
        assert picks == {1}
    assert bandit.argmax([np.nan, 0.5, 0.7]) == 2  # NaN ranks last
