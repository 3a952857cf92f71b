"""Evidence ranked to the question: paths from question concepts to each choice, scored, cut to a budget;
properties over random subgraphs, and a hand-checked case."""

from __future__ import annotations

import math

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgwise.errors import ConfigError
from kgwise.extract.evidence import (
    EVERY_PATH,
    EvidenceBudget,
    RankedEvidence,
    RankedPath,
    open_candidates,
    rank_evidence,
)
from kgwise.types import Path, Subgraph


def test_hand_checked_case() -> None:
    # q=0 -r0-> 1 -r0-> 2 (choice 0); q=0 <-r1- 3 (choice 1, a direct edge taken backwards); hub 9
    edges = ((0, 0, 1), (1, 0, 2), (3, 1, 0), (0, 2, 9), (9, 2, 4), *((9, 3, k) for k in range(10, 20)))
    sub = Subgraph(nodes=tuple(range(20)), edges=edges)
    ev = rank_evidence(sub, [0], [[2], [3], [4], [7]])
    ends = {p.choice: p.path.nodes for p in ev.paths}
    assert ends == {0: (0, 1, 2), 1: (0, 3), 2: (0, 9, 4)}  # choice 3 (node 7) is not in the subgraph
    direct = ev.support(1)[0]
    # a direct edge scores 1 less its question concept's hub penalty (node 0: degree 3)
    assert direct.path.inverse == (True,) and direct.score == pytest.approx(1 - 0.05 * math.log(4))
    # the two-hop path through the hub 9 (degree 12) scores below the one through node 1 (degree 2)
    assert ev.support(0)[0].score > ev.support(2)[0].score
    assert ev.paths[0].choice == 1  # best first
    small = rank_evidence(sub, [0], [[2], [3], [4]], EvidenceBudget(max_nodes=3))
    assert [p.choice for p in small.paths] == [1] and small.found == 3
    with pytest.raises(ConfigError):
        EvidenceBudget(max_nodes=1)


def test_every_question_concept_gets_its_own_path() -> None:
    # a case names a hub finding (node 0, "pain": 10 more edges) and a rare one (node 1); both touch the
    # choice (node 5); the search from all concepts at once kept only the path it met first
    edges = ((0, 0, 5), (1, 1, 5), (1, 0, 2), *((0, 2, k) for k in range(10, 20)))
    sub = Subgraph(nodes=(0, 1, 2, 5, *range(10, 20)), edges=edges)
    ev = rank_evidence(sub, [0, 1], [[5], [2]])
    assert [p.path.nodes for p in ev.support(0)] == [(1, 5), (0, 5)]  # the rare concept's path first
    assert [p.path.nodes for p in ev.support(1)] == [(1, 2), (0, 5, 1, 2)]


@st.composite
def _subgraphs(draw: st.DrawFn) -> tuple[Subgraph, list[int], list[list[int]]]:
    n = draw(st.integers(2, 30))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, 3), st.integers(0, n - 1)),
                          max_size=80))
    q = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3))
    choices = draw(st.lists(st.lists(st.integers(0, n - 1), min_size=1, max_size=3), min_size=1, max_size=5))
    return Subgraph(nodes=tuple(range(n)), edges=tuple(edges)), q, choices


