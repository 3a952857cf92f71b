"""``ServedPipeline``: a ``kgwise.app.Pipeline`` as the HTTP layer calls it (:class:`kgwise.server.contract.
PipelineLike`: its answers and feedback are the pipeline's own results; its status is in the HTTP schema),
and :func:`pipeline_hub`, the hub that maps its errors."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kgwise.app.evidence import Evidence
from kgwise.app.examples import Example
from kgwise.app.external import Decision, Settlement
from kgwise.app.pipeline import (
    BudgetExceededError,
    FeedbackResult,
    Pipeline,
    PipelineResult,
    PipelineStatus,
    StateReadOnlyError,
    UnknownDecisionError,
)
from kgwise.server.openai_api import PipelineHub
from kgwise.server.schemas import ArmStatusOut, PendingOut, PipelineStatusOut
from kgwise.types import GenerationSettings

__all__ = ["ServedPipeline", "pipeline_hub"]


PENDING_SHOWN = 100
"""The newest decisions awaiting feedback that a status lists."""


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
               ) -> PipelineResult:
        return self.pipeline.answer(text, choices, arm=arm, settings=settings, on_text=on_text)

    def evidence(self, text: str, choices: Sequence[str] | None = None) -> Evidence:
        """The question's KG evidence (:meth:`kgwise.app.Pipeline.evidence`)."""
        return self.pipeline.evidence(text, choices)

    def examples(self) -> tuple[Example, ...]:
        return self.pipeline.examples()

    def feedback(self, decision_id: str, correct: bool | None = None, gold: str | None = None
                 ) -> FeedbackResult:
        return self.pipeline.feedback(decision_id, correct=correct, gold=gold)

    def status(self) -> PipelineStatusOut:
        """Per arm, ``selections`` = answers made (each paid when made); ``spent``: their costs; the newest
        :data:`PENDING_SHOWN` decisions awaiting feedback (the server fills in ``name`` and ``history``)."""
        st = self.pipeline.status()
        waiting = self.pipeline.pending(last=PENDING_SHOWN)
        counts = self.pipeline.state.coverage
        alpha = st.alpha if st.calibrated else None
        arms = [ArmStatusOut.of(a, counts[a.name], alpha, st.abstention.get(a.name)) for a in st.arms]
        pending = [PendingOut(decision_id=p.decision, arm=p.arm, question=p.text) for p in waiting]
        return PipelineStatusOut(name="", cost_unit=self.cost_unit, budget=st.budget, spent=st.spent,
                                 alpha=alpha, arms=arms, pending_total=st.pending, pending=pending,
                                 history=[], pinned=st.pinned)

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
