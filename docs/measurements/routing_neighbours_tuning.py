"""The tuning of the neighbour success rates (docs/routing.md, *Routers on the outcomes of similar
questions*): on one log, for each ``K:PRIOR``, ``eval route``'s ``neighbours`` and
``predicted-free+neighbours`` policies on its 5 halvings, against the best arm on each test half.

Usage (from the repository root, ``KGWISE_DATA`` set; tune on the tuning logs only)::

    python docs/measurements/routing_neighbours_tuning.py webqsp 20:5 40:5 80:5 40:20
    python docs/measurements/routing_neighbours_tuning.py obqa 20:5 40:5 80:5 40:20
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from kgwise.embed import MiniLM
from kgwise.eval.route.learned import (
    LearnedConfig,
    _free_columns,
    _neighbour_columns,
    _neighbours_online,
    _priced_online,
)
from kgwise.eval.route.logs import read_replay, webqsp_replay
from kgwise.route.neighbours import NeighbourConfig

OBQA = ["kgm:KGM", "smollm2-135m:LLM", "smollm2-135m+kg:LLM", "gemma3-270m:LLM", "gemma3-270m+kg:LLM"]
LOGS = {"webqsp": None, "obqa": ("tests/data/logs/obqa-local.jsonl", OBQA)}


def main(log: str, grid: list[str]) -> None:
    source = LOGS[log]
    replay = (webqsp_replay(Path(os.environ["KGWISE_DATA"])) if source is None
              else read_replay(Path(source[0]), source[1]))
    table = replay.table
    E = np.asarray(MiniLM().encode(list(table.texts)), dtype=np.float64)
    Y = table.correct.astype(np.float64)
    F = replay.features if replay.features is not None else np.zeros((table.n_questions, 0))
    Xf = F[:, _free_columns(replay)]
    print(f"{log}: {table.n_questions} questions × {table.n_arms} arms, load {os.getloadavg()[0]:.1f}")
    for point in grid:
        k, prior = point.split(":")
        cfg = LearnedConfig(neighbours=NeighbourConfig(int(k), float(prior)))
        gains: dict[str, list[float]] = {"neighbours": [], "predicted-free+neighbours": []}
        for s in range(cfg.splits):  # the halvings and test orders of learned_report
            perm = np.random.default_rng(s).permutation(table.n_questions)
            fit, test = perm[: len(perm) // 2], perm[len(perm) // 2:]
            test = test[np.random.default_rng(s).permutation(len(test))]
            budget = cfg.budget_vs_best * float(table.cost[test, table.budget_arm(test)].sum())
            best = float(table.correct[test].mean(axis=0).max())
            alone = _neighbours_online(table, E, Y, fit, test, budget, cfg)
            X = np.hstack([Xf, _neighbour_columns(table.n_arms, E, Y, fit, cfg.neighbours)])
            joined, _, _ = _priced_online(table, X, Y, fit, test, budget, cfg)
            gains["neighbours"].append(alone["accuracy"] - best)
            gains["predicted-free+neighbours"].append(joined["accuracy"] - best)
        for policy, g in gains.items():
            v = 100 * np.asarray(g)
            print(f"k={k} prior={prior} {policy}: {v.mean():+.1f} ± {v.std(ddof=1):.1f} points over the best "
                  f"arm, {(v >= 0).sum()}/{len(v)} splits ≥ it")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
