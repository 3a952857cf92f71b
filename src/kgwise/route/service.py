"""A Coke router in use: its state file, and the decisions that await their outcome.

The reward arrives later than the decision (the caller runs the arm, then grades it), so each decision
gets an id and waits for its feedback while its arm's cost bound stays held in the budget. A waiting
decision ends by its feedback, by :meth:`RoutingService.cancel`, by expiry (``pending_ttl_s`` after it
was made) or, past ``max_pending``, when it is the oldest; each returns its bound to the budget. The state
file holds the router, the waiting decisions and the service's own per-arm cost bounds (``max_costs``:
client-declared bounds are capped by them), so a restart resumes all of them.

One process at a time owns a state file (an OS lock beside its resolved path, released when the process
ends, even by a crash), so ``kgwise serve --router`` and ``kgwise route select`` cannot overwrite each
other's learning and spending. With ``save_every_s``, a thread writes the state that often after a
change: the state is copied under the service lock (milliseconds) and serialised and written outside it,
so routing goes on while it is written; a crash loses at most ``save_every_s`` plus the time of one write.
:meth:`RoutingService.close` writes what changed and releases the file.

Costs are checked: a feedback whose cost is above the bound held for its decision is refused unless the
service was made with ``allow_overrun``, and nothing ever makes the spending non-finite; a state file with
non-finite or negative money is refused on load, and :func:`repair_state` (``kgwise route repair``) is the
operator's way to set it right.
"""

from __future__ import annotations

import copy
import json
import logging
import math
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import numpy.typing as npt
from filelock import Timeout

from kgwise.errors import ConfigError, DataError, KgwiseError
from kgwise.files import owner_lock, read_json, write_text_atomic
from kgwise.route.arms import CLUSTERS
from kgwise.route.coke import CokeRouter

__all__ = ["RepairReport", "RoutingService", "SaveTiming", "UnknownDecisionError", "read_status",
           "repair_state"]

Embed = Callable[[str], npt.NDArray[np.float64]]
_log = logging.getLogger("kgwise.route")
_SERVICE_KEYS = ("pending", "max_costs")  # what the state file holds beside the router's own state


class UnknownDecisionError(KgwiseError):
    """Feedback or cancel for a decision that is not waiting (fed back, cancelled, expired, called off, or
    never made)."""


@dataclass(slots=True)
class _Pending:
    """A decision awaiting feedback: its arm, the cost bound held for it, the question (its embedding is
    recomputed after a restart) and when it was made (seconds since the epoch)."""

    arm: int
    bound: float
    question: str
    embedding: npt.NDArray[np.float64] | None
    created: float


@dataclass(slots=True)
class SaveTiming:
    """How long the last save took: ``copy_s`` under the service lock (routing waits this long),
    ``write_s`` serialising and writing outside it, ``bytes`` written."""

    copy_s: float = 0.0
    write_s: float = 0.0
    bytes: int = 0


@dataclass(slots=True)
class RepairReport:
    """What :func:`repair_state` changed (``changes``: one line each) and where the old file was kept."""

    file: str
    backup: str | None
    changes: list[str] = field(default_factory=list)


def _check_max_costs(max_costs: Sequence[float] | None, names: Sequence[str]) -> list[float] | None:
    if max_costs is None:
        return None
    out = [float(c) for c in max_costs]
    if len(out) != len(names) or not all(math.isfinite(c) and c >= 0 for c in out):
        raise ConfigError(f"max_costs must be {len(names)} finite numbers ≥ 0 (one per arm: "
                          f"{', '.join(names)}), got {list(max_costs)}")
    return out


