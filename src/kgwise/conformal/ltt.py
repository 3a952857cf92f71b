"""Learn-then-Test (Eq. 2, Theorems 1–2): p-values for ``H0_λ: E[L_λ] > α`` and FWER control over a grid.

* p-values: the binomial tail ``P(Binom(n, α) ≤ Σ L_λ)`` (Theorem 2, exact for 0/1 losses), or the
  Hoeffding–Bentkus bound through MAPIE's ``compute_hoeffding_bentkus_p_value``.
* FWER control (guaranteed): ``bonferroni`` and ``holm`` through MAPIE's ``control_fwer``;
  ``fixed_sequence`` (an order learned on data disjoint from the calibration set, each hypothesis tested
  at δ until the first acceptance) as one vectorised prefix scan. MAPIE's loop recomputes an m-vector of
  local levels per rejection, O(m²): minutes for the 10⁶-λ families here; the test suite checks that
  both reject the same hypotheses.
* ``top_p``: UAG's heuristic (appendix, "setting n = 1"): each λ is tested at level δ with no correction.
  It does **not** control the FWER and carries no guarantee.

Among the valid λ, the one with the smallest mean set size on a validation split is returned (Theorem 3).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt
from scipy.stats import binom

from kgwise.errors import ConfigError

__all__ = [
    "GUARANTEED",
    "FwerMethod",
    "LTTConfig",
    "LTTResult",
    "PValue",
    "binomial_p_values",
    "calibration_questions_needed",
    "control_fwer",
    "hoeffding_bentkus_p_values",
    "learn_then_test",
    "min_calibration_questions",
    "p_values",
]

FwerMethod = Literal["bonferroni", "holm", "fixed_sequence", "top_p"]
PValue = Literal["binomial", "hoeffding_bentkus"]
GUARANTEED: frozenset[str] = frozenset({"bonferroni", "holm", "fixed_sequence"})
"""The FWER procedures with a proven guarantee; ``top_p`` is not among them."""

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class LTTConfig:
    """``delta``: allowed probability that a selected λ misses the risk level (paper: 0.05)."""

    delta: float = 0.05
    fwer: FwerMethod = "fixed_sequence"
    p_value: PValue = "binomial"

    def __post_init__(self) -> None:
        if not 0.0 < self.delta < 1.0:
            raise ConfigError(f"delta must be in (0, 1), got {self.delta}")
        if self.fwer not in ("bonferroni", "holm", "fixed_sequence", "top_p"):
            raise ConfigError(f"unknown FWER method {self.fwer!r}")
        if self.p_value not in ("binomial", "hoeffding_bentkus"):
            raise ConfigError(f"unknown p-value {self.p_value!r}")

    @property
    def guaranteed(self) -> bool:
        return self.fwer in GUARANTEED


def _check(losses_sum: npt.ArrayLike, n: int, alpha: float) -> IntArray:
    if n <= 0:
        raise ConfigError(f"LTT needs at least one calibration question, got n={n}")
    if not 0.0 < alpha < 1.0:
        raise ConfigError(f"alpha must be in (0, 1), got {alpha}")
    k = np.asarray(losses_sum, dtype=np.int64)
    if (k < 0).any() or (k > n).any():
        raise ConfigError(f"loss counts must lie in 0..{n}")
    return k


def binomial_p_values(losses_sum: npt.ArrayLike, n: int, alpha: float) -> FloatArray:
    """Theorem 2: ``p_λ = P(Binom(n, α) ≤ Σ_i L_λ(i))`` for 0/1 losses, one per λ."""
    k = _check(losses_sum, n, alpha)
    return np.asarray(binom.cdf(np.arange(n + 1), n, alpha), dtype=np.float64)[k]  # one cdf per count


def hoeffding_bentkus_p_values(losses_sum: npt.ArrayLike, n: int, alpha: float) -> FloatArray:
    """The Hoeffding–Bentkus p-value of LTT (binary losses), computed by MAPIE."""
    k = _check(losses_sum, n, alpha)
    try:
        from mapie.risk_control.methods import compute_hoeffding_bentkus_p_value
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError("Hoeffding–Bentkus p-values need MAPIE: pip install 'kgwise[ml]'") from exc
    risk = k.astype(np.float64) / n
    out = compute_hoeffding_bentkus_p_value(risk, n, alpha, binary=True)
    return np.asarray(out, dtype=np.float64)[:, 0]


def p_values(losses_sum: npt.ArrayLike, n: int, alpha: float, kind: PValue = "binomial") -> FloatArray:
    if kind == "binomial":
        return binomial_p_values(losses_sum, n, alpha)
    return hoeffding_bentkus_p_values(losses_sum, n, alpha)


def control_fwer(p: npt.ArrayLike, delta: float, method: FwerMethod, order: npt.ArrayLike | None = None
                 ) -> npt.NDArray[np.bool_]:
    """Mask of rejected null hypotheses (= valid λ).

    ``fixed_sequence`` tests ``order`` (indices, most promising first; default 0, 1, …) at level δ each
    and stops at the first acceptance; ``bonferroni`` tests each at δ/m and ``holm`` steps down (both run
    MAPIE's implementations). ``top_p`` tests each at δ uncorrected (UAG's heuristic, no guarantee).
    """
    pv = np.asarray(p, dtype=np.float64).ravel()
    if pv.size == 0:
        raise ConfigError("control_fwer: no p-values")
    if not 0.0 < delta <= 1.0:
        raise ConfigError(f"delta must be in (0, 1], got {delta}")
    if method == "top_p":
        return pv <= delta
    mask = np.zeros(pv.size, dtype=bool)
    if method == "fixed_sequence":
        seq = np.arange(pv.size) if order is None else np.asarray(order, dtype=np.int64).ravel()
        if seq.size == 0 or seq.min() < 0 or seq.max() >= pv.size or np.bincount(seq).max() > 1:
            raise ConfigError("fixed_sequence: order must list distinct hypothesis indices")
        accepted = pv[seq] > delta
        stop = int(np.argmax(accepted)) if accepted.any() else seq.size
        mask[seq[:stop]] = True
        return mask
    try:
        from mapie.risk_control import control_fwer as mapie_control_fwer
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ConfigError("FWER control needs MAPIE: pip install 'kgwise[ml]'") from exc
    if method == "bonferroni":
        mask[mapie_control_fwer(pv, delta, fwer_method="bonferroni")] = True
        return mask
    if method == "holm":
        mask[mapie_control_fwer(pv, delta, fwer_method="bonferroni_holm")] = True
        return mask
    raise ConfigError(f"unknown FWER method {method!r}")


@dataclass(frozen=True)
class LTTResult:
    """``valid``: mask of λ in Λ_valid; ``chosen``: index of the selected λ or ``None`` when Λ_valid is
    empty (no configuration meets α at confidence 1−δ); ``p_values`` per λ."""

    valid: npt.NDArray[np.bool_]
    chosen: int | None
    p_values: FloatArray
    guaranteed: bool


def learn_then_test(
    losses_sum: npt.ArrayLike,
    n: int,
    alpha: float,
    config: LTTConfig,
    selection_size: npt.ArrayLike,
    order: npt.ArrayLike | None = None,
) -> LTTResult:
    """Run LTT over a grid: p-values from the calibration loss counts, FWER control, then the valid λ with
    the smallest ``selection_size`` (mean set size on the validation split; ties → lowest index)."""
    pv = p_values(losses_sum, n, alpha, config.p_value)
    valid = control_fwer(pv, config.delta, config.fwer, order)
    size = np.asarray(selection_size, dtype=np.float64).ravel()
    if size.shape != pv.shape:
        raise ConfigError(f"selection_size has {size.size} entries for {pv.size} configurations")
    chosen: int | None = None
    if valid.any():
        idx = np.flatnonzero(valid)
        chosen = int(idx[np.argmin(size[idx])])
    return LTTResult(valid, chosen, pv, config.guaranteed)


def min_calibration_questions(alpha: float, delta: float) -> int:
    """The fewest calibration questions with which Learn-then-Test can certify any λ at risk ``alpha`` and
    confidence ``delta``: even with no miss, the binomial p-value ``(1 − α)^n`` (Theorem 2) must reach
    ``δ``, so ``n ≥ ln δ / ln(1 − α)`` (fixed-sequence testing spends all of δ on its first λ)."""
    if not (0 < alpha < 1 and 0 < delta < 1):
        raise ConfigError(f"alpha and delta must lie in (0, 1), got {alpha}, {delta}")
    return math.ceil(math.log(delta) / math.log1p(-alpha) - 1e-12)


def calibration_questions_needed(alpha: float, delta: float, miss_rate: float, limit: int = 1_000_000
                                 ) -> int | None:
    """The fewest calibration questions with which LTT certifies a λ whose miss rate is ``miss_rate``
    (observed, e.g. the largest set's): the smallest ``n`` with ``P(Binom(n, α) ≤ k) ≤ δ`` (Theorem 2),
    ``k = ⌊miss_rate · n + ½⌋`` the misses expected among ``n``. ``None`` when ``miss_rate ≥ α`` (no ``n``
    suffices) or none up to ``limit`` does. ``miss_rate = 0`` gives :func:`min_calibration_questions`."""
    if not 0.0 <= miss_rate <= 1.0:
        raise ConfigError(f"miss_rate must lie in [0, 1], got {miss_rate}")
    start = min_calibration_questions(alpha, delta)
    if miss_rate >= alpha:
        return None
    lo = start
    while lo <= limit:
        hi = min(limit, 2 * lo)
        n = np.arange(lo, hi + 1)
        ok = binom.cdf(np.floor(miss_rate * n + 0.5), n, alpha) <= delta
        if ok.any():
            return int(n[int(np.argmax(ok))])
        lo = hi + 1
    return None
