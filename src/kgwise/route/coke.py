"""Coke: cost-efficient routing between KG models and LLMs (Dong et al., Eq. 2–14).

The router's arms are named (:class:`~kgwise.route.arms.ArmInfo`: name, cluster, reported accuracy);
:meth:`CokeRouter.pull` returns the name of the arm it picked, and feedback names the arm. For question
embedding ``q`` every affordable arm ``a`` (cluster ``c(a)``) is scored

    E(r_a | q) = θ_c(a) + (q·μ_a + γ √(qᵀ A_a⁻¹ q)) − λ · R_a                      (Eq. 2)

* ``θ_c ~ Beta(α_c, β_c)``: cluster-level Thompson sampling, priors from the arms' reported accuracy
  (Eq. 3–5) — :class:`kgwise.bandit.BetaThompson`;
* the LinUCB term: per-arm ridge regression on the question embedding (Eq. 8–13) —
  :class:`kgwise.bandit.LinUCB`, ``γ = 1 + √(ln(2/δ)/2)``;
* ``R_a``: cost regret, the share of arm ``a``'s spending that went to wrong answers (Eq. 14).

An arm is affordable when spending its cost bound keeps the total within the budget ``B`` (Eq. 14's
constraint, applied to the total so that it also holds per arm); the budget is never exceeded while the
reported costs stay within their bounds. The budget is an amount (money, or calls: the unit of the
costs). A pulled arm's bound is held until its outcome arrives
(:meth:`CokeRouter.update`) or the call is called off (:meth:`CokeRouter.cancel`), so decisions that
wait for feedback at the same time cannot overspend together. With a
``horizon`` of ``N`` questions the budget is also paced (a kgwise addition): by the ``k``-th question at
most ``B·k/N`` may have been spent, so a tight budget is spread over the run instead of being spent on
the first questions' exploration of expensive arms.

Further kgwise additions, off by default:

* ``pacing="price"`` (with a horizon) puts a price ``η ≥ 0`` on cost, as primal–dual methods for bandits
  with a budget do (Agrawal & Devanur 2014): the arm maximises Eq. 2 − ``η·c̄_a`` (``c̄_a``: the arm's mean
  cost bound so far). ``η`` is set afresh for every question, the smallest price at which the arms this
  rule picks for the last ``price_window`` questions would spend no more than the budget left per
  question left. The allowance alone spends on whichever questions come first while money is left; the
  price keeps it for the questions where a costly arm's expected gain is largest.
* :meth:`CokeRouter.observe`: an arm's outcome on a question it answered at no cost to the budget (a free
  KG model run on every question, graded when the answer becomes known) updates its cluster posterior and
  its ridge regression like :meth:`CokeRouter.update`, without selection or spending.
* :meth:`CokeRouter.warm_start`: the same for logged outcomes (questions graded on some or all arms
  beforehand), so a router starts from what they teach rather than from the priors alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Self

import numpy as np
import numpy.typing as npt

from kgwise.bandit import BetaThompson, LinUCB, Policy, beta_prior_from_accuracy, gamma_from_delta
from kgwise.bandit.linucb import TrackedContexts
from kgwise.errors import ConfigError, KgwiseError
from kgwise.route.arms import CLUSTERS, ArmInfo, ArmSpec, Cluster
from kgwise.route.cascade import CascadeRule
from kgwise.route.price import PriceWindow
from kgwise.settings import table

Costs = Mapping[str, float] | Sequence[float] | npt.NDArray[np.float64]
"""Each arm's cost bound for one question: by arm name, or one number per arm in the router's arm order."""

__all__ = ["PACINGS", "BudgetExceededError", "CokeConfig", "CokeRouter", "cluster_priors"]

PACINGS = ("allowance", "price")


class BudgetExceededError(KgwiseError):
    """The budget refuses: no arm's cost bound fits in what it leaves, a cost is above the bound held for
    its selection, or a cost without a selection breaks it."""


@table("coke")
@dataclass(frozen=True)
class CokeConfig:
    """Coke's hyper-parameters (defaults: the paper's λ = 1; δ = 0.05 → γ ≈ 2.36; ridge σ = 1; the paper
    gives no δ, σ or prior strengths).

    ``prior_strength``: pseudo-observations behind each cluster's prior (its mean is the average reported
    accuracy of the cluster's arms). ``regret_prior``: pseudo-questions behind each arm's cost regret, at
    the arm's mean cost and reported error rate (0 = Eq. 14 exactly, where one early failure sets
    ``R_a = 1`` and can lock an arm out for good). ``use_cluster`` / ``use_context`` switch off E_c / E_a
    (Table 2's ablations w/o E_c and w/o E_a); ``lam = 0`` is w/o R_a. ``precision``: LinUCB's
    matrix storage (``float32`` halves the memory traffic of a selection). ``decomposed_reward``: the
    LinUCB term learns the arm's reward ``r_a = r − E[θ_c]`` (the reward minus its cluster's posterior
    mean, one reading of Eq. 2's decomposition into r_c and r_a) rather than ``r`` (Eq. 10); with ``r``
    the ridge prior μ = 0 makes an untried arm look worse than a tried arm with positive rewards, so
    LinUCB tries the arms one after another. Without E_c the target is ``r``. ``pacing``: ``"allowance"``
    (a router with a horizon never spends more than ``B·k/N`` by question ``k``) or ``"price"`` (that, and
    cost is priced so that the budget goes to the questions that gain most from costly arms; the price
    is fitted on the last ``price_window`` questions; see the module docstring).
    """

    lam: float = 1.0
    delta: float = 0.05
    ridge: float = 1.0
    prior_strength: float = 10.0
    regret_prior: float = 10.0
    use_cluster: bool = True
    use_context: bool = True
    precision: str = "float64"
    gamma_override: float | None = None
    decomposed_reward: bool = False
    pacing: str = "allowance"
    price_window: int = 500

    def __post_init__(self) -> None:
        if not (math.isfinite(self.lam) and self.lam >= 0):
            raise ConfigError(f"lambda must be a finite number ≥ 0, got {self.lam}")
        gamma_from_delta(self.delta)  # validates δ
        if not (math.isfinite(self.ridge) and self.ridge > 0):
            raise ConfigError(f"ridge must be > 0, got {self.ridge}")
        if not (math.isfinite(self.prior_strength) and self.prior_strength > 0):
            raise ConfigError(f"prior_strength must be > 0, got {self.prior_strength}")
        if self.gamma_override is not None and not (
            math.isfinite(self.gamma_override) and self.gamma_override >= 0
        ):
            raise ConfigError(f"gamma_override must be ≥ 0, got {self.gamma_override}")
        if not (math.isfinite(self.regret_prior) and self.regret_prior >= 0):
            raise ConfigError(f"regret_prior must be ≥ 0, got {self.regret_prior}")
        if self.pacing not in PACINGS:
            raise ConfigError(f"pacing must be one of {', '.join(PACINGS)}, got {self.pacing!r}")
        if self.price_window < 1:
            raise ConfigError(f"price_window must be ≥ 1 question, got {self.price_window}")

    @property
    def gamma(self) -> float:
        """LinUCB width ``γ = 1 + √(ln(2/δ)/2)`` (Eq. 12), or ``gamma_override`` when set (γ < 1.59 lies
        outside what the paper's formula can give)."""
        return self.gamma_override if self.gamma_override is not None else gamma_from_delta(self.delta)


def _reward(reward: float) -> float:
    r = float(reward)
    if not 0.0 <= r <= 1.0:
        raise ConfigError(f"reward must lie in [0, 1], got {reward}")
    return r


def cluster_priors(
    clusters: Sequence[Cluster], reported: Sequence[float | None], strength: float
) -> list[tuple[float, float]]:
    """Beta prior per cluster in ``CLUSTERS`` order: mean = average reported accuracy of its arms (Eq. 3–4);
    ``Beta(1, 1)`` for a cluster whose arms report nothing."""
    out: list[tuple[float, float]] = []
    for c in CLUSTERS:
        accs = [r for cl, r in zip(clusters, reported, strict=True) if cl == c and r is not None]
        out.append(beta_prior_from_accuracy(float(np.mean(accs)), strength) if accs else (1.0, 1.0))
    return out


class CokeRouter(Policy[str]):
    """Online router over named arms: :meth:`pull` the name of an arm for a question embedding within the
    budget (``None`` when none is affordable), then :meth:`update` that arm with the observed reward
    (1 = correct) and cost; an arm set by :meth:`pin` is pulled wherever it is available and affordable.

    ``arms``: name, cluster and reported accuracy of each arm (:class:`~kgwise.route.arms.ArmSpec`, a
    ``LiveArm`` of :mod:`kgwise.eval.route.live`, an outcome table's ``arm_specs()``); their order is the
    order of per-arm arrays (costs given as a sequence, :meth:`warm_start`'s columns, :meth:`cost_regret`).
    ``budget``: the total that may be spent, in the unit of the costs (money or calls)."""

    def __init__(
        self,
        arms: Sequence[ArmInfo],
        dim: int,
        *,
        budget: float = math.inf,
        config: CokeConfig | None = None,
        seed: int = 0,
        horizon: int | None = None,
    ) -> None:
        if isinstance(arms, str | bytes) or not isinstance(arms, Sequence):
            raise ConfigError(f"CokeRouter takes a sequence of arms (name, cluster, reported accuracy), got "
                              f"{type(arms).__name__}")
        try:
            specs = tuple(ArmSpec(a.name, a.cluster, a.reported_accuracy) for a in arms)
        except AttributeError as exc:
            raise ConfigError(f"each arm needs a name, a cluster and a reported accuracy: {exc}") from None
        super().__init__([a.name for a in specs])
        names = self.arms
        clusters: list[Cluster] = [a.cluster for a in specs]
        reported = [a.reported_accuracy for a in specs]
        if not budget >= 0:
            raise ConfigError(f"budget must be ≥ 0, got {budget}")
        if horizon is not None and horizon < 1:
            raise ConfigError(f"horizon must be ≥ 1 question, got {horizon}")
        self.horizon = horizon
        self.config = config or CokeConfig()
        if self.config.pacing == "price" and horizon is None:
            raise ConfigError("pacing='price' needs a horizon: the number of questions the budget is for")
        self.arm_specs = specs
        self.names = list(names)
        self.clusters = clusters
        self.dim = dim
        self.budget = float(budget)
        self.seed = seed
        self.reported_accuracy = reported
        self._cluster_index = np.array([CLUSTERS.index(c) for c in clusters])
        self.thompson = BetaThompson(
            len(CLUSTERS), cluster_priors(clusters, reported, self.config.prior_strength), seed=seed
        )
        self.linucb = LinUCB(
            len(names), dim, self.config.gamma, self.config.ridge, seed + 1, self.config.precision
        )
        n = len(names)
        self.spent = 0.0
        self.arm_cost = np.zeros(n)
        self.graded_cost = np.zeros(n)  # the part of arm_cost whose outcome was learnt (Eq. 14's ratio)
        self.arm_fail_cost = np.zeros(n)
        self.pulls = np.zeros(n, dtype=np.int64)
        self.cost_seen = np.zeros(n)  # sum of the per-question cost bounds seen by select
        self.questions_seen = 0
        self.holds: list[list[float]] = [[] for _ in range(n)]  # bounds of selections awaiting an outcome
        self.overrun = 0.0  # reported costs above their selection's bound (the caller's bounds were low)
        self.price = 0.0  # η of the last selection (pacing="price")
        # what turns a question into this router's context when a fit learnt it (kept with the state as
        # JSON values; the app's ``predicted`` context: kgwise.route.features.PredictedContext)
        self.context_model: dict[str, Any] | None = None
        self.pinned: int | None = None  # :meth:`pin`
        self.cascade: CascadeRule | None = None  # a fitted cascade narrows every pull (:meth:`_narrow`)
        # pacing="price": Eq. 2 and the mean cost bounds at the last price_window selections (a ring)
        self.recent = PriceWindow(self.config.price_window if self.config.pacing == "price" else 0, n)
        prior_acc = self.thompson.mean()[self._cluster_index]
        self._prior_error = np.array(
            [1.0 - (r if r is not None else float(p)) for r, p in zip(reported, prior_acc, strict=True)]
        )

    @property
    def reserved(self) -> float:
        """Cost bounds held by selections still awaiting their outcome."""
        return float(sum(map(sum, self.holds)))

    @property
    def remaining(self) -> float:
        """Budget neither spent nor held."""
        return self.budget - self.spent - self.reserved

    def cost_regret(self) -> npt.NDArray[np.float64]:
        """``R_a`` = cost spent on wrong answers / all cost spent by arm ``a`` (Eq. 14; 0 before spending),
        smoothed by ``regret_prior`` pseudo-questions at the arm's mean cost and reported error rate."""
        k = self.config.regret_prior
        pseudo = np.zeros(self.n_arms)
        if k and self.questions_seen:
            pseudo = k * self.cost_seen / self.questions_seen
        num = self.arm_fail_cost + pseudo * self._prior_error
        den = self.graded_cost + pseudo
        with np.errstate(invalid="ignore", divide="ignore"):
            r = np.where(den > 0, num / den, 0.0)
        return np.asarray(r, dtype=np.float64)

    def allowance(self, question: int) -> float:
        """What may have been spent once question ``question`` (1-based) is answered: ``B``, or
        ``B·min(1, question/N)`` when paced over a horizon of ``N`` questions."""
        if self.horizon is None:
            return self.budget
        return self.budget * min(1.0, question / self.horizon)

    def affordable(self, costs: Costs) -> npt.NDArray[np.bool_]:
        """Per arm (in arm order), whether its cost bound fits in the budget (Eq. 14's constraint) — paced,
        for the next question, when the router has a horizon."""
        return self._affordable(self.cost_vector(costs))

    def _affordable(self, c: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
        return np.asarray(self.spent + self.reserved + c <= self.allowance(self.questions_seen + 1))

    def cost_vector(self, costs: Costs) -> npt.NDArray[np.float64]:
        """``costs`` (by arm name, or one per arm in arm order) as an array in arm order; ``ConfigError``
        naming the missing or unknown arms, or for a cost that is not a finite number ≥ 0."""
        if isinstance(costs, Mapping):
            unknown = [str(k) for k in costs if k not in self._index]
            missing = [a for a in self.arms if a not in costs]
            if unknown or missing:
                raise ConfigError("costs must name every arm once: "
                                  + "; ".join(([f"unknown {', '.join(unknown)}"] if unknown else [])
                                              + ([f"missing {', '.join(missing)}"] if missing else []))
                                  + f" (arms: {', '.join(self.arms)})")
            try:
                costs = [float(costs[a]) for a in self.arms]
            except (TypeError, ValueError) as exc:
                raise ConfigError(f"costs must be numbers: {exc}") from exc
        c = np.asarray(costs, dtype=np.float64).reshape(-1)
        if c.shape[0] != self.n_arms or not np.all(np.isfinite(c)) or np.any(c < 0):
            raise ConfigError(f"costs must be {self.n_arms} finite numbers ≥ 0")
        return c

    def values(self, theta: npt.NDArray[np.float64], context: Callable[[], npt.NDArray[np.float64]]
               ) -> npt.NDArray[np.float64]:
        """Eq. 2 per arm from cluster values ``theta`` (one per cluster in CLUSTERS order, or a row of them
        per question) and ``context()``, LinUCB's scores (called only when the context term is on): the
        cluster and context terms the config switches on, minus ``λ·R_a`` (Eq. 14)."""
        rows = theta.shape[:-1]
        total = theta[..., self._cluster_index] if self.config.use_cluster else np.zeros((*rows, self.n_arms))
        if self.config.use_context:
            total = total + context()
        if self.config.lam:
            total = total - self.config.lam * self.cost_regret()
        return np.asarray(total, dtype=np.float64)

    def expectations(self, embedding: npt.ArrayLike) -> npt.NDArray[np.float64]:
        """Eq. 2 per arm for one draw of the cluster samples θ (consumes randomness)."""
        return self.values(self.thompson.sample(), lambda: self.linucb.scores(embedding))

    def pull(self, embedding: npt.ArrayLike, costs: Costs, available: npt.ArrayLike | None = None
             ) -> str | None:
        """The name of the affordable arm maximising Eq. 2 for the question of embedding ``embedding``, or
        ``None`` when no arm is affordable. The chosen arm's cost bound is held until :meth:`update` or
        :meth:`cancel`.

        ``costs``: per arm (by name, or in arm order), an upper bound on what answering this question would
        cost. ``available`` (arm order; default all): arms that can answer this question at all; the others
        are not affordable, and their bound does not enter the mean cost bound ``c̄_a`` (it counts at the
        arm's mean so far), so a placeholder bound for "cannot answer" does not make the arm look dear.
        """
        c = self.cost_vector(costs)
        mask = self._affordable(c)
        if available is not None:
            ok = np.asarray(available, dtype=bool).reshape(-1)
            if ok.shape[0] != self.n_arms:
                raise ConfigError(f"available must hold {self.n_arms} flags (one per arm), got {ok.shape[0]}")
            mean = self.cost_seen / self.questions_seen if self.questions_seen else np.zeros(self.n_arms)
            c = np.where(ok, c, mean)
            mask &= ok
        self.cost_seen += c
        self.questions_seen += 1
        if not mask.any():
            return None
        mask = self._narrow(mask, embedding)
        values = self.expectations(embedding)
        if self.config.pacing == "price":
            values = values - self._price(values) * self.cost_seen / self.questions_seen
        arm = self.linucb.argmax(values, mask)
        self.holds[arm].append(float(c[arm]))
        return self.arms[arm]

    def would_pull(self, tracked: TrackedContexts | None, costs: npt.ArrayLike, available: npt.ArrayLike,
                   rng: np.random.Generator) -> npt.NDArray[np.int64]:
        """Per context of ``tracked`` (made by ``self.linucb.track``; ``None`` without the context term),
        the arm position :meth:`pull` would choose were it the next question (−1: nothing affordable),
        with the state left as it is: ``costs`` and ``available`` per context and arm (n × arms), the
        cluster samples θ drawn from ``rng`` for each context, ties broken by ``rng``. Under
        ``pacing="price"`` the present price η (the last selection's) stands for the one a pull would set
        with the context's own values in its window."""
        c = np.asarray(costs, dtype=np.float64).reshape(-1, self.n_arms)
        ok = np.asarray(available, dtype=bool).reshape(c.shape)
        n = c.shape[0]
        if tracked is not None and len(tracked.contexts) != n:
            raise ConfigError(f"would_pull got {n} rows of costs for {len(tracked.contexts)} contexts")
        mean = self.cost_seen / self.questions_seen if self.questions_seen else np.zeros(self.n_arms)
        c = np.where(ok, c, mean)
        if (self.config.use_context or self.cascade is not None) and tracked is None:
            raise ConfigError("would_pull needs tracked contexts when the router uses the context")
        mask = self._narrow(ok & (self.spent + self.reserved + c <= self.allowance(self.questions_seen + 1)),
                            None if tracked is None else tracked.contexts)
        k = len(self.thompson.alpha)
        theta = (rng.beta(self.thompson.alpha, self.thompson.beta, size=(n, k)) if self.config.use_cluster
                 else np.zeros((n, k)))

        def context() -> npt.NDArray[np.float64]:
            assert tracked is not None  # checked above
            return tracked.scores(self.linucb)

        values = self.values(theta, context)
        if self.config.pacing == "price":
            values -= self.price * (self.cost_seen + c) / (self.questions_seen + 1)
        values = np.where(mask & ~np.isnan(values), values, -np.inf)
        top = values.max(axis=1, keepdims=True)
        best = mask & (values >= top - 1e-12)  # only affordable arms, even when all of them are at -inf
        pick = np.argmax(np.where(best, rng.random(values.shape), -1.0), axis=1)
        return np.where(mask.any(axis=1), pick, -1).astype(np.int64)

    def _price(self, values: npt.NDArray[np.float64]) -> float:
        """η for this question (``pacing="price"``): the smallest price at which ``argmax_a E_a − η·c̄_a``
        over the recent questions spends at most the budget left per question left
        (:meth:`kgwise.route.price.PriceWindow.price`)."""
        self.recent.push(values, self.cost_seen / self.questions_seen)
        left = max((self.horizon or self.questions_seen) - self.questions_seen + 1, 1)
        self.price = self.recent.price(self.remaining / left)
        return self.price

    def observe(self, name: str, embedding: npt.ArrayLike, reward: float) -> None:
        """Learn from the outcome of the arm named ``name`` on a question it answered at no cost to the
        budget and without being pulled (e.g. a free KG model run on every question): its cluster posterior
        (Eq. 5) and ridge regression (Eq. 11) are updated as in :meth:`update`; nothing is spent or
        released."""
        self._learn(self._arm(name), embedding, _reward(reward))

    def warm_start(self, embeddings: npt.ArrayLike, rewards: npt.ArrayLike) -> int:
        """Learn from logged outcomes before going live (a kgwise addition): ``rewards[i, a]`` is the reward
        of the ``a``-th arm (arm order) on logged question ``i`` with embedding ``embeddings[i]`` (NaN: not
        graded). Each
        graded outcome is learnt as by :meth:`observe`, question by question; nothing is spent. Returns the
        number of outcomes learnt."""
        X = np.asarray(embeddings, dtype=np.float64)
        R = np.asarray(rewards, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.dim:
            raise ConfigError(f"warm start: embeddings must be (questions, {self.dim}), got {X.shape}")
        if R.shape != (X.shape[0], self.n_arms):
            raise ConfigError(f"warm start: rewards must be ({X.shape[0]}, {self.n_arms}): one column per "
                              f"arm, NaN where an arm was not graded; got {R.shape}")
        graded = ~np.isnan(R)
        if np.any((R[graded] < 0) | (R[graded] > 1)):
            raise ConfigError("warm start: rewards must lie in [0, 1] (or be NaN)")
        for i, j in zip(*np.nonzero(graded), strict=True):
            self._learn(int(j), X[i], float(R[i, j]))
        return int(graded.sum())

    def _arm(self, arm: object) -> int:
        """The position of the arm named ``arm``."""
        if arm is None:
            raise ConfigError("no arm was pulled (pull returned None: none was affordable), so there is "
                              "no outcome to feed back")
        if not isinstance(arm, str) or arm not in self._index:
            raise ConfigError(f"arm must be one of the router's arm names ({', '.join(self.arms)}) as "
                              f"returned by pull, got {arm!r}")
        return self._index[arm]

    def _release(self, arm: int, bound: float | None) -> float | None:
        """Drop one hold of ``arm``: the one of ``bound`` if given, else the oldest; its bound, or None."""
        held = self.holds[arm]
        if not held:
            return None
        if bound is None:
            return held.pop(0)
        if bound not in held:
            raise ConfigError(f"arm {self.names[arm]!r} holds no selection with cost bound {bound}")
        held.remove(bound)
        return bound

    def cancel(self, name: str, bound: float | None = None) -> None:
        """Call off a pull of the arm named ``name`` that will not be run: its held cost bound (``bound``,
        default the oldest of the arm's) returns to the budget."""
        arm = self._arm(name)
        if self._release(arm, bound) is None:
            raise ConfigError(f"arm {self.names[arm]!r} has no selection awaiting an outcome")

    def update(self, name: str, embedding: npt.ArrayLike, reward: float, cost: float,
               bound: float | None = None, allow_overrun: bool = False) -> None:
        """Feed back the outcome of the arm named ``name``: its spending (:meth:`charge`) and what it
        teaches (:meth:`learn`) — the Beta posterior of its cluster (Eq. 5), its ridge regression (Eq. 11,
        Sherman–Morrison), its failure spending (Eq. 14). The cost is settled against the arm's pull (the
        one of cost bound ``bound``, default its oldest). A cost above that bound raises
        ``BudgetExceededError`` and nothing is recorded, unless ``allow_overrun``: then it is recorded and
        the excess added to :attr:`overrun`. Without a pull to settle, a cost the remaining budget cannot
        pay raises ``BudgetExceededError`` too. ``spent`` stays finite."""
        r = _reward(reward)
        self.charge(name, cost, bound, allow_overrun)
        self.learn(name, embedding, r, cost)

    def charge(self, name: str, cost: float, bound: float | None = None, allow_overrun: bool = False
               ) -> None:
        """Spend ``cost`` for a pull of the arm named ``name`` whose outcome is not known yet (a kgwise
        addition: an answer is paid when it is made, its grade may come later or never); the pull's hold
        (``bound``, default the oldest) is released. Refusals as in :meth:`update`; nothing is learnt."""
        arm = self._arm(name)
        if not (math.isfinite(cost) and cost >= 0):
            raise ConfigError(f"cost must be a finite number ≥ 0, got {cost}")
        if not self.holds[arm] and cost > self.remaining:
            raise BudgetExceededError(
                f"arm {self.names[arm]!r} cost {cost} exceeds the remaining budget {self.remaining}"
            )
        if bound is not None and bound not in self.holds[arm]:
            raise ConfigError(f"arm {self.names[arm]!r} holds no selection with cost bound {bound}")
        limit = (bound if bound is not None else self.holds[arm][0]) if self.holds[arm] else None
        if limit is not None and cost > limit and not allow_overrun:
            raise BudgetExceededError(f"cost {cost:g} is above the bound {limit:g} held for this selection "
                                      f"of arm {self.names[arm]!r}: refused (the budget holds only while "
                                      "costs stay within their bounds)")
        if not (math.isfinite(self.spent + cost) and math.isfinite(self.arm_cost[arm] + cost)):
            raise BudgetExceededError(f"cost {cost:g} would make the spending non-finite: refused")
        held = self._release(arm, bound)
        if held is not None:
            self.overrun += max(0.0, cost - held)
        self.spent += cost
        self.arm_cost[arm] += cost
        self.pulls[arm] += 1

    def learn(self, name: str, embedding: npt.ArrayLike, reward: float, cost: float) -> None:
        """Learn the outcome of a pull of the arm named ``name`` that :meth:`charge` paid ``cost`` for:
        Eq. 5, Eq. 11, and the arm's graded and failure spending of Eq. 14 (``R_a`` is taken over graded
        pulls only, so pulls never graded do not count as right)."""
        arm = self._arm(name)
        r = _reward(reward)
        if not (math.isfinite(cost) and cost >= 0):
            raise ConfigError(f"cost must be a finite number ≥ 0, got {cost}")
        self._learn(arm, embedding, r)
        self.graded_cost[arm] += cost
        self.arm_fail_cost[arm] += cost * (1.0 - r)

    def _learn(self, arm: int, embedding: npt.ArrayLike, r: float) -> None:
        """Eq. 5 for the arm's cluster and Eq. 11 for the arm (target ``r − E[θ_c]`` when decomposed)."""
        c = int(self._cluster_index[arm])
        baseline = 0.0
        if self.config.use_cluster and self.config.decomposed_reward:
            baseline = float(self.thompson.mean()[c])
        if self.config.use_cluster:
            self.thompson.update(c, None, r)
        if self.config.use_context:
            self.linucb.update(arm, embedding, r - baseline)

    def pin(self, name: str | None) -> None:
        """Answer with arm ``name`` whenever it can answer and is affordable, Eq. 2 choosing only among
        the others when it is not (``None``: Eq. 2 always). Learning is unchanged. ``kgwise fit`` pins the
        best single arm when routing is not shown to beat it (:class:`kgwise.route.tuning.RoutingGain`)."""
        self.pinned = None if name is None else self._arm(name)

    @property
    def pinned_arm(self) -> str | None:
        """The name of the pinned arm (:meth:`pin`), if any."""
        return None if self.pinned is None else self.names[self.pinned]

    def _pin(self, mask: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        """``mask`` (arms, or questions × arms) narrowed to the pinned arm where it is allowed."""
        if self.pinned is None:
            return mask
        only = np.zeros(self.n_arms, dtype=bool)
        only[self.pinned] = True
        return np.where(mask[..., self.pinned: self.pinned + 1], only, mask)

    def _narrow(self, mask: npt.NDArray[np.bool_], contexts: npt.ArrayLike | None) -> npt.NDArray[np.bool_]:
        """The pinned arm where it is allowed (:meth:`_pin`); else, with a :attr:`cascade`, its pick among
        the affordable arms on ``contexts`` (:meth:`kgwise.route.cascade.CascadeRule.narrow`)."""
        if self.pinned is not None or self.cascade is None or contexts is None:
            return self._pin(mask)
        return self.cascade.narrow(mask, contexts)

    # --- persistence -------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Full state (arms, config, bandits with generator states, spending) as JSON-ready data."""
        return {
            "kind": "CokeRouter",
            "version": STATE_VERSION,
            "arms": [{"name": a.name, "cluster": a.cluster, "reported_accuracy": a.reported_accuracy}
                     for a in self.arm_specs],
            "dim": self.dim,
            "budget": self.budget if math.isfinite(self.budget) else "inf",
            "seed": self.seed,
            "horizon": self.horizon,
            "config": asdict(self.config),
            "thompson": self.thompson.state_dict(),
            "linucb": self.linucb.state_dict(),
            "spent": self.spent,
            "arm_cost": self.arm_cost.tolist(),
            "graded_cost": self.graded_cost.tolist(),
            "arm_fail_cost": self.arm_fail_cost.tolist(),
            "pulls": self.pulls.tolist(),
            "cost_seen": self.cost_seen.tolist(),
            "questions_seen": self.questions_seen,
            "holds": self.holds,
            "overrun": self.overrun,
            "price": self.price,
            "recent_values": self.recent.values.tolist(),
            "recent_costs": self.recent.costs.tolist(),
            "recent_count": self.recent.count,
            "pinned": self.pinned_arm,
            **({} if self.context_model is None else {"context_model": self.context_model}),
            **({} if self.cascade is None else {"cascade": self.cascade.to_dict(self.names)}),
        }

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> Self:
        """Inverse of :meth:`state_dict`; ``ConfigError`` saying what is wrong with a malformed state. A state
        of version 1 (before arms were named records: parallel ``names``, ``clusters`` and
        ``reported_accuracy`` lists) loads as it was; a newer version than this code knows is refused."""
        if not isinstance(state, dict) or state.get("kind") != "CokeRouter":
            kind = state.get("kind") if isinstance(state, dict) else type(state).__name__
            raise ConfigError(f"not a CokeRouter state (kind={kind!r})")
        try:
            out = cls._from_state(state)
        except ConfigError as exc:
            raise ConfigError(f"not a valid CokeRouter state: {exc}") from exc
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            what = f"missing {exc}" if isinstance(exc, KeyError) else str(exc)
            raise ConfigError(f"not a valid CokeRouter state: {what}") from exc
        n, d = out.n_arms, out.dim
        shapes = {"linucb": (out.linucb.n_arms, out.linucb.dim) == (n, d),
                  "thompson": out.thompson.alpha.shape == (len(CLUSTERS),),
                  **{k: getattr(out, k).shape == (n,)
                     for k in ("arm_cost", "graded_cost", "arm_fail_cost", "pulls", "cost_seen")},
                  "holds": len(out.holds) == n,
                  **{f"recent_{k}": getattr(out.recent, k).shape == (out.recent.values.shape[0], n)
                     for k in ("values", "costs")}}
        bad = [k for k, ok in shapes.items() if not ok]
        if bad:
            raise ConfigError(f"not a valid CokeRouter state: {', '.join(bad)} do not match {n} arms of "
                              f"dimension {d}")
        money = {"spent": [out.spent], "overrun": [out.overrun], "arm_cost": out.arm_cost.tolist(),
                 "arm_fail_cost": out.arm_fail_cost.tolist(), "graded_cost": out.graded_cost.tolist(),
                 "cost_seen": out.cost_seen.tolist(),
                 "holds": [b for arm in out.holds for b in arm]}
        broken = [k for k, v in money.items() if not all(math.isfinite(x) and x >= 0 for x in v)]
        if broken:
            raise ConfigError(f"not a valid CokeRouter state: {', '.join(broken)} must be finite "
                              "numbers ≥ 0")
        return out

    @classmethod
    def _from_state(cls, state: Mapping[str, Any]) -> Self:
        budget = math.inf if state["budget"] == "inf" else float(state["budget"])
        out = cls(
            _state_arms(state),
            int(state["dim"]),
            budget=budget,
            config=CokeConfig(**state["config"]),
            seed=int(state["seed"]),
            horizon=state.get("horizon"),
        )
        out.thompson = BetaThompson.from_state_dict(state["thompson"])
        out.linucb = LinUCB.from_state_dict(state["linucb"])
        out.spent = float(state["spent"])
        out.arm_cost = np.asarray(state["arm_cost"], dtype=np.float64)
        out.arm_fail_cost = np.asarray(state["arm_fail_cost"], dtype=np.float64)
        # before charge/learn were apart every paid pull was graded
        out.graded_cost = np.asarray(state.get("graded_cost", state["arm_cost"]), dtype=np.float64)
        out.pulls = np.asarray(state["pulls"], dtype=np.int64)
        out.cost_seen = np.asarray(state["cost_seen"], dtype=np.float64)
        out.questions_seen = int(state["questions_seen"])
        out.holds = [[float(b) for b in arm] for arm in state.get("holds", [[] for _ in out.names])]
        out.overrun = float(state.get("overrun", 0.0))
        out.price = float(state.get("price", 0.0))
        out.pin(state.get("pinned"))
        model = state.get("context_model")
        if model is not None and not isinstance(model, dict):
            raise ConfigError(f"context_model must be a table, got {type(model).__name__}")
        out.context_model = model
        if state.get("cascade") is not None:
            out.cascade = CascadeRule.from_dict(state["cascade"], out.names)
        if out.config.pacing == "price":
            out.recent.load(state["recent_values"], state["recent_costs"], int(state["recent_count"]))
        return out



STATE_VERSION = 2
"""Version of :meth:`CokeRouter.state_dict`: 1 (no ``version`` key) held the arms as parallel ``names``,
``clusters`` and ``reported_accuracy`` lists, 2 as ``arms`` records."""


def _state_arms(state: Mapping[str, Any]) -> list[ArmSpec]:
    """The arms of a router state of either version; ``ConfigError`` for a version this code does not know."""
    version = state.get("version", 1)
    if version == 1:
        reported = state["reported_accuracy"]
        return [ArmSpec(n, c, r) for n, c, r in zip(state["names"], state["clusters"], reported, strict=True)]
    if version != STATE_VERSION:
        raise ConfigError(f"state version {version!r} is not one this kgwise reads (1 or {STATE_VERSION}); "
                          "a newer kgwise wrote it")
    return [ArmSpec(str(a["name"]), a["cluster"], a.get("reported_accuracy")) for a in state["arms"]]
