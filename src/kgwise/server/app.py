"""``create_app``: the HTTP API over a :class:`~kgwise.inject.KnowledgeInjector` and a Coke router.

Routes: ``GET /health``; with a graph, ``POST /v1/answer`` (KnowGPT answer with the knowledge used, the
combination, the usage and, when a calibration file is configured, the calibrated answer set) and ``POST
/v1/subgraph`` (grounded concepts, P_sub triples and paths, no LLM call); with a router file, ``POST
/v1/route`` and ``POST /v1/route/feedback`` (see :mod:`kgwise.server.routing`); with a UAG calibration,
``POST /v1/answer-set`` (see :mod:`kgwise.server.answer_sets`). Local models are not thread-safe, so
requests that reach the LLM are served one at a time.
"""

from __future__ import annotations

import threading
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from kgwise.app.knowgpt import KnowGPTApp
from kgwise.errors import ConfigError, KgwiseError
from kgwise.inject.injector import KnowledgeInjector
from kgwise.route.service import RoutingService
from kgwise.server.answer_sets import AnswerSetService, answer_set_api
from kgwise.server.contract import PipelineLike
from kgwise.server.docs import install_docs
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
    one it used)."""

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


class AnswerRequest(BaseModel):
    """A multiple-choice question; ``combo`` forces an (extractor+format) pair such as ``P_sub+F_t`` (with
    a calibration made for another combination, the answer carries no set unless the service allows the
    mismatch); ``alpha`` sets the miscoverage of the calibrated set (default: the calibration's)."""

    question: str = Field(min_length=1)
    choices: list[str] = Field(min_length=2, max_length=26)
    combo: str | None = None
    alpha: float | None = Field(default=None, ge=0.0, le=1.0)
    id: str = ""


def create_app(settings: ServerSettings, injector: KnowledgeInjector | None = None,
               pipelines: Mapping[str, PipelineLike] | PipelineHub | None = None) -> FastAPI:
    """The FastAPI application; ``injector`` defaults to one built from ``settings`` (when it names a
    graph); ``pipelines`` (by name, or a :class:`PipelineHub` naming the pipelines' own error classes) are
    served through the OpenAI-compatible API and the web page. Raises
    ``ConfigError`` when there is nothing to serve."""
    if (injector is None and settings.kg is None and settings.router is None and settings.uag is None
            and not pipelines):
        raise ConfigError("nothing to serve: give a graph (--kg), a router state file (--router), a UAG "
                          "calibration (--uag) and/or a pipeline")
    routing = None
    if settings.router is not None:
        from kgwise.embed import MiniLM

        encoder = MiniLM()
        routing = RoutingService(settings.router, lambda text: encoder.encode([text])[0], encoder.dim,
                                 save_every_s=settings.router_save_every_s)
    try:
        return _app(settings, injector, routing, pipelines)
    except BaseException:
        if routing is not None:
            routing.close()  # the state file is free again
        raise


def _app(settings: ServerSettings, injector: KnowledgeInjector | None, routing: RoutingService | None,
         pipelines: Mapping[str, PipelineLike] | PipelineHub | None = None) -> FastAPI:
    """The application over an open ``routing`` service (closed when the application stops)."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        yield
        if routing is not None:
            routing.close()  # stops the saving thread and writes what changed since its last write

    app = FastAPI(title="kgwise", summary="Knowledge-graph-grounded question answering with LLMs",
                  lifespan=lifespan, docs_url=None, redoc_url=None)
    install_docs(app)  # offline /docs and /redoc (packaged assets)
    install_web(app)  # the page at /
    if pipelines:
        app.include_router(openai_api(pipelines if isinstance(pipelines, PipelineHub)
                                      else PipelineHub(pipelines)))

    @app.exception_handler(KgwiseError)
    async def unprocessable(_: Request, exc: KgwiseError) -> JSONResponse:
        """kgwise's own errors are about the request (unknown entity, bad combination, cost): 422."""
        return JSONResponse(status_code=422, content={"detail": str(exc)})

    if routing is not None:
        app.include_router(routing_api(routing))
    answer_sets = None
    if settings.uag is not None:
        answer_sets = AnswerSetService(settings.uag, settings.uag_kg, settings.uag_llm,
                                       settings.allow_calibration_mismatch)
        app.include_router(answer_set_api(answer_sets))
    if injector is None and settings.kg is None:
        @app.get("/health")
        def partial_health() -> dict[str, Any]:
            return {"status": "ok", "router": routing.status() if routing is not None else None,
                    "uag": answer_sets.status() if answer_sets is not None else None}

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
    def health() -> dict[str, Any]:
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
        }

    @app.post("/v1/answer")
    def answer(req: AnswerRequest) -> dict[str, Any]:
        q = question_of(req)
        with lock:
            return knowgpt.answer(q, req.combo, req.alpha).to_dict()

    @app.post("/v1/subgraph")
    def subgraph(req: AnswerRequest) -> dict[str, Any]:
        q = question_of(req)
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
