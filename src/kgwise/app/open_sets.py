"""UAG's calibrated answer sets for the pipeline's open questions (issue 27 item 2: "the set is UAG's").

With ``[answer_sets] uag_llm = SPEC``, :func:`kgwise.app.fit.fit` calibrates a
:class:`~kgwise.conformal.calibrated.CalibratedUAG` on the graded open dev questions and saves it in the
state directory (``uag.json``). Every open answer then carries the set UAG keeps for its question: the KG
candidates retrieved from the question's topic entities, scored against ``Φ(P)``, the answer ``uag_llm``
writes from the best retrieved paths.

* The topic entities are the pipeline's own grounding of the question text. The same is done at fit and
  at answer time, so the calibration questions and a new question are treated alike; entities given in a
  dev file are not used.
* The calibration is split into a tuning part (``uag_tune_share``) and a calibration part, and LTT runs
  at the pipeline's α and δ (``order = "front+chain"``: :func:`~kgwise.conformal.calibrated.calibrate_uag`).
* What is guaranteed is UAG's: ``P(miss rate ≤ α) ≥ 1 − δ`` over questions like the calibration ones,
  whichever arm answered — over all open questions, not over those routed to one arm. The set does not
  depend on the arm, but the router chooses which questions go to it, and those can be harder than the
  rest (WebQSP replayed, α = 0.2: the questions routed to llama2-chat were covered .820 on average over
  50 splits, ≥ 0.8 in 72 % of them; ``kgwise eval pipeline``, :mod:`kgwise.eval.pipeline_sets`). Each
  answer's statement says so, and ``guarantee`` turns false when the arm's live coverage falls below
  1 − α beyond noise. Per-arm (Mondrian) UAG is measured there, not yet used here.
* ``uag_llm`` must be a local model. Its calls are counted and timed but are not charged to the budget,
  which only knows the arms.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kgwise.conformal.calibrated import UAG_DEFAULTS, CalibratedUAG, TableSettings, calibrate_uag
from kgwise.conformal.evaluator import Generator, LLMGenerator
from kgwise.conformal.ltt import min_calibration_questions
from kgwise.conformal.provenance import graph_fingerprint
from kgwise.errors import DataError
from kgwise.files import short_hash
from kgwise.kg.base import KnowledgeGraph
from kgwise.types import Question

if TYPE_CHECKING:
    from kgwise.app.config import AnswerSetConfig
    from kgwise.conformal.calibrated import AnswerSet

__all__ = ["GENERATOR_TOKENS", "OpenSetFit", "OpenSets", "calibrate_open_sets"]

GENERATOR_TOKENS = 64
"""Most tokens of ``Φ(P)`` (at calibration and at answer time alike)."""

Ground = Callable[[Question], tuple[str, ...]]
"""The pipeline's grounding: a question's topic entities, named as in the KG."""


@dataclass(frozen=True, slots=True)
class OpenSetFit:
    """What the fit did for open questions: how many graded open dev questions it had, how many had a
    grounded topic entity, and UAG's calibration summary (``certified``, λ, miss rate, sizes, ``note``);
    ``reason``: why nothing was calibrated (empty when something was)."""

    questions: int
    grounded: int = 0
    generator_calls: int = 0
    seconds: float = 0.0
    summary: dict[str, Any] = field(default_factory=dict)
    reason: str = ""


def _generator(spec: str) -> Generator:
    from kgwise.llm import get_llm

    return LLMGenerator(get_llm(spec, cache=True), max_tokens=GENERATOR_TOKENS)


def calibrate_open_sets(kg: KnowledgeGraph, ground: Ground, questions: Sequence[Question],
                        sets: AnswerSetConfig, work: Path, seed: int = 0,
                        say: Callable[[str], None] | None = None, generator: Generator | None = None
                        ) -> tuple[CalibratedUAG | None, OpenSetFit]:
    """UAG calibrated on the graded open ``questions`` (module docstring); tables are built under
    ``work`` (resumable); ``generator`` writes Φ(P) (default: ``uag_llm``). ``None`` with the reason
    when there are too few questions or no λ is certified."""
    assert sets.uag_llm is not None
    graded = [q for q in questions if not q.choices and q.gold]
    topical = [replace(q, topic_entities=t) for q in graded if (t := ground(q))]
    n_cal = len(topical) - round(sets.uag_tune_share * len(topical))
    need = min_calibration_questions(sets.alpha, sets.delta)
    if n_cal < need:
        return None, OpenSetFit(len(graded), len(topical), reason=(
            f"{len(topical)} graded open dev questions with a grounded topic entity leave {n_cal} to "
            f"calibrate after tuning; UAG at α={sets.alpha:g}, δ={sets.delta:g} needs ≥ {need}"))
    from kgwise.conformal.tables import build_tables

    settings = TableSettings()
    graph = graph_fingerprint(kg)  # hashes every label and edge: once
    key = short_hash([sets.uag_llm, GENERATOR_TOKENS, graph,
                      [(q.id, q.text, list(q.topic_entities)) for q in topical]])
    t0 = time.perf_counter()
    tables = build_tables(kg, topical, None, settings.scorer(), settings.retriever, work / key,
                          evaluator=settings.evaluator_config(),
                          generator=generator or _generator(sets.uag_llm), say=say)
    seconds = time.perf_counter() - t0
    cfg = replace(UAG_DEFAULTS, alpha=sets.alpha, ltt=replace(UAG_DEFAULTS.ltt, delta=sets.delta),
                  order="front+chain")
    uag, summary = calibrate_uag(tables, cfg, settings, sets.uag_tune_share, seed)
    summary["generator"] = sets.uag_llm
    summary["generator_tokens"] = GENERATOR_TOKENS
    summary["made_with"] = {"kg": graph, "generator": sets.uag_llm}
    fit = OpenSetFit(len(graded), len(topical), len(topical), seconds, summary,
                     "" if not uag.abstains else str(summary["note"]))
    return (None if uag.abstains else CalibratedUAG(uag, settings, summary)), fit


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

    @classmethod
    def load(cls, path: Path, kg: KnowledgeGraph, generator: Generator | None = None) -> OpenSets:
        return cls(CalibratedUAG.load(path), kg, path, generator)

    @property
    def size(self) -> int:
        """Calibration questions LTT certified λ on."""
        return int(self.calibration.summary.get("calibration", 0))

    def answer_set(self, question: Question) -> AnswerSet | None:
        """The set of ``question`` (with its grounded topic entities), ``None`` when none is in the KG."""
        try:
            return self.calibration.answer(question, self.kg, self.generator, self.scorer)
        except DataError:
            return None
