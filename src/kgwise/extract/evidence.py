"""Evidence ranked to the question: the paths of an extracted subgraph that join a question concept to a
choice's concept, scored and cut to a budget, so what a model reads and a person sees is the knowledge
that bears on the choices, not the whole P_sub.

:func:`rank_evidence` finds, over the subgraph's edges taken both ways, the shortest path (at most
``max_hops``) from each question concept to each concept of each choice — and keeps the subgraph's own
paths (P_sub's, P_RL's) that do the same. Each question concept gets its own path: a MedQA case links 6.5
DDB concepts on average, and the one a single search from all of them meets first ("pain", "male") need
not be the finding that bears on a choice (on 100 MedQA test questions the paths found per question go
from 7.7 to 13.8: docs/linking.md, "Ranked evidence"). A path scores ``1 / hops``, less a hub penalty: its
question concept and each node inside it cost ``hub_penalty · log(1 + degree)`` in the subgraph (a path
from or through "person", "thing", "pain" explains little), so a direct edge from a rare concept scores
about 1. Paths are then taken best first, one choice at a time (each choice's best path before any
choice's second: the model should see the case for every choice), while the distinct nodes stay within
``max_nodes`` (25 by default, what a person reads at a glance). ``support(i)`` of the result is the kept
paths that end at choice ``i`` — what an answer's ``support`` lists.

:meth:`RankedEvidence.supporting` cuts an already ranked list to the paths of some choices within a node
budget (the order is kept), so one ranking serves the prompt and the page;
:meth:`RankedEvidence.as_subgraph` is the kept paths as a :class:`~kgwise.types.Subgraph` a format
renders. An open question has no choices:
:func:`open_candidates` makes every other node of its subgraph a candidate answer of its own.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from kgwise.errors import ConfigError
from kgwise.types import Path, Subgraph

__all__ = ["EVERY_PATH", "EvidenceBudget", "RankedEvidence", "RankedPath", "open_candidates", "rank_evidence"]


@dataclass(frozen=True, slots=True)
class EvidenceBudget:
    """How much evidence is kept: ``max_nodes`` distinct nodes (the page's default 25), ``max_hops`` per
    path, and the hub penalty per inner node (``hub_penalty · log(1 + degree)``)."""

    max_nodes: int = 25
    max_hops: int = 3
    hub_penalty: float = 0.05

    def __post_init__(self) -> None:
        if self.max_nodes < 2 or self.max_hops < 1:
            raise ConfigError("EvidenceBudget: max_nodes must be ≥ 2, max_hops ≥ 1")
        if self.hub_penalty < 0:
            raise ConfigError("EvidenceBudget: hub_penalty must be ≥ 0")


EVERY_PATH = EvidenceBudget(max_nodes=1_000_000)
"""The ranking before any cut: every path found within the hops, best first."""


@dataclass(frozen=True, slots=True)
class RankedPath:
    """A path from a question concept to a concept of choice ``choice``, with its ``score``."""

    path: Path
    choice: int
    score: float


@dataclass(frozen=True, slots=True)
class RankedEvidence:
    """The kept paths, best first; ``nodes``: their distinct nodes in first-seen order; ``found``: the
    paths found before the budget cut."""

    paths: tuple[RankedPath, ...]
    nodes: tuple[int, ...]
    found: int

    def support(self, choice: int) -> tuple[RankedPath, ...]:
        """The kept paths that end at choice ``choice``."""
        return tuple(p for p in self.paths if p.choice == choice)

    def supporting(self, *choices: int, budget: EvidenceBudget | None = None) -> RankedEvidence:
        """The kept paths that end at any of ``choices``, cut to ``budget`` (default: 25 nodes, what a
        page shows)."""
        wanted = set(choices)
        return _cut([p for p in self.paths if p.choice in wanted], budget or EvidenceBudget(), self.found)

    def as_subgraph(self, question_nodes: Sequence[int] = (), choice_nodes: Sequence[Sequence[int]] = ()
                    ) -> Subgraph:
        """The kept paths as a subgraph: their nodes, their distinct stored edges, the paths themselves."""
        edges = dict.fromkeys(e for rp in self.paths for e in rp.path.edges())
        return Subgraph(self.nodes, tuple(edges), tuple(question_nodes),
                        tuple(tuple(c) for c in choice_nodes), tuple(rp.path for rp in self.paths))


def _adjacency(subgraph: Subgraph) -> dict[int, list[tuple[int, int, bool]]]:
    """node → ``(neighbour, relation, inverse)`` over the edges taken both ways, in a fixed order."""
    adj: dict[int, list[tuple[int, int, bool]]] = {}
    for h, r, t in sorted(set(subgraph.edges)):
        adj.setdefault(h, []).append((t, r, False))
        adj.setdefault(t, []).append((h, r, True))
    return adj


def _shortest_paths(adj: dict[int, list[tuple[int, int, bool]]], sources: Sequence[int], max_hops: int
                    ) -> dict[int, Path]:
    """The first-found shortest path (≤ ``max_hops``) from any of ``sources`` to every node it reaches."""
    parent: dict[int, tuple[int, int, bool] | None] = {}
    depth: dict[int, int] = {}
    queue: deque[int] = deque()
    for s in dict.fromkeys(sources):
        if s in adj:
            parent[s], depth[s] = None, 0
            queue.append(s)
    while queue:
        v = queue.popleft()
        if depth[v] == max_hops:
            continue
        for u, r, inv in adj[v]:
            if u not in parent:
                parent[u], depth[u] = (v, r, inv), depth[v] + 1
                queue.append(u)
    out: dict[int, Path] = {}
    for v in parent:
        nodes, rels, invs = [v], [], []
        step = parent[v]
        while step is not None:
            prev, r, inv = step
            nodes.append(prev)
            rels.append(r)
            invs.append(inv)
            step = parent[prev]
        if rels:
            out[v] = Path(tuple(reversed(nodes)), tuple(reversed(rels)), tuple(reversed(invs)))
    return out


def rank_evidence(subgraph: Subgraph, question_nodes: Sequence[int], choice_nodes: Sequence[Sequence[int]],
                  budget: EvidenceBudget | None = None) -> RankedEvidence:
    """The paths of ``subgraph`` joining ``question_nodes`` to each choice's ``choice_nodes``, ranked and
    cut to ``budget`` (see the module docstring)."""
    budget = budget or EvidenceBudget()
    adj = _adjacency(subgraph)
    degree = {v: len(n) for v, n in adj.items()}
    questions = set(question_nodes)
    reach = [_shortest_paths(adj, [q], budget.max_hops) for q in dict.fromkeys(question_nodes)]
    edges = set(subgraph.edges)

    def score(path: Path) -> float:
        costly = path.nodes[:-1]  # the question concept and the inner nodes
        return 1.0 / len(path) - budget.hub_penalty * sum(math.log1p(degree.get(v, 0)) for v in costly)

    per_choice: list[dict[tuple[int, ...], RankedPath]] = []
    for i, nodes in enumerate(choice_nodes):
        found: dict[tuple[int, ...], RankedPath] = {}
        for c in dict.fromkeys(nodes):
            for from_q in reach:
                p = from_q.get(c)
                if p is not None:
                    found.setdefault(p.nodes, RankedPath(p, i, score(p)))
        for p in subgraph.paths:
            if (p.nodes[0] in questions and p.nodes[-1] in nodes and 1 <= len(p) <= budget.max_hops
                    and all(e in edges for e in p.edges())):
                found.setdefault(p.nodes, RankedPath(p, i, score(p)))
        per_choice.append(found)
    queues = [sorted(f.values(), key=lambda x: (-x.score, x.path.nodes)) for f in per_choice]
    order: list[RankedPath] = []
    for depth in range(max((len(q) for q in queues), default=0)):
        order += sorted((q[depth] for q in queues if depth < len(q)), key=lambda x: (-x.score, x.choice))
    return _cut(order, budget, len(order))


def open_candidates(subgraph: Subgraph, question_nodes: Sequence[int]) -> tuple[tuple[int], ...]:
    """An open question's candidate answers for :func:`rank_evidence`: every node of ``subgraph`` (its
    nodes, then its edges' ends, in first-seen order) that is not a question concept, each on its own."""
    questions = set(question_nodes)
    seen = dict.fromkeys([*subgraph.nodes, *(v for h, _, t in subgraph.edges for v in (h, t))])
    return tuple((v,) for v in seen if v not in questions)


def _cut(order: Sequence[RankedPath], budget: EvidenceBudget, found: int) -> RankedEvidence:
    """``order``'s paths taken in turn while the distinct nodes stay within ``budget``."""
    kept: list[RankedPath] = []
    seen: dict[int, None] = {}
    for rp in order:
        new = [v for v in dict.fromkeys(rp.path.nodes) if v not in seen]
        if len(seen) + len(new) > budget.max_nodes:
            continue
        kept.append(rp)
        seen.update(dict.fromkeys(new))
    return RankedEvidence(tuple(kept), tuple(seen), found)
