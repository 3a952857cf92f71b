"""Calibrated answer sets for the knowledge injector (UAG issue, item 6): answer labelled questions with the
same pipeline that will serve users, turn the choice probabilities into split-conformal scores (LAC or
APS) and save them; :func:`with_prediction_set` then attaches a set to every later answer.

The saved calibration uses every labelled question. The report also checks the guarantee on data the
calibration did not see: over ``splits`` random halves, calibrate on one half and measure coverage and
set size on the other (coverage ≥ 1 − α on average, by exchangeability).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from kgwise.conformal.provenance import file_digest, graph_fingerprint
from kgwise.conformal.split import (
    ChoiceScore,
    SplitConformal,
    SplitConformalConfig,
    conformal_quantile,
    label_set,
    min_calibration_size,
)
from kgwise.errors import ConfigError
from kgwise.files import ResumeLog, short_hash
from kgwise.inject.injector import KnowledgeInjector
from kgwise.types import Answer, Question

__all__ = ["CalibrationConfig", "calibrate", "collect_probabilities", "pipeline_of", "with_prediction_set"]


@dataclass(frozen=True)
class CalibrationConfig:
    """``alpha``: default miscoverage of the saved calibration; ``score``: ``lac`` or ``aps``; ``alphas``
    and ``splits``: the held-out check of the report."""

    alpha: float = 0.1
    score: ChoiceScore = "lac"
    alphas: tuple[float, ...] = (0.05, 0.1, 0.2, 0.3)
    splits: int = 50
    seed: int = 0

    def __post_init__(self) -> None:
        SplitConformalConfig(self.alpha, self.score)  # validates alpha and score
        for a in self.alphas:
            SplitConformalConfig(a, self.score)
        if self.splits < 1:
            raise ConfigError(f"splits must be ≥ 1, got {self.splits}")

    @property
    def min_questions(self) -> int:
        """The fewest labelled questions that give finite sets at ``alpha`` (and at least 2)."""
        return max(2, min_calibration_size(self.alpha))


def collect_probabilities(
    injector: KnowledgeInjector,
    questions: Sequence[Question],
    combo: str | None,
    outcomes: Path | None = None,
    progress: Callable[[int, int], None] | None = None,
    fingerprint: str | None = None,
) -> list[dict[str, Any]]:
    """One row ``{qid, probabilities, gold, combo}`` per labelled question, answered by ``injector`` with
    ``combo`` (``None``: the bandit's pick). Rows are appended to ``outcomes`` (a
    :class:`~kgwise.files.ResumeLog` of ``fingerprint``, default: a hash of :func:`pipeline_of`) as they
    arrive and read back on a rerun, so an interrupted calibration resumes."""
    if fingerprint is None and outcomes is not None:
        fingerprint = short_hash(pipeline_of(injector, combo))
    done = ResumeLog(outcomes, fingerprint or "")
    rows: list[dict[str, Any]] = []
    for i, q in enumerate(questions):
        if not q.choices or q.gold_index is None:
            raise ConfigError(f"{q.ref} has no choices or no gold answer: it cannot calibrate")
        row = done.get(q.id)
        if row is None:
            a = injector.inject(q, combo).answer
            row = {"qid": q.id, "probabilities": [float(a.probabilities[c.label]) for c in q.choices],
                   "gold": int(q.gold_index), "combo": a.combo}
            done.put(q.id, row)
        rows.append(row)
        if progress is not None:
            progress(i + 1, len(questions))
    return rows


def calibrate(rows: Sequence[dict[str, Any]], config: CalibrationConfig | None = None
              ) -> tuple[SplitConformal, dict[str, Any]]:
    """Split CP over all ``rows`` (the saved calibration) and the held-out check of the report."""
    cfg = config or CalibrationConfig()
    if len(rows) < cfg.min_questions:
        raise ConfigError(f"a calibration at α = {cfg.alpha:g} needs at least {cfg.min_questions} labelled "
                          f"questions, got {len(rows)}")
    probs = [np.asarray(r["probabilities"], dtype=np.float64) for r in rows]
    gold = np.asarray([r["gold"] for r in rows], dtype=np.int64)
    cp = SplitConformal(SplitConformalConfig(cfg.alpha, cfg.score)).conformalize(probs, gold)
    n = len(rows)
    # every question's choice scores once, padded with +∞ (never in a set) where it has fewer choices
    scores = np.full((n, max(p.size for p in probs)), np.inf)
    for i, p in enumerate(probs):
        scores[i, : p.size] = cp.scores(p[None, :])[0]
    gold_scores = scores[np.arange(n), gold]
    rng = np.random.default_rng(cfg.seed)
    check: dict[str, dict[str, Any]] = {}
    for alpha in cfg.alphas:
        if n // 2 < min_calibration_size(alpha):
            check[f"{alpha:g}"] = {"skipped": f"a half of {n // 2} questions is too small for a finite set "
                                              f"at α = {alpha:g} (needs {min_calibration_size(alpha)})"}
            continue
        cover, size = [], []
        for _ in range(cfg.splits):
            perm = rng.permutation(n)
            cal, test = perm[: n // 2], perm[n // 2:]
            q = conformal_quantile(gold_scores[cal], alpha)
            cover.append(float(np.mean(gold_scores[test] <= q)))
            size.append(float(np.mean((scores[test] <= q).sum(axis=1))))
        check[f"{alpha:g}"] = {"coverage": float(np.mean(cover)), "coverage_std": float(np.std(cover)),
                               "mean_set_size": float(np.mean(size)), "target": 1 - alpha}
    accuracy = float(np.mean([int(np.argmax(p)) == g for p, g in zip(probs, gold, strict=True)]))
    report = {"questions": n, "accuracy": accuracy, "config": asdict(cfg),
              "quantile": cp.quantile(), "heldout_check": check}
    return cp, report


def pipeline_of(injector: KnowledgeInjector, combo: str | None, policy: str | Path | None = None,
                bandit: str | Path | None = None) -> dict[str, str | None]:
    """What the answers of ``injector`` with ``combo`` (``None``: the bandit's pick, else the default) depend
    on, for a calibration's ``made_with`` record (:mod:`kgwise.conformal.provenance`); ``policy`` and
    ``bandit``: the files the injector was built from."""
    default = injector.config.default_combo
    used = combo or ("bandit" if injector.bandit is not None else str(default) if default else None)
    return {"kg": graph_fingerprint(injector.kg), "llm": injector.llm.name, "combo": used,
            "scoring": injector.config.scoring, "policy": file_digest(policy), "bandit": file_digest(bandit)}


def with_prediction_set(answer: Answer, conformal: SplitConformal, alpha: float | None = None) -> Answer:
    """``answer`` with its calibrated set of choice labels (``alpha`` defaults to the calibration's)."""
    return replace(answer, prediction_set=label_set(conformal, answer.probabilities, alpha))
