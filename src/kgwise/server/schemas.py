"""Request and response models of the OpenAI-compatible API, its ``kgwise`` extra and the status page.

The OpenAI shapes follow the Chat Completions, Completions and Models references (only the fields kgwise
fills; OpenAI parameters kgwise cannot honour are refused by name in :mod:`kgwise.server.openai_api`, the
generation parameters (:class:`Generating`) go to the arm that answers). kgwise's own data rides in a
``kgwise`` field of each response, which the
official SDKs keep as an extra attribute (``completion.kgwise`` / ``completion.model_extra["kgwise"]``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from kgwise.app.abstain import ArmAbstention
    from kgwise.app.pipeline import ArmStatus
    from kgwise.app.state import CoverageCount

__all__ = [
    "AnswerSetOut", "ArmStatusOut", "ChatChoice", "ChatChunk", "ChatChunkChoice", "ChatCompletion",
    "ChatCompletionRequest", "ChatMessage", "CompletionChoice", "CompletionRequest", "ContentPart",
    "Delta", "ErrorBody", "ErrorResponse", "EvidenceOut", "ExampleOut", "ExamplesResponse", "FeedbackRequest",
    "FeedbackResponse",
    "Finish", "Generating", "KgwiseExtra", "KgwiseRequest", "LabelledChoice", "LinkOut", "ModelCard",
    "ModelList", "OpenAIUsage", "PathOut",
    "PendingOut", "PipelineStatusOut", "SpendPoint", "StatusResponse", "StreamOptions", "TextCompletion",
    "TripleOut", "UsageOut",
]

Finish = Literal["stop", "length"]
"""Why an answer's text ended: ``length`` when a generated answer reached its token limit."""

_MAX_TEXT = 100_000
"""Longest message or prompt accepted (characters); a bigger body is a 400 naming the field."""


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ContentPart(_Request):
    """One part of a message's content; only ``text`` parts carry a question."""

    type: str
    text: str | None = Field(default=None, max_length=_MAX_TEXT)


class ChatMessage(_Request):
    """A chat message; the last ``user`` message is the question."""

    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[ContentPart] | None = Field(default=None)


class StreamOptions(_Request):
    """``include_usage``: send a last chunk with the request's ``usage`` (and empty ``choices``)."""

    include_usage: bool = False


class KgwiseRequest(_Request):
    """kgwise's request extra (``extra_body={"kgwise": {...}}`` in the SDK): the answer ``choices`` as a
    list (then the message is the question as written, not searched for choices); ``explain``: the message
    content is the answer explained in Markdown (set, evidence, cost, decision id), as with the model
    alias ``<pipeline>:explain``."""

    choices: list[str] | None = Field(default=None, min_length=2, max_length=26)
    explain: bool = False


class Generating(_Request):
    """OpenAI's generation parameters, carried to the answering arm as a
    :class:`~kgwise.types.GenerationSettings` (docs/serving.md says which arm kinds apply which)."""

    max_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0.0, le=2.0)
    top_p: float | None = Field(default=None, gt=0.0, le=1.0)
    stop: str | list[str] | None = Field(default=None)
    seed: int | None = None
    n: int = Field(default=1, ge=1)


class ChatCompletionRequest(Generating):
    """``POST /v1/chat/completions``. ``model``: a pipeline (``kgwise``) or one of its arms
    (``kgwise/<arm>``, which forces the arm instead of asking the router). Choices: ``kgwise.choices``, or
    in the last user message either a fenced JSON block ```` ```json {"choices": ["…", "…"]} ``` ```` or
    trailing lines ``A) …``, ``B) …`` (also ``A. …``, ``(A) …``, ``A: …``), or ``A) … B) …`` on the
    last line; without any, the question is open."""

    model_config = ConfigDict(extra="allow")  # OpenAI parameters kgwise cannot honour are refused by name

    model: str = Field(min_length=1, max_length=200)
    messages: list[ChatMessage] = Field(min_length=1, max_length=256)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    """OpenAI's newer name of ``max_tokens``; when both are given, this one applies."""
    stream: bool = False
    stream_options: StreamOptions | None = None
    kgwise: KgwiseRequest | None = None


class CompletionRequest(Generating):
    """``POST /v1/completions``: ``prompt`` is the question (choices found as in chat)."""

    model_config = ConfigDict(extra="allow")  # OpenAI parameters kgwise cannot honour are refused by name

    model: str = Field(min_length=1, max_length=200)
    prompt: str | list[str] = Field(max_length=_MAX_TEXT)
    stream: bool = False
    stream_options: StreamOptions | None = None
    kgwise: KgwiseRequest | None = None


