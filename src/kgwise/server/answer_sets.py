"""``POST /v1/answer-set``: UAG's calibrated answer set of a KG question (``kgwise uag calibrate`` output).

The service loads the calibration file, the KG it names (or the one given) and the LLM it was
calibrated with, and answers ``{question, topic_entities}`` with the KG answers UAG keeps at the
calibrated α, the generation they were scored against, and the guarantee (α, δ).
"""

from __future__ import annotations

import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from kgwise.conformal.calibrated import CalibratedUAG
from kgwise.conformal.evaluator import LLMGenerator
from kgwise.errors import ConfigError
from kgwise.server.backpressure import ModelGate
from kgwise.server.limits import MAX_ID, Choice, Ident, QuestionText
from kgwise.types import Question

__all__ = ["AnswerSetRequest", "AnswerSetService", "answer_set_api"]


class AnswerSetRequest(BaseModel):
    """An open KG question and its topic entities, named as in the KG."""

    model_config = ConfigDict(extra="forbid")

    question: QuestionText
    topic_entities: list[Choice] = Field(min_length=1, max_length=MAX_ID)
    id: Ident = ""


class AnswerSetService:
    """A calibrated UAG with its KG and LLM; ``kg`` overrides the graph file recorded at calibration (it
    must hold the same graph unless ``allow_mismatch``)."""

    def __init__(self, calibration: Path, kg: str | Path | None = None, llm: str | None = None,
                 allow_mismatch: bool = False) -> None:
        from kgwise.kg.sources import open_graph
        from kgwise.llm import get_llm

        self.calibrated = CalibratedUAG.load(calibration)
        summary = self.calibrated.summary
        kg_file = kg or summary.get("kg")
        if kg_file is None:
            raise ConfigError(f"{calibration} names no KG: pass one (--uag-kg)")
        self.kg_file = kg_file
        self.kg = open_graph(kg_file)
        self.llm_spec, self.mismatch = self.calibrated.check_pipeline(
            self.kg, llm, calibration, allow_mismatch, "--allow-calibration-mismatch")
        self.same_generator = self.calibrated.generator_spec(llm)[1]
        self.generator = LLMGenerator(get_llm(self.llm_spec, cache=True))
        self.scorer = self.calibrated.settings.scorer()
        self.lock = threading.Lock()

    def status(self) -> dict[str, Any]:
        u = self.calibrated.uag
        return {"kg": str(self.kg_file), "llm": self.llm_spec, "alpha": u.config.alpha,
                "delta": u.config.ltt.delta, "lambda": u.lambda_,
                "same_generator_as_calibration": self.same_generator, "calibration_mismatch": self.mismatch}

    def answer(self, req: AnswerSetRequest) -> dict[str, Any]:
        q = Question(id=req.id, text=req.question, topic_entities=tuple(req.topic_entities))
        with self.lock:  # local models are not thread-safe
            result = self.calibrated.answer(q, self.kg, self.generator, self.scorer)
        return {**asdict(result), "same_generator_as_calibration": self.same_generator,
                "guaranteed": self.same_generator and not self.mismatch}


def answer_set_api(service: AnswerSetService, gate: ModelGate) -> APIRouter:
    """The ``/v1/answer-set`` route over ``service``, its LLM working through ``gate``."""
    api = APIRouter()

    @api.post("/v1/answer-set")
    async def answer_set(req: AnswerSetRequest, request: Request) -> dict[str, Any]:
        """The calibrated answer set: it misses every gold answer at rate ≤ α with probability ≥ 1 − δ."""
        return await gate.run(request, service.answer, req)

    return api
