"""The pipeline's state directory: router, decisions awaiting feedback, per-arm calibrations and live
coverage counts, owned by one process at a time.

Files:

* ``state.json`` — a snapshot (written atomically, :func:`kgwise.files.write_text_atomic`): the router
  (:meth:`kgwise.route.coke.CokeRouter.state_dict`) and its context (``question`` or ``question+free``,
  :mod:`kgwise.app.router`; a snapshot without one, written before contexts existed, is ``question``),
  the pending decisions, the ids of recently settled
  ones, per arm the live coverage counts, and the sequence number of the last event it holds;
* ``journal.jsonl`` — every change since the snapshot, one event per line, flushed and fsync'ed before
  the call that made it returns: a routing decision (``select``: the embedding and cost bounds, so that
  replaying it through the snapshot's router reproduces the same draw), its answer (``pending``), a call
  called off (``cancel``), a feedback (``feedback``). A ``select`` is only flushed (to the OS: it
  survives a killed process); the fsync of its ``pending`` event, which follows it in the same file,
  makes both durable before the answer is returned. Lost in a machine crash before that, the decision
  was never acknowledged, and the state is as if it had not been made. Opening the directory replays the
  events after the snapshot through the same methods that made them, so a kill loses no acknowledged
  answer or feedback;
  a snapshot is taken every ``snapshot_every`` events and on :meth:`StateDir.close`. A decision whose
  arm was running at the kill (selected, never answered) is called off on replay (``recovered``);
* ``calibration.json`` — per arm the Mondrian calibration scores written by :func:`kgwise.app.fit.fit`;
* ``lock`` — an OS lock (``filelock``) held while a :class:`StateDir` is open; a second process gets a
  ``ConfigError`` instead of overwriting the first one's learning and spending.

Live coverage (issue 27, item 4): for each arm, ``n`` answers whose feedback told whether the set held
the truth and ``covered`` of them. The Clopper–Pearson interval at confidence ``1 − δ`` bounds the true
coverage; *drift* is flagged when its upper end lies below ``1 − α`` (coverage below target beyond
noise, one-sided level δ).
"""

from __future__ import annotations

import json
import math
import os
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from filelock import FileLock, Timeout
from scipy.stats import beta as beta_dist

from kgwise.app.config import CONTEXTS, Context, PipelineConfig
from kgwise.app.router import RouterAdapter, context_width
from kgwise.errors import ConfigError, DataError
from kgwise.files import read_json, read_jsonl, write_text_atomic

__all__ = ["ArmCalibration", "CoverageCount", "Pending", "StateDir", "clopper_pearson"]

STATE_FILE = "state.json"
JOURNAL_FILE = "journal.jsonl"
CALIBRATION_FILE = "calibration.json"
SETTLED_KEPT = 10_000


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
    several choices); ``graded``: all feedback on the arm's answers, ``correct`` of them (reward ≥ 0.5)."""

    n: int = 0
    covered: int = 0
    undetermined: int = 0
    graded: int = 0
    correct: int = 0


@dataclass(slots=True)
class Pending:
    """A decision awaiting feedback: the question, the arm and the cost bound the router holds for it,
    what was really spent, the embedding, the answer and its set, and the free arms' answers."""

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

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Pending:
        return cls(str(d["decision"]), str(d["text"]), [str(c) for c in d["choices"]], str(d["arm"]),
                   float(d["bound"]), float(d["cost"]), [float(v) for v in d["embedding"]],
                   str(d["prediction"]),
                   None if d["answer_set"] is None else [str(x) for x in d["answer_set"]],
                   {str(k): str(v) for k, v in d.get("observed", {}).items()})


@dataclass(frozen=True, slots=True)
class ArmCalibration:
    """One arm's Mondrian calibration: the non-conformity scores of the true choice on the logged
    questions the fitted router sent to this arm (``kind``: ``lac``/``aps``)."""

    arm: str
    kind: str
    scores: tuple[float, ...]


