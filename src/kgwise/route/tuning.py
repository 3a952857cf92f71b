"""Coke's open settings chosen on logged outcomes: replay (:func:`simulate`) and two-fold cross-fitting.

The settings the paper leaves open — the LinUCB width γ (``None``: Eq. 12's, from δ), whether LinUCB learns
the decomposed reward, and the context (the question embedding, or it joined to what the free arms say) —
are scored on an outcome table by replaying Coke over it; the ``cascade`` context (the predictor's
``[1, p(x)]`` rows, :mod:`kgwise.route.cascade`) is one more grid point, whose threshold is fitted on the
half the router learns from and scored on the half it routes. The questions are split in two halves by a
seeded permutation (:func:`halves`); :class:`CrossFit` scores one grid point on one half, either *cold*
(the router starts from its priors) or *warm* (it first learns every arm's logged outcome on the other
half, :meth:`CokeRouter.warm_start`, as a fitted pipeline does). :func:`cross_fit` is what ``kgwise fit``
uses: every grid point's warm score on each half (learn on one fold, route the other), and the point with
the best mean accuracy over the two folds (ties: the lower cost, then the grid's order), beside the best
affordable single arm cross-fitted the same way (:func:`single_arm`: learn which arm on one fold, score
it on the other), which routing has to beat to be worth its cost (:class:`RoutingGain`: routing's
gain over it, question by question, with each fold routed by the point that won on the other fold, and
its standard error). ``kgwise eval route``'s cross-tuning
(:mod:`kgwise.eval.route.tuning`) runs on the same engine.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from kgwise.errors import ConfigError
from kgwise.route.cascade import CONTEXT as CASCADE
from kgwise.route.cascade import fit_cascade
from kgwise.route.coke import CokeConfig, CokeRouter
from kgwise.route.table import OutcomeTable

__all__ = ["CrossFit", "CrossFitReport", "GridPoint", "GridScore", "HalfScore", "Observer", "Router",
           "RoutingGain", "RunCache", "RunResult", "SingleArmScore", "TuningConfig", "best_single_arm",
           "cross_fit", "halves", "routing_gain", "simulate", "single_arm"]

Matrix = npt.NDArray[np.float64]
GridPoint = tuple[str, float | None, bool]
"""``(context name, γ or None for Eq. 12's, decomposed reward)``."""


class Router(Protocol):
    """A budgeted policy over named arms (:class:`~kgwise.route.coke.CokeRouter` and the baselines)."""

    def pull(self, embedding: npt.ArrayLike, costs: Sequence[float] | Matrix) -> str | None: ...

    def update(self, name: str, embedding: npt.ArrayLike, reward: float, cost: float) -> None: ...


class Observer(Protocol):
    def observe(self, name: str, embedding: npt.ArrayLike, reward: float) -> None: ...


@dataclass
class RunResult:
    """One policy on one question order: the chosen arm's column per step (−1: none affordable),
    correctness, cost."""

    chosen: npt.NDArray[np.int64]
    correct: npt.NDArray[np.bool_]
    cost: Matrix
    seconds: float

    @property
    def accuracy(self) -> float:
        return float(self.correct.mean())

    @property
    def total_cost(self) -> float:
        return float(self.cost.sum())


def simulate(
    policy: Router,
    table: OutcomeTable,
    embeddings: npt.NDArray[np.floating[Any]],
    order: Sequence[int] | npt.NDArray[np.int64],
    observer: Observer | None = None,
) -> RunResult:
    """Feed the questions in ``order`` to ``policy``; a question with no affordable arm counts as wrong.
    ``observer`` (usually the policy itself): the arms that cost nothing on a question answer it too, and
    their outcomes are shown to it (:meth:`CokeRouter.observe`)."""
    n = len(order)
    column = {name: j for j, name in enumerate(table.arms)}
    chosen = np.full(n, -1, dtype=np.int64)
    correct = np.zeros(n, dtype=bool)
    cost = np.zeros(n)
    start = time.perf_counter()
    for k, i in enumerate(order):
        x = embeddings[i]
        name = policy.pull(x, table.cost[i])
        if name is None:
            continue
        a = column[name]
        chosen[k] = a
        correct[k] = table.correct[i, a]
        cost[k] = table.cost[i, a]
        policy.update(name, x, float(correct[k]), float(cost[k]))
        if observer is not None:
            for j in np.flatnonzero(table.cost[i] == 0):
                if j != a:
                    observer.observe(table.arms[j], x, float(table.correct[i, j]))
    return RunResult(chosen, correct, cost, time.perf_counter() - start)


@dataclass(frozen=True)
class TuningConfig:
    """The grid and the split of two-fold cross-tuning; ``budget_vs_best``: the budget of ``kgwise eval
    route``'s cross-tuning, as a multiple of the most accurate arm's cost on a half."""

    gammas: tuple[float | None, ...] = (None, 1.0, 0.5, 0.25)
    decomposed: tuple[bool, ...] = (False, True)
    budget_vs_best: float = 0.6
    split_seed: int = 0

    def __post_init__(self) -> None:
        if not self.gammas or not self.decomposed:
            raise ConfigError("the tuning grid needs at least one gamma and one decomposed setting")
        if any(g is not None and not (math.isfinite(g) and g >= 0) for g in self.gammas):
            raise ConfigError(f"tuning gammas must be None or ≥ 0, got {self.gammas}")
        if not (math.isfinite(self.budget_vs_best) and self.budget_vs_best > 0):
            raise ConfigError(f"budget_vs_best must be > 0, got {self.budget_vs_best}")

    def grid(self, contexts: Sequence[str]) -> list[GridPoint]:
        """Every ``(context, γ, decomposed)``, contexts outermost; the cascade context is one point (its
        rule, not Coke's γ or reward form, picks the arm)."""
        return [p for c in contexts
                for p in ([(c, None, False)] if c == CASCADE else
                          itertools.product([c], self.gammas, self.decomposed))]


def halves(n: int, split_seed: int) -> list[npt.NDArray[np.int64]]:
    """The two halves (sorted row numbers) of ``n`` questions under a seeded permutation."""
    perm = np.random.default_rng(split_seed).permutation(n)
    return [np.sort(perm[: n // 2]), np.sort(perm[n // 2:])]


class RunCache(Protocol):
    """Where finished runs are kept (e.g. a :class:`~kgwise.files.ResumeLog`)."""

    def get(self, key: str) -> Any: ...

    def put(self, key: str, value: Any) -> None: ...


@dataclass(frozen=True)
class HalfScore:
    """One grid point on one half over the seeds: each seed's accuracy and total cost, and per question
    (in the half's row order) the share of seeds that answered it right."""

    accuracies: tuple[float, ...]
    costs: tuple[float, ...]
    right: Matrix

    @property
    def accuracy(self) -> float:
        return float(np.mean(self.accuracies))

    @property
    def cost(self) -> float:
        return float(np.mean(self.costs))


class CrossFit:
    """Scores grid points of Coke on the halves of ``table`` (module docstring).

    ``contexts``: name → one row per question. ``budget(half)``: the budget of a run on that half (its
    outcome table). ``horizon``: pace the budget over the half's questions. ``price``: force
    ``pacing="price"`` (``kgwise eval route``'s cross-tuning) instead of ``base``'s pacing. ``cache``:
    finished runs by key, so that a rerun resumes. Free arms (cost 0 on a question) are observed."""

    def __init__(self, table: OutcomeTable, contexts: Mapping[str, npt.ArrayLike], base: CokeConfig,
                 seeds: int, budget: Callable[[OutcomeTable], float], split_seed: int = 0,
                 horizon: bool = True, price: bool = False, cache: RunCache | None = None,
                 on_run: Callable[[], None] | None = None) -> None:
        n = table.n_questions
        if n < 4:
            raise ConfigError(f"cross-tuning needs at least 4 questions, got {n}")
        if seeds < 1:
            raise ConfigError(f"seeds must be ≥ 1, got {seeds}")
        ctx = {name: np.asarray(v, dtype=np.float64) for name, v in contexts.items()}
        for name, values in ctx.items():
            if values.ndim != 2 or values.shape[0] != n:
                raise ConfigError(f"context {name!r}: {values.shape[0] if values.ndim else 0} rows for {n} "
                                  "questions")
        if not ctx:
            raise ConfigError("cross-tuning needs at least one context")
        self.table, self.base, self.seeds = table, base, seeds
        self.budget, self.horizon, self.price = budget, horizon, price
        self.cache, self.on_run = cache, on_run
        self.halves = halves(n, split_seed)
        self.parts = [table.subset(rows) for rows in self.halves]
        self.xs = [{name: values[rows] for name, values in ctx.items()} for rows in self.halves]
        self.contexts = list(ctx)

    def coke(self, point: GridPoint) -> CokeConfig:
        """``base`` with the point's γ and reward form (and price pacing when forced)."""
        _, gamma, decomposed = point
        if self.price:
            return replace(self.base, pacing="price", gamma_override=gamma, decomposed_reward=decomposed)
        return replace(self.base, gamma_override=gamma, decomposed_reward=decomposed)

    def score(self, h: int, point: GridPoint, warm: bool) -> HalfScore:
        """``point`` on half ``h`` over the seeds (seed ``s``: router seed and question order); ``warm``:
        the router first learns every arm's outcome on the other half."""
        ctx = point[0]
        coke = self.coke(point)
        half = self.parts[h]
        x = self.xs[h][ctx]
        budget = self.budget(half)
        accs, costs, right = [], [], np.zeros(half.n_questions)
        for s in range(self.seeds):
            key = json.dumps(["warm" if warm else "cold", h, ctx, asdict(coke), s])
            run = self.cache.get(key) if self.cache is not None else None
            if run is None:
                router = CokeRouter(half.arm_specs(), x.shape[1], budget=budget, config=coke, seed=s,
                                    horizon=half.n_questions if self.horizon else None)
                if warm:
                    router.warm_start(self.xs[1 - h][ctx], self.parts[1 - h].correct)
                if ctx == CASCADE:  # the threshold fitted on the other half, under its budget
                    other = self.parts[1 - h]
                    router.cascade = fit_cascade(self.xs[1 - h][ctx], other.correct, other.cost,
                                                 self.budget(other) / other.n_questions)
                order = np.random.default_rng(s).permutation(half.n_questions)
                result = simulate(router, half, x, order, router)
                correct = np.zeros(half.n_questions, dtype=np.uint8)
                correct[order] = result.correct
                run = {"accuracy": result.accuracy, "cost": result.total_cost,
                       "correct": (correct + ord("0")).tobytes().decode()}  # "0110…", the half's order
                if self.cache is not None:
                    self.cache.put(key, run)
            accs.append(float(run["accuracy"]))
            costs.append(float(run["cost"]))
            right += np.frombuffer(run["correct"].encode(), dtype=np.uint8) - ord("0")
            if self.on_run is not None:
                self.on_run()
        return HalfScore(tuple(accs), tuple(costs), right / self.seeds)


@dataclass(frozen=True)
class GridScore:
    """One grid point cross-fitted: per fold (the half routed, after learning the other) the mean
    accuracy and cost over the seeds, and their means over the two folds (cost in the table's unit, per
    question routed)."""

    context: str
    gamma: float | None
    decomposed_reward: bool
    accuracy_by_fold: tuple[float, float]
    cost_per_question_by_fold: tuple[float, float]

    @property
    def accuracy(self) -> float:
        return float(np.mean(self.accuracy_by_fold))

    @property
    def cost_per_question(self) -> float:
        return float(np.mean(self.cost_per_question_by_fold))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"accuracy": self.accuracy, "cost_per_question": self.cost_per_question}


@dataclass(frozen=True)
class SingleArmScore:
    """The baseline routing has to beat, cross-fitted like a grid point: per fold, the arm most accurate
    on the other fold among those that can answer every question of this fold within its budget, and
    that arm's accuracy and cost per question on this fold."""

    arm_by_fold: tuple[str, str]
    accuracy_by_fold: tuple[float, float]
    cost_per_question_by_fold: tuple[float, float]

    @property
    def accuracy(self) -> float:
        return float(np.mean(self.accuracy_by_fold))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"accuracy": self.accuracy}


def best_single_arm(learn: OutcomeTable, pay: OutcomeTable, budget: float) -> int | None:
    """The column of the arm most accurate on ``learn`` among those whose total cost on ``pay`` fits in
    ``budget`` (ties: the cheaper on ``learn``, then the table's order); ``None`` when none fits."""
    total = pay.cost.sum(axis=0)
    ok = [a for a in range(len(pay.arms)) if total[a] <= budget + 1e-9]
    if not ok:
        return None
    learnt = learn.correct.mean(axis=0)
    return max(ok, key=lambda a: (learnt[a], -learn.cost[:, a].mean(), -a))


def single_arm(fit: CrossFit) -> SingleArmScore | None:
    """:class:`SingleArmScore` on ``fit``'s halves; ``None`` when on some fold no arm fits the budget."""
    arms, acc, cost = [], [], []
    for h in (0, 1):
        here = fit.parts[h]
        best = best_single_arm(fit.parts[1 - h], here, fit.budget(here))
        if best is None:
            return None
        arms.append(here.arms[best])
        acc.append(float(here.correct[:, best].mean()))
        cost.append(float(here.cost[:, best].mean()))
    return SingleArmScore((arms[0], arms[1]), (acc[0], acc[1]), (cost[0], cost[1]))


@dataclass(frozen=True)
class RoutingGain:
    """Routing against the best affordable single arm (:func:`single_arm`), question by question, with
    the router's settings chosen out of fold: each fold is routed with the grid point that scored best on
    the *other* fold, so that picking the best of the grid does not inflate the estimate as the best mean
    over both folds does. ``gain``: the mean over all questions of routing's share of right answers (over
    the seeds) minus the single arm's; ``se``: its paired standard error; costs per question in the
    table's unit."""

    points: tuple[GridPoint, GridPoint]
    single_arm_accuracy: float
    gain: float
    se: float
    cost_per_question: float
    single_arm_cost_per_question: float
    questions: int

    @property
    def accuracy(self) -> float:
        """Routing's accuracy over both folds."""
        return self.single_arm_accuracy + self.gain

    def pays(self, z: float) -> bool:
        """Whether routing earns its place over the single arm at ``z`` standard errors: against an arm
        that costs no more, routing must be better by more than ``z·se``; against a dearer one, routing
        (cheaper) must not be worse by more than that."""
        if self.single_arm_cost_per_question <= self.cost_per_question:
            return self.gain > z * self.se
        return self.gain >= -z * self.se

    def questions_needed(self, z: float) -> int | None:
        """About how many logged questions would make a gain of the measured size clear ``z`` standard
        errors (the SE shrinks as ``1/√n``: ``⌈n·(z·se/gain)²⌉``), where routing does not pay on this log
        only for want of questions; ``None`` where it pays, or where the measured gain (≤ 0 against an
        arm that costs no more, below −z·se against a dearer one) would not pay on any number."""
        if self.pays(z) or self.single_arm_cost_per_question > self.cost_per_question or self.gain <= 0:
            return None
        return math.ceil(self.questions * (z * self.se / self.gain) ** 2)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self) | {"accuracy": self.accuracy}


def _best(scores: Sequence[tuple[float, float]]) -> int:
    """The position of the best ``(accuracy, cost)``: the most accurate, ties the cheaper, then the first."""
    return max(range(len(scores)), key=lambda i: (scores[i][0], -scores[i][1], -i))


def routing_gain(fit: CrossFit, grid: Sequence[GridPoint], runs: Sequence[tuple[HalfScore, HalfScore]],
                 one: SingleArmScore) -> RoutingGain:
    """:class:`RoutingGain` from every grid point's warm runs on the two folds (``runs[i][h]``: point
    ``grid[i]`` on fold ``h``) and the single arm's cross-fit."""
    picked: list[GridPoint] = []
    diffs, singles, cost, single_cost = [], [], 0.0, 0.0
    for h in (0, 1):
        best = _best([(r[1 - h].accuracy, r[1 - h].cost) for r in runs])  # the other fold's winner
        part = fit.parts[h]
        single = part.correct[:, part.arm_index(one.arm_by_fold[h])].astype(np.float64)
        diffs.append(runs[best][h].right - single)
        singles.append(single)
        picked.append(grid[best])
        cost += runs[best][h].cost
        single_cost += one.cost_per_question_by_fold[h] * part.n_questions
    d = np.concatenate(diffs)
    n = d.size
    se = float(d.std(ddof=1) / math.sqrt(n)) if n > 1 else math.inf
    return RoutingGain((picked[0], picked[1]), float(np.concatenate(singles).mean()), float(d.mean()), se,
                       cost / n, single_cost / n, n)


@dataclass(frozen=True)
class CrossFitReport:
    """What :func:`cross_fit` chose, every grid point's cross-fitted score, the best affordable single
    arm's (``single_arm``) and routing's gain over it with settings chosen out of fold (``gain``:
    routing is worth its cost only where it clears that arm; ``None`` without an affordable arm)."""

    chosen: GridScore
    grid: tuple[GridScore, ...]
    fold_sizes: tuple[int, int]
    seeds: int
    single_arm: SingleArmScore | None = None
    gain: RoutingGain | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"chosen": self.chosen.to_dict(), "grid": [g.to_dict() for g in self.grid],
                "fold_sizes": list(self.fold_sizes), "seeds": self.seeds,
                "single_arm": None if self.single_arm is None else self.single_arm.to_dict(),
                "gain": None if self.gain is None else self.gain.to_dict()}


