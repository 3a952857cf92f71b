"""Knowledge formats F_t / F_s / F_g on real DDB and WordNet subgraphs, and the relation templates."""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgwise.errors import ConfigError
from kgwise.kg import CSRGraph, KnowledgeGraph
from kgwise.llm import Generation
from kgwise.render import (
    FormatConfig,
    GraphDescriptionFormat,
    SentenceFormat,
    TripleFormat,
    make_format,
    relation_phrase,
    select_edges,
)
from kgwise.render.formats import Rendered, says_nothing
from kgwise.render.templates import clean_label, mirror_phrase
from kgwise.types import Path as KGPath
from kgwise.types import Question, Subgraph, Usage


@cache
def _ddb(data: Path) -> CSRGraph:
    from kgwise.kg.loaders import load_ddb

    return load_ddb(data / "ddb")


@pytest.fixture(scope="module")
def ddb(data_dir: Path) -> CSRGraph:
    return _ddb(data_dir)


def _two_hop(kg: CSRGraph, name: str) -> Subgraph:
    """A real 2-hop chain a -r1-> b -r2-> c starting at node ``name``."""
    a = kg.node(name)
    rels, tails = kg.out_edges(a)
    for r1, b in zip(rels.tolist(), tails.tolist(), strict=True):
        r2s, cs = kg.out_edges(b)
        for r2, c in zip(r2s.tolist(), cs.tolist(), strict=True):
            if c != a:
                p = KGPath((a, b, c), (r1, r2))
                return Subgraph(nodes=(a, b, c), edges=tuple(p.edges()), question_nodes=(a,),
                                choice_nodes=((c,),), paths=(p,))
    raise AssertionError(f"no 2-hop chain from {name}")


def _first_with_chain(kg: CSRGraph) -> Subgraph:
    for v in range(kg.num_nodes):
        try:
            return _two_hop(kg, kg.label(v))
        except AssertionError:
            continue
    raise AssertionError("graph without 2-hop chains")


def test_relation_phrases_cover_conceptnet_wordnet_and_ddb() -> None:
    assert relation_phrase("AtLocation") == "is found at"
    assert relation_phrase("atlocation") == "is found at"
    assert relation_phrase("isa") == "is a kind of"
    assert relation_phrase("hypernym") == "is a kind of"
    assert relation_phrase("part_meronym") == "has the part"
    assert relation_phrase("may treat") == "may treat"
    assert relation_phrase("233") == "may treat"  # raw DDB code
    assert relation_phrase("interacts with") == "interacts with"
    assert relation_phrase("has_weird_link") == "has weird link"  # generic fallback
    assert clean_label("dog.n.01") == "dog" and clean_label("new_york") == "new york"


def test_triples_and_sentences_render_a_real_ddb_chain(ddb: CSRGraph) -> None:
    sub = _first_with_chain(ddb)
    a, b, c = sub.paths[0].nodes
    r1, r2 = sub.paths[0].relations
    t = TripleFormat().render(ddb, sub).text
    lines = t.splitlines()
    assert lines == [f"({ddb.label(a)}, {ddb.relation_name(r1)}, {ddb.label(b)})",
                     f"({ddb.label(b)}, {ddb.relation_name(r2)}, {ddb.label(c)})"]
    s = SentenceFormat().render(ddb, sub).text
    # one fluent sentence chaining both hops with the DDB relation templates
    assert s.startswith(ddb.label(a)[:1].upper())
    assert f"{relation_phrase(ddb.relation_name(r1))} {ddb.label(b)}, which " in s
    assert s.endswith(f"{relation_phrase(ddb.relation_name(r2))} {ddb.label(c)}.")


def test_inverse_hop_reads_as_its_own_clause(ddb: CSRGraph) -> None:
    sub = _first_with_chain(ddb)
    a, b, c = sub.paths[0].nodes
    r1, r2 = sub.paths[0].relations
    # walk c <- b (stored b -r2-> c, followed backwards) then b <- a
    p = KGPath((c, b, a), (r2, r1), (True, True))
    inv = Subgraph(nodes=(a, b, c), edges=tuple(p.edges()), question_nodes=(c,), choice_nodes=((a,),),
                   paths=(p,))
    s = SentenceFormat().render(ddb, inv).text
    assert ", and " in s and ddb.label(c) in s and ddb.label(a) in s


