"""The prompt-construction bandit (KnowGPT §3.2, Eq. 5–8) on kgwise.bandit.LinUCB."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgwise.errors import ConfigError, DataError
from kgwise.inject import ARMS, BanditConfig, PromptBandit


def test_six_arms_and_gamma() -> None:
    assert ARMS == ("P_sub+F_t", "P_sub+F_s", "P_sub+F_g", "P_RL+F_t", "P_RL+F_s", "P_RL+F_g")
    cfg = BanditConfig(delta=0.05)
    assert cfg.gamma == pytest.approx(1 + math.sqrt(math.log(2 / 0.05) / 2))
    assert PromptBandit(4, config=cfg).policy.alpha == pytest.approx(cfg.gamma)
    with pytest.raises(ConfigError):
        BanditConfig(delta=1.5)
    with pytest.raises(ConfigError, match="dimension"):
        PromptBandit(4).pull(np.ones(3))


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 40), st.integers(0, 10_000), st.floats(0.1, 5.0))
def test_arm_estimates_equal_the_closed_form_ridge_solution(n: int, seed: int, ridge: float) -> None:
    """After any sequence of updates α(i) = (CᵀC + λI)⁻¹ Cᵀ r (Eq. 7) on contexts [c, 1]."""
    rng = np.random.default_rng(seed)
    dim = 5
    bandit = PromptBandit(dim, config=BanditConfig(ridge=ridge, seed=seed))
    history: dict[int, list[tuple[np.ndarray, float]]] = {a: [] for a in range(len(ARMS))}
    for _ in range(n):
        c = rng.normal(size=dim)
        arm = int(rng.integers(len(ARMS)))
        r = float(rng.integers(2))
        bandit.update(ARMS[arm], c, r)
        history[arm].append((np.append(c, 1.0), r))
    for arm, rows in history.items():
        C = np.array([x for x, _ in rows]).reshape(-1, dim + 1)
        y = np.array([r for _, r in rows])
        alpha = np.linalg.solve(C.T @ C + ridge * np.eye(dim + 1), C.T @ y)
        assert np.allclose(bandit.policy.theta[arm], alpha, atol=1e-8)
        # Eq. 8: the exploration width is γ √(c (CᵀC + λI)⁻¹ cᵀ)
        c = np.append(rng.normal(size=dim), 1.0)
        beta = bandit.config.gamma * math.sqrt(c @ np.linalg.solve(C.T @ C + ridge * np.eye(dim + 1), c))
        ucb = bandit.scores(c[:-1], explore=True)[arm]
        assert ucb == pytest.approx(c @ alpha + beta, rel=1e-7, abs=1e-9)
        assert bandit.scores(c[:-1], explore=False)[arm] == pytest.approx(c @ alpha, abs=1e-9)


def test_fit_learns_which_combination_suits_which_questions(tmp_path: Path) -> None:
    """Two kinds of question (two directions of the context); a different arm is right for each."""
    rng = np.random.default_rng(0)
    dim = 8
    kinds = rng.integers(2, size=400)
    base = np.eye(dim)[[0, 1]]
    E = base[kinds] + 0.1 * rng.normal(size=(400, dim))
    good = {0: 1, 1: 4}  # kind 0 → P_sub+F_s, kind 1 → P_RL+F_s

    def reward(i: int, arm: str) -> float:
        return float(ARMS.index(arm) == good[int(kinds[i])])

    bandit = PromptBandit(dim, config=BanditConfig(seed=3))
    hist = bandit.fit(E, reward)
    assert len(hist.arms) == 400
    late = np.mean(hist.rewards[-100:])
    assert late > 0.8 > np.mean(hist.rewards[:50])
    assert bandit.pull(base[0]) == "P_sub+F_s" and bandit.pull(base[1]) == "P_RL+F_s"
    path = bandit.save(tmp_path / "bandit.npz")
    loaded = PromptBandit.load(path)
    assert loaded.arms == bandit.arms and loaded.config == bandit.config
    for c in E[:50]:
        assert loaded.pull(c) == bandit.pull(c)
        assert np.allclose(loaded.scores(c, True), bandit.scores(c, True))


def test_load_errors_name_the_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not found"):
        PromptBandit.load(tmp_path / "none.npz")
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.ones(2))
    with pytest.raises(DataError, match=r"bad\.npz"):
        PromptBandit.load(bad)


def test_training_means_are_each_arms_mean_reward() -> None:
    rng = np.random.default_rng(0)
    bandit = PromptBandit(5, ARMS)
    rewards: dict[int, list[float]] = {}
    for _ in range(60):
        a, r = int(rng.integers(0, len(ARMS) - 1)), float(rng.random() < 0.4)  # the last arm is never pulled
        bandit.update(ARMS[a], rng.normal(size=5), r)
        rewards.setdefault(a, []).append(r)
    means = bandit.training_means()
    for a, rs in rewards.items():
        assert means[a] == pytest.approx(np.mean(rs))
    assert np.isnan(means[len(ARMS) - 1])


def test_noise_contexts_shrink_every_arm_to_its_mean_reward(tmp_path: Path) -> None:
    """Rewards that do not depend on the 64-dimensional context: after training each arm's λ^i is large,
    and the exploiting bandit picks the arm with the best mean reward for (almost) every new question."""
    rng = np.random.default_rng(1)
    dim, n = 64, 600
    E = rng.normal(size=(n, dim)) / np.sqrt(dim)
    p = np.array([0.30, 0.25, 0.20, 0.45, 0.25, 0.30])
    R = (rng.random((n, len(ARMS))) < p).astype(float)
    tuned = PromptBandit(dim, config=BanditConfig(seed=0))
    hist = tuned.fit(E, lambda i, a: float(R[i, ARMS.index(a)]))
    assert hist.questions == sorted(hist.questions, key=hist.questions.index) and len(hist.questions) == n
    assert min(tuned.ridges) >= 10.0
    fixed = PromptBandit(dim, config=BanditConfig(seed=0, ridge_grid=()))
    fixed.fit(E, lambda i, a: float(R[i, ARMS.index(a)]))
    assert fixed.ridges == [1.0] * len(ARMS)
    new = rng.normal(size=(200, dim)) / np.sqrt(dim)
    picks_tuned = np.array([tuned.pull(c) for c in new])
    picks_fixed = np.array([fixed.pull(c) for c in new])
    assert np.mean(picks_tuned == "P_RL+F_t") > 0.9 > np.mean(picks_fixed == "P_RL+F_t")
    loaded = PromptBandit.load(tuned.save(tmp_path / "b.npz"))
    assert loaded.ridges == tuned.ridges
    assert all(loaded.pull(c) == tuned.pull(c) for c in new[:20])


def test_full_feedback_learns_every_arm_on_every_question_and_finds_a_close_best_arm() -> None:
    """Arms a few points apart, rewards independent of the context: with every arm's reward on every
    training question (``feedback="full"``) the bandit's training means are the arms' exact means over the
    questions and it picks the best arm far more often than from the pulled arm's reward alone."""
    dim, n = 16, 400
    p = np.array([0.30, 0.33, 0.40, 0.30, 0.27, 0.31])
    wins = {"bandit": 0, "full": 0}
    for seed in range(20):
        rng = np.random.default_rng(seed)
        E = rng.normal(size=(n, dim)) / np.sqrt(dim)
        R = (rng.random((n, len(ARMS))) < p).astype(float)
        for feedback in ("bandit", "full"):
            bandit = PromptBandit(dim, config=BanditConfig(seed=seed, feedback=feedback))

            def reward(i: int, a: str, R: npt.NDArray[np.float64] = R) -> float:
                return float(R[i, ARMS.index(a)])

            hist = bandit.fit(E, reward)
            if feedback == "full":
                assert len(hist.arms) == n * len(ARMS)
                assert np.allclose(bandit.training_means(), R.mean(axis=0))
            new = rng.normal(size=(50, dim)) / np.sqrt(dim)
            wins[feedback] += int(np.mean([bandit.pull(c) == "P_sub+F_g" for c in new]) > 0.5)
    assert wins["full"] >= 18 and wins["full"] > wins["bandit"] + 3, wins


