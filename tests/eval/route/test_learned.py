"""Routers that start from the learned success predictor: within the paced budget, and better than the best
single arm where a free arm's signals tell when it is right."""

from __future__ import annotations

import numpy as np
import pytest

from kgwise.datasets.user import ArmOutcome, GradedLog, GradedQuestion
from kgwise.eval.pipeline_live import choice_signals
from kgwise.eval.route.learned import (
    BEFORE,
    POLICIES,
    REPORTED,
    LearnedConfig,
    headroom_closed,
    learned_report,
)
from kgwise.eval.route.logs import GradedReplay, graded_replay
from kgwise.route.arms import ArmSpec
from kgwise.route.coke import CokeConfig


def _replay(n: int = 240) -> GradedReplay:
    """A free KG model right 60 % of the time whose first signal says when (noisily), a cheap LLM right
    50 %, a dear one right 80 %."""
    rng = np.random.default_rng(0)
    rows = []
    for i in range(n):
        kg_ok = bool(rng.random() < 0.6)
        conf = float(np.clip((0.75 if kg_ok else 0.35) + rng.normal(0, 0.1), 0, 1))
        rows.append(GradedQuestion(f"q{i}", f"which drug treats disease number {i}?", {
            "kg": ArmOutcome("a" if kg_ok else "b", kg_ok, 0.0, None, (conf, float(rng.random()))),
            "small": ArmOutcome("a", bool(rng.random() < 0.5), 1.0, None, (float(rng.random()),)),
            "big": ArmOutcome("a", bool(rng.random() < 0.8), 4.0)}))
    arms = [ArmSpec("kg", "KGM", 0.6), ArmSpec("small", "LLM", 0.5), ArmSpec("big", "LLM", 0.8)]
    return graded_replay(GradedLog(tuple(rows), ("kg", "small", "big")), arms, "synthetic")


def test_learned_routers_stay_in_budget_and_use_the_free_arms_signals() -> None:
    replay = _replay()
    E = np.random.default_rng(1).normal(size=(replay.table.n_questions, 8))  # embeddings: noise
    cfg = LearnedConfig(splits=2, embedding_dims=4, refit_every=40)
    report = learned_report(replay, E, CokeConfig(), cfg)
    for run in report["runs"]:
        assert run["selected"] in POLICIES
        for policy in REPORTED:
            assert run[policy]["cost"] <= run["reference"]["budget"] + 1e-9, policy
        assert run["cascade"]["cheap_arm"] == "kg" and run["cascade"]["strong_arm"] == "big"
        assert run["predictor_calibration"]["brier"] < run["predictor_calibration"]["base_rate_brier"]
        assert run["selected_before"] in BEFORE and "predicted-free" not in BEFORE
        ref = run["reference"]
        assert ref["budgeted_oracle_accuracy"] <= ref["oracle_accuracy"]
        ceiling, best = ref["budgeted_oracle_accuracy"], ref["best_arm_accuracy"]
        assert run["budgeted_headroom_closed"] == pytest.approx(
            (run["selected_accuracy"] - best) / (ceiling - best))
    # the free arm's signal tells when it is right: asking the dear arm only then beats always the dear
    # arm at 60 % of its cost
    assert report["summary"]["predicted"]["accuracy"]["mean"] > report["best_arm_accuracy"]["mean"]
    assert report["summary"]["cascade"]["accuracy"]["mean"] > report["best_arm_accuracy"]["mean"]
    # the free arm's first signal is all that predicts here: the predictor on the free arms' confidence
    # alone finds it too
    assert report["summary"]["predicted-free"]["accuracy"]["mean"] > report["best_arm_accuracy"]["mean"]
    # … and beside it, the neighbour success rates on noise embeddings do not hide it
    summary = report["summary"]
    assert summary["predicted-free+neighbours"]["accuracy"]["mean"] > report["best_arm_accuracy"]["mean"]
    assert report["targets"]["cost <= 60% of the budget arm's"] == "2/2 splits"


def test_choice_signals_read_a_distribution() -> None:
    top, margin, entropy = choice_signals({"A": 0.7, "B": 0.2, "C": 0.1})
    assert top == pytest.approx(0.7) and margin == pytest.approx(0.5)
    assert entropy == pytest.approx(-(0.7 * np.log(0.7) + 0.2 * np.log(0.2) + 0.1 * np.log(0.1)))
    assert choice_signals({}) == ()


def test_head_room_closed_is_the_share_of_the_gain_a_ceiling_allows() -> None:
    assert headroom_closed(0.55, 0.5, 0.7) == pytest.approx(0.25)
    assert headroom_closed(0.45, 0.5, 0.7) == pytest.approx(-0.25)
    assert headroom_closed(0.5, 0.5, 0.5) is None  # no head-room: no router can gain
    assert headroom_closed(0.4, 0.5, 0.45) is None  # the budgeted oracle below the best arm
