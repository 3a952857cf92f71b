"""The outcome table a routing experiment replays (per question × arm, correct or not and the cost), and
how much of a graded log every arm graded, and the free arms' signals a router's context reads."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kgwise.datasets.user import GradedLog
from kgwise.errors import ConfigError
from kgwise.route.arms import ArmInfo, ArmSpec, Cluster
from kgwise.types import Question, Usage

__all__ = ["ArmInfo", "OutcomeTable", "free_context", "free_signal_row", "graded_coverage"]


@dataclass(frozen=True, eq=False)
class OutcomeTable:
    """``correct[i, a]``, ``cost[i, a]``: arm ``a`` on question ``i``; ``unit`` ``"$"`` or ``"calls"``."""

    qids: tuple[str, ...]
    texts: tuple[str, ...]
    arms: tuple[str, ...]
    clusters: tuple[Cluster, ...]
    reported: tuple[float | None, ...]
    correct: npt.NDArray[np.bool_]
    cost: npt.NDArray[np.float64]
    unit: str = "$"

    def __post_init__(self) -> None:
        n, m = len(self.qids), len(self.arms)
        if self.correct.shape != (n, m) or self.cost.shape != (n, m):
            raise ConfigError(f"outcome table shapes {self.correct.shape}, {self.cost.shape} ≠ ({n}, {m})")
        if len(self.texts) != n or len(self.clusters) != m or len(self.reported) != m:
            raise ConfigError("outcome table: texts/clusters/reported lengths do not match")
        if not np.all(np.isfinite(self.cost)) or np.any(self.cost < 0):
            raise ConfigError("outcome table: costs must be finite and ≥ 0")

    @classmethod
    def of(cls, questions: Sequence[Question], arms: Sequence[ArmInfo], correct: npt.NDArray[np.bool_],
           cost: npt.NDArray[np.float64], unit: str) -> OutcomeTable:
        """The table of ``questions`` × ``arms`` (ids, texts, names, clusters, reported accuracies)."""
        return cls(tuple(q.id for q in questions), tuple(q.text for q in questions),
                   tuple(a.name for a in arms), tuple(a.cluster for a in arms),
                   tuple(a.reported_accuracy for a in arms), correct, cost, unit)

    @property
    def n_questions(self) -> int:
        return len(self.qids)

    @property
    def n_arms(self) -> int:
        return len(self.arms)

    @property
    def free_columns(self) -> list[int]:
        """The arms (column indices) that cost nothing on every question."""
        return [j for j in range(self.n_arms) if not np.any(self.cost[:, j] > 0)]

    def arm_specs(self) -> tuple[ArmSpec, ...]:
        """The table's arms (name, cluster, reported accuracy), in column order: what a router takes."""
        rows = zip(self.arms, self.clusters, self.reported, strict=True)
        return tuple(ArmSpec(name, cluster, reported) for name, cluster, reported in rows)

    def subset(self, rows: Sequence[int] | npt.NDArray[np.int64]) -> OutcomeTable:
        """The table restricted to question rows ``rows`` (in that order)."""
        r = np.asarray(rows, dtype=np.int64)
        return OutcomeTable(
            tuple(self.qids[i] for i in r),
            tuple(self.texts[i] for i in r),
            self.arms,
            self.clusters,
            self.reported,
            self.correct[r],
            self.cost[r],
            self.unit,
        )

    @classmethod
    def from_graded_log(cls, log: GradedLog, arms: Sequence[ArmInfo], unit: str = "$",
                        cost_of: Callable[[str, Usage], float] | None = None) -> OutcomeTable:
        """The table of a graded log's questions that every one of ``arms`` graded (the others are
        counted by :func:`graded_coverage`); an arm's cost is its ``cost``, or ``cost_of(arm, usage)``."""
        names = [a.name for a in arms]
        missing = [n for n in names if n not in log.arms]
        if missing:
            raise ConfigError(f"the graded log grades no arm named {', '.join(map(repr, missing))}; it has "
                              f"{', '.join(log.arms)}")
        kept = [q for q in log.questions if all(n in q.arms for n in names)]
        if not kept:
            raise ConfigError(f"no question of the graded log is graded on every arm ({', '.join(names)})")
        correct = np.array([[q.arms[n].correct for n in names] for q in kept], dtype=bool)
        cost = np.zeros((len(kept), len(names)))
        for i, q in enumerate(kept):
            for j, n in enumerate(names):
                o = q.arms[n]
                if o.cost is not None:
                    cost[i, j] = o.cost
                elif cost_of is None:
                    raise ConfigError(f"question {q.id!r}, arm {n!r}: the log gives usage, not cost, and no "
                                      "price is known for the arm")
                else:
                    cost[i, j] = cost_of(n, o.usage or Usage())
        return cls(tuple(q.id for q in kept), tuple(q.text for q in kept), tuple(names),
                   tuple(a.cluster for a in arms), tuple(a.reported_accuracy for a in arms), correct, cost,
                   unit)

    def head(self, n: int | None) -> OutcomeTable:
        """The first ``n`` questions (all when ``n`` is None or not smaller)."""
        return self if n is None or n >= self.n_questions else self.subset(range(n))

    def budget_arm(self, rows: Sequence[int] | npt.NDArray[np.int64] | None = None) -> int:
        """The arm a budget "a fraction of the best arm's cost" is of, on ``rows`` (default all): the most
        accurate arm, or — when it costs nothing there, so that any fraction of its cost buys nothing —
        the most accurate arm that costs something (the convention of ``eval pipeline --live``: the best
        paid arm)."""
        r = np.arange(self.n_questions) if rows is None else np.asarray(rows, dtype=np.int64)
        acc = self.correct[r].mean(axis=0)
        total = self.cost[r].sum(axis=0)
        best = int(np.argmax(acc))
        paid = np.flatnonzero(total > 0)
        if total[best] > 0 or not paid.size:
            return best
        return int(paid[np.argmax(acc[paid])])

    def budgeted_oracle(self, rows: Sequence[int] | npt.NDArray[np.int64], budget: float) -> float:
        """The best accuracy on ``rows`` that any per-question choice of arm (or no answer, at no cost)
        reaches spending at most ``budget`` in all: each question answered right gains 1 and costs at
        least its cheapest right arm's cost, so the optimum answers right the questions whose cheapest
        right arm is cheapest, in that order, while the budget lasts (exact: equal gains make the
        knapsack greedy). An upper bound for every router on these questions at this budget; without a
        budget limit it is the oracle's accuracy (some arm right)."""
        r = np.asarray(rows, dtype=np.int64)
        if not len(r):
            raise ConfigError("a budgeted oracle needs at least one question")
        cheapest_right = np.where(self.correct[r], self.cost[r], np.inf).min(axis=1)
        spend = np.cumsum(np.sort(cheapest_right[np.isfinite(cheapest_right)]))
        return int(np.searchsorted(spend, budget * (1 + 1e-12), side="right")) / len(r)

    def arm_index(self, name: str) -> int:
        try:
            return self.arms.index(name)
        except ValueError:
            raise ConfigError(f"no arm named {name!r}; arms: {', '.join(self.arms)}") from None


