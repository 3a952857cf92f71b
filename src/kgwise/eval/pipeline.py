"""``kgwise eval pipeline`` (a): the pipeline end to end on recorded arms (replay), fitted on one half of
the questions and tested on the other.

Each split draws a seeded permutation of the outcome table's questions; the first half is the dev log
(:func:`kgwise.app.fit.fit_questions`: every arm "runs" — replays — on it, the router is warm-started,
per-arm calibrations are made where answers carry choice probabilities), the second half is asked one
question at a time through :meth:`kgwise.app.Pipeline.answer` and settled by
:meth:`~kgwise.app.Pipeline.feedback` with the recorded outcome (free arms, cost 0, observed as the live
pipeline observes them). The budget is ``budget`` × the cost of always calling the most expensive arm on
the test half (``budget_of="dearest"``, ``kgwise eval route``'s convention) or the most accurate one
(``budget_of="best"``: the 60 % target; the best paid arm when the most accurate is free,
:meth:`~kgwise.route.table.OutcomeTable.budget_arm`), paced over the test half (``horizon``). The fit is
``kgwise fit``'s: with a large enough half it chooses the router's γ, reward form and context by
cross-fitting (each run reports the choice); the free arms (cost 0) answer every question with the
recorded top candidate and score given as ``free``, which the ``question+free`` context reads.

Reported per split and as mean ± std over splits: each arm's accuracy and cost on the test half, the
pipeline's accuracy, cost, spent/budget and share of questions routed to each arm, the oracle's accuracy
(some arm right) and the budgeted oracle's (the best any per-question choice of arms reaches within the
budget, :meth:`~kgwise.route.table.OutcomeTable.budgeted_oracle`), the share of each one's head-room over
the best single arm the pipeline closed (``(pipeline − best arm) / (ceiling − best arm)``, where positive;
``headroom_closed``, ``budgeted_headroom_closed``), in how many splits
the fit pinned each arm (routing did not clear it, ``[router] pin_single_arm``), and the target
checks against the best single arm (accuracy ≥ its, cost ≤ 60 % of its — of the best paid arm's when the
best arm is free, ``cost_reference_arm``). With UAG's tables of the
questions (``sets``), the open answers' sets over all test questions and per routed arm
(:mod:`kgwise.eval.pipeline_sets`). With ``sets.calibration = "held-out"`` the split is run as ``kgwise
fit`` runs it with ``[answer_sets] uag_llm``: ``1 − tune_share`` of the fit half (interleaved) is held out of
the fit — the router learns from the rest only — and before each test question the held-out questions
are re-routed by the router as it stands (:class:`kgwise.app.calibration.CalibrationSelector`, as
``Pipeline.answer`` does), which picks the arm's calibration questions. With ``"fit-half"`` the router
learns the whole fit half, and the sets are calibrated on all of it and per arm on the fit questions an
out-of-fold router sends there.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kgwise.app.arms import ArmOutput, ArmRunner
from kgwise.app.calibration import CalibrationSelector, HeldOutCalibration
from kgwise.app.config import AnswerSetConfig, ArmConfig, Context, KGConfig, PipelineConfig, RouterConfig
from kgwise.app.fit import fit_questions, held_out_calibration, interleaved, predicted_context
from kgwise.app.pipeline import BudgetExceededError, Pipeline, seeded_ids
from kgwise.app.router import context_vector
from kgwise.embed import Encoder
from kgwise.errors import ConfigError, ReplayMissError
from kgwise.eval.pipeline_sets import RoutedSets, summarise_sets
from kgwise.eval.route.learned import headroom_closed, mean_std, pooled_headroom_closed
from kgwise.eval.route.logs import FreeAnswers, GradedReplay
from kgwise.route.cascade import fit_cascade
from kgwise.route.coke import CokeConfig, CokeRouter
from kgwise.route.features import FREE_ONLY, PredictedContext
from kgwise.route.table import OutcomeTable
from kgwise.route.tuning import simulate
from kgwise.types import Question, Usage

__all__ = ["FreeAnswers", "PipelineEvalConfig", "ReplayArm", "arm_config", "evaluate_replay", "replay_report"]


@dataclass(frozen=True, slots=True)
class PipelineEvalConfig:
    """``budget``: fraction of the cost of always calling, on the test half, the most expensive arm
    (``budget_of="dearest"``) or the most accurate one (``"best"``); ``splits``: random halvings;
    ``seed``: of the first split (split ``s`` uses ``seed + s``); ``coke``: the router's values."""

    budget: float = 1.0
    splits: int = 10
    seed: int = 0
    coke: CokeConfig = field(default_factory=CokeConfig)
    budget_of: str = "dearest"
    context: Context = "question"
    """The config's ``[router] context``: what the router starts from when the fit's log is too small to
    cross-fit (the fit chooses otherwise)."""

    def __post_init__(self) -> None:
        if not (math.isfinite(self.budget) and self.budget > 0):
            raise ConfigError(f"budget must be a fraction > 0, got {self.budget}")
        if self.splits < 1:
            raise ConfigError(f"splits must be ≥ 1, got {self.splits}")
        if self.budget_of not in ("dearest", "best"):
            raise ConfigError(f"budget_of must be 'dearest' or 'best', got {self.budget_of!r}")


