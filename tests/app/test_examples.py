"""Example questions made from a KG (:mod:`kgwise.app.examples`): from the graph's own facts, a relation
name read as words, bare-id labels left out; on a small TSV graph and on the WebQSP Freebase fragment."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kgwise.app.examples import Example, kg_examples, relation_words
from kgwise.kg.csr import CSRGraph
from kgwise.kg.loaders import load_graph


def _graph(tmp_path: Path, triples: list[tuple[str, str, str]]) -> CSRGraph:
    path = tmp_path / "kg.tsv"
    path.write_text("".join(f"{h}\t{r}\t{t}\n" for h, r, t in triples), encoding="utf-8")
    return load_graph(path, "tsv")


def test_relation_names_read_as_words() -> None:
    assert relation_words("may_treat") == ("may treat", False)
    assert relation_words("/r/IsA") == ("is a", False)
    assert relation_words("http://ex.org/onto#partOf") == ("part of", False)
    assert relation_words("people.person.nationality") == ("nationality", True)


def test_verb_and_property_relations_make_questions_from_facts(tmp_path: Path) -> None:
    kg = _graph(tmp_path, [("aspirin", "treats", "pain"), ("ibuprofen", "treats", "pain"),
                           ("insulin", "treats", "diabetes"), ("statin", "treats", "cholesterol"),
                           ("Ada", "people.person.nationality", "United Kingdom"),
                           ("Grace", "people.person.nationality", "United States"),
                           ("Alan", "people.person.nationality", "United Kingdom"),
                           ("m.0abc", "people.person.nationality", "France")])
    examples = kg_examples(kg)
    assert examples[0] == Example("What treats pain?", ("aspirin", "insulin", "statin"))
    assert examples[1].question == "What is the nationality of Ada?"
    assert set(examples[1].choices) == {"United Kingdom", "United States", "France"}
    assert len(examples) == 2  # two relations
    assert kg_examples(kg, choices=5) == ()  # no relation has five distinct answers


def test_a_relation_without_enough_answers_makes_no_example(tmp_path: Path) -> None:
    kg = _graph(tmp_path, [("a", "likes", "b"), ("c", "likes", "b")])
    assert kg_examples(kg) == ()


@pytest.mark.skipif(not (Path(os.environ.get("KGWISE_DATA", "/work/shared/data")) / "webqsp").is_dir(),
                    reason="the WebQSP data is not here")
def test_freebase_examples_name_their_nodes() -> None:
    kg = load_graph(Path(os.environ.get("KGWISE_DATA", "/work/shared/data")) / "webqsp/freebase_fragment.tsv",
                    "tsv")
    examples = kg_examples(kg)
    assert len(examples) == 3
    for x in examples:
        assert "m." not in x.question and not any(c.startswith(("m.", "g.")) for c in x.choices)
        assert x.question.startswith("What is the ")
