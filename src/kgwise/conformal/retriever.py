"""UAG's UQ-aware candidate retriever (Eq. 4–5, Algorithm 1) over any :class:`KnowledgeGraph`.

A *state* is a node reached from a topic entity by a relation sequence ``r_0 … r_j`` (edges followed
forwards, or backwards when ``direction`` allows). From a queued state at ``v`` every edge ``(v, r_j, s)``
is scored twice:

* Eq. 4 (expand): ``S1(Q ‖ r_0 … r_{j−1}, r_j) ≤ t1`` puts ``s`` in the BFS queue;
* Eq. 5 (collect): ``S1(Q, r_0 ‖ … ‖ r_j) ≤ t2`` puts ``s`` in the candidate set.

Topic entities are always queued. A state is never expanded past ``max_hops``. The paper writes ``<``; we
use ``≤``, the prediction-set rule of §2 (Eq. 1), so a score equal to the threshold is kept (this matters
for exact name matches in Eq. 6, whose score is 0). Both scores depend only on the question and the
relation sequence, so they are computed once per distinct sequence, level by level, in batches.

:meth:`UQRetriever.retrieve` is Algorithm 1 for given thresholds; :meth:`UQRetriever.paths` enumerates
every state up to ``max_hops`` once, keeping its scores, so any thresholds can then be applied with
:meth:`QuestionPaths.candidates` without touching the KG or the encoder again (used by the LTT grid).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import numpy.typing as npt

from kgwise.conformal.scores import S1, join_texts, verbalise_relation
from kgwise.errors import ConfigError
from kgwise.kg.base import KnowledgeGraph

__all__ = ["QuestionPaths", "RelSeq", "RetrieverConfig", "UQRetriever"]

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]
RelSeq = tuple[tuple[int, bool], ...]
"""A relation sequence: ``(relation id, followed backwards)`` per hop."""


@dataclass(frozen=True, slots=True)
class RetrieverConfig:
    """``max_hops``: longest relation path (WebQSP: 2); ``direction``: which edges a hop may follow
    (``out`` = as stored, ``in`` = backwards, ``both``); ``exclude_topic``: never return a topic entity
    as a candidate; ``max_states``: safety cap on states per question (``ConfigError`` beyond it)."""

    max_hops: int = 2
    direction: Literal["out", "in", "both"] = "out"
    exclude_topic: bool = True
    max_states: int = 2_000_000

    def __post_init__(self) -> None:
        if self.max_hops < 1:
            raise ConfigError(f"max_hops must be ≥ 1, got {self.max_hops}")
        if self.direction not in ("out", "in", "both"):
            raise ConfigError(f"direction must be out, in or both, got {self.direction!r}")


@dataclass(frozen=True)
class QuestionPaths:
    """Every state up to ``max_hops`` from the topic entities with its scores (threshold-free).

    Per state ``i``: ``node[i]``; ``parent[i]`` (state index, ``−1`` at hop 1); ``topic[i]`` (start node);
    ``relseq[i]`` (index into ``seqs``); ``prefix[i]`` = max Eq. 4 score over the hops before the last
    (``−∞`` at hop 1: the topic entity is always queued), ``expand[i]`` = max Eq. 4 score over all hops,
    ``collect[i]`` = the Eq. 5 score. ``candidate[i]`` is false for states that may never be returned
    (topic entities when excluded).
    """

    node: IntArray
    parent: IntArray
    topic: IntArray
    relseq: IntArray
    prefix: FloatArray
    expand: FloatArray
    collect: FloatArray
    candidate: npt.NDArray[np.bool_]
    seqs: tuple[RelSeq, ...] = field(default=())

    @property
    def num_states(self) -> int:
        return int(self.node.size)

    def candidate_nodes(self) -> IntArray:
        """Sorted node ids that some threshold pair could return."""
        return np.unique(self.node[self.candidate])

    def candidates(self, t1: float, t2: float) -> IntArray:
        """Eq. 4–5 for thresholds ``(t1, t2)``: sorted ids of the nodes in the candidate set."""
        keep = self.candidate & (self.prefix <= t1) & (self.collect <= t2)
        return np.unique(self.node[keep])

    def path_of(self, state: int) -> tuple[list[int], list[tuple[int, bool]]]:
        """The node sequence (topic first) and relation sequence of one state."""
        nodes: list[int] = []
        i = state
        while i >= 0:
            nodes.append(int(self.node[i]))
            i = int(self.parent[i])
        nodes.append(int(self.topic[state]))
        nodes.reverse()
        return nodes, list(self.seqs[int(self.relseq[state])])


class UQRetriever:
    """Algorithm 1's traversal over ``kg`` with the score ``scorer`` (S1)."""

    def __init__(self, kg: KnowledgeGraph, scorer: S1, config: RetrieverConfig | None = None) -> None:
        self.kg = kg
        self.scorer = scorer
        self.config = config or RetrieverConfig()
        self._rel_text: dict[tuple[int, bool], str] = {}

    # ------------------------------------------------------------------ texts
    def relation_text(self, rel: tuple[int, bool]) -> str:
        text = self._rel_text.get(rel)
        if text is None:
            text = verbalise_relation(self.kg.relation_name(rel[0]), rel[1])
            self._rel_text[rel] = text
        return text

    def _edges(self, v: int) -> list[tuple[int, bool, int]]:
        out: list[tuple[int, bool, int]] = []
        if self.config.direction in ("out", "both"):
            rels, tails = self.kg.out_edges(v)
            out.extend((r, False, t) for r, t in zip(rels.tolist(), tails.tolist(), strict=True))
        if self.config.direction in ("in", "both"):
            rels, heads = self.kg.in_edges(v)
            out.extend((r, True, h) for r, h in zip(rels.tolist(), heads.tolist(), strict=True))
        return out

    def _score_seqs(self, question: str, seqs: Sequence[RelSeq]) -> tuple[FloatArray, FloatArray]:
        """Eq. 4 score of each sequence's last hop and Eq. 5 score of the whole sequence."""
        if not seqs:
            return np.zeros(0), np.zeros(0)
        texts = [[self.relation_text(r) for r in s] for s in seqs]
        e = self.scorer.pairs([join_texts([question, *t[:-1]]) for t in texts], [t[-1] for t in texts])
        c = self.scorer.pairs([question] * len(texts), [join_texts(t) for t in texts])
        return e.astype(np.float64), c.astype(np.float64)

    # ------------------------------------------------------------------ traversal
    def _walk(self, question: str, topics: Sequence[int], t1: float) -> QuestionPaths:
        """Level-synchronous BFS: expand a state when its running max Eq. 4 score is ≤ ``t1``."""
        if not question.strip():
            raise ConfigError("retriever: empty question text")
        starts = list(dict.fromkeys(int(t) for t in topics))
        topic_set = set(starts)
        seq_ids: dict[RelSeq, int] = {}
        seq_list: list[RelSeq] = []
        seq_e: list[float] = []
        seq_c: list[float] = []
        node: list[int] = []
        parent: list[int] = []
        topic: list[int] = []
        relseq: list[int] = []
        prefix: list[float] = []
        expand: list[float] = []
        # frontier: (state index or −1 for a topic, node, topic, sequence, running max Eq. 4 score)
        frontier: list[tuple[int, int, int, RelSeq, float]] = [(-1, t, t, (), -math.inf) for t in starts]
        seen: set[tuple[int, RelSeq]] = set()
        for _hop in range(self.config.max_hops):
            pending: list[tuple[int, int, int, RelSeq, float]] = []
            new_seqs: list[RelSeq] = []
            for st, v, top, seq, run in frontier:
                for r, inv, s in self._edges(v):
                    nseq = (*seq, (r, inv))
                    if (s, nseq) in seen:
                        continue
                    seen.add((s, nseq))
                    if nseq not in seq_ids:
                        seq_ids[nseq] = len(seq_list)
                        seq_list.append(nseq)
                        new_seqs.append(nseq)
                    pending.append((st, s, top, nseq, run))
            if len(seen) > self.config.max_states:
                raise ConfigError(f"retriever: more than {self.config.max_states} states for {question!r}; "
                                  "lower max_hops or raise max_states")
            e_new, c_new = self._score_seqs(question, new_seqs)
            seq_e.extend(e_new.tolist())
            seq_c.extend(c_new.tolist())
            frontier = []
            for st, s, top, nseq, run in pending:
                k = seq_ids[nseq]
                idx = len(node)
                node.append(s)
                parent.append(st)
                topic.append(top)
                relseq.append(k)
                prefix.append(run)
                full = max(run, seq_e[k])
                expand.append(full)
                if full <= t1:
                    frontier.append((idx, s, top, nseq, full))
            if not frontier:
                break
        nodes = np.asarray(node, dtype=np.int64)
        cand = np.ones(nodes.size, dtype=bool)
        if self.config.exclude_topic and nodes.size:
            cand &= ~np.isin(nodes, np.asarray(sorted(topic_set), dtype=np.int64))
        rs = np.asarray(relseq, dtype=np.int64)
        return QuestionPaths(
            node=nodes,
            parent=np.asarray(parent, dtype=np.int64),
            topic=np.asarray(topic, dtype=np.int64),
            relseq=rs,
            prefix=np.asarray(prefix, dtype=np.float64),
            expand=np.asarray(expand, dtype=np.float64),
            collect=np.asarray(seq_c, dtype=np.float64)[rs] if rs.size else np.zeros(0),
            candidate=cand,
            seqs=tuple(seq_list),
        )

    def paths(self, question: str, topics: Sequence[int]) -> QuestionPaths:
        """Every state up to ``max_hops`` with its Eq. 4–5 scores (no threshold applied)."""
        return self._walk(question, topics, math.inf)

    def retrieve(self, question: str, topics: Sequence[int], t1: float, t2: float) -> IntArray:
        """Algorithm 1 lines 1–15: the candidate set for thresholds ``t1`` (Eq. 4) and ``t2`` (Eq. 5)."""
        walked = self._walk(question, topics, t1)
        return walked.candidates(math.inf, t2)

    def topic_nodes(self, names: Sequence[str]) -> list[int]:
        """Node ids of topic entity names found in the KG (unknown names are skipped)."""
        found = (self.kg.find(n) for n in names if n)
        return [f for f in found if f is not None]
