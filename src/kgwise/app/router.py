"""The one place the app talks to :class:`kgwise.route.coke.CokeRouter` (arms by name in, names out):
costs are checked to name every arm, and the router's accounting is read as the app's typed views; and
the router's context (:func:`context_width`, :func:`context_vector`): the question embedding, or
(``question+free``) ``[1, agree, s_1 … s_k, agree · min s, embedding…]`` from the config's free arms'
answers and signals (:func:`kgwise.route.table.free_context`), or (``free``) those without the
embedding, or (``predicted``) ``[1, p_1(x) … p_m(x)]``, every arm's success predicted by the predictor a
fit learnt (:class:`kgwise.route.features.PredictedContext`, kept with the router in its state), or
(``cascade``) the same, the router's pick narrowed by the cascade rule the fit learnt
(:attr:`kgwise.route.coke.CokeRouter.cascade`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from kgwise.app.config import Context, PipelineConfig, reads_free, reads_predictor
from kgwise.errors import ConfigError
from kgwise.route.arms import CLUSTERS, ArmSpec
from kgwise.route.coke import CokeConfig, CokeRouter
from kgwise.route.features import PredictedContext
from kgwise.route.table import free_context, free_signal_row

__all__ = ["RouterAdapter", "context_vector", "context_width"]


def context_width(config: PipelineConfig, context: Context, encoder_dim: int) -> int:
    """The router's context dimension: the embedding's, plus ``3 + k`` for ``k`` free arms (``free``:
    ``3 + k`` alone; ``predicted``: ``1 +`` the number of arms)."""
    if not reads_free(context):
        return encoder_dim
    k = len(config.free_arms)
    if not k:
        raise ConfigError(f"a {context!r} router context needs a free arm (observe = true, no price)")
    if reads_predictor(context):
        return 1 + len(config.arms)
    return (0 if context == "free" else encoder_dim) + 3 + k


def context_vector(config: PipelineConfig, context: Context, embedding: npt.ArrayLike,
                   free: Mapping[str, tuple[str, Sequence[float]]], text: str = "",
                   predicted: PredictedContext | None = None) -> npt.NDArray[np.float64]:
    """One question's router context; ``free``: each free arm's ``(answer, signals)`` on it (an arm
    missing from it — it could not answer, or cost something on this question — counts as ``("", ())``,
    a signal of 0); ``text`` and ``predicted`` (the fitted predictor): for the ``predicted`` context."""
    x = np.asarray(embedding, dtype=np.float64).reshape(-1)
    if not reads_free(context):
        return x
    if reads_predictor(context):
        if predicted is None:
            raise ConfigError(f"the {context!r} router context needs the success predictor a fit learns: run "
                              "`kgwise fit` (or `kgwise fit --log`) first")
        return predicted.vector(text, x, free)
    row = free_signal_row([(a, float(s[0]) if len(s) else 0.0)
                           for a, s in (free.get(n, ("", ())) for n in config.free_arms)])
    return np.asarray(free_context([row], [x if context == "question+free" else x[:0]])[0], dtype=np.float64)


class RouterAdapter:
    """A Coke router over the config's arms, addressed by arm name."""

    def __init__(self, router: CokeRouter) -> None:
        self.router = router
        self._predicted: tuple[dict[str, Any], PredictedContext] | None = None

    @property
    def predicted(self) -> PredictedContext | None:
        """The success predictor of a ``predicted`` context, kept in the router's state
        (:attr:`kgwise.route.coke.CokeRouter.context_model`; read once, then reused)."""
        model = self.router.context_model
        if model is None:
            return None
        if self._predicted is None or self._predicted[0] is not model:
            self._predicted = (model, PredictedContext.from_dict(model))
        return self._predicted[1]

    @predicted.setter
    def predicted(self, value: PredictedContext | None) -> None:
        self.router.context_model = None if value is None else value.to_dict()
        self._predicted = None

    @classmethod
    def new(cls, config: PipelineConfig, dim: int, coke: CokeConfig | None = None) -> RouterAdapter:
        """A fresh router over ``dim``-d contexts: the config's arms, clusters, reported accuracies, budget,
        horizon, seed and ``[coke]`` values (or ``coke``)."""
        r = config.router
        return cls(CokeRouter([ArmSpec(a.name, a.cluster, a.reported_accuracy) for a in config.arms], dim,
                              budget=r.budget, config=coke or r.coke, seed=r.seed, horizon=r.horizon))

    # ------------------------------------------------------------------ names
    @property
    def names(self) -> list[str]:
        return list(self.router.names)

    @property
    def clusters(self) -> list[str]:
        return list(self.router.clusters)

    @property
    def dim(self) -> int:
        return self.router.dim

    @property
    def pinned(self) -> str | None:
        """The arm the router answers with wherever it can (:meth:`kgwise.route.coke.CokeRouter.pin`)."""
        return self.router.pinned_arm

    def pin(self, name: str | None) -> None:
        """Answer with arm ``name`` wherever it can; ``None``: route
        (:meth:`kgwise.route.coke.CokeRouter.pin`)."""
        self.router.pin(name)

    def _vector(self, costs: Mapping[str, float]) -> list[float]:
        missing = [n for n in self.router.names if n not in costs]
        if missing:
            raise ConfigError(f"no cost bound for arm(s) {', '.join(missing)}")
        return [float(costs[n]) for n in self.router.names]

    # ------------------------------------------------------------------ routing
    def unreachable(self) -> float:
        """A cost bound no question can afford (for arms that cannot answer a question)."""
        return self.router.budget + 1.0

    def select(self, x: npt.NDArray[np.float64], costs: Mapping[str, float]) -> str | None:
        """The affordable arm maximising Eq. 2 (its bound is held until :meth:`update`/:meth:`cancel`).
        A bound above the whole budget (:meth:`unreachable`: the arm cannot answer) marks the arm as
        unavailable, so that it neither is picked nor inflates the arm's mean cost bound, which the price
        of ``pacing="price"`` and the cost-regret prior read."""
        c = self._vector(costs)
        return self.router.pull(x, c, available=[b <= self.router.budget for b in c])

    def affordable(self, costs: Mapping[str, float]) -> dict[str, bool]:
        """Whether each arm's cost bound fits in what the (paced) budget leaves for the next question."""
        mask = self.router.affordable(self._vector(costs))
        return {n: bool(m) for n, m in zip(self.router.names, mask, strict=True)}

    def scores(self, x: npt.NDArray[np.float64]) -> dict[str, float]:
        """Eq. 2 per arm with each cluster's θ at its posterior mean (deterministic; the selection itself
        draws θ, Eq. 3–5)."""
        r = self.router
        total = r.values(r.thompson.mean(), lambda: r.linucb.scores(x))
        return {n: float(v) for n, v in zip(r.names, total, strict=True)}

    def update(self, name: str, x: npt.NDArray[np.float64], reward: float, cost: float, bound: float
               ) -> None:
        """Pay and learn at once (:meth:`charge` + :meth:`learn`), a cost above its bound refused."""
        self.router.update(name, x, reward, cost, bound=bound)

    def charge(self, name: str, cost: float, bound: float) -> None:
        """Pay an answer when it is made (its hold released); a cost above its bound is recorded and
        counted in :attr:`overrun` — the arm was called, the money is gone."""
        self.router.charge(name, cost, bound, allow_overrun=True)

    def learn(self, name: str, x: npt.NDArray[np.float64], reward: float, cost: float) -> None:
        """Learn the graded outcome of an answer :meth:`charge` paid ``cost`` for."""
        self.router.learn(name, x, reward, cost)

    def observe(self, name: str, x: npt.NDArray[np.float64], reward: float) -> None:
        self.router.observe(name, x, reward)

    def cancel(self, name: str, bound: float) -> None:
        self.router.cancel(name, bound)

    def warm_start(self, x: npt.NDArray[np.float64], rewards: Mapping[str, Sequence[float]]) -> int:
        """Learn logged outcomes (``rewards[arm][i]``: reward on question ``i``, NaN when not graded)."""
        cols = [rewards.get(n, [math.nan] * len(x)) for n in self.router.names]
        return self.router.warm_start(x, np.asarray(cols, dtype=np.float64).T)

    # ------------------------------------------------------------------ accounting
    @property
    def budget(self) -> float:
        return self.router.budget

    @property
    def spent(self) -> float:
        return self.router.spent

    @property
    def reserved(self) -> float:
        return self.router.reserved

    @property
    def remaining(self) -> float:
        return self.router.remaining

    @property
    def overrun(self) -> float:
        return self.router.overrun

    @property
    def questions(self) -> int:
        return self.router.questions_seen

    def pulls(self) -> dict[str, int]:
        return {n: int(p) for n, p in zip(self.router.names, self.router.pulls, strict=True)}

    def arm_cost(self) -> dict[str, float]:
        return {n: float(c) for n, c in zip(self.router.names, self.router.arm_cost, strict=True)}

    def carry_spend(self, old: RouterAdapter) -> None:
        """Start from ``old``'s spend, overrun and per-arm spend (a fit's router replacing it: spend only
        grows)."""
        new = self.router
        new.spent = max(new.spent, old.router.spent)
        new.overrun = max(new.overrun, old.router.overrun)
        for i, name in enumerate(new.names):
            if name in old.names:
                new.arm_cost[i] = max(new.arm_cost[i], old.router.arm_cost[old.names.index(name)])

    def cluster_accuracy(self) -> dict[str, float]:
        return {c: float(m) for c, m in zip(CLUSTERS, self.router.thompson.mean(), strict=True)}

    def copy(self) -> RouterAdapter:
        return RouterAdapter(CokeRouter.from_state_dict(self.router.state_dict()))

    def state_dict(self) -> dict[str, Any]:
        return self.router.state_dict()

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> RouterAdapter:
        return cls(CokeRouter.from_state_dict(state))
