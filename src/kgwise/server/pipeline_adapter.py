"""``ServedPipeline``: a ``kgwise.app.Pipeline`` in the shape the HTTP layer reads
(:class:`kgwise.server.contract.PipelineLike`), and :func:`pipeline_hub`, the hub that maps its errors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kgwise.app.abstain import Abstention, ArmAbstention
from kgwise.app.evidence import Evidence, LabelPath
from kgwise.app.examples import Example
from kgwise.app.external import Decision, Settlement
from kgwise.app.pipeline import (
    BudgetExceededError,
    Pipeline,
    PipelineResult,
    PipelineStatus,
    StateReadOnlyError,
    UnknownDecisionError,
)
from kgwise.errors import KgwiseError
from kgwise.server.openai_api import PipelineHub
from kgwise.types import GenerationSettings, Triple, Usage

__all__ = ["ServedPipeline", "label_path", "pipeline_hub"]


@dataclass(frozen=True, slots=True)
class ServedAnswerSet:
    members: tuple[str, ...]
    alpha: float
    guaranteed: bool
    guarantee: str


@dataclass(frozen=True, slots=True)
class ServedResult:
    answer: str
    choice: str | None
    arm: str
    scores: dict[str, float]
    evidence: Evidence | None
    answer_set: ServedAnswerSet | None
    usage: Usage
    decision_id: str
    abstention: Abstention | None = None
    finish_reason: str = ""


@dataclass(frozen=True, slots=True)
class ServedFeedback:
    decision_id: str
    arm: str
    correct: bool


@dataclass(frozen=True, slots=True)
class ServedArmStatus:
    name: str
    selections: int
    graded: int
    correct: int
    covered: int
    coverage_n: int
    coverage_lower: float = 0.0
    coverage_upper: float = 1.0
    drift: bool = False
    calibration_questions: int | None = None
    open_certified: bool | None = None
    abstention: ArmAbstention | None = None


@dataclass(frozen=True, slots=True)
class ServedPending:
    decision_id: str
    arm: str
    question: str


PENDING_SHOWN = 100


@dataclass(frozen=True, slots=True)
class ServedStatus:
    budget: float | None
    spent: float
    arms: tuple[ServedArmStatus, ...]
    pending: tuple[ServedPending, ...]
    alpha: float | None
    pinned: str | None = None


def label_path(chain: Sequence[Triple]) -> LabelPath:
    """A chain of triples (each sharing an entity with the next) as a label path; a hop whose triple
    points back to the path's current node is marked ``inverse``."""
    if not chain:
        raise KgwiseError("an empty KG path")
    first = chain[0]
    cur = first.head
    if len(chain) > 1 and first.head in (chain[1].head, chain[1].tail) and \
            first.tail not in (chain[1].head, chain[1].tail):
        cur = first.tail
    nodes, relations, inverse = [cur], [], []
    for t in chain:
        if t.head == cur:
            cur, back = t.tail, False
        elif t.tail == cur:
            cur, back = t.head, True
        else:
            raise KgwiseError(f"KG path is not connected at {cur!r}: next fact {t}")
        nodes.append(cur)
        relations.append(t.relation)
        inverse.append(back)
    return LabelPath(tuple(nodes), tuple(relations), tuple(inverse))


