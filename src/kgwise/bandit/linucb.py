"""Disjoint LinUCB: one ridge regression per arm, UCB exploration (Coke Eq. 8–13).

Each arm ``a`` keeps ``A_a = σI + Σ x xᵀ`` (held as its inverse) and ``b_a = Σ r x``. The ridge estimate is
``μ_a = A_a⁻¹ b_a`` (Eq. 11) and the score of context ``q`` is ``q·μ_a + γ √(qᵀ A_a⁻¹ q)`` (Eq. 8, 12, 13).
An update is a Sherman–Morrison rank-one change of ``A_a⁻¹``, O(d²) instead of an O(d³) inversion.

:meth:`LinUCB.track` keeps the quadratic forms ``zᵀ A_a⁻¹ z`` of a fixed set of contexts current through
every update at O(n·d) each (the same rank-one change), for callers that score those contexts often.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Self, overload

import numpy as np
import numpy.typing as npt

from kgwise.arrays import decode_array, encode_array
from kgwise.bandit.base import ArmT, Policy
from kgwise.errors import ConfigError

__all__ = ["LinUCB", "LinUCBConfig", "TrackedContexts", "gamma_from_delta"]

Vector = npt.NDArray[np.float64]


def gamma_from_delta(delta: float) -> float:
    """Coke's exploration width ``γ = 1 + √(ln(2/δ)/2)`` for confidence ``1 − δ`` (Eq. 12)."""
    if not 0.0 < delta < 1.0:
        raise ConfigError(f"delta must lie in (0, 1), got {delta}")
    return 1.0 + math.sqrt(math.log(2.0 / delta) / 2.0)


@dataclass(frozen=True)
class LinUCBConfig:
    """``alpha``: width γ of the confidence bonus (Eq. 12); ``ridge``: σ, the L2 weight (Eq. 10–11);
    ``precision``: storage of the ``A⁻¹`` matrices — ``float32`` halves the memory read per score (the
    cost of a pull is dominated by reading every arm's d×d matrix), ``b`` and ``μ`` stay ``float64``."""

    alpha: float = 1.0
    ridge: float = 1.0
    precision: str = "float64"

    def __post_init__(self) -> None:
        if not (math.isfinite(self.alpha) and self.alpha >= 0.0):
            raise ConfigError(f"LinUCB alpha must be a finite number ≥ 0, got {self.alpha}")
        if not (math.isfinite(self.ridge) and self.ridge > 0.0):
            raise ConfigError(f"LinUCB ridge must be a finite number > 0, got {self.ridge}")
        if self.precision not in ("float64", "float32"):
            raise ConfigError(f"LinUCB precision must be float64 or float32, got {self.precision!r}")


class TrackedContexts:
    """Fixed contexts ``Z`` (n × d) and their ``zᵀ A_a⁻¹ z`` for every arm (``quad``, n × arms), kept current
    by the :class:`LinUCB` that made them (:meth:`LinUCB.track`)."""

    def __init__(self, contexts: npt.NDArray[np.float64], quad: npt.NDArray[np.float64]) -> None:
        self.contexts = contexts
        self.quad = quad

    def scores(self, policy: LinUCB[Any]) -> npt.NDArray[np.float64]:
        """``policy.scores`` of every tracked context at once (n × arms), Eq. 8, 12, 13."""
        widths = np.sqrt(np.maximum(self.quad, 0.0))
        return np.asarray(self.contexts @ policy.theta.T + policy.alpha * widths)


