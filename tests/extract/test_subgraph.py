from __future__ import annotations

from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgwise.errors import ConfigError
from kgwise.eval.bench.nx_reference import NxSubgraphExtractor, to_networkx
from kgwise.extract import (
    CappedNeighbours,
    Extractor,
    LazyCappedNeighbours,
    SubgraphConfig,
    SubgraphExtractor,
)
from kgwise.kg import CSRGraph
from kgwise.kg.grounding import Grounding
from kgwise.types import Question, Subgraph

Edge = tuple[int, int, int]


# ---------------------------------------------------------------- brute force (plain Python, from the spec)
def _brute(n: int, edges: set[Edge], q: list[int], a: list[int], cfg: SubgraphConfig
           ) -> tuple[list[int], list[Edge], list[tuple[tuple[int, ...], tuple[int, ...], tuple[bool, ...]]]]:
    deg = [0] * n
    nbrs: list[set[int]] = [set() for _ in range(n)]
    for h, _, t in edges:
        deg[h] += 1
        deg[t] += 1
        if h != t:
            nbrs[h].add(t)
            nbrs[t].add(h)

    def cap(v: int) -> set[int]:
        return set(sorted(nbrs[v], key=lambda u: (deg[u], u))[: cfg.max_expand])

    seeds = q + a
    room = cfg.max_nodes - len(seeds)
    chosen = list(seeds)
    if seeds and room > 0:
        reach: dict[int, list[int]] = {}
        for i, s in enumerate(seeds):
            for x in cap(s):
                if x not in seeds:
                    reach.setdefault(x, []).append(i)
        keys = {}
        per_seed_rank: dict[int, int] = {}
        for i in range(len(seeds)):
            only_i = sorted((x for x, who in reach.items() if who == [i]), key=lambda x: (deg[x], x))
            for rank, x in enumerate(only_i):
                per_seed_rank[x] = rank
        for x, who in reach.items():
            nq = sum(1 for i in who if i < len(q))
            na = len(who) - nq
            if nq and na:
                keys[x] = (0, -len(who), deg[x], x)
            elif len(who) >= 2:
                keys[x] = (1, -len(who), deg[x], x)
            else:
                keys[x] = (2, per_seed_rank[x], who[0], x)
        ranked = sorted(reach, key=lambda x: keys[x])
        chosen += ranked[:room]
        room -= len(ranked[:room])
        frontier = ranked
        for _ in range(2, cfg.hops + 1):
            if room <= 0:
                break
            count: dict[int, int] = {}
            for y in frontier:
                for x in cap(y):
                    if x not in chosen:
                        count[x] = count.get(x, 0) + 1
            nxt = sorted(count, key=lambda x: (-count[x], deg[x], x))
            chosen += nxt[:room]
            room -= len(nxt[:room])
            frontier = nxt
    keep = set(chosen)
    sub = sorted(e for e in edges if e[0] in keep and e[2] in keep)
    rows: list[tuple[int, ...]] = []
    for qi, qn in enumerate(q):
        for ai, an in enumerate(a):
            mine: list[tuple[int, ...]] = []
            for h, r, t in sub:
                if (h, t) == (qn, an):
                    mine.append((qi, ai, 1, 0, -1, r, 0, -1, -1))
                if (t, h) == (qn, an):
                    mine.append((qi, ai, 1, 0, -1, r, 1, -1, -1))
            if cfg.max_path_hops == 2:
                arcs = [(h, r, 0, t) for h, r, t in sub] + [(t, r, 1, h) for h, r, t in sub]
                for s1, r1, i1, m in arcs:
                    if s1 != qn or m in (qn, an):
                        continue
                    for s2, r2, i2, d in arcs:
                        if s2 == m and d == an:
                            mine.append((qi, ai, 2, deg[m], m, r1, i1, r2, i2))
            rows += sorted(mine)[: cfg.max_paths_per_pair]
    paths: list[tuple[tuple[int, ...], tuple[int, ...], tuple[bool, ...]]] = []
    for qi, ai, length, _, m, r1, i1, r2, i2 in sorted(rows)[: cfg.max_paths]:
        if length == 1:
            paths.append(((q[qi], a[ai]), (r1,), (bool(i1),)))
        else:
            paths.append(((q[qi], m, a[ai]), (r1, r2), (bool(i1), bool(i2))))
    return chosen, sub, paths


@st.composite
def _cases(draw: st.DrawFn) -> tuple[int, set[Edge], Grounding, SubgraphConfig]:
    n = draw(st.integers(2, 25))
    k = draw(st.integers(1, 3))
    edges = set(draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, k - 1), st.integers(0, n - 1)),
                              min_size=1, max_size=70)))
    nodes = draw(st.permutations(range(n)))
    nq = draw(st.integers(0, min(3, n - 1)))
    q = nodes[:nq]
    rest = nodes[nq:]
    choices = []
    for _ in range(draw(st.integers(0, 3))):
        size = draw(st.integers(0, 2))
        choices.append(tuple(draw(st.lists(st.sampled_from(rest), max_size=size, unique=True))))
    cfg = SubgraphConfig(
        hops=draw(st.integers(1, 3)),
        max_nodes=draw(st.integers(1, 20)),
        max_expand=draw(st.integers(1, 6)),
        max_path_hops=draw(st.sampled_from([1, 2])),
        max_paths_per_pair=draw(st.integers(0, 4)),
        max_paths=draw(st.integers(0, 12)),
    )
    return n, edges, Grounding(tuple(q), tuple(choices)), cfg


