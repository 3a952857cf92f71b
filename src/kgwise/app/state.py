"""The pipeline's state directory: router, decisions awaiting feedback, per-arm calibrations and live
coverage counts, owned by one process at a time.

Files:

* ``state.json`` — a snapshot (written atomically, :func:`kgwise.files.write_text_atomic`): the router
  (:meth:`kgwise.route.coke.CokeRouter.state_dict`) and its context (``question``, ``question+free``
  or ``free``, :mod:`kgwise.app.router`; a snapshot without one, written before contexts existed, is
  ``question``), the pending decisions, the ids of recently settled
  ones, per arm the live coverage counts, and the sequence number of the last event it holds;
* ``journal.jsonl`` — every change since the snapshot, one event per line: a routing decision (``select``:
  the embedding and cost bounds, so that replaying it through the snapshot's router reproduces the same
  draw), its answer (``pending``: the answer is paid here, its hold released), a call called off
  (``cancel``), a feedback (``feedback``: the router learns); for an external arm (the caller runs it,
  :mod:`kgwise.app.external`), its routing decision (``route``: its bound held, with the question and when
  it was made), its settle (``settle``: paid and learnt at once) or its end unsettled (``end``: cancelled
  or expired, its bound released). Events are written as they happen and made
  durable by :meth:`StateDir.sync` (fsync), which the pipeline calls outside its lock before it acknowledges
  an answer or a feedback: one fsync covers the events of every request written before it (a group commit),
  and a ``select`` lost at a kill is one that would be called off anyway. Opening the directory replays the
  events after the snapshot through the same methods that made them, so a kill loses no acknowledged answer
  or feedback. Once the journal holds ``snapshot_every`` events and at least as many bytes as the last
  snapshot (so that snapshots cost at most as much writing as the journal itself, however large the state
  grows, and opening replays at most that much), the state is copied and the journal set aside as
  ``journal.jsonl.SEQ`` (fsync'ed), both under the caller's lock (a few ms); a background thread then writes
  the snapshot and removes the segments it holds, so requests never wait for a large snapshot to be written
  (a kill before it is done leaves the segment, which replay reads first). :meth:`StateDir.close` snapshots
  in the foreground. A decision whose arm was running at the kill (selected, never answered) is called off
  on replay (``recovered``). Embeddings are stored as base64 float64 (exact, and fast to write); lists of
  numbers, as older files hold them, are read too;
* ``calibration.json`` — the held-out calibration questions written by :func:`kgwise.app.fit.fit`
  (:class:`kgwise.app.calibration.HeldOutCalibration`);
* ``uag.json`` — UAG's calibration for open questions written by ``fit`` (:mod:`kgwise.app.open_sets`);
* ``prompt-bandits/ARM-HASH.npz`` — each inject arm's prompt bandit learnt by ``fit``
  (:mod:`kgwise.app.prompt_fit`);
* the lock — an ``flock`` on the state directory itself (:class:`kgwise.app.journal.DirectoryLock`) held
  while a :class:`StateDir` is open; a second process gets a ``ConfigError`` instead of overwriting the
  first one's learning and spending, and deleting a file cannot break it;
* ``spend`` — the spend mark (:class:`kgwise.app.journal.SpendMark`): spend only grows, whatever happens
  to the journal or the snapshot;
* ``set-aside/`` — journal lines that were torn or corrupt, kept with where they were and why.

Faults (:mod:`kgwise.app.journal`): journal lines are framed with a CRC-32; a torn or corrupt line is set
aside, counted and named (:attr:`StateDir.warnings`) and replay goes on; a write or fsync error makes the
state read-only (:class:`~kgwise.app.journal.StateReadOnlyError`) until a write succeeds again. A change of
budget in the config is a journalled ``budget`` event (the spend stays); a router made for other arms is
refused, unless opened to be refitted (``refit=True``): :meth:`StateDir.replace_router` then starts the
fit's router from its spend.

An answer is paid when it is made: decisions awaiting feedback hold no budget, and one that never gets
feedback (an OpenAI client seldom sends any) costs nothing but its memory — the newest
:data:`PENDING_KEPT` wait, older ones are dropped and counted (``expired``). State files of version 1
(paid at feedback) are migrated when opened: their waiting decisions are paid then. An external arm's
decision is the exception: its cost is known only when the caller settles it, so its bound stays held until
then (or until it is called off); they wait across restarts. Version 3 added them (``routed``); versions 1
and 2 read as having none.

Live coverage: for each arm, ``n`` answers whose feedback told whether the set held
the truth and ``covered`` of them. The Clopper–Pearson interval at confidence ``1 − δ`` bounds the true
coverage; *drift* is flagged when its upper end lies below ``1 − α`` (coverage below target beyond
noise, one-sided level δ). Only sets their calibration certified count: an open answer's set given
without guarantee (its arm's held-out questions certified nothing) promises no coverage, and counting it
would hide drift (UAG's largest set covers more) or raise a false one; it is counted apart
(``uncertified``).
"""

from __future__ import annotations

import base64
import copy
import json
import logging
import math
import os
import re
import threading
import time
from collections import OrderedDict
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from scipy.stats import beta as beta_dist

