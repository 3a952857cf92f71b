"""Baselines (random, threshold router, mabwiser) and the replay experiment on a small synthetic table.

The table is a test double of recorded outcomes, named as one: arm "kgm" is right on contexts of kind A,
"llm" on most questions, "big" on all, at rising costs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from kgwise.eval.route.baselines import (
    MabwiserPolicy,
    RandomPolicy,
    accuracy_at_cost,
    hindsight_cascade,
    threshold_curve,
)
from kgwise.eval.route.experiment import RouteExperimentConfig, run_experiment, simulate
from kgwise.route.table import OutcomeTable


def _table(n: int = 240, seed: int = 0) -> tuple[OutcomeTable, np.ndarray]:
    rng = np.random.default_rng(seed)
    kind = rng.integers(2, size=n)
    X = np.stack([np.where(kind == 0, 1.0, 0.0), np.where(kind == 1, 1.0, 0.0), np.full(n, 0.3)], axis=1)
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    correct = np.stack([kind == 0, rng.random(n) < 0.8, np.ones(n, dtype=bool)], axis=1)
    cost = np.tile([0.0, 0.01, 0.1], (n, 1))
    table = OutcomeTable(
        tuple(f"q{i}" for i in range(n)),
        tuple(f"question {i}" for i in range(n)),
        ("kgm", "llm", "big"),
        ("KGM", "LLM", "LLM"),
        (0.5, 0.8, 1.0),
        correct,
        cost,
    )
    return table, X


def test_random_policy_respects_budget() -> None:
    table, X = _table()
    run = simulate(RandomPolicy(table.arms, budget=1.0, seed=0), table, X, range(table.n_questions))
    assert run.total_cost <= 1.0
    assert set(run.chosen.tolist()) <= {-1, 0, 1, 2}


def test_threshold_curve_ends_and_interpolation() -> None:
    table, X = _table()
    curve = threshold_curve(X, table.correct[:, 0], table.correct[:, 2], table.cost[:, 0], table.cost[:, 2])
    assert curve[0]["accuracy"] == pytest.approx(table.correct[:, 0].mean()) and curve[0]["cost"] == 0
    assert curve[-1]["accuracy"] == 1.0 and curve[-1]["cost"] == pytest.approx(table.cost[:, 2].sum())
    # the classifier finds the questions the cheap arm gets wrong: half the strong calls give ~100%
    mid = min(curve, key=lambda p: abs(p["strong_share"] - 0.5))
    assert mid["accuracy"] > 0.95
    assert accuracy_at_cost(curve, mid["cost"]) == pytest.approx(mid["accuracy"])


def test_threshold_curve_with_fewer_questions_than_folds() -> None:
    """Three questions, five folds: two folds are empty and are skipped, every question is still scored."""
    table, X = _table(n=3, seed=1)
    cheap = np.array([True, False, True])
    curve = threshold_curve(X, cheap, table.correct[:, 2], table.cost[:, 0], table.cost[:, 2])
    assert curve[0]["accuracy"] == pytest.approx(2 / 3) and curve[-1]["accuracy"] == 1.0
    assert all(np.isfinite(p["threshold"]) for p in curve)


def test_hindsight_cascade_escalates_the_least_confident_first() -> None:
    conf = np.array([0.9, 0.1, 0.5, 0.3])
    cheap = np.array([True, False, True, False])
    strong = np.array([True, True, False, True])
    cost = np.array([1.0, 2.0, 3.0, 4.0])
    curve = hindsight_cascade(conf, cheap, strong, cost, points=5)
    assert [p["accuracy"] for p in curve] == [0.5, 0.75, 1.0, 0.75, 0.75]
    assert [p["cost"] for p in curve] == [0.0, 2.0, 6.0, 9.0, 10.0]  # order of escalation: 1, 3, 2, 0


def test_mabwiser_policy_learns_and_respects_budget() -> None:
    table, X = _table()
    pol = MabwiserPolicy(table.arms, cost_ref=0.1, budget=5.0, seed=0)
    run = simulate(pol, table, X, range(table.n_questions))
    assert run.total_cost <= 5.0
    assert run.accuracy > 0.8


class RecordingObserver:
    """Test double of an observer: records what it is shown."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, float]] = []

    def observe(self, name: str, embedding: npt.ArrayLike, reward: float) -> None:
        self.seen.append((name, reward))


