"""Open answer sets under routing, on the replay (``kgwise eval pipeline`` (a); issue 27 items 4 and 6a).

WebQSP's recorded arms answer in free text, so the pipeline's sets for them are UAG's, as for every open
answer (:mod:`kgwise.app.open_sets`). In each split UAG is calibrated as ``kgwise fit`` calibrates it
(:func:`kgwise.conformal.calibrated.calibrate_uag`: the pipeline's UAG settings, a seeded ``tune_share`` of
the fit half tunes the grid, Learn-then-Test on the rest certifies λ at α and δ), with RoG's recorded
answers as the generations Φ(P). The sets of the test half are then scored per arm the pipeline routed each
question to. The calibration knows nothing of the router, so this measures whether UAG's guarantee over
all questions also holds over the questions routed to each arm — which the router, choosing questions,
could break.

Per α: coverage and mean size over the test half and per arm, each arm's one-sided binomial p-value of its
misses under "miss rate ≤ α" (below target beyond noise when < :data:`SIGNIFICANCE`); over splits: per arm,
the share of the splits it was routed questions in where it covered ≥ 1 − α, and the share of splits in
which every routed arm did (the issue's target: ≥ 95 %). A question without a table (not in UAG's data)
gets no set and is counted, not dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from kgwise.conformal.calibrated import UAG_DEFAULTS, TableSettings, calibrate_uag
from kgwise.conformal.grid import TableBatch
from kgwise.errors import ConfigError
from kgwise.eval.uag.experiment import SIGNIFICANCE, miss_p_value

__all__ = ["RoutedSets", "summarise_sets"]


@dataclass(frozen=True)
class RoutedSets:
    """UAG tables of an outcome table's questions: ``rows[i]`` is the table of the outcome table's row ``i``
    (−1: none); the sets' ``alphas``, ``delta`` and ``tune_share`` (``[answer_sets]``'s values)."""

    tables: TableBatch
    rows: npt.NDArray[np.int64]
    alphas: tuple[float, ...] = (0.1, 0.2)
    delta: float = 0.05
    tune_share: float = 0.4

    def __post_init__(self) -> None:
        if not self.alphas or any(not 0 < a < 1 for a in self.alphas):
            raise ConfigError(f"the sets' α levels must lie in (0, 1), got {list(self.alphas)}")
        if not 0 < self.delta < 1:
            raise ConfigError(f"δ must lie in (0, 1), got {self.delta:g}")
        if self.rows.size and int(self.rows.max()) >= self.tables.num_questions:
            raise ConfigError(f"table row {int(self.rows.max())} of {self.tables.num_questions} tables")

    def split(self, fit: Sequence[int], test: Sequence[int], routed: Sequence[str | None],
              arms: Sequence[str], seed: int) -> dict[str, Any]:
        """Calibrate on the ``fit`` rows, score the ``test`` rows' sets per arm in ``routed`` (``None``:
        not answered, budget spent)."""
        fit_t = self.rows[np.asarray(fit, dtype=np.int64)]
        test_t = self.rows[np.asarray(test, dtype=np.int64)]
        has = test_t >= 0
        calib = self.tables.subset(fit_t[fit_t >= 0])
        scored = self.tables.subset(test_t[has])
        arm_of = np.asarray([a if a is not None else "" for a in routed], dtype=object)[has]
        out: dict[str, Any] = {"calibration_questions": int((fit_t >= 0).sum()),
                               "fit_without_table": int((fit_t < 0).sum()),
                               "test_without_table": int((~has).sum()), "alphas": []}
        for alpha in self.alphas:
            cfg = replace(UAG_DEFAULTS, alpha=alpha, ltt=replace(UAG_DEFAULTS.ltt, delta=self.delta),
                          order="front+chain")
            uag, summary = calibrate_uag(calib, cfg, TableSettings(), self.tune_share, seed)
            row: dict[str, Any] = {"alpha": alpha, "certified": not uag.abstains,
                                   "lambda": summary.get("lambda")}
            if not uag.abstains:
                m = uag.evaluate(scored)
                covered, size = m["covered"].astype(bool), m["size"]
                row.update(_cover(covered, size, alpha))
                row["arms"] = {a: _cover(covered[arm_of == a], size[arm_of == a], alpha)
                               for a in arms if np.any(arm_of == a)}
            out["alphas"].append(row)
        return out


def _cover(covered: npt.NDArray[np.bool_], size: npt.NDArray[np.float64], alpha: float) -> dict[str, Any]:
    n = int(covered.size)
    misses = int(n - covered.sum())
    return {"questions": n, "coverage": 1 - misses / n, "mean_size": float(size.mean()),
            "median_size": float(np.median(size)), "on_target": misses / n <= alpha,
            "below_beyond_noise": miss_p_value(misses, n, alpha) < SIGNIFICANCE}


def summarise_sets(runs: Sequence[Mapping[str, Any]], arms: Sequence[str], alphas: Sequence[float]
                   ) -> dict[str, Any]:
    """Over the splits' ``answer_sets``: per α, certified splits, mean coverage and size, and per arm (over
    the splits it was routed questions in) the share on target and the share below it beyond noise."""
    out: dict[str, Any] = {}
    for k, alpha in enumerate(alphas):
        rows = [r["answer_sets"]["alphas"][k] for r in runs]
        ok = [r for r in rows if r["certified"]]
        entry: dict[str, Any] = {"splits": len(rows), "certified": len(ok)}
        if ok:
            entry["coverage"] = float(np.mean([r["coverage"] for r in ok]))
            entry["mean_size"] = float(np.mean([r["mean_size"] for r in ok]))
            entry["every_arm_on_target"] = float(np.mean([all(a["on_target"] for a in r["arms"].values())
                                                          for r in ok]))
            entry["no_arm_below_beyond_noise"] = float(np.mean(
                [not any(a["below_beyond_noise"] for a in r["arms"].values()) for r in ok]))
            per_arm = {}
            for a in arms:
                mine = [r["arms"][a] for r in ok if a in r["arms"]]
                if mine:
                    per_arm[a] = {"splits_routed": len(mine), **{
                        key: float(np.mean([m[key] for m in mine]))
                        for key in ("questions", "coverage", "mean_size", "on_target", "below_beyond_noise")}}
            entry["arms"] = per_arm
        out[f"{alpha:g}"] = entry
    return out
