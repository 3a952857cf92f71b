"""The retriever's BFS (Algorithm 1) returns what a brute-force walk enumeration returns under the same
thresholds, and the threshold-free table selects the same sets."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgwise.conformal.retriever import RetrieverConfig, UQRetriever
from kgwise.conformal.scores import S1, ScoreConfig, join_texts, verbalise_relation
from kgwise.embed import Encoder
from kgwise.kg import CSRGraph


def brute_force(kg: CSRGraph, scorer: S1, question: str, topics: Sequence[int], t1: float, t2: float,
                cfg: RetrieverConfig) -> set[int]:
    """Every walk up to max_hops, scored hop by hop, no dedup, no batching."""

    def rel_text(r: int, inv: bool) -> str:
        return verbalise_relation(kg.relation_name(r), inv)

    def steps(v: int) -> list[tuple[int, bool, int]]:
        out: list[tuple[int, bool, int]] = []
        if cfg.direction in ("out", "both"):
            out += [(r, False, t) for r, t in zip(*(a.tolist() for a in kg.out_edges(v)), strict=True)]
        if cfg.direction in ("in", "both"):
            out += [(r, True, h) for r, h in zip(*(a.tolist() for a in kg.in_edges(v)), strict=True)]
        return out

    found: set[int] = set()

    def walk(v: int, rels: list[str], ok_prefix: bool) -> None:
        if len(rels) == cfg.max_hops:
            return
        for r, inv, s in steps(v):
            rt = rel_text(r, inv)
            e = float(scorer.pairs([join_texts([question, *rels])], [rt])[0])
            c = float(scorer.pairs([question], [join_texts([*rels, rt])])[0])
            if ok_prefix and c <= t2 and not (cfg.exclude_topic and s in topics):
                found.add(s)
            if ok_prefix and e <= t1:
                walk(s, [*rels, rt], True)

    for t in dict.fromkeys(topics):
        walk(t, [], True)
    return found


@st.composite
def graphs(draw: st.DrawFn) -> tuple[CSRGraph, list[int]]:
    n = draw(st.integers(2, 9))
    k = draw(st.integers(1, 4))
    m = draw(st.integers(1, 25))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, k - 1), st.integers(0, n - 1)),
                          min_size=1, max_size=m))
    h, r, t = (list(x) for x in zip(*edges, strict=True))
    rels = [f"dom.type.rel_{j}" for j in range(k)]
    kg = CSRGraph.from_arrays([f"node {i}" for i in range(n)], rels, h, r, t)
    topics = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=2))
    return kg, topics


@settings(max_examples=150, deadline=None)
@given(graphs(), st.floats(-0.5, 2.5), st.floats(-0.5, 2.5), st.integers(1, 3),
       st.sampled_from(["out", "in", "both"]), st.booleans(), st.sampled_from(["cosine", "l1"]))
def test_bfs_matches_brute_force(encoder: Encoder, g: tuple[CSRGraph, list[int]], t1: float, t2: float,
                                 hops: int, direction: str, exclude: bool, metric: str) -> None:
    kg, topics = g
    cfg = RetrieverConfig(max_hops=hops, direction=direction, exclude_topic=exclude)  # type: ignore[arg-type]
    scorer = S1(encoder, ScoreConfig(metric=metric))  # type: ignore[arg-type]
    ret = UQRetriever(kg, scorer, cfg)
    q = "which node answers the question"
    expected = brute_force(kg, scorer, q, topics, t1, t2, cfg)
    assert set(ret.retrieve(q, topics, t1, t2).tolist()) == expected
    assert set(ret.paths(q, topics).candidates(t1, t2).tolist()) == expected


def test_scores_are_computed_once_per_relation_sequence(encoder: Encoder) -> None:
    class Counting:
        """Test double: counts the texts it is asked to encode."""

        dim = encoder.dim
        seen: list[str] = []  # noqa: RUF012

        def encode(self, texts: Sequence[str]) -> np.ndarray:
            self.seen.extend(texts)
            return encoder.encode(texts)

    # a star: topic 0 -a-> 1..30, each -b-> 31: 60 paths, 2 relation sequences
    heads = [0] * 30 + list(range(1, 31))
    tails = list(range(1, 31)) + [31] * 30
    kg = CSRGraph.from_arrays([str(i) for i in range(32)], ["a", "b"], heads, [0] * 30 + [1] * 30, tails)
    enc = Counting()
    paths = UQRetriever(kg, S1(enc)).paths("q", [0])
    assert paths.num_states == 31  # node 31 is one state: all 30 paths share the sequence (a, b)
    assert len(paths.seqs) == 2
    assert len(enc.seen) == 2 * 2 * 2  # per sequence: Eq. 4 pair + Eq. 5 pair
    nodes, rels = paths.path_of(int(np.flatnonzero(paths.node == 31)[0]))
    assert nodes[0] == 0 and nodes[-1] == 31 and len(rels) == 2


def test_path_dedup_keeps_distinct_relation_sequences(encoder: Encoder) -> None:
    kg = CSRGraph.from_triples([("a", "r", "b"), ("a", "s", "b"), ("b", "r", "c")])
    paths = UQRetriever(kg, S1(encoder)).paths("q", [kg.node("a")])
    # b via r, b via s, c via r.r, c via s.r
    assert sorted(len(s) for s in paths.seqs) == [1, 1, 2, 2]
    assert paths.num_states == 4


@pytest.mark.slow
def test_retriever_on_the_ddb_kg_with_minilm(data_dir: Path) -> None:
    """The same code on the biomedical DDB KG (MedQA's KG) with the real all-MiniLM-L6-v2 score."""
    from kgwise.kg.loaders import load_ddb

    kg = load_ddb(data_dir / "ddb")
    topic = kg.find("Hyperlipidemia")
    assert topic is not None
    cfg = RetrieverConfig(max_hops=2, direction="both")
    ret = UQRetriever(kg, S1(), cfg)
    q = "Which drug may treat hyperlipidemia?"
    paths = ret.paths(q, [topic])
    labels = {kg.label(int(n)).lower() for n in paths.candidate_nodes()}
    assert "simvastatin" in labels
    # the "may treat" relation scores closer to the question than an unrelated one
    seq_text = {i: " ".join(kg.relation_name(r) for r, _ in s) for i, s in enumerate(paths.seqs)}
    treat = [paths.collect[paths.relseq == i].min() for i, t in seq_text.items() if t == "may treat"]
    other = [paths.collect[paths.relseq == i].min() for i, t in seq_text.items() if t == "interacts with"]
    if treat and other:
        assert min(treat) < min(other)
    for t1, t2 in itertools.product(np.quantile(paths.expand, [0.2, 0.6, 1.0]),
                                    np.quantile(paths.collect, [0.1, 0.5, 1.0])):
        assert set(ret.retrieve(q, [topic], t1, t2).tolist()) == set(paths.candidates(t1, t2).tolist())
    tight = paths.candidates(float(np.quantile(paths.expand, 0.3)), float(np.quantile(paths.collect, 0.1)))
    assert 0 < tight.size < paths.candidate_nodes().size
