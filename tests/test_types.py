from __future__ import annotations

from typing import Any, cast

import pytest

from kgwise.types import Answer, Choice, Path, Question, Subgraph, Usage


def test_question_round_trips_through_json() -> None:
    q = Question("q1", "Where is a bank?", (Choice("A", "city"), Choice("B", "river")), ("A",),
                 dataset="csqa", split="ihdev")
    assert Question.from_json(q.to_json()) == q
    assert q.gold_index == 0
    assert q.choice_texts == ("city", "river")


def test_question_rejects_empty_text_and_duplicate_labels() -> None:
    with pytest.raises(ValueError, match="empty question"):
        Question("q", "  ")
    with pytest.raises(ValueError, match="duplicate choice"):
        Question("q", "x?", (Choice("A", "a"), Choice("A", "b")))


def test_question_fields_from_a_file_must_be_lists_of_names() -> None:
    """A JSON string where a list belongs would otherwise be read as its characters."""
    with pytest.raises(ValueError, match="question 'q': 'gold' must be a list of strings, got 'Paris'"):
        Question.from_dict({"id": "q", "text": "capital of France?", "gold": "Paris"})
    with pytest.raises(ValueError, match="'topic_entities' must be a list of strings"):
        Question.from_dict({"id": "q", "text": "capital?", "topic_entities": [["France"]]})


def test_messages_name_a_question_by_id_or_else_by_text() -> None:
    assert Question("csqa-7", "Where is a bank?").ref == "question 'csqa-7'"
    assert Question("", "Where is a bank?").ref == "the question 'Where is a bank?'"
    assert Question("", "x" * 80).ref == f"the question '{'x' * 57}...'"


def test_subgraph_and_answer_round_trip() -> None:
    sg = Subgraph((1, 2, 3), ((1, 0, 2), (2, 1, 3)), (1,), ((3,),), (Path((1, 2, 3), (0, 1), (False, True)),))
    assert Subgraph.from_dict(sg.to_dict()) == sg
    a = Answer("q1", "A", {"A": 0.7, "B": 0.3}, ("A",), usage=Usage(10, 2, 1, 0.5, 0.001))
    assert Answer.from_json(a.to_json()) == a


def test_path_edges_follow_inverse_flags() -> None:
    p = Path((1, 2, 3), (7, 8), (False, True))
    assert list(p.edges()) == [(1, 7, 2), (3, 8, 2)]
    with pytest.raises(ValueError):
        Path((1, 2), ())


def test_usage_adds_up() -> None:
    total = Usage.total([Usage(1, 2, 1, 0.1, 0.5), Usage(3, 4, 1, 0.2, 0.25, cached_calls=1)])
    assert total == Usage(4, 6, 2, cast(float, pytest.approx(0.3)), 0.75, 1)
    assert total.total_tokens == 10


def test_make_question_takes_its_answer() -> None:
    from kgwise.errors import ConfigError
    from kgwise.types import make_question

    assert make_question("Q?", ["aspirin", "insulin"], answer="Insulin").gold == ("B",)
    assert make_question("Q?", ["aspirin", "insulin"], answer="A").gold == ("A",)
    with pytest.raises(ConfigError, match="none of the choices"):
        make_question("Q?", ["aspirin", "insulin"], answer="heparin")


def test_generation_settings_name_what_they_ask_and_refuse_values_out_of_range() -> None:
    from kgwise.errors import ConfigError
    from kgwise.types import GenerationSettings

    assert GenerationSettings().given() == ()
    assert GenerationSettings(temperature=0.0, top_p=1.0, n=1).given() == ()  # the no-op values
    s = GenerationSettings(max_tokens=5, temperature=0.7, top_p=0.9, stop=("\n",), seed=3, n=2)
    assert s.given() == ("max_tokens", "temperature", "top_p", "stop", "seed", "n")
    cases: list[tuple[dict[str, Any], str]] = [
        ({"max_tokens": 0}, "max_tokens"), ({"temperature": 2.5}, "temperature"), ({"top_p": 0.0}, "top_p"),
        ({"n": 0}, "n"), ({"stop": ("",)}, "stop"), ({"stop": ("a", "b", "c", "d", "e")}, "stop")]
    for bad, name in cases:
        with pytest.raises(ConfigError, match=f"^{name}: must be"):
            GenerationSettings(**bad)
