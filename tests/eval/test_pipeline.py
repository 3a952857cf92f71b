"""``evaluate_replay``: the pipeline on recorded outcomes, fitted on one half and tested on the other."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

import kgwise.eval.pipeline
from kgwise.app.config import AnswerSetConfig, KGConfig, PipelineConfig, RouterConfig
from kgwise.app.fit import PREDICTOR_FOLDS, FitReport, fit_questions, predicted_context
from kgwise.app.pipeline import Pipeline
from kgwise.app.router import context_vector
from kgwise.conformal.grid import TableBatch
from kgwise.embed import MiniLM
from kgwise.errors import ConfigError
from kgwise.eval.pipeline import PipelineEvalConfig, evaluate_replay
from kgwise.eval.pipeline_sets import RoutedSets
from kgwise.route.cascade import CascadeRule
from kgwise.route.coke import CokeConfig, CokeRouter
from kgwise.route.features import PreCallFeatures, PredictedContext, context_rows
from kgwise.route.predictor import cross_fitted
from kgwise.route.table import OutcomeTable, free_context, free_signal_row
from kgwise.route.tuning import simulate
from kgwise.types import Question

slow = pytest.mark.slow  # loads all-MiniLM-L6-v2 and runs two fits


def _table(n: int = 60) -> OutcomeTable:
    rng = np.random.default_rng(0)
    texts = tuple(f"which drug treats condition number {i}?" for i in range(n))
    correct = np.column_stack([rng.random(n) < p for p in (0.5, 0.7, 0.9)])
    cost = np.column_stack([np.zeros(n), np.full(n, 0.01), rng.uniform(0.05, 0.15, n)])
    return OutcomeTable(tuple(f"q{i}" for i in range(n)), texts, ("gnn", "small", "big"),
                        ("KGM", "LLM", "LLM"), (None, None, None), correct, cost)


@slow
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
        best = run["arms"][run["best_arm"]]["accuracy"]
        ceiling = table.budgeted_oracle(test_rows, run["budget"])
        assert run["budgeted_oracle_accuracy"] == pytest.approx(ceiling)
        if ceiling > best:  # the share of what any router could gain at this budget that it gained
            closed = (run["accuracy"] - best) / (ceiling - best)
            assert run["budgeted_headroom_closed"] == pytest.approx(closed)
        else:
            assert run["budgeted_headroom_closed"] is None
    assert set(report["targets"]) == {
        "accuracy >= best single arm", "cost <= 60% of the best arm's", "both", "spent >= 90% of budget",
        "budgeted oracle >= best arm (reachable at all)", "budgeted oracle head-room closed",
        "budgeted oracle head-room closed, pooled"}
    assert report["not_measured"]


@slow
@pytest.mark.parametrize("calibration", ["held-out", "fit-half"])
def test_the_sets_are_calibrated_as_the_pipeline_calibrates_them(webqsp_uag_tables: TableBatch,
                                                                 calibration: str) -> None:
    """Held-out (``kgwise fit`` with ``uag_llm``): 60 % of the fit half never teaches the router and
    calibrates UAG per routed arm; fit-half: the router learns it all, sets calibrated two ways."""
    table = _table(300)
    sets = RoutedSets(webqsp_uag_tables, np.arange(300, dtype=np.int64), alphas=(0.3,),
                      calibration=calibration)
    report = evaluate_replay(table, MiniLM(), PipelineEvalConfig(budget=0.5, splits=1), sets=sets)
    run = report["runs"][0]
    row = run["answer_sets"]["alphas"][0]
    assert row["certified"] and row["questions"] == 150 - run["unanswered"]
    summary = report["answer_sets"]["0.3"]
    if calibration == "held-out":
        assert (run["router_learnt"], run["held_out"]) == (60, 90)
        sizes = run["answer_sets"]["tuning_questions"], run["answer_sets"]["calibration_questions"]
        assert sizes == (60, 90)
        assert 0 <= row["fallback"] <= 1 and "fallback" in summary and "per_arm" not in summary
    else:
        assert (run["router_learnt"], run["held_out"]) == (150, 0)
        assert run["answer_sets"]["calibration_questions"] == 150 and "per_arm" in summary


@slow
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


class FakeEncoder:
    """Test double of :class:`kgwise.embed.Encoder`: a unit vector from the text's hash (8-d)."""

    dim = 8

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = []
        for t in texts:
            v = np.random.default_rng(int.from_bytes(hashlib.sha1(t.encode()).digest()[:4], "little")).normal(
                size=self.dim)
            out.append(v / np.linalg.norm(v))
        return np.asarray(out, dtype=np.float32)


