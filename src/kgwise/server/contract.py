"""What the HTTP layer calls on a pipeline (``kgwise.app.Pipeline`` as :class:`~kgwise.server.
pipeline_adapter.ServedPipeline` serves it). Its results are the product's own typed results, mapped
straight to the HTTP schema (:mod:`kgwise.server.schemas`) by :mod:`kgwise.server.openai_api`:

- ``answer(text, choices=None, arm=None, settings=None, on_text=None) -> PipelineResult``: one routed,
  grounded, calibrated answer (``arm`` forces an arm by name instead of asking the router; ``settings``:
  the caller's generation settings; ``on_text``: called with a generated answer's text as it is generated);
- ``feedback(decision_id, correct=…, gold=…) -> FeedbackResult``: the outcome of a decision;
- ``status() -> PipelineStatusOut``: spend against budget, per-arm figures, pending decisions, in the HTTP
  schema (the server fills in the pipeline's ``name`` and the spend ``history`` it samples).

Errors the pipeline raises are mapped to HTTP statuses in :mod:`kgwise.server.openai_api`
(``UnknownDecisionError``: 404; ``BudgetExceededError``: 429; any other ``KgwiseError``: 400).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from kgwise.app import FeedbackResult, PipelineResult
from kgwise.app.examples import Example
from kgwise.server.schemas import PipelineStatusOut
from kgwise.types import GenerationSettings

__all__ = ["ExamplesLike", "PipelineLike"]


@runtime_checkable
class ExamplesLike(Protocol):
    """A pipeline that offers example questions made from its KG (the web page shows them)."""

    def examples(self) -> Sequence[Example]: ...


class PipelineLike(Protocol):
    """The product object as the server sees it: its methods are called from several threads at once (the
    pipeline locks what it shares, and lets model calls and fsyncs of concurrent requests overlap)."""

    @property
    def arm_names(self) -> Sequence[str]: ...
    @property
    def cost_unit(self) -> str: ...

    def answer(self, text: str, choices: Sequence[str] | None = None, arm: str | None = None,
               settings: GenerationSettings | None = None, on_text: Callable[[str], None] | None = None
               ) -> PipelineResult: ...

    def feedback(self, decision_id: str, correct: bool | None = None, gold: str | None = None
                 ) -> FeedbackResult: ...

    def status(self) -> PipelineStatusOut: ...

    def spend(self) -> float:
        """The budget spent so far: ``status().spent`` without the rest of a status (the server samples
        it for the spend history after answers, at most twice a second)."""
        ...

    def state_health(self) -> Mapping[str, object]:
        """Where the pipeline's state lives and whether it answers (``/health``)."""
        ...