def test_unknown_feedback_is_refused() -> None:
    with pytest.raises(ConfigError, match="feedback"):
        BanditConfig(feedback="partial")  # type: ignore[arg-type]


def test_a_state_round_trip_pulls_and_learns_as_the_original() -> None:
    """``state_dict`` / ``from_state_dict`` (JSON) keep arms, λ^i and the LinUCB state; a state of another
    shape is refused."""
    import json

    rng = np.random.default_rng(4)
    bandit = PromptBandit(3, ("P_sub+F_t", "P_RL+F_g"), BanditConfig(seed=2, explore_at_test=True))
    for _ in range(10):
        c = rng.normal(size=3)
        bandit.update(bandit.pull(c), c, float(rng.random() < 0.5))
    clone = PromptBandit.from_state_dict(json.loads(json.dumps(bandit.state_dict())))
    assert clone.arms == bandit.arms and clone.ridges == bandit.ridges
    for c in rng.normal(size=(10, 3)):
        assert clone.pull(c) == bandit.pull(c)
    with pytest.raises(ConfigError, match="do not match"):
        PromptBandit.from_state_dict(bandit.state_dict() | {"dim": 4})
    with pytest.raises(ConfigError, match="no arm"):
        bandit.update("P_RL+F_t", np.ones(3), 1.0)
