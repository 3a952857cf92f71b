from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgwise.errors import DataError
from kgwise.kg import CSRGraph
from kgwise.kg.grounding import Grounder, GrounderConfig, Grounding
from kgwise.kg.linking import Link
from kgwise.kg.text import (
    Lemmatiser,
    determiners,
    load_exceptions,
    phrase_key,
    phrase_keys,
    stopwords,
    tokenize,
)
from kgwise.types import Choice, Question


def _graph() -> CSRGraph:
    return CSRGraph.from_triples([
        ("dog", "isa", "animal"), ("running_shoe", "usedfor", "run"),
        ("go_to_school", "hassubevent", "learn"),
        ("new york city", "isa", "city"), ("new york", "isa", "city"), ("york", "isa", "city"),
        ("child", "atlocation", "school"), ("yell_at", "relatedto", "yell"), ("box", "isa", "container"),
        ("goose", "isa", "bird"), ("the", "relatedto", "article"), ("in_love", "relatedto", "love"),
        ("having_fun", "causes", "joy"), ("the house", "isa", "house"),
    ])


def _labels(g: CSRGraph, nodes: tuple[int, ...]) -> list[str]:
    return [g.label(n) for n in nodes]


def test_tokenize_and_keys() -> None:
    assert tokenize("The dog's  run-away_Box, 2x!") == ["the", "dog", "s", "run", "away", "box", "2x"]
    assert phrase_key("Running_Shoe") == "running shoe"
    assert "the" in stopwords() and "dog" not in stopwords()


def test_longest_match_first_and_lemmas() -> None:
    g = _graph()
    gr = Grounder(g)
    found = _labels(g, gr.ground_text("Children in New York City go to school in their running shoes"))
    # 'new york city' claims its words, so 'new york' and 'york' are not matched again
    assert found == ["child", "new york city", "go_to_school", "running_shoe"]
    assert _labels(g, gr.ground_text("Three geese and two boxes")) == ["goose", "box"]
    assert gr.ground_text("the of and") == ()  # stop-words alone never ground
    # a span may start with a stop-word, but not with a determiner
    assert _labels(g, gr.ground_text("Being in love and having fun in the house")) == [
        "in_love", "having_fun", "house"]


def test_choices_whole_first_and_question_excludes_choices() -> None:
    g = _graph()
    gr = Grounder(g)
    q = Question("q1", "Why would a dog yell at a child?",
                 (Choice("A", "yell at"), Choice("B", "a box"), Choice("C", "nothing here")))
    got = gr.ground(q)
    assert isinstance(got, Grounding)
    assert [_labels(g, c) for c in got.choice_nodes] == [["yell_at"], ["box"], []]
    assert _labels(g, got.question_nodes) == ["dog", "child"]  # 'yell at' belongs to a choice
    assert _labels(g, got.all_choice_nodes) == ["yell_at", "box"]


def test_topic_entities_used_directly() -> None:
    g = _graph()
    gr = Grounder(g)
    q = Question("w1", "what city is the dog from", topic_entities=("New York", "Atlantis"))
    assert _labels(g, gr.ground(q).question_nodes) == ["new york"]
    fallback = Question("w2", "is the dog a city", topic_entities=("Atlantis",))
    assert _labels(g, gr.ground(fallback).question_nodes) == ["dog", "city"]
    strict = Grounder(g, GrounderConfig(text_fallback=False))
    assert strict.ground(fallback).question_nodes == ()


def test_lemmatiser_rules_and_exceptions(tmp_path: Path) -> None:
    vocab = {"run", "stop", "city", "box", "church", "woman", "make", "leaf", "fly"}
    lem = Lemmatiser(vocab)
    assert [lem.lemma(w) for w in ["running", "stopped", "cities", "boxes", "churches", "women", "making",
                                   "leaves", "flies", "unknowns"]] == [
        "run", "stop", "city", "box", "church", "woman", "make", "leaf", "fly", "unknowns"]
    (tmp_path / "noun.exc").write_text("oxen ox\nmice mouse\n")
    assert load_exceptions(tmp_path) == {"oxen": "ox", "mice": "mouse"}
    assert Lemmatiser({"ox"}, load_exceptions(tmp_path)).lemma("oxen") == "ox"
    (tmp_path / "verb.exc").write_text("ok fine\nbroken\n")
    with pytest.raises(DataError, match=r"verb\.exc:2"):
        load_exceptions(tmp_path)


