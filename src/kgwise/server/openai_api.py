"""An OpenAI-compatible API over one or more pipelines (``openai_api(hub)``, an ``APIRouter``).

- ``GET /v1/models``: each pipeline by name (the router picks the arm) and each arm as
  ``<pipeline>/<arm>`` (that arm answers; with the default pipeline name, ``kgwise/<arm>``);
- ``POST /v1/chat/completions``: the last user message is the question; its choices come from the
  request's ``kgwise.choices``, a fenced JSON block ``{"choices": [...]}`` or ``A) …`` lines (see
  :func:`split_choices`); ``max_tokens`` (``max_completion_tokens``), ``temperature``, ``top_p``, ``stop``,
  ``seed`` and ``n`` go to the answering arm as :class:`~kgwise.types.GenerationSettings` (one it cannot
  apply is a 400 naming it); ``stream: true`` answers as server-sent events, a generated answer's text
  as the model generates it (:func:`_live_sse`), any other answer in one chunk once made; the message content
  is the answer (``"B) text"`` for a choice; with ``[answer_sets]
  abstain``, ``"not sure: one of A) …; C) …"``, the set); kgwise's extras are in the ``kgwise`` field
  (:class:`~kgwise.server.schemas.KgwiseExtra`);
- ``POST /v1/completions``: the same with ``prompt`` as the question;
- ``POST /v1/feedback``: ``{decision_id, correct | gold}`` teaches the router;
- ``GET /v1/examples``: a few example questions made from a pipeline's knowledge graph;
- ``GET /v1/status``: spend against budget (with its history since this server started), per-arm
  selections, accuracy and live coverage against 1 − α, pending decisions.

Every answer carries the headers ``x-kgwise-cost`` and ``x-kgwise-cost-unit`` (and ``x-kgwise-cost-usd``
when the unit is US dollars), ``x-kgwise-arm`` and ``x-kgwise-decision-id``. Errors use OpenAI's shape
``{"error": {"message", "type", "param", "code"}}``: 400 for a bad request (validation, choices, ``n`` >
1, a question longer than :data:`~kgwise.server.limits.MAX_QUESTION` characters or than the model's
context), 404 for an unknown model or decision, 429 when the budget affords no arm or the queue is full
(with ``Retry-After``), 502 when a model service failed (also when it reports usage that cannot be
priced), 503 with ``Retry-After`` while the pipeline's state cannot be written (nothing is acknowledged
then) or a request waited past the timeout.

Backpressure: answering calls run on the pipeline gate's threads (:class:`~kgwise.server.backpressure.
ModelGate`: a bounded queue, 429 beyond it), never on the event loop, so ``/health``, ``/v1/models`` and
``/v1/status`` answer while the pipeline is busy; a queued request whose client has gone is dropped
before its model call starts, so it is neither run nor charged; a streamed generation whose client has
gone stops at its next token, and its decision is called off (neither recorded nor charged).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import threading
import time
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, TypeVar

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, StreamingResponse
from fastapi.routing import APIRoute
from pydantic import BaseModel

from kgwise.app import BudgetExceededError, PipelineResult, UnknownDecisionError
from kgwise.errors import (
    ConfigError,
    InputTooLongError,
    KgwiseError,
    ServiceError,
    SettingError,
    StateUnavailableError,
)
from kgwise.server.backpressure import ModelGate
from kgwise.server.contract import ExamplesLike, PipelineLike
from kgwise.server.explain import (
    EXPLAIN_SUFFIX,
    FeedbackCommand,
    answer_head,
    feedback_command,
    render_explained,
    split_explain,
)
from kgwise.server.limits import MAX_QUESTION, field_error
from kgwise.server.schemas import (
    AbstentionOut,
    AnswerSetOut,
    ChatChoice,
    ChatChunk,
    ChatChunkChoice,
    ChatCompletion,
    ChatCompletionRequest,
    ChatMessageOut,
    CompletionChoice,
    CompletionRequest,
    Delta,
    ErrorResponse,
    EvidenceOut,
    ExampleOut,
    ExamplesResponse,
    FeedbackRequest,
    FeedbackResponse,
    Finish,
    Generating,
    KgwiseExtra,
    LabelledChoice,
    ModelCard,
    ModelList,
    OpenAIUsage,
    PipelineStatusOut,
    SpendPoint,
    StatusResponse,
    StreamOptions,
    TextCompletion,
    UsageOut,
)
from kgwise.types import CHOICE_LABELS, GenerationSettings

__all__ = ["OpenAIError", "PipelineHub", "gate_refusal_json", "openai_api", "split_choices"]

T = TypeVar("T")


class OpenAIError(Exception):
    """An error answered in OpenAI's shape with HTTP ``status``."""

    def __init__(self, status: int, message: str, type_: str = "invalid_request_error",
                 param: str | None = None, code: str | None = None,
                 headers: Mapping[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = dict(headers or {})
        self.body = {"error": {"message": message, "type": type_, "param": param, "code": code}}

    def response(self) -> JSONResponse:
        return JSONResponse(status_code=self.status, content=self.body, headers=self.headers)


_GATE_CODES = {429: ("rate_limit_exceeded", "queue_full"), 499: ("invalid_request_error", "client_closed"),
               503: ("server_error", "timeout")}


def _gate_error(exc: HTTPException) -> OpenAIError:
    """A refusal of the pipeline gate (queue full, timeout, client gone) in OpenAI's shape."""
    type_, code = _GATE_CODES.get(exc.status_code, ("server_error", None))
    return OpenAIError(exc.status_code, str(exc.detail), type_, code=code, headers=exc.headers)


def gate_refusal_json(exc: HTTPException) -> bytes:
    """The body of a gate's refusal in OpenAI's shape (what the routes answer; for
    :class:`~kgwise.server.backpressure.QueueShed`)."""
    return json.dumps(_gate_error(exc).body).encode()


_CANNOT: dict[str, str] = {
    "tools": "kgwise answers from its arms and calls no tools",
    "tool_choice": "kgwise answers from its arms and calls no tools",
    "functions": "kgwise answers from its arms and calls no functions",
    "function_call": "kgwise answers from its arms and calls no functions",
    "logprobs": "the choices' probabilities are in the kgwise field, not as token log-probabilities",
    "top_logprobs": "the choices' probabilities are in the kgwise field, not as token log-probabilities",
    "logit_bias": "arms are scored or decoded by their own rule; token biases cannot be applied",
    "audio": "kgwise answers in text",
    "prediction": "kgwise has no predicted-output decoding",
    "best_of": "kgwise gives one answer per question",
    "echo": "the completion is the answer, without the prompt",
    "suffix": "kgwise does not insert text",
    "reasoning_effort": "kgwise's arms answer without a reasoning budget",
    "web_search_options": "kgwise answers from its KG and arms, not from a web search",
}
"""OpenAI request parameters kgwise cannot honour → why; given (and not at their no-op value) they are a 400
naming the parameter, never silently dropped."""

_NEUTRAL: dict[str, Any] = {"presence_penalty": 0, "frequency_penalty": 0, "logprobs": False,
                            "response_format": {"type": "text"}, "modalities": ["text"],
                            "parallel_tool_calls": True}
"""Parameters that are accepted at these values (what an answer already does) and refused otherwise."""


def refuse_unsupported(extra: Mapping[str, Any] | None) -> None:
    """A 400 naming the first OpenAI parameter in ``extra`` (a request's fields beyond kgwise's schema) that
    kgwise cannot honour; fields no OpenAI parameter names are ignored, as before."""
    for name, value in (extra or {}).items():
        if value is None or _NEUTRAL.get(name, object()) == value:
            continue
        if name in _CANNOT or name in _NEUTRAL:
            why = _CANNOT.get(name, f"only {json.dumps(_NEUTRAL.get(name))} is supported")
            raise OpenAIError(400, f"{name}: not supported: {why}", param=name, code="unsupported_parameter")


def settings_of(req: Generating, max_tokens: int | None = None) -> GenerationSettings:
    """The request's generation parameters as settings (``max_tokens``: a newer name's value, which wins
    over ``req.max_tokens``); a value out of range, or ``n`` other than 1, is a 400 naming it."""
    stop = (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())
    try:
        settings = GenerationSettings(max_tokens or req.max_tokens, req.temperature, req.top_p, stop,
                                      req.seed, req.n)
    except ConfigError as exc:
        param = str(exc).split(":", 1)[0]
        raise OpenAIError(400, str(exc), param=param, code="invalid_value") from None
    if req.n != 1:
        raise OpenAIError(400, "n: kgwise gives one answer per question (n must be 1)", param="n")
    return settings


def _validation_error(exc: RequestValidationError) -> OpenAIError:
    """A 400 naming the first bad field (never echoing the input, which may not even encode)."""
    errors = exc.errors()
    where, msg = field_error(errors[0] if errors else {})
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return OpenAIError(400, f"{where}: {msg}{more}", param=None if where == "body" else where,
                       code="invalid_value")


class _OpenAIRoute(APIRoute):
    """A route whose validation and pipeline errors are answered in OpenAI's error shape (local to this
    router, so the rest of the application keeps FastAPI's own)."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except RequestValidationError as exc:
                return _validation_error(exc).response()
            except OpenAIError as exc:
                return exc.response()
            except HTTPException as exc:
                return _gate_error(exc).response()

        return handle


def _text(value: str, param: str) -> str:
    """``value``, or a 400 when it holds a lone surrogate (not encodable text)."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise OpenAIError(400, f"{param}: not valid Unicode text (a lone surrogate)", param=param,
                          code="invalid_value") from None
    return value


_FENCE = re.compile(r"```[ \t]*(json)?[ \t]*\n?(.*?)```", re.S | re.I)
_LINE = re.compile(r"^\s*\(?([A-Z])\s*[).:]\s+(\S.*?)\s*$")
_INLINE = re.compile(r"(?:(?<=\s)|^)\(?([A-Z])\)\s+")


def split_choices(content: str, param: str = "messages[-1].content") -> tuple[str, list[str] | None]:
    """``(question, choices)`` of a message: a fenced JSON block ``{"choices": [...]}`` (removed from the
    text); else trailing lines ``A) …``, ``B) …`` (also ``A.``, ``A:``, ``(A)``) labelled A, B, … in
    order; else ``A) … B) …`` on the last line; else no choices (an open question). A ``json`` block
    that does not parse, or whose ``choices`` is not a list of strings, is a 400 naming ``param``."""
    for m in _FENCE.finditer(content):
        tagged, body = m.group(1) is not None, m.group(2).strip()
        try:
            data = json.loads(body)
        except ValueError as exc:
            if tagged:
                raise OpenAIError(400, f"{param}: the json block does not parse: {exc}", param=param,
                                  code="invalid_choices") from None
            continue
        if not (isinstance(data, dict) and "choices" in data):
            continue
        choices = data["choices"]
        if not (isinstance(choices, list) and all(isinstance(c, str) for c in choices)):
            raise OpenAIError(400, f"{param}: the json block's choices must be a list of strings",
                              param=param, code="invalid_choices")
        return (content[:m.start()] + content[m.end():]).strip(), choices
    lines = content.rstrip().splitlines()
    run: list[tuple[str, str]] = []
    i = len(lines) - 1
    while i >= 0 and (line := _LINE.match(lines[i])):
        run.insert(0, (line.group(1), line.group(2)))
        i -= 1
        if line.group(1) == "A":
            break
    if len(run) >= 2 and [label for label, _ in run] == list(CHOICE_LABELS[:len(run)]):
        return "\n".join(lines[:i + 1]).strip(), [text for _, text in run]
    if lines:
        last = lines[-1]
        marks = list(_INLINE.finditer(last))
        start = next((k for k, m in enumerate(marks) if m.group(1) == "A"), None)
        if start is not None:
            seq = [marks[start]]
            for m in marks[start + 1:]:
                if m.group(1) == CHOICE_LABELS[len(seq)]:
                    seq.append(m)
            if len(seq) >= 2:
                texts = [last[a.end():(b.start() if b is not None else len(last))].strip()
                         for a, b in zip(seq, [*seq[1:], None], strict=True)]
                head = "\n".join([*lines[:-1], last[:seq[0].start()]]).strip()
                return head, texts
    return content.strip(), None


@dataclass
class _Served:
    name: str
    pipeline: PipelineLike
    lock: threading.Lock
    history: deque[tuple[float, float]]
    last_sample: float = 0.0


class PipelineHub:
    """The pipelines a server answers with, by name (a model id; no ``/``), called by concurrent
    requests at once, with a spend history sampled by the server (bounded to the last ``history_points``).

    ``unknown_decision`` and ``budget_exhausted``: the exception classes the pipelines raise for feedback
    on a decision that is not pending (answered 404) and for a question no arm is affordable for (429);
    ``read_only``: for a state that cannot be written (503 with ``Retry-After``: the exception's
    ``retry_after_s``); an ``InputTooLongError`` is a 400, any other ``KgwiseError`` a 400, a
    ``ServiceError`` a 502."""

    def __init__(self, pipelines: Mapping[str, PipelineLike], history_points: int = 5000,
                 unknown_decision: tuple[type[Exception], ...] = (UnknownDecisionError,),
                 budget_exhausted: tuple[type[Exception], ...] = (BudgetExceededError,),
                 read_only: tuple[type[Exception], ...] = ()) -> None:
        self.unknown_decision = unknown_decision
        self.budget_exhausted = budget_exhausted
        self.read_only = read_only
        if not pipelines:
            raise KgwiseError("no pipeline to serve")
        for name in pipelines:
            if not name or "/" in name or name != name.strip():
                raise KgwiseError(f"pipeline name {name!r}: must be non-empty, without '/' or edge spaces")
        self.served = {name: _Served(name, p, threading.Lock(), deque(maxlen=history_points))
                       for name, p in pipelines.items()}
        self.created = int(time.time())

    def resolve(self, model: str) -> tuple[_Served, str | None]:
        """The pipeline and forced arm (or None) that ``model`` names; a 404 for anything else."""
        name, _, arm = split_explain(model)[0].partition("/")
        served = self.served.get(name)
        if served is None or (arm and arm not in served.pipeline.arm_names) or model.endswith("/"):
            raise OpenAIError(404, f"The model `{model}` does not exist; GET /v1/models lists them",
                              param="model", code="model_not_found")
        return served, arm or None

    def models(self) -> list[str]:
        return [m for s in self.served.values() for m in (s.name, s.name + EXPLAIN_SUFFIX,
                                                          *(f"{s.name}/{a}" for a in s.pipeline.arm_names))]

    def _sample(self, served: _Served, spent: float | None = None, force: bool = False) -> None:
        """Add the current spend to the history (called with ``served.lock`` held)."""
        now = time.time()
        if not force and now - served.last_sample < 0.5:
            return
        served.history.append((now, float(served.pipeline.spend() if spent is None else spent)))
        served.last_sample = now

    def call(self, served: _Served, fn: Callable[[PipelineLike], T]) -> T:
        """``fn(pipeline)``, its errors mapped to OpenAI errors; concurrent calls run at once (the
        pipeline is thread-safe), only the spend history is sampled under ``served.lock``."""
        try:
            out = fn(served.pipeline)
        except self.unknown_decision as exc:
            raise OpenAIError(404, str(exc), param="decision_id", code="decision_not_found") from None
        except self.budget_exhausted as exc:
            raise OpenAIError(429, str(exc), "insufficient_quota", code="budget_exhausted") from None
        except self.read_only as exc:
            wait = str(max(1, int(getattr(exc, "retry_after_s", 5))))
            raise OpenAIError(503, str(exc), "server_error", code="state_read_only",
                              headers={"Retry-After": wait}) from None
        except StateUnavailableError as exc:
            raise _state_unavailable(exc) from None
        except InputTooLongError as exc:
            raise OpenAIError(400, str(exc), param="messages", code="context_length_exceeded") from None
        except SettingError as exc:
            raise OpenAIError(400, str(exc), param=exc.param, code="unsupported_parameter") from None
        except ServiceError as exc:
            raise OpenAIError(502, f"a model service failed: {exc}", "api_error",
                              code="upstream_error") from None
        except KgwiseError as exc:
            raise OpenAIError(400, str(exc), code="invalid_request") from None
        with served.lock:
            self._sample(served)
        return out

    def state_health(self) -> dict[str, dict[str, Any]]:
        """Each pipeline's state: where it lives and whether it answers (a database's round trip)."""
        return {name: dict(s.pipeline.state_health()) for name, s in self.served.items()}

    def status(self, served: _Served) -> PipelineStatusOut:
        """The pipeline's status with its name and the spend history this server sampled."""
        with served.lock:
            try:
                st = served.pipeline.status()
            except StateUnavailableError as exc:
                raise _state_unavailable(exc) from None
            self._sample(served, st.spent, force=True)
            history = [SpendPoint(t=t, spent=s) for t, s in served.history]
        return st.model_copy(update={"name": served.name, "history": history})


def _state_unavailable(exc: StateUnavailableError) -> OpenAIError:
    """503 with ``Retry-After``: the pipeline's state database is down or slow (nothing acknowledged)."""
    return OpenAIError(503, str(exc), "api_error", code="state_unavailable",
                       headers={"Retry-After": str(math.ceil(exc.retry_after_s))})


def _extra(served: _Served, question: str, choices: list[str] | None, r: PipelineResult, forced: bool
           ) -> KgwiseExtra:
    """The ``kgwise`` field of a completion: the pipeline's result, with what the request said."""
    unit = served.pipeline.cost_unit
    u = r.usage
    s = r.answer_set
    answer_set = None if s is None else AnswerSetOut(  # labels for a choice, or "not sure" among them
        members=list(s.labels if r.label is not None or r.abstained else s.texts), alpha=s.alpha,
        guaranteed=s.guarantee, guarantee=s.statement)
    labelled = None if choices is None else [LabelledChoice(label=CHOICE_LABELS[i], text=c)
                                             for i, c in enumerate(choices)]
    ab = r.abstention
    return KgwiseExtra(
        pipeline=served.name, decision_id=r.decision, question=question, choices=labelled,
        choice=r.label, answer=r.answer, arm=r.arm, forced=forced,
        scores={a.arm: float(a.score) for a in r.scores}, cost=r.cost, cost_unit=unit,
        usage=UsageOut(input_tokens=u.input_tokens, output_tokens=u.output_tokens, calls=u.calls,
                       cached_calls=u.cached_calls, latency_s=u.latency_s, cost=r.cost, cost_unit=unit),
        answer_set=answer_set, guaranteed=s is not None and s.guarantee,
        evidence=EvidenceOut.model_validate(r.evidence, from_attributes=True),
        abstention=None if ab is None else AbstentionOut(abstained=ab.abstained, promise=ab.promise,
                                                         confidence=ab.confidence, threshold=ab.threshold))


def _json(body: BaseModel, headers: dict[str, str]) -> Response:
    """``body`` as compact UTF-8 JSON, serialised by pydantic in one pass (what ``JSONResponse`` of
    ``model_dump(mode="json")`` sends, without building the dict and encoding it again)."""
    return Response(body.model_dump_json(), media_type="application/json", headers=headers)


def _headers(extra: KgwiseExtra) -> dict[str, str]:
    h = {"x-kgwise-cost": repr(extra.cost), "x-kgwise-cost-unit": extra.cost_unit,
         "x-kgwise-arm": extra.arm, "x-kgwise-decision-id": extra.decision_id}
    if extra.cost_unit == "usd":
        h["x-kgwise-cost-usd"] = repr(extra.cost)
    return {k: v.encode("ascii", "backslashreplace").decode("ascii") for k, v in h.items()}


def _content(extra: KgwiseExtra) -> str:
    """The message: the answer; when abstaining, "not sure" and the set the answer lies in."""
    ab, s = extra.abstention, extra.answer_set
    if ab is not None and ab.abstained:
        if s is None:
            return extra.answer
        text = {c.label: f"{c.label}) {c.text}" for c in extra.choices or ()}
        return f"{extra.answer}: one of {'; '.join(text.get(m, m) for m in s.members)}"
    return answer_head(extra)


_SSE_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}
"""A server-sent event stream's headers: not cached, not buffered by a proxy."""


