"""The pipeline's state directory: router, decisions awaiting feedback, per-arm calibrations and live
coverage counts, owned by one process at a time.

Files (every write atomic, :func:`kgwise.files.write_text_atomic`):

* ``state.json`` — the router (:meth:`kgwise.route.coke.CokeRouter.state_dict`), the pending decisions,
  the ids of recently settled ones, and per arm the live coverage counts; written after every answer
  and every feedback, so an acknowledged call survives a kill;
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
from collections import OrderedDict
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from filelock import FileLock, Timeout
from scipy.stats import beta as beta_dist

from kgwise.app.config import PipelineConfig
from kgwise.app.router import RouterAdapter
from kgwise.errors import ConfigError, DataError
from kgwise.files import read_json, write_text_atomic

__all__ = ["ArmCalibration", "CoverageCount", "Pending", "StateDir", "clopper_pearson"]

STATE_FILE = "state.json"
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
    several choices)."""

    n: int = 0
    covered: int = 0
    undetermined: int = 0


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
    """An open state directory (a context manager: :meth:`close` writes and releases the lock)."""

    def __init__(self, root: Path, config: PipelineConfig, dim: int) -> None:
        self.root = root
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
            if (root / STATE_FILE).exists():
                self._load(dim)
            else:
                self.router = RouterAdapter.new(config, dim)
            if (root / CALIBRATION_FILE).exists():
                self._load_calibration()
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

    def _load(self, dim: int) -> None:
        path = self.state_file
        body = read_json(path)
        if not isinstance(body, dict) or body.get("kind") != "kgwise.PipelineState":
            raise DataError("not a kgwise pipeline state (kind is not kgwise.PipelineState)", path)
        try:
            self.router = RouterAdapter.from_state_dict(body["router"])
            self.pending = OrderedDict((p["decision"], Pending.from_dict(p)) for p in body["pending"])
            self.settled = OrderedDict((str(d), None) for d in body.get("settled", []))
            for name, c in body.get("coverage", {}).items():
                self.coverage[str(name)] = CoverageCount(int(c["n"]), int(c["covered"]),
                                                         int(c["undetermined"]))
        except ConfigError as exc:
            raise DataError(str(exc), path) from exc
        except (KeyError, TypeError, ValueError) as exc:
            raise DataError(f"malformed pipeline state ({exc!r})", path) from exc
        self.check_matches(dim)

    def check_matches(self, dim: int) -> None:
        """``DataError`` when the saved router does not fit the config (other arms, another budget)."""
        r = self.router.router
        want = [(a.name, a.cluster) for a in self.config.arms]
        have = list(zip(r.names, r.clusters, strict=True))
        problems = []
        if have != want:
            problems.append(f"its arms are {have}, the config's {want}")
        if r.budget != self.config.router.budget:
            problems.append(f"its budget is {r.budget:g}, the config's {self.config.router.budget:g}")
        if r.dim != dim:
            problems.append(f"its router expects {r.dim}-d question embeddings, the encoder gives {dim}-d")
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
        """Write ``state.json`` atomically."""
        body = {"kind": "kgwise.PipelineState", "config": str(self.config.path),
                "router": self.router.state_dict(),
                "pending": [asdict(p) for p in self.pending.values()],
                "settled": list(self.settled),
                "coverage": {k: asdict(v) for k, v in self.coverage.items()}}
        write_text_atomic(self.state_file, json.dumps(body))

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
