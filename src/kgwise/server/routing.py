"""Coke over HTTP: ``POST /v1/route`` picks an arm for a question within the budget, ``POST
/v1/route/feedback`` reports what the chosen arm got right and what it really cost (the service behind
both: :class:`kgwise.route.service.RoutingService`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from kgwise.route.service import RoutingService, UnknownDecisionError

__all__ = ["FeedbackRequest", "RouteRequest", "routing_api"]


class RouteRequest(BaseModel):
    """A question and, per arm (by name, or in the router's arm order), an upper bound on what answering it
    would cost."""

    question: str = Field(min_length=1)
    costs: Annotated[list[float], Field(min_length=1)] | Annotated[dict[str, float], Field(min_length=1)]


class FeedbackRequest(BaseModel):
    """The outcome of a decision: ``reward`` 1 = right, 0 = wrong (or a grade in between); ``cost`` as
    really spent; ``observed``: the rewards of other arms that answered the same question at no cost (a
    free KG model run on every question), by arm name."""

    decision: str = Field(min_length=1)
    reward: float = Field(ge=0.0, le=1.0)
    cost: float = Field(ge=0.0)
    observed: dict[str, float] = Field(default_factory=dict)


def routing_api(service: RoutingService) -> APIRouter:
    """The ``/v1/route`` routes over ``service``."""
    api = APIRouter()

    @api.post("/v1/route")
    def route(req: RouteRequest) -> dict[str, Any]:
        """The arm to ask (``arm`` is null when none is affordable: no feedback is then expected)."""
        return service.route(req.question, req.costs)

    @api.post("/v1/route/feedback")
    def feedback(req: FeedbackRequest) -> dict[str, Any]:
        """Learn from the outcome of a decision (once per decision)."""
        try:
            return service.feedback(req.decision, req.reward, req.cost, req.observed)
        except UnknownDecisionError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from exc

    return api
