"""Coke over HTTP: ``POST /v1/route`` picks an arm for a question within the budget, ``POST
/v1/route/feedback`` reports what the chosen arm got right and what it really cost.

The reward arrives later than the decision (the caller runs the arm, then grades it), so each decision
gets an id and waits in memory for its feedback; past ``max_pending`` the oldest waiting decision is
dropped. The router's state is written to its file at most every ``save_every_s`` seconds after a change
and when the service stops, so a restart resumes the bandits and the spending (waiting decisions are
not kept across restarts).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from kgwise.errors import ConfigError, KgwiseError
from kgwise.route.coke import CokeRouter

__all__ = ["FeedbackRequest", "RouteRequest", "RoutingService", "routing_api"]

Embed = Callable[[str], npt.NDArray[np.float64]]


class RouteRequest(BaseModel):
    """A question and, per arm in the router's order, an upper bound on what answering it would cost."""

    question: str = Field(min_length=1)
    costs: list[float] = Field(min_length=1)


class FeedbackRequest(BaseModel):
    """The outcome of a decision: ``reward`` 1 = right, 0 = wrong (or a grade in between); ``cost`` as
    really spent."""

    decision: str = Field(min_length=1)
    reward: float = Field(ge=0.0, le=1.0)
    cost: float = Field(ge=0.0)


class RoutingService:
    """A :class:`CokeRouter` loaded from ``state_file``, shared by the request threads."""

    def __init__(self, state_file: Path, embed: Embed, dim: int, max_pending: int = 10_000,
                 save_every_s: float = 30.0) -> None:
        self.state_file = state_file
        self.router = CokeRouter.load(state_file)
        if self.router.dim != dim:
            raise ConfigError(f"router {state_file} expects {self.router.dim}-d question embeddings, the "
                              f"encoder gives {dim}-d")
        if max_pending < 1:
            raise ConfigError(f"max_pending must be ≥ 1, got {max_pending}")
        self.embed = embed
        self.max_pending = max_pending
        self.save_every_s = save_every_s
        self.pending: OrderedDict[str, tuple[int, npt.NDArray[np.float64]]] = OrderedDict()
        self.lock = threading.Lock()
        self.dirty = False
        self.last_save = time.monotonic()

    def status(self) -> dict[str, Any]:
        r = self.router
        return {"file": str(self.state_file), "arms": r.names, "clusters": r.clusters, "budget": r.budget,
                "spent": r.spent, "questions": r.questions_seen, "pulls": r.pulls.tolist(),
                "pending": len(self.pending)}

    def route(self, req: RouteRequest) -> dict[str, Any]:
        x = self.embed(req.question)
        with self.lock:
            arm = self.router.select(x, req.costs)
            self.dirty = True
            decision = None
            if arm is not None:
                decision = uuid.uuid4().hex
                self.pending[decision] = (arm, x)
                if len(self.pending) > self.max_pending:
                    self.pending.popitem(last=False)
            self._maybe_save()
            return {"decision": decision, "arm": None if arm is None else self.router.names[arm],
                    "arm_index": arm, "cluster": None if arm is None else self.router.clusters[arm],
                    "remaining_budget": self.router.remaining}

    def feedback(self, req: FeedbackRequest) -> dict[str, Any]:
        with self.lock:
            found = self.pending.pop(req.decision, None)
            if found is None:
                raise KeyError(req.decision)
            arm, x = found
            try:
                self.router.update(arm, x, req.reward, req.cost)
            except KgwiseError:
                self.pending[req.decision] = found  # nothing learned: the caller may correct and resend
                raise
            self.dirty = True
            self._maybe_save()
            return {"arm": self.router.names[arm], "spent": self.router.spent,
                    "remaining_budget": self.router.remaining}

    def _maybe_save(self) -> None:
        if time.monotonic() - self.last_save >= self.save_every_s:
            self._save()

    def _save(self) -> None:
        self.router.save(self.state_file)
        self.dirty = False
        self.last_save = time.monotonic()

    def save(self) -> None:
        """Write the router's state if it changed since the last write."""
        with self.lock:
            if self.dirty:
                self._save()


def routing_api(service: RoutingService) -> APIRouter:
    """The ``/v1/route`` routes over ``service``."""
    api = APIRouter()

    @api.post("/v1/route")
    def route(req: RouteRequest) -> dict[str, Any]:
        """The arm to ask (``arm`` is null when none is affordable: no feedback is then expected)."""
        return service.route(req)

    @api.post("/v1/route/feedback")
    def feedback(req: FeedbackRequest) -> dict[str, Any]:
        """Learn from the outcome of a decision (once per decision)."""
        try:
            return service.feedback(req)
        except KeyError as exc:
            raise HTTPException(status_code=404, detail=f"unknown decision {req.decision!r} (already fed "
                                                        "back, dropped, or from before a restart)") from exc

    return api
