"""Two-fold cross-tuning of price-paced Coke: each half's pick is scored on the other half, runs resume from
the progress file, and bad settings are refused."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from kgwise.errors import ConfigError
from kgwise.eval.route.experiment import simulate
from kgwise.eval.route.tuning import TuningConfig, cross_tune, pick_and_score
from kgwise.route.coke import CokeConfig, CokeRouter
from kgwise.route.table import OutcomeTable


def _table(n: int = 120, seed: int = 0) -> tuple[OutcomeTable, np.ndarray]:
    """A free arm right on kind-0 questions, a paid arm right on 90 % of all (a test double of outcomes)."""
    rng = np.random.default_rng(seed)
    kind = rng.integers(2, size=n)
    X = np.stack([np.ones(n), (kind == 0).astype(float)], axis=1)
    correct = np.stack([kind == 0, rng.random(n) < 0.9], axis=1)
    cost = np.tile([0.0, 0.01], (n, 1))
    table = OutcomeTable(tuple(f"q{i}" for i in range(n)), tuple(f"question {i}" for i in range(n)),
                         ("kgm", "llm"), ("KGM", "LLM"), (0.5, 0.9), correct, cost)
    return table, X


def test_pick_and_score_crosses_the_halves() -> None:
    a, b = ("x", None, False), ("x", 0.5, True)
    picks = pick_and_score({(0, a): 0.8, (0, b): 0.7, (1, a): 0.6, (1, b): 0.9})
    assert [(p["gamma"], p["tuned_accuracy"], p["held_out_accuracy"]) for p in picks] == [
        (None, 0.8, 0.6), (0.5, 0.9, 0.7)]
    with pytest.raises(ConfigError, match="half 1"):
        pick_and_score({(0, a): 0.8})


def test_cross_tune_scores_each_pick_on_the_other_half(tmp_path: Path) -> None:
    table, X = _table()
    cfg = TuningConfig(gammas=(None, 0.5), decomposed=(False,))
    log = tmp_path / "tune.jsonl"
    report = cross_tune(table, {"ctx": X}, CokeConfig(lam=0.0), cfg, seeds=2, progress_file=log,
                        show_progress=False)
    assert report["half_sizes"] == [60, 60] and len(report["grid"]) == 2
    for fold in report["folds"]:
        row = next(g for g in report["grid"] if g["gamma"] == fold["gamma"])
        assert fold["tuned_accuracy"] == row["accuracy_by_half"][fold["tuned_on"]]
        assert fold["tuned_accuracy"] == max(g["accuracy_by_half"][fold["tuned_on"]] for g in report["grid"])
        assert fold["held_out_accuracy"] == row["accuracy_by_half"][1 - fold["tuned_on"]]
        assert fold["held_out_cost_over_best"] <= cfg.budget_vs_best + 1e-9  # the budget holds
        assert 0 <= fold["held_out_best_arm_accuracy"] <= 1
        # warm-started: the same point on the same half, after learning the tuning half's outcomes
        assert 0 <= fold["warm_held_out_accuracy"] <= 1
        assert fold["warm_held_out_cost_over_best"] <= cfg.budget_vs_best + 1e-9
    # fold 0's warm score, by hand: a router that learnt half 0's outcomes, run on half 1
    perm = np.random.default_rng(cfg.split_seed).permutation(120)
    tune, held = np.sort(perm[:60]), np.sort(perm[60:])
    fold = report["folds"][0]
    coke = replace(CokeConfig(lam=0.0), pacing="price", gamma_override=fold["gamma"],
                   decomposed_reward=fold["decomposed_reward"])
    half = table.subset(held)
    accs = []
    for s in range(2):
        router = CokeRouter(half.arm_specs(), 2, budget=0.6 * half.cost[:, 1].sum(), config=coke, seed=s,
                            horizon=60)
        router.warm_start(X[tune], table.correct[tune])
        order = np.random.default_rng(s).permutation(60)
        accs.append(simulate(router, half, X[held], order, router).accuracy)
    assert fold["warm_held_out_accuracy"] == pytest.approx(np.mean(accs))
    # equal halves: the paired gap over all questions is the mean of the folds' gaps
    for kind in ("held_out", "warm_held_out"):
        gaps = [f[f"{kind}_accuracy"] - f["held_out_best_arm_accuracy"] for f in report["folds"]]
        assert report[f"{kind}_minus_best_arm"] == pytest.approx(np.mean(gaps))
        assert 0 < report[f"{kind}_minus_best_arm_se"] < 0.1
    lines = log.read_text().splitlines()
    assert len(lines) == 1 + 2 * 2 * 2 + 2 * 2  # fingerprint + halves × grid × seeds + folds × seeds
    again = cross_tune(table, {"ctx": X}, CokeConfig(lam=0.0), cfg, seeds=2, progress_file=log,
                       show_progress=False)
    assert again == report and log.read_text().splitlines() == lines  # resumed, nothing run again


def test_cross_tune_refuses_bad_settings() -> None:
    table, X = _table()
    with pytest.raises(ConfigError, match="3 rows for 120"):
        cross_tune(table, {"ctx": X[:3]}, CokeConfig(), TuningConfig(), seeds=1, show_progress=False)
    with pytest.raises(ConfigError, match="at least 4"):
        cross_tune(table.head(3), {"ctx": X[:3]}, CokeConfig(), TuningConfig(), seeds=1, show_progress=False)
    with pytest.raises(ConfigError, match="gammas"):
        TuningConfig(gammas=(-1.0,))
    with pytest.raises(ConfigError, match="budget_vs_best"):
        TuningConfig(budget_vs_best=0)
