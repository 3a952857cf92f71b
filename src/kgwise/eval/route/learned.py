"""Routers that start from a learned success predictor (:mod:`kgwise.route.predictor`), scored on questions
they did not learn from, and the one a fit would select.

Per split (a seeded random halving of the log: fit on one half, test on the other, ``splits`` times):

* **features** — what is known before any paid arm is called: the free arms' signals, the free context
  (agreement, confidences), the question's form and the first ``embedding_dims`` principal components of
  the question embedding (fitted on the fit half); a paid arm's own ``signals`` are known only after it
  was called, so only the cascade reads them, for its cheap arm.
* **budget** — ``budget_vs_best`` × the most accurate arm's cost on the test half (the best paid arm's
  when the most accurate is free: :meth:`~kgwise.route.table.OutcomeTable.budget_arm`), paced over it
  (by question ``k`` at most ``B·k/N`` spent, as Coke's horizon paces it).
* policies, each fitted on the fit half alone:

  - ``best_arm``: the arm most accurate on the fit half among those the budget affords on it;
  - ``predicted``: the arm maximising ``p_a(x) − η·c_a`` (``p``: the predictor; ``η`` a price set before
    each question as the smallest that spends at most the budget left per question left on the fit
    half's out-of-fold predictions), refitted on the outcomes it sees every ``refit_every`` questions;
  - ``predicted-free``: ``predicted``'s rule on a predictor that reads the free arms' confidence alone
    (every free arm's signals and the free context: agreement, first signals, agreement × the smallest),
    not the question's form or embedding: fewer features than a 90–800-question half can fit per arm
    (:func:`_free_columns`);
  - ``predicted+spend``: the same rule (without refits) with the price allowed below 0 — a subsidy on
    cost — so that the spend per question keeps the budget's pace (``η`` re-solved before each question
    from the budget left per question left, as ``predicted``'s; Agrawal & Devanur 2014's primal–dual price
    without its sign constraint): what spending the whole budget costs or gains where the predictor expects
    the free arm to be right more often than a paid one;
  - ``coke+predicted``: price-paced Coke whose LinUCB context is ``[1, p_1(x) … p_m(x)]``, warm-started on
    the fit half's out-of-fold predictions and outcomes (the bandit starts from the predictor and keeps
    learning, free arms observed);
  - ``cascade``: the pipeline's cascade rule (:func:`kgwise.route.cascade.fit_cascade`): the cheapest arm
    answers unless the most accurate arm's predicted success exceeds its own (read with the cheap arm's
    own signals, known once it answered) by more than a threshold, fitted on the fit half so that
    escalating spends the whole budget (``shares=(1.0,)``);

* reported beside them, not among the selection's policies:

  - ``neighbours``: ``predicted``'s priced rule on the outcomes of the most similar fit questions
    (:class:`~kgwise.route.neighbours.NeighbourPredictor`: each arm's shrunk share of right answers among
    the ``k`` nearest by embedding), the outcomes it sees added every ``refit_every`` questions;
  - ``predicted-free+neighbours``: ``predicted-free``'s features and each arm's neighbour success rate
    (left-one-out on the fit half) as the regressions' features, ``predicted``'s rule;

* **selection** — the policy a fit would use, chosen by two-fold cross-fitting on the fit half alone
  (each policy fitted on one inner half and scored on the other): ``predicted-free`` unless another
  policy beats it on both inner folds (:func:`_select`); its test-half figures are ``selected``. The rule
  before ``predicted-free`` existed (``predicted`` unless another of the other policies beats it on both
  inner folds) is reported beside it from the same inner runs, as ``selected_before``.

Reported per split and as mean ± std: every policy's accuracy, cost over the budget arm's (the best arm,
or the best paid arm when that is free), spent over the budget, the oracle's accuracy, the budgeted
oracle's (the best any per-question choice of arms reaches within the budget,
:meth:`~kgwise.route.table.OutcomeTable.budgeted_oracle`: whether the targets are reachable), and the targets
(accuracy ≥ the best arm's at ≤ 60 % of the budget arm's cost, spending ≥ 90 % of the budget, ≥ the
cascade at equal budget, the share of the oracle's head-room over the best arm closed, and the share of
the *budgeted* oracle's head-room closed, ``(router − best arm) / (budgeted oracle − best arm)``, where
that head-room is positive: the part of what any router could gain at this budget that the selection
gains).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from kgwise.errors import ConfigError
from kgwise.eval.route.logs import GradedReplay
from kgwise.route.cascade import cascade_arms, fit_cascade
from kgwise.route.coke import CokeConfig, CokeRouter
from kgwise.route.features import QUESTIONS_PER_COMPONENT, context_rows
from kgwise.route.neighbours import NeighbourConfig, NeighbourPredictor
from kgwise.route.predictor import PredictorConfig, SuccessPredictor, calibration, cross_fitted
from kgwise.route.table import OutcomeTable
from kgwise.route.tuning import simulate

__all__ = ["BEFORE", "POLICIES", "REPORTED", "LearnedConfig", "PricedRouter", "headroom_closed",
           "learned_report", "mean_std"]

Matrix = npt.NDArray[np.float64]
Rows = npt.NDArray[np.int64]
POLICIES = ("best_arm", "predicted", "predicted-free", "predicted+spend", "coke+predicted", "cascade")
BEFORE = tuple(p for p in POLICIES if p != "predicted-free")
"""The policies the selection chose among before ``predicted-free`` (``selected_before``)."""
REPORTED = (*POLICIES, "neighbours", "predicted-free+neighbours")
"""Every policy reported; the two on the neighbours' outcomes are not among the selection's (on the logs
not tuned on they answered below ``predicted-free``: docs/routing.md, *Measured*)."""


@dataclass(frozen=True)
class LearnedConfig:
    """``splits``: random halvings; ``budget_vs_best``: the budget as a multiple of the most accurate
    arm's cost; ``embedding_dims``: principal components of the question embedding among the features;
    ``refit_every``: questions between the predicted router's refits; ``prices``: η grid points of the
    price lookup."""

    splits: int = 5
    budget_vs_best: float = 0.6
    embedding_dims: int = 16
    refit_every: int = 100
    prices: int = 200
    predictor: PredictorConfig = field(default_factory=PredictorConfig)
    neighbours: NeighbourConfig = field(default_factory=NeighbourConfig)

    def __post_init__(self) -> None:
        if self.splits < 1 or self.embedding_dims < 0 or self.refit_every < 1 or self.prices < 2:
            raise ConfigError("learned routers: splits ≥ 1, embedding_dims ≥ 0, refit_every ≥ 1, prices ≥ 2")


class Predicts(Protocol):
    """What :class:`PricedRouter` reads: per question (a row of features), each arm's predicted success."""

    def predict(self, X: npt.ArrayLike) -> Matrix: ...


