"""A learned per-candidate non-conformity score for UAG's open sets.

UAG's Eq. 6 score ranks a question's candidates by how far each is from the generation alone. The table
of a question carries more about each candidate: the Eq. 4 / Eq. 5 scores of the paths that reach it,
how many paths do, the Eq. 6 score against the generation's items, where the candidate ranks among the
question's, and how many candidates the question has. :class:`LogisticCandidateScore` fits a logistic
regression of "this candidate is a gold answer" on those features (:data:`FEATURES`) and scores a
candidate by minus its logit (larger: less likely gold), in the spirit of retrieval-aware conformity
scores (CPR) and of learned scores in split conformal prediction (Romano et al. 2019: any score fitted on
data disjoint from the calibration data keeps the guarantee).

Validity: UAG fits it in :meth:`~kgwise.conformal.uag.UAG.fit`, on the *tuning* split only, like the
Eq. 1 thresholds and LTT's fixed sequences. The calibration split's rows never reach the fit, so, given
the tuning split, the score is a fixed function of each question's own table; calibration and test
questions stay exchangeable and Learn-then-Test's ``P(E[L_λ̂] ≤ α) ≥ 1 − δ`` holds unchanged. Every
feature of a candidate is computed from its own question's table alone, so a question scores the same
alone (:meth:`~kgwise.conformal.uag.UAG.predict_set`) as inside a batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.optimize import minimize

from kgwise.arrays import decode_array, encode_array
from kgwise.conformal.grid import TableBatch, relative_scores
from kgwise.errors import ConfigError

__all__ = ["FEATURES", "LogisticCandidateScore", "candidate_features"]

FloatArray = npt.NDArray[np.float64]

FEATURES = ("prefix", "collect", "expand", "log_paths", "eq6", "eq6_relative", "items", "items_relative",
            "collect_relative", "expand_relative", "log_candidates", "log_eq6_rank")
"""Per candidate node: the smallest Eq. 4 prefix, Eq. 5 and Eq. 4 (max over hops) score of a path state
at it; ``log(1 + paths reaching it)``; Eq. 6 against the whole generation and against its items (the
whole generation's when the tables have no item scores), each also minus the question's smallest; the
Eq. 5 and Eq. 4 scores minus the question's smallest; ``log(1 + candidates of the question)``;
``log(1 + rank)`` of its Eq. 6 score among the question's candidates (0: the closest)."""

UNREACHED = 2.0
"""The value of a distance feature with no finite score (a candidate no path state reaches, e.g. one a
scored retriever added): S1 distances lie in [0, 2], so it sits past every real one."""


def candidate_features(batch: TableBatch) -> FloatArray:
    """The ``(candidate nodes, len(FEATURES))`` feature matrix of ``batch`` (rows in node order)."""
    n, nq = batch.node_q.size, batch.num_questions

    def best_state(x: FloatArray) -> FloatArray:
        out = np.full(n, np.inf)
        ok = np.isfinite(x)
        np.minimum.at(out, batch.state_node[ok], x[ok])
        return out

    def rel(x: FloatArray) -> FloatArray:
        return relative_scores(x, batch.node_q, nq)

    prefix, collect, expand = best_state(batch.prefix), best_state(batch.collect), best_state(batch.expand)
    items = batch.eq6 if batch.eq6_items is None else batch.eq6_items
    per_q = np.bincount(batch.node_q, minlength=nq)
    order = np.lexsort((batch.eq6, batch.node_q))
    rank = np.empty(n)
    rank[order] = np.arange(n) - np.r_[0, np.cumsum(per_q)[:-1]][batch.node_q[order]]
    x = np.column_stack([prefix, collect, expand, np.log1p(np.bincount(batch.state_node, minlength=n)),
                         batch.eq6, rel(batch.eq6), items, rel(items), rel(collect), rel(expand),
                         np.log1p(per_q[batch.node_q]), np.log1p(rank)]).astype(np.float64)
    x[~np.isfinite(x)] = UNREACHED
    return x


@dataclass(frozen=True)
class LogisticCandidateScore:
    """``score(c) = −(w · z(c) + b)`` with ``z`` the features standardised by the tuning split's ``mean``
    and ``std``; ``l2``: the ridge penalty the fit used (on ``w``, per tuning candidate); ``items``: the
    tables had item-level Eq. 6 scores (tables without them are refused, their features differ)."""

    weights: FloatArray
    bias: float
    mean: FloatArray
    std: FloatArray
    items: bool
    l2: float = 1e-3

    @classmethod
    def fit(cls, tune: TableBatch, l2: float = 1e-3) -> LogisticCandidateScore:
        """Maximum penalised likelihood (L-BFGS) on every candidate of ``tune``, the label being its gold
        flag; ``ConfigError`` when ``tune`` has no gold candidate or no non-gold one."""
        y = tune.gold.astype(np.float64)
        if not 0 < y.sum() < y.size:
            raise ConfigError(f"the learned score needs gold and non-gold candidates in the tuning split; it "
                              f"has {int(y.sum())} gold of {y.size}")
        x = candidate_features(tune)
        mean, std = x.mean(axis=0), x.std(axis=0)
        std[std == 0] = 1.0
        z = np.column_stack([(x - mean) / std, np.ones(y.size)])
        scale = 1.0 / y.size

        def loss(beta: FloatArray) -> tuple[float, FloatArray]:
            logit = z @ beta
            p = 0.5 * (1.0 + np.tanh(0.5 * logit))  # the logistic function, without overflow
            w = np.r_[beta[:-1], 0.0]
            value = scale * float(np.sum(np.logaddexp(0.0, logit) - y * logit)) + l2 * float(w @ w)
            return value, scale * (z.T @ (p - y)) + 2.0 * l2 * w

        found = minimize(loss, np.zeros(z.shape[1]), jac=True, method="L-BFGS-B")
        if not np.all(np.isfinite(found.x)):
            raise ConfigError(f"the learned score's fit did not converge: {found.message}")
        return cls(found.x[:-1].copy(), float(found.x[-1]), mean, std, tune.eq6_items is not None, l2)

    def scores(self, batch: TableBatch) -> FloatArray:
        """Each candidate node's non-conformity (minus its logit)."""
        if (batch.eq6_items is not None) != self.items:
            had = "with" if self.items else "without"
            raise ConfigError(f"the learned score was fitted on tables {had} item-level Eq. 6 scores; these "
                              "tables differ")
        z = (candidate_features(batch) - self.mean) / self.std
        return np.asarray(-(z @ self.weights + self.bias), dtype=np.float64)

    def to_dict(self) -> dict[str, Any]:
        """JSON data (:meth:`from_dict` reads it back)."""
        return {"kind": "logistic", "features": list(FEATURES), "weights": encode_array(self.weights),
                "bias": self.bias, "mean": encode_array(self.mean), "std": encode_array(self.std),
                "items": self.items, "l2": self.l2}

    @classmethod
    def from_dict(cls, body: dict[str, Any]) -> LogisticCandidateScore:
        """Inverse of :meth:`to_dict`; ``ValueError`` when the body is another kind or another feature
        list."""
        if body.get("kind") != "logistic" or list(body.get("features", ())) != list(FEATURES):
            raise ValueError(f"a learned score must be 'logistic' over features {list(FEATURES)}")
        arrays = [decode_array(body[k]) for k in ("weights", "mean", "std")]
        if any(a.shape != (len(FEATURES),) for a in arrays):
            raise ValueError(f"a learned score needs {len(FEATURES)} weights, means and stds")
        if not isinstance(body["items"], bool):
            raise ValueError("a learned score's 'items' must be true or false")
        return cls(arrays[0], float(body["bias"]), arrays[1], arrays[2], body["items"], float(body["l2"]))
