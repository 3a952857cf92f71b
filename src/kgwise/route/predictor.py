"""A learned per-arm success predictor: ``P(arm a answers question x right)`` from what is known of ``x``
before a paid arm is called (the free arms' answers and signals, the question's form and embedding).

One ridge-penalised logistic regression per arm on standardised features, fitted by Newton's method
(iteratively reweighted least squares; the intercept is not penalised), as RouteLLM's and IRT-Router's
learned routers predict each model's success; the ridge strength is chosen per arm from ``ridges`` by
``folds``-fold cross-validated log loss, so the probabilities are those that predicted held-out outcomes
best. Rows where an arm was not graded (NaN) are left out of its fit. :meth:`SuccessPredictor.update`
adds graded outcomes and refits with the chosen strengths (what a router that keeps learning does).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kgwise.errors import ConfigError

__all__ = ["PredictorConfig", "SuccessPredictor", "calibration", "cross_fitted"]

Matrix = npt.NDArray[np.float64]


@dataclass(frozen=True)
class PredictorConfig:
    """``ridges``: the L2 strengths tried per arm (on standardised features); ``folds``: of the
    cross-validation that picks one; ``iterations``: Newton steps (it converges in a handful)."""

    ridges: tuple[float, ...] = (1.0, 10.0, 100.0, 1000.0)
    folds: int = 3
    iterations: int = 25
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.ridges or any(not (math.isfinite(r) and r > 0) for r in self.ridges):
            raise ConfigError(f"predictor ridges must be finite numbers > 0, got {self.ridges}")
        if self.folds < 2:
            raise ConfigError(f"predictor folds must be ≥ 2, got {self.folds}")


def _sigmoid(z: Matrix) -> Matrix:
    return np.asarray(1.0 / (1.0 + np.exp(-np.clip(z, -500.0, 500.0))), dtype=np.float64)


def _logistic(X: Matrix, y: Matrix, ridge: float, iterations: int) -> Matrix:
    """Weights ``[intercept, w…]`` of ridge logistic regression (Newton / IRLS)."""
    n, d = X.shape
    A = np.hstack([np.ones((n, 1)), X])
    w = np.zeros(d + 1)
    p0 = min(max(float(y.mean()) if n else 0.5, 1e-3), 1 - 1e-3)
    w[0] = math.log(p0 / (1 - p0))
    penalty = np.full(d + 1, ridge)
    penalty[0] = 1e-6
    for _ in range(iterations):
        p = _sigmoid(A @ w)
        g = A.T @ (p - y) + penalty * w
        H = (A * (p * (1 - p))[:, None]).T @ A + np.diag(penalty)
        step = np.linalg.solve(H, g)
        w -= step
        if float(np.abs(step).max()) < 1e-8:
            break
    return w


def _log_loss(p: Matrix, y: Matrix) -> float:
    q = np.clip(p, 1e-6, 1 - 1e-6)
    return float(-np.mean(y * np.log(q) + (1 - y) * np.log(1 - q)))


class SuccessPredictor:
    """Per-arm success probabilities (module docstring)."""

    def __init__(self, n_arms: int, config: PredictorConfig | None = None) -> None:
        self.n_arms = n_arms
        self.config = config or PredictorConfig()
        self.ridge: list[float] = []
        self.weights: list[Matrix] = []
        self.mean = np.zeros(0)
        self.scale = np.ones(0)
        self._X = np.zeros((0, 0))
        self._Y = np.zeros((0, n_arms))

    def fit(self, X: npt.ArrayLike, Y: npt.ArrayLike) -> SuccessPredictor:
        """Learn from features ``X`` (n × d) and outcomes ``Y`` (n × arms, 1 right, 0 wrong, NaN not
        graded); each arm's ridge strength chosen by cross-validated log loss."""
        X_, Y_ = self._check(X, Y)
        self._X, self._Y = X_, Y_
        self.mean = X_.mean(axis=0)
        self.scale = np.where(X_.std(axis=0) > 1e-12, X_.std(axis=0), 1.0)
        Z = (X_ - self.mean) / self.scale
        rng = np.random.default_rng(self.config.seed)
        fold = rng.permutation(len(Z)) % self.config.folds
        self.ridge = []
        for a in range(self.n_arms):
            ok = ~np.isnan(Y_[:, a])
            losses = []
            for r in self.config.ridges:
                p = np.full(len(Z), np.nan)
                for f in range(self.config.folds):
                    tr, te = ok & (fold != f), ok & (fold == f)
                    if tr.sum() and te.sum():
                        w = _logistic(Z[tr], Y_[tr, a], r, self.config.iterations)
                        p[te] = _sigmoid(w[0] + Z[te] @ w[1:])
                graded = ok & ~np.isnan(p)
                losses.append(_log_loss(p[graded], Y_[graded, a]) if graded.any() else math.inf)
            self.ridge.append(self.config.ridges[int(np.argmin(losses))])
        self._refit(Z)
        return self

    def _refit(self, Z: Matrix) -> None:
        self.weights = []
        for a in range(self.n_arms):
            ok = ~np.isnan(self._Y[:, a])
            self.weights.append(_logistic(Z[ok], self._Y[ok, a], self.ridge[a], self.config.iterations))

    def update(self, X: npt.ArrayLike, Y: npt.ArrayLike) -> None:
        """Add graded outcomes (NaN: arm not seen) and refit with the chosen ridge strengths (the
        standardisation stays the first fit's)."""
        X_, Y_ = self._check(X, Y)
        self._X = np.vstack([self._X, X_])
        self._Y = np.vstack([self._Y, Y_])
        self._refit((self._X - self.mean) / self.scale)

    def predict(self, X: npt.ArrayLike) -> Matrix:
        """``P(right)`` per row and arm."""
        if not self.weights:
            raise ConfigError("the success predictor has not been fitted")
        Z = (np.atleast_2d(np.asarray(X, dtype=np.float64)) - self.mean) / self.scale
        W = np.stack(self.weights, axis=1)  # (d + 1) × arms
        return _sigmoid(W[0] + Z @ W[1:])

    def to_dict(self) -> dict[str, Any]:
        """The fitted predictor (weights, ridge strengths, standardisation, config) as JSON values; the
        outcomes it learnt from are not kept (a loaded predictor predicts; :meth:`update` needs a fit)."""
        return {"n_arms": self.n_arms, "config": asdict(self.config), "ridge": list(self.ridge),
                "weights": [w.tolist() for w in self.weights], "mean": self.mean.tolist(),
                "scale": self.scale.tolist()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SuccessPredictor:
        cfg = dict(d["config"])
        out = cls(int(d["n_arms"]), PredictorConfig(**{**cfg, "ridges": tuple(cfg["ridges"])}))
        out.ridge = [float(r) for r in d["ridge"]]
        out.weights = [np.asarray(w, dtype=np.float64) for w in d["weights"]]
        out.mean = np.asarray(d["mean"], dtype=np.float64)
        out.scale = np.asarray(d["scale"], dtype=np.float64)
        if len(out.weights) != out.n_arms or any(w.shape != (out.mean.shape[0] + 1,) for w in out.weights):
            raise ConfigError(f"predictor state: {len(out.weights)} weight vectors for {out.n_arms} arms and "
                              f"{out.mean.shape[0]} features")
        return out

    def _check(self, X: npt.ArrayLike, Y: npt.ArrayLike) -> tuple[Matrix, Matrix]:
        X_ = np.atleast_2d(np.asarray(X, dtype=np.float64))
        Y_ = np.atleast_2d(np.asarray(Y, dtype=np.float64))
        if Y_.shape != (X_.shape[0], self.n_arms):
            raise ConfigError(f"outcomes must be ({X_.shape[0]}, {self.n_arms}), got {Y_.shape}")
        if not np.all(np.isfinite(X_)):
            raise ConfigError("predictor features must be finite")
        return X_, Y_


def cross_fitted(X: npt.ArrayLike, Y: npt.ArrayLike, folds: Sequence[npt.NDArray[np.int64]],
                 config: PredictorConfig | None = None) -> Matrix:
    """Out-of-fold predictions: each fold's rows predicted by a predictor fitted on the other folds."""
    X_ = np.asarray(X, dtype=np.float64)
    Y_ = np.asarray(Y, dtype=np.float64)
    out = np.full(Y_.shape, np.nan)
    every = np.arange(len(X_))
    for rows in folds:
        rest = np.setdiff1d(every, rows)
        out[rows] = SuccessPredictor(Y_.shape[1], config).fit(X_[rest], Y_[rest]).predict(X_[rows])
    return out


def calibration(p: npt.ArrayLike, y: npt.ArrayLike, bins: int = 10) -> dict[str, float]:
    """Brier score, log loss and expected calibration error (equal-width bins) of probabilities ``p``
    for outcomes ``y``."""
    p_ = np.asarray(p, dtype=np.float64).ravel()
    y_ = np.asarray(y, dtype=np.float64).ravel()
    ok = ~np.isnan(p_) & ~np.isnan(y_)
    p_, y_ = p_[ok], y_[ok]
    which = np.minimum((p_ * bins).astype(int), bins - 1)
    ece = sum(abs(float(p_[which == b].mean() - y_[which == b].mean())) * float((which == b).mean())
              for b in range(bins) if (which == b).any())
    return {"brier": float(np.mean((p_ - y_) ** 2)), "log_loss": _log_loss(p_, y_), "ece": float(ece),
            "base_rate_brier": float(np.mean((y_.mean() - y_) ** 2)) if len(y_) else math.nan}