from kgwise.app.calibration import HeldOutCalibration
from kgwise.app.config import CONTEXTS, Context, PipelineConfig, reads_free
from kgwise.app.journal import (
    BadLine,
    DirectoryLock,
    Fsync,
    Journal,
    SpendMark,
    StateReadOnlyError,
    read_events,
    set_aside,
)
from kgwise.app.router import RouterAdapter, context_width
from kgwise.errors import ConfigError, DataError
from kgwise.files import read_json, short_hash, write_text_atomic
from kgwise.types import Serialisable

if TYPE_CHECKING:
    from kgwise.inject.bandit import PromptBandit

__all__ = [
    "PENDING_KEPT",
    "CoverageCount",
    "Pending",
    "RepairReport",
    "Routed",
    "StateDir",
    "StateReadOnlyError",
    "clopper_pearson",
    "counts_as_right",
    "decode_vector",
    "encode_vector",
    "repair",
]

STATE_FILE = "state.json"
JOURNAL_FILE = "journal.jsonl"
CALIBRATION_FILE = "calibration.json"
PROMPT_BANDITS = "prompt-bandits"
UAG_FILE = "uag.json"
SPEND_FILE = "spend"
SETTLED_KEPT = 10_000
PENDING_KEPT = 10_000
STATE_VERSION = 3


def counts_as_right(reward: float) -> bool:
    """Whether a feedback's reward says the answer was right: a reward of at least one half."""
    return reward >= 0.5


def encode_vector(x: list[float]) -> str:
    """A vector as base64 of its float64 bytes (exact)."""
    import numpy as np

    return base64.b64encode(np.asarray(x, dtype="<f8").tobytes()).decode("ascii")


def decode_vector(v: object) -> list[float]:
    """Inverse of :func:`encode_vector`; a list of numbers (older files) is read as it is."""
    import numpy as np

    if isinstance(v, str):
        return np.frombuffer(base64.b64decode(v, validate=True), dtype="<f8").tolist()
    if isinstance(v, list):
        return [float(e) for e in v]
    raise ValueError(f"an embedding must be a base64 string or a list of numbers, got {type(v).__name__}")


def clopper_pearson(k: int, n: int, delta: float) -> tuple[float, float]:
    """The two one-sided Clopper–Pearson bounds at level ``delta`` each on a binomial rate with ``k`` of
    ``n`` successes: ``P(p ≥ lower) ≥ 1 − δ`` and ``P(p ≤ upper) ≥ 1 − δ``; ``(0, 1)`` when ``n = 0``."""
    if not 0 <= k <= n:
        raise ConfigError(f"need 0 ≤ k ≤ n, got k={k}, n={n}")
    lower = 0.0 if k == 0 else float(beta_dist.ppf(delta, k, n - k + 1))
    upper = 1.0 if k == n else float(beta_dist.ppf(1.0 - delta, k + 1, n - k))
    return lower, upper


@dataclass(slots=True)
class CoverageCount:
    """Feedback on one arm's sets: ``n`` decided (the truth known to be in the set or not), ``covered``
    of them, ``undetermined`` (feedback that did not reveal the truth, e.g. ``correct=False`` on a set of
    several choices); ``graded``: all feedback on the arm's answers, ``correct`` of them (reward ≥ 0.5);
    ``uncertified``: feedback on sets given without a calibration guarantee, not in ``n``."""

    n: int = 0
    covered: int = 0
    undetermined: int = 0
    graded: int = 0
    correct: int = 0
    uncertified: int = 0

    def add(self, other: CoverageCount) -> None:
        """Add ``other``'s counts to these."""
        for f in fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


@dataclass(slots=True)
class Pending:
    """A decision awaiting feedback: the question, the arm and the cost bound held while it answered,
    what it really cost (paid when it answered), the embedding, the answer and its set, the free arms'
    answers, and whether the set's calibration certified it (live coverage counts only those)."""

    decision: str
    text: str
    choices: list[str]
    arm: str
    bound: float
    cost: float
    embedding: list[float]
    prediction: str
    answer_set: list[str] | None
    observed: dict[str, str] = field(default_factory=dict)
    certified: bool = True
    _json: str | None = field(default=None, repr=False, compare=False)

    def to_json(self) -> str:
        """:meth:`to_dict` as JSON, encoded once (the journal and every snapshot after it reuse it)."""
        if self._json is None:
            self._json = json.dumps(self.to_dict())
        return self._json

    def to_dict(self) -> dict[str, Any]:
        return {"decision": self.decision, "text": self.text, "choices": self.choices, "arm": self.arm,
                "bound": self.bound, "cost": self.cost, "embedding": encode_vector(self.embedding),
                "prediction": self.prediction, "answer_set": self.answer_set, "observed": self.observed,
                "certified": self.certified}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Pending:
        return cls(str(d["decision"]), str(d["text"]), [str(c) for c in d["choices"]], str(d["arm"]),
                   float(d["bound"]), float(d["cost"]), decode_vector(d["embedding"]),
                   str(d["prediction"]),
                   None if d["answer_set"] is None else [str(x) for x in d["answer_set"]],
                   {str(k): str(v) for k, v in d.get("observed", {}).items()}, bool(d.get("certified", True)))