def _sse(events: Sequence[str]) -> StreamingResponse:
    async def gen() -> AsyncIterator[str]:
        for e in events:
            yield f"data: {e}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(gen(), media_type="text/event-stream",
                             headers=_SSE_HEADERS)


class _ClientGoneError(Exception):
    """Raised into a streamed generation whose client has gone: it stops the generation, and the pipeline
    calls the decision off (nothing charged or recorded)."""


class _Stream:
    """A generated answer in progress: the pieces of text the answering thread hands over (``on_text``),
    read on the event loop in order (:meth:`next`), and the task making the answer."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue[str] = asyncio.Queue()
        self.gone = threading.Event()
        self.task: asyncio.Future[tuple[KgwiseExtra, Finish]] | None = None
        self.first: str | None = None

    def on_text(self, piece: str) -> None:
        """Called on the answering thread with each piece (empty ones too, so that it can stop a
        generation whose client has gone: it raises then)."""
        if self.gone.is_set():
            raise _ClientGoneError("the client closed the connection: the generation stops")
        if piece:
            self.loop.call_soon_threadsafe(self.queue.put_nowait, piece)

    async def next(self) -> str | None:
        """The next piece, or None once the answer is made and every piece read (the answering thread
        hands its pieces over before its result, so none comes after it)."""
        assert self.task is not None
        if not self.queue.empty():
            return self.queue.get_nowait()
        if self.task.done():
            return None
        getter = asyncio.ensure_future(self.queue.get())
        waits: set[asyncio.Future[Any]] = {self.task, getter}
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not getter.done():
                getter.cancel()
        if getter.done() and not getter.cancelled():
            return getter.result()
        return self.queue.get_nowait() if not self.queue.empty() else None

    def abandon(self) -> None:
        """The client will not read the rest: stop the generation at its next piece."""
        self.gone.set()
        if self.task is not None and not self.task.done():
            self.task.cancel()


def _live_sse(stream: _Stream, opening: str | None, piece: Callable[[str], str],
              ending: Callable[[KgwiseExtra, Finish], list[str]]) -> StreamingResponse:
    """Server-sent events of a generated answer: ``opening``, each piece of text as it comes, then the
    ``ending`` events of the answer once it is made (the ``kgwise`` extra, usage). An error after the first
    piece is sent as an ``{"error": …}`` event (the status line has gone out); a client that leaves stops the
    generation (:meth:`_Stream.abandon`)."""
    async def gen() -> AsyncIterator[str]:
        try:
            if opening is not None:
                yield f"data: {opening}\n\n"
            text = stream.first
            while text is not None:
                yield f"data: {piece(text)}\n\n"
                text = await stream.next()
            assert stream.task is not None
            try:
                extra, finish = stream.task.result()
            except OpenAIError as exc:
                yield f"data: {json.dumps(exc.body)}\n\n"
            except HTTPException as exc:
                yield f"data: {json.dumps(_gate_error(exc).body)}\n\n"
            else:
                for event in ending(extra, finish):
                    yield f"data: {event}\n\n"
            yield "data: [DONE]\n\n"
        finally:
            stream.abandon()

    return StreamingResponse(gen(), media_type="text/event-stream",
                             headers=_SSE_HEADERS)


def _errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI entries for the error statuses a route answers (in OpenAI's shape); declaring ``default``
    keeps FastAPI from listing the 422 these routes never send (validation errors are 400 here)."""
    text = {400: "a bad request: a field, the choices, n > 1", 404: "unknown model or decision",
            429: "the budget affords no arm, or the queue is full (Retry-After)",
            502: "a model service failed", 503: "the state cannot be written now, the state database is down "
            "or slow, or the request timed out (Retry-After); nothing was acknowledged"}
    out: dict[int | str, dict[str, Any]] = {c: {"model": ErrorResponse, "description": text[c]}
                                            for c in codes}
    out["default"] = {"model": ErrorResponse, "description": "any other error, in OpenAI's shape"}
    return out