class LinUCB(Policy[ArmT]):
    """Per-arm ridge-regression upper confidence bound policy with seeded tie-breaking.

    ``arms``: the arm labels, or their number ``n`` (labels ``0 … n−1``, which are then also the rows of
    the arrays). ``pull(context)`` returns the arm with the largest ``scores(context)``; ties (within
    1e-12) are broken uniformly at random by the policy's own seeded generator. ``mask`` restricts a pull
    to allowed arms. ``scores``, ``expected``, ``widths`` and :meth:`argmax` work with arm positions.
    """

    @overload
    def __init__(self: LinUCB[int], arms: int, dim: int, alpha: float = 1.0, ridge: float = 1.0,
                 seed: int | None = 0, precision: str = "float64") -> None: ...

    @overload
    def __init__(self, arms: Sequence[ArmT], dim: int, alpha: float = 1.0, ridge: float = 1.0,
                 seed: int | None = 0, precision: str = "float64") -> None: ...

    def __init__(
        self,
        arms: int | Sequence[ArmT],
        dim: int,
        alpha: float = 1.0,
        ridge: float = 1.0,
        seed: int | None = 0,
        precision: str = "float64",
    ) -> None:
        if (isinstance(arms, int) and arms <= 0) or dim <= 0:
            raise ConfigError(f"LinUCB needs n_arms > 0 and dim > 0, got arms={arms}, dim={dim}")
        super().__init__(arms)
        n_arms = self.n_arms
        self.config = LinUCBConfig(alpha=alpha, ridge=ridge, precision=precision)
        self.dim = dim
        self._seed = seed
        self._rng = np.random.default_rng(seed)
        self.A_inv: npt.NDArray[np.floating[Any]] = np.tile(
            np.eye(dim, dtype=precision) / ridge, (n_arms, 1, 1)
        )
        self.b = np.zeros((n_arms, dim))
        self.theta = np.zeros((n_arms, dim))
        self.counts = np.zeros(n_arms, dtype=np.int64)
        self._cache: tuple[Vector, npt.NDArray[np.float64]] | None = None
        self._tracked: list[TrackedContexts] = []

    def track(self, contexts: npt.ArrayLike) -> TrackedContexts:
        """Start keeping ``zᵀ A_a⁻¹ z`` of ``contexts`` (n × d) current: O(arms·n·d²) now, O(n·d) per later
        update (not saved with the state; track again after loading)."""
        Z = np.asarray(contexts, dtype=np.float64).reshape(-1, self.dim)
        if not np.all(np.isfinite(Z)):
            raise ConfigError("tracked contexts contain NaN or infinite values")
        tracked = TrackedContexts(Z, np.stack([self._quad(a, Z) for a in range(self.n_arms)], axis=1)
                                  if len(Z) else np.zeros((0, self.n_arms)))
        self._tracked.append(tracked)
        return tracked

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        """A copy without the tracked contexts: they are kept current for this policy's owner only (a copy
        made to be serialised would otherwise carry and update them for nothing)."""
        clone = self.__class__.__new__(self.__class__)
        memo[id(self)] = clone
        for key, value in self.__dict__.items():
            setattr(clone, key, [] if key == "_tracked" else copy.deepcopy(value, memo))
        return clone

    def untrack(self, tracked: TrackedContexts) -> None:
        """Stop keeping ``tracked`` current."""
        self._tracked = [t for t in self._tracked if t is not tracked]

    def _quad(self, a: int, Z: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        A = np.asarray(self.A_inv[a], dtype=np.float64)
        return np.asarray(np.einsum("ij,ij->i", Z @ A, Z))

    @property
    def alpha(self) -> float:
        return self.config.alpha

    @property
    def ridge(self) -> float:
        return self.config.ridge

    def _check_context(self, context: npt.ArrayLike) -> Vector:
        x = np.asarray(context, dtype=np.float64).reshape(-1)
        if x.shape[0] != self.dim:
            raise ConfigError(f"context has dimension {x.shape[0]}, LinUCB expects {self.dim}")
        if not np.all(np.isfinite(x)):
            raise ConfigError("context contains NaN or infinite values")
        return x

    def expected(self, context: npt.ArrayLike) -> Vector:
        """The exploitation term ``q·μ_a`` per arm (Eq. 8 without the bonus)."""
        x = self._check_context(context)
        return self.theta @ x

    def _products(self, x: Vector) -> npt.NDArray[np.float64]:
        """``A_a⁻¹ q`` for every arm (batched BLAS matrix-vector products), kept for the next update and for
        the next call with the same ``q`` until ``A⁻¹`` changes (:meth:`update` and :meth:`refit` drop it): a
        served answer's context is scored for its reply, then routed on inside the shared state's lock, and
        this product, O(n_arms · d²), is the costly part of both."""
        cached = self._cache
        if cached is not None and np.array_equal(cached[0], x):
            return cached[1]
        Ax = np.asarray(self.A_inv @ x.astype(self.A_inv.dtype, copy=False), dtype=np.float64)
        self._cache = (x.copy(), Ax)
        return Ax

    def widths(self, context: npt.ArrayLike) -> Vector:
        """``√(qᵀ A_a⁻¹ q)`` per arm: the correlation term fγ of Eq. 12–13 (before multiplying by γ)."""
        x = self._check_context(context)
        quad = self._products(x) @ x
        return np.asarray(np.sqrt(np.maximum(quad, 0.0)))

    def scores(self, context: npt.ArrayLike) -> Vector:
        """Upper confidence bound per arm: ``q·μ_a + γ √(qᵀ A_a⁻¹ q)`` (Eq. 8, 12, 13). O(n_arms · d²)."""
        x = self._check_context(context)
        quad = self._products(x) @ x
        return np.asarray(self.theta @ x + self.alpha * np.sqrt(np.maximum(quad, 0.0)))

    def argmax(self, values: npt.ArrayLike, mask: npt.ArrayLike | None = None) -> int:
        """Position of the largest of ``values`` (one per arm) among allowed arms, ties broken by the
        seeded generator."""
        v = np.asarray(values, dtype=np.float64)
        v = np.where(np.isnan(v), -np.inf, v)  # an overflowed value ranks last, never first
        m = np.ones(v.shape, dtype=bool) if mask is None else np.asarray(mask, dtype=bool)
        if m.shape != v.shape or not m.any():
            raise ConfigError("mask must have one entry per arm and allow at least one arm")
        best = np.flatnonzero(m & (v >= v[m].max() - 1e-12))  # only allowed arms, even if all are -inf
        return int(best[0]) if best.size == 1 else int(self._rng.choice(best))

    def pull(self, context: npt.ArrayLike, mask: npt.ArrayLike | None = None) -> ArmT:
        """The arm with the highest UCB score for ``context`` (restricted to ``mask``, one flag per arm in
        :attr:`arms` order, if given)."""
        return self.arms[self.argmax(self.scores(context), mask)]

    def update(self, arm: ArmT, context: npt.ArrayLike, reward: float) -> None:
        """Add ``(context, reward)`` to ``arm``'s history: Sherman–Morrison update of ``A⁻¹``, O(d²)."""
        a = self.index(arm)
        x = self._check_context(context)
        r = float(reward)
        if not math.isfinite(r):
            raise ConfigError(f"reward must be finite, got {reward}")
        cached = self._cache
        if cached is not None and np.array_equal(cached[0], x):
            Ax = cached[1][a].copy()  # A⁻¹q from the scores of this very context
        else:
            Ax = np.asarray(self.A_inv[a] @ x.astype(self.A_inv.dtype, copy=False), dtype=np.float64)
        self._cache = None
        s = 1.0 + float(x @ Ax)
        # Sherman–Morrison: (A + x xᵀ)⁻¹ = A⁻¹ − (A⁻¹x)(A⁻¹x)ᵀ / (1 + xᵀA⁻¹x)
        Axs = Ax.astype(self.A_inv.dtype, copy=False)
        self.A_inv[a] -= np.outer(Axs / s, Axs)
        for t in self._tracked:  # zᵀA'⁻¹z = zᵀA⁻¹z − (zᵀA⁻¹x)² / (1 + xᵀA⁻¹x)
            t.quad[:, a] -= (t.contexts @ Ax) ** 2 / s
        self.b[a] += r * x
        # μ' = A'⁻¹ b' = μ + A⁻¹x (r − xᵀμ) / (1 + xᵀA⁻¹x), O(d)
        self.theta[a] += Ax * ((r - float(x @ self.theta[a])) / s)
        self.counts[a] += 1

    def refit(self, arm: ArmT, contexts: npt.ArrayLike, rewards: npt.ArrayLike, ridge: npt.ArrayLike) -> None:
        """Rebuild ``arm`` from its whole history with its own L2 weights (one number, or one per
        feature): ``A = diag(ridge) + XᵀX``, ``b = Xᵀr``, ``μ = A⁻¹b`` (Eq. 10–11). Later updates go on
        from there by Sherman–Morrison."""
        a = self.index(arm)
        X = np.asarray(contexts, dtype=np.float64).reshape(-1, self.dim)
        r = np.asarray(rewards, dtype=np.float64).reshape(-1)
        if X.shape[0] != r.shape[0]:
            raise ConfigError(f"refit got {X.shape[0]} contexts and {r.shape[0]} rewards")
        penalty = np.broadcast_to(np.asarray(ridge, dtype=np.float64), (self.dim,))
        if not (np.all(np.isfinite(penalty)) and np.all(penalty > 0.0)):
            raise ConfigError(f"LinUCB ridge weights must be finite numbers > 0, got {penalty.tolist()}")
        A_inv = np.linalg.inv(np.diag(penalty) + X.T @ X)
        self.A_inv[a] = A_inv.astype(self.A_inv.dtype)
        self.b[a] = X.T @ r
        self.theta[a] = A_inv @ self.b[a]
        self.counts[a] = X.shape[0]
        self._cache = None
        for t in self._tracked:
            t.quad[:, a] = self._quad(a, t.contexts)

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to resume identically, generator state included (JSON-serialisable; the
        arrays by :func:`kgwise.arrays.encode_array`, lists of numbers are read too)."""
        return {
            "kind": "LinUCB",
            "arms": list(self.arms),
            "n_arms": self.n_arms,
            "dim": self.dim,
            "config": asdict(self.config),
            "seed": self._seed,
            "rng": self._rng.bit_generator.state,
            "A_inv": encode_array(self.A_inv),
            "b": encode_array(self.b),
            "theta": encode_array(self.theta),
            "counts": self.counts.tolist(),
        }

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> Self:
        """Inverse of :meth:`state_dict` (a state without ``arms``, written before arms had labels, gets
        ``0 … n_arms−1``)."""
        if state.get("kind") != "LinUCB":
            raise ConfigError(f"not a LinUCB state (kind={state.get('kind')!r})")
        cfg = state["config"]
        precision = cfg.get("precision", "float64")
        arms = state["arms"] if "arms" in state else int(state["n_arms"])
        out = cls(arms, int(state["dim"]), cfg["alpha"], cfg["ridge"], state.get("seed"), precision)
        out.A_inv = decode_array(state["A_inv"], precision).reshape(out.n_arms, out.dim, out.dim)
        out.b = decode_array(state["b"]).reshape(out.n_arms, out.dim)
        out.theta = decode_array(state["theta"]).reshape(out.n_arms, out.dim)
        out.counts = np.asarray(state["counts"], dtype=np.int64)
        out._rng.bit_generator.state = state["rng"]
        return out
