"""The outcome table a routing experiment replays: per question × arm, correct or not and the cost."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from kgwise.errors import ConfigError
from kgwise.route.arms import Cluster
from kgwise.types import Question

__all__ = ["ArmInfo", "OutcomeTable"]


class ArmInfo(Protocol):
    """What a table needs to know of an arm."""

    @property
    def name(self) -> str: ...
    @property
    def cluster(self) -> Cluster: ...
    @property
    def reported_accuracy(self) -> float | None: ...


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

    def head(self, n: int | None) -> OutcomeTable:
        """The first ``n`` questions (all when ``n`` is None or not smaller)."""
        return self if n is None or n >= self.n_questions else self.subset(range(n))

    def arm_index(self, name: str) -> int:
        try:
            return self.arms.index(name)
        except ValueError:
            raise ConfigError(f"no arm named {name!r}; arms: {', '.join(self.arms)}") from None