def _free_table(n: int) -> tuple[OutcomeTable, dict[str, tuple[list[str], np.ndarray]]]:
    """Two free GNNs whose top candidates agree (and are right) on "easy" questions, a cheap and a dear
    LLM; the GNNs' candidates and scores are what a question+free context reads."""
    rng = np.random.default_rng(1)
    easy = rng.random(n) < 0.5
    texts = tuple(f"which drug treats condition number {i}?" for i in range(n))
    gnn = easy & (rng.random(n) < 0.9)
    correct = np.column_stack([gnn, gnn | (rng.random(n) < 0.2), rng.random(n) < 0.6, rng.random(n) < 0.9])
    cost = np.column_stack([np.zeros(n), np.zeros(n), np.full(n, 0.01), rng.uniform(0.05, 0.15, n)])
    table = OutcomeTable(tuple(f"q{i}" for i in range(n)), texts, ("gnn-a", "gnn-b", "small", "big"),
                         ("KGM", "KGM", "LLM", "LLM"), (0.5, 0.5, 0.6, 0.85), correct, cost)
    top_a = [f"m.{i}" if easy[i] else f"m.a{i}" for i in range(n)]
    top_b = [f"m.{i}" if easy[i] else f"m.b{i}" for i in range(n)]
    scores_a = np.where(easy, 0.9, 0.3) + rng.normal(0, 0.05, n)
    scores_b = np.where(easy, 0.8, 0.4) + rng.normal(0, 0.05, n)
    return table, {"gnn-a": (top_a, scores_a), "gnn-b": (top_b, scores_b)}


# at 240 the fit picks the context itself
@pytest.mark.parametrize("n, context", [(60, "question+free"), (60, "predicted"), (60, "cascade"),
                                        (60, "predicted-free"), (240, "question")])
