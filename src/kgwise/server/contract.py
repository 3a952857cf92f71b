"""What the HTTP layer needs from a pipeline: small structural protocols of ``kgwise.app.Pipeline``.

The OpenAI-compatible API (:mod:`kgwise.server.openai_api`) and the web page are written against these
protocols only, so the server reads exactly these attributes and nothing else of the product object:

- ``PipelineLike.answer(text, choices=None, arm=None, settings=None, on_text=None) -> ResultLike``: one
  routed, grounded, calibrated answer (``arm`` forces an arm by name instead of asking the router;
  ``settings``: the caller's generation settings; ``on_text``: called with a generated answer's text as it
  is generated);
- ``PipelineLike.feedback(decision_id, correct=…, gold=…) -> FeedbackLike``: the outcome of a decision;
- ``PipelineLike.status() -> StatusLike``: spend against budget, per-arm figures, pending decisions.

Errors the pipeline raises are mapped to HTTP statuses in :mod:`kgwise.server.openai_api`
(``UnknownDecisionLike``: 404; ``BudgetExceededError``: 429; any other ``KgwiseError``: 400).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from kgwise.types import GenerationSettings, Triple, Usage

__all__ = ["AnswerSetLike", "ArmStatusLike", "EvidenceLike", "ExampleLike", "ExamplesLike", "FeedbackLike",
           "LabelPathLike", "PendingLike",
           "PipelineLike", "ResultLike", "StatusLike"]


class LabelPathLike(Protocol):
    """A KG path by label: ``nodes[0] -relations[0]-> nodes[1] …``; ``inverse[i]``: hop ``i`` follows its
    edge backwards (the stored fact is ``nodes[i+1] -relations[i]-> nodes[i]``)."""

    @property
    def nodes(self) -> Sequence[str]: ...
    @property
    def relations(self) -> Sequence[str]: ...
    @property
    def inverse(self) -> Sequence[bool]: ...


class EvidenceLike(Protocol):
    """The knowledge an answer used: grounded question concepts, each choice's concepts (in choice order;
    empty for an open question), triples and paths (best first) as data, the text rendered into the
    prompt, and ``support``: the paths that end at the chosen answer."""

    @property
    def question_concepts(self) -> Sequence[str]: ...
    @property
    def choice_concepts(self) -> Sequence[Sequence[str]]: ...
    @property
    def triples(self) -> Sequence[Triple]: ...
    @property
    def paths(self) -> Sequence[LabelPathLike]: ...
    @property
    def text(self) -> str: ...
    @property
    def support(self) -> Sequence[LabelPathLike]: ...


class AnswerSetLike(Protocol):
    """A calibrated answer set at miscoverage ``alpha``; ``guaranteed``: whether the coverage guarantee
    holds for this answer; ``guarantee``: what it says, in words (or why it does not hold)."""

    @property
    def members(self) -> Sequence[str]: ...
    @property
    def alpha(self) -> float: ...
    @property
    def guaranteed(self) -> bool: ...
    @property
    def guarantee(self) -> str: ...


class AbstentionLike(Protocol):
    """With ``[answer_sets] abstain``: whether the answer is "not sure", what it promises or why not, its
    confidence and the certified threshold (``None``: none)."""

    @property
    def abstained(self) -> bool: ...
    @property
    def promise(self) -> str: ...
    @property
    def confidence(self) -> float: ...
    @property
    def threshold(self) -> float | None: ...


class ArmAbstentionLike(Protocol):
    """Live abstention counts of one arm: asked, answered, graded and right among answered."""

    @property
    def asked(self) -> int: ...
    @property
    def answered(self) -> int: ...
    @property
    def graded(self) -> int: ...
    @property
    def correct(self) -> int: ...


class ResultLike(Protocol):
    """One answer: ``answer`` is its text (the chosen choice's text, or free text), ``choice`` its label
    (``None`` for an open question); ``arm`` the arm that answered, ``scores`` the router's score of every
    arm; ``usage.cost`` in the pipeline's ``cost_unit``."""

    @property
    def answer(self) -> str: ...
    @property
    def choice(self) -> str | None: ...
    @property
    def arm(self) -> str: ...
    @property
    def scores(self) -> Mapping[str, float]: ...
    @property
    def evidence(self) -> EvidenceLike | None: ...
    @property
    def answer_set(self) -> AnswerSetLike | None: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def decision_id(self) -> str: ...
    @property
    def abstention(self) -> AbstentionLike | None: ...
    @property
    def finish_reason(self) -> str:
        """For generated text: ``length`` at the token limit, else ``stop`` (empty: not generated)."""
        ...


class ExampleLike(Protocol):
    """An example question about the pipeline's KG and its answer choices."""

    @property
    def question(self) -> str: ...
    @property
    def choices(self) -> Sequence[str]: ...


@runtime_checkable
class ExamplesLike(Protocol):
    """A pipeline that offers example questions made from its KG (the web page shows them)."""

    def examples(self) -> Sequence[ExampleLike]: ...


class FeedbackLike(Protocol):
    """What a feedback settled: the decision, its arm and whether the answer was right."""

    @property
    def decision_id(self) -> str: ...
    @property
    def arm(self) -> str: ...
    @property
    def correct(self) -> bool: ...


class ArmStatusLike(Protocol):
    """One arm's live figures: ``selections`` (answers routed to it), ``graded`` (of those, with
    feedback), ``correct``; ``covered``/``coverage_n``: feedback whose gold was in the calibrated set,
    ``coverage_lower``/``coverage_upper`` its Clopper–Pearson bounds and ``drift`` whether the upper one is
    below 1 − α; ``calibration_questions``: the held-out questions the router now sends the arm (what its
    next sets are calibrated on; ``None`` without a calibration), ``open_certified``: whether its open
    ones certify UAG's λ (``None`` without UAG's open sets)."""

    @property
    def name(self) -> str: ...
    @property
    def selections(self) -> int: ...
    @property
    def graded(self) -> int: ...
    @property
    def correct(self) -> int: ...
    @property
    def covered(self) -> int: ...
    @property
    def coverage_n(self) -> int: ...
    @property
    def coverage_lower(self) -> float: ...
    @property
    def coverage_upper(self) -> float: ...
    @property
    def drift(self) -> bool: ...
    @property
    def calibration_questions(self) -> int | None: ...
    @property
    def open_certified(self) -> bool | None: ...
    @property
    def abstention(self) -> ArmAbstentionLike | None: ...


class PendingLike(Protocol):
    """A decision still waiting for feedback."""

    @property
    def decision_id(self) -> str: ...
    @property
    def arm(self) -> str: ...
    @property
    def question(self) -> str: ...


class StatusLike(Protocol):
    """Spend against ``budget`` (``None``: no router budget), per-arm figures, pending decisions, the
    answer sets' ``alpha`` (``None``: no calibration) and the arm the fit pinned the router to (``None``:
    it routes)."""

    @property
    def budget(self) -> float | None: ...
    @property
    def spent(self) -> float: ...
    @property
    def arms(self) -> Sequence[ArmStatusLike]: ...
    @property
    def pending(self) -> Sequence[PendingLike]: ...
    @property
    def alpha(self) -> float | None: ...
    @property
    def pinned(self) -> str | None: ...


class PipelineLike(Protocol):
    """The product object as the server sees it (``kgwise.app.Pipeline``): its methods are called from
    several threads at once (the pipeline locks what it shares, and lets model calls and fsyncs of
    concurrent requests overlap)."""

    @property
    def arm_names(self) -> Sequence[str]: ...
    @property
    def cost_unit(self) -> str: ...

    def answer(self, text: str, choices: Sequence[str] | None = None, arm: str | None = None,
               settings: GenerationSettings | None = None, on_text: Callable[[str], None] | None = None
               ) -> ResultLike: ...

    def feedback(self, decision_id: str, correct: bool | None = None, gold: str | None = None
                 ) -> FeedbackLike: ...

    def status(self) -> StatusLike: ...

    def spend(self) -> float:
        """The budget spent so far: ``status().spent`` without the rest of a status (the server samples
        it for the spend history after answers, at most twice a second)."""
        ...

    def state_health(self) -> Mapping[str, object]:
        """Where the pipeline's state lives and whether it answers (``/health``)."""
        ...
