"""UAG's Learn-then-Test re-run on any group of its calibration questions (Mondrian UAG).

A fitted :class:`~kgwise.conformal.uag.UAG` with ``order = "front+chain"`` only ever tests the λ of three
fixed sequences learned on the tuning split: the largest set, the tuning Pareto front and the nested
chain (:func:`~kgwise.conformal.uag.front_and_chain`). :class:`GroupedUAG` keeps, for each calibration
question, whether each of those λ misses it. Any group of calibration questions then calibrates its own
λ̂ from sums of those misses — the same LTT as :meth:`UAG.calibrate` on that group's tables, without the
tables — so a caller can pick the group when it answers (the pipeline: the held-out questions the router,
as it stands, sends to the answering arm). If the group is chosen by a rule that treats each question
alone and the new question is exchangeable with the group's, UAG's guarantee ``P(miss rate ≤ α) ≥ 1 − δ``
holds over the questions that rule selects.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt

from kgwise.arrays import decode_array, encode_array
from kgwise.conformal.grid import TableBatch
from kgwise.conformal.scores import candidate_score
from kgwise.conformal.uag import UAG, config_from_dict, config_to_dict, front_and_chain
from kgwise.errors import ConfigError

__all__ = ["GroupedUAG"]


class GroupedUAG:
    """The fixed sequences of a fitted ``front+chain`` UAG (as positions into :attr:`tested`, the sorted
    flat grid indices they name) with each calibration question's misses on them (``misses[i, j]``:
    question ``i``'s set at λ ``tested[j]`` holds no gold answer) and the tuning set sizes that select λ̂
    among the valid ones."""

    def __init__(self, uag: UAG, misses: npt.NDArray[np.bool_]) -> None:
        if uag.config.order != "front+chain" or uag.order_ is None or uag.chain_ is None:
            raise ConfigError("GroupedUAG needs a UAG fitted with order='front+chain'")
        if uag.config.scored_step is not None:
            raise ConfigError("GroupedUAG covers the path part only: no scored_step")
        self.tested = _tested(uag)
        if uag.tune_size_ is None or misses.ndim != 2 or misses.shape[1] != self.tested.size:
            raise ConfigError(f"GroupedUAG: {misses.shape} misses for {self.tested.size} tested λ")
        self.uag = uag
        self.misses = misses
        self._largest, self._front, self._chain = (np.searchsorted(self.tested, x) for x in (
            uag.largest_index, uag.order_[1:], uag.chain_[1:]))
        self._size = uag.tune_size_[self.tested]

    @classmethod
    def from_fit(cls, uag: UAG, cal: TableBatch) -> GroupedUAG:
        """From a UAG fitted (``fit``) on the tuning split and its calibration split ``cal``."""
        return cls(uag, ~uag.grid(cal, sizes=False).covered.reshape(cal.num_questions, -1)[:, _tested(uag)])

    def __len__(self) -> int:
        return int(self.misses.shape[0])

    def certify(self, rows: Sequence[int] | npt.NDArray[np.int64], alpha: float | None = None) -> UAG | None:
        """A UAG at the λ̂ LTT certifies on calibration questions ``rows`` (``front+chain`` at ``alpha``,
        default the fitted α, and the fitted δ), ``None`` when none is (or ``rows`` is empty)."""
        r = np.asarray(rows, dtype=np.int64)
        if r.size == 0:
            return None
        cfg = self.uag.config if alpha is None else replace(self.uag.config, alpha=alpha)
        result = front_and_chain(self.misses[r].sum(axis=0), int(r.size), cfg.alpha, cfg.ltt, self._size,
                                 int(self._largest), self._front, self._chain)
        if result.chosen is None:
            return None
        return UAG(cfg).adopt_fit(self.uag).choose(int(self.tested[result.chosen]))

    def largest(self) -> UAG:
        """A UAG at the largest set (the first λ LTT tests): every candidate the retrieval keeps, the most
        UAG can cover; certified or not."""
        return UAG(self.uag.config).adopt_fit(self.uag).choose(int(self.uag.largest_index))

    def miss_rate(self, rows: Sequence[int] | npt.NDArray[np.int64], uag: UAG) -> float:
        """The share of calibration questions ``rows`` that ``uag``'s λ̂ (one :meth:`certify` gave) misses."""
        if uag.index_ is None or not len(rows):
            raise ConfigError("miss_rate needs a certified UAG and at least one question")
        j = int(np.searchsorted(self.tested, uag.index_))
        return float(self.misses[np.asarray(rows, dtype=np.int64), j].mean())

    # ------------------------------------------------------------------------------------- persistence
    def to_dict(self) -> dict[str, Any]:
        """JSON data: the UAG's config and grid (levels, thresholds, sequences), the tuning sizes of the
        tested λ, the misses (bit-packed)."""
        u = self.uag
        assert u.levels_ is not None and u.thresholds_ is not None
        assert u.order_ is not None and u.chain_ is not None
        return {"uag": config_to_dict(u.config),
                "levels": [encode_array(x) for x in u.levels_],
                "thresholds": [encode_array(x) for x in u.thresholds_],
                "order": encode_array(u.order_), "chain": encode_array(u.chain_),
                "tune_size": encode_array(self._size),
                "learned": {k: v.to_dict() for k, v in u.learned_.items()},
                "misses": {"shape": list(self.misses.shape),
                           "bits": base64.b64encode(np.packbits(self.misses, axis=None).tobytes()).decode()}}

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> GroupedUAG:
        """Inverse of :meth:`to_dict`; ``KeyError``/``TypeError``/``ValueError``/``ConfigError`` on a
        malformed body."""
        uag = UAG(config_from_dict(body["uag"]))
        l1, l2, l3 = (decode_array(x) for x in body["levels"])
        t1, t2, t3 = (decode_array(x) for x in body["thresholds"])
        uag.levels_, uag.thresholds_ = (l1, l2, l3), (t1, t2, t3)
        uag.order_ = decode_array(body["order"], np.int64)
        uag.chain_ = decode_array(body["chain"], np.int64)
        uag.learned_ = {k: candidate_score(k).load(v) for k, v in body.get("learned", {}).items()}
        uag.tune_size_ = np.full(int(np.prod(uag.grid_shape)), np.inf)  # only the tested λ are ever read
        uag.tune_size_[_tested(uag)] = decode_array(body["tune_size"])
        n, m = (int(v) for v in body["misses"]["shape"])
        bits = np.frombuffer(base64.b64decode(body["misses"]["bits"], validate=True), dtype=np.uint8)
        return cls(uag, np.unpackbits(bits, count=n * m).astype(bool).reshape(n, m))


def _tested(uag: UAG) -> npt.NDArray[np.int64]:
    """The sorted flat grid indices the ``front+chain`` sequences of ``uag`` name."""
    if uag.order_ is None or uag.chain_ is None:
        raise ConfigError("GroupedUAG needs a UAG fitted with order='front+chain'")
    return np.unique(np.r_[uag.largest_index, uag.order_, uag.chain_]).astype(np.int64)
