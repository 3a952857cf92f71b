"""Baselines run beside Coke on the same question orders, speaking the router's verbs (``pull`` an arm
name given each arm's cost bound, ``update`` it with the reward and cost).

* :class:`RandomPolicy`: a uniformly random affordable arm.
* :func:`threshold_curve`: a RouteLLM-style threshold router — logistic regression on the question
  embedding predicts whether the cheap arm is right; questions whose predicted probability falls below the
  threshold go to the strong arm. Probabilities are cross-fitted (each question scored by a model trained on
  the other folds), and the threshold is swept so the router can be compared at equal cost.
* :class:`MabwiserPolicy`: mabwiser's off-the-shelf disjoint LinUCB with a cost-penalised reward
  ``correct − μ · cost / cost_ref``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kgwise.errors import ConfigError

__all__ = [
    "MabwiserConfig",
    "MabwiserPolicy",
    "RandomPolicy",
    "ThresholdConfig",
    "accuracy_at_cost",
    "hindsight_cascade",
    "threshold_curve",
]

Costs = Sequence[float] | npt.NDArray[np.float64]


def _names(arms: Sequence[str], owner: str) -> tuple[str, ...]:
    names = tuple(arms)
    if not names or len(set(names)) != len(names) or isinstance(arms, str):
        raise ConfigError(f"{owner} needs distinct arm names, got {arms!r}")
    return names


class RandomPolicy:
    """Picks an affordable arm uniformly at random (seeded); tracks its own spending. ``costs`` come one
    per arm in the order of ``arms``."""

    def __init__(self, arms: Sequence[str], budget: float = math.inf, seed: int = 0) -> None:
        self.arms = _names(arms, "RandomPolicy")
        self.budget = budget
        self.spent = 0.0
        self._rng = np.random.default_rng(seed)

    def pull(self, embedding: npt.ArrayLike, costs: Costs) -> str | None:
        ok = np.flatnonzero(self.spent + np.asarray(costs, dtype=np.float64) <= self.budget)
        return None if ok.size == 0 else self.arms[int(self._rng.choice(ok))]

    def update(self, name: str, embedding: npt.ArrayLike, reward: float, cost: float) -> None:
        self.spent += cost


@dataclass(frozen=True)
class MabwiserConfig:
    """``alpha``: LinUCB width; ``l2_lambda``: ridge; ``cost_weight`` μ of the penalised reward."""

    alpha: float = 1.0
    l2_lambda: float = 1.0
    cost_weight: float = 1.0


class MabwiserPolicy:
    """mabwiser ``LearningPolicy.LinUCB`` over the arms, reward ``r − μ·cost/cost_ref``, within a budget.

    The first ``n_arms`` questions go round-robin to every affordable arm (mabwiser needs a first ``fit``);
    afterwards the affordable arm with the largest expectation is chosen and ``partial_fit`` is called.
    ``costs`` come one per arm in the order of ``arms``; mabwiser knows the arms by their positions.
    """

    def __init__(
        self,
        arms: Sequence[str],
        cost_ref: float,
        budget: float = math.inf,
        config: MabwiserConfig | None = None,
        seed: int = 0,
    ) -> None:
        from mabwiser.mab import MAB, LearningPolicy

        if cost_ref <= 0:
            raise ConfigError(f"cost_ref must be > 0, got {cost_ref}")
        self.config = config or MabwiserConfig()
        self.arms = _names(arms, "MabwiserPolicy")
        self._column = {a: j for j, a in enumerate(self.arms)}
        n_arms = self.n_arms = len(self.arms)
        self.cost_ref = cost_ref
        self.budget = budget
        self.spent = 0.0
        self._mab = MAB(
            arms=list(range(n_arms)),
            learning_policy=LearningPolicy.LinUCB(alpha=self.config.alpha, l2_lambda=self.config.l2_lambda),
            seed=seed,
        )
        self._fitted = False
        self._warm: list[tuple[int, npt.NDArray[np.float64], float]] = []
        self._step = 0

    def pull(self, embedding: npt.ArrayLike, costs: Costs) -> str | None:
        ok = self.spent + np.asarray(costs, dtype=np.float64) <= self.budget
        if not ok.any():
            return None
        if not self._fitted:
            order = [(self._step + k) % self.n_arms for k in range(self.n_arms)]
            return self.arms[next(a for a in order if ok[a])]
        x = np.asarray(embedding, dtype=np.float64).reshape(1, -1)
        exp: Any = self._mab.predict_expectations(x)
        values = np.array([exp[a] for a in range(self.n_arms)], dtype=np.float64)
        values[~ok] = -np.inf
        return self.arms[int(np.argmax(values))]

    def update(self, name: str, embedding: npt.ArrayLike, reward: float, cost: float) -> None:
        arm = self._column[name]
        self.spent += cost
        self._step += 1
        r = float(reward) - self.config.cost_weight * cost / self.cost_ref
        x = np.asarray(embedding, dtype=np.float64).reshape(-1)
        if not self._fitted:
            self._warm.append((arm, x, r))
            if len({a for a, _, _ in self._warm}) == self.n_arms or len(self._warm) >= 4 * self.n_arms:
                arms = [a for a, _, _ in self._warm]
                self._mab.fit(arms, [w for _, _, w in self._warm], np.stack([v for _, v, _ in self._warm]))
                self._fitted = True
            return
        self._mab.partial_fit([arm], [r], x.reshape(1, -1))


@dataclass(frozen=True)
class ThresholdConfig:
    """``folds`` of the cross-fitting; ``C`` of the logistic regression; ``points`` of the threshold sweep."""

    folds: int = 5
    C: float = 1.0
    points: int = 21


def threshold_curve(
    embeddings: npt.NDArray[np.floating[Any]],
    cheap_correct: npt.NDArray[np.bool_],
    strong_correct: npt.NDArray[np.bool_],
    cheap_cost: npt.NDArray[np.float64],
    strong_cost: npt.NDArray[np.float64],
    config: ThresholdConfig | None = None,
    seed: int = 0,
) -> list[dict[str, float]]:
    """Accuracy and total cost of the threshold router for a sweep of strong-arm shares 0 … 1.

    ``P(cheap arm right | q)`` is cross-fitted; the questions with the lowest probabilities go to the strong
    arm (the threshold is the probability at that share).
    """
    from sklearn.linear_model import LogisticRegression

    cfg = config or ThresholdConfig()
    n = embeddings.shape[0]
    y = np.asarray(cheap_correct, dtype=bool)
    prob = np.empty(n)
    folds = np.random.default_rng(seed).permutation(n) % cfg.folds
    for f in range(cfg.folds):
        train, test = folds != f, folds == f
        if not test.any():  # fewer questions than folds
            continue
        if y[train].all() or not y[train].any():
            prob[test] = float(y[train].mean())
            continue
        clf = LogisticRegression(C=cfg.C, max_iter=1000)
        clf.fit(embeddings[train], y[train])
        prob[test] = clf.predict_proba(embeddings[test])[:, 1]
    order = np.argsort(prob, kind="stable")  # least likely right first → strong arm
    out: list[dict[str, float]] = []
    for share in np.linspace(0.0, 1.0, cfg.points):
        k = int(np.rint(share * n))
        strong = np.zeros(n, dtype=bool)
        strong[order[:k]] = True
        acc = float(np.where(strong, strong_correct, cheap_correct).mean())
        cost = float(np.where(strong, strong_cost, cheap_cost).sum())
        thr = float(prob[order[k - 1]]) if k > 0 else 0.0
        out.append({"strong_share": float(share), "threshold": thr, "accuracy": acc, "cost": cost})
    return out


def accuracy_at_cost(curve: Sequence[dict[str, float]], cost: float) -> float:
    """The curve's accuracy linearly interpolated at ``cost`` (clamped to the curve's cost range)."""
    pts = sorted((p["cost"], p["accuracy"]) for p in curve)
    xs = np.array([c for c, _ in pts])
    ys = np.array([a for _, a in pts])
    return float(np.interp(cost, xs, ys))


def hindsight_cascade(
    confidence: npt.NDArray[np.float64],
    cheap_correct: npt.NDArray[np.bool_],
    strong_correct: npt.NDArray[np.bool_],
    strong_cost: npt.NDArray[np.float64],
    points: int = 21,
) -> list[dict[str, float]]:
    """A bound, not a router: answer with the cheap arm when its own ``confidence`` is among the highest,
    else escalate to the strong arm, for strong-arm shares 0 … 1, with the thresholds read off the
    evaluation questions themselves (hindsight). No router that sees less than the cheap arm's confidence
    and learns its threshold honestly can be expected to beat this curve."""
    n = confidence.size
    order = np.argsort(confidence, kind="stable")  # least confident first → strong arm
    out: list[dict[str, float]] = []
    for share in np.linspace(0.0, 1.0, points):
        k = int(np.rint(share * n))
        strong = np.zeros(n, dtype=bool)
        strong[order[:k]] = True
        out.append({"strong_share": float(share),
                    "accuracy": float(np.where(strong, strong_correct, cheap_correct).mean()),
                    "cost": float(strong_cost[strong].sum())})
    return out
