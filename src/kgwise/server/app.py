"""``create_app``: the HTTP API over a :class:`~kgwise.inject.KnowledgeInjector`.

Routes: ``GET /health``; ``POST /v1/answer`` (KnowGPT answer with the knowledge used, the combination,
the usage and, when a calibration file is configured, the calibrated answer set); ``POST /v1/subgraph``
(grounded concepts, P_sub triples and paths, no LLM call). Local models are not thread-safe, so requests
that reach the LLM are served one at a time.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, ConfigDict, Field

from kgwise.conformal.split import SplitConformal
from kgwise.errors import KgwiseError
from kgwise.inject.build import DEFAULT_COMBO, build_injector, make_question
from kgwise.inject.calibration import with_prediction_set
from kgwise.inject.injector import KnowledgeInjector

__all__ = ["AnswerRequest", "ServerSettings", "create_app"]


class ServerSettings(BaseModel):
    """What the service serves: a graph file, an LLM spec and, optionally, a trained P_RL policy, a prompt
    bandit and a calibration (``kgwise calibrate``) for answer sets."""

    model_config = ConfigDict(frozen=True)

    kg: Path
    llm: str = "smollm2-135m"
    policy: Path | None = None
    bandit: Path | None = None
    calibration: Path | None = None


class AnswerRequest(BaseModel):
    """A multiple-choice question; ``combo`` forces an (extractor+format) pair such as ``P_sub+F_t``;
    ``alpha`` sets the miscoverage of the calibrated set (default: the calibration's)."""

    question: str = Field(min_length=1)
    choices: list[str] = Field(min_length=2, max_length=26)
    combo: str | None = None
    alpha: float | None = Field(default=None, ge=0.0, le=1.0)
    id: str = "request"


def create_app(settings: ServerSettings, injector: KnowledgeInjector | None = None) -> FastAPI:
    """The FastAPI application; ``injector`` defaults to one built from ``settings``."""
    inj = injector or build_injector(settings.kg, settings.llm, settings.policy, settings.bandit)
    conformal = SplitConformal.load(settings.calibration) if settings.calibration is not None else None
    lock = threading.Lock()
    app = FastAPI(title="kgwise", summary="Knowledge-graph-grounded question answering with LLMs")

    def question_of(req: AnswerRequest) -> Any:
        try:
            return make_question(req.question, req.choices, req.id)
        except (KgwiseError, ValueError) as exc:
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
            "calibrated": conformal is not None,
        }

    @app.post("/v1/answer")
    def answer(req: AnswerRequest) -> dict[str, Any]:
        q = question_of(req)
        combo = req.combo or (None if inj.bandit is not None else DEFAULT_COMBO)
        try:
            with lock:
                result = inj.inject(q, combo)
        except KgwiseError as exc:
            raise HTTPException(status_code=422, detail=str(exc)) from exc
        a = result.answer
        if conformal is not None:
            a = with_prediction_set(a, conformal, req.alpha)
        out = a.to_dict()
        out["choice_text"] = next(c.text for c in q.choices if c.label == result.answer.prediction)
        out["prep_ms"] = result.prep_ms
        return out

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