def _graph(n: int, edges: set[Edge]) -> CSRGraph:
    k = max(r for _, r, _ in edges) + 1
    h, r, t = (np.array(x, dtype=np.int64) for x in zip(*sorted(edges), strict=True))
    return CSRGraph.from_arrays([f"n{i}" for i in range(n)], [f"r{j}" for j in range(k)], h, r, t)


_Q = Question("q", "a question")


@settings(max_examples=300, deadline=None)
@given(_cases())
def test_matches_brute_force_and_networkx(case: tuple[int, set[Edge], Grounding, SubgraphConfig]) -> None:
    n, edges, grounding, cfg = case
    g = _graph(n, edges)
    sg = SubgraphExtractor(g, cfg).extract(_Q, grounding)
    q = list(dict.fromkeys(grounding.question_nodes))
    a = [x for x in grounding.all_choice_nodes if x not in q]
    nodes, sub, paths = _brute(n, edges, q, a, cfg)
    assert list(sg.nodes) == nodes
    assert list(sg.edges) == sub
    assert [(p.nodes, p.relations, p.inverse) for p in sg.paths] == paths
    assert NxSubgraphExtractor(to_networkx(g), cfg).extract(_Q, grounding) == sg


@settings(max_examples=300, deadline=None)
@given(_cases())
def test_node_by_node_rule_gives_the_vectorised_rules_subgraph(
        case: tuple[int, set[Edge], Grounding, SubgraphConfig]) -> None:
    n, edges, grounding, cfg = case
    g = _graph(n, edges)
    lazy = LazyCappedNeighbours(g, cfg.max_expand)
    assert SubgraphExtractor(g, cfg, lazy).extract(_Q, grounding) == SubgraphExtractor(g, cfg).extract(
        _Q, grounding)
    vectorised = CappedNeighbours(g, cfg.max_expand)
    for v in range(n):
        np.testing.assert_array_equal(lazy.neighbours(v), vectorised.neighbours(v))


@settings(max_examples=200, deadline=None)
@given(_cases())
def test_subgraph_invariants(case: tuple[int, set[Edge], Grounding, SubgraphConfig]) -> None:
    n, edges, grounding, cfg = case
    g = _graph(n, edges)
    sg = SubgraphExtractor(g, cfg).extract(_Q, grounding)
    seeds = list(dict.fromkeys(grounding.question_nodes + grounding.all_choice_nodes))
    assert list(sg.nodes[: len(seeds)]) == seeds
    assert len(sg.nodes) == len(set(sg.nodes)) <= max(cfg.max_nodes, len(seeds))
    keep = set(sg.nodes)
    assert set(sg.edges) == {e for e in edges if e[0] in keep and e[2] in keep}
    assert len(sg.paths) <= cfg.max_paths
    for p in sg.paths:
        assert p.nodes[0] in grounding.question_nodes and p.nodes[-1] in grounding.all_choice_nodes
        assert len(p) <= cfg.max_path_hops
        assert all(e in set(sg.edges) for e in p.edges())
    # every node is within `hops` (undirected) of a seed
    adj: dict[int, set[int]] = {}
    for h, _, t in edges:
        adj.setdefault(h, set()).add(t)
        adj.setdefault(t, set()).add(h)
    dist = dict.fromkeys(seeds, 0)
    todo = deque(seeds)
    while todo:
        v = todo.popleft()
        for u in adj.get(v, ()):
            if u not in dist:
                dist[u] = dist[v] + 1
                todo.append(u)
    assert all(dist[v] <= cfg.hops for v in sg.nodes)


def test_example_bridges_and_paths() -> None:
    g = CSRGraph.from_triples([
        ("dog", "isa", "animal"), ("animal", "atlocation", "zoo"), ("dog", "atlocation", "house"),
        ("house", "partof", "town"), ("cat", "isa", "animal"), ("dog", "capableof", "bark"),
    ])
    dog, zoo, house, animal = (g.node(x) for x in ("dog", "zoo", "house", "animal"))
    ex = SubgraphExtractor(g, SubgraphConfig(max_nodes=4))
    assert isinstance(ex, Extractor)
    sg = ex.extract(_Q, Grounding((dog,), ((zoo,), (house,))))
    assert sg.nodes == (dog, zoo, house, animal)  # animal bridges dog and zoo
    readable = [[g.label(x) for x in p.nodes] for p in sg.paths]
    assert readable == [["dog", "animal", "zoo"], ["dog", "house"]]
    assert sg.paths[0].inverse == (False, False)


def test_hub_rule_keeps_lowest_degree_neighbours() -> None:
    triples = [("hub", "r", f"leaf{i}") for i in range(5)] + [("leaf3", "r", "x"), ("leaf4", "r", "y"),
                                                              ("leaf4", "r", "z")]
    g = CSRGraph.from_triples(triples)
    cap = CappedNeighbours(g, 3)
    assert cap.num_hubs == 1
    assert [g.label(x) for x in LazyCappedNeighbours(g, 3).neighbours(g.node("hub")).tolist()] == [
        "leaf0", "leaf1", "leaf2"]
    got = [g.label(x) for x in cap.neighbours(g.node("hub")).tolist()]
    assert got == ["leaf0", "leaf1", "leaf2"]
    assert [g.label(x) for x in cap.neighbours(g.node("leaf4")).tolist()] == ["y", "z", "hub"]


def test_empty_grounding_and_bad_config() -> None:
    g = CSRGraph.from_triples([("a", "r", "b")])
    sg = SubgraphExtractor(g).extract(_Q, Grounding())
    assert sg == Subgraph()
    with pytest.raises(ConfigError, match="hops"):
        SubgraphConfig(hops=0)
    with pytest.raises(ConfigError, match="max_path_hops"):
        SubgraphConfig(max_path_hops=3)
