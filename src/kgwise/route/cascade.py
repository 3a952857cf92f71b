"""A learned two-arm cascade on the success predictor's context: the free arm answers (it has, before any
paid call), and the question is escalated to the strong paid arm when the strong arm's predicted success
exceeds the free arm's by more than a threshold.

It reads the ``predicted`` router context ``[1, p_1(x) … p_m(x)]`` (:mod:`kgwise.route.features`): the
free arm's own confidence (its top probability, margin, entropy) is among the predictor's features, so the
gain ``p_strong(x) − p_cheap(x)`` is the cheap arm's calibrated confidence read against the strong arm's
(the conformal/confidence gates of cascade routing; Dong et al.'s Coke has no cascade). The threshold is
set on graded outcomes with out-of-fold predictions (:func:`fit_cascade`): for each share of the questions
in :data:`SHARES` × the share the budget affords escalating, the gain quantile that escalates that share,
and the one whose escalations are right most often (ties: the fewer escalations) is kept — so the
threshold is fitted under the budget on one set of questions and, in ``kgwise fit``'s cross-fitting
(:mod:`kgwise.route.tuning`), scored on another. :meth:`CascadeRule.narrow` is how a router applies it: of
the arms the paced budget affords, only the cascade's pick stays.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kgwise.errors import ConfigError

__all__ = ["CONTEXT", "SHARES", "CascadeRule", "cascade_arms", "fit_cascade"]

Matrix = npt.NDArray[np.float64]
CONTEXT = "cascade"
"""The router context name of a cascade: the ``predicted`` context's rows, routed by the fitted rule."""
SHARES = (1.0, 0.75, 0.5, 0.25)
"""Shares of the affordable escalation rate whose thresholds are compared (1: spend the whole budget)."""


