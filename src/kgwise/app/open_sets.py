"""UAG's calibrated answer sets for the pipeline's open questions, kept per routed arm.

With ``[answer_sets] uag_llm = SPEC``, :func:`kgwise.app.fit.fit` calibrates a
:class:`~kgwise.conformal.calibrated.CalibratedUAG` on the graded open dev questions and saves it in the
state directory (``uag.json``). Every open answer then carries the set UAG keeps for its question: the KG
candidates retrieved from the question's topic entities, scored against ``Φ(P)``, the answer ``uag_llm``
writes from the best retrieved paths.

* The topic entities are the pipeline's own grounding of the question text. The same is done at fit and
  at answer time, so the calibration questions and a new question are treated alike; entities given in a
  dev file are not used.
* ``1 − uag_tune_share`` of the graded open dev questions (interleaved, in log order) are held out of the
  router's learning, as multiple-choice ones are (:mod:`kgwise.app.calibration`); those with a grounded
  topic entity calibrate UAG (LTT at the pipeline's α and δ, ``order = "front+chain"``), the others tune
  its grid. Each calibration question's misses on the λ LTT may test are kept
  (:class:`~kgwise.conformal.grouped.GroupedUAG`).
* When the router sends an open question to arm ``a``, the held-out calibration questions are re-routed
  by the router as it stands (:class:`~kgwise.app.calibration.CalibrationSelector`, the same draw as the
  multiple-choice sets) and LTT runs again on those it sends to ``a``. The set then carries UAG's
  guarantee over the questions routed to ``a``: ``P(miss rate ≤ α) ≥ 1 − δ`` over questions the present
  rule sends there, exchangeable with the dev log. When that group certifies no λ (too few questions for α
  and δ, or too many misses) the set is, without guarantee (the answer says so and its ``guarantee`` is
  false), what ``[answer_sets] open_uncertified`` names: ``"largest"`` (default), UAG's largest set — every
  candidate its retrieval keeps, the most it can cover, as a multiple-choice arm with too few questions gets
  every choice — or ``"pooled"``, the set calibrated on every held-out open question, whose guarantee is
  over all open questions, not those routed to ``a``. A forced arm answers any question, so its set is the
  pooled one, with its guarantee. (WebQSP replayed, α = 0.2: sets calibrated over all questions covered the
  questions routed to llama2-chat .820 on average over 50 splits, ≥ 0.8 in 72 % of them; calibrated this
  way, .861 and 98 %; every routed arm on target at once in 80 % of the splits with the largest set as
  the fallback, 46 % with the pooled one: ``kgwise eval pipeline``, :mod:`kgwise.eval.pipeline_sets`.)
* ``uag_llm`` must be a local model. Its calls are counted and timed but are not charged to the budget,
  which only knows the arms.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from kgwise.conformal.calibrated import UAG_DEFAULTS, CalibratedUAG, TableSettings, calibrate_uag
from kgwise.conformal.evaluator import Generator, LLMGenerator
from kgwise.conformal.grouped import GroupedUAG
from kgwise.conformal.ltt import min_calibration_questions
from kgwise.conformal.provenance import graph_fingerprint
from kgwise.errors import DataError
from kgwise.files import read_json, short_hash
from kgwise.kg.base import KnowledgeGraph
from kgwise.types import Question

if TYPE_CHECKING:
    from kgwise.app.config import AnswerSetConfig
    from kgwise.conformal.calibrated import AnswerSet
    from kgwise.conformal.uag import UAG

__all__ = ["GENERATOR_TOKENS", "ArmOpenSet", "OpenSetFit", "OpenSets", "calibrate_open_sets", "routed_to"]

GENERATOR_TOKENS = 64
"""Most tokens of ``Φ(P)`` (at calibration and at answer time alike)."""

Ground = Callable[[Question], tuple[str, ...]]
"""The pipeline's grounding: a question's topic entities, named as in the KG."""


@dataclass(frozen=True, slots=True)
class OpenSetFit:
    """What the fit did for open questions: how many graded open dev questions it had, how many had a
    grounded topic entity, how many of those were held out to calibrate, UAG's calibration summary
    (``certified``, λ, miss rate, sizes, ``note``) and, per arm, the held-out questions the fitted router
    sends to it and what LTT certifies on them (:class:`ArmOpenSet`); ``reason``: why nothing was
    calibrated (empty when something was)."""

    questions: int
    grounded: int = 0
    calibration: int = 0
    generator_calls: int = 0
    seconds: float = 0.0
    summary: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    per_arm: tuple[ArmOpenSet, ...] = ()


@dataclass(frozen=True, slots=True)
class ArmOpenSet:
    """One arm's share of the held-out open questions (those the router sends it) and what LTT certifies
    on them: λ and their miss rate at it (``None``: nothing certified), and their miss rate at UAG's
    largest set (``None``: no questions)."""

    arm: str
    questions: int
    lambda_: tuple[float, ...] | None = None
    miss_rate: float | None = None
    largest_miss_rate: float | None = None


def _generator(spec: str) -> Generator:
    from kgwise.llm import get_llm

    return LLMGenerator(get_llm(spec, cache=True), max_tokens=GENERATOR_TOKENS)


def calibrate_open_sets(kg: KnowledgeGraph, ground: Ground, questions: Sequence[Question],
                        held_rows: Sequence[int | None], fit: str, sets: AnswerSetConfig, work: Path,
                        say: Callable[[str], None] | None = None, generator: Generator | None = None
                        ) -> tuple[CalibratedUAG | None, OpenSetFit]:
    """UAG calibrated on the graded open ``questions`` (module docstring): those with a row in the fit's
    held-out calibration (``held_rows``, parallel to ``questions``; ``fit``: that calibration's id)
    calibrate, the others tune. Tables are built under ``work`` (resumable); ``generator`` writes Φ(P)
    (default: ``uag_llm``). ``None`` with the reason when there are too few questions or no λ is
    certified."""
    assert sets.uag_llm is not None
    graded = [(q, r) for q, r in zip(questions, held_rows, strict=True) if not q.choices and q.gold]
    topical = [(replace(q, topic_entities=t), r) for q, r in graded if (t := ground(q))]
    cal = [j for j, (_, r) in enumerate(topical) if r is not None]
    tune = [j for j, (_, r) in enumerate(topical) if r is None]
    need = min_calibration_questions(sets.alpha, sets.delta)
    if len(cal) < need or not tune:
        return None, OpenSetFit(len(graded), len(topical), len(cal), reason=(
            f"{len(topical)} graded open dev questions with a grounded topic entity: {len(cal)} held out to "
            f"calibrate, {len(tune)} to tune; UAG at α={sets.alpha:g}, δ={sets.delta:g} needs ≥ {need} "
            f"to calibrate ({max(need - len(cal), 0)} more held out) and ≥ 1 to tune"))
    from kgwise.conformal.tables import build_tables

    settings = TableSettings()
    graph = graph_fingerprint(kg)  # hashes every label and edge: once
    key = short_hash([sets.uag_llm, GENERATOR_TOKENS, graph,
                      [(q.id, q.text, list(q.topic_entities)) for q, _ in topical]])
    t0 = time.perf_counter()
    tables = build_tables(kg, [q for q, _ in topical], None, settings.scorer(), settings.retriever,
                          work / key, evaluator=settings.evaluator_config(),
                          generator=generator or _generator(sets.uag_llm), say=say)
    seconds = time.perf_counter() - t0
    cfg = replace(UAG_DEFAULTS, alpha=sets.alpha, ltt=replace(UAG_DEFAULTS.ltt, delta=sets.delta),
                  order="front+chain")
    uag, summary = calibrate_uag(tables, cfg, settings, split=(tune, cal))
    summary["generator"] = sets.uag_llm
    summary["generator_tokens"] = GENERATOR_TOKENS
    summary["made_with"] = {"kg": graph, "generator": sets.uag_llm}
    summary["held_out"] = {"fit": fit, "rows": [topical[j][1] for j in cal]}
    fit_report = OpenSetFit(len(graded), len(topical), len(cal), len(topical), seconds, summary,
                            "" if not uag.abstains else str(summary["note"]))
    if uag.abstains:
        return None, fit_report
    return CalibratedUAG(uag, settings, summary, GroupedUAG.from_fit(uag, tables.subset(cal))), fit_report


FIT_REPORT_FILE = "fit-report.json"
"""Where ``kgwise fit`` writes its report in the state folder."""


def uncalibrated_reason(state_root: Path) -> str:
    """Why there are no UAG sets for open questions: the last fit's reason (its report), or that no fit
    has run."""
    report = state_root / FIT_REPORT_FILE
    if report.is_file():
        try:
            reason = (read_json(report).get("open_sets") or {}).get("reason")
        except (DataError, AttributeError):
            reason = None
        if reason:
            return f"the last `kgwise fit` calibrated none: {reason}"
    return "not calibrated: run `kgwise fit` with graded open questions"


def routed_to(calibration: CalibratedUAG, group: npt.NDArray[np.int64], arm: int
              ) -> tuple[UAG | None, npt.NDArray[np.int64]]:
    """:meth:`OpenSets.for_arm` on a saved ``calibration`` (no KG or generator needed)."""
    groups = calibration.groups
    rows = np.asarray((calibration.summary.get("held_out") or {}).get("rows", []), dtype=np.int64)
    if groups is None or rows.size != len(groups) or (rows.size and rows.max() >= group.size):
        raise DataError("the open-set calibration does not match the held-out calibration: run `kgwise fit`")
    mine = np.flatnonzero(group[rows] == arm)
    return groups.certify(mine), mine


class OpenSets:
    """A saved calibration with its generator (default: the model it was calibrated with): the set of one
    open question."""

    def __init__(self, calibration: CalibratedUAG, kg: KnowledgeGraph, source: Path,
                 generator: Generator | None = None) -> None:
        spec, _ = calibration.check_pipeline(kg, None, source)
        self.calibration = calibration
        self.kg = kg
        self.generator = generator or _generator(spec)
        self.scorer = calibration.settings.scorer()
        held = calibration.summary.get("held_out") or {}
        self.fit: str | None = held.get("fit")

    @classmethod
    def load(cls, path: Path, kg: KnowledgeGraph, generator: Generator | None = None) -> OpenSets:
        return cls(CalibratedUAG.load(path), kg, path, generator)

    @property
    def size(self) -> int:
        """Calibration questions LTT certified λ on."""
        return int(self.calibration.summary.get("calibration", 0))

    def for_arm(self, group: npt.NDArray[np.int64], arm: int) -> tuple[UAG | None, npt.NDArray[np.int64]]:
        """The UAG LTT certifies on the held-out calibration questions that ``group`` (per held-out row, the
        position of the arm the router sends it to: :meth:`CalibrationSelector.group`) sends to arm
        position ``arm`` (``None``: nothing certified), and those questions (rows of
        ``calibration.groups``)."""
        return routed_to(self.calibration, group, arm)

    def answer_set(self, question: Question, uag: UAG | None = None) -> AnswerSet | None:
        """The set of ``question`` (with its grounded topic entities) at the calibration's λ — ``uag``'s
        when given (:meth:`for_arm`) — ``None`` when no topic entity is in the KG."""
        try:
            return self.calibration.answer(question, self.kg, self.generator, self.scorer, uag)
        except DataError:
            return None
