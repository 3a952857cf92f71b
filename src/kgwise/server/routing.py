"""External routing over HTTP, a view of the served pipeline's :meth:`~kgwise.app.Pipeline.route`,
:meth:`~kgwise.app.Pipeline.settle` and :meth:`~kgwise.app.Pipeline.cancel` (:mod:`kgwise.app.external`):
``POST /v1/route`` picks an external arm for a question within the pipeline's budget (429 when none fits),
``POST /v1/route/feedback`` reports what the arm got right and what it really cost (422 above the
decision's bound, 404 for a decision that does not wait), ``POST /v1/route/cancel`` calls off a decision
whose arm will not be run, ``GET /v1/route/status`` is the pipeline's status. ``model`` names the pipeline
when the server holds several. Each runs on the router's :class:`ModelGate` (the question encoder's
threads)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Annotated, Any, Protocol, TypeVar, runtime_checkable

from fastapi import APIRouter, HTTPException, Request
from pydantic import BaseModel, ConfigDict, Field

from kgwise.app import BudgetExceededError, Decision, PipelineStatus, Settlement, UnknownDecisionError
from kgwise.server.backpressure import ModelGate
from kgwise.server.limits import MAX_ID, Ident, Money, QuestionText, Unit

__all__ = ["CancelRequest", "ExternalRouter", "RouteRequest", "SettleRequest", "pick_pipeline", "routing_api"]

_DECISION = Field(min_length=1, max_length=64)


@runtime_checkable
class ExternalRouter(Protocol):
    """What these routes call: the pipeline's external routing and its status."""

    def route(self, question: str, costs: Mapping[str, float] | None = None) -> Decision: ...

    def settle(self, decision: str, correct: float, cost: float,
               observed: Mapping[str, float] | None = None) -> Settlement: ...

    def cancel(self, decision: str) -> Settlement: ...

    def pipeline_status(self) -> PipelineStatus: ...


class RouteRequest(BaseModel):
    """A question and, per external arm by name, a bound on what answering it may cost below the arm's
    price (omitted: its price)."""

    model_config = ConfigDict(extra="forbid")

    question: QuestionText
    costs: Annotated[dict[Ident, Money], Field(min_length=1, max_length=MAX_ID)] | None = None
    model: Ident | None = None


class SettleRequest(BaseModel):
    """The outcome of a decision: ``reward`` 1 = right, 0 = wrong (or a grade in between); ``cost`` as
    really spent (at most the decision's bound); ``observed``: the grades of other external arms that
    answered the same question, learnt at no cost to the budget."""

    model_config = ConfigDict(extra="forbid")

    decision: Ident = _DECISION
    reward: Unit
    cost: Money
    observed: dict[Ident, Unit] = Field(default_factory=dict, max_length=MAX_ID)
    model: Ident | None = None


class CancelRequest(BaseModel):
    """A decision whose arm will not be run."""

    model_config = ConfigDict(extra="forbid")

    decision: Ident = _DECISION
    model: Ident | None = None


T = TypeVar("T")


def pick_pipeline(pipelines: Mapping[str, T], model: str | None) -> T:
    """The served pipeline that a request's ``model`` names (it may be left out when there is one): 422 when
    it is left out among several, 404 when no pipeline has that name."""
    if model is None:
        if len(pipelines) != 1:
            raise HTTPException(422, f"model: name one of the pipelines ({', '.join(pipelines)})")
        return next(iter(pipelines.values()))
    if model not in pipelines:
        raise HTTPException(404, f"model: no pipeline {model!r} (GET /v1/models)")
    return pipelines[model]


def routing_api(routers: Mapping[str, ExternalRouter], gate: ModelGate) -> APIRouter:
    """The ``/v1/route`` routes over the served pipelines ``routers`` (by name)."""
    api = APIRouter()
    pick = partial(pick_pipeline, routers)

    async def run(request: Request, fn: Callable[..., Any], *args: Any) -> dict[str, Any]:
        """``fn(*args)`` on the router's gate, as JSON; a decision that does not wait is a 404."""
        try:
            out = await gate.run(request, fn, *args)
        except UnknownDecisionError as exc:
            raise HTTPException(status_code=404, detail=str(exc)) from exc
        answer: dict[str, Any] = out.to_dict()
        return answer

    @api.post("/v1/route")
    async def route(req: RouteRequest, request: Request) -> dict[str, Any]:
        """The external arm to ask, its decision id and the cost bound it holds."""
        try:
            return await run(request, pick(req.model).route, req.question, req.costs)
        except BudgetExceededError as exc:  # no arm's bound fits what the budget leaves
            raise HTTPException(status_code=429, detail=str(exc)) from exc

    @api.post("/v1/route/feedback")
    async def feedback(req: SettleRequest, request: Request) -> dict[str, Any]:
        """Pay a decision's cost and learn its outcome (once per decision)."""
        return await run(request, pick(req.model).settle, req.decision, req.reward, req.cost, req.observed)

    @api.post("/v1/route/cancel")
    async def cancel(req: CancelRequest, request: Request) -> dict[str, Any]:
        """Call off a waiting decision: its cost bound returns to the budget."""
        return await run(request, pick(req.model).cancel, req.decision)

    @api.get("/v1/route/status")
    async def status(request: Request, model: str | None = None) -> dict[str, Any]:
        """Budget, spending, held bounds, decisions waiting and per-arm figures."""
        return await run(request, pick(model).pipeline_status)

    return api