class PricedRouter:
    """Pick ``argmax_a p_a(x) − η·c_a`` among the affordable arms (a paced budget), ``η`` from a lookup of
    the spend per question it gives on reference predictions ``P_ref`` and costs ``C_ref`` (the smallest
    grid price whose spend fits what is left per question). A decision is a prediction, a binary search
    and an argmax: O(features · arms + log prices)."""

    def __init__(self, predictor: Predicts, P_ref: Matrix, C_ref: Matrix, budget: float, horizon: int,
                 prices: int = 200, spend_all: bool = False) -> None:
        self.predictor = predictor
        self.budget, self.horizon = float(budget), horizon
        self.spent = 0.0
        self.k = 0
        scale = 1.0 / max(float(C_ref[C_ref > 0].min()) if np.any(C_ref > 0) else 1.0, 1e-12)
        up = np.geomspace(1e-4 * scale, 1e4 * scale, prices - 1)
        # spend_all: the price may turn negative (a subsidy) so that spending keeps the budget's pace even
        # where the predictor expects no paid arm to beat a cheaper one there
        self.etas = np.concatenate([-up[::-1], [0.0], up] if spend_all else [[0.0], up])
        rows = np.arange(len(P_ref))
        spend = np.array([C_ref[rows, np.argmax(P_ref - e * C_ref, axis=1)].mean() for e in self.etas])
        self.spend = np.minimum.accumulate(spend)  # non-increasing in η

    def price(self) -> float:
        left = max(self.horizon - self.k, 1)
        per_question = (self.budget - self.spent) / left
        i = int(np.searchsorted(-self.spend, -per_question, side="left"))
        return float(self.etas[min(i, len(self.etas) - 1)])

    def pick(self, features: Matrix, costs: Matrix) -> int:
        """The arm for one question (−1: none affordable); its cost is counted as spent."""
        p = self.predictor.predict(features)[0]
        allowance = self.budget * min(1.0, (self.k + 1) / self.horizon) - self.spent
        self.k += 1
        ok = costs <= allowance + 1e-12
        if not ok.any():
            return -1
        a = int(np.argmax(np.where(ok, p - self.price() * costs, -np.inf)))
        self.spent += float(costs[a])
        return a


