"""``create_app``: the HTTP API over a :class:`~kgwise.inject.KnowledgeInjector` and a Coke router.

Routes: ``GET /health``; with a graph, ``POST /v1/answer`` (KnowGPT answer with the knowledge used, the
combination, the usage and, when a calibration file is configured, the calibrated answer set) and ``POST
/v1/subgraph`` (grounded concepts, P_sub triples and paths, no LLM call); with a router file, ``POST
/v1/route`` and ``POST /v1/route/feedback`` (see :mod:`kgwise.server.routing`); with a UAG calibration,
``POST /v1/answer-set`` (see :mod:`kgwise.server.answer_sets`). Local models are not thread-safe, so
requests that reach the LLM are served one at a time, through a bounded queue
(:mod:`kgwise.server.backpressure`); ``/health`` runs on the event loop and never waits for model work.

Exposure (:mod:`kgwise.server.guard`): API keys (bearer), a body cap, accepted Host headers (against DNS
rebinding) and CORS (off unless origins are named); refused requests are 4xx naming the field
(:mod:`kgwise.server.limits`).
"""

from __future__ import annotations

import gc
import os
import sys
import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field
from starlette.concurrency import run_in_threadpool
from starlette.middleware.cors import CORSMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware

from kgwise.app.knowgpt import KnowGPTApp
from kgwise.errors import ConfigError
from kgwise.inject.injector import KnowledgeInjector
from kgwise.route.service import RoutingService
from kgwise.server.answer_sets import AnswerSetService, answer_set_api
from kgwise.server.backpressure import ModelGate
from kgwise.server.contract import PipelineLike
from kgwise.server.docs import install_docs
from kgwise.server.guard import Guard
from kgwise.server.limits import MAX_ID, Choice, Ident, QuestionText, Unit, install_handlers
from kgwise.server.openai_api import PipelineHub, openai_api
from kgwise.server.routing import routing_api
from kgwise.server.web import install_web
from kgwise.types import make_question

__all__ = ["AnswerRequest", "ServerSettings", "create_app"]


class ServerSettings(BaseModel):
    """What the service serves: a graph file, an LLM spec and, optionally, a trained P_RL policy, a prompt
    bandit (with the choice-scoring rule it was trained with) and a calibration (``kgwise calibrate``) for
    answer sets; and/or a Coke router state file (``kgwise route init``), updated in place; and/or a UAG
    calibration (``kgwise uag calibrate``) with its KG (default: the one it names) and LLM (default: the
    one it used).

    Exposure and load: ``api_keys`` (none: no authentication; ``kgwise serve`` refuses a non-loopback
    host without them), ``allowed_hosts`` (Host headers accepted; ``*``: any), ``cors_origins`` (none: no
    CORS), ``max_body_bytes``; ``queue_limit`` requests may wait for the LLM (more get 429),
    ``request_timeout_s`` per request; ``torch_threads`` for the question encoder. Routing:
    ``pending_ttl_s`` (decisions expire), ``route_max_costs`` (the service's per-arm cost bounds, capping
    the clients'), ``allow_overrun`` (record feedback costs above their bound instead of refusing them)."""

    model_config = ConfigDict(frozen=True)

    kg: Path | None = None
    llm: str = "smollm2-135m"
    policy: Path | None = None
    bandit: Path | None = None
    scoring: str | None = None
    calibration: Path | None = None
    allow_calibration_mismatch: bool = False
    router: Path | None = None
    router_save_every_s: float = Field(default=30.0, gt=0.0)
    uag: Path | None = None
    uag_kg: str | None = None
    uag_llm: str | None = None
    api_keys: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ("*",)
    cors_origins: tuple[str, ...] = ()
    max_body_bytes: int = Field(default=1_000_000, ge=1_000)
    queue_limit: int = Field(default=8, ge=0)
    request_timeout_s: float = Field(default=120.0, gt=0.0)
    torch_threads: int | None = Field(default=1, ge=1)
    pending_ttl_s: float | None = Field(default=3600.0, gt=0.0)
    route_max_costs: tuple[float, ...] | None = None
    allow_overrun: bool = False