@dataclass(slots=True)
class Routed:
    """An external arm's decision awaiting its settle: the question, the arm, the cost bound it holds, the
    router context it was picked on, and when it was made (seconds since the epoch)."""

    decision: str
    text: str
    arm: str
    bound: float
    embedding: list[float]
    created: float

    def to_dict(self) -> dict[str, Any]:
        return {"decision": self.decision, "text": self.text, "arm": self.arm, "bound": self.bound,
                "embedding": encode_vector(self.embedding), "created": self.created}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Routed:
        return cls(str(d["decision"]), str(d["text"]), str(d["arm"]), float(d["bound"]),
                   decode_vector(d["embedding"]), float(d["created"]))


class StateFiles:
    """The files a pipeline's state keeps in its local folder ``root`` (a PostgreSQL state keeps copies of
    them there): the multiple-choice calibration, UAG's for open questions, each prompt-learning arm's
    bandit."""

    root: Path

    @property
    def calibration_file(self) -> Path:
        return self.root / CALIBRATION_FILE

    @property
    def uag_file(self) -> Path:
        return self.root / UAG_FILE

    def prompt_bandit_file(self, arm: str) -> Path:
        """Where ``arm``'s learnt prompt bandit is kept."""
        return self.root / PROMPT_BANDITS / f"{re.sub(r'[^A-Za-z0-9_.+-]', '_', arm)}-{short_hash(arm)}.npz"

    def prompt_bandit(self, arm: str) -> PromptBandit | None:
        """The prompt bandit ``kgwise fit`` learnt for ``arm``, if any (``DataError`` naming a broken
        file)."""
        from kgwise.inject.bandit import PromptBandit

        path = self.prompt_bandit_file(arm)
        return PromptBandit.load(path) if path.is_file() else None