class ServedPipeline:
    """A :class:`~kgwise.app.Pipeline` satisfying :class:`~kgwise.server.contract.PipelineLike`."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline

    @classmethod
    def from_config(cls, config: str | Path, state_dir: str | Path | None = None) -> ServedPipeline:
        """Open the config's pipeline (KG, models, state directory)."""
        return cls(Pipeline.from_config(config, state_dir))

    @property
    def arm_names(self) -> tuple[str, ...]:
        return tuple(a.name for a in self.pipeline.config.arms)

    @property
    def cost_unit(self) -> str:
        return self.pipeline.config.router.unit

    def answer(self, text: str, choices: Sequence[str] | None = None, arm: str | None = None,
               settings: GenerationSettings | None = None, on_text: Callable[[str], None] | None = None
               ) -> ServedResult:
        r: PipelineResult = self.pipeline.answer(text, choices, arm=arm, settings=settings, on_text=on_text)
        k = r.knowledge
        evidence = Evidence(r.question_entities, r.choice_entities, k.triples,
                            tuple(label_path(p) for p in k.paths if p), k.text,
                            tuple(label_path(p) for p in k.support if p))
        labels = r.label is not None or r.abstained  # a choice, or "not sure" among the choices
        aset = None if r.answer_set is None else ServedAnswerSet(
            r.answer_set.labels if labels else r.answer_set.texts, r.answer_set.alpha,
            r.answer_set.guarantee, r.answer_set.statement)
        usage = replace(r.usage, cost=r.cost)  # the arm's cost in the budget's unit, not the LLM's own
        return ServedResult(r.answer, r.label, r.arm, {s.arm: s.score for s in r.scores}, evidence, aset,
                            usage, r.decision, r.abstention, r.finish_reason)

    def evidence(self, text: str, choices: Sequence[str] | None = None) -> Evidence:
        """The question's KG evidence (:meth:`kgwise.app.Pipeline.evidence`)."""
        return self.pipeline.evidence(text, choices)

    def examples(self) -> tuple[Example, ...]:
        return self.pipeline.examples()

    def feedback(self, decision_id: str, correct: bool | None = None, gold: str | None = None
                 ) -> ServedFeedback:
        f = self.pipeline.feedback(decision_id, correct=correct, gold=gold)
        return ServedFeedback(f.decision, f.arm, f.reward >= 0.5)

    def status(self) -> ServedStatus:
        """Per arm, ``selections`` = answers made (each paid when made); ``spent``: their costs; the newest
        :data:`PENDING_SHOWN` decisions awaiting feedback."""
        st = self.pipeline.status()
        waiting = self.pipeline.pending(last=PENDING_SHOWN)
        counts = self.pipeline.state.coverage
        arms = tuple(ServedArmStatus(a.name, a.pulls, counts[a.name].graded, counts[a.name].correct,
                                     a.coverage.covered, a.coverage.n, a.coverage.lower, a.coverage.upper,
                                     a.coverage.drift, None if a.routed is None else a.routed.questions,
                                     None if a.routed is None else a.routed.open_certified,
                                     st.abstention.get(a.name))
                     for a in st.arms)
        pending = tuple(ServedPending(p.decision, p.arm, p.text) for p in waiting)
        return ServedStatus(st.budget, st.spent, arms, pending, st.alpha if st.calibrated else None,
                            st.pinned)

    def spend(self) -> float:
        """The pipeline's spend (:meth:`kgwise.app.Pipeline.spend`), without the rest of a status."""
        return self.pipeline.spend()

    def route(self, question: str, costs: Mapping[str, float] | None = None) -> Decision:
        return self.pipeline.route(question, costs)

    def settle(self, decision: str, correct: float, cost: float, observed: Mapping[str, float] | None = None
               ) -> Settlement:
        return self.pipeline.settle(decision, correct, cost, observed)

    def cancel(self, decision: str) -> Settlement:
        return self.pipeline.cancel(decision)

    def pipeline_status(self) -> PipelineStatus:
        return self.pipeline.status()

    def state_health(self) -> dict[str, Any]:
        from kgwise.app.store import state_health

        return state_health(self.pipeline.state)

    def close(self) -> None:
        self.pipeline.close()


def pipeline_hub(pipelines: dict[str, ServedPipeline]) -> PipelineHub:
    """A hub over served pipelines that maps their unknown-decision (404), budget (429) and read-only
    state (503) errors."""
    return PipelineHub(pipelines, unknown_decision=(UnknownDecisionError,),
                       budget_exhausted=(BudgetExceededError,), read_only=(StateReadOnlyError,))