@dataclass
class ReplayArm:
    """An arm runner replaying recorded, graded outcomes keyed by question text (cost in ``Usage.cost``);
    ``answers``: where recorded, the arm's answer and signal (a GNN's top candidate and its score) by
    question text — what a ``question+free`` router context reads."""

    config: ArmConfig
    outcomes: Mapping[str, tuple[bool, float]]
    answers: Mapping[str, tuple[str, tuple[float, ...]]] = field(default_factory=dict)

    def can_answer(self, question: Question) -> bool:
        return question.text in self.outcomes

    def usage_bound(self, question: Question) -> Usage:
        return Usage(calls=1, cost=self._get(question)[1])

    def answer(self, question: Question) -> ArmOutput:
        correct, cost = self._get(question)
        answer, signals = self.answers.get(question.text, ("", ()))
        return ArmOutput(answer, usage=Usage(calls=1, cost=cost), correct=correct, signals=signals)

    def _get(self, question: Question) -> tuple[bool, float]:
        try:
            return self.outcomes[question.text]
        except KeyError:
            raise ReplayMissError(f"arm {self.config.name!r} has no recorded outcome for {question.ref}"
                                  ) from None


Said = Mapping[str, Sequence[tuple[str, tuple[float, ...]]]]
"""Per free arm, its answer and signals on each row of the outcome table."""


def _said(free: Mapping[str, FreeAnswers], free_signals: Mapping[str, Sequence[tuple[float, ...]]]) -> Said:
    """What the free arms said on each row: their answer and every signal the log gives (else the first)."""
    return {a: [(top[i], free_signals[a][i] if a in free_signals else (float(scores[i]),))
                for i in range(len(top))] for a, (top, scores) in free.items()}


def arm_config(table: OutcomeTable, j: int) -> ArmConfig:
    """The pipeline arm that replays the table's arm ``j`` (a free arm is observed on every question)."""
    name, cluster = table.arms[j], table.clusters[j]
    zero = bool(np.all(table.cost[:, j] == 0))
    return ArmConfig(name=name, kind="kgm" if cluster == "KGM" else "llm", cluster=cluster,
                     spec=None if cluster == "KGM" else f"replay:{name}", observe=zero,
                     cost_from_usage=not zero, reported_accuracy=table.reported[j])


def _runners(table: OutcomeTable, rows: Sequence[int], said: Said) -> dict[str, ArmRunner]:
    out: dict[str, ArmRunner] = {}
    for j, name in enumerate(table.arms):
        cfg = arm_config(table, j)
        answers = {table.texts[i]: said[name][i] for i in rows} if name in said else {}
        out[name] = ReplayArm(cfg, {table.texts[i]: (bool(table.correct[i, j]), float(table.cost[i, j]))
                                    for i in rows}, answers)
    return out