def test_simulate_shows_the_free_arms_outcomes_to_the_observer() -> None:
    table, X = _table(60)
    observer = RecordingObserver()
    run = simulate(RandomPolicy(table.arms, budget=0.5, seed=1), table, X, range(60), observer)
    free = [i for i, a in enumerate(run.chosen) if a > 0]  # "kgm" costs nothing: it answers these too
    assert observer.seen == [("kgm", float(table.correct[i, 0])) for i in free] and len(free) > 10


def test_experiment_report_shape_and_resume(tmp_path: Path) -> None:
    table, X = _table()
    cfg = RouteExperimentConfig(seeds=2, lambdas=(0.1, 1.0), budget_fractions=(0.5, 1.0), bins=4)
    progress = tmp_path / "runs.jsonl"
    report = run_experiment(table, X, cfg, progress, show_progress=False)
    for key in (
        "arms",
        "random",
        "oracle",
        "coke",
        "ablations",
        "threshold_router",
        "mabwiser_linucb",
        "lambda_sweep",
        "budget_sweep",
        "heatmap",
        "regret",
        "targets",
        "paced_budget_sweep",
        "price_paced_budget_sweep",
    ):
        assert key in report
    for row in report["paced_budget_sweep"] + report["price_paced_budget_sweep"]:
        assert row["cost"] <= row["budget"] + 1e-12
        assert row["budget"] == pytest.approx(row["budget_fraction"] * table.cost[:, 2].sum())
    assert report["price_paced_config"]["pacing"] == "price" and "price_paced_60" in report["targets"]
    assert set(report["ablations"]) == {"wo_Ec", "wo_Ea", "wo_Ra"}
    assert report["oracle"]["accuracy"] == 1.0
    assert report["oracle"]["cost"] == pytest.approx(
        sum(0.0 if kg else 0.01 if lm else 0.1 for kg, lm in table.correct[:, :2])
    )
    budget = 0.5 * table.cost[:, 2].sum()
    assert report["budget_sweep"][0]["budget_fraction"] == 0.5
    assert report["budget_sweep"][0]["budget"] == pytest.approx(budget)
    assert report["budget_sweep"][0]["cost"] <= budget + 1e-12
    assert report["setup"]["budget_fraction"] == 1.0
    assert report["setup"]["budget"] == pytest.approx(table.cost[:, 2].sum())
    assert sum(report["coke"]["selections"].values()) + report["coke"]["unanswered"] == table.n_questions
    assert len(report["heatmap"]["share"]) == 4
    # a second run reads every finished run back from the progress file and reports the same numbers
    lines = progress.read_text().splitlines()
    again = run_experiment(table, X, cfg, progress, show_progress=False)
    assert progress.read_text().splitlines() == lines
    assert again["coke"]["accuracy"] == report["coke"]["accuracy"]
    assert again["mabwiser_linucb"]["cost"] == report["mabwiser_linucb"]["cost"]


def test_context_variants_run_coke_on_their_own_context() -> None:
    """A context that carries the signal (the question kind) beats one that carries none, with the same
    Coke settings on the same orders (cheaper at the main budget, more accurate paced at 60 % of the best
    arm's cost); a context of the wrong length is refused."""
    from kgwise.errors import ConfigError

    table, X = _table()
    n = table.n_questions
    cfg = RouteExperimentConfig(seeds=3, lambdas=(1.0,), budget_fractions=(1.0,), paced=(0.6,), bins=4)
    contexts = {"informative": X, "constant": np.ones((n, 1))}
    report = run_experiment(table, np.ones((n, 1)), cfg, show_progress=False, contexts=contexts)
    variants = report["context_variants"]
    assert set(variants) == {"informative", "constant"} and variants["informative"]["dim"] == 3
    assert variants["constant"]["coke"]["accuracy"] == pytest.approx(report["coke"]["accuracy"])
    informative, constant = variants["informative"], variants["constant"]
    assert informative["coke"]["cost"] < 0.9 * constant["coke"]["cost"]
    paced = [v["paced_budget_sweep"][0]["accuracy"] for v in (informative, constant)]
    assert paced[0] > paced[1] + 0.02
    assert set(variants["informative"]["paced_60"]) >= {"met_accuracy_ge_best", "cost_over_best"}
    with pytest.raises(ConfigError, match="short"):
        run_experiment(table, X, cfg, show_progress=False, contexts={"short": X[:-1]})
