"""A Coke router in use: its state file, and the decisions that await their outcome.

The reward arrives later than the decision (the caller runs the arm, then grades it), so each decision
gets an id and waits for its feedback while its arm's cost bound stays held in the budget; past
``max_pending`` the oldest waiting decision is called off and its bound released. The state file holds
the router and the waiting decisions, so a restart resumes both. One process at a time owns a state file
(an OS lock on a file beside it, released when the process ends, even by a crash), so ``kgwise serve
--router`` and ``kgwise route select`` cannot overwrite each other's learning and spending. With
``save_every_s``, a thread writes the state that often after a change (a crash loses at most that much);
:meth:`RoutingService.close` writes what changed and releases the file.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt
from filelock import FileLock, Timeout

from kgwise.errors import ConfigError, DataError, KgwiseError
from kgwise.files import read_json, write_text_atomic
from kgwise.route.arms import CLUSTERS
from kgwise.route.coke import CokeRouter

__all__ = ["RoutingService", "UnknownDecisionError", "read_status"]

Embed = Callable[[str], npt.NDArray[np.float64]]
_log = logging.getLogger("kgwise.route")


class UnknownDecisionError(KgwiseError):
    """Feedback for a decision that is not waiting (already fed back, called off, or never made)."""


@dataclass(slots=True)
class _Pending:
    """A decision awaiting feedback: its arm's name, the cost bound held for it, the question (its embedding
    is recomputed after a restart)."""

    arm: str
    bound: float
    question: str
    embedding: npt.NDArray[np.float64] | None


class RoutingService:
    """The :class:`CokeRouter` of ``state_file`` with its waiting decisions, safe to share between
    threads; a context manager (or :meth:`close`) writes the state back and releases the file."""

    def __init__(self, state_file: Path, embed: Embed, dim: int, max_pending: int = 10_000,
                 save_every_s: float | None = None) -> None:
        if max_pending < 1:
            raise ConfigError(f"max_pending must be ≥ 1, got {max_pending}")
        if save_every_s is not None and not save_every_s > 0:
            raise ConfigError(f"save_every_s must be > 0, got {save_every_s}")
        self.state_file = state_file
        self._file_lock = FileLock(f"{state_file}.lock")
        try:
            self._file_lock.acquire(timeout=0)
        except Timeout:
            raise ConfigError(f"router {state_file} is in use by another process (a running `kgwise serve "
                              "--router`?); stop it first") from None
        try:
            self.router, self.pending = _load(state_file)
            if self.router.dim != dim:
                raise ConfigError(f"router {state_file} expects {self.router.dim}-d question embeddings, the "
                                  f"encoder gives {dim}-d")
        except BaseException:
            self._file_lock.release()
            raise
        self.embed = embed
        self.max_pending = max_pending
        self.lock = threading.Lock()
        self.dirty = False
        self._stop = threading.Event()
        self._saver: threading.Thread | None = None
        if save_every_s is not None:
            self._saver = threading.Thread(target=self._save_loop, args=(save_every_s,),
                                           name="kgwise-router-saver", daemon=True)
            self._saver.start()

    def status(self) -> dict[str, Any]:
        """See :func:`read_status`."""
        with self.lock:
            return _status(self.state_file, self.router, len(self.pending))

    def route(self, question: str, costs: Sequence[float] | Mapping[str, float]) -> dict[str, Any]:
        """The arm for ``question`` given each arm's cost bound (by arm name, or in the router's arm order),
        with the decision id its feedback must name; ``arm`` is None (and ``reason`` says why) when no arm
        is affordable."""
        x = self.embed(question)
        with self.lock:
            r = self.router
            bounds = r.cost_vector(costs)
            arm = r.pull(x, bounds)
            self.dirty = True
            decision, reason = None, None
            if arm is not None:
                decision = uuid.uuid4().hex
                self.pending[decision] = _Pending(arm, float(bounds[r.index(arm)]), question, x)
                if len(self.pending) > self.max_pending:
                    _, dropped = self.pending.popitem(last=False)
                    r.cancel(dropped.arm, dropped.bound)
            else:
                available = r.allowance(r.questions_seen) - r.spent - r.reserved
                limit = f"the paced allowance of question {r.questions_seen}" if r.horizon else "the budget"
                reason = (f"no arm's cost bound (cheapest {bounds.min():g}) fits in what {limit} leaves: "
                          f"{available:g} ({r.spent:g} spent, {r.reserved:g} held by decisions awaiting "
                          "feedback)")
            index = None if arm is None else r.index(arm)
            return {"decision": decision, "arm": arm,
                    "arm_index": index, "cluster": None if index is None else r.clusters[index],
                    "remaining_budget": r.remaining, "reason": reason}

    def feedback(self, decision: str, reward: float, cost: float,
                 observed: Mapping[str, float] | None = None) -> dict[str, Any]:
        """Learn from a decision's outcome (``reward`` in [0, 1], ``cost`` as really spent), once per
        decision; ``UnknownDecisionError`` for one that is not waiting. ``observed``: the rewards of other
        arms that answered the same question at no cost to the budget (a free KG model run on every
        question), by arm name (:meth:`CokeRouter.observe`)."""
        with self.lock:
            found = self.pending.get(decision)
            if found is None:
                raise UnknownDecisionError(f"unknown decision {decision!r} (already fed back, called off, or "
                                           f"not made with {self.state_file})")
            extra = self._observed(observed or {}, found.arm)
            del self.pending[decision]
            if found.embedding is None:  # waited across a restart
                found.embedding = self.embed(found.question)
            overrun = self.router.overrun
            try:
                self.router.update(found.arm, found.embedding, reward, cost, bound=found.bound)
            except KgwiseError:
                self.pending[decision] = found  # nothing learned: the caller may correct and resend
                raise
            for arm, r in extra:
                self.router.observe(arm, found.embedding, r)
            self.dirty = True
            out = {"arm": found.arm, "spent": self.router.spent,
                   "remaining_budget": self.router.remaining}
            if self.router.overrun > overrun:
                out["warning"] = (f"cost {cost:g} is above the bound {found.bound:g} given for this "
                                  "decision: the budget holds only while costs stay within their bounds")
            return out

    def _observed(self, observed: Mapping[str, float], chosen: str) -> list[tuple[str, float]]:
        """``observed`` as (arm name, reward), checked before anything is learned."""
        out = []
        for name, reward in observed.items():
            if name not in self.router.names:
                raise ConfigError(f"observed arm {name!r} is not one of the router's arms "
                                  f"({', '.join(self.router.names)})")
            if name == chosen:
                raise ConfigError(f"{name!r} is the decision's own arm: its outcome is the feedback's reward")
            if not 0.0 <= reward <= 1.0:
                raise ConfigError(f"observed reward of {name!r} must lie in [0, 1], got {reward}")
            out.append((name, float(reward)))
        return out

    def _state(self) -> str:
        rows = [{"decision": d, "arm": p.arm, "bound": p.bound, "question": p.question}
                for d, p in self.pending.items()]
        return json.dumps({**self.router.state_dict(), "pending": rows})

    def _save_loop(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
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
        """Stop the saving thread, write what changed, and release the state file."""
        self._stop.set()
        if self._saver is not None:
            self._saver.join(timeout=5)
        try:
            self.save()
        finally:
            self._file_lock.release()

    def __enter__(self) -> RoutingService:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def read_status(state_file: Path) -> dict[str, Any]:
    """Budget, spending (``reserved``: held by waiting decisions; ``overrun``: costs above their bounds),
    questions routed, pulls and each cluster's posterior mean accuracy (Eq. 5) of a state file, read
    without taking it (it may be in use by a server)."""
    router, pending = _load(state_file)
    return _status(state_file, router, len(pending))


def _status(state_file: Path, r: CokeRouter, pending: int) -> dict[str, Any]:
    return {"file": str(state_file), "arms": r.names, "clusters": r.clusters, "budget": r.budget,
            "spent": r.spent, "reserved": r.reserved, "remaining_budget": r.remaining, "overrun": r.overrun,
            "questions": r.questions_seen, "pulls": r.pulls.tolist(), "pending": pending,
            "horizon": r.horizon, "pacing": r.config.pacing, "price": r.price,
            "cluster_accuracy": dict(zip(CLUSTERS, (round(float(m), 4) for m in r.thompson.mean()),
                                         strict=True))}


def _load(path: Path) -> tuple[CokeRouter, OrderedDict[str, _Pending]]:
    """The router and the decisions awaiting feedback in a state file; ``DataError`` naming it."""
    state = read_json(path)
    if not isinstance(state, dict):
        raise DataError("not a router state file (expected a JSON object)", path)
    try:
        router = CokeRouter.from_state_dict({k: v for k, v in state.items() if k != "pending"})
        pending = OrderedDict(
            (str(row["decision"]),
             _Pending(_arm_name(router, row["arm"]), float(row["bound"]), str(row["question"]), None))
            for row in state.get("pending", []))
    except ConfigError as exc:
        raise DataError(str(exc), path) from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"malformed waiting decision ({exc!r})", path) from exc
    held = sorted(b for arm in router.holds for b in arm)
    if sorted(p.bound for p in pending.values()) != held:
        raise DataError("the waiting decisions do not match the cost bounds the router holds", path)
    return router, pending


def _arm_name(router: CokeRouter, arm: object) -> str:
    """A waiting decision's arm: its name, or (a state file written before decisions named their arm) its
    position among the router's arms."""
    if isinstance(arm, int) and not isinstance(arm, bool) and 0 <= arm < router.n_arms:
        return router.names[arm]
    if isinstance(arm, str) and arm in router.names:
        return arm
    raise ConfigError(f"a waiting decision's arm {arm!r} is not one of the router's arms "
                      f"({', '.join(router.names)})")