class RoutingService:
    """The :class:`CokeRouter` of ``state_file`` with its waiting decisions, safe to share between
    threads; a context manager (or :meth:`close`) writes the state back and releases the file.

    ``max_costs`` (per arm, the router's order) replaces the bounds the state file holds; ``pending_ttl_s``:
    waiting decisions expire this long after they were made (None: never); ``allow_overrun``: record a
    feedback cost above its decision's bound instead of refusing it; ``clock``: seconds since the epoch."""

    def __init__(self, state_file: Path, embed: Embed, dim: int, max_pending: int = 10_000,
                 save_every_s: float | None = None, *, pending_ttl_s: float | None = None,
                 max_costs: Sequence[float] | None = None, allow_overrun: bool = False,
                 clock: Callable[[], float] = time.time) -> None:
        if max_pending < 1:
            raise ConfigError(f"max_pending must be ≥ 1, got {max_pending}")
        if save_every_s is not None and not save_every_s > 0:
            raise ConfigError(f"save_every_s must be > 0, got {save_every_s}")
        if pending_ttl_s is not None and not (math.isfinite(pending_ttl_s) and pending_ttl_s > 0):
            raise ConfigError(f"pending_ttl_s must be > 0, got {pending_ttl_s}")
        self.state_file = Path(state_file).resolve()
        self.clock = clock
        self._file_lock = owner_lock(self.state_file)
        try:
            self._file_lock.acquire(timeout=0)
        except Timeout:
            raise ConfigError(f"router {state_file} is in use by another process (a running `kgwise serve "
                              "--router`?); stop it first") from None
        try:
            self.router, self.pending, stored = _load(self.state_file, clock())
            if self.router.dim != dim:
                raise ConfigError(f"router {state_file} expects {self.router.dim}-d question embeddings, the "
                                  f"encoder gives {dim}-d")
            self.max_costs = _check_max_costs(max_costs if max_costs is not None else stored,
                                              self.router.names)
        except BaseException:
            self._file_lock.release()
            raise
        self.embed = embed
        self.max_pending = max_pending
        self.pending_ttl_s = pending_ttl_s
        self.allow_overrun = allow_overrun
        self.lock = threading.Lock()
        self.dirty = max_costs is not None and self.max_costs != stored
        self.last_save = SaveTiming()
        self._gone: OrderedDict[str, str] = OrderedDict()  # recently ended decisions → how they ended
        self._stop = threading.Event()
        self._saver: threading.Thread | None = None
        if save_every_s is not None:
            self._saver = threading.Thread(target=self._save_loop, args=(save_every_s,),
                                           name="kgwise-router-saver", daemon=True)
            self._saver.start()

    def status(self) -> dict[str, Any]:
        """See :func:`read_status`."""
        with self.lock:
            self._expire()
            return _status(self.state_file, self.router, len(self.pending), self.max_costs)

    def bounds(self, costs: Sequence[float] | Mapping[str, float] | None) -> list[float]:
        """The cost bounds a decision holds: ``costs`` (by arm name, or in the router's arm order) capped by
        :attr:`max_costs` per arm, or :attr:`max_costs` when the caller gives none; ``ConfigError`` when
        neither is known."""
        if isinstance(costs, Mapping):
            costs = [float(c) for c in self.router.cost_vector(costs)]
        if costs is None:
            if self.max_costs is None:
                raise ConfigError("costs: required (this router has no cost bounds of its own; `kgwise route "
                                  "init --max-cost` or `serve --route-max-cost` sets them)")
            return list(self.max_costs)
        c = [float(x) for x in costs]
        if len(c) != self.router.n_arms or not all(math.isfinite(x) and x >= 0 for x in c):
            raise ConfigError(f"costs: must be {self.router.n_arms} finite numbers ≥ 0, one per arm "
                              f"({', '.join(self.router.names)})")
        return c if self.max_costs is None else [min(x, m) for x, m in zip(c, self.max_costs, strict=True)]

    def route(self, question: str, costs: Sequence[float] | Mapping[str, float] | None = None
              ) -> dict[str, Any]:
        """The arm for ``question`` given each arm's cost bound (see :meth:`bounds`), with the decision id
        its feedback must name; ``arm`` is None (and ``reason`` says why) when no arm is affordable."""
        bounds = self.bounds(costs)
        x = self.embed(question)
        with self.lock:
            self._expire()
            r = self.router
            name = r.pull(x, bounds)
            arm = None if name is None else r.index(name)
            self.dirty = True
            decision, reason = None, None
            if arm is not None:
                decision = uuid.uuid4().hex
                self.pending[decision] = _Pending(arm, float(bounds[arm]), question, x, self.clock())
                if len(self.pending) > self.max_pending:
                    self._end(next(iter(self.pending)), "called off: more than max_pending were waiting")
            else:
                available = r.allowance(r.questions_seen) - r.spent - r.reserved
                limit = f"the paced allowance of question {r.questions_seen}" if r.horizon else "the budget"
                reason = (f"no arm's cost bound (cheapest {min(bounds):g}) fits in what {limit} leaves: "
                          f"{available:g} ({r.spent:g} spent, {r.reserved:g} held by decisions awaiting "
                          "feedback)")
            return {"decision": decision, "arm": None if arm is None else r.names[arm],
                    "arm_index": arm, "cluster": None if arm is None else r.clusters[arm],
                    "bound": None if arm is None else bounds[arm], "remaining_budget": r.remaining,
                    "expires_in_s": self.pending_ttl_s if arm is not None else None, "reason": reason}

    def feedback(self, decision: str, reward: float, cost: float,
                 observed: Mapping[str, float] | None = None) -> dict[str, Any]:
        """Learn from a decision's outcome (``reward`` in [0, 1], ``cost`` as really spent, at most the
        decision's bound unless the service allows overruns), once per decision; ``UnknownDecisionError``
        for one that is not waiting, ``BudgetExceededError`` for a cost above its bound (the decision stays
        waiting). ``observed``: the rewards of other arms that answered the same question at no cost to the
        budget (a free KG model run on every question), by arm name (:meth:`CokeRouter.observe`)."""
        with self.lock:
            self._expire()
            found = self._waiting(decision)
            extra = self._observed(observed or {}, found.arm)
            if found.embedding is None:  # waited across a restart
                found.embedding = self.embed(found.question)
            overrun = self.router.overrun
            self.router.update(self.router.names[found.arm], found.embedding, reward, cost, bound=found.bound,
                               allow_overrun=self.allow_overrun)  # refused: nothing learned, still waiting
            del self.pending[decision]
            self._remember(decision, "fed back")
            for arm, r in extra:
                self.router.observe(self.router.names[arm], found.embedding, r)
            self.dirty = True
            out = {"arm": self.router.names[found.arm], "spent": self.router.spent,
                   "remaining_budget": self.router.remaining}
            if self.router.overrun > overrun:
                out["warning"] = (f"cost {cost:g} is above the bound {found.bound:g} given for this "
                                  "decision (recorded: the service allows overruns): the budget holds only "
                                  "while costs stay within their bounds")
            return out

    def cancel(self, decision: str) -> dict[str, Any]:
        """Call off a waiting decision whose arm will not be run: its bound returns to the budget."""
        with self.lock:
            self._expire()
            found = self._waiting(decision)
            self._end(decision, "cancelled")
            return {"arm": self.router.names[found.arm], "released": found.bound,
                    "remaining_budget": self.router.remaining}

    def expire(self) -> int:
        """End the waiting decisions older than ``pending_ttl_s``; how many."""
        with self.lock:
            return self._expire()

    def _waiting(self, decision: str) -> _Pending:
        found = self.pending.get(decision)
        if found is None:
            how = self._gone.get(decision, "already fed back, cancelled, expired, called off, or not made")
            raise UnknownDecisionError(f"decision: unknown decision {decision[:64]!r} ({how}; router "
                                       f"{self.state_file})")
        return found

    def _end(self, decision: str, how: str) -> None:
        """Drop a waiting decision and release its bound (under the lock)."""
        p = self.pending.pop(decision)
        self.router.cancel(self.router.names[p.arm], p.bound)
        self._remember(decision, how)
        self.dirty = True

    def _remember(self, decision: str, how: str) -> None:
        self._gone[decision] = how
        while len(self._gone) > self.max_pending:
            self._gone.popitem(last=False)

    def _expire(self) -> int:
        if self.pending_ttl_s is None or not self.pending:
            return 0
        cutoff = self.clock() - self.pending_ttl_s
        old = []
        for d, p in self.pending.items():  # oldest first: stop at the first that has not expired
            if p.created > cutoff:
                break
            old.append(d)
        for d in old:
            self._end(d, f"expired: no feedback within {self.pending_ttl_s:g} s")
        return len(old)

    def _observed(self, observed: Mapping[str, float], chosen: int) -> list[tuple[int, float]]:
        """``observed`` as (arm index, reward), checked before anything is learned."""
        out = []
        for name, reward in observed.items():
            if name not in self.router.names:
                raise ConfigError(f"observed: arm {name[:64]!r} is not one of the router's arms "
                                  f"({', '.join(self.router.names)})")
            arm = self.router.names.index(name)
            if arm == chosen:
                raise ConfigError(f"observed: {name!r} is the decision's own arm: its outcome is the "
                                  "feedback's reward")
            if not 0.0 <= reward <= 1.0:
                raise ConfigError(f"observed: reward of {name!r} must lie in [0, 1], got {reward}")
            out.append((arm, float(reward)))
        return out

    def _snapshot(self) -> tuple[CokeRouter, list[dict[str, Any]], list[float] | None]:
        """A copy of what the state file holds (under the lock: arrays are copied, not serialised)."""
        rows = [{"decision": d, "arm": self.router.names[p.arm], "bound": p.bound, "question": p.question,
                 "created": p.created} for d, p in self.pending.items()]
        return copy.deepcopy(self.router), rows, None if self.max_costs is None else list(self.max_costs)

    def _save_loop(self, every_s: float) -> None:
        while not self._stop.wait(every_s):
            try:
                self.save()
            except OSError as exc:  # e.g. a full disk: say so and try again at the next tick
                _log.error("cannot write the router state %s: %s", self.state_file, exc)

    def save(self) -> None:
        """Write the router's state and the waiting decisions if they changed since the last write: copied
        under the lock, serialised and written outside it (:attr:`last_save` times both)."""
        t0 = time.perf_counter()
        with self.lock:
            self._expire()
            if not self.dirty:
                return
            router, rows, max_costs = self._snapshot()
            self.dirty = False
        t1 = time.perf_counter()
        try:
            text = json.dumps({**router.state_dict(), "pending": rows, "max_costs": max_costs},
                              allow_nan=False)
            write_text_atomic(self.state_file, text)
        except (OSError, ValueError):
            with self.lock:
                self.dirty = True
            raise
        self.last_save = SaveTiming(t1 - t0, time.perf_counter() - t1, len(text))

    def close(self) -> None:
        """Stop the saving thread, write what changed, and release the state file."""
        self._stop.set()
        if self._saver is not None:
            self._saver.join(timeout=30)
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
    """Budget, spending (``reserved``: held by waiting decisions; ``overrun``: costs above their bounds,
    recorded only where overruns were allowed), questions routed, pulls, the service's per-arm cost bounds
    and each cluster's posterior mean accuracy (Eq. 5) of a state file, read without taking it (it may be
    in use by a server)."""
    router, pending, max_costs = _load(state_file, time.time())
    return _status(state_file, router, len(pending), max_costs)