def _chunk_json(chunk: ChatChunk | TextCompletion) -> str:
    """A streamed chunk as JSON: OpenAI's fields without nulls, kgwise's extras whole (a null
    ``answer_set`` or ``choice`` says something, as in the non-streamed body)."""
    body = chunk.model_dump(mode="json", exclude_none=True)
    if chunk.kgwise is not None:
        body["kgwise"] = chunk.kgwise.model_dump(mode="json")
    return json.dumps(body, ensure_ascii=False)


def openai_api(hub: PipelineHub, gate: ModelGate | None = None) -> APIRouter:
    """The OpenAI-compatible routes (and ``/v1/feedback``, ``/v1/status``) over ``hub``; answers run
    through ``gate`` (default: 4 workers, 8 waiting)."""
    api = APIRouter(route_class=_OpenAIRoute)
    gate = gate or ModelGate("pipeline", 4, 8)
    answering = _errors(400, 404, 429, 502, 503)
    openai_tag: list[str | Enum] = ["OpenAI-compatible"]
    kgwise_tag: list[str | Enum] = ["kgwise"]

    def question_of(text: str, given: list[str] | None, param: str) -> tuple[str, list[str] | None]:
        text = _text(text, param)
        if len(text) > MAX_QUESTION:
            raise OpenAIError(400, f"{param}: {len(text)} characters, more than the {MAX_QUESTION} a "
                              "question may hold", param=param, code="string_above_max_length")
        choices: list[str] | None
        if given is not None:
            question, choices = text.strip(), [_text(c, "kgwise.choices") for c in given]
        else:
            question, choices = split_choices(text, param)
        if not question:
            raise OpenAIError(400, f"{param}: the question text is empty", param=param, code="invalid_value")
        if choices is not None:
            where = "kgwise.choices" if given is not None else param
            choices = [c.strip() for c in choices]
            empty = next((i for i, c in enumerate(choices) if not c), None)
            if empty is not None:
                raise OpenAIError(400, f"{where}: choice {empty} is empty", param=where, code="invalid_value")
        return question, choices

    async def answer(request: Request, model: str, question: str, choices: list[str] | None,
                     settings: GenerationSettings, on_text: Callable[[str], None] | None = None
                     ) -> tuple[KgwiseExtra, Finish]:
        """The answer's extra and its finish reason (``length``: a generated answer stopped at its token
        limit; else ``stop``)."""
        served, arm = hub.resolve(model)
        # passed only when used, so a pipeline without arm forcing or settings still answers the rest
        kwargs: dict[str, Any] = {k: v for k, v in (("arm", arm), ("on_text", on_text)) if v is not None}
        if settings.given():
            kwargs["settings"] = settings
        result = await gate.run(request, hub.call, served, lambda p: p.answer(question, choices, **kwargs))
        finish: Finish = "length" if result.finish_reason == "length" else "stop"
        return _extra(served, question, choices, result, arm is not None), finish

    async def answer_or_stream(request: Request, model: str, question: str, choices: list[str] | None,
                               settings: GenerationSettings, live: bool
                               ) -> tuple[tuple[KgwiseExtra, Finish], None] | tuple[None, _Stream]:
        """``(answer, None)`` once the answer is made when it is not ``live`` (not streamed, or explained:
        rendered once made) or when nothing was generated; else ``(None, stream)`` once its first piece of
        text has come. Errors before that are raised as for any request."""
        if not live:
            return await answer(request, model, question, choices, settings), None
        stream = _Stream()
        task = asyncio.ensure_future(answer(request, model, question, choices, settings, stream.on_text))
        stream.task = task
        try:
            stream.first = await stream.next()
            if stream.first is None:
                return task.result(), None
        except BaseException:  # the client left or the answer failed: stop a generation still running
            stream.abandon()
            raise
        return None, stream

    def usage_of(extra: KgwiseExtra) -> OpenAIUsage:
        u = extra.usage
        return OpenAIUsage(prompt_tokens=u.input_tokens, completion_tokens=u.output_tokens,
                           total_tokens=u.input_tokens + u.output_tokens)

    async def chat_feedback(req: ChatCompletionRequest, command: FeedbackCommand) -> Response:
        """A chat message ``/feedback DECISION correct|wrong|gold=X``: the feedback, answered in words."""
        served, _ = hub.resolve(req.model)
        gold = None if command.gold is None else _text(command.gold, "messages[-1].content")
        out = await run_in_threadpool(
            hub.call, served, lambda p: p.feedback(command.decision, correct=command.correct, gold=gold))
        verdict = "right" if out.correct else "wrong"
        text = (f"Thanks: decision `{out.decision}` recorded as {verdict} for arm `{out.arm}`; the router "
                "has learnt it.")
        cid, created = f"chatcmpl-feedback-{out.decision}", int(time.time())
        if not req.stream:
            body = ChatCompletion(id=cid, created=created, model=req.model, kgwise=None,
                                  usage=OpenAIUsage(prompt_tokens=0, completion_tokens=0, total_tokens=0),
                                  choices=[ChatChoice(index=0, message=ChatMessageOut(content=text))])
            return JSONResponse(body.model_dump(mode="json"))
        events = [_chunk_json(ChatChunk(id=cid, created=created, model=req.model, choices=[
            ChatChunkChoice(delta=Delta(role="assistant", content=text), finish_reason=None)])),
                  _chunk_json(ChatChunk(id=cid, created=created, model=req.model, choices=[
                      ChatChunkChoice(delta=Delta(), finish_reason="stop")]))]
        return _sse(events)

    @api.get("/v1/models", response_model=ModelList, tags=openai_tag, responses=_errors())
    async def models() -> ModelList:  # on the event loop: no thread to wait for
        """Each pipeline (the router picks the arm) and each of its arms as ``<pipeline>/<arm>``."""
        return ModelList(data=[ModelCard(id=m, created=hub.created) for m in hub.models()])

    @api.get("/v1/models/{model:path}", response_model=ModelCard, tags=openai_tag, responses=_errors(404))
    def model(model: str) -> ModelCard:
        """One model by id (404 in OpenAI's shape when unknown)."""
        hub.resolve(model)
        return ModelCard(id=model, created=hub.created)

    @api.post("/v1/chat/completions", response_model=ChatCompletion, tags=openai_tag,
              responses=answering | {200: {"content": {"text/event-stream": {}},
                               "description": "a chat.completion, or with stream: true server-sent "
                                              "chat.completion.chunk events ending in data: [DONE]"}})
    async def chat_completions(req: ChatCompletionRequest, request: Request) -> Response:
        """Answer the last user message with the pipeline (or the arm ``model`` names)."""
        refuse_unsupported(req.model_extra)
        settings = settings_of(req, req.max_completion_tokens)
        last = next((i for i in range(len(req.messages) - 1, -1, -1) if req.messages[i].role == "user"),
                    None)
        if last is None:
            raise OpenAIError(400, "messages: no user message to answer", param="messages")
        content = req.messages[last].content
        param = f"messages[{last}].content"
        if isinstance(content, list):
            if any(p.type != "text" or p.text is None for p in content):
                raise OpenAIError(400, f"{param}: only text parts are supported", param=param)
            content = "\n".join(p.text or "" for p in content)
        command = feedback_command(content or "")
        if command is not None:
            return await chat_feedback(req, command)
        question, choices = question_of(content or "", req.kgwise.choices if req.kgwise else None, param)
        explain = split_explain(req.model)[1] or bool(req.kgwise and req.kgwise.explain)
        usage_last = (req.stream_options or StreamOptions()).include_usage
        created = int(time.time())

        def chunk(cid: str, delta: Delta, finish: Finish | None = None, extra_: KgwiseExtra | None = None
                  ) -> str:
            return _chunk_json(ChatChunk(id=cid, created=created, model=req.model, kgwise=extra_, choices=[
                ChatChunkChoice(delta=delta, finish_reason=finish)]))

        def ending(cid: str, extra: KgwiseExtra, finish: Finish) -> list[str]:
            out = [chunk(cid, Delta(), finish, extra)]
            if usage_last:
                out.append(ChatChunk(id=cid, created=created, model=req.model, choices=[],
                                     usage=usage_of(extra)).model_dump_json(exclude_none=True))
            return out

        whole, stream = await answer_or_stream(request, req.model, question, choices, settings,
                                               req.stream and not explain)
        if stream is not None:
            sid = f"chatcmpl-{uuid.uuid4().hex}"  # the decision is made after the stream has begun
            return _live_sse(stream, chunk(sid, Delta(role="assistant", content="")),
                             lambda piece: chunk(sid, Delta(content=piece)),
                             lambda extra, finish: ending(sid, extra, finish))
        assert whole is not None
        extra, finish = whole
        cid = f"chatcmpl-{extra.decision_id}"
        text = render_explained(extra) if explain else _content(extra)
        if not req.stream:
            message = ChatMessageOut(content=text)
            body = ChatCompletion(id=cid, created=created, model=req.model, usage=usage_of(extra),
                                  kgwise=extra, choices=[ChatChoice(index=0, message=message,
                                                                    finish_reason=finish)])
            return _json(body, _headers(extra))
        events = [chunk(cid, Delta(role="assistant", content="")), chunk(cid, Delta(content=text)),
                  *ending(cid, extra, finish)]
        response = _sse(events)
        response.headers.update(_headers(extra))
        return response

    @api.post("/v1/completions", response_model=TextCompletion, tags=openai_tag,
              responses=answering | {200: {"content": {"text/event-stream": {}},
                               "description": "a text_completion, or with stream: true server-sent events"}})
    async def completions(req: CompletionRequest, request: Request) -> Response:
        """Answer ``prompt`` (one string, or a list of one) like a chat message."""
        refuse_unsupported(req.model_extra)
        settings = settings_of(req)
        prompt = req.prompt
        if isinstance(prompt, list):
            if len(prompt) != 1:
                raise OpenAIError(400, "prompt: give one prompt per request", param="prompt")
            prompt = prompt[0]
        question, choices = question_of(prompt, req.kgwise.choices if req.kgwise else None, "prompt")
        explain = split_explain(req.model)[1] or bool(req.kgwise and req.kgwise.explain)
        usage_last = (req.stream_options or StreamOptions()).include_usage
        created = int(time.time())

        def piece_of(cid: str, text: str) -> str:
            return _chunk_json(TextCompletion(id=cid, created=created, model=req.model,
                                              choices=[CompletionChoice(text=text, finish_reason=None)]))

        def ending(cid: str, extra: KgwiseExtra, finish: Finish) -> list[str]:
            out = [TextCompletion(id=cid, created=created, model=req.model, kgwise=extra,
                                  choices=[CompletionChoice(text="", finish_reason=finish)])]
            if usage_last:
                out.append(TextCompletion(id=cid, created=created, model=req.model, choices=[],
                                          usage=usage_of(extra)))
            return [_chunk_json(e) for e in out]

        whole, stream = await answer_or_stream(request, req.model, question, choices, settings,
                                               req.stream and not explain)
        if stream is not None:
            sid = f"cmpl-{uuid.uuid4().hex}"
            return _live_sse(stream, None, lambda piece: piece_of(sid, piece),
                             lambda extra, finish: ending(sid, extra, finish))
        assert whole is not None
        extra, finish = whole
        cid = f"cmpl-{extra.decision_id}"
        text = render_explained(extra) if explain else _content(extra)
        if not req.stream:
            body = TextCompletion(id=cid, created=created, model=req.model, usage=usage_of(extra),
                                  kgwise=extra, choices=[CompletionChoice(text=text, finish_reason=finish)])
            return _json(body, _headers(extra))
        response = _sse([piece_of(cid, text), *ending(cid, extra, finish)])
        response.headers.update(_headers(extra))
        return response

    @api.post("/v1/feedback", response_model=FeedbackResponse, tags=kgwise_tag,
              responses=_errors(400, 404, 502, 503))
    async def feedback(req: FeedbackRequest) -> FeedbackResponse:
        """Whether a decision's answer was right (``correct``) or what the right answer was (``gold``)."""
        if (req.correct is None) == (req.gold is None):
            raise OpenAIError(400, "give exactly one of correct and gold", param="correct")
        if req.model is None and len(hub.served) > 1:
            raise OpenAIError(400, f"model: name the pipeline ({', '.join(hub.served)})", param="model")
        served, _ = hub.resolve(req.model or next(iter(hub.served)))
        decision = _text(req.decision_id, "decision_id")
        gold = None if req.gold is None else _text(req.gold, "gold")
        out = await run_in_threadpool(hub.call, served,  # no model work: not queued behind answers
                                      lambda p: p.feedback(decision, correct=req.correct, gold=gold))
        return FeedbackResponse(pipeline=served.name, decision_id=out.decision, arm=out.arm,
                                correct=out.correct)

    @api.get("/v1/examples", response_model=ExamplesResponse, tags=kgwise_tag, responses=_errors(404))
    async def examples(model: str | None = None) -> ExamplesResponse:
        """A few example questions made from the knowledge graph of the pipeline ``model`` names (default:
        the first); the web page offers them."""
        served, _ = hub.resolve(model or next(iter(hub.served)))
        p = served.pipeline
        found = await run_in_threadpool(p.examples) if isinstance(p, ExamplesLike) else ()
        return ExamplesResponse(pipeline=served.name, examples=[
            ExampleOut(question=e.question, choices=list(e.choices)) for e in found])

    @api.get("/v1/status", response_model=StatusResponse, tags=kgwise_tag, responses=_errors())
    async def status() -> StatusResponse:
        """Every pipeline's spend, per-arm figures and pending decisions (what the router page shows)."""
        outs = [await run_in_threadpool(hub.status, s) for s in hub.served.values()]
        return StatusResponse(pipelines=outs)

    return api