def test_verb_synsets_read_as_ways_of_doing() -> None:
    # WordNet: wolf.v.01 @ eat.v.01 and eat.v.01 ~ wolf.v.01 (troponymy), dog.n.01 @ canine.n.02
    kg = CSRGraph.from_arrays(["wolf.v.01", "eat.v.01", "dog.n.01", "canine.n.02"],
                              ["hypernym", "hyponym"], [0, 1, 2], [0, 1, 0], [1, 0, 3])
    assert relation_phrase("hypernym", verb=True) == "is a way to"
    sentences = [SentenceFormat().render(kg, Subgraph(edges=(e,))).text for e in kg_edges(kg)]
    assert sentences == ["Wolf is a way to eat.", "Eat has the more specific form wolf.",
                         "Dog is a kind of canine."]


def kg_edges(kg: CSRGraph) -> list[tuple[int, int, int]]:
    out = []
    for h in range(kg.num_nodes):
        rels, tails = kg.out_edges(h)
        out += [(h, int(r), int(t)) for r, t in zip(rels.tolist(), tails.tolist(), strict=True)]
    return out


def test_a_fact_stated_backwards_is_left_out() -> None:
    # WordNet stores both directions: dog @ canine and canine ~ dog; derivation is symmetric
    kg = CSRGraph.from_arrays(["dog.n.01", "canine.n.02", "marsh.n.01", "marshy.s.01", "cat.n.01"],
                              ["hypernym", "hyponym", "derivation", "part_meronym"],
                              [0, 1, 2, 3, 1, 0], [0, 1, 2, 2, 3, 3], [1, 0, 3, 2, 4, 1])
    edges = tuple(kg_edges(kg))
    sub = Subgraph(nodes=tuple(range(5)), edges=edges)
    kept = select_edges(sub, 9, kg)
    assert kept == [(0, 0, 1), (0, 3, 1), (1, 3, 4), (2, 2, 3)]  # canine ~ dog and marshy + marsh dropped
    assert mirror_phrase("hyponym") == "is a kind of" and mirror_phrase("derivation") == (
        "is derived from the same word as") and mirror_phrase("may treat") is None
    assert TripleFormat().render(kg, sub).text.count("marsh") == 2  # one line, not two
    assert len(select_edges(sub, 9)) == len(edges)  # without the graph: ids alone, nothing merged


def test_which_continues_only_from_the_words_a_clause_ends_with() -> None:
    # nuts -in_synset-> balmy.s.01 <-in_synset- buggy -derivation-> bug: after the inverse hop the
    # sentence ends with "balmy", so the hop from "buggy" must name its subject
    kg = CSRGraph.from_arrays(["nuts", "balmy.s.01", "buggy", "bug"], ["in_synset", "derivation"],
                              [0, 2, 2], [0, 0, 1], [1, 1, 3])
    p = KGPath((0, 1, 2, 3), (0, 0, 1), (False, True, False))
    sub = Subgraph(nodes=(0, 1, 2, 3), edges=tuple(p.edges()), question_nodes=(0,), choice_nodes=((3,),),
                   paths=(p,))
    assert SentenceFormat().render(kg, sub).text == (
        "Nuts is a word for balmy, and buggy is a word for balmy, and buggy is derived from the same word "
        "as bug.")


def test_formats_render_a_real_wordnet_p_sub_subgraph(data_dir: Path) -> None:
    from kgwise.datasets import load
    from kgwise.extract import SubgraphExtractor
    from kgwise.kg.grounding import Grounder
    from kgwise.kg.loaders import load_wordnet

    kg = load_wordnet(data_dir / "wordnet")
    q = load("obqa", "test", data_dir)[1]  # "There is most likely going to be fog around:"
    g = Grounder(kg).ground(q)
    sub = SubgraphExtractor(kg).extract(q, g)
    assert sub.edges
    cfg = FormatConfig(max_triples=5)
    t = TripleFormat(cfg).render(kg, sub, q).text
    s = SentenceFormat(cfg).render(kg, sub, q).text
    lines = t.splitlines()
    assert 1 <= len(lines) <= 5 and all(x.startswith("(") and x.endswith(")") for x in lines)
    assert ".n.0" not in t  # synset names are shown as words
    assert s and s[0].isupper() and s.endswith(".")
    # a lemma and its synset ("marsh in_synset marsh.n.01") read the same: such edges take no place
    assert any(says_nothing(kg, e) for e in sub.edges)
    for h, r, tail in (x[1:-1].split(", ") for x in lines):
        assert h.casefold() != tail.casefold(), (h, r, tail)
    assert not any(f"{w} is a word for {w.lower()}" in s for w in ("Marsh", "Tundra", "Desert"))