@settings(max_examples=150, deadline=None)
@given(_subgraphs(), st.integers(2, 30), st.integers(1, 4))
def test_properties(case: tuple[Subgraph, list[int], list[list[int]]], max_nodes: int, hops: int) -> None:
    sub, q, choices = case
    budget = EvidenceBudget(max_nodes=max_nodes, max_hops=hops)
    ev = rank_evidence(sub, q, choices, budget)
    edges = set(sub.edges)
    assert len(ev.nodes) <= max_nodes and len(set(ev.nodes)) == len(ev.nodes)
    assert set(ev.nodes) == {v for p in ev.paths for v in p.path.nodes}
    for rp in ev.paths:
        assert rp.path.nodes[0] in q and rp.path.nodes[-1] in choices[rp.choice]
        assert 1 <= len(rp.path) <= hops and all(e in edges for e in rp.path.edges())
    for i in range(len(choices)):
        assert all(p.choice == i for p in ev.support(i))
    assert len(ev.paths) <= ev.found
    assert rank_evidence(sub, q, choices, budget) == ev  # deterministic
    # with no node budget to speak of, every (question concept, choice concept) pair joined within the
    # hops (the edges taken both ways; networkx's shortest paths as the reference) gets a path as short
    # as can be
    full = rank_evidence(sub, q, choices, EvidenceBudget(max_nodes=10_000, max_hops=hops))
    g = nx.Graph()
    g.add_edges_from((h, t) for h, _, t in sub.edges if h != t)
    dist = {s: nx.single_source_shortest_path_length(g, s, cutoff=hops) if s in g else {} for s in q}
    pairs = {(s, i, v) for s in q for i, c in enumerate(choices) for v in c if dist[s].get(v, 0) >= 1}
    assert {(p.path.nodes[0], p.choice, p.path.nodes[-1]) for p in full.paths} == pairs
    for rp in full.paths:
        assert isinstance(rp, RankedPath) and len(rp.path) == dist[rp.path.nodes[0]][rp.path.nodes[-1]]


def test_subgraph_paths_are_kept_when_valid() -> None:
    sub = Subgraph(nodes=(0, 1, 2, 5), edges=((0, 0, 1), (1, 0, 2), (0, 1, 5), (5, 1, 2)),
                   paths=(Path((0, 5, 2), (1, 1)), Path((0, 7, 2), (1, 1))))
    ev = rank_evidence(sub, [0], [[2]])
    # (0, 7, 2) uses no edge of the subgraph
    assert {p.path.nodes for p in ev.paths} == {(0, 1, 2), (0, 5, 2)}


@settings(max_examples=150, deadline=None)
@given(_subgraphs(), st.integers(2, 12), st.integers(0, 4))
def test_supporting_keeps_the_budget_and_the_order_and_ends_at_its_choices(
        case: tuple[Subgraph, list[int], list[list[int]]], max_nodes: int, pick: int
) -> None:
    sub, q, choices = case
    every = rank_evidence(sub, q, choices, EVERY_PATH)
    cut = every.supporting(*range(len(choices)), budget=EvidenceBudget(max_nodes=max_nodes))
    assert len(cut.nodes) <= max_nodes
    order = list(every.paths)
    assert [order.index(rp) for rp in cut.paths] == sorted(order.index(rp) for rp in cut.paths)
    assert cut.found == every.found
    # a path left out would have passed the node budget when its turn came
    seen: set[int] = set()
    for rp in order:
        if rp in cut.paths:
            seen |= set(rp.path.nodes)
        else:
            assert len(seen | set(rp.path.nodes)) > max_nodes
    # a ranking cut to every path's budget is the ranking itself
    assert every.supporting(*range(len(choices)), budget=EVERY_PATH) == every
    shown = cut.as_subgraph(q, choices)
    assert set(shown.edges) <= set(sub.edges) and shown.paths == tuple(rp.path for rp in cut.paths)
    assert set(shown.nodes) == {v for rp in cut.paths for v in rp.path.nodes}
    choice = pick % len(choices)
    backing = every.supporting(choice)
    assert all(rp.choice == choice and rp.path.nodes[-1] in choices[choice] for rp in backing.paths)
    assert len(backing.nodes) <= EvidenceBudget().max_nodes
    assert set(backing.paths) <= set(every.support(choice))
    assert every.supporting() == RankedEvidence((), (), every.found)


def test_open_questions_rank_paths_to_every_other_node() -> None:
    sub = Subgraph(nodes=(0, 1, 2), edges=((0, 0, 1), (1, 0, 2), (5, 1, 0)), question_nodes=(0,))
    candidates = open_candidates(sub, sub.question_nodes)
    assert candidates == ((1,), (2,), (5,))
    ev = rank_evidence(sub, [0], candidates, EVERY_PATH)
    assert {rp.path.nodes for rp in ev.paths} == {(0, 1), (0, 1, 2), (0, 5)}
    assert [len(rp.path) for rp in ev.paths] == [1, 1, 2]  # the direct facts first
