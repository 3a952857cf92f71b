"""A success predictor from the outcomes of similar questions: ``p_a(x)`` is the share of arm ``a``'s right
answers among the ``k`` graded questions nearest to ``x`` (cosine similarity of question embeddings),
shrunk toward the arm's accuracy over all graded questions by ``prior`` pseudo-questions:

    p_a(x) = (Σ_{j ∈ N_k,a(x)} y_ja + prior · ȳ_a) / (|N_k,a(x)| + prior)

(``N_k,a(x)``: the ``k`` most similar questions graded on ``a``). The model is the neighbours themselves:
no parameters to overfit on 90-question halves, which the per-arm logistic regressions of
:mod:`kgwise.route.predictor` did (their Brier scores at the base rate's on the CSQA logs). It is the
similar-question outcome estimate that routing papers use as a success predictor (RouteLLM's
similarity-weighted ranking; IRT-Router's warm-up of a new question from its neighbours).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kgwise.errors import ConfigError

__all__ = ["NeighbourConfig", "NeighbourPredictor"]

Matrix = npt.NDArray[np.float64]


@dataclass(frozen=True)
class NeighbourConfig:
    """``k``: neighbours per arm; ``prior``: pseudo-questions at the arm's overall accuracy. Defaults: the
    best mean gain over the best arm on the two tuning logs (WebQSP, OBQA local) of k ∈ {20, 40, 80} ×
    prior ∈ {5, 20} as features of ``predicted-free+neighbours`` (``kgwise.eval.route.learned``)."""

    k: int = 40
    prior: float = 5.0

    def __post_init__(self) -> None:
        if self.k < 1 or not (np.isfinite(self.prior) and self.prior >= 0):
            raise ConfigError(f"neighbour predictor: k ≥ 1 and prior ≥ 0, got k={self.k}, prior={self.prior}")


def _unit(X: npt.ArrayLike) -> Matrix:
    A = np.asarray(X, dtype=np.float64)
    if A.ndim != 2 or not np.all(np.isfinite(A)):
        raise ConfigError(f"neighbour predictor: embeddings must be a finite (questions, dims) array, got "
                          f"shape {A.shape}")
    norm = np.linalg.norm(A, axis=1, keepdims=True)
    return np.asarray(A / np.where(norm > 0, norm, 1.0))


class NeighbourPredictor:
    """:meth:`fit` on embeddings and outcomes (NaN: not graded), :meth:`update` with more, :meth:`predict`
    ``p_a(x)`` per arm (module docstring)."""

    def __init__(self, n_arms: int, config: NeighbourConfig | None = None) -> None:
        self.n_arms = n_arms
        self.config = config or NeighbourConfig()
        self.X = np.zeros((0, 0))
        self.Y = np.zeros((0, n_arms))

    def fit(self, X: npt.ArrayLike, Y: npt.ArrayLike) -> NeighbourPredictor:
        self.X, self.Y = _unit(X), self._outcomes(Y, len(np.asarray(X)))
        return self

    def update(self, X: npt.ArrayLike, Y: npt.ArrayLike) -> None:
        U = _unit(X)
        if self.X.size and U.shape[1] != self.X.shape[1]:
            raise ConfigError(f"neighbour predictor: {U.shape[1]}-dim embeddings, fitted on "
                              f"{self.X.shape[1]}")
        self.X = np.vstack([self.X, U]) if self.X.size else U
        self.Y = np.vstack([self.Y, self._outcomes(Y, len(U))])

    def _outcomes(self, Y: npt.ArrayLike, n: int) -> Matrix:
        y = np.asarray(Y, dtype=np.float64)
        if y.shape != (n, self.n_arms):
            raise ConfigError(f"neighbour predictor: outcomes must be ({n}, {self.n_arms}), got {y.shape}")
        return y

    def predict(self, X: npt.ArrayLike, exclude_self: bool = False) -> Matrix:
        """``p_a(x)`` for each row of ``X`` (questions × arms); ``exclude_self``: ``X`` are the fitted
        questions themselves, each predicted without its own outcome (leave-one-out)."""
        U = _unit(X)
        S = U @ self.X.T
        if exclude_self:
            np.fill_diagonal(S, -np.inf)
        order = np.argsort(-S, axis=1, kind="stable")
        out = np.empty((len(U), self.n_arms))
        for a in range(self.n_arms):
            graded = ~np.isnan(self.Y[:, a])
            y = self.Y[:, a]
            # the arm's accuracy over the graded questions (without the row's own outcome when left out)
            n_graded, right = float(graded.sum()), float(np.nansum(y))
            if exclude_self:
                own = np.where(graded, y, 0.0)
                n_rows = n_graded - graded
                mean = np.where(n_rows > 0, (right - own) / np.maximum(n_rows, 1), 0.5)
            else:
                mean = np.full(len(U), right / n_graded if n_graded else 0.5)
            hits = np.where(graded[order], y[order], np.nan)  # outcomes in order of similarity, NaN ungraded
            if exclude_self:
                hits = np.where(np.isinf(np.take_along_axis(S, order, axis=1)), np.nan, hits)
            # the first k graded neighbours of each row
            taken = np.cumsum(~np.isnan(hits), axis=1) <= self.config.k
            use = taken & ~np.isnan(hits)
            count = use.sum(axis=1)
            total = np.where(use, hits, 0.0).sum(axis=1)
            weight = count + self.config.prior  # 0 only without prior and without a graded neighbour
            out[:, a] = (total + self.config.prior * mean) / np.maximum(weight, 1e-300)
            out[:, a] = np.where(weight > 0, out[:, a], mean)
        return out
