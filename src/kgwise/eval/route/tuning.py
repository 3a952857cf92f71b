"""Coke's settings the paper leaves open, chosen on held-out questions (two-fold cross-tuning).

The engine is :class:`kgwise.route.tuning.CrossFit` (shared with ``kgwise fit``). The questions are split in
two halves by a seeded permutation. On each half, price-paced Coke (free arms
observed, budget = ``budget_vs_best`` × the most accurate arm's cost on that half) runs for every grid
point: the LinUCB width γ (``None``: Eq. 12's, from δ), whether LinUCB learns the decomposed reward, and the
context (the question embedding or another per-question context). The point with the best mean accuracy
on one half is then scored on the other, twice:

* cold, starting from the priors as the paper's Coke does: what a user who tunes Coke on logged outcomes
  and then routes new questions can expect (each half has half the questions to learn from);
* warm-started (:meth:`CokeRouter.warm_start`) from every arm's logged outcomes on the tuning half: what
  a user with such a log can expect when the router also learns from it. This uses the same data as the
  cross-fitted threshold router, which is trained on the other fold's outcomes.

The gap to the best arm is paired (the same questions on both sides) and reported with its standard
error over the questions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.stats import sem
from tqdm import tqdm

from kgwise.errors import ConfigError
from kgwise.eval.route.baselines import accuracy_at_cost
from kgwise.eval.route.experiment import replay_fingerprint, target_checks
from kgwise.files import ResumeLog
from kgwise.route.coke import CokeConfig
from kgwise.route.table import OutcomeTable
from kgwise.route.tuning import CrossFit, GridPoint, TuningConfig

__all__ = ["TuningConfig", "cross_tune", "pick_and_score", "warm_targets"]

Matrix = npt.NDArray[np.float64]


def pick_and_score(scores: Mapping[tuple[int, GridPoint], float]) -> list[dict[str, Any]]:
    """For each of the two halves, the grid point with the best score on it (first of equals, in the
    mapping's order) and that point's score on the other half."""
    missing = {0, 1} - {half for half, _ in scores}
    if missing:
        raise ConfigError(f"no tuning score on half {min(missing)}")
    out = []
    for h in (0, 1):
        best = max((p for half, p in scores if half == h), key=lambda p: scores[h, p])
        out.append({"tuned_on": h, "context": best[0], "gamma": best[1], "decomposed_reward": best[2],
                    "tuned_accuracy": scores[h, best], "held_out_accuracy": scores[1 - h, best]})
    return out


def cross_tune(
    table: OutcomeTable,
    contexts: Mapping[str, Matrix],
    base: CokeConfig,
    config: TuningConfig,
    seeds: int,
    progress_file: Path | None = None,
    show_progress: bool = True,
) -> dict[str, Any]:
    """Two-fold cross-tuning of price-paced Coke (module docstring); ``contexts``: name → one row per
    question. Runs are appended to ``progress_file`` as they finish, and a rerun resumes from there."""
    n = table.n_questions
    if n < 4:
        raise ConfigError(f"cross-tuning needs at least 4 questions, got {n}")
    for name, values in contexts.items():
        if values.shape[0] != n:
            raise ConfigError(f"context {name!r}: {values.shape[0]} rows for {n} questions")
    log = ResumeLog(progress_file, replay_fingerprint(table, contexts, {"tuning": asdict(config)}),
                    on_other="restart")
    best_arm = int(np.argmax(table.correct.mean(axis=0)))
    bar = tqdm(total=2 * (len(config.grid(list(contexts))) + 1) * seeds, desc="route cross-tuning",
               disable=not show_progress)
    engine = CrossFit(table, contexts, base, seeds,
                      lambda half: config.budget_vs_best * float(half.cost[:, best_arm].sum()),
                      config.split_seed, horizon=True, price=True, cache=log, on_run=lambda: bar.update(1))
    halves, parts = engine.halves, engine.parts
    grid = config.grid(engine.contexts)

    def score(h: int, point: GridPoint, warm: bool) -> tuple[float, float, Matrix]:
        """Over the seeds, ``point`` on half ``h``: mean accuracy, mean cost / best arm's cost, and per
        question (in the half's order) the share of seeds that answered it right. ``warm``: the router
        first learns every arm's outcome on the other half (:meth:`CokeRouter.warm_start`)."""
        half_best_cost = float(parts[h].cost[:, best_arm].sum())
        run = engine.score(h, point, warm)
        spent = [c / half_best_cost if half_best_cost > 0 else 0.0 for c in run.costs]
        return float(np.mean(run.accuracies)), float(np.mean(spent)), run.right

    scores: dict[tuple[int, GridPoint], float] = {}
    cost: dict[tuple[int, GridPoint], float] = {}
    right: dict[tuple[int, GridPoint], Matrix] = {}
    for h in (0, 1):
        for point in grid:
            scores[h, point], cost[h, point], right[h, point] = score(h, point, warm=False)
    picks = pick_and_score(scores)
    cold_gaps: list[Matrix] = []  # per held-out question: router − best arm
    warm_gaps: list[Matrix] = []
    for p in picks:
        other = 1 - p["tuned_on"]
        point = (p["context"], p["gamma"], p["decomposed_reward"])
        best_right = parts[other].correct[:, best_arm]
        p["held_out_cost_over_best"] = cost[other, point]
        p["held_out_best_arm_accuracy"] = float(best_right.mean())
        p["held_out_paper_gamma_accuracy"] = scores.get((other, (p["context"], None, False)))
        p["warm_held_out_accuracy"], p["warm_held_out_cost_over_best"], warm_right = score(
            other, point, warm=True)
        cold_gaps.append(right[other, point] - best_right)
        warm_gaps.append(warm_right - best_right)
    bar.close()
    cold_gap, warm_gap = np.concatenate(cold_gaps), np.concatenate(warm_gaps)
    return {
        "budget_vs_best": config.budget_vs_best,
        "best_arm": table.arms[best_arm],
        "half_sizes": [len(h) for h in halves],
        "seeds": seeds,
        "grid": [{"context": c, "gamma": g, "decomposed_reward": d,
                  "accuracy_by_half": [scores[0, (c, g, d)], scores[1, (c, g, d)]],
                  "cost_over_best_by_half": [cost[0, (c, g, d)], cost[1, (c, g, d)]]}
                 for c, g, d in grid],
        "folds": picks,
        "held_out_accuracy": float(np.mean([p["held_out_accuracy"] for p in picks])),
        "held_out_minus_best_arm": float(cold_gap.mean()),
        "held_out_minus_best_arm_se": float(sem(cold_gap)),
        "warm_held_out_accuracy": float(np.mean([p["warm_held_out_accuracy"] for p in picks])),
        "warm_held_out_cost_over_best": float(np.mean([p["warm_held_out_cost_over_best"] for p in picks])),
        "warm_held_out_minus_best_arm": float(warm_gap.mean()),
        "warm_held_out_minus_best_arm_se": float(sem(warm_gap)),
    }


def warm_targets(tuned: Mapping[str, Any], best_arm_cost: float,
                 threshold_curve: Sequence[dict[str, float]]) -> dict[str, Any]:
    """The checks for warm-started, cross-tuned Coke (``tuned``: :func:`cross_tune`'s report). Its
    held-out halves together are all the questions once, so their mean is set against the best arm (cost
    ``best_arm_cost`` on all of them) and the threshold router's accuracy–cost ``threshold_curve``."""
    cost = tuned["warm_held_out_cost_over_best"] * best_arm_cost
    checks = target_checks(tuned["warm_held_out_minus_best_arm"], tuned["warm_held_out_cost_over_best"],
                           tuned["warm_held_out_accuracy"] - accuracy_at_cost(threshold_curve, cost))
    return checks | {"accuracy_minus_best_se": tuned["warm_held_out_minus_best_arm_se"]}
