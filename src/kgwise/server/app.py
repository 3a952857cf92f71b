"""``create_app``: the HTTP API over the configured pipelines (:class:`kgwise.app.Pipeline`).

Routes: ``GET /health``; the OpenAI-compatible API with ``/v1/feedback`` and ``/v1/status``
(:mod:`kgwise.server.openai_api`); ``/v1/route*`` for a pipeline's external arms
(:mod:`kgwise.server.routing`); the web page at ``/``; ``POST /v1/evidence``: a question's KG evidence
(:meth:`kgwise.app.Pipeline.evidence`: grounded concepts, P_sub's triples and paths; no LLM call),
serialised as it is returned. ``/health`` runs on the event loop and never waits for model work; answers
and evidence go through bounded queues (:mod:`kgwise.server.backpressure`).

Exposure (:mod:`kgwise.server.guard`): API keys (bearer), a body cap, accepted Host headers (against DNS
rebinding) and CORS (off unless origins are named); refused requests are 4xx naming the field
(:mod:`kgwise.server.limits`).
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Any, Protocol, runtime_checkable

from fastapi import APIRouter, FastAPI, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware

from kgwise.app.evidence import Evidence
from kgwise.errors import ConfigError
from kgwise.server.backpressure import ModelGate, QueueShed
from kgwise.server.contract import PipelineLike
from kgwise.server.docs import install_docs
from kgwise.server.guard import Guard
from kgwise.server.limits import Choice, QuestionText, install_handlers
from kgwise.server.openai_api import PipelineHub, gate_refusal_json, openai_api
from kgwise.server.routing import ExternalRouter, pick_pipeline, routing_api
from kgwise.server.schemas import EvidenceOut
from kgwise.server.web import install_web

__all__ = ["EvidenceRequest", "ServerSettings", "create_app"]


class ServerSettings(BaseModel):
    """How the pipelines are exposed: ``api_keys`` (none: no authentication; ``kgwise serve`` refuses a
    non-loopback host without them), ``allowed_hosts`` (Host headers accepted; ``*``: any),
    ``cors_origins`` (none: no CORS), ``max_body_bytes``; ``queue_limit`` requests may wait for a model
    or the KG (more get 429), answered by ``pipeline_workers`` at once; ``request_timeout_s`` per request;
    ``torch_threads`` for the question encoder."""

    model_config = ConfigDict(frozen=True)

    api_keys: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ("*",)
    cors_origins: tuple[str, ...] = ()
    max_body_bytes: int = Field(default=1_000_000, ge=1_000)
    queue_limit: int = Field(default=8, ge=0)
    pipeline_workers: int = Field(default=4, ge=1)
    request_timeout_s: float = Field(default=120.0, gt=0.0)
    torch_threads: int | None = Field(default=1, ge=1)


class EvidenceRequest(BaseModel):
    """A question (with its ``choices``, or none: open) whose KG evidence ``model``'s pipeline extracts
    (``model`` may be left out when the server has one pipeline)."""

    model_config = ConfigDict(extra="forbid")

    question: QuestionText
    choices: list[Choice] | None = Field(default=None, min_length=2, max_length=26)
    model: str | None = Field(default=None, min_length=1, max_length=200)


@runtime_checkable
class EvidenceSource(Protocol):
    """A served pipeline that extracts a question's evidence (:meth:`kgwise.app.Pipeline.evidence`)."""

    def evidence(self, text: str, choices: Sequence[str] | None = None) -> Evidence: ...


def create_app(settings: ServerSettings,
               pipelines: Mapping[str, PipelineLike] | PipelineHub | None = None) -> FastAPI:
    """The FastAPI application over ``pipelines`` (by name, or a :class:`PipelineHub` naming the pipelines'
    own error classes); ``ConfigError`` when there is none."""
    if not pipelines:
        raise ConfigError("nothing to serve: give a pipeline (--config)")
    hub = pipelines if isinstance(pipelines, PipelineHub) else PipelineHub(pipelines)
    if settings.torch_threads is not None:
        _torch_threads(settings.torch_threads)
    return _app(settings, hub)


