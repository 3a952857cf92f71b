"""Coke over HTTP: ``POST /v1/route`` picks an arm for a question within the budget, ``POST
/v1/route/feedback`` reports what the chosen arm got right and what it really cost.

The reward arrives later than the decision (the caller runs the arm, then grades it), so each decision
gets an id and waits for its feedback while its arm's cost bound stays held in the budget; past
``max_pending`` the oldest waiting decision is called off and its bound released. A thread writes the
router's state and the waiting decisions to the state file every ``save_every_s`` seconds after a change
(and the service writes them when it stops), so a restart, even after a crash, resumes the bandits, the
spending and the decisions still waiting, having lost at most the last ``save_every_s`` seconds.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from fastapi import APIRouter, HTTPException
from pydantic import BaseModel, Field

from kgwise.errors import ConfigError, DataError, KgwiseError
from kgwise.files import read_json, write_text_atomic
from kgwise.route.coke import CokeRouter

__all__ = ["FeedbackRequest", "RouteRequest", "RoutingService", "routing_api"]

Embed = Callable[[str], npt.NDArray[np.float64]]
_log = logging.getLogger("kgwise.server")


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


@dataclass(slots=True)
class _Pending:
    """A decision awaiting feedback: its arm, the cost bound held for it, the question (its embedding is
    recomputed after a restart)."""

    arm: int
    bound: float
    question: str
    embedding: npt.NDArray[np.float64] | None


class RoutingService:
    """A :class:`CokeRouter` loaded from ``state_file``, shared by the request threads; :meth:`close`
    stops the saving thread and writes the state."""

    def __init__(self, state_file: Path, embed: Embed, dim: int, max_pending: int = 10_000,
                 save_every_s: float = 30.0) -> None:
        if max_pending < 1:
            raise ConfigError(f"max_pending must be ≥ 1, got {max_pending}")
        if not save_every_s > 0:
            raise ConfigError(f"save_every_s must be > 0, got {save_every_s}")
        self.state_file = state_file
        self.router, pending = _load(state_file)
        if self.router.dim != dim:
            raise ConfigError(f"router {state_file} expects {self.router.dim}-d question embeddings, the "
                              f"encoder gives {dim}-d")
        self.embed = embed
        self.max_pending = max_pending
        self.save_every_s = save_every_s
        self.pending = pending
        self.lock = threading.Lock()
        self.dirty = False
        self._stop = threading.Event()
        self._saver = threading.Thread(target=self._save_loop, name="kgwise-router-saver", daemon=True)
        self._saver.start()

    def status(self) -> dict[str, Any]:
        r = self.router
        return {"file": str(self.state_file), "arms": r.names, "clusters": r.clusters, "budget": r.budget,
                "spent": r.spent, "reserved": r.reserved, "remaining_budget": r.remaining,
                "overrun": r.overrun, "questions": r.questions_seen, "pulls": r.pulls.tolist(),
                "pending": len(self.pending), "horizon": r.horizon}

    def route(self, req: RouteRequest) -> dict[str, Any]:
        x = self.embed(req.question)
        with self.lock:
            r = self.router
            arm = r.select(x, req.costs)
            self.dirty = True
            decision, reason = None, None
            if arm is not None:
                decision = uuid.uuid4().hex
                self.pending[decision] = _Pending(arm, float(req.costs[arm]), req.question, x)
                if len(self.pending) > self.max_pending:
                    _, dropped = self.pending.popitem(last=False)
                    r.cancel(dropped.arm, dropped.bound)
            else:
                available = r.allowance(r.questions_seen) - r.spent - r.reserved
                limit = f"the paced allowance of question {r.questions_seen}" if r.horizon else "the budget"
                reason = (f"no arm's cost bound (cheapest {min(req.costs):g}) fits in what {limit} leaves: "
                          f"{available:g} ({r.spent:g} spent, {r.reserved:g} held by decisions awaiting "
                          "feedback)")
            return {"decision": decision, "arm": None if arm is None else r.names[arm],
                    "arm_index": arm, "cluster": None if arm is None else r.clusters[arm],
                    "remaining_budget": r.remaining, "reason": reason}

    def feedback(self, req: FeedbackRequest) -> dict[str, Any]:
        with self.lock:
            found = self.pending.pop(req.decision, None)
            if found is None:
                raise KeyError(req.decision)
            if found.embedding is None:  # waited across a restart
                found.embedding = self.embed(found.question)
            overrun = self.router.overrun
            try:
                self.router.update(found.arm, found.embedding, req.reward, req.cost, bound=found.bound)
            except KgwiseError:
                self.pending[req.decision] = found  # nothing learned: the caller may correct and resend
                raise
            self.dirty = True
            out = {"arm": self.router.names[found.arm], "spent": self.router.spent,
                   "remaining_budget": self.router.remaining}
            if self.router.overrun > overrun:
                out["warning"] = (f"cost {req.cost:g} is above the bound {found.bound:g} given for this "
                                  "decision: the budget holds only while costs stay within their bounds")
            return out

    def _state(self) -> str:
        rows = [{"decision": d, "arm": p.arm, "bound": p.bound, "question": p.question}
                for d, p in self.pending.items()]
        return json.dumps({**self.router.state_dict(), "pending": rows})

    def _save_loop(self) -> None:
        while not self._stop.wait(self.save_every_s):
            try:
                self.save()
            except OSError as exc:  # e.g. a full disk: say so and try again at the next tick
                _log.error("cannot write the router state %s: %s", self.state_file, exc)

    def save(self) -> None:
        """Write the router's state and the waiting decisions if they changed since the last write."""
        with self.lock:
            if not self.dirty:
                return
            text = self._state()
            self.dirty = False
        try:
            write_text_atomic(self.state_file, text)
        except OSError:
            with self.lock:
                self.dirty = True
            raise

    def close(self) -> None:
        """Stop the saving thread and write what changed."""
        self._stop.set()
        self._saver.join(timeout=5)
        self.save()


def _load(path: Path) -> tuple[CokeRouter, OrderedDict[str, _Pending]]:
    """The router and the decisions awaiting feedback in a state file; ``DataError`` naming it."""
    state = read_json(path)
    if not isinstance(state, dict):
        raise DataError("not a router state file (expected a JSON object)", path)
    try:
        router = CokeRouter.from_state_dict({k: v for k, v in state.items() if k != "pending"})
        pending = OrderedDict((str(row["decision"]), _Pending(int(row["arm"]), float(row["bound"]),
                                                              str(row["question"]), None))
                              for row in state.get("pending", []))
    except ConfigError as exc:
        raise DataError(str(exc), path) from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"malformed waiting decision ({exc!r})", path) from exc
    held = sorted(b for arm in router.holds for b in arm)
    if sorted(p.bound for p in pending.values()) != held:
        raise DataError("the waiting decisions do not match the cost bounds the router holds", path)
    return router, pending


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
