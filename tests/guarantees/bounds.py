"""How many splits a valid calibration may miss, so that a guarantee test fails a valid method rarely.

A split's coverage is measured on finitely many test questions, so a method whose true coverage is at least
1 − α can still score below 1 − α in a split — near 1 − α about half the time. The suite therefore flags a
split only when its coverage is below 1 − α *beyond noise*: ``k`` covered of ``n`` with
``P(Binom(n, 1 − α) ≤ k) < γ`` (one-sided exact binomial test, :data:`GAMMA`). A PAC method valid at δ has
true coverage < 1 − α in a split with probability ≤ δ, and otherwise is flagged with probability ≤ γ, so
each split is flagged with probability ≤ ``p₀ = δ + (1 − δ)γ``; the splits are independent (fresh seeded
draws), so the flagged count is at most ``Binom(splits, p₀)`` in distribution, and :func:`allowed_flags`
allows the count that such a binomial exceeds with probability ≤ :data:`FALSE_ALARM`. A valid method then
fails a test with probability ≤ :data:`FALSE_ALARM` per assertion; a method flagged on twice ``p₀``'s
share of 50 splits fails it with probability about one half.

(The per-split test treats a split's test answers as independent draws with one coverage. Within a split the
router keeps learning from feedback, so the sets of later answers come from re-selected calibration
questions; the coverage tested is their average. Checks over all test questions with one fixed threshold
per arm are exact in this respect.)
"""

from __future__ import annotations

from scipy.stats import binom

GAMMA = 0.01
"""Level of the per-split test "coverage below 1 − α beyond noise"."""
FALSE_ALARM = 0.001
"""The largest probability with which an assertion of :func:`allowed_flags` fails a valid method."""


def below_beyond_noise(covered: int, n: int, alpha: float, gamma: float = GAMMA) -> bool:
    """Whether ``covered`` of ``n`` is below ``1 − alpha`` beyond noise: ``P(Binom(n, 1 − α) ≤ covered) <
    gamma``."""
    return n > 0 and float(binom.cdf(covered, n, 1.0 - alpha)) < gamma


def flag_rate(delta: float, gamma: float = GAMMA) -> float:
    """The most often a split of a method valid at ``delta`` is flagged: ``δ + (1 − δ)γ``."""
    return delta + (1.0 - delta) * gamma


def allowed_flags(splits: int, delta: float, gamma: float = GAMMA, false_alarm: float = FALSE_ALARM) -> int:
    """The smallest ``m`` with ``P(Binom(splits, δ + (1 − δ)γ) > m) ≤ false_alarm``: the flagged splits a
    valid method stays within except with probability ``false_alarm``."""
    p = flag_rate(delta, gamma)
    return next(m for m in range(splits + 1) if float(binom.sf(m, splits, p)) <= false_alarm)