def _status(state_file: Path, r: CokeRouter, pending: int, max_costs: list[float] | None) -> dict[str, Any]:
    return {"file": str(state_file), "arms": r.names, "clusters": r.clusters, "budget": r.budget,
            "spent": r.spent, "reserved": r.reserved, "remaining_budget": r.remaining, "overrun": r.overrun,
            "questions": r.questions_seen, "pulls": r.pulls.tolist(), "pending": pending,
            "max_costs": max_costs, "horizon": r.horizon, "pacing": r.config.pacing, "price": r.price,
            "cluster_accuracy": dict(zip(CLUSTERS, (round(float(m), 4) for m in r.thompson.mean()),
                                         strict=True))}


def _load(path: Path, now: float) -> tuple[CokeRouter, OrderedDict[str, _Pending], list[float] | None]:
    """The router, the decisions awaiting feedback (made ``now`` when the file does not say) and the
    per-arm cost bounds of a state file; ``DataError`` naming it."""
    state = read_json(path)
    if not isinstance(state, dict):
        raise DataError("not a router state file (expected a JSON object)", path)
    try:
        router = CokeRouter.from_state_dict({k: v for k, v in state.items() if k not in _SERVICE_KEYS})
        pending = OrderedDict((str(row["decision"]),
                               _Pending(_arm_index(router, row["arm"]), float(row["bound"]),
                                        str(row["question"]), None, float(row.get("created", now))))
                              for row in state.get("pending", []))
        max_costs = _check_max_costs(state.get("max_costs"), router.names)
    except ConfigError as exc:
        raise DataError(str(exc), path) from exc
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"malformed waiting decision ({exc!r})", path) from exc
    held = sorted(b for arm in router.holds for b in arm)
    if sorted(p.bound for p in pending.values()) != held:
        raise DataError("the waiting decisions do not match the cost bounds the router holds", path)
    return router, pending, max_costs


