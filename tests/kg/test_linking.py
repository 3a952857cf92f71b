"""Aliases, fuzzy and embedding fallbacks, links with method and score, "did you mean", topic entities."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from kgwise.errors import ConfigError, DataError, UnknownNodeError
from kgwise.kg import CSRGraph
from kgwise.kg.grounding import Grounder, GrounderConfig, PhraseIndex, embedding_matcher
from kgwise.kg.linking import LinkingConfig, did_you_mean, fuzzy_scores
from kgwise.kg.loaders import load_ddb, load_graph, load_ntriples, load_tsv, merge_graphs
from kgwise.kg.loaders.ntriples import write_ntriples
from kgwise.types import make_question


def _graph() -> CSRGraph:
    return CSRGraph.from_triples(
        [("Thyroxine", "may treat", "Hypothyroidism"), ("Aspirin", "may treat", "Gout"),
         ("Gout", "isa", "arthritis"), ("dog", "isa", "animal")],
        aliases={"Thyroxine": ["Levothyroxine", "T4"], "Gout": ["podagra"], "dog": ["Dog", "hound"]},
    )


def test_aliases_are_kept_cleaned_and_saved(tmp_path: Path) -> None:
    g = _graph()
    assert g.aliases(g.node("Thyroxine")) == ("Levothyroxine", "T4")
    assert g.aliases(g.node("dog")) == ("hound",)  # "Dog" normalises like the label: no alias
    assert g.find("levothyroxine") == g.node("Thyroxine")
    back = CSRGraph.load(g.save(tmp_path / "g.npz"))
    assert back.aliases(back.node("Gout")) == ("podagra",)
    assert back.find("PODAGRA") == back.node("Gout")
    with pytest.raises(ValueError, match="outside"):
        CSRGraph.from_arrays(["a", "b"], ["r"], [0], [0], [1], aliases=[(5, "x")])


def test_grounding_matches_aliases_and_prints_the_preferred_label() -> None:
    g = _graph()
    gr = Grounder(g)
    found = gr.ground(make_question("Is levothyroxine used for hypothyroidism?", ["podagra", "hound"]))
    assert [g.label(n) for n in found.question_nodes] == ["Thyroxine", "Hypothyroidism"]
    assert [[g.label(n) for n in c] for c in found.choice_nodes] == [["Gout"], ["dog"]]
    methods = {(x.mention, x.method) for x in found.links}
    assert ("levothyroxine", "alias") in methods and ("hypothyroidism", "exact") in methods
    # a label beats another node's alias of the same spelling
    h = CSRGraph.from_triples([("x", "r", "dog"), ("dog", "r", "y")], aliases={"x": ["dog"]})
    assert PhraseIndex(h).lookup("dog") == (h.node("dog"), False)


def test_fuzzy_fallback_only_where_exact_finds_nothing() -> None:
    g = _graph()
    exact = Grounder(g)
    fuzzy = Grounder(g, GrounderConfig(linking=LinkingConfig(embedding=False), precise=False))
    precise = Grounder(g, GrounderConfig(linking=LinkingConfig(embedding=False)))
    q = make_question("Does aspirn help with gowt?", ["aspirin", "gowt", "zzzzzz"])
    # one edit in a word of four letters is another word to the precise rules ("Iraq", "Iran")
    assert precise.ground(q).choice_nodes == ((g.node("Aspirin"),), (), ())
    assert precise.ground_names(["Aspirn"]) == (g.node("Aspirin"),)
    assert exact.ground(q).choice_nodes == ((g.node("Aspirin"),), (), ())
    got = fuzzy.ground(q)
    assert got.choice_nodes == ((g.node("Aspirin"),), (g.node("Gout"),), ())
    link = next(x for x in got.links if x.mention == "gowt")
    assert (link.method, link.name, round(link.score, 2)) == ("fuzzy", "Gout", 0.75)
    # exact matches are never replaced: a choice exact grounds keeps its node
    assert got.choice_nodes[0] == exact.ground(q).choice_nodes[0]
    assert fuzzy.ground_names(["Aspirn", "nothing like it"]) == (g.node("Aspirin"),)
    strict = Grounder(g, GrounderConfig(linking=LinkingConfig(fuzzy_min_score=0.9, embedding=False)))
    assert strict.ground_names(["gowt"]) == ()


def test_topic_entities_are_proposed_with_method_and_score() -> None:
    g = _graph()
    gr = Grounder(g, GrounderConfig(linking=LinkingConfig(embedding=False)))
    found = gr.topic_entities("Which drug like levothyroxine treats hypothyroidism?")
    assert [(g.label(x.node), x.method) for x in found] == [("Thyroxine", "alias"),
                                                           ("Hypothyroidism", "exact")]
    typo = gr.topic_entities("aspirn for gowt")
    # one edit in four letters is below the precise rules' 0.8 ("Iraq" is not "Iran"); the earlier rules
    # took it
    assert [g.label(x.node) for x in typo] == ["Aspirin"]
    assert all(x.method == "fuzzy" and 0.8 <= x.score < 1 for x in typo)
    before = Grounder(g, GrounderConfig(linking=LinkingConfig(embedding=False), precise=False))
    assert [g.label(x.node) for x in before.topic_entities("aspirn for gowt")] == ["Aspirin", "Gout"]
    one = Grounder(g, GrounderConfig(linking=LinkingConfig(max_topic_entities=1)))
    assert len(one.topic_entities("levothyroxine and aspirin and gout")) == 1


def test_did_you_mean_in_unknown_node_errors() -> None:
    g = _graph()
    with pytest.raises(UnknownNodeError, match=r"did you mean 'Aspirin'"):
        g.node("aspirn")
    assert did_you_mean("qqqqqqqq", g) == ""
    assert fuzzy_scores("gout", ["gout", "goat", "xyz"], 2, 0.5) == [(0, 1.0), (1, 0.75)]


class FakeEncoder:
    """A bag-of-letters encoder: texts with the same letters embed alike (a test double)."""

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = np.zeros((len(texts), 26), dtype=np.float32)
        for i, t in enumerate(texts):
            for ch in t.lower():
                if "a" <= ch <= "z":
                    out[i, ord(ch) - 97] += 1
        return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-9)


def test_embedding_fallback_after_fuzzy() -> None:
    g = _graph()
    index = PhraseIndex(g)
    cfg = LinkingConfig(fuzzy=False, embedding=True, embedding_min_score=0.9)
    gr = Grounder(g, GrounderConfig(linking=cfg), index,
                  embedding_matcher(index, FakeEncoder()))
    found = gr.ground_names(["enixoryht"])  # an anagram: far by edit distance, equal letters
    assert found == (g.node("Thyroxine"),)
    link = gr.fallback("enixoryht")
    assert link is not None and link.method == "embedding" and link.score == pytest.approx(1.0)


def test_linking_config_is_checked() -> None:
    with pytest.raises(ConfigError):
        LinkingConfig(fuzzy_min_score=0)
    with pytest.raises(ConfigError):
        LinkingConfig(max_topic_entities=0)


def test_loaders_keep_aliases(tmp_path: Path, data_dir: Path) -> None:
    ddb = load_ddb(data_dir / "ddb")
    v = ddb.node("Thyroxine")
    assert "Levothyroxine" in ddb.aliases(v) and ddb.find("levothyroxine") == v
    nt = tmp_path / "a.nt"
    nt.write_text(
        '<http://x/a> <http://www.w3.org/2000/01/rdf-schema#label> "Aspirin"@en .\n'
        '<http://x/a> <http://www.w3.org/2000/01/rdf-schema#label> "Aspirina"@es .\n'
        '<http://x/a> <http://www.w3.org/2004/02/skos/core#altLabel> "acetylsalicylic acid" .\n'
        '<http://x/a> <http://x/treats> <http://x/b> .\n', encoding="utf-8")
    g = load_ntriples(nt)
    assert g.num_edges == 1 and g.aliases(g.node("Aspirin")) == ("acetylsalicylic acid",)
    back = load_ntriples(write_ntriples(g, tmp_path / "b.nt"))
    assert back.aliases(back.node("Aspirin")) == ("acetylsalicylic acid",) and back.num_edges == 1
    tsv, names = tmp_path / "t.tsv", tmp_path / "names.tsv"
    tsv.write_text("m.1\tr\tm.2\n", encoding="utf-8")
    names.write_text("m.1\tBarack Obama\tObama\n", encoding="utf-8")
    t = load_graph(tsv, "tsv", aliases=names)
    assert t.aliases(0) == ("Barack Obama", "Obama") and t.find("obama") == 0
    names.write_text("m.9\tNobody\n", encoding="utf-8")
    with pytest.raises(DataError, match="in no triple"):
        load_tsv(tsv, aliases=names)
    names.write_text("m.1\n", encoding="utf-8")
    with pytest.raises(DataError, match=r"names.tsv:1"):
        load_tsv(tsv, aliases=names)
    with pytest.raises(ConfigError, match="tsv"):
        load_graph(data_dir / "ddb", "ddb", aliases=names)
    merged = merge_graphs([_graph(), t])
    assert merged.find("podagra") == merged.node("Gout") and merged.find("obama") == merged.node("m.1")


def test_conceptnet_surface_forms_are_aliases(data_dir: Path) -> None:
    from kgwise.kg.loaders import load_conceptnet_jsonl_triples

    g = load_conceptnet_jsonl_triples(data_dir / "conceptnet" / "csqa_choice_triples_jessionlin" /
                                      "dev_data.json")
    v = g.node("complete job")
    assert "complete a job" in g.aliases(v)
    assert g.find("complete a job") == v