class ExampleOut(BaseModel):
    question: str
    choices: list[str]


class ExamplesResponse(BaseModel):
    """``GET /v1/examples``: example questions made from the pipeline's knowledge graph (none when the
    pipeline has no KG in memory)."""

    pipeline: str
    examples: list[ExampleOut]


class FeedbackRequest(BaseModel):
    """``POST /v1/feedback``: the outcome of a decision, as ``correct`` (true/false) or as the ``gold``
    answer (a choice label or text, or the open answer), exactly one of the two; ``model`` names the
    pipeline when the server has several."""

    model_config = ConfigDict(extra="forbid")

    decision_id: str = Field(min_length=1, max_length=200)
    correct: bool | None = None
    gold: str | None = Field(default=None, min_length=1, max_length=10_000)
    model: str | None = Field(default=None, max_length=200)


class OpenAIUsage(BaseModel):
    """Token counts of the model calls behind one answer (from the arms' own counts)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class LabelledChoice(BaseModel):
    label: str
    text: str


class TripleOut(BaseModel):
    head: str
    relation: str
    tail: str


class PathOut(BaseModel):
    """``nodes[0] -relations[0]-> nodes[1] …``; ``inverse[i]``: hop ``i`` runs against its stored edge."""

    nodes: list[str]
    relations: list[str]
    inverse: list[bool]


class LinkOut(BaseModel):
    """How a mention reached a KG concept: ``method`` (exact, alias, partial, fuzzy, …) and ``score``."""

    mention: str
    concept: str
    method: str
    score: float


class EvidenceOut(BaseModel):
    """The knowledge the answer used (:class:`kgwise.app.evidence.Evidence`)."""

    question_concepts: list[str]
    choice_concepts: list[list[str]]
    triples: list[TripleOut]
    paths: list[PathOut] = Field(description="paths from a question concept to a choice (or, for an open "
                                 "question, to a candidate), best first")
    text: str
    support: list[PathOut] = Field(default_factory=list, description="the paths the answer read that end "
                                   "at the chosen answer (empty before an answer is chosen)")
    links: list[LinkOut] = Field(default_factory=list, description="how each question and choice mention "
                                 "was linked, with its method and score (`POST /v1/evidence`)")


class AnswerSetOut(BaseModel):
    """The calibrated set at miscoverage ``alpha``; ``guarantee`` says what holds, in words."""

    members: list[str]
    alpha: float
    guaranteed: bool
    guarantee: str


class UsageOut(BaseModel):
    """The pipeline's own usage of one answer; ``cost`` in ``cost_unit``."""

    input_tokens: int
    output_tokens: int
    calls: int
    cached_calls: int
    latency_s: float
    cost: float
    cost_unit: str


class AbstentionOut(BaseModel):
    """With ``[answer_sets] abstain``: ``abstained`` (the answer is "not sure"; the set is what can be said),
    ``promise``: what an answer of this arm carries, or why it is not given; the answer's ``confidence``
    and the arm's certified ``threshold`` (null: none certified)."""

    abstained: bool
    promise: str
    confidence: float
    threshold: float | None


class KgwiseExtra(BaseModel):
    """kgwise's extras on every completion: who answered, why, with what knowledge, at what cost."""

    pipeline: str
    decision_id: str
    question: str
    choices: list[LabelledChoice] | None
    choice: str | None = Field(description="the chosen label; null for an open question")
    answer: str
    arm: str
    forced: bool = Field(description="true when the model named the arm (kgwise/<arm>)")
    scores: dict[str, float] = Field(description="the router's score of every arm")
    cost: float
    cost_unit: str
    usage: UsageOut
    answer_set: AnswerSetOut | None
    guaranteed: bool = Field(description="a calibrated set is attached and its guarantee holds")
    evidence: EvidenceOut | None
    abstention: AbstentionOut | None = None


class ChatMessageOut(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class ChatChoice(BaseModel):
    index: int
    message: ChatMessageOut
    finish_reason: Finish = "stop"
    logprobs: None = None


class ChatCompletion(BaseModel):
    """An OpenAI ``chat.completion`` plus the ``kgwise`` extra (null for a ``/feedback`` message's reply)."""

    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: OpenAIUsage
    system_fingerprint: str | None = None
    kgwise: KgwiseExtra | None


class Delta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChatChunkChoice(BaseModel):
    index: int = 0
    delta: Delta
    finish_reason: Finish | None = None
    logprobs: None = None


class ChatChunk(BaseModel):
    """One server-sent event of a streamed chat completion; the chunk with ``finish_reason`` carries the
    ``kgwise`` extra; with ``stream_options.include_usage`` a last chunk has empty ``choices`` and the
    ``usage``."""

    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChatChunkChoice]
    usage: OpenAIUsage | None = None
    kgwise: KgwiseExtra | None = None