def cross_fit(table: OutcomeTable, contexts: Mapping[str, npt.ArrayLike], base: CokeConfig,
              budget: Callable[[OutcomeTable], float], paced: bool, config: TuningConfig | None = None,
              seeds: int = 2) -> CrossFitReport:
    """Two-fold cross-fitting of ``base`` over ``config``'s grid (module docstring): a run on a half gets
    ``budget(half)``, paced over the half's questions when ``paced``."""
    cfg = config or TuningConfig()
    fit = CrossFit(table, contexts, base, seeds, budget, cfg.split_seed, horizon=paced)
    grid = cfg.grid(fit.contexts)
    runs = [(fit.score(0, point, warm=True), fit.score(1, point, warm=True)) for point in grid]
    scores = [GridScore(point[0], point[1], point[2], (r[0].accuracy, r[1].accuracy),
                        (r[0].cost / fit.parts[0].n_questions, r[1].cost / fit.parts[1].n_questions))
              for point, r in zip(grid, runs, strict=True)]
    best = _best([(g.accuracy, g.cost_per_question) for g in scores])
    one = single_arm(fit)
    return CrossFitReport(scores[best], tuple(scores), (len(fit.halves[0]), len(fit.halves[1])), seeds, one,
                          None if one is None else routing_gain(fit, grid, runs, one))
