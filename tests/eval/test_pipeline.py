"""``evaluate_replay``: the pipeline on recorded outcomes, fitted on one half and tested on the other."""

from __future__ import annotations

import numpy as np
import pytest

from kgwise.embed import MiniLM
from kgwise.errors import ConfigError
from kgwise.eval.pipeline import PipelineEvalConfig, evaluate_replay
from kgwise.route.table import OutcomeTable

pytestmark = pytest.mark.slow  # loads all-MiniLM-L6-v2 and runs two fits


def _table(n: int = 60) -> OutcomeTable:
    rng = np.random.default_rng(0)
    texts = tuple(f"which drug treats condition number {i}?" for i in range(n))
    correct = np.column_stack([rng.random(n) < p for p in (0.5, 0.7, 0.9)])
    cost = np.column_stack([np.zeros(n), np.full(n, 0.01), rng.uniform(0.05, 0.15, n)])
    return OutcomeTable(tuple(f"q{i}" for i in range(n)), texts, ("gnn", "small", "big"),
                        ("KGM", "LLM", "LLM"), (None, None, None), correct, cost)


def test_the_replayed_pipeline_reports_arms_and_itself_within_its_budget() -> None:
    table = _table()
    report = evaluate_replay(table, MiniLM(), PipelineEvalConfig(budget=0.5, splits=2))
    assert report["questions"] == 60 and len(report["runs"]) == 2
    for run in report["runs"]:
        assert run["train"] == run["test"] == 30
        assert sum(run["share"].values()) == pytest.approx(1.0 - run["unanswered"] / 30)
        assert run["paid"] == pytest.approx(run["spent"]) and run["spent"] <= run["budget"] + 1e-12
        test_rows = np.random.default_rng(run["split"]).permutation(60)[30:]
        for j, arm in enumerate(table.arms):
            assert run["arms"][arm]["accuracy"] == pytest.approx(table.correct[test_rows, j].mean())
            assert run["arms"][arm]["cost"] == pytest.approx(table.cost[test_rows, j].sum())
        assert run["budget"] == pytest.approx(0.5 * table.cost[test_rows, 2].sum())
    assert set(report["targets"]) == {"accuracy >= best single arm", "cost <= 60% of the best arm's", "both"}
    assert report["not_measured"]


def test_the_budget_can_be_a_fraction_of_the_best_arms_cost() -> None:
    table = _table()
    report = evaluate_replay(table, MiniLM(), PipelineEvalConfig(budget=0.6, splits=1, budget_of="best"))
    run = report["runs"][0]
    test_rows = np.random.default_rng(0).permutation(60)[30:]
    best = int(np.argmax(table.correct[test_rows].mean(axis=0)))
    assert run["best_arm"] == table.arms[best] and report["config"]["budget_of"] == "best"
    assert run["budget"] == pytest.approx(0.6 * table.cost[test_rows, best].sum())
    assert run["spent"] <= run["budget"] + 1e-12


def test_budget_of_names_an_arm_rule() -> None:
    with pytest.raises(ConfigError, match="budget_of"):
        PipelineEvalConfig(budget_of="cheapest")
