"""``POST /v1/answer-set``: UAG's calibrated answer set of a KG question (``kgwise uag calibrate`` output).

The service loads the calibration file, the KG it names (or the one given) and the LLM it was
calibrated with, and answers ``{question, topic_entities}`` with the KG answers UAG keeps at the
calibrated α, the generation they were scored against, and the guarantee (α, δ).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from kgwise.app.answer_sets import UAGApp
from kgwise.server.backpressure import ModelGate
from kgwise.server.limits import MAX_ID, Choice, Ident, QuestionText

__all__ = ["AnswerSetRequest", "AnswerSetService", "answer_set_api"]


class AnswerSetRequest(BaseModel):
    """An open KG question and its topic entities, named as in the KG."""

    model_config = ConfigDict(extra="forbid")

    question: QuestionText
    topic_entities: list[Choice] = Field(min_length=1, max_length=MAX_ID)
    id: Ident = ""


class AnswerSetService:
    """A :class:`~kgwise.app.UAGApp` whose LLM answers one request at a time; ``kg`` overrides the graph
    file recorded at calibration (it must hold the same graph unless ``allow_mismatch``)."""

    def __init__(self, calibration: Path, kg: str | Path | None = None, llm: str | None = None,
                 allow_mismatch: bool = False) -> None:
        self.app = UAGApp(calibration, kg, llm, allow_mismatch, "--allow-calibration-mismatch", "--uag-kg")
        self.lock = threading.Lock()

    def status(self) -> dict[str, Any]:
        return self.app.status().to_dict()

    def answer(self, req: AnswerSetRequest) -> dict[str, Any]:
        with self.lock:  # local models are not thread-safe
            return self.app.answer(req.question, req.topic_entities, req.id).to_dict()


def answer_set_api(service: AnswerSetService, gate: ModelGate) -> APIRouter:
    """The ``/v1/answer-set`` route over ``service``, its LLM working through ``gate``."""
    api = APIRouter()

    @api.post("/v1/answer-set")
    async def answer_set(req: AnswerSetRequest, request: Request) -> dict[str, Any]:
        """The calibrated answer set: it misses every gold answer at rate ≤ α with probability ≥ 1 − δ."""
        return await gate.run(request, service.answer, req)

    return api
