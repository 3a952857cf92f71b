"""Coke's settings the paper leaves open, chosen on held-out questions (two-fold cross-tuning).

The questions are split in two halves by a seeded permutation. On each half, price-paced Coke (free arms
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

import itertools
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.stats import sem
from tqdm import tqdm

from kgwise.errors import ConfigError
from kgwise.eval.route.baselines import accuracy_at_cost
from kgwise.eval.route.experiment import replay_fingerprint, simulate, target_checks
from kgwise.files import ResumeLog
from kgwise.route.coke import CokeConfig, CokeRouter
from kgwise.route.table import OutcomeTable

__all__ = ["TuningConfig", "cross_tune", "pick_and_score", "warm_targets"]

Matrix = npt.NDArray[np.float64]
GridPoint = tuple[str, float | None, bool]  # (context, γ or None for Eq. 12's, decomposed reward)


@dataclass(frozen=True)
class TuningConfig:
    """The grid and the budget of two-fold cross-tuning (see the module docstring)."""

    gammas: tuple[float | None, ...] = (None, 1.0, 0.5, 0.25)
    decomposed: tuple[bool, ...] = (False, True)
    budget_vs_best: float = 0.6
    split_seed: int = 0

    def __post_init__(self) -> None:
        if not self.gammas or not self.decomposed:
            raise ConfigError("the tuning grid needs at least one gamma and one decomposed setting")
        if any(g is not None and not (math.isfinite(g) and g >= 0) for g in self.gammas):
            raise ConfigError(f"tuning gammas must be None or ≥ 0, got {self.gammas}")
        if not (math.isfinite(self.budget_vs_best) and self.budget_vs_best > 0):
            raise ConfigError(f"budget_vs_best must be > 0, got {self.budget_vs_best}")


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
    perm = np.random.default_rng(config.split_seed).permutation(n)
    halves = [np.sort(perm[: n // 2]), np.sort(perm[n // 2 :])]
    best_arm = int(np.argmax(table.correct.mean(axis=0)))
    grid: list[GridPoint] = list(itertools.product(contexts, config.gammas, config.decomposed))
    parts = [table.subset(rows) for rows in halves]
    xs = [{name: np.asarray(values, dtype=np.float64)[rows] for name, values in contexts.items()}
          for rows in halves]
    bar = tqdm(total=2 * (len(grid) + 1) * seeds, desc="route cross-tuning", disable=not show_progress)

    def score(h: int, point: GridPoint, warm: bool) -> tuple[float, float, Matrix]:
        """Over the seeds, ``point`` on half ``h``: mean accuracy, mean cost / best arm's cost, and per
        question (in the half's order) the share of seeds that answered it right. ``warm``: the router
        first learns every arm's outcome on the other half (:meth:`CokeRouter.warm_start`)."""
        ctx, gamma, decomposed = point
        coke = replace(base, pacing="price", gamma_override=gamma, decomposed_reward=decomposed)
        half = parts[h]
        half_best_cost = float(half.cost[:, best_arm].sum())
        x = xs[h][ctx]
        accs, spent, right = [], [], np.zeros(half.n_questions)
        for s in range(seeds):
            key = json.dumps(["warm" if warm else "cold", h, ctx, asdict(coke), s])
            run = log.get(key)
            if run is None:
                router = CokeRouter(half.arm_specs(), x.shape[1],
                                    budget=config.budget_vs_best * half_best_cost, config=coke, seed=s,
                                    horizon=half.n_questions)
                if warm:
                    router.warm_start(xs[1 - h][ctx], parts[1 - h].correct)
                order = np.random.default_rng(s).permutation(half.n_questions)
                result = simulate(router, half, x, order, router)
                correct = np.zeros(half.n_questions, dtype=np.uint8)
                correct[order] = result.correct
                run = {"accuracy": result.accuracy, "cost": result.total_cost,
                       "correct": (correct + ord("0")).tobytes().decode()}  # "0110…", the half's order
                log.put(key, run)
            accs.append(run["accuracy"])
            spent.append(run["cost"] / half_best_cost if half_best_cost > 0 else 0.0)
            right += np.frombuffer(run["correct"].encode(), dtype=np.uint8) - ord("0")
            bar.update(1)
        return float(np.mean(accs)), float(np.mean(spent)), right / seeds

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
    """The issue's checks for warm-started, cross-tuned Coke (``tuned``: :func:`cross_tune`'s report). Its
    held-out halves together are all the questions once, so their mean is set against the best arm (cost
    ``best_arm_cost`` on all of them) and the threshold router's accuracy–cost ``threshold_curve``."""
    cost = tuned["warm_held_out_cost_over_best"] * best_arm_cost
    checks = target_checks(tuned["warm_held_out_minus_best_arm"], tuned["warm_held_out_cost_over_best"],
                           tuned["warm_held_out_accuracy"] - accuracy_at_cost(threshold_curve, cost))
    return checks | {"accuracy_minus_best_se": tuned["warm_held_out_minus_best_arm_se"]}
