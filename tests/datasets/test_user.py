"""A user's questions file and graded log: every accepted spelling, and bad records named by file:line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgwise.datasets.user import (
    ArmOutcome,
    GradedLog,
    GradedQuestion,
    read_graded_log,
    read_questions,
    schema,
    write_graded_log,
    write_questions,
)
from kgwise.errors import DataError
from kgwise.types import Usage


def lines(tmp_path: Path, *records: object) -> Path:
    path = tmp_path / "f.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records))
    return path


def test_questions_in_every_spelling(tmp_path: Path) -> None:
    path = lines(tmp_path,
                 {"id": "a", "text": "Which drug?", "choices": ["aspirin", "insulin"], "answer": "insulin"},
                 {"id": 2, "text": "Which?", "choices": {"X": "one", "Y": "two"}, "gold": ["X"]},
                 {"id": "c", "text": "Which?",
                  "choices": [{"label": "A", "text": "u"}, {"label": "B", "text": "v"}]},
                 {"id": "d", "text": "Who wrote Hamlet?", "gold": "Shakespeare",
                  "topic_entities": ["Hamlet"]})
    a, b, c, d = read_questions(path)
    assert a.gold == ("B",) and [ch.label for ch in a.choices] == ["A", "B"]
    assert b.id == "2" and b.gold == ("X",)
    assert c.gold == () and c.is_multiple_choice
    assert not d.is_multiple_choice and d.gold == ("Shakespeare",) and d.topic_entities == ("Hamlet",)
    out = tmp_path / "back.jsonl"
    assert write_questions(out, [a, b, c, d]) == 4
    assert [q.to_dict() for q in read_questions(out)] == [q.to_dict() for q in (a, b, c, d)]


@pytest.mark.parametrize("record, message", [
    ({"text": "Which?"}, "field 'id' missing"),
    ({"id": "a", "text": " "}, "field 'text' missing"),
    ({"id": "a", "text": "Q", "choices": ["x"]}, "at least two choices"),
    ({"id": "a", "text": "Q", "choices": ["x", "y"], "answer": "z"}, "'z' is neither a choice label"),
    ({"id": "a", "text": "Q", "gold": ["x"], "answer": "x"}, "'gold' or 'answer', not both"),
    ({"id": "a", "text": "Q", "qustion": 1}, "unknown field(s) qustion"),
    ({"id": "a", "text": "Q", "topic_entities": [1]}, "field 'topic_entities' must be"),
    ("[1, 2]", "expected a JSON object"),
    ("{not json", "invalid JSON"),
])
def test_bad_question_records_name_file_and_line(tmp_path: Path, record: object, message: str) -> None:
    path = lines(tmp_path, {"id": "ok", "text": "fine"}, record)
    with pytest.raises(DataError) as err:
        read_questions(path)
    assert f"{path}:2: " in str(err.value) and message in str(err.value)


def test_duplicate_ids_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"given twice \(first on line 1"):
        read_questions(lines(tmp_path, {"id": "a", "text": "x"}, {"id": "a", "text": "y"}))
    with pytest.raises(DataError, match="holds no questions"):
        read_questions(lines(tmp_path))


def test_graded_log_round_trip(tmp_path: Path) -> None:
    path = lines(tmp_path, {"id": "q1", "text": "T", "arms": {
        "gpt": {"answer": "A", "correct": True, "cost": 0.002},
        "gnn": {"answer": "B", "correct": 0, "usage": {"input_tokens": 0, "calls": 1}, "signals": [0.9, 1]}}},
        {"id": "q2", "arms": {"gpt": {"correct": False, "cost": 0}}})
    log = read_graded_log(path, arms=["gpt", "gnn"])
    assert log.arms == ("gpt", "gnn")
    assert log.questions[0].arms["gnn"] == ArmOutcome("B", False, None, Usage(0, 0, 1), (0.9, 1.0))
    assert log.outcome("gnn")[1] is None
    out = tmp_path / "back.jsonl"
    write_graded_log(out, log)
    assert read_graded_log(out) == log


@pytest.mark.parametrize("arms, message", [
    ({"gpt": {"answer": "A", "correct": True}}, "exactly one of 'cost' and 'usage'"),
    ({"gpt": {"correct": "yes", "cost": 1}}, "arms.gpt.correct must be true or false"),
    ({"gpt": {"correct": True, "cost": -1}}, "arms.gpt.cost must be a finite number ≥ 0"),
    ({"gpt": {"correct": True, "cost": float("nan")}}, "arms.gpt.cost must be a finite number"),
    ({"gpt": {"correct": True, "usage": {"calls": 1.5}}}, "arms.gpt.usage.calls must be a whole number"),
    ({"gpt": {"correct": True, "cost": 1, "signals": ["x"]}}, "arms.gpt.signals must be a list"),
    ({"other": {"correct": True, "cost": 1}}, "unknown arm 'other'"),
    ({}, "field 'arms' must be an object"),
])
def test_bad_graded_records_name_file_line_and_field(tmp_path: Path, arms: object, message: str) -> None:
    path = lines(tmp_path, {"id": "q0", "arms": {"gpt": {"correct": True, "cost": 0}}},
                 {"id": "q1", "arms": arms})
    with pytest.raises(DataError) as err:
        read_graded_log(path, arms=["gpt"])
    assert f"{path}:2: " in str(err.value) and message in str(err.value)


def test_multiple_choice_probabilities_and_gold_round_trip(tmp_path: Path) -> None:
    probs = {"A": 0.7, "B": 0.2, "C": 0.1}
    path = lines(tmp_path, {"id": "q1", "text": "T", "gold": "B", "arms": {
        "kgm": {"answer": "A", "correct": False, "cost": 0, "probabilities": probs},
        "llm": {"answer": "B", "correct": True, "cost": 1, "probabilities": {"A": 0.1, "B": 0.5, "C": 0.4}}}})
    log = read_graded_log(path)
    assert log.questions[0].gold == "B" and log.questions[0].arms["kgm"].probabilities == probs
    out = tmp_path / "back.jsonl"
    write_graded_log(out, log)
    assert read_graded_log(out) == log


@pytest.mark.parametrize("record, message", [
    ({"kgm": {"answer": "A", "correct": True, "cost": 0, "probabilities": {"A": 1.0}}},
     "arms.kgm.probabilities must be an object {CHOICE_LABEL: probability} over at least two choices"),
    ({"kgm": {"answer": "A", "correct": True, "cost": 0, "probabilities": {"A": 0.9, "B": "x"}}},
     "arms.kgm.probabilities.B must be a probability in [0, 1]"),
    ({"kgm": {"answer": "A", "correct": True, "cost": 0, "probabilities": {"A": 0.9, "B": 0.3}}},
     "arms.kgm.probabilities sums to 1.2000"),
    ({"kgm": {"answer": "D", "correct": True, "cost": 0, "probabilities": {"A": 0.9, "B": 0.1}}},
     "arms.kgm.answer 'D' is not one of the choices"),
    ({"kgm": {"answer": "A", "correct": True, "cost": 0, "probabilities": {"A": 0.9, "B": 0.1}},
      "llm": {"answer": "A", "correct": True, "cost": 1, "probabilities": {"A": 0.9, "C": 0.1}}},
     "the arms' probabilities name different choices"),
])
def test_bad_probabilities_name_file_line_and_field(tmp_path: Path, record: object, message: str) -> None:
    path = lines(tmp_path, {"id": "q0", "arms": {"kgm": {"correct": True, "cost": 0}}},
                 {"id": "q1", "arms": record})
    with pytest.raises(DataError) as err:
        read_graded_log(path)
    assert f"{path}:2: " in str(err.value) and message in str(err.value)


@pytest.mark.parametrize("gold, message", [
    ("C", "gold 'C' is not one of the choices"),
    ("B", "arms.kgm.correct is true but its answer 'A' is not the gold choice 'B'"),
    ("", "field 'gold' must be a non-empty choice label"),
])
def test_a_gold_choice_must_agree_with_the_arms(tmp_path: Path, gold: str, message: str) -> None:
    path = lines(tmp_path, {"id": "q1", "gold": gold, "arms": {
        "kgm": {"answer": "A", "correct": True, "cost": 0, "probabilities": {"A": 0.6, "B": 0.4}}}})
    with pytest.raises(DataError) as err:
        read_graded_log(path)
    assert f"{path}:1: " in str(err.value) and message in str(err.value)


def test_schemas_ship_with_the_package() -> None:
    assert schema("questions")["required"] == ["id", "text"]
    assert schema("graded_log")["required"] == ["id", "arms"]


def test_graded_log_types() -> None:
    q = GradedQuestion("q", "t", {"a": ArmOutcome("x", True, 1.0)})
    assert GradedLog((q,), ("a",)).outcome("a") == [ArmOutcome("x", True, 1.0)]


def test_generations_and_candidates_round_trip(tmp_path: Path) -> None:
    from kgwise.datasets.user import (
        Candidates,
        read_candidates,
        read_generations,
        write_candidates,
        write_generations,
    )

    g = tmp_path / "g.jsonl"
    write_generations(g, {"q1": "aspirin", "q2": "insulin\nmetformin"})
    assert read_generations(g) == {"q1": "aspirin", "q2": "insulin\nmetformin"}
    c = tmp_path / "c.jsonl"
    recs = [Candidates("q1", (("m.1", 0.9), ("m.2", 0.1)), ("m.1",)), Candidates("q2", (("x", 1.0),))]
    write_candidates(c, recs)
    assert list(read_candidates(c).values()) == recs
    assert schema("generations")["required"] == ["id", "answer"]
    assert schema("candidates")["required"] == ["id", "candidates"]
    g.write_text('{"id": "q1", "answer": "a"}\n{"id": "q1", "answer": "b"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"g\.jsonl.*2.*given twice"):
        read_generations(g)
    c.write_text('{"id": "q1", "candidates": [["a", "high"]]}\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"c\.jsonl.*1.*finite score"):
        read_candidates(c)


def test_the_recorded_obqa_log_carries_every_arms_choice_probabilities() -> None:
    log = read_graded_log(Path(__file__).parents[1] / "data" / "logs" / "obqa-local-probs.jsonl")
    assert len(log.questions) == 60 and len(log.arms) == 5
    for q in log.questions:
        assert q.gold in {"A", "B", "C", "D"}
        assert all(o.probabilities is not None and set(o.probabilities) == {"A", "B", "C", "D"}
                   for o in q.arms.values())


def test_the_recorded_csqa_log_grades_every_arm_by_its_top_choice() -> None:
    log = read_graded_log(Path(__file__).parents[1] / "data" / "logs" / "csqa-local-probs-1.5b.jsonl")
    assert len(log.questions) >= 100 and set(log.arms) == {
        "kgm", "smollm2-135m", "smollm2-135m+kg", "qwen2.5-coder-1.5b", "qwen2.5-coder-1.5b+kg"}
    assert len({q.text for q in log.questions}) == len(log.questions)  # eval pipeline --log keys by text
    for q in log.questions:
        assert q.gold in {"A", "B", "C", "D", "E"}
        for o in q.arms.values():
            assert o.probabilities is not None and set(o.probabilities) == {"A", "B", "C", "D", "E"}
            assert o.answer == max(o.probabilities, key=o.probabilities.__getitem__)
            assert o.correct == (o.answer == q.gold)
