"""Baselines over a scored retriever's candidates (e.g. the ReaRev GNN on WebQSP, ``test.info``).

* **Split CP** (Shafer & Vovk 2008): score ``1 − p(candidate)``; a question's calibration score is the
  smallest score of a gold candidate (``+∞`` when no gold answer is among the candidates), so the set
  ``{c : 1 − p(c) ≤ q̂}`` holds a gold answer with probability ≥ 1 − α (Eq. 1). When the quantile is
  ``+∞`` (more than α of the questions have no gold candidate at all) no valid set exists: ``None``.
* **Top-K** (no guarantee): the smallest ``K`` whose calibration coverage is ≥ 1 − α, ``None`` if none.

Coverage is "at least one gold answer in the set", as for UAG.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from kgwise.conformal.split import conformal_quantile
from kgwise.errors import ConfigError

__all__ = ["CandidateBatch", "SplitCPBaseline", "TopKBaseline"]

FloatArray = npt.NDArray[np.float64]


class CandidateBatch:
    """Scored candidates of many questions as flat arrays: ``q`` (question index), ``rank`` (0 = best),
    ``score`` (higher is better) and ``gold`` per candidate."""

    def __init__(self, qids: Sequence[str], q: npt.NDArray[np.int64], rank: npt.NDArray[np.int64],
                 score: FloatArray, gold: npt.NDArray[np.bool_]) -> None:
        self.qids, self.q, self.rank, self.score, self.gold = list(qids), q, rank, score, gold

    @property
    def num_questions(self) -> int:
        return len(self.qids)

    @classmethod
    def from_lists(cls, qids: Sequence[str], candidates: Sequence[Sequence[tuple[str, float]]],
                   answers: Sequence[Sequence[str]]) -> CandidateBatch:
        """``candidates[i]``: ``(id, score)`` pairs of question ``i``; ``answers[i]``: its gold ids."""
        if not (len(qids) == len(candidates) == len(answers)):
            raise ConfigError("qids, candidates and answers must have one entry per question")
        q: list[int] = []
        rank: list[int] = []
        score: list[float] = []
        gold: list[bool] = []
        for i, (cands, ans) in enumerate(zip(candidates, answers, strict=True)):
            gs = set(ans)
            ordered = sorted(cands, key=lambda c: -c[1])
            for r, (cid, s) in enumerate(ordered):
                q.append(i)
                rank.append(r)
                score.append(float(s))
                gold.append(cid in gs)
        return cls(qids, np.asarray(q, dtype=np.int64), np.asarray(rank, dtype=np.int64),
                   np.asarray(score, dtype=np.float64), np.asarray(gold, dtype=bool))

    def subset(self, questions: npt.ArrayLike) -> CandidateBatch:
        qs = np.asarray(questions, dtype=np.int64)
        remap = np.full(self.num_questions, -1, dtype=np.int64)
        remap[qs] = np.arange(qs.size)
        keep = np.flatnonzero(remap[self.q] >= 0)
        keep = keep[np.argsort(remap[self.q[keep]], kind="stable")]
        return CandidateBatch([self.qids[i] for i in qs.tolist()], remap[self.q[keep]], self.rank[keep],
                              self.score[keep], self.gold[keep])

    def _metrics(self, member: npt.NDArray[np.bool_]) -> dict[str, FloatArray]:
        n = self.num_questions
        size = np.bincount(self.q[member], minlength=n).astype(np.float64)
        covered = (np.bincount(self.q[member & self.gold], minlength=n) > 0).astype(np.float64)
        top = member & (self.rank == 0)
        hit1 = (np.bincount(self.q[top & self.gold], minlength=n) > 0).astype(np.float64)
        return {"covered": covered, "size": size, "hit1": hit1}


class SplitCPBaseline:
    """Split conformal prediction over scored candidates."""

    def __init__(self) -> None:
        self.quantile_: float | None = None

    @staticmethod
    def calibration_scores(batch: CandidateBatch) -> FloatArray:
        out = np.full(batch.num_questions, np.inf)
        np.minimum.at(out, batch.q[batch.gold], 1.0 - batch.score[batch.gold])
        return out

    def conformalize(self, cal: CandidateBatch, alpha: float) -> SplitCPBaseline:
        """The Eq. 1 quantile of the calibration scores; ``None`` when it is infinite (no valid set)."""
        q = conformal_quantile(self.calibration_scores(cal), alpha)
        self.quantile_ = None if math.isinf(q) else q
        return self

    def evaluate(self, batch: CandidateBatch) -> dict[str, FloatArray]:
        if self.quantile_ is None:
            raise ConfigError("split CP: no valid set at this α (quantile is +∞)")
        return batch._metrics(1.0 - batch.score <= self.quantile_)


class TopKBaseline:
    """The ``K`` best candidates, ``K`` the smallest reaching coverage 1 − α on calibration data."""

    def __init__(self) -> None:
        self.k_: int | None = None

    def fit(self, cal: CandidateBatch, alpha: float) -> TopKBaseline:
        n = cal.num_questions
        first_gold = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
        np.minimum.at(first_gold, cal.q[cal.gold], cal.rank[cal.gold])
        ranks = np.sort(first_gold)
        need = math.ceil((1.0 - alpha) * n - 1e-9)  # questions that must be covered
        self.k_ = None
        if need == 0:
            self.k_ = 0
        elif need <= n and ranks[need - 1] < np.iinfo(np.int64).max:
            self.k_ = int(ranks[need - 1]) + 1
        return self

    def evaluate(self, batch: CandidateBatch) -> dict[str, FloatArray]:
        if self.k_ is None:
            raise ConfigError("top-K: no K reaches the coverage 1 − α on the calibration data")
        return batch._metrics(batch.rank < self.k_)