def _arm_index(router: CokeRouter, arm: object) -> int:
    """A waiting decision's arm as a position: the file names it (or, written before decisions named their
    arm, gives its position)."""
    if isinstance(arm, int) and not isinstance(arm, bool) and 0 <= arm < router.n_arms:
        return arm
    if isinstance(arm, str) and arm in router.names:
        return router.index(arm)
    raise ConfigError(f"a waiting decision's arm {arm!r} is not one of the router's arms "
                      f"({', '.join(router.names)})")


def _fine(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x >= 0


def repair_state(path: Path, spent: float | None = None, drop_pending: bool = False,
                 max_costs: Sequence[float] | None = None) -> RepairReport:
    """Set a router state file right (``kgwise route repair``), taking its lock (refused while a server
    owns it): ``spent`` replaces the spending (required when the file's is not a finite number ≥ 0: what
    was really spent is then unknown); per-arm spending, failure spending, cost bounds seen and the overrun
    that are not finite numbers ≥ 0 become 0; ``drop_pending`` (or waiting decisions that do not match the
    held bounds, or hold a bad bound) ends every waiting decision and releases its bound; ``max_costs``
    sets the service's per-arm bounds. The old file is kept beside it (``.bak-<time>``) and the result
    must load, else nothing is written."""
    path = Path(path)
    if spent is not None and not _fine(spent):
        raise ConfigError(f"--spent must be a finite number ≥ 0, got {spent}")
    with owned_state(path):
        raw = path.read_text(encoding="utf-8")
        state = read_json(path)
        if not isinstance(state, dict) or state.get("kind") != "CokeRouter":
            raise DataError("not a router state file (expected a CokeRouter JSON object)", path)
        changes: list[str] = []
        if spent is not None:
            changes.append(f"spent: {state.get('spent')!r} -> {spent:g}")
            state["spent"] = float(spent)
        elif not _fine(state.get("spent")):
            raise ConfigError(f"{path}: spent is {state.get('spent')!r}; what was really spent is unknown: "
                              "give it with --spent")
        if not _fine(state.get("overrun", 0.0)):
            changes.append(f"overrun: {state.get('overrun')!r} -> 0")
            state["overrun"] = 0.0
        for key in ("arm_cost", "arm_fail_cost", "cost_seen"):
            values = state.get(key)
            if isinstance(values, list):
                bad = [i for i, v in enumerate(values) if not _fine(v)]
                for i in bad:
                    changes.append(f"{key}[{i}]: {values[i]!r} -> 0")
                    values[i] = 0.0
        holds = state.get("holds") or []
        pending = state.get("pending") or []
        bounds_ok = all(isinstance(h, list) and all(_fine(b) for b in h) for h in holds)
        matching = bounds_ok and sorted(float(b) for h in holds for b in h) == sorted(
            float(p.get("bound", -1)) if isinstance(p, dict) and _fine(p.get("bound")) else -1.0
            for p in pending)
        if drop_pending or not matching:
            why = "asked" if drop_pending else "they did not match the held cost bounds"
            changes.append(f"waiting decisions: {len(pending)} ended, their bounds released ({why})")
            state["pending"] = []
            state["holds"] = [[] for _ in _state_names(state)]
        if max_costs is not None:
            names = _state_names(state)
            state["max_costs"] = _check_max_costs(max_costs, names)
            changes.append(f"max_costs: -> {state['max_costs']}")
        text = json.dumps(state, allow_nan=False)
        try:
            _load_text(path, state)
        except DataError as exc:
            raise DataError(f"still not a valid router state after the repair: {exc}", path) from exc
        backup = None
        if changes:
            stamp = time.strftime("%Y%m%dT%H%M%S")
            backup_path = path.resolve().with_name(f"{path.resolve().name}.bak-{stamp}")
            write_text_atomic(backup_path, raw)
            write_text_atomic(path, text)
            backup = str(backup_path)
        return RepairReport(str(path), backup, changes)


def _state_names(state: Mapping[str, Any]) -> list[str]:
    """The arm names a state file holds (records since version 2, a ``names`` list before)."""
    arms = state.get("arms")
    if isinstance(arms, list):
        return [str(a.get("name")) if isinstance(a, dict) else str(a) for a in arms]
    return [str(n) for n in state.get("names", [])]


@contextmanager
def owned_state(path: str | Path) -> Iterator[None]:
    """Hold the owner lock of the state file ``path`` for the block; ``ConfigError`` when another process
    (a running ``kgwise serve --router``) owns it."""
    lock = owner_lock(path)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise ConfigError(f"router {path} is in use by another process (a running `kgwise serve --router`?); "
                          "stop it first") from None
    try:
        yield
    finally:
        lock.release()


def _load_text(path: Path, state: dict[str, Any]) -> None:
    """Check that ``state`` would load (as :func:`_load` does), naming ``path`` in the error."""
    try:
        router = CokeRouter.from_state_dict({k: v for k, v in state.items() if k not in _SERVICE_KEYS})
        _check_max_costs(state.get("max_costs"), router.names)
    except ConfigError as exc:
        raise DataError(str(exc), path) from exc