def test_the_pipelines_router_figures_equal_eval_routes_for_the_same_settings(
        n: int, context: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same engine. A Coke router with the settings the pipeline's fit chose (cross-fitted at n = 240,
    the config's at n = 60), its pinned arm and cascade rule, if any, warm-started on the fit half's
    outcomes over the same context (``predicted``/``cascade``: the success predictor's out-of-fold rows, as
    the fit warm-starts on them), then replayed by ``kgwise eval route``'s :func:`simulate` over the test
    half in the pipeline's order (``predicted``/``cascade``: each question's context from the predictor the
    fit kept in the pipeline's state), makes the same choices: the same accuracy, cost and shares."""
    table, free = _free_table(n)
    enc = FakeEncoder()
    coke = CokeConfig(lam=0.0, pacing="price", gamma_override=0.25, decomposed_reward=True)
    cfg = PipelineEvalConfig(budget=0.6, splits=1, seed=3, coke=coke, budget_of="best",
                             context=context)  # type: ignore[arg-type]
    fitted: list[tuple[PipelineConfig, PredictedContext | None]] = []

    def fit_and_keep(pipe: Pipeline, *args: Any, **kwargs: Any) -> FitReport:
        report = fit_questions(pipe, *args, **kwargs)
        fitted.append((pipe.config, pipe.state.router.predicted))
        return report

    monkeypatch.setattr(kgwise.eval.pipeline, "fit_questions", fit_and_keep)
    run = evaluate_replay(table, enc, cfg, free=free)["runs"][0]
    sel = run["router_selection"]
    assert sel["method"] == ("cross-fitting" if n >= 200 else "config")
    assert (sel["cascade"] is not None) == (sel["context"] == "cascade")
    perm = np.random.default_rng(3).permutation(n)
    train, test = perm[: n // 2], perm[n // 2:]
    emb = np.asarray(enc.encode(list(table.texts)), dtype=np.float64)
    said = [{a: (free[a][0][i], (float(free[a][1][i]),)) for a in free} for i in range(n)]
    x, warm = emb, None
    if sel["context"] in ("question+free", "free"):
        rows = [free_signal_row([(free[a][0][i], float(free[a][1][i])) for a in ("gnn-a", "gnn-b")])
                for i in range(n)]
        x = free_context(rows, emb if sel["context"] == "question+free" else emb[:, :0])
    elif sel["context"] in ("predicted", "cascade", "predicted-free"):
        (config, predicted), = fitted
        assert predicted is not None
        x = np.stack([context_vector(config, sel["context"], emb[i], said[i], table.texts[i], predicted)
                      for i in range(n)])
        # the warm start reads out-of-fold predictions, each fold's by a predictor fitted on the others
        free_only = sel["context"] == "predicted-free"  # the free arms' confidence alone
        features = PreCallFeatures.fit({a: [said[i][a] for i in train] for a in free}, emb[train],
                                       dims=0 if free_only else 16, form=not free_only)
        F = features.rows([table.texts[i] for i in train], emb[train],
                          {a: [said[i][a] for i in train] for a in free})
        folds = [np.arange(k, len(train), PREDICTOR_FOLDS) for k in range(PREDICTOR_FOLDS)]
        warm = context_rows(cross_fitted(F, table.correct[train].astype(float), folds))
    router = CokeRouter(table.arm_specs(), x.shape[1], budget=run["budget"], seed=3, horizon=len(test),
                        config=replace(coke, gamma_override=sel["gamma"],
                                       decomposed_reward=sel["decomposed_reward"]))
    router.warm_start(x[train] if warm is None else warm, table.correct[train].astype(float))
    router.pin(sel["pinned"])  # the fit's verdict on routing against the best single arm, if it pinned one
    if sel["cascade"] is not None:
        router.cascade = CascadeRule.from_dict(sel["cascade"], table.arms)
    ref = simulate(router, table, x, test, router)
    assert run["accuracy"] == pytest.approx(ref.accuracy)
    assert run["cost"] == pytest.approx(ref.total_cost)
    shares = np.bincount(ref.chosen[ref.chosen >= 0], minlength=table.n_arms) / len(test)
    assert [run["share"][a] for a in table.arms] == pytest.approx(shares.tolist())


def test_out_of_fold_groups_are_routed_by_a_predictor_and_cascade_that_never_learnt_them() -> None:
    """The per-arm sets calibrate on the arms out-of-fold routers send the fit rows to: each half is routed
    by a predictor and a cascade rule learnt on the other half alone. The fitted router's rule (learnt on
    every fit row) is not read: a rule that never escalates and one that always does give the same
    groups, some of them the strong arm and most the free one (the budget affords escalating 30 %)."""
    n = 160
    table, free = _free_table(n)
    enc = FakeEncoder()
    said = kgwise.eval.pipeline._said(free, {})
    runners = kgwise.eval.pipeline._runners(table, list(range(n)), said)
    train = np.random.default_rng(0).permutation(n)
    per_question = 0.3 * float(table.cost[train, 3].mean())
    config = PipelineConfig(Path("kgwise.toml"), KGConfig(), tuple(r.config for r in runners.values()),
                            RouterConfig(per_question * n, "usd", n, 0, True, CokeConfig(), "cascade"),
                            AnswerSetConfig())
    emb = np.asarray(enc.encode(list(table.texts)), dtype=np.float64)
    made, why_not = predicted_context(config, [Question(table.qids[i], table.texts[i]) for i in range(n)],
                                      {a: said[a] for a in free}, table.correct.astype(float), emb,
                                      list(range(n)))
    assert made is not None, why_not
    groups = []
    for threshold in (2.0, -2.0):  # never, always
        fitted = CokeRouter(table.arm_specs(), 1 + table.n_arms, budget=per_question * n, horizon=n)
        fitted.cascade = CascadeRule(cheap=1, strong=3, threshold=threshold, share=0.0, accuracy=0.0)
        groups.append(kgwise.eval.pipeline._out_of_fold_groups(
            table, enc, config, "cascade", fitted, said, train, per_question, 0, made[1]))
    assert groups[0] == groups[1]
    assert 0 < groups[0].count("big") < groups[0].count("gnn-b")  # gnn-b: the more accurate free arm