class StateDir(StateFiles):
    """An open state directory (a context manager: :meth:`close` writes and releases the lock); ``dim``:
    the question encoder's dimension; ``fsync``: how the journal is made durable (``os.fsync``; a test
    passes a failing double); ``refit``: a router made for other arms or contexts is not refused but kept
    as it is on disk (:attr:`mismatch`; no answer or feedback) until :meth:`replace_router` — for
    ``kgwise fit``, which replaces the router anyway."""

    def __init__(self, root: Path, config: PipelineConfig, dim: int, snapshot_every: int = 500,
                 fsync: Fsync = os.fsync, refit: bool = False) -> None:
        if snapshot_every < 1:
            raise ConfigError(f"snapshot_every must be ≥ 1 event, got {snapshot_every}")
        self.root = root
        self.snapshot_every = snapshot_every
        self._snapshot_bytes = 0  # size of the last snapshot written
        self.seq = 0
        self.expired = 0
        self._since_snapshot = 0
        self._replaying = False
        self.selected: dict[str, tuple[str, float]] = {}
        self.recovered: list[str] = []
        self.set_aside: list[BadLine] = []  # journal lines not replayed (kept in set-aside/)
        self._torn: tuple[int | None, OSError | None] = (None, None)  # a tail not set aside yet: (end, why)
        self._tail: list[BadLine] = []
        self.mismatch: DataError | None = None  # refit: the saved router is for another config
        self.warnings: list[str] = []  # what opening found and repaired (status shows them)
        self.routed: OrderedDict[str, Routed] = OrderedDict()  # external decisions awaiting their settle
        self.ended: OrderedDict[str, str] = OrderedDict()  # recently ended external decisions → how
        self.clock = time.time  # seconds since the epoch: when an external decision is made, and expires
        root.mkdir(parents=True, exist_ok=True)
        self._snapshot_lock = threading.Lock()
        self._snapshotter: threading.Thread | None = None
        self._snapshot_error: BaseException | None = None
        self._lock = DirectoryLock(root)
        try:
            self.config = config
            self.router: RouterAdapter
            self.pending: OrderedDict[str, Pending] = OrderedDict()
            self.settled: OrderedDict[str, None] = OrderedDict()
            self.coverage: dict[str, CoverageCount] = {a.name: CoverageCount() for a in config.arms}
            self.calibration: HeldOutCalibration | None = None
            self.calibration_problem: str | None = None  # why a calibration file present is not used
            self.encoder_dim = dim
            self.context: Context = config.router.context
            self._spend = SpendMark(root / SPEND_FILE)
            if self._spend.problem:
                self.warnings.append(self._spend.problem)
            fresh = not (root / STATE_FILE).exists() and not self.journal_file.exists() and not refit
            if (root / STATE_FILE).exists():
                try:
                    self._load()
                except DataError as exc:
                    raise DataError(f"{exc} — `kgwise state repair --state {root} --dry-run` says what a "
                                    "repair keeps and drops") from exc
                self._snapshot_bytes = (root / STATE_FILE).stat().st_size
            else:
                self.router = RouterAdapter.new(config, context_width(config, self.context, dim))
            if (root / CALIBRATION_FILE).exists():
                try:
                    self.calibration = HeldOutCalibration.load(root / CALIBRATION_FILE)
                except DataError as exc:  # answers say so; a fit (which this must not block) replaces it
                    self.calibration_problem = str(exc)
            middle = self._replay()
            self._journal = Journal(self.journal_file, fsync, self._writable, *self._torn)
            self._keep_spend()
            self._match(dim, refit)
            for decision in list(self.selected):  # a kill left their arm running: call them off
                self.cancel(decision)
                self.recovered.append(decision)
            try:
                self.sync()
                if fresh or middle:  # fresh: a later config is checked against a snapshot before replay;
                    self.save()  # middle: lines after a bad one were replayed, a snapshot replaces them
            except (DataError, StateReadOnlyError) as exc:  # opens read-only; writes are retried
                self.warnings.append(f"opened read-only: {exc}")
        except BaseException:
            if hasattr(self, "_journal"):
                self._journal.close()
            self._lock.release()
            raise

    # ------------------------------------------------------------------ files
    @property
    def state_file(self) -> Path:
        return self.root / STATE_FILE

    @property
    def journal_file(self) -> Path:
        return self.root / JOURNAL_FILE

    # ------------------------------------------------------------------ events (live and replayed)
    def _log(self, event: dict[str, Any], encoded: tuple[str, str] | None = None) -> None:
        """Append ``event`` (and ``encoded``: a key and its value as JSON already) to the journal (flushed
        to the OS; :meth:`sync` makes it durable); snapshot when the journal is due (module docstring)."""
        if self._replaying:
            return
        self.seq += 1
        text = json.dumps({"seq": self.seq, **event})
        if encoded is not None:
            text = f"{text[:-1]}, {json.dumps(encoded[0])}: {encoded[1]}}}"
        self._journal.append(self.seq, text, self.router.spent)
        self._since_snapshot += 1
        due = self._since_snapshot >= self.snapshot_every
        if due and self._journal.bytes_written >= self._snapshot_bytes and not self._journal.read_only:
            try:
                job = self._rotate()
            except StateReadOnlyError:
                return  # the journal keeps every event; the caller's sync reports the failure
            if self._snapshotter is not None:
                self._snapshotter.join()  # one at a time, in order
            self._snapshotter = threading.Thread(target=self._write_snapshot, args=job, daemon=True,
                                                 name="kgwise-snapshot")
            self._snapshotter.start()

    def select(self, decision: str, x: list[float], costs: dict[str, float]) -> str | None:
        """The router's arm for a question (its bound held under ``decision``), journaled."""
        import numpy as np

        arm = self.router.select(np.asarray(x, dtype=np.float64), costs)
        if arm is not None:
            self.selected[decision] = (arm, float(costs[arm]))
        self._log({"op": "select", "decision": decision, "x": encode_vector(x), "costs": costs, "arm": arm})
        return arm

    def record(self, pending: Pending) -> None:
        """A selected decision's answer: it is paid (the hold released; a cost above its bound is counted
        as overrun) and awaits feedback; beyond :data:`PENDING_KEPT` waiting, the oldest is dropped."""
        if self.selected.pop(pending.decision, None) is None:
            raise DataError(f"decision {pending.decision} was not selected", self.journal_file)
        self.router.charge(pending.arm, pending.cost, pending.bound)
        self._wait(pending)
        self._log({"op": "pending"}, ("pending", pending.to_json()))

    def sync(self) -> None:
        """Make every event written so far durable (fsync), unless another call already did: a group
        commit, so callers call it outside their own lock before they acknowledge an answer or a feedback.
        :class:`StateReadOnlyError` when it cannot (nothing may be acknowledged then)."""
        spent = self._journal.sync()
        if spent is not None:
            self._spend.raise_to(spent)

    @property
    def read_only(self) -> str | None:
        """Why the state cannot be written now (``None``: it can)."""
        exc = self._journal.failure
        return None if exc is None else f"{self.journal_file}: {exc.strerror or exc}"

    def check_writable(self) -> None:
        """:class:`StateReadOnlyError` while the state cannot be written (a recovery is tried once the
        retry interval has passed): callers refuse new work before spending on it. ``DataError`` while
        the saved router is for another config (opened to be refitted)."""
        if self.mismatch is not None:
            raise self.mismatch
        self._journal.retry()

    def _wait(self, pending: Pending) -> None:
        self.pending[pending.decision] = pending
        while len(self.pending) > PENDING_KEPT:
            self.pending.popitem(last=False)
            self.expired += 1

    def cancel(self, decision: str, charged: float = 0.0) -> None:
        """Call off a selected decision whose arm gave no usable answer: its bound returns to the budget,
        less ``charged`` (an arm that was called and failed after it may have spent, e.g. one whose
        upstream reported unusable usage, is charged up to its bound)."""
        arm, bound = self.selected.pop(decision)
        if charged > 0:
            self.router.charge(arm, min(charged, bound), bound)
        else:
            self.router.cancel(arm, bound)
        self._log({"op": "cancel", "decision": decision, **({"charged": charged} if charged > 0 else {})})

    def set_budget(self, budget: float) -> None:
        """Change the budget (a journalled event; what was spent stays spent)."""
        if not (math.isfinite(budget) and budget >= 0):
            raise ConfigError(f"a budget must be a finite number ≥ 0, got {budget}")
        was = self.router.budget
        self.router.router.budget = float(budget)
        self._log({"op": "budget", "budget": float(budget), "was": was})

    def feedback(self, decision: str, reward: float, observed: dict[str, float], covered: bool | None
                 ) -> None:
        """Settle a pending decision: the router learns (Eq. 5, 11, 14), free arms are observed, the
        arm's live coverage is counted."""
        import numpy as np

        p = self.pending[decision]
        x = np.asarray(p.embedding, dtype=np.float64)
        self.router.learn(p.arm, x, reward, p.cost)
        self.coverage[p.arm].add(coverage_delta(p, reward, covered))
        for name, r in observed.items():
            self.router.observe(name, x, r)
        self.settle(decision)
        self._log({"op": "feedback", "decision": decision, "reward": reward, "observed": observed,
                   "covered": covered})

    # ------------------------------------------------------------------ external arms
    def route(self, decision: str, x: list[float], costs: dict[str, float], text: str, created: float
              ) -> str | None:
        """The router's external arm for a question (its bound held until :meth:`settle_routed` or
        :meth:`end_routed`), journaled; beyond :data:`PENDING_KEPT` waiting, the oldest is called off."""
        import numpy as np

        arm = self.router.select(np.asarray(x, dtype=np.float64), costs)
        if arm is not None:
            self.routed[decision] = Routed(decision, text, arm, float(costs[arm]), x, created)
            while len(self.routed) > PENDING_KEPT:  # replays identically: no event of its own
                self._release(next(iter(self.routed)), f"called off: more than {PENDING_KEPT} were waiting")
        self._log({"op": "route", "decision": decision, "x": encode_vector(x), "costs": costs, "arm": arm,
                   "text": text, "created": created})
        return arm

    def settle_routed(self, decision: str, reward: float, cost: float, observed: dict[str, float]) -> None:
        """Pay an external decision's ``cost`` (at most its bound: ``BudgetExceededError`` above it, with
        nothing changed) and learn its ``reward`` (Eq. 5, 11, 14) and the ``observed`` arms' rewards."""
        import numpy as np

        r = self.routed[decision]
        x = np.asarray(r.embedding, dtype=np.float64)
        self.router.update(r.arm, x, reward, cost, r.bound)  # refuses a cost above the bound first
        for name, value in observed.items():
            self.router.observe(name, x, value)
        self.coverage[r.arm].add(CoverageCount(graded=1, correct=int(counts_as_right(reward))))
        del self.routed[decision]
        self._ended(decision, "settled")
        self._log({"op": "settle", "decision": decision, "reward": reward, "cost": cost,
                   "observed": observed})

    def end_routed(self, decision: str, how: str) -> None:
        """Call off an external decision (``how``: cancelled, expired …): its bound returns to the budget."""
        self._release(decision, how)
        self._log({"op": "end", "decision": decision, "how": how})

    def expire(self, ttl_s: float) -> int:
        """Call off the external decisions made ``ttl_s`` or more seconds ago (by :attr:`clock`); how many."""
        cutoff = self.clock() - ttl_s
        old = []
        for d, r in self.routed.items():  # oldest first
            if r.created > cutoff:
                break
            old.append(d)
        for d in old:
            self.end_routed(d, f"expired: not settled within {ttl_s:g} s")
        return len(old)

    def _release(self, decision: str, how: str) -> None:
        r = self.routed.pop(decision)
        self.router.cancel(r.arm, r.bound)
        self._ended(decision, how)

    def _ended(self, decision: str, how: str) -> None:
        self.ended[decision] = how
        while len(self.ended) > SETTLED_KEPT:
            self.ended.popitem(last=False)

    def _segments(self) -> list[tuple[int, Path]]:
        return journal_segments(self.root)

    def _replay(self) -> bool:
        """Apply the journal's events (segments first) after the snapshot. A torn or corrupt line, or an
        event that does not replay, is set aside (``set-aside/``), counted and named, and replay goes on;
        a torn tail of the journal is cut off. Whether good lines followed a bad one (the journal is then
        replaced by a snapshot)."""
        middle = False
        self._replaying = True
        try:
            for path in [p for _, p in self._segments()] + [self.journal_file]:
                events, bad, good_end = read_events(path)
                for line, event in events:
                    try:
                        seq = int(event["seq"])
                        if seq <= self.seq:
                            continue  # already in the snapshot
                        self._apply(event)
                    except (KeyError, TypeError, ValueError, ConfigError, DataError) as exc:
                        bad.append(BadLine(str(path), line, -1, json.dumps(event).encode("utf-8"),
                                           f"does not replay: {exc!r}"))
                        continue
                    self.seq = seq
                if not bad:
                    continue
                self.set_aside.extend(bad)
                tail = path == self.journal_file and all(b.offset >= good_end for b in bad)
                try:
                    kept = set_aside(self.root, bad)
                except OSError as exc:  # a full disk: read-only until they can be kept (:meth:`_writable`)
                    self.warnings.extend(f"not set aside yet ({exc.strerror}): {b.describe()}" for b in bad)
                    if tail:
                        self._torn, self._tail = (good_end, exc), bad
                    continue
                self.warnings.extend(f"set aside in {kept}: {b.describe()}" for b in bad)
                if tail:
                    with path.open("r+b") as fh:  # a torn or corrupt tail: cut it off
                        fh.truncate(good_end)
                        os.fsync(fh.fileno())
                else:
                    middle = True
        finally:
            self._replaying = False
        return middle

    def _writable(self) -> None:
        """Before the journal syncs or recovers: ``OSError`` when the directory is no longer the one locked,
        or the journal's torn tail still cannot be set aside (the journal cuts it off once it is)."""
        self._lock.check()
        if self._torn[0] is not None:
            set_aside(self.root, self._tail)
            self._torn = (None, None)

    def _keep_spend(self) -> None:
        """Spend never rolls back: below the spend mark (an emptied or lost journal, a lost snapshot) the
        difference is counted as spent and named."""
        floor = self._spend.value
        if floor > self.router.spent + 1e-9 * max(1.0, floor):
            self.warnings.append(f"the journal and snapshot hold {self.router.spent:g} spent, the spend mark "
                                 f"{floor:g}: events were lost; spend kept at {floor:g}")
            self.router.router.spent = floor

    def _apply(self, event: dict[str, Any]) -> None:
        op = event["op"]
        if op == "select":
            decision = str(event["decision"])
            costs = {str(k): float(v) for k, v in event["costs"].items()}
            arm = self.select(decision, decode_vector(event["x"]), costs)
            if arm != event["arm"]:  # an event before it was lost: undo the hold, set the event aside
                if arm is not None:
                    self.selected.pop(decision)
                    self.router.cancel(arm, costs[arm])
                raise ValueError(f"the router picks {arm!r}, the journal says {event['arm']!r}")
        elif op == "pending":
            self.record(Pending.from_dict(event["pending"]))
        elif op == "cancel":
            self.cancel(str(event["decision"]), float(event.get("charged", 0.0)))
        elif op == "budget":
            self.set_budget(float(event["budget"]))
        elif op == "route":
            decision = str(event["decision"])
            costs = {str(k): float(v) for k, v in event["costs"].items()}
            arm = self.route(decision, decode_vector(event["x"]), costs, str(event["text"]),
                             float(event["created"]))
            if arm != event["arm"]:  # as for "select": undo the hold, set the event aside
                if arm is not None and self.routed.pop(decision, None) is not None:
                    self.router.cancel(arm, costs[arm])
                raise ValueError(f"the router picks {arm!r}, the journal says {event['arm']!r}")
        elif op == "settle":
            self.settle_routed(str(event["decision"]), float(event["reward"]), float(event["cost"]),
                               {str(k): float(v) for k, v in event["observed"].items()})
        elif op == "end":
            self.end_routed(str(event["decision"]), str(event["how"]))
        elif op == "feedback":
            cov = event["covered"]
            self.feedback(str(event["decision"]), float(event["reward"]),
                          {str(k): float(v) for k, v in event["observed"].items()},
                          None if cov is None else bool(cov))
        else:
            raise ValueError(f"unknown op {op!r}")

    def _load(self) -> None:
        path = self.state_file
        body = read_json(path)
        if not isinstance(body, dict) or body.get("kind") != "kgwise.PipelineState":
            raise DataError("not a kgwise pipeline state (kind is not kgwise.PipelineState)", path)
        version = body.get("version", 1)
        if version not in (1, 2, STATE_VERSION):
            raise DataError(f"state version {version!r} is not one this kgwise reads (1 to {STATE_VERSION}); "
                            "a newer kgwise wrote it", path)
        try:
            self.seq = int(body.get("seq", 0))
            self.expired = int(body.get("expired", 0))
            context = body.get("context", "question")
            if context not in CONTEXTS:
                raise ValueError(f"context {context!r} is not one of {', '.join(CONTEXTS)}")
            self.context = context
            self.router = RouterAdapter.from_state_dict(body["router"])
            waiting = [Pending.from_dict(p) for p in body["pending"]]
            if version == 1:  # paid at feedback then: pay the waiting answers now, as version 2 does
                for p in waiting:
                    self.router.charge(p.arm, p.cost, p.bound)
            self.pending = OrderedDict((p.decision, p) for p in waiting)
            self.settled = OrderedDict((str(d), None) for d in body.get("settled", []))
            self.selected = {str(d): (str(a), float(b)) for d, (a, b) in body.get("selected", {}).items()}
            self.routed = OrderedDict((r.decision, r) for r in map(Routed.from_dict, body.get("routed", [])))
            self.ended = OrderedDict((str(d), str(h)) for d, h in body.get("ended", {}).items())
            for name, c in body.get("coverage", {}).items():
                self.coverage[str(name)] = CoverageCount(int(c["n"]), int(c["covered"]),
                                                         int(c["undetermined"]),
                                                         int(c.get("graded", 0)), int(c.get("correct", 0)),
                                                         int(c.get("uncertified", 0)))
        except ConfigError as exc:
            raise DataError(str(exc), path) from exc
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"malformed pipeline state ({exc!r})", path) from exc

    def replace_router(self, router: RouterAdapter, context: Context) -> None:
        """A fit's new router and context (the decisions waiting are dropped): it starts from the spend,
        overrun and per-arm spend of the one it replaces — spend only grows (the caller snapshots)."""
        router.carry_spend(self.router)
        self.router = router
        self.context = context
        self.pending.clear()
        self.selected.clear()
        self.mismatch = None

    def _match(self, dim: int, refit: bool) -> None:
        """After replay: a budget changed in the config is journalled (the spend stays); a router made for
        other arms or contexts is refused (``refit``: kept as :attr:`mismatch` for the fit to replace)."""
        try:
            self.check_matches(dim)
        except DataError as exc:
            if not refit:
                raise
            self.mismatch = exc  # kept as it is on disk until the fit replaces it
            return
        if self.router.budget != self.config.router.budget:
            self.warnings.append(f"budget changed from {self.router.budget:g} to "
                                 f"{self.config.router.budget:g} {self.config.router.unit} (the "
                                 f"{self.router.spent:g} spent stays spent)")
            self.set_budget(self.config.router.budget)

    def check_matches(self, dim: int) -> None:
        """``DataError`` when the saved router does not fit the config (other arms, another context)."""
        problems = router_mismatch(self.router, self.context, self.config, dim)
        if problems:
            cfg = self.config.path
            raise DataError(f"made for another config ({'; '.join(problems)}): use another --state, or "
                            f"refit it (the spend is kept): `kgwise fit --config {cfg} --state {self.root} "
                            "--questions DEV.jsonl`", self.state_file)

    def save(self) -> None:
        """Write the snapshot ``state.json`` now (waiting for one being written in the background) and
        remove the journal it holds. Decisions whose arm is still running are kept as such: a process that
        opens the snapshot calls them off unless the journal holds their answer."""
        if self._snapshotter is not None:
            self._snapshotter.join()
            self._snapshotter = None
        self._raise_snapshot_error()
        self._write_snapshot(*self._rotate())

    def _rotate(self) -> tuple[int, dict[str, Any], list[str]]:
        """Under the caller's lock: copy what the snapshot holds and set the journal aside as
        ``journal.jsonl.SEQ`` (fsync'ed first); the events after it go to a fresh journal."""
        router = copy.deepcopy(self.router.router)  # serialised by the writer, outside the lock
        body = {"kind": "kgwise.PipelineState", "version": STATE_VERSION, "config": str(self.config.path),
                "seq": self.seq, "expired": self.expired, "context": self.context, "router": router,
                "settled": list(self.settled),
                "selected": {d: [a, b] for d, (a, b) in self.selected.items()},
                "routed": [r.to_dict() for r in self.routed.values()], "ended": dict(self.ended),
                "coverage": {k: asdict(v) for k, v in self.coverage.items()}}
        pending = [p.to_json() for p in self.pending.values()]
        self.sync()
        self._journal.set_aside_to(self.root / f"{JOURNAL_FILE}.{self.seq}")
        self._since_snapshot = 0
        return self.seq, body, pending

    def _write_snapshot(self, seq: int, body: dict[str, Any], pending: list[str]) -> None:
        """Write the snapshot of event ``seq`` atomically, then remove the journal segments it holds."""
        try:
            with self._snapshot_lock:
                body = {**body, "router": body["router"].state_dict()}
                text = f'{json.dumps(body)[:-1]}, "pending": [{", ".join(pending)}]}}'
                write_text_atomic(self.state_file, text)
                self._spend.raise_to(float(body["router"]["spent"]), durable=True)
                self._snapshot_bytes = len(text)
                for upto, path in self._segments():
                    if upto <= seq:
                        path.unlink()
        except BaseException as exc:  # raised by save/close; the segments and journal keep every event
            self._snapshot_error = exc

    def _raise_snapshot_error(self) -> None:
        exc, self._snapshot_error = self._snapshot_error, None
        if exc is not None:
            raise DataError(f"the state snapshot could not be written ({exc!r}); the journal keeps every "
                            "event", self.state_file) from exc

    def save_prompt_bandit(self, arm: str, bandit: PromptBandit | None) -> None:
        """Write (``None``: remove) ``arm``'s learnt prompt bandit."""
        write_prompt_bandit(self.prompt_bandit_file(arm), bandit)

    def save_calibration(self, calibration: HeldOutCalibration) -> None:
        """Replace the calibration (and reset the live coverage counts, which were for the old one)."""
        calibration.save(self.calibration_file)
        self.calibration = calibration
        self.calibration_problem = None
        self.coverage = {a.name: CoverageCount() for a in self.config.arms}

    def settle(self, decision: str) -> None:
        """Move ``decision`` from pending to settled (kept for the last :data:`SETTLED_KEPT`)."""
        del self.pending[decision]
        self.settled[decision] = None
        while len(self.settled) > SETTLED_KEPT:
            self.settled.popitem(last=False)

    def close(self) -> None:
        """Snapshot and release. A read-only state closes without a snapshot (logged): what is on disk
        is what was acknowledged; the events not written were never acknowledged."""
        try:
            if self.mismatch is None:  # a router for another config stays as it is on disk
                self.save()
        except StateReadOnlyError as exc:
            logging.getLogger("kgwise.state").warning("closed without a snapshot: %s", exc)
        finally:
            self._journal.close()
            self._spend.close()
            self._lock.release()

    def __enter__(self) -> StateDir:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