def test_sentences_pass_over_hops_that_say_nothing() -> None:
    # lemma "marsh" -in_synset-> synset marsh.n.01 -hypernym-> wetland.n.01 <-in_synset- lemma "wetland"
    kg = CSRGraph.from_arrays(["marsh", "marsh.n.01", "wetland.n.01", "wetland", "fog"],
                              ["in_synset", "hypernym", "related"], [0, 1, 3, 4], [0, 1, 0, 2], [1, 2, 2, 0])
    path = KGPath((0, 1, 2, 3), (0, 1, 0), (False, False, True))
    sub = Subgraph(nodes=(0, 1, 2, 3, 4), edges=(*path.edges(), (4, 2, 0)), question_nodes=(4,),
                   choice_nodes=((3,),), paths=(path,))
    assert SentenceFormat().render(kg, sub).text == "Marsh is a kind of wetland. Fog related marsh."
    assert TripleFormat().render(kg, sub).text == "(marsh, hypernym, wetland)\n(fog, related, marsh)"
    assert select_edges(sub, 1, kg) == [(1, 1, 2)] and len(select_edges(sub, 9)) == 4


class RecordingLLM:
    """Test double for the LLM protocol: records prompts, returns a fixed description."""

    name = "recording"

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def generate(self, prompt: str, *, max_tokens: int = 256, temperature: float = 0.0,
                 stop: Sequence[str] | None = None) -> Generation:
        self.prompts.append(prompt)
        return Generation("A central  node\nlinks things.", Usage(input_tokens=10, output_tokens=5, calls=1))


def test_graph_description_asks_the_llm_once_per_subgraph(ddb: CSRGraph) -> None:
    sub = _first_with_chain(ddb)
    llm = RecordingLLM()
    fmt = GraphDescriptionFormat(llm)  # type: ignore[arg-type]
    first = fmt.render(ddb, sub)
    again = fmt.render(ddb, sub)
    assert first.text == again.text == "A central node links things."
    assert len(llm.prompts) == 1 and first.usage.calls == 1 and again.usage.cached_calls == 1
    b = sub.paths[0].nodes[1]  # the middle node touches both edges: the centre
    assert f'central entity "{clean_label(ddb.label(b))}"' in llm.prompts[0]
    assert f"({ddb.label(sub.paths[0].nodes[0])}," in llm.prompts[0]
    assert fmt.render(ddb, Subgraph()).text == ""


def test_make_format_names_and_errors() -> None:
    assert make_format("F_t").name == "F_t" and make_format("sentences").name == "F_s"
    with pytest.raises(ConfigError, match="needs an LLM"):
        make_format("F_g")
    with pytest.raises(ConfigError, match="unknown knowledge format"):
        make_format("F_x")
    with pytest.raises(ConfigError):
        FormatConfig(max_triples=0)


class StubCountFormat:
    """Renders the number of edges (a stand-in format for the registry's unit test)."""

    name = "F_count"

    def render(self, kg: KnowledgeGraph, subgraph: Subgraph, question: Question | None = None) -> Rendered:
        return Rendered(str(len(subgraph.edges)))


def test_a_new_format_is_one_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    from kgwise.render import formats

    assert list(formats.FORMATS) == ["F_t", "F_s", "F_g"]
    monkeypatch.setattr(formats, "FORMATS", dict(formats.FORMATS))
    monkeypatch.setattr(formats, "_ALIASES", dict(formats._ALIASES))
    formats.register_format("F_count", lambda llm, config: StubCountFormat(), aliases=("count",))
    kg = CSRGraph.from_triples([("a", "r", "b")])
    assert make_format("count").render(kg, Subgraph(edges=((0, 0, 1),))).text == "1"
    for taken in ("F_t", "count", "graph", "a+b", ""):
        with pytest.raises(ConfigError, match="registered twice"):
            formats.register_format(taken, lambda llm, config: StubCountFormat())
    with pytest.raises(ConfigError, match="choose one of F_t, F_s, F_g, F_count"):
        make_format("F_x")