@dataclass(frozen=True)
class CascadeRule:
    """Escalate from arm ``cheap`` (a free arm) to arm ``strong`` when ``p_strong − p_cheap > threshold``
    (positions in the router's arm order; ``share``: the escalation rate the threshold was set for on
    the questions it was fitted on, ``accuracy`` the cascade's there)."""

    cheap: int
    strong: int
    threshold: float
    share: float
    accuracy: float

    def escalate(self, contexts: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """Per row of ``[1, p_1 … p_m]`` contexts, whether the strong arm is wanted."""
        X = np.atleast_2d(np.asarray(contexts, dtype=np.float64))
        return np.asarray(X[:, 1 + self.strong] - X[:, 1 + self.cheap] > self.threshold)

    def narrow(self, mask: npt.NDArray[np.bool_], contexts: npt.ArrayLike) -> npt.NDArray[np.bool_]:
        """``mask`` (affordable arms; one row or questions × arms) narrowed to the cascade's pick: the strong
        arm where it is wanted and affordable, else the cheap arm where affordable; a row where neither is
        affordable keeps its mask (the router picks among what is left, as without the cascade)."""
        M = np.atleast_2d(mask)
        up = self.escalate(contexts) & M[:, self.strong]
        only = np.zeros_like(M)
        only[up, self.strong] = True
        only[~up, self.cheap] = True
        only &= M
        return np.where(only.any(axis=1, keepdims=True), only, M).reshape(np.shape(mask))

    def to_dict(self, names: Sequence[str]) -> dict[str, Any]:
        return asdict(self) | {"cheap": names[self.cheap], "strong": names[self.strong]}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], names: Sequence[str]) -> CascadeRule:
        try:
            return cls(list(names).index(d["cheap"]), list(names).index(d["strong"]), float(d["threshold"]),
                       float(d["share"]), float(d["accuracy"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"not a valid cascade state (arms {', '.join(names)}): {exc!r}") from exc


def cascade_arms(correct: npt.ArrayLike, cost: npt.ArrayLike) -> tuple[int, int]:
    """The cascade's cheap and strong arms on graded questions (``correct``, ``cost``: questions × arms, at
    least two arms): the most accurate of the arms of least mean cost, and the most accurate other arm
    (ties: the cheaper, then the first)."""
    Y = np.asarray(correct, dtype=np.float64)
    acc, mean_cost = Y.mean(axis=0), np.asarray(cost, dtype=np.float64).mean(axis=0)
    m = Y.shape[1]
    cheap = min(range(m), key=lambda j: (mean_cost[j], -acc[j], j))
    return cheap, max((j for j in range(m) if j != cheap), key=lambda j: (acc[j], -mean_cost[j], -j))


def fit_cascade(contexts: npt.ArrayLike, correct: npt.ArrayLike, cost: npt.ArrayLike,
                budget_per_question: float, deployed: npt.ArrayLike | None = None,
                shares: Sequence[float] = SHARES) -> CascadeRule:
    """The cascade of graded questions (module docstring): ``contexts`` their ``[1, p(x)]`` rows (out of
    fold), ``correct`` and ``cost`` (questions × arms). The cheap arm is the most accurate of the arms of
    least mean cost (a free arm — cost 0 on every question — wherever there is one: the pipeline's
    ``predicted`` context needs one); the strong arm the most accurate other one (ties: the cheaper). An
    escalated question pays both arms, so the budget affords escalating ``(budget per question − the cheap
    arm's mean cost) / the strong arm's mean cost`` of the questions; ``shares``: the fractions of that rate
    compared (``(1.0,)``: spend the whole budget, ``kgwise eval route``'s learned cascade). ``deployed``: the
    same questions' rows by the predictor the router will use, when it is not the one that made
    ``contexts`` (a predictor fitted on all of them, not out of fold): the share is chosen on the
    out-of-fold rows, and the threshold that escalates that share is read from the deployed rows — a
    predictor refitted on more questions spreads its predictions differently (on a 90-question log a
    stronger ridge can flatten them), so a quantile of the out-of-fold gains may escalate nothing or
    everything on new questions. ``ConfigError`` with fewer than two arms."""
    X = np.atleast_2d(np.asarray(contexts, dtype=np.float64))
    Y = np.asarray(correct, dtype=np.float64)
    C = np.asarray(cost, dtype=np.float64)
    n, m = Y.shape
    if X.shape != (n, 1 + m) or C.shape != (n, m) or n == 0:
        raise ConfigError(f"a cascade needs [1, p] contexts of {1 + m} values and costs for {n} > 0 "
                          f"questions, got contexts {X.shape} and costs {C.shape}")
    if m < 2 or not shares:
        raise ConfigError(f"a cascade needs two arms and a share to compare, got {m} arms, shares {shares}")
    mean_cost = C.mean(axis=0)
    cheap, strong = cascade_arms(Y, C)
    room = ((budget_per_question - mean_cost[cheap]) / mean_cost[strong] if mean_cost[strong] > 0 else 1.0)
    top = float(min(max(room, 0.0), 1.0))
    gain = X[:, 1 + strong] - X[:, 1 + cheap]
    best: tuple[float, float, float] | None = None  # (accuracy, share, threshold)
    for share in sorted({s * top for s in shares}):
        # a gain of two probabilities never exceeds 1: a threshold of 1 escalates nothing (JSON-safe)
        threshold = float(np.quantile(gain, 1.0 - share)) if share > 0 else 1.0
        up = gain > threshold
        right = float(np.where(up, Y[:, strong], Y[:, cheap]).mean())
        if best is None or right > best[0] + 1e-12:
            best = (right, float(up.mean()), threshold)
    assert best is not None  # shares is not empty
    right, share, threshold = best
    if deployed is not None and share > 0:
        D = np.atleast_2d(np.asarray(deployed, dtype=np.float64))
        if D.shape != X.shape:
            raise ConfigError(f"deployed rows {D.shape} for contexts {X.shape}")
        threshold = float(np.quantile(D[:, 1 + strong] - D[:, 1 + cheap], 1.0 - share))
    return CascadeRule(cheap, strong, threshold, share, right)
