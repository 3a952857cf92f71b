"""The price on cost of price-paced Coke (``CokeConfig(pacing="price")``): a ring of the last questions'
Eq. 2 values and mean cost bounds, and the smallest price ``η ≥ 0`` at which ``argmax_a E_a − η·c̄_a`` over
them spends at most the budget left per question left (Agrawal & Devanur 2014's primal–dual price).

The bisection evaluates the spending ``s(η) = mean_r c̄_{r, argmax_a (E_ra − η·c̄_ra)}`` some twenty times a
question. Each evaluation reads only the arms that can win their row, with the same floating-point
operations as over all arms, so every ``s(η)`` — and hence the price and the decision — is the one the
full evaluation gives, bit for bit:

* in row ``r`` arm ``b`` is **dominated** when an arm ``a`` of lower position has ``c̄_a ≤ c̄_b`` and
  ``E_a ≥ E_b``. For ``η ≥ 0`` and finite ``E`` and ``η·c̄`` (Eq. 2's values and real costs) rounding
  is monotone, so ``fl(η·c̄_a) ≤ fl(η·c̄_b)`` and
  ``fl(E_a − fl(η·c̄_a)) ≥ fl(E_b − fl(η·c̄_b))``: ``b`` never has a larger value than ``a``, and on a tie
  ``argmax`` takes the first position, ``a``. A dominated arm is never the row's argmax at any ``η ≥ 0``.
* the other arms (the row's *candidates*) are kept in position order, padded with ``E = −∞, c̄ = 0``
  (value ``−∞`` at every ``η``, after every candidate): the first largest candidate is the first largest
  arm. The chosen costs are gathered in row order, so their mean is summed in the same order.

Each row's candidates are found once, when the row enters the ring (O(arms²)), not at each of the
bisection's evaluations; with 8 arms on ``kgwise bench route``'s stream 2–4 arms a row remain. So is its
choice at ``η = 0`` (``argmax_a E_a − 0·c̄_a``, the same expression), which every question's first
evaluation reads — the only one where the budget's pace needs no price.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from kgwise.errors import ConfigError

__all__ = ["PriceWindow"]

Array = npt.NDArray[np.float64]


class PriceWindow:
    """The last ``size`` questions' Eq. 2 values ``E`` and mean cost bounds ``c̄`` (rows of ``n_arms``, a
    ring: :attr:`values`, :attr:`costs`, :attr:`count` pushed so far) and :meth:`price`."""

    def __init__(self, size: int, n_arms: int) -> None:
        self.values = np.zeros((size, n_arms))
        self.costs = np.zeros((size, n_arms))
        self.count = 0
        self._n_cand = np.zeros(size, dtype=np.int64)
        self._zero_cost = np.zeros(size)  # each row's chosen c̄ at η = 0 (found when the row enters)
        # each row's candidates (module docstring) in arm order, then padding; as wide as the widest row
        # in the ring and contiguous, so that an evaluation reads no padding column of every row
        self._lay(np.full((size, 1), -np.inf), np.zeros((size, 1)))

    def load(self, values: npt.ArrayLike, costs: npt.ArrayLike, count: int) -> None:
        """Set the ring from a saved state (its rows in slot order) and find every row's candidates;
        ``ConfigError`` unless values and costs are (rows, arms) arrays of one shape and ``count`` ≥ 0."""
        self.values = np.asarray(values, dtype=np.float64)
        self.costs = np.asarray(costs, dtype=np.float64)
        self.count = int(count)
        if self.values.ndim != 2 or self.costs.shape != self.values.shape or self.count < 0:
            raise ConfigError(f"the price's window needs values and costs of one (rows, arms) shape and a "
                              f"count ≥ 0, got {self.values.shape}, {self.costs.shape} and {self.count}")
        size = len(self.values)
        self._n_cand = np.zeros(size, dtype=np.int64)
        self._zero_cost = np.zeros(size)
        self._lay(np.full((size, 1), -np.inf), np.zeros((size, 1)))
        for slot in range(min(self.count, size)):
            self._candidates(slot)

    def _lay(self, values: Array, costs: Array) -> None:
        """Keep padded candidate arrays (rows × width), with scratch space and flat offsets of that width."""
        self._cand_values, self._cand_costs = values, costs
        self._scratch = np.empty_like(values)
        self._offsets = np.arange(0, values.size, values.shape[1])

    def push(self, values: Array, costs: Array) -> None:
        """Add one question's ``E`` and ``c̄`` (arm order), replacing the oldest row once the ring is full."""
        slot = self.count % len(self.values)
        self.values[slot] = values
        self.costs[slot] = costs
        self.count += 1
        self._candidates(slot)

    def _candidates(self, slot: int) -> None:
        E, C = self.values[slot], self.costs[slot]
        # dominated[b]: some a < b with c̄_a ≤ c̄_b and E_a ≥ E_b (NaN compares false: never dominated)
        dominated = np.triu((C[:, None] <= C[None, :]) & (E[:, None] >= E[None, :]), 1).any(axis=0)
        keep = np.flatnonzero(~dominated)
        k = keep.size
        self._n_cand[slot] = k
        self._zero_cost[slot] = C[np.argmax(E - 0.0 * C)]
        width = max(int(self._n_cand.max()), 1)
        if width != self._cand_values.shape[1]:  # the widest row came or went: re-lay the padded arrays
            rows = len(self.values)
            pad_values, pad_costs = np.full((rows, width), -np.inf), np.zeros((rows, width))
            keep_width = min(width, self._cand_values.shape[1])
            pad_values[:, :keep_width] = self._cand_values[:, :keep_width]
            pad_costs[:, :keep_width] = self._cand_costs[:, :keep_width]
            self._lay(pad_values, pad_costs)
        self._cand_values[slot] = -np.inf
        self._cand_values[slot, :k] = E[keep]
        self._cand_costs[slot] = 0.0
        self._cand_costs[slot, :k] = C[keep]

    def spends(self, eta: float) -> float:
        """``s(η)``: the mean ``c̄`` of each row's ``argmax_a E_a − η·c̄_a`` (first on ties), over the ring's
        rows — bit for bit the value over all arms (module docstring)."""
        rows = min(self.count, len(self.values))
        if eta == 0.0:  # the bisection's first evaluation, every question: kept per row
            return float(np.add.reduce(self._zero_cost[:rows]) / rows)
        value = self._scratch[:rows]
        np.multiply(self._cand_costs[:rows], eta, out=value)
        np.subtract(self._cand_values[:rows], value, out=value)
        chosen = self._cand_costs[:rows].ravel()[value.argmax(axis=1) + self._offsets[:rows]]
        # ndarray.mean's own steps (np.add.reduce, then a division by the count), without its wrapper
        return float(np.add.reduce(chosen) / rows)

    def price(self, per_question: float) -> float:
        """The smallest ``η ≥ 0`` (to 2⁻²⁰ of its bracket) at which :meth:`spends` ≤ ``per_question``, the
        budget left per question left; 0 when spending at no price already fits (bisection: ``s`` is a
        step function that does not grow with ``η``)."""
        if self.spends(0.0) <= per_question:
            return 0.0
        rows = min(self.count, len(self.values))
        positive = self.costs[:rows][self.costs[:rows] > 0]
        if positive.size == 0:
            return 0.0
        # η in reward per "one question's budget", kept finite for a vanishing budget (no ∞·0 = NaN below)
        scale = 1.0 / max(per_question, float(positive.min()), 1e-200)
        lo, hi = 0.0, scale
        while self.spends(hi) > per_question and hi < 1e9 * scale:
            lo, hi = hi, 4 * hi
        for _ in range(20):  # to 2⁻²⁰ of the bracket
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if self.spends(mid) > per_question else (lo, mid)
        return hi
