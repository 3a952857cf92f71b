"""WordNet 3.0 loader: real database counts and names, edge directions, and malformed-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kgwise.errors import DataError
from kgwise.kg import CSRGraph
from kgwise.kg.loaders import IN_SYNSET, POINTER_RELATIONS, load_wordnet

HEADER = "  1 This software and database is being provided to you, the LICENSEE, by  \n"


def out_labels(g: CSRGraph, node: str, relation: str) -> set[str]:
    rels, tails = g.out_edges(g.node(node))
    rid = g.relation_id(relation)
    return {g.label(int(t)) for r, t in zip(rels.tolist(), tails.tolist(), strict=True) if r == rid}


@pytest.fixture(scope="module")
def wordnet(data_dir: Path) -> CSRGraph:
    return load_wordnet(data_dir / "wordnet")


def test_real_counts(wordnet: CSRGraph) -> None:
    labels = wordnet.labels
    synsets = [lab for lab in labels if lab.count(".") >= 2 and lab.rsplit(".", 2)[1] in "nvasr"
               and lab.rsplit(".", 1)[1].isdigit()]
    assert len(synsets) == 117_659  # WordNet 3.0 synsets
    assert wordnet.num_nodes == 117_659 + 147_306  # + distinct lower-cased word strings
    _, rels, _ = wordnet.all_edges()
    counts = np.bincount(rels, minlength=wordnet.num_relations)
    assert counts[wordnet.relation_id(IN_SYNSET)] == 206_941  # word-sense pairs
    # every semantic hypernym pointer has its hyponym pointer listed on the other synset
    assert counts[wordnet.relation_id("hypernym")] == counts[wordnet.relation_id("hyponym")] == 89_089
    for rel in ("antonym", "similar_to", "entailment", "derivation", "part_meronym", "part_holonym",
                "member_meronym", "member_holonym", "substance_meronym", "substance_holonym"):
        assert counts[wordnet.relation_id(rel)] > 0, rel


def test_real_names_glosses_and_directions(wordnet: CSRGraph) -> None:
    dog = wordnet.node("dog.n.01")
    assert wordnet.text(dog).startswith("a member of the genus Canis")
    assert out_labels(wordnet, "dog.n.01", "hypernym") == {"domestic_animal.n.01", "canine.n.02"}
    assert "dog.n.01" in out_labels(wordnet, "canine.n.02", "hyponym")
    assert "dog.n.01" not in out_labels(wordnet, "canine.n.02", "hypernym")
    assert out_labels(wordnet, "dog.n.01", "member_holonym") == {"canis.n.01", "pack.n.06"}
    assert "flag.n.07" in out_labels(wordnet, "dog.n.01", "part_meronym")
    assert "sleep.v.01" in out_labels(wordnet, "snore.v.01", "entailment")
    # lexical pointers link lemmas; satellites are named ``.s.``
    assert "bad" in out_labels(wordnet, "good", "antonym")
    assert "good" in out_labels(wordnet, "bad", "antonym")
    good_senses = {"beneficial.s.01", "full.s.06", "good.s.06", "good.a.01"}
    assert good_senses <= out_labels(wordnet, "good", IN_SYNSET)
    assert out_labels(wordnet, "dog", IN_SYNSET) >= {"dog.n.01", "chase.v.01"}
    assert wordnet.find("hot dog") is not None and wordnet.find("hot_dog") == wordnet.find("hot dog")


def test_real_frequent_senses(data_dir: Path, wordnet: CSRGraph) -> None:
    frequent = load_wordnet(data_dir / "wordnet", senses="frequent")
    assert frequent.num_nodes == wordnet.num_nodes  # every word keeps at least one sense
    # 'go' (noun: 4 senses, none tagged) keeps only its first noun sense, not the drug 'adam'
    assert "adam.n.03" in out_labels(wordnet, "go", IN_SYNSET)
    assert "adam.n.03" not in out_labels(frequent, "go", IN_SYNSET)
    assert {"go.n.01", "travel.v.01"} <= out_labels(frequent, "go", IN_SYNSET)  # go.v.01 is travel.v.01
    # 'house' (noun: 12 senses, 7 tagged) drops the zodiac sign, its 8th
    assert "sign_of_the_zodiac.n.01" in out_labels(wordnet, "house", IN_SYNSET)
    assert "sign_of_the_zodiac.n.01" not in out_labels(frequent, "house", IN_SYNSET)
    assert "house.n.01" in out_labels(frequent, "house", IN_SYNSET)
    _, rels, _ = frequent.all_edges()
    counts = np.bincount(rels, minlength=frequent.num_relations)
    assert counts[frequent.relation_id(IN_SYNSET)] == 167_181  # of 206,941 word-sense pairs
    assert counts[frequent.relation_id("hypernym")] == 89_089  # pointers are untouched
    with pytest.raises(ValueError, match="senses"):
        load_wordnet(data_dir / "wordnet", senses="rare")


def write_mini(root: Path, **override: str) -> Path:
    """A six-synset WordNet database in the official layout (offsets need only increase)."""
    files = {
        "data.noun": HEADER
        + "00000010 05 n 02 dog 0 domestic_dog 0 002 @ 00000020 n 0000 + 00000050 v 0101 | a tame canid  \n"
        + "00000020 05 n 01 canine 0 001 ~ 00000010 n 0000 | a mammal with pointed teeth  \n",
        "data.verb": HEADER
        + "00000050 29 v 01 dog 0 001 + 00000010 n 0101 01 + 01 00 | go after with the intent to catch  \n",
        "data.adj": HEADER
        + "00000100 00 a 01 good(a) 0 002 ! 00000200 a 0101 & 00000300 s 0000 | desirable  \n"
        + "00000200 00 a 01 bad 0 001 ! 00000100 a 0101 | having undesirable qualities  \n"
        + "00000300 00 s 01 fine 0 001 & 00000100 a 0000 | superior to the average  \n",
        "data.adv": HEADER,
        "index.noun": HEADER + "canine n 1 1 ~ 1 0 00000020  \ndog n 1 2 @ + 1 0 00000010  \n"
        + "domestic_dog n 1 1 @ 1 0 00000010  \n",
        "index.verb": HEADER + "dog v 1 1 + 1 0 00000050  \n",
        "index.adj": HEADER + "bad a 1 1 ! 1 0 00000200  \nfine a 1 1 & 1 0 00000300  \n"
        + "good a 1 2 ! & 1 0 00000100  \n",
        "index.adv": HEADER,
    }
    files.update(override)
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def edge_set(g: CSRGraph) -> set[tuple[str, str, str]]:
    return {tuple(t) for t in g.triples(*g.all_edges())}  # type: ignore[misc]


def test_mini_database_edges(tmp_path: Path) -> None:
    g = load_wordnet(write_mini(tmp_path / "wn"))
    assert list(g.labels[:6]) == ["dog.n.01", "canine.n.01", "dog.v.01", "good.a.01", "bad.a.01", "fine.s.01"]
    assert set(g.labels[6:]) == {"dog", "domestic dog", "canine", "good", "bad", "fine"}
    assert g.text(g.node("canine.n.01")) == "a mammal with pointed teeth"
    assert edge_set(g) == {
        ("dog", IN_SYNSET, "dog.n.01"), ("domestic dog", IN_SYNSET, "dog.n.01"),
        ("canine", IN_SYNSET, "canine.n.01"), ("dog", IN_SYNSET, "dog.v.01"),
        ("good", IN_SYNSET, "good.a.01"), ("bad", IN_SYNSET, "bad.a.01"), ("fine", IN_SYNSET, "fine.s.01"),
        ("dog.n.01", "hypernym", "canine.n.01"), ("canine.n.01", "hyponym", "dog.n.01"),
        ("good", "antonym", "bad"), ("bad", "antonym", "good"),
        ("good.a.01", "similar_to", "fine.s.01"), ("fine.s.01", "similar_to", "good.a.01"),
    }  # the dog(n) + dog(v) derivation would be a self-loop on the lemma ``dog``: dropped
    assert g.num_edges == 13


def test_relation_filter(tmp_path: Path) -> None:
    g = load_wordnet(write_mini(tmp_path / "wn"), relations={"hypernym"})
    assert {r for _, r, _ in edge_set(g)} == {IN_SYNSET, "hypernym"}
    with pytest.raises(ValueError, match="unknown WordNet relation"):
        load_wordnet(tmp_path / "wn", relations={"hypernyms"})
    assert set(POINTER_RELATIONS.values()) >= {"hypernym", "hyponym", "antonym", "similar_to", "entailment",
                                                "derivation", "part_meronym", "member_holonym"}


GOOD_LINE = "00000020 05 n 01 canine 0 001 ~ 00000010 n 0000 | a mammal with pointed teeth  \n"


@pytest.mark.parametrize(
    ("bad_line", "message"),
    [
        ("00000020 05 n 01 canine 0 002 ~ 00000010 n 0000 | a mammal  \n", "counts"),  # p_cnt too big
        ("00000020 05 n 01 canine 0 001 ~ 00000010 n 0000 a mammal  \n", "gloss"),  # no ' | '
        ("00000020 05 n 0x canine 0 001 ~ 00000010 n 0000 | a mammal  \n", "malformed synset"),
        ("00000020 05 n 01 canine 0 001 ?? 00000010 n 0000 | a mammal  \n", "unknown pointer symbol"),
        ("00000020 05 n 01 canine 0 001 ~ 00000099 n 0000 | a mammal  \n", "missing synset"),
        ("00000020 05 n 01 canine 0 001 ~ 00000010 n 0003 | a mammal  \n", "beyond"),
        ("00000020 05 n 01 canine 0 001 ~ 00000010 q 0000 | a mammal  \n", "malformed pointer"),
        ("00000020 05 n 01 wolf 0 001 ~ 00000010 n 0000 | a mammal  \n", "missing from index"),
        ("00000005 05 n 01 canine 0 001 ~ 00000010 n 0000 | a mammal  \n", "out of order"),
    ],
)
def test_malformed_data_line(tmp_path: Path, bad_line: str, message: str) -> None:
    root = write_mini(tmp_path / "wn")
    path = root / "data.noun"
    path.write_text(path.read_text().replace(GOOD_LINE, bad_line))
    with pytest.raises(DataError, match=message) as err:
        load_wordnet(root)
    assert err.value.path == str(path) and err.value.line == 3


def test_malformed_index_line_and_missing_files(tmp_path: Path) -> None:
    root = write_mini(tmp_path / "wn", **{"index.verb": HEADER + "dog v one 1 + 1 0 00000050\n"})
    with pytest.raises(DataError) as err:
        load_wordnet(root)
    assert err.value.path == str(root / "index.verb") and err.value.line == 2
    (root / "index.verb").unlink()
    with pytest.raises(DataError, match="not found"):
        load_wordnet(root)
    with pytest.raises(DataError, match="directory not found"):
        load_wordnet(tmp_path / "nowhere")