def graded_coverage(log: GradedLog, arms: Sequence[str]) -> dict[str, object]:
    """How many of a log's questions every arm graded, and which were left out (counted and named)."""
    left = [q.id for q in log.questions if not all(a in q.arms for a in arms)]
    return {"log_questions": len(log.questions), "graded_on_every_arm": len(log.questions) - len(left),
            "left_out": len(left), "left_out_ids": left[:50]}


def free_signal_row(outputs: Sequence[tuple[str, float]]) -> list[float]:
    """What free arms say on one question, from each arm's ``(answer, signal)`` (``""``: no answer; the
    signal: the arm's first score, e.g. its top candidate's): ``[agree, s_1, …, s_k, agree · min(s)]`` with
    ``agree`` whether they all put the same non-empty answer on top."""
    if not outputs:
        raise ConfigError("free signals need at least one free arm")
    scores = [float(s) for _, s in outputs]
    answers = {a for a, _ in outputs}
    agree = float(len(answers) == 1 and "" not in answers)
    return [agree, *scores, agree * min(scores)]


def free_context(signals: npt.ArrayLike, embeddings: npt.ArrayLike) -> npt.NDArray[np.float64]:
    """The router context ``[1, free signals…, question embedding…]`` per row (the constant is LinUCB's
    intercept): ``kgwise eval route``'s ``free_gnn_signals+embedding`` and the pipeline's
    ``question+free``."""
    s = np.atleast_2d(np.asarray(signals, dtype=np.float64))
    x = np.atleast_2d(np.asarray(embeddings, dtype=np.float64))
    if s.shape[0] != x.shape[0]:
        raise ConfigError(f"free signals for {s.shape[0]} questions, embeddings for {x.shape[0]}")
    return np.hstack([np.ones((s.shape[0], 1)), s, x])