class AnswerRequest(BaseModel):
    """A multiple-choice question; ``combo`` forces an (extractor+format) pair such as ``P_sub+F_t`` (with
    a calibration made for another combination, the answer carries no set unless the service allows the
    mismatch); ``alpha`` sets the miscoverage of the calibrated set (default: the calibration's)."""

    model_config = ConfigDict(extra="forbid")

    question: QuestionText
    choices: list[Choice] = Field(min_length=2, max_length=26)
    combo: Ident | None = None
    alpha: Unit | None = None
    id: Ident = Field(default="", max_length=MAX_ID)


def create_app(settings: ServerSettings, injector: KnowledgeInjector | None = None,
               pipelines: Mapping[str, PipelineLike] | PipelineHub | None = None) -> FastAPI:
    """The FastAPI application; ``injector`` defaults to one built from ``settings`` (when it names a
    graph); ``pipelines`` (by name, or a :class:`PipelineHub` naming the pipelines' own error classes) are
    served through the OpenAI-compatible API and the web page. Raises ``ConfigError`` when there is
    nothing to serve."""
    if (injector is None and settings.kg is None and settings.router is None and settings.uag is None
            and not pipelines):
        raise ConfigError("nothing to serve: give a graph (--kg), a router state file (--router), a UAG "
                          "calibration (--uag) and/or a pipeline (--config)")
    if settings.torch_threads is not None:
        _torch_threads(settings.torch_threads)
    routing = None
    if settings.router is not None:
        from kgwise.embed import MiniLM

        encoder = MiniLM()
        routing = RoutingService(settings.router, lambda text: encoder.encode([text])[0], encoder.dim,
                                 save_every_s=settings.router_save_every_s,
                                 pending_ttl_s=settings.pending_ttl_s, max_costs=settings.route_max_costs,
                                 allow_overrun=settings.allow_overrun)
    # the router's work is a millisecond under its own lock: 8 threads keep the pairs flowing (2 halved them)
    gates = {"router": ModelGate("router", 8, 64, settings.request_timeout_s),
             "kg": ModelGate("kg", 2, 64, settings.request_timeout_s),
             "llm": ModelGate("llm", 1, settings.queue_limit, settings.request_timeout_s),
             "uag": ModelGate("uag", 1, settings.queue_limit, settings.request_timeout_s)}
    try:
        return _app(settings, injector, routing, gates, pipelines)
    except BaseException:
        if routing is not None:
            routing.close()  # the state file is free again
        for gate in gates.values():
            gate.close()
        raise


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