edge = st.tuples(st.integers(0, 6), st.integers(0, 2), st.integers(0, 6))


@settings(max_examples=60, deadline=None)
@given(st.lists(edge, max_size=12), st.lists(st.integers(0, 6), min_size=2, max_size=4),
       st.integers(1, 10))
def test_select_edges_puts_paths_first_without_duplicates(edges: list[tuple[int, int, int]],
                                                          path_nodes: list[int], cap: int) -> None:
    path = KGPath(tuple(path_nodes), tuple(0 for _ in path_nodes[1:]))
    sub = Subgraph(edges=tuple(edges), paths=(path,), question_nodes=(path_nodes[0],))
    out = select_edges(sub, cap)
    assert len(out) == len(set(out)) <= cap
    path_edges = list(dict.fromkeys(path.edges()))
    assert out[: len(path_edges)] == path_edges[: len(out)]
    assert set(out) <= set(edges) | set(path_edges)


def test_select_edges_lets_the_choices_take_turns() -> None:
    """The cap keeps facts of every choice, not of the one whose edges come first."""
    a, b, q = 1, 2, 3
    edges = tuple((a, 0, 10 + i) for i in range(6)) + tuple((20 + i, 0, b) for i in range(6)) + \
        ((q, 1, 30), (q, 1, 31), (40, 2, 41))
    sub = Subgraph(edges=edges, question_nodes=(q,), choice_nodes=((a,), (b,)))
    assert select_edges(sub, 6) == [(a, 0, 10), (20, 0, b), (q, 1, 30), (a, 0, 11), (21, 0, b), (q, 1, 31)]
    assert select_edges(sub, 100)[-1] == (40, 2, 41)  # an edge touching no concept comes last
    # paths take turns too: the one reaching choice b comes before choice a's second path
    to_a = [KGPath((q, 50 + i, a), (0, 0)) for i in range(2)]
    to_b = KGPath((q, 60, b), (0, 0))
    sub = Subgraph(paths=(*to_a, to_b), question_nodes=(q,), choice_nodes=((a,), (b,)))
    assert select_edges(sub, 4) == [*to_a[0].edges(), *to_b.edges()]


def test_real_ddb_knowledge_covers_every_choice(ddb: CSRGraph) -> None:
    from kgwise.extract import SubgraphExtractor
    from kgwise.kg.grounding import Grounder
    from kgwise.types import make_question

    q = make_question("Which drug lowers blood pressure?", ["aspirin", "lisinopril", "insulin"])
    sub = SubgraphExtractor(ddb).extract(q, Grounder(ddb).ground(q))
    text = TripleFormat().render(ddb, sub).text.lower()
    assert all(name in text for name in ("aspirin", "lisinopril", "insulin")), text


def test_one_fact_sentences_with_one_head_and_relation_are_said_once() -> None:
    """F_s lists the tails of one-fact sentences that share their head and relation, in their order,
    and keeps a chained path's sentence whole."""
    kg = CSRGraph.from_arrays(
        ["revolving door", "bank", "mall", "library", "door", "house"],
        ["AtLocation", "IsA"], [0, 0, 0, 0, 4], [0, 0, 0, 1, 0], [1, 2, 3, 4, 5])
    one = [KGPath((0, t), (r,)) for t, r in ((1, 0), (2, 0), (3, 0))]
    chain = KGPath((0, 4, 5), (1, 0))
    sub = Subgraph(nodes=tuple(range(6)), edges=tuple(e for p in (*one, chain) for e in p.edges()),
                   question_nodes=(0,), choice_nodes=((1,), (2,), (3,), (5,)), paths=(*one, chain))
    text = SentenceFormat().render(kg, sub).text
    assert text == ("Revolving door is found at bank, mall and library. "
                    "Revolving door is a kind of door, which is found at house.")
    single = SentenceFormat().render(kg, Subgraph(edges=((0, 0, 1),))).text
    assert single == "Revolving door is found at bank."
    # under a cap of two facts only the first two are listed
    assert SentenceFormat(FormatConfig(max_triples=2)).render(kg, sub).text == (
        "Revolving door is found at bank and mall.")