def _app(settings: ServerSettings, hub: PipelineHub) -> FastAPI:
    """The application (its queues closed when it stops)."""
    gate = ModelGate("kg", 2, settings.queue_limit, settings.request_timeout_s)
    # the router's work is a millisecond under its own lock: 8 threads keep the pairs flowing (2 halved them)
    route_gate = ModelGate("router", 8, 64, settings.request_timeout_s)
    answer_gate = ModelGate("pipeline", settings.pipeline_workers, settings.queue_limit,
                            settings.request_timeout_s)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # what is loaded by now (graph, pipeline, the app) lives as long as the server: kept out of the
        # collector's full passes, which otherwise walk it all and stall every request in flight
        gc.collect()
        gc.freeze()
        yield
        for g in (gate, route_gate, answer_gate):
            g.close()

    app = FastAPI(title="kgwise", summary="Knowledge-graph-grounded question answering with LLMs",
                  lifespan=lifespan, docs_url=None, redoc_url=None)
    install_handlers(app)
    install_docs(app)  # offline /docs and /redoc (packaged assets)
    install_web(app)  # the page at /
    app.include_router(openai_api(hub, answer_gate))
    app.include_router(_evidence_api(hub, gate))
    routers = {n: s.pipeline for n, s in hub.served.items() if isinstance(s.pipeline, ExternalRouter)}
    if routers:
        app.include_router(routing_api(routers, route_gate))
    # inside the guard (keys and body cap first): a full queue refuses before the body is validated
    app.add_middleware(QueueShed, gates={"/v1/chat/completions": (answer_gate, gate_refusal_json),
                                         "/v1/completions": (answer_gate, gate_refusal_json),
                                         "/v1/evidence": (gate, _detail_json)})
    app.add_middleware(Guard, api_keys=settings.api_keys, max_body_bytes=settings.max_body_bytes)
    if settings.cors_origins:  # outside the guard: a browser's preflight carries no key
        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins),
                           allow_methods=["GET", "POST"], allow_headers=["Authorization", "Content-Type"])
    if settings.allowed_hosts != ("*",):
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(settings.allowed_hosts))

    state_health = _Recent(hub.state_health, HEALTH_STATE_MAX_AGE_S)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        state = state_health.value() or await run_in_threadpool(state_health.refresh)  # a database round
        return {"status": "ok", "pipelines": list(hub.served),  # trip: off the event loop, ≤ 1/s
                "load": {g.name: asdict(g.stats()) for g in (gate, route_gate, answer_gate)}, "state": state}

    return app


HEALTH_STATE_MAX_AGE_S = 1.0
"""How old the state part of ``/health`` may be (s): a database's round trip is made at most once a second,
so a prober polling ``/health`` under load neither waits for a thread each time nor loads the database."""


class _Recent:
    """``fetch()``'s value, fetched again once older than ``max_age_s`` (None then: call ``refresh``)."""

    def __init__(self, fetch: Any, max_age_s: float) -> None:
        self._fetch = fetch
        self._max_age_s = max_age_s
        self._at = -float("inf")
        self._value: Any = None

    def value(self) -> Any:
        return self._value if time.monotonic() - self._at <= self._max_age_s else None

    def refresh(self) -> Any:
        self._value, self._at = self._fetch(), time.monotonic()
        return self._value


def _detail_json(exc: HTTPException) -> bytes:
    """A gate's refusal as FastAPI answers an ``HTTPException`` (``{"detail": …}``)."""
    return json.dumps({"detail": exc.detail}).encode()


def _evidence_api(hub: PipelineHub, gate: ModelGate) -> APIRouter:
    """``POST /v1/evidence`` over the hub's pipelines, extracted through ``gate``."""
    api = APIRouter()

    @api.post("/v1/evidence", response_model=EvidenceOut, tags=["kgwise"])
    async def evidence(req: EvidenceRequest, request: Request) -> Evidence:
        """The question's KG evidence: grounded concepts, P_sub's triples and question→choice paths."""
        source = pick_pipeline(hub.served, req.model).pipeline
        if not isinstance(source, EvidenceSource):
            raise HTTPException(status_code=404, detail="model: the pipeline extracts no evidence")
        found: Evidence = await gate.run(request, source.evidence, req.question, req.choices)
        return found

    return api


def _torch_threads(n: int) -> None:
    """Intra-op threads of torch (the question encoder): one per request serves concurrent requests
    faster than torch's default of all cores fighting over them. Torch is not imported for it (an encoder
    whose vectors are all cached never loads it): until then ``OMP_NUM_THREADS``, which torch reads when
    imported, says it, unless the operator set it."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(n)
    else:
        os.environ.setdefault("OMP_NUM_THREADS", str(n))