def _features(replay: GradedReplay, E: Matrix, fit: Rows, dims: int) -> tuple[Matrix, Matrix]:
    """Pre-call features (module docstring) for every row, and per arm the extra columns of its own
    signals (post-call); the principal components (at most one per ``QUESTIONS_PER_COMPONENT`` questions)
    are fitted on ``fit``."""
    table = replay.table
    F = replay.features if replay.features is not None else np.zeros((table.n_questions, 0))
    paid = set(table.arms) - {table.arms[j] for j in table.free_columns}
    pre = np.asarray([not any(n.startswith(f"{a}.signal[") for a in paid) for n in replay.feature_names],
                     dtype=bool)
    cols = [F[:, pre]]
    dims = min(dims, len(fit) // QUESTIONS_PER_COMPONENT)
    if dims:
        mu = E[fit].mean(axis=0)
        _, _, Vt = np.linalg.svd(E[fit] - mu, full_matrices=False)
        cols.append((E - mu) @ Vt[:dims].T)
    return np.hstack(cols), F[:, ~pre]


def _free_columns(replay: GradedReplay) -> npt.NDArray[np.int64]:
    """The feature columns that are the free arms' confidence: each free arm's signals and the free
    context (``free.*``), without the question's form. On the tuning logs, the priced router on these
    alone answered +1.6 points over the best arm on OBQA's local log (4/5 halvings ≥ it; +0.5 with every
    pre-call feature and the embedding's components) and +0.6 on WebQSP's (4/5; 0.0), without refits,
    5 halvings of ``learned_report``: the form and the embedding's components are what overfit. With
    refits, as reported (``docs/measurements/routing_all_logs.sh``): +2.1 and +0.4 points; on the logs not
    tuned on it did not help (CSQA −2.4, the CSQA 1.5B ladder −3.2 against −2.0 and −2.6 for ``predicted``'s
    selection rule)."""
    free = {replay.table.arms[j] for j in replay.table.free_columns}
    return np.asarray([k for k, n in enumerate(replay.feature_names)
                       if n.startswith("free.") or any(n.startswith(f"{a}.signal[") for a in free)],
                      dtype=np.int64)


def _thirds(n: int) -> list[npt.NDArray[np.int64]]:
    """Three interleaved folds of ``n`` positions (the fit half is in random order)."""
    return [np.arange(k, n, 3) for k in range(3)]


def _priced_online(table: OutcomeTable, X: Matrix, Y: Matrix, fit: Rows, test: Rows, budget: float,
                   cfg: LearnedConfig) -> tuple[dict[str, Any], SuccessPredictor, Matrix]:
    """The ``predicted`` rule on features ``X``: fitted on ``fit`` (its price lookup on out-of-fold
    predictions), run over ``test`` within the paced budget, refitted every ``cfg.refit_every`` questions
    on what it saw (the free arms' outcomes and the chosen arm's). Returns the outcome, the predictor as
    fitted on ``fit`` (before any refit) and the out-of-fold predictions."""
    P_fit = cross_fitted(X[fit], Y[fit], _thirds(len(fit)), cfg.predictor)
    fitted = SuccessPredictor(table.n_arms, cfg.predictor).fit(X[fit], Y[fit])
    predictor = copy.deepcopy(fitted)  # refitted below
    router = PricedRouter(predictor, P_fit, table.cost[fit], budget, len(test), cfg.prices)
    free = table.free_columns
    chosen, seen_x, seen_y = [], [], []
    for k, i in enumerate(test):
        a = router.pick(X[i:i + 1], table.cost[i])
        chosen.append(a)
        y = np.full(table.n_arms, np.nan)
        for j in [*free, *([a] if a >= 0 else [])]:
            y[j] = Y[i, j]
        seen_x.append(X[i])
        seen_y.append(y)
        if (k + 1) % cfg.refit_every == 0:
            predictor.update(np.asarray(seen_x), np.asarray(seen_y))
            seen_x, seen_y = [], []
    return _outcome(table, test, chosen, budget), fitted, P_fit


def _neighbour_columns(n_arms: int, E: Matrix, Y: Matrix, fit: Rows, cfg: NeighbourConfig) -> Matrix:
    """Each arm's neighbour success rate (:class:`~kgwise.route.neighbours.NeighbourPredictor` on the fit
    half's outcomes) for every question: left-one-out on the fit half, so that the regressions fitted on
    it see the column as they will see it on questions they did not learn from."""
    model = NeighbourPredictor(n_arms, cfg).fit(E[fit], Y[fit])
    N = model.predict(E)
    N[fit] = model.predict(E[fit], exclude_self=True)
    return N


def _neighbours_online(table: OutcomeTable, E: Matrix, Y: Matrix, fit: Rows, test: Rows, budget: float,
                       cfg: LearnedConfig) -> dict[str, Any]:
    """``predicted``'s priced rule on :class:`~kgwise.route.neighbours.NeighbourPredictor` (the outcomes of
    the ``k`` most similar questions by embedding): fitted on ``fit`` (its price lookup on the fit half's
    leave-one-out predictions), run over ``test`` within the paced budget, the outcomes it sees (the free
    arms' and the chosen arm's) added every ``cfg.refit_every`` questions."""
    predictor = NeighbourPredictor(table.n_arms, cfg.neighbours).fit(E[fit], Y[fit])
    router = PricedRouter(predictor, predictor.predict(E[fit], exclude_self=True), table.cost[fit], budget,
                          len(test), cfg.prices)
    chosen, seen = [], []
    for k, i in enumerate(test):
        a = router.pick(E[i:i + 1], table.cost[i])
        chosen.append(a)
        seen.append(i)
        if (k + 1) % cfg.refit_every == 0:
            rows = np.asarray(seen)
            y = np.full((len(rows), table.n_arms), np.nan)
            for j in table.free_columns:
                y[:, j] = Y[rows, j]
            picked = np.asarray(chosen[-len(rows):])
            ok = picked >= 0
            y[np.flatnonzero(ok), picked[ok]] = Y[rows[ok], picked[ok]]
            predictor.update(E[rows], y)
            seen = []
    return _outcome(table, test, chosen, budget)


def _paid_signals(replay: GradedReplay, arm: str) -> Matrix:
    cols = [k for k, n in enumerate(replay.feature_names) if n.startswith(f"{arm}.signal[")]
    F = replay.features if replay.features is not None else np.zeros((replay.table.n_questions, 0))
    return F[:, cols]


def _outcome(table: OutcomeTable, rows: Rows, chosen: Sequence[int], budget: float) -> dict[str, Any]:
    c = np.asarray(chosen)
    ok = c >= 0
    right = np.zeros(len(rows), dtype=bool)
    cost = np.zeros(len(rows))
    right[ok] = table.correct[rows[ok], c[ok]]
    cost[ok] = table.cost[rows[ok], c[ok]]
    return {"accuracy": float(right.mean()), "cost": float(cost.sum()),
            "spent_over_budget": float(cost.sum() / budget) if budget > 0 else None,
            "unanswered": int((~ok).sum()),
            "share": {a: float((c == j).mean()) for j, a in enumerate(table.arms)}}


def _policies(replay: GradedReplay, E: Matrix, fit: Rows, test: Rows, order_seed: int, coke: CokeConfig,
              cfg: LearnedConfig) -> dict[str, dict[str, Any]]:
    """Every policy fitted on ``fit`` and run over ``test`` (in a seeded order) within the paced budget."""
    table = replay.table
    X, _ = _features(replay, E, fit, cfg.embedding_dims)
    Y = table.correct.astype(np.float64)
    test = test[np.random.default_rng(order_seed).permutation(len(test))]
    acc_test = table.correct[test].mean(axis=0)
    best_test = int(np.argmax(acc_test))
    ref_arm = table.budget_arm(test)
    budget = cfg.budget_vs_best * float(table.cost[test, ref_arm].sum())
    n = len(test)
    out: dict[str, dict[str, Any]] = {}
    # best single arm on the fit half that the (scaled) budget affords there
    fit_cost = table.cost[fit].sum(axis=0) * n / len(fit)
    affordable = [j for j in range(table.n_arms) if fit_cost[j] <= budget * (1 + 1e-9)]
    j0 = max(affordable or [int(np.argmin(fit_cost))],
             key=lambda j: (table.correct[fit, j].mean(), -fit_cost[j]))
    spent, chosen = 0.0, []
    for k, i in enumerate(test):
        ok = spent + table.cost[i, j0] <= budget * min(1.0, (k + 1) / n) + 1e-12
        chosen.append(j0 if ok else -1)
        spent += float(table.cost[i, j0]) if ok else 0.0
    out["best_arm"] = _outcome(table, test, chosen, budget) | {"arm": table.arms[j0]}
    # predicted: priced argmax on every pre-call feature, refitted on what it sees; predicted-free: the
    # same on the free arms' confidence alone
    out["predicted"], fitted, P_fit = _priced_online(table, X, Y, fit, test, budget, cfg)
    P_test = fitted.predict(X[test])
    out["predictor_calibration"] = calibration(P_test, Y[test])
    Xf = replay.features[:, _free_columns(replay)] if replay.features is not None else X[:, :0]
    if Xf.shape[1]:
        out["predicted-free"], fitted_free, _ = _priced_online(table, Xf, Y, fit, test, budget, cfg)
        out["predicted-free"]["predictor_calibration"] = calibration(fitted_free.predict(Xf[test]), Y[test])
    else:  # no free arm's signal: the same features as ``predicted`` would be a copy of it
        out["predicted-free"] = out["predicted"] | {"no_free_signals": True}
    out["neighbours"] = _neighbours_online(table, E, Y, fit, test, budget, cfg)
    # predicted-free+neighbours: predicted-free's features and each arm's neighbour success rate
    Xn = np.hstack([Xf, _neighbour_columns(table.n_arms, E, Y, fit, cfg.neighbours)])
    out["predicted-free+neighbours"], fitted_nb, _ = _priced_online(table, Xn, Y, fit, test, budget, cfg)
    out["predicted-free+neighbours"]["predictor_calibration"] = calibration(fitted_nb.predict(Xn[test]),
                                                                           Y[test])
    # predicted+spend: the same predictor (as fitted on the fit half), the price free to go below 0
    spender = PricedRouter(fitted, P_fit, table.cost[fit], budget, n, cfg.prices, spend_all=True)
    out["predicted+spend"] = _outcome(table, test, [spender.pick(X[i:i + 1], table.cost[i]) for i in test],
                                      budget)
    # coke+predicted: LinUCB on [1, p(x)], warm-started on the fit half's out-of-fold predictions
    ctx = np.zeros((table.n_questions, 1 + table.n_arms))
    ctx[:, 0] = 1.0
    ctx[fit, 1:] = P_fit
    ctx[test, 1:] = P_test
    priced = replace(coke, pacing="price", lam=0.0)
    coke_router = CokeRouter(table.arm_specs(), ctx.shape[1], budget=budget, config=priced, seed=order_seed,
                             horizon=n)
    coke_router.warm_start(ctx[fit], Y[fit])
    run = simulate(coke_router, table.subset(test), ctx[test], np.arange(n), coke_router)
    out["coke+predicted"] = _outcome(table, test, run.chosen.tolist(), budget)
    # cascade: kgwise.route.cascade's rule (the pipeline's) with the cheap arm's own signals among the
    # features and its threshold set to spend the whole budget
    Xc = np.hstack([X, _paid_signals(replay, table.arms[cascade_arms(Y[fit], table.cost[fit])[0]])])
    kept = SuccessPredictor(table.n_arms, cfg.predictor).fit(Xc[fit], Y[fit])
    rule = fit_cascade(context_rows(cross_fitted(Xc[fit], Y[fit], _thirds(len(fit)), cfg.predictor)), Y[fit],
                       table.cost[fit], budget / n, context_rows(kept.predict(Xc[fit])), shares=(1.0,))
    cheap, strong = rule.cheap, rule.strong
    escalate = rule.escalate(context_rows(kept.predict(Xc[test])))
    spent, chosen = 0.0, []
    for k, i in enumerate(test):
        allowance = budget * min(1.0, (k + 1) / n) - spent
        up = escalate[k] and table.cost[i, cheap] + table.cost[i, strong] <= allowance + 1e-12
        if not up and table.cost[i, cheap] > allowance + 1e-12:
            chosen.append(-1)
            continue
        chosen.append(strong if up else cheap)
        spent += float(table.cost[i, cheap]) + (float(table.cost[i, strong]) if up else 0.0)
    cascade = _outcome(table, test, chosen, budget)
    # the escalated questions paid both arms
    paid_both = float(sum(table.cost[i, cheap] for i, c in zip(test, chosen, strict=True) if c == strong))
    cascade["cost"] += paid_both
    cascade["spent_over_budget"] = cascade["cost"] / budget if budget > 0 else None
    out["cascade"] = cascade | {"cheap_arm": table.arms[cheap], "strong_arm": table.arms[strong],
                                "threshold": rule.threshold}
    any_right = table.correct[test].any(axis=1)
    out["reference"] = {"best_arm": table.arms[best_test], "best_arm_accuracy": float(acc_test[best_test]),
                        "best_arm_cost": float(table.cost[test, best_test].sum()), "budget": budget,
                        "budget_arm": table.arms[ref_arm],
                        "budget_arm_cost": float(table.cost[test, ref_arm].sum()),
                        "oracle_accuracy": float(any_right.mean()),
                        "budgeted_oracle_accuracy": table.budgeted_oracle(test, budget)}
    return out


def _select(replay: GradedReplay, E: Matrix, fit: Rows, seed: int, coke: CokeConfig, cfg: LearnedConfig
            ) -> tuple[str, str, dict[str, float]]:
    """The policy two-fold cross-fitting on ``fit`` alone picks, and the one the rule before
    ``predicted-free`` picked from the same inner runs: ``anchor`` unless another policy of ``pool`` beats
    it on both inner folds (then the one of those with the best mean accuracy), with anchor
    ``predicted-free`` over :data:`POLICIES` (now) and ``predicted`` over :data:`BEFORE` (before). On
    WebQSP's log the plain best-mean pick chose a policy that then scored 0.5 points below ``predicted``
    on the held-out halves (inner folds of ~395 questions rank policies a point apart at random);
    requiring a win on both folds keeps the anchor unless the log says otherwise. The anchor is
    ``predicted-free`` because it beat ``predicted`` on both tuning logs (:func:`_free_columns`)."""
    perm = fit[np.random.default_rng(10_000 + seed).permutation(len(fit))]
    a, b = perm[: len(perm) // 2], perm[len(perm) // 2:]
    runs = [_policies(replay, E, x, y, seed, coke, cfg) for x, y in ((a, b), (b, a))]
    score = {p: float(np.mean([r[p]["accuracy"] for r in runs])) for p in POLICIES}

    def pick(anchor: str, pool: Sequence[str]) -> str:
        better = [p for p in pool if all(r[p]["accuracy"] > r[anchor]["accuracy"] for r in runs)]
        return max(better, key=lambda p: score[p]) if better else anchor

    return pick("predicted-free", POLICIES), pick("predicted", BEFORE), score


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """The mean of ``values`` and their sample standard deviation (0 for one value)."""
    v = np.asarray(values, dtype=np.float64)
    return {"mean": float(v.mean()), "std": float(v.std(ddof=1)) if v.size > 1 else 0.0}


def headroom_closed(accuracy: float, best: float, ceiling: float) -> float | None:
    """``(accuracy − best) / (ceiling − best)``: the share of the head-room over the best single arm up to
    ``ceiling`` (the oracle's, or the budgeted oracle's) that a router closed; ``None`` where there is
    none (the ceiling at or below the best arm: no router can gain there)."""
    return (accuracy - best) / (ceiling - best) if ceiling - best > 1e-12 else None


def pooled_headroom_closed(accuracy: Sequence[float], best: Sequence[float], ceiling: Sequence[float]
                           ) -> float | None:
    """:func:`headroom_closed` of the means over splits: the mean gain over the mean head-room (stable where
    one split's head-room is tiny: 0.4 points on one Ollama OBQA split makes its own ratio huge)."""
    return headroom_closed(float(np.mean(accuracy)), float(np.mean(best)), float(np.mean(ceiling)))


LEARNED_MIN_QUESTIONS = 40
"""Questions a log needs for the learned routers: two halvings, each half split again, of ≥ 10."""


def learned_report(replay: GradedReplay, embeddings: Matrix, coke: CokeConfig, cfg: LearnedConfig,
                   progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """The learned routers over ``cfg.splits`` random halvings (module docstring)."""
    table = replay.table
    if table.n_questions < LEARNED_MIN_QUESTIONS:
        raise ConfigError(f"learned routers need ≥ {LEARNED_MIN_QUESTIONS} questions (four halves of ≥ 10), "
                          f"got {table.n_questions}")
    E = np.asarray(embeddings, dtype=np.float64)
    runs = []
    for s in range(cfg.splits):
        perm = np.random.default_rng(s).permutation(table.n_questions)
        fit, test = perm[: len(perm) // 2], perm[len(perm) // 2:]
        chosen, before, inner = _select(replay, E, fit, s, coke, cfg)
        res = _policies(replay, E, fit, test, s, coke, cfg)
        ref = res["reference"]
        sel = res[chosen]
        best = ref["best_arm_accuracy"]
        gain = sel["accuracy"] - best
        runs.append({"split": s, "fit": len(fit), "test": len(test), "selected": chosen,
                     "selected_before": before, "selection_scores": inner, **res,
                     "selected_accuracy": sel["accuracy"], "selected_minus_best": gain,
                     "selected_cost_over_budget_arm": (sel["cost"] / ref["budget_arm_cost"]
                                                       if ref["budget_arm_cost"] else None),
                     "selected_spent_over_budget": sel["spent_over_budget"],
                     "selected_minus_cascade": sel["accuracy"] - res["cascade"]["accuracy"],
                     "headroom_closed": headroom_closed(sel["accuracy"], best, ref["oracle_accuracy"]),
                     "budgeted_headroom_closed": headroom_closed(sel["accuracy"], best,
                                                                 ref["budgeted_oracle_accuracy"]),
                     "selected_before_accuracy": res[before]["accuracy"],
                     "selected_before_minus_best": res[before]["accuracy"] - best,
                     "selected_before_spent_over_budget": res[before]["spent_over_budget"],
                     "selected_before_budgeted_headroom_closed": headroom_closed(
                         res[before]["accuracy"], best, ref["budgeted_oracle_accuracy"])})
        progress(f"learned split {s + 1}/{cfg.splits}: selected {chosen} {sel['accuracy']:.4f} (before: "
                 f"{before} {res[before]['accuracy']:.4f}) vs best arm {best:.4f}, cascade "
                 f"{res['cascade']['accuracy']:.4f}, budgeted oracle {ref['budgeted_oracle_accuracy']:.4f}, "
                 f"oracle {ref['oracle_accuracy']:.4f}")
    summary = {p: {"accuracy": mean_std([r[p]["accuracy"] for r in runs]),
                   "cost_over_budget_arm": mean_std([r[p]["cost"] / r["reference"]["budget_arm_cost"]
                                                      for r in runs if r["reference"]["budget_arm_cost"] > 0]
                                                     or [np.nan]),
                   "spent_over_budget": mean_std([r[p]["spent_over_budget"] or 0.0 for r in runs])}
               for p in REPORTED}
    sel = {k: mean_std([r[k] for r in runs if r[k] is not None] or [np.nan])
           for k in ("selected_accuracy", "selected_minus_best", "selected_cost_over_budget_arm",
                     "selected_spent_over_budget", "selected_minus_cascade", "headroom_closed",
                     "budgeted_headroom_closed", "selected_before_accuracy", "selected_before_minus_best",
                     "selected_before_spent_over_budget", "selected_before_budgeted_headroom_closed")}
    # the mean gain over the mean head-room: a split whose budgeted oracle barely clears the best arm
    # makes its own ratio huge (0.4 points of head-room on one Ollama OBQA split), the pooled one stays read
    pooled = pooled_headroom_closed([r["selected_accuracy"] for r in runs],
                                    [r["reference"]["best_arm_accuracy"] for r in runs],
                                    [r["reference"]["budgeted_oracle_accuracy"] for r in runs])

    def splits_where(ok: Callable[[dict[str, Any]], bool]) -> str:
        return f"{sum(ok(r) for r in runs)}/{len(runs)} splits"

    targets = {
        "accuracy >= best arm": splits_where(lambda r: r["selected_minus_best"] >= 0),
        "cost <= 60% of the budget arm's": splits_where(lambda r: (r["selected_cost_over_budget_arm"] or 0)
                                                        <= 0.6001),
        "spent >= 90% of budget": splits_where(lambda r: (r["selected_spent_over_budget"] or 0) >= 0.9),
        ">= learned cascade at equal budget": splits_where(lambda r: r["selected_minus_cascade"] >= 0),
        "oracle head-room closed (goal >= 25%)": sel["headroom_closed"],
        "budgeted oracle head-room closed": sel["budgeted_headroom_closed"],
        "budgeted oracle head-room closed, pooled": pooled,
        "before: accuracy >= best arm": splits_where(lambda r: r["selected_before_minus_best"] >= 0),
        "budgeted oracle >= best arm (reachable at all)": splits_where(
            lambda r: r["reference"]["budgeted_oracle_accuracy"] >= r["reference"]["best_arm_accuracy"]),
    }
    return {"config": asdict(cfg), "coke": asdict(coke), "summary": summary, "selected": sel,
            "selections": {p: sum(r["selected"] == p for r in runs) for p in POLICIES},
            "selections_before": {p: sum(r["selected_before"] == p for r in runs) for p in BEFORE},
            "oracle_accuracy": mean_std([r["reference"]["oracle_accuracy"] for r in runs]),
            "budgeted_oracle_accuracy": mean_std([r["reference"]["budgeted_oracle_accuracy"] for r in runs]),
            "best_arm_accuracy": mean_std([r["reference"]["best_arm_accuracy"] for r in runs]),
            "targets": targets, "runs": runs}