def _app(settings: ServerSettings, injector: KnowledgeInjector | None, routing: RoutingService | None,
         gates: dict[str, ModelGate], pipelines: Mapping[str, PipelineLike] | PipelineHub | None = None
         ) -> FastAPI:
    """The application over an open ``routing`` service (closed when the application stops)."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # what is loaded by now (graph, router, pipeline, the app) lives as long as the server: kept out of
        # the collector's full passes, which otherwise walk it all and stall every request in flight
        gc.collect()
        gc.freeze()
        yield
        for gate in gates.values():
            gate.close()
        if routing is not None:
            routing.close()  # stops the saving thread and writes what changed since its last write

    app = FastAPI(title="kgwise", summary="Knowledge-graph-grounded question answering with LLMs",
                  lifespan=lifespan, docs_url=None, redoc_url=None)
    install_handlers(app)
    install_docs(app)  # offline /docs and /redoc (packaged assets)
    install_web(app)  # the page at /
    hub = None
    if pipelines:
        hub = pipelines if isinstance(pipelines, PipelineHub) else PipelineHub(pipelines)
        app.include_router(openai_api(hub))

    async def state() -> dict[str, Any] | None:  # a database's round trip: off the event loop
        return None if hub is None else await run_in_threadpool(hub.state_health)
    app.add_middleware(Guard, api_keys=settings.api_keys, max_body_bytes=settings.max_body_bytes)
    if settings.cors_origins:  # outside the guard: a browser's preflight carries no key
        app.add_middleware(CORSMiddleware, allow_origins=list(settings.cors_origins),
                           allow_methods=["GET", "POST"], allow_headers=["Authorization", "Content-Type"])
    if settings.allowed_hosts != ("*",):
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=list(settings.allowed_hosts))

    if routing is not None:
        app.include_router(routing_api(routing, gates["router"]))
    answer_sets = None
    if settings.uag is not None:
        answer_sets = AnswerSetService(settings.uag, settings.uag_kg, settings.uag_llm,
                                       settings.allow_calibration_mismatch)
        app.include_router(answer_set_api(answer_sets, gates["uag"]))

    def load() -> dict[str, Any]:
        return {name: asdict(gate.stats()) for name, gate in gates.items()}

    if injector is None and settings.kg is None:
        @app.get("/health")
        async def partial_health() -> dict[str, Any]:
            return {"status": "ok", "router": routing.status() if routing is not None else None,
                    "uag": answer_sets.status() if answer_sets is not None else None, "load": load(),
                    "state": await state()}

        return app
    knowgpt = (KnowGPTApp(injector, settings.calibration, settings.policy, settings.bandit,
                          settings.allow_calibration_mismatch, "--allow-calibration-mismatch")
               if injector is not None else
               KnowGPTApp.build(settings.kg, settings.llm, settings.policy, settings.bandit,  # type: ignore[arg-type]
                                settings.scoring, settings.calibration, settings.allow_calibration_mismatch,
                                "--allow-calibration-mismatch"))
    inj = knowgpt.injector
    lock = threading.Lock()

    def question_of(req: AnswerRequest) -> Any:
        try:
            return make_question(req.question, req.choices, req.id)
        except ValueError as exc:  # the Question's own checks
            raise HTTPException(status_code=422, detail=str(exc)) from exc

    @app.get("/health")
    async def health() -> dict[str, Any]:
        kg = inj.kg
        return {
            "status": "ok",
            "llm": inj.llm.name,
            "kg": {"file": str(settings.kg), "nodes": kg.num_nodes, "edges": kg.num_edges},
            "combos": inj.combos(),
            "bandit": inj.bandit is not None,
            "calibrated": knowgpt.calibrated,
            "calibration_mismatch": list(knowgpt.mismatch),
            "router": routing.status() if routing is not None else None,
            "uag": answer_sets.status() if answer_sets is not None else None,
            "load": load(),
            "state": await state(),
        }

    def inject(q: Any, combo: str | None, alpha: float | None) -> dict[str, Any]:
        with lock:
            return knowgpt.answer(q, combo, alpha).to_dict()

    @app.post("/v1/answer")
    async def answer(req: AnswerRequest, request: Request) -> dict[str, Any]:
        q = question_of(req)
        result: dict[str, Any] = await gates["llm"].run(request, inject, q, req.combo, req.alpha)
        return result

    @app.post("/v1/subgraph")
    async def subgraph(req: AnswerRequest, request: Request) -> dict[str, Any]:
        return await gates["kg"].run(request, subgraph_of, question_of(req))

    def subgraph_of(q: Any) -> dict[str, Any]:
        kg = inj.kg
        grounding = inj.grounder.ground(q)
        sub = inj.extractors["P_sub"].extract(q, grounding)

        def label(n: int) -> str:
            return kg.label(n)

        return {
            "question_concepts": [label(n) for n in grounding.question_nodes],
            "choice_concepts": [[label(n) for n in nodes] for nodes in grounding.choice_nodes],
            "triples": [[label(h), kg.relation_name(r), label(t)] for h, r, t in sub.edges],
            "paths": [
                {
                    "nodes": [label(n) for n in p.nodes],
                    "relations": [kg.relation_name(r) for r in p.relations],
                    "inverse": list(p.inverse),
                }
                for p in sub.paths
            ],
        }

    return app
