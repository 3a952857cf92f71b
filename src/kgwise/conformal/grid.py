"""Threshold-free per-question records for UAG and the vectorised evaluation of a threshold grid.

A :class:`QuestionTable` keeps, for one question, every retrievable state's Eq. 4 prefix score and Eq. 5
score, and every candidate node's Eq. 6 score and gold flag. For thresholds ``(t1, t2, t3)`` a node is in
the final set iff some state at that node has ``prefix ≤ t1`` and ``collect ≤ t2`` and the node's Eq. 6
score is ``≤ t3``. Optionally a second, *scored* retriever (e.g. a GNN) adds its candidates with a
non-conformity ``scored`` (``1 − p``; ``+∞`` for nodes it did not return): with a fourth threshold ``t4``
the set is the union of the above and ``{node : finite scored ≤ t4}`` (``t4 = −∞``: the paper's UAG;
``t4 = +∞``: every candidate of the scored retriever, never a node it did not return).
:meth:`TableBatch.grid` evaluates coverage and set size of every question at every point of a
``T1 × T2 × T3`` grid at once (sort/bin/cumulative-sum; no loop over grid points).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt

from kgwise.errors import ConfigError, DataError
from kgwise.files import savez_atomic

__all__ = [
    "EVALUATOR_SCORES", "EvaluatorScore", "GridResult", "QuestionTable", "TableBatch", "relative_scores",
    "scored_members",
]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

EvaluatorScore = Literal["absolute", "relative", "items", "items-relative", "learned"]
EVALUATOR_SCORES: tuple[EvaluatorScore, ...] = ("absolute", "relative", "items", "items-relative")
"""``absolute``: Eq. 6 as written; ``relative``: Eq. 6 minus the question's best (smallest) Eq. 6 score;
``items`` / ``items-relative``: the same with Eq. 6 taken against the generation's listed items (min over
them), which needs tables built with item scores (``eq6_items``). The scores computed from the tables
alone; ``learned`` (:data:`kgwise.conformal.scores.CANDIDATE_SCORES`) is fitted first, by ``UAG.fit``."""


def scored_members(scored: FloatArray, t4: float) -> BoolArray:
    """The scored retriever's candidates in the set at threshold ``t4``: finite ``scored ≤ t4`` (``+∞``
    marks a node it did not return, which no threshold adds)."""
    return np.isfinite(scored) & (scored <= t4)


def relative_scores(eq6: FloatArray, question: IntArray, n_questions: int) -> FloatArray:
    """Each candidate's Eq. 6 score minus the smallest finite Eq. 6 score among its question's candidates
    (``question[i]`` = the question of candidate ``i``): the candidate closest to the generation scores 0,
    so a threshold keeps the candidates nearly as close as the best one. ``+∞`` stays ``+∞``."""
    eq6 = np.asarray(eq6, dtype=np.float64)
    finite = np.isfinite(eq6)
    best = np.full(n_questions, np.inf)
    np.minimum.at(best, question[finite], eq6[finite])
    out = np.full(eq6.shape, np.inf)
    out[finite] = eq6[finite] - best[question[finite]]
    return out


@dataclass(frozen=True)
class QuestionTable:
    """One question: ``state_node[i]`` indexes ``node_ids``; ``prefix``/``expand``/``collect`` per state
    (see :class:`kgwise.conformal.retriever.QuestionPaths`); ``eq6`` and ``gold`` per candidate node, and
    optionally ``eq6_items``, Eq. 6 against the generation's items, and ``scored``, a scored retriever's
    non-conformity per node (``+∞`` where it did not return the node)."""

    qid: str
    state_node: IntArray
    prefix: FloatArray
    expand: FloatArray
    collect: FloatArray
    node_ids: IntArray
    eq6: FloatArray
    gold: BoolArray
    eq6_items: FloatArray | None = None
    scored: FloatArray | None = None

    def __post_init__(self) -> None:
        n, s = self.node_ids.size, self.state_node.size
        if not (self.prefix.size == self.expand.size == self.collect.size == s):
            raise ConfigError(f"question {self.qid}: per-state arrays differ in length")
        items_ok = all(x is None or x.size == n for x in (self.eq6_items, self.scored))
        if not (self.eq6.size == self.gold.size == n and items_ok):
            raise ConfigError(f"question {self.qid}: per-node arrays differ in length")
        if s and (self.state_node.min() < 0 or self.state_node.max() >= n):
            raise ConfigError(f"question {self.qid}: state_node outside 0..{n - 1}")

    def component_scores(self) -> tuple[float, float, float]:
        """Per-component non-conformity of the question (for Eq. 1 quantiles): the smallest Eq. 4 score
        (max over hops) and Eq. 5 score of a state at a gold node, and the smallest Eq. 6 score of a gold
        node; ``+∞`` when no gold answer is retrievable."""
        g = self.gold[self.state_node]
        s1 = float(self.expand[g].min()) if g.any() else math.inf
        s2 = float(self.collect[g].min()) if g.any() else math.inf
        s3 = float(self.eq6[self.gold].min()) if self.gold.any() else math.inf
        return s1, s2, s3

    def rescored(self, kind: EvaluatorScore) -> QuestionTable:
        """This table with its Eq. 6 scores of ``kind`` (see :data:`EVALUATOR_SCORES`)."""
        if kind == "absolute":
            return self
        base = _base_scores(kind, self.eq6, self.eq6_items)
        if kind.endswith("relative"):
            base = relative_scores(base, np.zeros(base.size, dtype=np.int64), 1)
        return replace(self, eq6=base)

    def final_set(self, t1: float, t2: float, t3: float, t4: float = -math.inf) -> IntArray:
        """Indices into ``node_ids`` of the final set (Eq. 4–6, united with the scored retriever's
        candidates with ``scored ≤ t4``), smallest Eq. 6 score first, then smallest ``scored``."""
        ok = (self.prefix <= t1) & (self.collect <= t2)
        nodes = np.unique(self.state_node[ok])
        nodes = nodes[self.eq6[nodes] <= t3]
        if self.scored is not None:
            nodes = np.union1d(nodes, np.flatnonzero(scored_members(self.scored, t4)))
            return nodes[np.lexsort((self.scored[nodes], self.eq6[nodes]))]
        return nodes[np.argsort(self.eq6[nodes], kind="stable")]


@dataclass(frozen=True)
class GridResult:
    """``covered[q, i1, i2, i3]``: a gold node is in question ``q``'s set at ``(T1[i1], T2[i2], T3[i3])``;
    ``size``: the set size there."""

    covered: BoolArray
    size: npt.NDArray[np.int32]


class TableBatch:
    """Many :class:`QuestionTable` concatenated into flat arrays (fast subsets and grid evaluation)."""

    def __init__(self, qids: Sequence[str], state_q: IntArray, state_node: IntArray, prefix: FloatArray,
                 expand: FloatArray, collect: FloatArray, node_q: IntArray, node_ids: IntArray,
                 eq6: FloatArray, gold: BoolArray, eq6_items: FloatArray | None = None,
                 scored: FloatArray | None = None) -> None:
        self.qids = list(qids)
        self.state_q, self.state_node = state_q, state_node
        self.prefix, self.expand, self.collect = prefix, expand, collect
        self.node_q, self.node_ids, self.eq6, self.gold = node_q, node_ids, eq6, gold
        self.eq6_items = eq6_items
        self.scored = scored

    @property
    def num_questions(self) -> int:
        return len(self.qids)

    @classmethod
    def from_tables(cls, tables: Sequence[QuestionTable]) -> TableBatch:
        node_off = np.cumsum([0] + [t.node_ids.size for t in tables])
        def cat(xs: list[npt.NDArray[np.generic]], dtype: type) -> npt.NDArray[np.generic]:
            return np.concatenate(xs).astype(dtype) if xs else np.zeros(0, dtype=dtype)
        return cls(
            [t.qid for t in tables],
            cat([np.full(t.state_node.size, i) for i, t in enumerate(tables)], np.int64),  # type: ignore[arg-type]
            cat([t.state_node + node_off[i] for i, t in enumerate(tables)], np.int64),  # type: ignore[arg-type]
            cat([t.prefix for t in tables], np.float64),  # type: ignore[arg-type]
            cat([t.expand for t in tables], np.float64),  # type: ignore[arg-type]
            cat([t.collect for t in tables], np.float64),  # type: ignore[arg-type]
            cat([np.full(t.node_ids.size, i) for i, t in enumerate(tables)], np.int64),  # type: ignore[arg-type]
            cat([t.node_ids for t in tables], np.int64),  # type: ignore[arg-type]
            cat([t.eq6 for t in tables], np.float64),  # type: ignore[arg-type]
            cat([t.gold for t in tables], np.bool_),  # type: ignore[arg-type]
            cat([t.eq6_items for t in tables], np.float64)  # type: ignore[arg-type,misc]
            if tables and all(t.eq6_items is not None for t in tables) else None,
            cat([np.full(t.node_ids.size, np.inf) if t.scored is None else t.scored  # type: ignore[arg-type]
                 for t in tables], np.float64)
            if any(t.scored is not None for t in tables) else None,
        )

    def table(self, q: int) -> QuestionTable:
        """Question ``q`` as a :class:`QuestionTable` (node indices local to it)."""
        ns = np.flatnonzero(self.node_q == q)
        ss = np.flatnonzero(self.state_q == q)
        first = ns[0] if ns.size else 0
        return QuestionTable(self.qids[q], self.state_node[ss] - first, self.prefix[ss], self.expand[ss],
                             self.collect[ss], self.node_ids[ns], self.eq6[ns], self.gold[ns],
                             None if self.eq6_items is None else self.eq6_items[ns],
                             None if self.scored is None else self.scored[ns])

    def subset(self, questions: npt.ArrayLike) -> TableBatch:
        """The questions ``questions`` (indices), renumbered 0…k−1 in that order."""
        qs = np.asarray(questions, dtype=np.int64)
        remap = np.full(self.num_questions, -1, dtype=np.int64)
        remap[qs] = np.arange(qs.size)
        nkeep = np.flatnonzero(remap[self.node_q] >= 0)
        nkeep = nkeep[np.argsort(remap[self.node_q[nkeep]], kind="stable")]
        node_map = np.full(self.node_q.size, -1, dtype=np.int64)
        node_map[nkeep] = np.arange(nkeep.size)
        skeep = np.flatnonzero(remap[self.state_q] >= 0)
        skeep = skeep[np.argsort(remap[self.state_q[skeep]], kind="stable")]
        return TableBatch(
            [self.qids[i] for i in qs.tolist()], remap[self.state_q[skeep]], node_map[self.state_node[skeep]],
            self.prefix[skeep], self.expand[skeep], self.collect[skeep], remap[self.node_q[nkeep]],
            self.node_ids[nkeep], self.eq6[nkeep], self.gold[nkeep],
            None if self.eq6_items is None else self.eq6_items[nkeep],
            None if self.scored is None else self.scored[nkeep],
        )

    def rescored(self, kind: EvaluatorScore) -> TableBatch:
        """This batch with its Eq. 6 scores of ``kind`` (see :data:`EVALUATOR_SCORES`)."""
        if kind == "absolute":
            return self
        base = _base_scores(kind, self.eq6, self.eq6_items)
        if kind.endswith("relative"):
            base = relative_scores(base, self.node_q, self.num_questions)
        return self.with_eq6(base)

    def with_eq6(self, eq6: FloatArray) -> TableBatch:
        """This batch with ``eq6`` (one score per candidate node) in place of its Eq. 6 scores."""
        if eq6.shape != self.eq6.shape:
            raise ConfigError(f"with_eq6: {eq6.shape} scores for {self.eq6.shape} candidate nodes")
        return TableBatch(self.qids, self.state_q, self.state_node, self.prefix, self.expand, self.collect,
                          self.node_q, self.node_ids, eq6, self.gold, self.eq6_items, self.scored)

    def masked(self, keep: BoolArray) -> TableBatch:
        """This batch without the states of the nodes outside ``keep`` (per node): those nodes can no
        longer enter the path part of a set."""
        s = np.flatnonzero(np.asarray(keep, dtype=bool)[self.state_node])
        return TableBatch(self.qids, self.state_q[s], self.state_node[s], self.prefix[s], self.expand[s],
                          self.collect[s], self.node_q, self.node_ids, self.eq6, self.gold, self.eq6_items,
                          self.scored)

    def component_scores(self) -> FloatArray:
        """``(questions, 3)`` per-component scores (see :meth:`QuestionTable.component_scores`)."""
        n = self.num_questions
        out = np.full((n, 3), np.inf)
        g = self.gold[self.state_node]
        np.minimum.at(out[:, 0], self.state_q[g], self.expand[g])
        np.minimum.at(out[:, 1], self.state_q[g], self.collect[g])
        np.minimum.at(out[:, 2], self.node_q[self.gold], self.eq6[self.gold])
        return out

    def scored_component(self) -> FloatArray:
        """Per question, the smallest ``scored`` non-conformity of a gold node (``+∞``: none)."""
        out = np.full(self.num_questions, np.inf)
        if self.scored is not None:
            np.minimum.at(out, self.node_q[self.gold], self.scored[self.gold])
        return out

    def usable_scores(self, kinds: Sequence[EvaluatorScore] = EVALUATOR_SCORES) -> tuple[EvaluatorScore, ...]:
        """The evaluator scores of ``kinds`` these tables can give (item-level ones need ``eq6_items``)."""
        return tuple(k for k in kinds if self.eq6_items is not None or not k.startswith("items"))

    def gold_retrievable(self) -> BoolArray:
        """Questions with at least one gold answer among their candidate nodes."""
        out = np.zeros(self.num_questions, dtype=bool)
        out[self.node_q[self.gold]] = True
        return out

    def grid(self, T1: npt.ArrayLike, T2: npt.ArrayLike, T3: npt.ArrayLike, sizes: bool = True) -> GridResult:
        """Coverage and set size of every question at every grid point; each ``T`` ascending. With
        ``sizes=False`` only coverage is computed (from the gold nodes alone, much faster) and ``size`` is
        an empty array."""
        t1, t2, t3 = (np.asarray(t, dtype=np.float64) for t in (T1, T2, T3))
        for t in (t1, t2, t3):
            if t.ndim != 1 or t.size == 0 or (t[1:] < t[:-1]).any():
                raise ConfigError("grid thresholds must be non-empty ascending 1-d arrays")
        n1, n2, n3, nq = t1.size, t2.size, t3.size, self.num_questions
        # first grid index at which a score passes (score ≤ T[i] ⇔ i ≥ searchsorted(T, score, 'left'))
        i1 = np.searchsorted(t1, self.prefix, side="left")
        i2 = np.searchsorted(t2, self.collect, side="left")
        keep = (i1 < n1) & (i2 < n2)
        if max(n1, n2, n3) >= np.iinfo(np.int16).max:
            raise ConfigError("grid: at most 32,766 thresholds per component")
        i3 = np.searchsorted(t3, self.eq6, side="left")
        # only nodes that can enter some set matter: compact them
        used = np.zeros(self.node_q.size, dtype=bool)
        used[self.state_node[keep]] = True
        used &= i3 < n3
        if not sizes:
            used &= self.gold
        nodes = np.flatnonzero(used)
        compact = np.full(self.node_q.size, -1, dtype=np.int64)
        compact[nodes] = np.arange(nodes.size)
        sk = keep & used[self.state_node]
        first = np.full(nodes.size * n1, n2, dtype=np.int16)
        np.minimum.at(first, compact[self.state_node[sk]] * n1 + i1[sk], i2[sk].astype(np.int16))
        first = np.minimum.accumulate(first.reshape(nodes.size, n1), axis=1)  # in C at (i1, i2 ≥ first)
        local, j1 = np.nonzero(first < n2)
        node = nodes[local]
        flat = ((self.node_q[node] * n1 + j1) * n2 + first[local, j1]) * n3 + i3[node]
        total = nq * n1 * n2 * n3
        gold = np.bincount(flat[self.gold[node]], minlength=total).astype(np.int32).reshape(nq, n1, n2, n3)
        if sizes:
            size = np.bincount(flat, minlength=total).astype(np.int32).reshape(nq, n1, n2, n3)
            np.cumsum(size, axis=2, out=size)
            np.cumsum(size, axis=3, out=size)
        else:
            size = np.zeros((0, n1, n2, n3), dtype=np.int32)
        np.cumsum(gold, axis=2, out=gold)
        np.cumsum(gold, axis=3, out=gold)
        return GridResult(gold > 0, size)

    # ------------------------------------------------------------------ a second, scored retriever
    def with_scored(self, question: npt.ArrayLike, nonconformity: npt.ArrayLike, gold: npt.ArrayLike,
                    node_ids: npt.ArrayLike | None = None) -> TableBatch:
        """This batch plus a scored retriever's candidates: ``question[i]`` (index), ``nonconformity[i]``
        (e.g. ``1 − p``) and ``gold[i]`` per candidate. With ``node_ids`` a candidate that is already a
        node of its question gets the score (the smaller one if listed twice); the others, and all of
        them without ``node_ids`` (ids from another id space), become new nodes that only the scored
        part of the set can reach (no states, Eq. 6 = +∞; ``node_ids`` −1 when unknown)."""
        q = np.asarray(question, dtype=np.int64).ravel()
        nc = np.asarray(nonconformity, dtype=np.float64).ravel()
        g = np.asarray(gold, dtype=bool).ravel()
        ids = np.full(q.size, -1, dtype=np.int64) if node_ids is None else np.asarray(node_ids, np.int64)
        if not (nc.size == g.size == ids.size == q.size):
            raise ConfigError("with_scored: question, nonconformity, gold and node_ids differ in length")
        if q.size and (q.min() < 0 or q.max() >= self.num_questions):
            raise ConfigError(f"with_scored: question index outside 0..{self.num_questions - 1}")
        if np.isnan(nc).any():
            raise ConfigError("with_scored: a non-conformity score is NaN")
        scored = np.full(self.node_q.size, np.inf) if self.scored is None else self.scored.copy()
        new = np.ones(q.size, dtype=bool)
        if node_ids is not None and self.node_q.size and q.size:
            # one int64 key per (question, node id); look the candidates up among the sorted node keys
            low = min(int(self.node_ids.min()), int(ids.min()))
            span = max(int(self.node_ids.max()), int(ids.max())) - low + 1
            keys = self.node_q * span + (self.node_ids - low)
            order_k = np.argsort(keys, kind="stable")
            want = q * span + (ids - low)
            at = np.minimum(np.searchsorted(keys[order_k], want), keys.size - 1)
            found = keys[order_k[at]] == want
            new = ~found
            np.minimum.at(scored, order_k[at[found]], nc[found])
        # merge the new nodes in, keeping nodes grouped by question (``table``/``subset`` rely on it)
        node_q = np.concatenate([self.node_q, q[new]])
        order = np.argsort(node_q, kind="stable")
        position = np.empty(order.size, dtype=np.int64)
        position[order] = np.arange(order.size)
        k = int(new.sum())

        def grow(old: npt.NDArray[np.generic], extra: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]:
            return np.concatenate([old, extra])[order]

        inf = np.full(k, np.inf)
        return TableBatch(
            self.qids, self.state_q, position[self.state_node], self.prefix, self.expand, self.collect,
            node_q[order], grow(self.node_ids, ids[new]), grow(self.eq6, inf), grow(self.gold, g[new]),  # type: ignore[arg-type]
            None if self.eq6_items is None else grow(self.eq6_items, inf),  # type: ignore[arg-type]
            grow(scored, nc[new]),  # type: ignore[arg-type]
        )

    def scored_grid(self, T4: npt.ArrayLike) -> GridResult:
        """Coverage and size of the scored part alone, ``{node : scored ≤ T4[l]}``, shaped ``(questions,
        |T4|)`` (all empty when the batch has no scored retriever)."""
        t4 = np.asarray(T4, dtype=np.float64)
        if t4.ndim != 1 or t4.size == 0 or (t4[1:] < t4[:-1]).any():
            raise ConfigError("scored thresholds must be a non-empty ascending 1-d array")
        nq, n4 = self.num_questions, t4.size
        if self.scored is None:
            return GridResult(np.zeros((nq, n4), dtype=bool), np.zeros((nq, n4), dtype=np.int32))
        i4 = np.searchsorted(t4, self.scored, side="left")
        ok = (i4 < n4) & scored_members(self.scored, np.inf)
        flat = self.node_q[ok] * n4 + i4[ok]
        size = np.cumsum(np.bincount(flat, minlength=nq * n4).reshape(nq, n4), axis=1)
        gold = np.cumsum(np.bincount(flat[self.gold[ok]], minlength=nq * n4).reshape(nq, n4), axis=1)
        return GridResult(gold > 0, size.astype(np.int32))

    # ------------------------------------------------------------------ persistence
    def save(self, path: str | Path) -> Path:
        arrays: dict[str, npt.NDArray[np.generic]] = {
            "qids": np.asarray(self.qids, dtype=str), "state_q": self.state_q, "state_node": self.state_node,
            "prefix": self.prefix, "expand": self.expand, "collect": self.collect, "node_q": self.node_q,
            "node_ids": self.node_ids, "eq6": self.eq6, "gold": self.gold}
        for name in ("eq6_items", "scored"):
            if (value := getattr(self, name)) is not None:
                arrays[name] = value
        return savez_atomic(path, arrays)

    @classmethod
    def load(cls, path: str | Path) -> TableBatch:
        path = Path(path)
        try:
            with np.load(path, allow_pickle=False) as z:
                return cls([str(x) for x in z["qids"]], z["state_q"], z["state_node"], z["prefix"],
                           z["expand"], z["collect"], z["node_q"], z["node_ids"], z["eq6"], z["gold"],
                           z["eq6_items"] if "eq6_items" in z.files else None,
                           z["scored"] if "scored" in z.files else None)
        except (OSError, KeyError, ValueError) as exc:
            raise DataError(f"cannot read UAG tables: {exc}", path) from exc


def _base_scores(kind: str, eq6: FloatArray, eq6_items: FloatArray | None) -> FloatArray:
    """The Eq. 6 array that score ``kind`` starts from."""
    if kind not in EVALUATOR_SCORES:
        if kind == "learned":
            raise ConfigError("evaluator score 'learned' is fitted on a tuning split: UAG.fit learns it")
        raise ConfigError(f"unknown evaluator score {kind!r}; choose from {', '.join(EVALUATOR_SCORES)}")
    if not kind.startswith("items"):
        return eq6
    if eq6_items is None:
        raise ConfigError(f"evaluator score {kind!r} needs tables built with item-level Eq. 6 scores")
    return eq6_items
