"""Open answer sets under routing, on the replay (``kgwise eval pipeline``).

WebQSP's recorded arms answer in free text, so the pipeline's sets for them are UAG's, as for every open
answer (:mod:`kgwise.app.open_sets`). In each split UAG is calibrated as ``kgwise fit`` calibrates it
(:func:`kgwise.conformal.calibrated.calibrate_uag`: the pipeline's UAG settings, a seeded ``tune_share`` of
the fit half tunes the grid, Learn-then-Test on the rest certifies λ at α and δ), with RoG's recorded
answers as the generations Φ(P). The sets of the test half are then scored per arm the pipeline routed each
question to. The calibration knows nothing of the router, so this measures whether UAG's guarantee over
all questions also holds over the questions routed to each arm — which the router, choosing questions,
could break. Beside it, ``per_arm`` (Mondrian): each arm's sets calibrated (tuned and certified) on the
fit questions an out-of-fold router sends to that arm only; an arm whose questions certify nothing gets
no set.

``calibration = "held-out"`` measures instead what the pipeline does with ``[answer_sets] uag_llm``
(:mod:`kgwise.app.open_sets`): ``1 − tune_share`` of the fit half (interleaved) is held out of everything
the router learns; the rest tunes UAG's grid and teaches the router; before each test question the
held-out questions are re-routed by the router as it stands, and the set of the arm it picks is UAG
certified (Learn-then-Test) on the held-out questions sent to that arm — or, when they certify nothing
(the ``fallback`` share per arm), what ``[answer_sets] open_uncertified`` names: UAG's largest set
(``"largest"``) or the set certified on all held-out questions (``"pooled"``), as the pipeline does
(:meth:`split_held_out`).

Per α and calibration: coverage and mean size over the test half and per arm, each arm's one-sided
binomial p-value of its misses under "miss rate ≤ α" (below target beyond noise when <
:data:`SIGNIFICANCE`); over splits: per arm, the share of the splits it was routed questions in where it
covered ≥ 1 − α, and the share of splits in which every routed arm did (target: ≥ 95 %). A
question without a table (not in UAG's data) gets no set and is counted, not dropped.

The tables come from WebQSP's recorded data (:func:`webqsp_sets`) or, for a user's graded log, from the
user's labelled questions, KG and recorded generations (:func:`user_sets`, ``eval uag``'s inputs), matched
by question id: the same computation either way. ``compare_scores``: the same splits' sets again with
another family of evaluator scores in UAG's Λ (e.g. with the learned score,
:mod:`kgwise.conformal.learned`), reported under ``compared``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import numpy as np
import numpy.typing as npt

from kgwise.app.config import OpenUncertified
from kgwise.conformal.calibrated import UAG_DEFAULTS, TableSettings, calibrate_uag
from kgwise.conformal.grid import EvaluatorScore, TableBatch
from kgwise.conformal.grouped import GroupedUAG
from kgwise.conformal.uag import UAG, UAGConfig
from kgwise.errors import ConfigError
from kgwise.eval.uag.experiment import SIGNIFICANCE, miss_p_value
from kgwise.route.table import OutcomeTable

if TYPE_CHECKING:
    from kgwise.eval.uag.experiment import UAGData

__all__ = ["CALIBRATIONS", "UNCERTIFIED", "RoutedSets", "summarise_sets", "user_sets", "webqsp_sets"]

CALIBRATIONS = ("held-out", "fit-half")
UNCERTIFIED: tuple[OpenUncertified, ...] = get_args(OpenUncertified)


@dataclass(frozen=True)
class RoutedSets:
    """UAG tables of an outcome table's questions: ``rows[i]`` is the table of the outcome table's row ``i``
    (−1: none); the sets' ``alphas``, ``delta`` and ``tune_share`` (``[answer_sets]``'s values)."""

    tables: TableBatch
    rows: npt.NDArray[np.int64]
    alphas: tuple[float, ...] = (0.1, 0.2)
    delta: float = 0.05
    tune_share: float = 0.4
    calibration: str = "fit-half"
    """``"fit-half"`` (:meth:`split`) or ``"held-out"`` (:meth:`split_held_out`; the module docstring)."""
    uncertified: OpenUncertified = "largest"
    """Held-out calibration: an answer's set when its arm's group certifies nothing (``"largest"`` or
    ``"pooled"``: ``[answer_sets] open_uncertified``)."""
    evaluator_scores: tuple[EvaluatorScore, ...] = UAG_DEFAULTS.evaluator_scores
    """The evaluator scores in UAG's Λ (the pipeline's: every model-free one)."""
    compare_scores: tuple[EvaluatorScore, ...] | None = None
    """Another family, scored on the same splits beside it (``compared`` in each split's result)."""

    def __post_init__(self) -> None:
        if self.calibration not in CALIBRATIONS:
            raise ConfigError(f"the sets' calibration must be one of {', '.join(CALIBRATIONS)}, got "
                              f"{self.calibration!r}")
        if self.uncertified not in UNCERTIFIED:
            raise ConfigError(f"an uncertified group's set must be one of {', '.join(UNCERTIFIED)}, got "
                              f"{self.uncertified!r}")
        if not self.alphas or any(not 0 < a < 1 for a in self.alphas):
            raise ConfigError(f"the sets' α levels must lie in (0, 1), got {list(self.alphas)}")
        if not 0 < self.delta < 1:
            raise ConfigError(f"δ must lie in (0, 1), got {self.delta:g}")
        if self.rows.size and int(self.rows.max()) >= self.tables.num_questions:
            raise ConfigError(f"table row {int(self.rows.max())} of {self.tables.num_questions} tables")
        for kinds in (self.evaluator_scores, self.compare_scores or self.evaluator_scores):
            replace(UAG_DEFAULTS, evaluator_scores=kinds)  # refuses an unknown score, naming it

    def _uag_config(self, alpha: float) -> UAGConfig:
        return replace(UAG_DEFAULTS, alpha=alpha, ltt=replace(UAG_DEFAULTS.ltt, delta=self.delta),
                       order="front+chain", evaluator_scores=self.evaluator_scores)

    def _compared(self) -> RoutedSets | None:
        if self.compare_scores is None:
            return None
        return replace(self, evaluator_scores=self.compare_scores, compare_scores=None)

    def split(self, fit: Sequence[int], test: Sequence[int], routed: Sequence[str | None],
              arms: Sequence[str], seed: int, fit_groups: Sequence[str | None] | None = None
              ) -> dict[str, Any]:
        """Calibrate on the ``fit`` rows, score the ``test`` rows' sets per arm in ``routed`` (``None``:
        not answered, budget spent). With ``fit_groups`` (per fit row, the arm an out-of-fold router sends
        it to), also per arm (``per_arm``, Mondrian): UAG calibrated on that arm's fit rows only, scored on
        its test rows; an arm whose rows certify nothing gets no set."""
        fit_a = np.asarray(fit, dtype=np.int64)
        fit_t = self.rows[fit_a]
        test_t = self.rows[np.asarray(test, dtype=np.int64)]
        has = test_t >= 0
        scored = self.tables.subset(test_t[has])
        arm_of = np.asarray([a if a is not None else "" for a in routed], dtype=object)[has]
        out: dict[str, Any] = {"calibration_questions": int((fit_t >= 0).sum()),
                               "fit_without_table": int((fit_t < 0).sum()),
                               "test_without_table": int((~has).sum()), "alphas": []}
        group = (None if fit_groups is None else
                 np.asarray([g if g is not None else "" for g in fit_groups], dtype=object))
        for alpha in self.alphas:
            row: dict[str, Any] = {"alpha": alpha, **self._scored(fit_t, scored, arm_of, arms, alpha, seed)}
            if group is not None:
                row["per_arm"] = {}
                for a in arms:
                    routed_here = arm_of == a
                    if not routed_here.any():
                        continue
                    mine = self._scored(fit_t[group == a], scored.subset(np.flatnonzero(routed_here)),
                                        arm_of[routed_here], (), alpha, seed)
                    row["per_arm"][a] = {"calibration_questions": int((fit_t[group == a] >= 0).sum()),
                                         **mine}
            out["alphas"].append(row)
        if (other := self._compared()) is not None:
            out["compared"] = other.split(fit, test, routed, arms, seed, fit_groups)
        return out

    def split_held_out(self, learn: Sequence[int], held: Sequence[int], test: Sequence[int],
                       routed: Sequence[str | None], groups: Sequence[npt.NDArray[np.int64]],
                       arms: Sequence[str]) -> dict[str, Any]:
        """The pipeline's own calibration (module docstring): UAG tuned on the ``learn`` rows and certified
        on the ``held`` rows, each ``test`` row's set from the held rows that ``groups`` (per test row, the
        arm position the router sent each held row to just before it) sends to its ``routed`` arm, else
        (``fallback``) UAG's largest set or the one certified on every held row (:attr:`uncertified`)."""
        tune_t = self.rows[np.asarray(learn, dtype=np.int64)]
        held_t = self.rows[np.asarray(held, dtype=np.int64)]
        test_t = self.rows[np.asarray(test, dtype=np.int64)]
        tune_t, has_held = tune_t[tune_t >= 0], held_t >= 0
        cal_t = held_t[has_held]
        out: dict[str, Any] = {"tuning_questions": int(tune_t.size), "calibration_questions": int(cal_t.size),
                               "fit_without_table": int((~has_held).sum() + len(learn) - tune_t.size),
                               "test_without_table": int((test_t < 0).sum()), "alphas": []}
        if not tune_t.size or not cal_t.size:
            out["alphas"] = [{"alpha": a, "certified": False, "lambda": None} for a in self.alphas]
            return out
        # the grid, its thresholds and LTT's sequences come from the tuning rows alone, whatever α: one
        # fit, and each α certifies on the stored misses (all held rows: UAG's own calibration)
        if (other := self._compared()) is not None:
            out["compared"] = other.split_held_out(learn, held, test, routed, groups, arms)
        cfg = self._uag_config(self.alphas[0])
        fitted, _ = calibrate_uag(self.tables.subset(np.r_[tune_t, cal_t]), cfg, TableSettings(), split=(
            range(tune_t.size), range(tune_t.size, tune_t.size + cal_t.size)))
        grouped = GroupedUAG.from_fit(fitted, self.tables.subset(cal_t))
        largest = grouped.largest()
        position = {a: j for j, a in enumerate(arms)}
        answered = [(k, t, arm) for k, (t, arm) in enumerate(zip(test_t, routed, strict=True))
                    if t >= 0 and arm is not None]
        for alpha in self.alphas:
            every = grouped.certify(np.arange(cal_t.size), alpha)
            if every is None:
                out["alphas"].append({"alpha": alpha, "certified": False, "lambda": None})
                continue
            if not answered:
                out["alphas"].append({"alpha": alpha, "certified": True, "lambda": every.lambda_,
                                      "questions": 0, "arms": {}})
                continue
            by_index: dict[int, list[int]] = {}
            fell = np.zeros(len(answered), dtype=bool)
            for n, (k, _, arm) in enumerate(answered):
                mine = grouped.certify(np.flatnonzero(groups[k][has_held] == position[arm]), alpha)
                fell[n] = mine is None
                chosen = mine if mine is not None else every if self.uncertified == "pooled" else largest
                assert chosen.index_ is not None
                by_index.setdefault(chosen.index_, []).append(n)
            covered = np.zeros(len(answered), dtype=bool)
            size = np.zeros(len(answered))
            tables_of = np.asarray([t for _, t, _ in answered], dtype=np.int64)
            for index, members in by_index.items():
                m = UAG(every.config).adopt_fit(every).choose(index).evaluate(
                    self.tables.subset(tables_of[members]))
                covered[members], size[members] = m["covered"].astype(bool), m["size"]
            arm_of = np.asarray([arm for _, _, arm in answered], dtype=object)
            row = {"alpha": alpha, "certified": True, "lambda": every.lambda_,
                   **_cover(covered, size, alpha), "fallback": float(fell.mean())}
            row["arms"] = {a: {**_cover(covered[arm_of == a], size[arm_of == a], alpha),
                               "fallback": float(fell[arm_of == a].mean())}
                           for a in arms if np.any(arm_of == a)}
            out["alphas"].append(row)
        return out

    def _scored(self, fit_t: npt.NDArray[np.int64], scored: TableBatch, arm_of: npt.NDArray[np.object_],
                arms: Sequence[str], alpha: float, seed: int) -> dict[str, Any]:
        """UAG calibrated on the tables ``fit_t`` (−1: none) at ``alpha``, its sets of ``scored`` overall and
        (when ``arms`` are named) per arm of ``arm_of``; not certified when LTT certifies nothing or too few
        rows to split."""
        calib = fit_t[fit_t >= 0]
        cfg = self._uag_config(alpha)
        n_tune = round(self.tune_share * calib.size)
        if n_tune < 1 or calib.size - n_tune < 1:
            return {"certified": False, "lambda": None}
        uag, summary = calibrate_uag(self.tables.subset(calib), cfg, TableSettings(), self.tune_share, seed)
        if uag.abstains:
            return {"certified": False, "lambda": None}
        m = uag.evaluate(scored)
        covered, size = m["covered"].astype(bool), m["size"]
        out = {"certified": True, "lambda": summary["lambda"], **_cover(covered, size, alpha)}
        if arms:
            out["arms"] = {a: _cover(covered[arm_of == a], size[arm_of == a], alpha)
                           for a in arms if np.any(arm_of == a)}
        return out


def _cover(covered: npt.NDArray[np.bool_], size: npt.NDArray[np.float64], alpha: float) -> dict[str, Any]:
    n = int(covered.size)
    misses = int(n - covered.sum())
    return {"questions": n, "coverage": 1 - misses / n, "mean_size": float(size.mean()),
            "median_size": float(np.median(size)), "on_target": misses / n <= alpha,
            "below_beyond_noise": miss_p_value(misses, n, alpha) < SIGNIFICANCE}


def summarise_sets(runs: Sequence[Mapping[str, Any]], arms: Sequence[str], alphas: Sequence[float]
                   ) -> dict[str, Any]:
    """Over the splits' ``answer_sets``: per α, certified splits, mean coverage and size (and, held-out
    calibration, the share of sets that fell back to all held-out questions), and per arm (over the splits
    it was routed questions in) the share on target and the share below it beyond noise; the same for the
    per-arm (Mondrian) sets where the splits have them, with each arm's share of splits certified and the
    share of splits in which every routed arm got a set."""
    out: dict[str, Any] = {}
    for k, alpha in enumerate(alphas):
        rows = [r["answer_sets"]["alphas"][k] for r in runs]
        ok = [r for r in rows if r["certified"]]
        entry: dict[str, Any] = {"splits": len(rows), "certified": len(ok)}
        if ok:
            for key in ("coverage", "mean_size", "fallback"):
                if all(key in r for r in ok):
                    entry[key] = float(np.mean([r[key] for r in ok]))
            entry.update(_over([r["arms"] for r in ok], arms))
        if rows and all("per_arm" in r for r in rows):
            per = [r["per_arm"] for r in rows]
            entry["per_arm"] = {
                "every_routed_arm_certified": float(np.mean([all(v["certified"] for v in p.values())
                                                             for p in per])),
                "certified": {a: float(np.mean([p[a]["certified"] for p in per if a in p]))
                              for a in arms if any(a in p for p in per)},
                **_over(per, arms)}
        out[f"{alpha:g}"] = entry
    compared = [r["answer_sets"]["compared"] for r in runs if "compared" in (r["answer_sets"] or {})]
    if compared and len(compared) == len(runs):
        out["compared"] = summarise_sets([{"answer_sets": c} for c in compared], arms, alphas)
    return out


def _over(arm_rows: Sequence[Mapping[str, Any]], arms: Sequence[str]) -> dict[str, Any]:
    """Over splits (one mapping arm → result each): every arm at once, and per arm its means; an arm
    without a set (not certified) is not on target and is left out of its coverage and size means."""
    entry: dict[str, Any] = {}
    entry["every_arm_on_target"] = float(np.mean([all(a.get("on_target", False) for a in r.values())
                                                  for r in arm_rows]))
    entry["no_arm_below_beyond_noise"] = float(np.mean(
        [not any(a.get("below_beyond_noise", False) for a in r.values()) for r in arm_rows]))
    per_arm = {}
    for a in arms:
        mine = [r[a] for r in arm_rows if a in r and r[a].get("certified", True)]
        if mine:
            per_arm[a] = {"splits": len(mine), **{
                key: float(np.mean([m[key] for m in mine]))
                for key in ("questions", "coverage", "mean_size", "on_target", "below_beyond_noise",
                            "fallback") if all(key in m for m in mine)}}
    entry["arms"] = per_arm
    return entry


def webqsp_sets(root: Path, table: OutcomeTable, alphas: tuple[float, ...], delta: float,
                calibration: str = "held-out", uncertified: OpenUncertified = "largest",
                progress: Callable[[str], None] = lambda _: None,
                compare_scores: tuple[EvaluatorScore, ...] | None = None) -> RoutedSets:
    """UAG's tables of the outcome table's WebQSP questions (``eval uag``'s, built once and cached; a
    subset, e.g. under ``--limit``, gets its own cache), matched by question id."""
    from kgwise.eval.uag.experiment import load_webqsp_data

    return user_sets(load_webqsp_data(root), table, alphas, delta, calibration, uncertified, progress,
                     compare_scores, tag="webqsp")


def user_sets(inputs: UAGData, table: OutcomeTable, alphas: tuple[float, ...], delta: float,
              calibration: str = "held-out", uncertified: OpenUncertified = "largest",
              progress: Callable[[str], None] = lambda _: None,
              compare_scores: tuple[EvaluatorScore, ...] | None = None, tag: str | None = None) -> RoutedSets:
    """UAG's tables of the outcome table's questions from ``eval uag``'s inputs (a user's labelled
    questions, KG and recorded generations: :func:`kgwise.eval.uag.experiment.load_user_data`; built once
    and cached), matched by question id; a log question the inputs lack gets no set (counted in each
    split). ``tag``: the cache name's stem of a subset (default the inputs' tag)."""
    from kgwise.eval.uag.experiment import UAGExperimentConfig, uag_tables
    from kgwise.files import short_hash

    wanted = set(table.qids)
    if not {q.id for q in inputs.questions} <= wanted:
        kept = [q for q in inputs.questions if q.id in wanted]
        if not kept:
            raise ConfigError("no question of the log is among the sets' labelled questions (matched by id)")
        gens = None if inputs.generations is None else {q.id: inputs.generations[q.id] for q in kept}
        inputs = replace(inputs, questions=kept, generations=gens,
                         tag=f"{tag or inputs.tag}-{short_hash([q.id for q in kept])}")
    index = {q.id: i for i, q in enumerate(inputs.questions)}
    progress(f"UAG tables of {len(index)} of the {table.n_questions} questions (without a table: "
             f"{table.n_questions - len(index)}, no set) …")
    tables = uag_tables(inputs, UAGExperimentConfig(), progress=False)
    rows = np.asarray([index.get(q, -1) for q in table.qids], dtype=np.int64)
    return RoutedSets(tables, rows, alphas, delta, calibration=calibration, uncertified=uncertified,
                      compare_scores=compare_scores)