def test_wordnet_exception_files(data_dir: Path) -> None:
    exc = load_exceptions(data_dir / "wordnet")
    assert exc["geese"] == "goose" and exc["went"] == "go"
    assert len(exc) > 5000


# typed, as mypy infers a bare ("Cs",) in the call below as tuple[str], not the category literal
_SURROGATES: tuple[Literal["Cs"]] = ("Cs",)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.text(alphabet=st.characters(codec="utf-8", exclude_categories=_SURROGATES), max_size=12),
                max_size=8))
def test_phrase_keys_equals_phrase_key(labels: list[str]) -> None:
    assert phrase_keys(labels) == [phrase_key(x) for x in labels]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from(["dog", "new", "york", "city", "the", "box", "a", "go", "to", "school", "x"]),
                max_size=12))
def test_matches_are_disjoint_real_spans(words: list[str]) -> None:
    g = _graph()
    gr = Grounder(g)
    found = gr.ground_text(" ".join(words))
    keys = [phrase_key(g.label(n)) for n in found]
    text = " " + " ".join(words) + " "
    assert all(f" {k} " in text for k in keys)  # (no lemmas needed for these words)
    assert len(set(found)) == len(found)
    assert not any(set(k.split()) <= stopwords() for k in keys)
    assert not any(k.split()[0] in determiners() for k in keys)


def test_real_conceptnet_slice_grounds_csqa_dev(data_dir: Path) -> None:
    from kgwise.datasets import load
    from kgwise.kg.loaders import load_conceptnet_jsonl_triples

    g = load_conceptnet_jsonl_triples(data_dir / "conceptnet" / "csqa_choice_triples_jessionlin",
                                      data_dir / "conceptnet" / "merge_relation_kagnet.txt")
    gr = Grounder(g, GrounderConfig(wordnet_dir=data_dir / "wordnet"))
    questions = load("csqa", "dev", data_dir)
    groundings = [gr.ground(q) for q in questions]
    n_choices = sum(len(q.choices) for q in questions)
    grounded = sum(1 for gd in groundings for c in gd.choice_nodes if c)
    concept_found = sum(g.find(q.concept) in gd.question_nodes
                        for q, gd in zip(questions, groundings, strict=True))
    # measured 0.952 and 0.896 (CSQA's annotated question concept is not always written literally)
    assert grounded / n_choices > 0.93
    assert concept_found / len(questions) > 0.87


class _UnlistedIndex:
    """An index that looks names up but cannot list its keys (as a ``LabelIndex`` on disk): the grounder
    then tries every span, the reference for the first-word prefilter below."""

    def __init__(self, index: object) -> None:
        self._index = index

    def __getattr__(self, name: str) -> object:
        if name == "first_words":
            raise AttributeError(name)
        return getattr(self._index, name)


@pytest.mark.parametrize("precise", [True, False])
def test_first_word_prefilter_finds_what_every_span_finds(data_dir: Path, precise: bool) -> None:
    """Skipping the spans whose first token begins no name changes no grounding: real DDB names against
    MedQA questions and choices, recorded ChatGPT answers, accents and letters that fold together."""
    import kgwise.eval.recorded  # noqa: F401  (registers the recordings)
    from kgwise.datasets import load
    from kgwise.kg.loaders import load_ddb
    from kgwise.llm.replay import Replay

    kg = load_ddb(data_dir / "ddb")
    medqa = load("medqa", "test", data_dir)[:150]
    texts = [q.text for q in medqa] + [c.text for q in medqa for c in q.choices]
    texts += [r.prediction for r in Replay.from_spec("chatgpt", data_dir).records[:300]]
    texts += ["U S army near zürich lake with Crohn's disease", "an x ray of the U.S. Type 2 diabetes",
              "Sjögren syndrome and sjogren's", "Diabetes insipidus, diabetes mellitus type 2"]
    cfg = GrounderConfig(precise=precise)
    fast = Grounder(kg, cfg)
    every = Grounder(kg, cfg, index=_UnlistedIndex(fast.index))  # type: ignore[arg-type]
    assert fast._may_start(["diabetes", "mellitus"]) is not None and every._may_start(["x", "y"]) is None
    found = 0
    for text in texts:
        links_fast: list[Link] = []
        links_every: list[Link] = []
        nodes = fast.ground_text(text, links_fast)
        assert nodes == every.ground_text(text, links_every), text
        assert links_fast == links_every, text
        found += len(nodes)
    assert found > len(texts) // 2  # the texts do name DDB entities (1,108 and more of 1,204 texts)
