"""Beta–Bernoulli Thompson sampling (Coke's cluster-level expectation, Eq. 3–5).

Arm ``c`` has a ``Beta(α_c, β_c)`` belief over its success rate. ``sample()`` draws ``θ_c`` from every arm's
belief (Eq. 3–4); ``update(c, None, r)`` applies the conjugate posterior ``α_c += r``, ``β_c += 1 − r``
(Eq. 5). The policy has no context: ``pull`` and ``update`` take one (``None``) only to speak
:class:`~kgwise.bandit.base.Policy`'s verbs.
Rewards in ``[0, 1]`` are accepted (fractional rewards give the usual Bernoulli-trick update in expectation).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Self, overload

import numpy as np
import numpy.typing as npt

from kgwise.bandit.base import ArmT, Policy
from kgwise.errors import ConfigError

__all__ = ["BetaThompson", "ThompsonConfig", "beta_prior_from_accuracy"]

Vector = npt.NDArray[np.float64]


@dataclass(frozen=True)
class ThompsonConfig:
    """Default prior ``Beta(alpha0, beta0)`` for arms without an explicit prior (1, 1 = uniform)."""

    alpha0: float = 1.0
    beta0: float = 1.0

    def __post_init__(self) -> None:
        if not (self.alpha0 > 0 and self.beta0 > 0 and math.isfinite(self.alpha0 + self.beta0)):
            raise ConfigError(f"Beta prior must be finite and > 0, got {self.alpha0}, {self.beta0}")


def beta_prior_from_accuracy(accuracy: float, strength: float = 2.0) -> tuple[float, float]:
    """A ``Beta`` prior with mean ``accuracy`` worth ``strength`` pseudo-observations (Coke §3.2 priors)."""
    if not 0.0 <= accuracy <= 1.0:
        raise ConfigError(f"accuracy must lie in [0, 1], got {accuracy}")
    if not (strength > 0 and math.isfinite(strength)):
        raise ConfigError(f"prior strength must be finite and > 0, got {strength}")
    eps = 1e-3
    acc = min(max(accuracy, eps), 1.0 - eps)
    return acc * strength, (1.0 - acc) * strength


class BetaThompson(Policy[ArmT]):
    """Thompson sampling over Bernoulli arms (labels, or their number ``n``: labels ``0 … n−1``) with
    (optionally per-arm, in arm order) Beta priors."""

    @overload
    def __init__(self: BetaThompson[int], arms: int, priors: Sequence[tuple[float, float]] | None = None,
                 seed: int | None = 0, config: ThompsonConfig | None = None) -> None: ...

    @overload
    def __init__(self, arms: Sequence[ArmT], priors: Sequence[tuple[float, float]] | None = None,
                 seed: int | None = 0, config: ThompsonConfig | None = None) -> None: ...

    def __init__(
        self,
        arms: int | Sequence[ArmT],
        priors: Sequence[tuple[float, float]] | None = None,
        seed: int | None = 0,
        config: ThompsonConfig | None = None,
    ) -> None:
        if isinstance(arms, int) and arms <= 0:
            raise ConfigError(f"BetaThompson needs n_arms > 0, got {arms}")
        super().__init__(arms)
        n_arms = self.n_arms
        self.config = config or ThompsonConfig()
        self._seed = seed
        self._rng = np.random.default_rng(seed)
        if priors is None:
            priors = [(self.config.alpha0, self.config.beta0)] * n_arms
        if len(priors) != n_arms:
            raise ConfigError(f"got {len(priors)} priors for {n_arms} arms")
        for a, b in priors:
            if not (a > 0 and b > 0 and math.isfinite(a + b)):
                raise ConfigError(f"Beta prior parameters must be finite and > 0, got ({a}, {b})")
        self.prior_alpha = np.array([float(a) for a, _ in priors])
        self.prior_beta = np.array([float(b) for _, b in priors])
        self.alpha = self.prior_alpha.copy()
        self.beta = self.prior_beta.copy()

    def sample(self) -> Vector:
        """One draw ``θ_c ~ Beta(α_c, β_c)`` per arm (Eq. 3–4)."""
        return np.asarray(self._rng.beta(self.alpha, self.beta), dtype=np.float64)

    def pull(self, context: None = None) -> ArmT:
        """The arm with the largest sampled ``θ`` (the best cluster ``c*`` of §3.2); no context."""
        return self.arms[int(np.argmax(self.sample()))]

    def mean(self) -> Vector:
        """Posterior means ``α / (α + β)``."""
        return np.asarray(self.alpha / (self.alpha + self.beta))

    def update(self, arm: ArmT, context: None, reward: float) -> None:
        """Conjugate update with reward ``r ∈ [0, 1]``: ``α += r``, ``β += 1 − r`` (Eq. 5); no context."""
        a = self.index(arm)
        r = float(reward)
        if not 0.0 <= r <= 1.0:
            raise ConfigError(f"Thompson reward must lie in [0, 1], got {reward}")
        self.alpha[a] += r
        self.beta[a] += 1.0 - r

    def state_dict(self) -> dict[str, Any]:
        """Priors, posteriors and generator state (JSON-serialisable)."""
        return {
            "kind": "BetaThompson",
            "arms": list(self.arms),
            "n_arms": self.n_arms,
            "seed": self._seed,
            "config": {"alpha0": self.config.alpha0, "beta0": self.config.beta0},
            "prior_alpha": self.prior_alpha.tolist(),
            "prior_beta": self.prior_beta.tolist(),
            "alpha": self.alpha.tolist(),
            "beta": self.beta.tolist(),
            "rng": self._rng.bit_generator.state,
        }

    @classmethod
    def from_state_dict(cls, state: Mapping[str, Any]) -> Self:
        """Inverse of :meth:`state_dict` (a state without ``arms``, written before arms had labels, gets
        ``0 … n_arms−1``)."""
        if state.get("kind") != "BetaThompson":
            raise ConfigError(f"not a BetaThompson state (kind={state.get('kind')!r})")
        priors = list(zip(state["prior_alpha"], state["prior_beta"], strict=True))
        arms = state["arms"] if "arms" in state else int(state["n_arms"])
        out = cls(arms, priors, state.get("seed"), ThompsonConfig(**state["config"]))
        out.alpha = np.asarray(state["alpha"], dtype=np.float64)
        out.beta = np.asarray(state["beta"], dtype=np.float64)
        out._rng.bit_generator.state = state["rng"]
        return out