class StateDir:
    """An open state directory (a context manager: :meth:`close` writes and releases the lock); ``dim``:
    the question encoder's dimension."""

    def __init__(self, root: Path, config: PipelineConfig, dim: int, snapshot_every: int = 500) -> None:
        if snapshot_every < 1:
            raise ConfigError(f"snapshot_every must be ≥ 1 event, got {snapshot_every}")
        self.root = root
        self.snapshot_every = snapshot_every
        self.seq = 0
        self._since_snapshot = 0
        self._replaying = False
        self.selected: dict[str, tuple[str, float]] = {}
        self.recovered: list[str] = []
        root.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(str(root / "lock"))
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            raise ConfigError(f"the state directory {root} is in use by another kgwise process (a running "
                              "`kgwise serve`?); stop it first or use another --state") from None
        try:
            self.config = config
            self.router: RouterAdapter
            self.pending: OrderedDict[str, Pending] = OrderedDict()
            self.settled: OrderedDict[str, None] = OrderedDict()
            self.coverage: dict[str, CoverageCount] = {a.name: CoverageCount() for a in config.arms}
            self.calibrations: dict[str, ArmCalibration] = {}
            self.calibration_meta: dict[str, Any] = {}
            self.encoder_dim = dim
            self.context: Context = config.router.context
            if (root / STATE_FILE).exists():
                self._load(dim)
            else:
                self.router = RouterAdapter.new(config, context_width(config, self.context, dim))
            if (root / CALIBRATION_FILE).exists():
                self._load_calibration()
            self._replay()
        except BaseException:
            self._lock.release()
            raise

    # ------------------------------------------------------------------ files
    @property
    def state_file(self) -> Path:
        return self.root / STATE_FILE

    @property
    def calibration_file(self) -> Path:
        return self.root / CALIBRATION_FILE

    @property
    def journal_file(self) -> Path:
        return self.root / JOURNAL_FILE

    # ------------------------------------------------------------------ events (live and replayed)
    def _log(self, event: dict[str, Any], sync: bool = True) -> None:
        """Append ``event`` to the journal (flushed, and fsync'ed when ``sync``); snapshot every
        ``snapshot_every``."""
        if self._replaying:
            return
        self.seq += 1
        line = json.dumps({"seq": self.seq, **event}) + "\n"
        with self.journal_file.open("a", encoding="utf-8") as fh:
            fh.write(line)
            fh.flush()
            if sync:
                os.fsync(fh.fileno())
        self._since_snapshot += 1
        if self._since_snapshot >= self.snapshot_every:
            self.save()

    def select(self, decision: str, x: list[float], costs: dict[str, float]) -> str | None:
        """The router's arm for a question (its bound held under ``decision``), journaled."""
        import numpy as np

        arm = self.router.select(np.asarray(x, dtype=np.float64), costs)
        if arm is not None:
            self.selected[decision] = (arm, float(costs[arm]))
        self._log({"op": "select", "decision": decision, "x": x, "costs": costs, "arm": arm}, sync=False)
        return arm

    def record(self, pending: Pending) -> None:
        """A selected decision's answer: it now awaits feedback."""
        if self.selected.pop(pending.decision, None) is None:
            raise DataError(f"decision {pending.decision} was not selected", self.journal_file)
        self.pending[pending.decision] = pending
        self._log({"op": "pending", "pending": asdict(pending)})

    def cancel(self, decision: str) -> None:
        """Call off a selected decision whose arm did not answer: its bound returns to the budget."""
        arm, bound = self.selected.pop(decision)
        self.router.cancel(arm, bound)
        self._log({"op": "cancel", "decision": decision})

    def feedback(self, decision: str, reward: float, observed: dict[str, float], covered: bool | None
                 ) -> None:
        """Settle a pending decision: the router learns (Eq. 5, 11, 14), free arms are observed, the
        arm's live coverage is counted."""
        import numpy as np

        p = self.pending[decision]
        x = np.asarray(p.embedding, dtype=np.float64)
        self.router.update(p.arm, x, reward, p.cost, p.bound)
        self.coverage[p.arm].graded += 1
        self.coverage[p.arm].correct += int(reward >= 0.5)
        for name, r in observed.items():
            self.router.observe(name, x, r)
        if covered is not None:
            c = self.coverage[p.arm]
            c.n += 1
            c.covered += int(covered)
        elif p.answer_set is not None:
            self.coverage[p.arm].undetermined += 1
        self.settle(decision)
        self._log({"op": "feedback", "decision": decision, "reward": reward, "observed": observed,
                   "covered": covered})

    def _replay(self) -> None:
        """Apply the journal's events after the snapshot; call off decisions left running at a kill."""
        path = self.journal_file
        if not path.exists():
            path.touch()
        self._replaying = True
        try:
            for line, event in read_jsonl(path, "journal"):
                try:
                    seq = int(event["seq"])
                    if seq <= self.seq:
                        continue  # already in the snapshot
                    self._apply(event)
                except (KeyError, TypeError, ValueError, ConfigError) as exc:
                    raise DataError(f"journal event does not replay: {exc!r}", path, line) from exc
                self.seq = seq
        finally:
            self._replaying = False
        for decision in list(self.selected):
            self.cancel(decision)
            self.recovered.append(decision)

    def _apply(self, event: dict[str, Any]) -> None:
        op = event["op"]
        if op == "select":
            arm = self.select(str(event["decision"]), [float(v) for v in event["x"]],
                              {str(k): float(v) for k, v in event["costs"].items()})
            if arm != event["arm"]:
                raise ValueError(f"the router picks {arm!r}, the journal says {event['arm']!r}")
        elif op == "pending":
            self.record(Pending.from_dict(event["pending"]))
        elif op == "cancel":
            self.cancel(str(event["decision"]))
        elif op == "feedback":
            cov = event["covered"]
            self.feedback(str(event["decision"]), float(event["reward"]),
                          {str(k): float(v) for k, v in event["observed"].items()},
                          None if cov is None else bool(cov))
        else:
            raise ValueError(f"unknown op {op!r}")

    def _load(self, dim: int) -> None:
        path = self.state_file
        body = read_json(path)
        if not isinstance(body, dict) or body.get("kind") != "kgwise.PipelineState":
            raise DataError("not a kgwise pipeline state (kind is not kgwise.PipelineState)", path)
        try:
            self.seq = int(body.get("seq", 0))
            context = body.get("context", "question")
            if context not in CONTEXTS:
                raise ValueError(f"context {context!r} is not one of {', '.join(CONTEXTS)}")
            self.context = context
            self.router = RouterAdapter.from_state_dict(body["router"])
            self.pending = OrderedDict((p["decision"], Pending.from_dict(p)) for p in body["pending"])
            self.settled = OrderedDict((str(d), None) for d in body.get("settled", []))
            self.selected = {str(d): (str(a), float(b)) for d, (a, b) in body.get("selected", {}).items()}
            for name, c in body.get("coverage", {}).items():
                self.coverage[str(name)] = CoverageCount(int(c["n"]), int(c["covered"]),
                                                         int(c["undetermined"]),
                                                         int(c.get("graded", 0)), int(c.get("correct", 0)))
        except ConfigError as exc:
            raise DataError(str(exc), path) from exc
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"malformed pipeline state ({exc!r})", path) from exc
        self.check_matches(dim)

    def check_matches(self, dim: int) -> None:
        """``DataError`` when the saved router does not fit the config (other arms, another budget)."""
        r = self.router
        want = [(a.name, a.cluster) for a in self.config.arms]
        have = list(zip(r.names, r.clusters, strict=True))
        problems = []
        if have != want:
            problems.append(f"its arms are {have}, the config's {want}")
        if r.budget != self.config.router.budget:
            problems.append(f"its budget is {r.budget:g}, the config's {self.config.router.budget:g}")
        if self.context == "question+free" and not self.config.free_arms:
            problems.append("its router reads the free arms' answers (context question+free), and the "
                            "config has no free arm")
        elif r.dim != (want_dim := context_width(self.config, self.context, dim)):
            problems.append(f"its router expects {r.dim}-d contexts, and its context ({self.context}) is "
                            f"{want_dim}-d with this encoder ({dim}-d) and the config's "
                            f"{len(self.config.free_arms)} free arm(s)")
        if problems:
            raise DataError(f"made for another config ({'; '.join(problems)}): use another --state, or "
                            f"run `kgwise fit` again", self.state_file)

    def _load_calibration(self) -> None:
        path = self.calibration_file
        body = read_json(path)
        try:
            if body.get("kind") != "kgwise.MondrianCalibration":
                raise ValueError(f"kind is {body.get('kind')!r}")
            self.calibrations = {
                str(name): ArmCalibration(str(name), str(c["kind"]), tuple(float(s) for s in c["scores"]))
                for name, c in body["arms"].items()}
            self.calibration_meta = dict(body.get("meta", {}))
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise DataError(f"not a kgwise calibration: {exc}", path) from exc

    def save(self) -> None:
        """Write the snapshot ``state.json`` atomically, then empty the journal (a kill between the two
        leaves events the snapshot holds, which replay skips by their sequence number). Decisions whose
        arm is still running are kept as such: a process that opens the snapshot calls them off unless
        the journal holds their answer."""
        body = {"kind": "kgwise.PipelineState", "config": str(self.config.path), "seq": self.seq,
                "context": self.context, "router": self.router.state_dict(),
                "pending": [asdict(p) for p in self.pending.values()],
                "settled": list(self.settled),
                "selected": {d: [a, b] for d, (a, b) in self.selected.items()},
                "coverage": {k: asdict(v) for k, v in self.coverage.items()}}
        write_text_atomic(self.state_file, json.dumps(body))
        self.journal_file.write_text("", encoding="utf-8")
        self._since_snapshot = 0

    def save_calibration(self, calibrations: dict[str, ArmCalibration], meta: dict[str, Any]) -> None:
        """Replace the per-arm calibrations (and reset the live coverage counts, which were for the old
        ones)."""
        body = {"kind": "kgwise.MondrianCalibration", "meta": meta,
                "arms": {k: {"kind": c.kind, "scores": list(c.scores)} for k, c in calibrations.items()}}
        write_text_atomic(self.calibration_file, json.dumps(body))
        self.calibrations = dict(calibrations)
        self.calibration_meta = dict(meta)
        self.coverage = {a.name: CoverageCount() for a in self.config.arms}

    def settle(self, decision: str) -> None:
        """Move ``decision`` from pending to settled (kept for the last :data:`SETTLED_KEPT`)."""
        del self.pending[decision]
        self.settled[decision] = None
        while len(self.settled) > SETTLED_KEPT:
            self.settled.popitem(last=False)

    def close(self) -> None:
        try:
            self.save()
        finally:
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
