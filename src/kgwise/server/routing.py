"""Coke over HTTP: ``POST /v1/route`` picks an arm for a question within the budget, ``POST
/v1/route/feedback`` reports what the chosen arm got right and what it really cost, ``POST
/v1/route/cancel`` calls off a decision whose arm will not be run (the service behind them:
:class:`kgwise.route.service.RoutingService`). Each runs on the router's :class:`ModelGate` (the question
encoder's threads)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from kgwise.route.service import RoutingService, UnknownDecisionError
from kgwise.server.backpressure import ModelGate
from kgwise.server.limits import MAX_ID, Ident, Money, QuestionText, Unit

__all__ = ["CancelRequest", "FeedbackRequest", "RouteRequest", "routing_api"]

_DECISION = Field(min_length=1, max_length=64)


class RouteRequest(BaseModel):
    """A question and, per arm (by name, or in the router's arm order), an upper bound on what answering it
    would cost (capped by the service's own bounds; omitted: the service's bounds)."""

    model_config = ConfigDict(extra="forbid")

    question: QuestionText
    costs: (Annotated[list[Money], Field(min_length=1, max_length=MAX_ID)]
            | Annotated[dict[Ident, Money], Field(min_length=1, max_length=MAX_ID)] | None) = None


class FeedbackRequest(BaseModel):
    """The outcome of a decision: ``reward`` 1 = right, 0 = wrong (or a grade in between); ``cost`` as
    really spent (at most the decision's bound); ``observed``: the rewards of other arms that answered the
    same question at no cost (a free KG model run on every question), by arm name."""

    model_config = ConfigDict(extra="forbid")

    decision: Ident = _DECISION
    reward: Unit
    cost: Money
    observed: dict[Ident, Unit] = Field(default_factory=dict, max_length=MAX_ID)


class CancelRequest(BaseModel):
    """A decision whose arm will not be run."""

    model_config = ConfigDict(extra="forbid")

    decision: Ident = _DECISION


def routing_api(service: RoutingService, gate: ModelGate) -> APIRouter:
    """The ``/v1/route`` routes over ``service``."""
    api = APIRouter()

    @api.post("/v1/route")
    async def route(req: RouteRequest, request: Request) -> dict[str, Any]:
        """The arm to ask (``arm`` is null when none is affordable: no feedback is then expected)."""
        return await gate.run(request, service.route, req.question, req.costs)

    @api.post("/v1/route/feedback")
    async def feedback(req: FeedbackRequest, request: Request) -> dict[str, Any]:
        """Learn from the outcome of a decision (once per decision)."""
        try:
            return await gate.run(request, service.feedback, req.decision, req.reward, req.cost, req.observed)
        except UnknownDecisionError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from exc

    @api.post("/v1/route/cancel")
    async def cancel(req: CancelRequest, request: Request) -> dict[str, Any]:
        """Call off a waiting decision: its cost bound returns to the budget."""
        try:
            return await gate.run(request, service.cancel, req.decision)
        except UnknownDecisionError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from exc

    return api