def coverage_bounds(count: CoverageCount, alpha: float, delta: float) -> tuple[float | None, float, float,
                                                                                 bool]:
    """``(observed rate or None, lower, upper, drift)`` of one arm's live coverage (module docstring)."""
    lower, upper = clopper_pearson(count.covered, count.n, delta)
    rate = count.covered / count.n if count.n else None
    return rate, lower, upper, upper < 1.0 - alpha and not math.isclose(upper, 1.0 - alpha)


@dataclass(frozen=True, slots=True)
class RepairReport(Serialisable):
    """What :func:`repair` keeps and drops: per journal file the events kept, the lines dropped (set aside,
    each named), whether the snapshot and the spend mark are readable, and whether it changed anything."""

    state_dir: str
    events_kept: dict[str, int]
    dropped: tuple[str, ...]
    snapshot: str
    spend_mark: float
    changed: bool
    set_aside_in: str | None = None


def repair(root: Path, dry_run: bool = False) -> RepairReport:
    """Check a state directory without its config: every journal file's lines (kept, or torn/corrupt and
    dropped), the snapshot and the spend mark. Without ``dry_run``, the dropped lines are set aside in
    ``set-aside/`` and each journal file is rewritten with the lines kept; a snapshot that cannot be read
    is set aside too (the router then starts fresh when the state opens; the spend mark keeps the spend).
    Holds the directory's lock (``ConfigError`` while a server uses it)."""
    if not (root / STATE_FILE).exists() and not (root / JOURNAL_FILE).exists():
        raise DataError("not a kgwise state directory (no state.json, no journal.jsonl)", root)
    lock = DirectoryLock(root)
    try:
        kept: dict[str, int] = {}
        dropped: list[BadLine] = []
        rewrite: list[tuple[Path, bytes]] = []
        for path in [p for _, p in journal_segments(root)] + [root / JOURNAL_FILE]:
            if not path.exists():
                continue
            events, bad, _ = read_events(path)
            kept[path.name] = len(events)
            dropped.extend(bad)
            if bad:
                at = {b.offset for b in bad}
                lines, offset = [], 0
                for line in path.read_bytes().splitlines(keepends=True):
                    if offset not in at:
                        lines.append(line)
                    offset += len(line)
                rewrite.append((path, b"".join(lines)))
        snapshot = "absent"
        if (root / STATE_FILE).exists():
            try:
                body = read_json(root / STATE_FILE)
                ok = isinstance(body, dict) and body.get("kind") == "kgwise.PipelineState"
                snapshot = "readable" if ok else "not a kgwise pipeline state"
            except DataError as exc:
                snapshot = f"unreadable: {exc}"
        mark = SpendMark(root / SPEND_FILE)
        changed = bool(rewrite) or snapshot not in ("absent", "readable")
        where = None
        if changed and not dry_run:
            if dropped:
                where = str(set_aside(root, dropped))
            for path, good in rewrite:
                tmp = path.with_name(path.name + ".repair")
                tmp.write_bytes(good)
                with tmp.open("rb") as fh:
                    os.fsync(fh.fileno())
                tmp.replace(path)
            if snapshot not in ("absent", "readable"):
                folder = root / "set-aside"
                folder.mkdir(exist_ok=True)
                target = folder / f"state-{short_hash((root / STATE_FILE).read_bytes().hex())}.json"
                (root / STATE_FILE).replace(target)
                where = where or str(target)
        return RepairReport(str(root), kept, tuple(b.describe() for b in dropped), snapshot, mark.value,
                            changed, where)
    finally:
        lock.release()


