"""``kgwise eval route``'s computation: every router and baseline on one replay (a graded log, or WebQSP's
recorded arms through the same door, :mod:`kgwise.eval.route.logs`), in one JSON report.

Beside :func:`~kgwise.eval.route.experiment.run_experiment` (single arms, random, the oracle, Coke and its
ablations and sweeps, the threshold router, mabwiser) the report adds: Coke for the settings the paper
leaves open (``sensitivity``), the free arms' signals as Coke's context (``context_variants``), the
hindsight and learned cascades on them (``hindsight_cascade``), cross-tuned Coke (``cross_tuned``) and the
learned success predictor and the routers that start from it (``learned``,
:mod:`kgwise.eval.route.learned`), with the targets for each."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kgwise.embed import Encoder
from kgwise.eval.route.experiment import RouteExperimentConfig, base_cost, run_experiment, simulate
from kgwise.eval.route.learned import LEARNED_MIN_QUESTIONS, LearnedConfig
from kgwise.eval.route.logs import GradedReplay
from kgwise.route.coke import CokeRouter

__all__ = ["RouteReportConfig", "route_report"]

Matrix = npt.NDArray[np.float64]

_SENSITIVITY: tuple[tuple[str, dict[str, Any]], ...] = (
    ("paper: delta=0.05, Eq. 14 exactly (regret_prior=0)", {"delta": 0.05, "regret_prior": 0.0}),
    ("delta=0.9 (smallest gamma of Eq. 12), regret_prior=10", {"delta": 0.9, "regret_prior": 10.0}),
    ("gamma=0.5 (below Eq. 12's range), regret_prior=10", {"gamma_override": 0.5, "regret_prior": 10.0}),
    ("decomposed reward r - E[theta_c] for LinUCB", {"decomposed_reward": True}),
)

LOG_NOTES = [
    "Correct and cost as the graded log records them (usage priced by the arm's exact name from the price "
    "table, kgwise/data/prices.toml or $KGWISE_PRICES); questions graded on every --arm (coverage).",
    "Coke's priors are the --arm reported accuracies.",
]
WEBQSP_NOTES = [
    "WebQSP's recorded arms, written as a graded log (kgwise eval data export --dataset webqsp --log) and "
    "read as any graded log is.",
    "Correct = Hit: at least one gold answer in the arm's answer (ReaRev: Hits@1 of its top candidate).",
    "Questions: WebQSP test questions with gold names that every arm covers (GPT-4 only in gpt4_subset).",
    "Costs in US dollars from kgwise/data/prices.toml; tokens recorded for AoG, else ceil(chars/4) "
    "of the prompt and the answer; ReaRev (local GNN) costs $0.",
    "Coke's priors use each system's hit rate over its whole released file (its 'reported accuracy').",
]
COMMON_NOTES = [
    "The threshold router's classifier is cross-fitted (5 folds) on the same questions: an optimistic "
    "offline baseline, while Coke learns online from its own choices.",
    "hindsight_cascade (when the threshold router's cheap arm is a free arm with signals) is a bound, not a "
    "router: the free arm answers when its own top score is high, else the strong arm does, with thresholds "
    "read off the evaluation questions themselves; .agreement ranks by the free arms' agreement instead; "
    ".learned is a router: the threshold router's protocol on the free arms' signals.",
    "context_variants: Coke with the same settings, its LinUCB context being what the free arms say before "
    "any paid arm is called ([1, agree, each free arm's signals[0], agree * min]; free), alone or joined to "
    "the question embedding.",
    "price_paced_budget_sweep: Coke with pacing='price' and lambda = price_lam, the free arms' outcomes "
    "observed on every question; its settings are in price_paced_config.",
    "cross_tuned: price-paced Coke at 60 % of the best arm's cost, its gamma, reward decomposition and "
    "context chosen on one half of the questions and scored on the other (both ways). "
    "warm_held_out_accuracy: the same, the router first learning every arm's recorded outcomes on the "
    "tuning half.",
    "learned: a per-arm success predictor (ridge logistic regression on the log's signals, the free "
    "context, the question's form and embedding) fitted on one half, and routers starting from it scored on "
    "the other half, both ways; the one reported as 'selected' is chosen by cross-fitting on the fitting "
    "half alone.",
]


@dataclass(frozen=True)
class RouteReportConfig:
    """What ``eval route`` runs beyond the experiment: the open settings (``sensitivity``), cross-tuning
    (``tune``) and the learned routers (``learned``)."""

    experiment: RouteExperimentConfig
    sensitivity: bool = True
    tune: bool = True
    learned: bool = True
    learned_config: LearnedConfig | None = None


def _sensitivity(table: Any, X: Matrix, base: RouteExperimentConfig) -> list[dict[str, Any]]:
    """Coke for settings the paper leaves open (δ, the cost-regret prior, the LinUCB target), same orders."""
    out = []
    budget = base.budget_fraction * base_cost(table, base.budget_of)
    for label, change in _SENSITIVITY:
        cfg = replace(base.coke, **change)
        accs, costs = [], []
        for s in range(base.seeds):
            order = np.random.default_rng(s).permutation(table.n_questions)
            router = CokeRouter(table.arm_specs(), X.shape[1], budget=budget, config=cfg, seed=s)
            run = simulate(router, table, X, order)
            accs.append(run.accuracy)
            costs.append(run.total_cost)
        ddof = 1 if base.seeds > 1 else 0
        out.append({"setting": label, "gamma": cfg.gamma, "accuracy": float(np.mean(accs)),
                    "accuracy_std": float(np.std(accs, ddof=ddof)), "cost": float(np.mean(costs)),
                    "cost_std": float(np.std(costs, ddof=ddof))})
    return out


def _hindsight_cascade(replay: GradedReplay, report: dict[str, Any]) -> dict[str, Any] | None:
    """Cascades between the threshold router's two arms when its cheap arm is a free arm with signals
    (``[agree, s_1 … s_k, agree · min s]``): two hindsight bounds (its own top score; the free arms'
    agreement) and a cascade router that learns escalation from the signals, cross-fitted like the
    threshold router."""
    from kgwise.eval.route.baselines import accuracy_at_cost, hindsight_cascade, threshold_curve

    table, signals, free_arms = replay.table, replay.signals, replay.free_arms
    cheap, strong = report["threshold_router"]["cheap_arm"], report["threshold_router"]["strong_arm"]
    if signals is None or cheap not in free_arms:
        return None
    i, j = table.arm_index(cheap), table.arm_index(strong)
    cheap_ok, strong_ok, strong_cost = table.correct[:, i], table.correct[:, j], table.cost[:, j]
    budget = 0.6 * float(np.sum(strong_cost))
    agreement = signals[:, 0] + signals[:, -1]  # agreeing questions first, then by the smaller score

    def entry(confidence: str, curve: list[dict[str, float]]) -> dict[str, Any]:
        return {"confidence": confidence, "curve": curve,
                "accuracy_at_60pct_of_strong_cost": accuracy_at_cost(curve, budget)}

    own_score = signals[:, 1 + free_arms.index(cheap)]
    return {
        "cheap_arm": cheap, "strong_arm": strong,
        **entry(f"{cheap}'s top-candidate score",
                hindsight_cascade(own_score, cheap_ok, strong_ok, strong_cost)),
        "agreement": entry(f"the free arms ({', '.join(free_arms)}) put the same answer on top, then the "
                           "smaller top score",
                           hindsight_cascade(agreement, cheap_ok, strong_ok, strong_cost)),
        "learned": entry("cross-fitted logistic regression on the free arms' signals (agreement, top "
                         "scores) — a router, like threshold_router",
                         threshold_curve(signals, cheap_ok, strong_ok, table.cost[:, i], strong_cost)),
    }


def route_report(replay: GradedReplay, encoder: Encoder, cfg: RouteReportConfig, *, is_log: bool,
                 progress_file: Callable[[str], Path | None] = lambda _: None,
                 gpt4: GradedReplay | None = None) -> dict[str, Any]:
    """The ``eval route`` report of ``replay`` (module docstring); ``is_log``: a user's log (its notes),
    else WebQSP's recorded arms; ``gpt4``: WebQSP's GPT-4 subset, run as a second experiment;
    ``progress_file(tag)``: where a part's finished runs are kept to resume."""
    table = replay.table
    X = np.asarray(encoder.encode(list(table.texts)), dtype=np.float64)
    contexts: dict[str, Matrix] = {}
    if replay.signals is not None:
        signals = np.hstack([np.ones((table.n_questions, 1)), replay.signals])  # LinUCB's intercept
        contexts = {"free_gnn_signals": signals, "free_gnn_signals+embedding": np.hstack([signals, X])}
    exp = cfg.experiment
    report = run_experiment(table, X, exp, progress_file("main"), contexts=contexts)
    report["coverage"] = replay.coverage
    report["hindsight_cascade"] = _hindsight_cascade(replay, report)
    report["notes"] = (LOG_NOTES if is_log else WEBQSP_NOTES) + COMMON_NOTES
    if cfg.sensitivity:
        report["sensitivity"] = _sensitivity(table, X, exp)
    if cfg.tune:
        from kgwise.eval.route.tuning import TuningConfig, cross_tune, warm_targets

        priced = replace(exp.coke, lam=exp.price_lam)  # as price_paced_budget_sweep runs it
        tuned = cross_tune(table, {"embedding": X, **contexts}, priced, TuningConfig(), exp.seeds,
                           progress_file("tune"))
        report["cross_tuned"] = tuned
        report["targets"]["cross_tuned_warm_60"] = warm_targets(
            tuned, report["targets"]["best_arm_cost"], report["threshold_router"]["curve"])
    if cfg.learned and table.n_questions < LEARNED_MIN_QUESTIONS:  # named in the report, not an error
        report["learned"] = {"skipped": f"learned routers need ≥ {LEARNED_MIN_QUESTIONS} questions (four "
                                        f"halves of ≥ 10), the log has {table.n_questions}"}
    elif cfg.learned:
        from kgwise.eval.route.learned import learned_report

        report["learned"] = learned_report(replay, X, exp.coke, cfg.learned_config or LearnedConfig())
    if gpt4 is not None:
        X8 = np.asarray(encoder.encode(list(gpt4.table.texts)), dtype=np.float64)
        report["gpt4_subset"] = run_experiment(gpt4.table, X8, exp, progress_file("gpt4")) | {
            "coverage": gpt4.coverage}
    return report