def _one_split(table: OutcomeTable, encoder: Encoder, cfg: PipelineEvalConfig, split: int, root: Path,
               free: Said, sets: RoutedSets | None) -> dict[str, Any]:
    n = table.n_questions
    perm = np.random.default_rng(cfg.seed + split).permutation(n)
    train, test = perm[: n // 2], perm[n // 2:]
    per_arm_cost = table.cost[test].sum(axis=0)
    acc = table.correct[test].mean(axis=0)
    best = int(np.argmax(acc))
    ref = table.budget_arm(test)  # the best arm, or the best paid arm when that is free
    base = float(per_arm_cost.max() if cfg.budget_of == "dearest" else per_arm_cost[ref])
    budget = cfg.budget * base
    runners = _runners(table, list(range(n)), free)
    config = PipelineConfig(root / "kgwise.toml", KGConfig(),
                            tuple(r.config for r in runners.values()),
                            RouterConfig(budget, "usd", len(test), cfg.seed + split, True, cfg.coke,
                                         cfg.context), AnswerSetConfig())
    pipe = Pipeline(config, root / f"state-{split}", runners, encoder, ids=seeded_ids(cfg.seed + split))
    held_mode = sets is not None and sets.calibration == "held-out"
    # the pipeline with UAG's sets holds 1 − tune_share of the open dev questions out of the router
    share = 1 - sets.tune_share if held_mode and sets is not None else 0.0
    hold = np.asarray([interleaved(j, share) for j in range(len(train))], dtype=bool)
    learn, held = train[~hold], train[hold]
    selector: CalibrationSelector | None = None
    test_groups: list[npt.NDArray[np.int64]] = []
    try:
        learn_q = [Question(table.qids[i], table.texts[i]) for i in learn]
        # replayed calls cost nothing real; the fit's limit is their recorded cost
        fitted = fit_questions(pipe, learn_q, max_spend=float(table.cost[learn].sum()) * (1 + 1e-9),
                               echo=lambda _: None)
        fit_groups = None if sets is None or held_mode else _out_of_fold_groups(
            table, encoder, config, pipe.state.context, pipe.state.router.router, free, train,
            budget / len(test), cfg.seed + split, pipe.state.router.predicted)
        if held_mode:
            selector = CalibrationSelector(_held_calibration(pipe, table, held, free))
        routed: list[str | None] = []
        correct: list[bool] = []
        paid = 0.0
        for k, i in enumerate(test):
            if selector is not None:  # as Pipeline.answer re-selects them, before the question's pull
                test_groups.append(selector.group(pipe.state.router.router, f"{split}:{k}"))
            try:
                r = pipe.answer(table.texts[i])
            except BudgetExceededError:
                routed.append(None)
                correct.append(False)
                continue
            j = table.arm_index(r.arm)
            seen = {name: bool(table.correct[i, table.arm_index(name)])
                    for name in pipe.state.pending[r.decision].observed}
            pipe.feedback(r.decision, correct=bool(table.correct[i, j]), observed=seen)
            routed.append(r.arm)
            correct.append(bool(table.correct[i, j]))
            paid += r.cost
        spent = pipe.state.router.spent
    finally:
        if selector is not None:
            selector.release()
        pipe.close()
    pipe_acc = float(np.mean(correct))
    oracle = float(table.correct[test].any(axis=1).mean())
    budgeted_oracle = table.budgeted_oracle(test, budget)
    answer_sets = (None if sets is None else
                   sets.split_held_out(learn.tolist(), held.tolist(), test.tolist(), routed, test_groups,
                                       table.arms) if held_mode else
                   sets.split(train.tolist(), test.tolist(), routed, table.arms, cfg.seed + split,
                              fit_groups))
    return {
        "split": split, "train": len(train), "router_learnt": len(learn), "held_out": len(held),
        "test": len(test), "budget": budget, "spent": spent,
        "spent_over_budget": spent / budget if budget else None, "paid": paid,
        "accuracy": pipe_acc, "cost": paid, "unanswered": routed.count(None),
        "share": {a: routed.count(a) / len(test) for a in table.arms},
        "arms": {a: {"accuracy": float(acc[j]), "cost": float(per_arm_cost[j])}
                 for j, a in enumerate(table.arms)},
        "best_arm": table.arms[best],
        "accuracy_minus_best": pipe_acc - float(acc[best]),
        "oracle_accuracy": oracle,
        "budgeted_oracle_accuracy": budgeted_oracle,
        "headroom_closed": headroom_closed(pipe_acc, float(acc[best]), oracle),
        "budgeted_headroom_closed": headroom_closed(pipe_acc, float(acc[best]), budgeted_oracle),
        "cost_over_best": paid / float(per_arm_cost[ref]) if per_arm_cost[ref] > 0 else None,
        "cost_reference_arm": table.arms[ref],
        "router_selection": None if fitted.router_selection is None else fitted.router_selection.to_dict(),
        "pinned": None if fitted.router_selection is None else fitted.router_selection.pinned,
        "answer_sets": answer_sets,
    }


def _contexts_of(config: PipelineConfig, context: Context, E: npt.NDArray[np.float64], table: OutcomeTable,
                 rows: npt.NDArray[np.int64], free: Said, predicted: PredictedContext | None = None
                 ) -> npt.NDArray[np.float64]:
    """The router context of each of ``rows`` from their question embeddings ``E`` (``context``: the
    fitted one; ``predicted``: its predictor), as the pipeline builds it."""
    return np.stack([context_vector(config, context, E[k],
                                    {a: free[a][i] for a in config.free_arms if a in free},
                                    table.texts[i], predicted) for k, i in enumerate(rows)])


def _held_calibration(pipe: Pipeline, table: OutcomeTable, held: npt.NDArray[np.int64], free: Said
                      ) -> HeldOutCalibration:
    """The held-out fit rows as the pipeline's fit keeps them (:func:`kgwise.app.fit.held_out_calibration`:
    router contexts in the fitted context, every arm's cost bound; open questions, so no choice scores)."""
    X = np.zeros((0, pipe.state.router.router.dim))
    if len(held):
        E = np.asarray(pipe.encoder.encode([table.texts[i] for i in held]), dtype=np.float64)
        X = _contexts_of(pipe.config, pipe.state.context, E, table, held, free, pipe.state.router.predicted)
    return held_out_calibration(pipe, [Question(table.qids[i], table.texts[i]) for i in held], {}, X,
                                pipe.state.context)


def _out_of_fold_groups(table: OutcomeTable, encoder: Encoder, config: PipelineConfig, context: Context,
                        fitted: CokeRouter, free: Said, train: npt.NDArray[np.int64],
                        budget_per_question: float, seed: int, predicted: PredictedContext | None = None
                        ) -> list[str | None]:
    """Per fit row, the arm a router that never learnt it sends it to: the fit rows are halved, and a
    router with the fitted one's settings (γ, reward form, context, pinned arm), warm-started on one half,
    routes the other in order within a paced budget, learning as the pipeline does live
    (:func:`kgwise.route.tuning.simulate`). A ``predicted`` or ``cascade`` context's success predictor and
    cascade rule are learnt again on the warm-start half alone, as ``kgwise fit`` learns them
    (:func:`kgwise.app.fit.predicted_context`, :func:`kgwise.route.cascade.fit_cascade`): the fitted ones
    learnt the routed half's outcomes too. What the per-arm (Mondrian) sets calibrate on."""
    groups: list[str | None] = [None] * len(train)
    Y = table.correct[train].astype(np.float64)
    E = np.asarray(encoder.encode([table.texts[i] for i in train]), dtype=np.float64)
    # a predicted context is built again per half below; any other is the fitted one's, built once
    X = _contexts_of(config, context, E, table, train, free) if predicted is None else None
    # what the predicted context is learnt from, per half
    questions = [Question(table.qids[i], table.texts[i]) for i in train]
    free_said = {a: [free[a][i] for i in train] for a in config.free_arms if a in free}
    # ``train`` is already in random order: alternate rows are random halves
    halves = (np.arange(0, len(train), 2), np.arange(1, len(train), 2))
    for h, mine in enumerate(halves):
        other = halves[1 - h]
        cascade = None
        if X is not None:
            warm, routed = X[other], X[mine]
        else:
            made, why_not = predicted_context(config, questions, free_said, Y, E, other.tolist(),
                                              free_only=context == FREE_ONLY)
            if made is None:
                raise ConfigError(f"out-of-fold routing of the fit rows in the {context!r} context: "
                                  f"{why_not}")
            rows, _, kept = made
            warm, routed = rows[other], rows[mine]  # out of fold on ``other``; ``mine`` as new questions
            if fitted.cascade is not None:
                cascade = fit_cascade(warm, Y[other], table.cost[train[other]], budget_per_question,
                                      kept[other])
        router = CokeRouter(table.arm_specs(), warm.shape[1], budget=budget_per_question * len(mine),
                            config=fitted.config, seed=seed, horizon=len(mine))
        router.warm_start(warm, Y[other])
        router.pin(fitted.pinned_arm)
        router.cascade = cascade
        result = simulate(router, table.subset(train[mine]), routed, np.arange(len(mine)), router)
        for k, j in zip(mine, result.chosen, strict=True):
            groups[k] = table.arms[j] if j >= 0 else None
    return groups


def _sets_line(sets: Mapping[str, Any] | None) -> str:
    """The progress line's part on a split's sets (:meth:`RoutedSets.split`): per α, coverage and whether
    every routed arm met its target."""
    out = ""
    for a in (sets or {}).get("alphas", []):
        out += f"; sets α={a['alpha']:g}: " + (
            f"coverage {a['coverage']:.3f}, every arm on target: "
            f"{all(x['on_target'] for x in a['arms'].values())}" if a["certified"] else "not certified")
    return out


def evaluate_replay(table: OutcomeTable, encoder: Encoder, cfg: PipelineEvalConfig,
                    progress: Callable[[str], None] = lambda _: None,
                    free: Mapping[str, FreeAnswers] | None = None, sets: RoutedSets | None = None,
                    free_signals: Mapping[str, Sequence[tuple[float, ...]]] | None = None
                    ) -> dict[str, Any]:
    """The pipeline on ``table`` over ``cfg.splits`` random halvings (module docstring); ``free``: per
    free arm, its answer and signal on each of the table's questions (row order); ``free_signals``: where
    known, every signal of theirs (what a ``predicted`` context reads; else the first); ``sets``: UAG's
    tables of the questions, for the open answers' sets (:mod:`kgwise.eval.pipeline_sets`)."""
    free = dict(free or {})
    for name, (top, scores) in free.items():
        j = table.arm_index(name)
        if np.any(table.cost[:, j] != 0):
            raise ConfigError(f"arm {name!r} costs something on some question: it is not a free arm")
        if len(top) != table.n_questions or len(scores) != table.n_questions:
            raise ConfigError(f"free answers of {name!r}: {len(top)} answers and {len(scores)} signals for "
                              f"{table.n_questions} questions")
    if table.n_questions < 4:
        raise ConfigError(f"the outcome table holds {table.n_questions} questions; a split needs ≥ 4")
    if len(set(table.texts)) != table.n_questions:
        raise ConfigError("the outcome table repeats question texts; the pipeline keys questions by text")
    said = _said(free, free_signals or {})
    runs = []
    with tempfile.TemporaryDirectory(prefix="kgwise-eval-pipeline-") as tmp:
        for s in range(cfg.splits):
            runs.append(_one_split(table, encoder, cfg, s, Path(tmp), said, sets))
            r = runs[-1]
            progress(f"split {s + 1}/{cfg.splits}: accuracy {r['accuracy']:.4f}, cost {r['cost']:.4f} "
                     f"(best arm {r['best_arm']}: {r['arms'][r['best_arm']]['accuracy']:.4f}, "
                     f"{r['arms'][r['best_arm']]['cost']:.4f}), spent/budget {r['spent_over_budget']:.3f}"
                     + (f", pinned to {r['pinned']}" if r["pinned"] else "") + _sets_line(r["answer_sets"]))
    over = [r["cost_over_best"] for r in runs if r["cost_over_best"] is not None]
    summary = {
        "accuracy": mean_std([r["accuracy"] for r in runs]),
        "cost": mean_std([r["cost"] for r in runs]),
        "spent_over_budget": mean_std([r["spent_over_budget"] for r in runs]),
        "accuracy_minus_best": mean_std([r["accuracy_minus_best"] for r in runs]),
        "oracle_accuracy": mean_std([r["oracle_accuracy"] for r in runs]),
        "budgeted_oracle_accuracy": mean_std([r["budgeted_oracle_accuracy"] for r in runs]),
        **{k: mean_std(v) if (v := [r[k] for r in runs if r[k] is not None]) else None
           for k in ("headroom_closed", "budgeted_headroom_closed")},
        "cost_over_best": mean_std(over) if over else None,
        "share": {a: mean_std([r["share"][a] for r in runs]) for a in table.arms},
        "splits_pinned": {a: sum(r["pinned"] == a for r in runs) for a in table.arms},
        "arms": {a: {"accuracy": mean_std([r["arms"][a]["accuracy"] for r in runs]),
                     "cost": mean_std([r["arms"][a]["cost"] for r in runs])} for a in table.arms},
    }
    acc_ok = [r["accuracy_minus_best"] >= 0 for r in runs]
    cost_ok = [r["cost_over_best"] is not None and r["cost_over_best"] <= 0.6 for r in runs]

    def splits(ok: Sequence[bool]) -> str:
        return f"{sum(ok)}/{len(runs)} splits"

    targets = {"accuracy >= best single arm": splits(acc_ok),
               "cost <= 60% of the best arm's": splits(cost_ok),
               "both": splits([a and c for a, c in zip(acc_ok, cost_ok, strict=True)]),
               "spent >= 90% of budget": splits([(r["spent_over_budget"] or 0) >= 0.9 for r in runs]),
               "budgeted oracle >= best arm (reachable at all)": splits(
                   [r["budgeted_oracle_accuracy"] >= r["arms"][r["best_arm"]]["accuracy"] for r in runs]),
               "budgeted oracle head-room closed": summary["budgeted_headroom_closed"],
               # the mean gain over the mean head-room (stable where one split's head-room is tiny)
               "budgeted oracle head-room closed, pooled": pooled_headroom_closed(
                   [r["accuracy"] for r in runs], [r["arms"][r["best_arm"]]["accuracy"] for r in runs],
                   [r["budgeted_oracle_accuracy"] for r in runs])}
    return {"questions": table.n_questions, "unit": table.unit,
            "config": {"budget_fraction": cfg.budget, "budget_of": cfg.budget_of, "splits": cfg.splits,
                       "seed": cfg.seed, "coke": asdict(cfg.coke), "context": cfg.context,
                       "free_arms": sorted(free)},
            "summary": summary, "targets": targets, "runs": runs,
            **({"answer_sets": summarise_sets(runs, table.arms, sets.alphas)} if sets is not None else
               {"not_measured": ["answer-set coverage and size: no UAG tables of the questions were given "
                                "(--no-sets, or a graded log without --sets-questions, --sets-kg and "
                                "--sets-generations)"]})}


def replay_report(replay: GradedReplay, encoder: Encoder, cfg: PipelineEvalConfig,
                  progress: Callable[[str], None] = lambda _: None, sets: RoutedSets | None = None,
                  dataset: str = "") -> dict[str, Any]:
    """``kgwise eval pipeline``'s report of a replay (a graded log, or WebQSP's recorded arms through the
    same reader, :mod:`kgwise.eval.route.logs`): :func:`evaluate_replay` with the free arms' answers and
    first signals the log carries, and where the questions came from."""
    np.asarray(encoder.encode(list(replay.table.texts)), dtype=np.float64)  # one batch; then lookups
    report = evaluate_replay(replay.table, encoder, cfg, progress=progress, free=replay.free, sets=sets,
                             free_signals=replay.free_signals)
    return report | {"dataset": dataset, "coverage": replay.coverage}