def router_mismatch(router: RouterAdapter, context: Context, config: PipelineConfig, dim: int) -> list[str]:
    """Why a saved ``router`` (with its ``context``) does not fit ``config`` and a ``dim``-d encoder: other
    arms, a context that reads free arms the config lacks, another context width (empty: it fits)."""
    want = [(a.name, a.cluster) for a in config.arms]
    have = list(zip(router.names, router.clusters, strict=True))
    problems = []
    if have != want:
        problems.append(f"its arms are {have}, the config's {want}")
    if reads_free(context) and not config.free_arms:
        problems.append(f"its router reads the free arms' answers (context {context}), and the config has "
                        "no free arm")
    elif router.dim != (want_dim := context_width(config, context, dim)):
        problems.append(f"its router expects {router.dim}-d contexts, and its context ({context}) is "
                        f"{want_dim}-d with this encoder ({dim}-d) and the config's {len(config.free_arms)} "
                        "free arm(s)")
    return problems


def write_prompt_bandit(path: Path, bandit: PromptBandit | None) -> None:
    """Write ``bandit`` to ``path`` (``None``: remove the file)."""
    if bandit is None:
        path.unlink(missing_ok=True)
    else:
        path.parent.mkdir(exist_ok=True)
        bandit.save(path)


def journal_segments(root: Path) -> list[tuple[int, Path]]:
    """The journal segments of state directory ``root`` set aside for a snapshot (``journal.jsonl.SEQ``:
    events up to SEQ), oldest first."""
    found = []
    for path in root.glob(JOURNAL_FILE + ".*"):
        suffix = path.name[len(JOURNAL_FILE) + 1:]
        if suffix.isdigit():
            found.append((int(suffix), path))
    return sorted(found)


def coverage_delta(p: Pending, reward: float, covered: bool | None) -> CoverageCount:
    """What one feedback adds to its arm's live coverage counts: graded and correct always; a set given
    without guarantee counted apart; a set's coverage when the feedback reveals it, else undetermined."""
    d = CoverageCount(graded=1, correct=int(counts_as_right(reward)))
    if p.answer_set is not None and not p.certified:
        d.uncertified = 1
    elif covered is not None:
        d.n, d.covered = 1, int(covered)
    elif p.answer_set is not None:
        d.undetermined = 1
    return d