class CompletionChoice(BaseModel):
    index: int = 0
    text: str
    finish_reason: Finish | None = "stop"
    logprobs: None = None


class TextCompletion(BaseModel):
    """An OpenAI ``text_completion`` plus the ``kgwise`` extra."""

    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: OpenAIUsage | None = None
    kgwise: KgwiseExtra | None = None


class ModelCard(BaseModel):
    """A servable model: a pipeline (router picks) or ``<pipeline>/<arm>`` (arm forced)."""

    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "kgwise"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class FeedbackResponse(BaseModel):
    """What the feedback settled."""

    object: Literal["kgwise.feedback"] = "kgwise.feedback"
    pipeline: str
    decision_id: str
    arm: str
    correct: bool


class ArmStatusOut(BaseModel):
    """One arm's live figures; ``accuracy`` = correct / graded and ``coverage`` = covered / coverage_n
    (null without data) with its Clopper–Pearson bounds at the pipeline's δ; ``drift``: the upper bound is
    below ``coverage_target`` = 1 − α (null without calibration), below target beyond noise;
    ``calibration_questions``: held-out dev questions the router now sends this arm, on which its next
    sets are calibrated (null without calibration); ``open_certified``: whether its held-out open
    questions certify UAG's λ (null without UAG's open sets)."""

    name: str
    selections: int
    graded: int
    correct: int
    accuracy: float | None
    covered: int
    coverage_n: int
    coverage: float | None
    coverage_lower: float
    coverage_upper: float
    drift: bool
    coverage_target: float | None
    calibration_questions: int | None
    open_certified: bool | None
    abstention: AbstentionStatusOut | None = None

    @classmethod
    def of(cls, arm: ArmStatus, count: CoverageCount, alpha: float | None,
           abstention: ArmAbstention | None = None) -> ArmStatusOut:
        """``arm`` of the pipeline's status with the feedback ``count`` behind it (``alpha``: the sets' α,
        None without calibration)."""
        c, routed = arm.coverage, arm.routed
        return cls(name=arm.name, selections=arm.pulls, graded=count.graded, correct=count.correct,
                   accuracy=count.correct / count.graded if count.graded else None, covered=c.covered,
                   coverage_n=c.n, coverage=c.rate, coverage_lower=c.lower, coverage_upper=c.upper,
                   drift=c.drift, coverage_target=None if alpha is None else 1.0 - alpha,
                   calibration_questions=None if routed is None else routed.questions,
                   open_certified=None if routed is None else routed.open_certified,
                   abstention=None if abstention is None else AbstentionStatusOut.model_validate(
                       abstention, from_attributes=True))


class AbstentionStatusOut(BaseModel):
    """With ``[answer_sets] abstain``, live: questions ``asked`` of the arm, those ``answered`` (not "not
    sure"), of those the ``graded`` (with feedback) and ``correct``; ``share_answered`` and
    ``accuracy_answered`` (null before any)."""

    asked: int
    answered: int
    graded: int
    correct: int
    share_answered: float | None
    accuracy_answered: float | None


class PendingOut(BaseModel):
    decision_id: str
    arm: str
    question: str


class SpendPoint(BaseModel):
    """The pipeline's spend at unix time ``t`` (seconds), sampled by this server."""

    t: float
    spent: float


class PipelineStatusOut(BaseModel):
    """One pipeline's status: ``budget`` null = no router budget; ``alpha`` null = no calibration;
    ``pending`` lists at most the 100 last of ``pending_total`` waiting decisions; ``history``: spend
    since this server started, sampled after answers and feedback (at most every 0.5 s) and on reads;
    ``pinned``: the arm ``kgwise fit`` pinned the router to (routing did not beat it), null when it routes."""

    name: str
    cost_unit: str
    budget: float | None
    spent: float
    alpha: float | None
    arms: list[ArmStatusOut]
    pending_total: int
    pending: list[PendingOut]
    history: list[SpendPoint]
    pinned: str | None = None


class StatusResponse(BaseModel):
    """``GET /v1/status``: every served pipeline."""

    object: Literal["kgwise.status"] = "kgwise.status"
    pipelines: list[PipelineStatusOut]


class ErrorBody(BaseModel):
    """OpenAI's error object."""

    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorResponse(BaseModel):
    """OpenAI's error envelope: ``{"error": {"message", "type", "param", "code"}}``."""

    error: ErrorBody
