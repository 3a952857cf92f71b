"""``answer_file``: a file of questions through the pipeline — every answer written as it is made, a rerun
answers only what is missing, refused questions named, a torn last line cut off.

Unit tests of the batch loop over the pipeline's test-double arms (``StubArm``, ``FakeEncoder``); the
CLI test in ``tests/cli/test_pipeline_cli.py`` runs it with a real model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgwise.app.batch import answer_file
from kgwise.errors import ConfigError
from kgwise.files import TornLineWarning

from .conftest import dev_rows, write_questions
from .test_pipeline import make


def _rows(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_every_question_is_answered_once_and_a_rerun_resumes(tmp_path: Path) -> None:
    questions = write_questions(tmp_path, dev_rows()[:6])
    out = tmp_path / "answers.jsonl"
    with make(tmp_path, budget=100.0) as pipe:
        first = answer_file(pipe, questions, out, progress=False)
        assert (first.questions, first.answered, first.resumed, first.refused) == (6, 6, 0, {})
        rows = _rows(out)
        assert [r["id"] for r in rows] == [f"q{i}" for i in range(6)]
        assert all(r["decision"] and r["arm"] in {"cheap", "dear", "free"} for r in rows)
        assert all("answer_set" in r for r in rows)
        assert first.cost == pytest.approx(sum(float(str(r["cost"])) for r in rows))
        again = answer_file(pipe, questions, out, progress=False)
        assert (again.answered, again.resumed) == (0, 6) and len(_rows(out)) == 6
        assert pipe.status().questions == 6  # nothing answered twice


def test_a_torn_last_line_is_cut_and_that_question_asked_again(tmp_path: Path) -> None:
    questions = write_questions(tmp_path, dev_rows()[:3])
    out = tmp_path / "answers.jsonl"
    with make(tmp_path, budget=100.0) as pipe:
        answer_file(pipe, questions, out, progress=False)
        lines = out.read_text(encoding="utf-8").splitlines(keepends=True)
        out.write_text("".join(lines[:2]) + lines[2][:15], encoding="utf-8")
        with pytest.warns(TornLineWarning, match="last line was torn"):
            report = answer_file(pipe, questions, out, progress=False)
    assert (report.answered, report.resumed) == (1, 2)
    assert [r["id"] for r in _rows(out)] == ["q0", "q1", "q2"]


def test_refused_questions_are_named_not_written_and_asked_again(tmp_path: Path) -> None:
    questions = write_questions(tmp_path, dev_rows()[:8])
    out = tmp_path / "answers.jsonl"
    with make(tmp_path, cheap=0.4, dear=0.4, budget=1.0, free=False) as pipe:
        report = answer_file(pipe, questions, out, progress=False)
    assert report.answered + len(report.refused) == 8 and report.refused
    assert all("budget" in why for why in report.refused.values())
    assert {r["id"] for r in _rows(out)}.isdisjoint(report.refused)


def test_the_answers_file_may_not_be_the_questions_file_nor_a_foreign_file(tmp_path: Path) -> None:
    questions = write_questions(tmp_path, dev_rows()[:2])
    with make(tmp_path, budget=100.0) as pipe:
        with pytest.raises(ConfigError, match="is also the questions file"):
            answer_file(pipe, questions, questions, progress=False)
        foreign = tmp_path / "notes.jsonl"
        foreign.write_text('{"note": 1}\n', encoding="utf-8")
        with pytest.raises(ConfigError, match=r"notes.jsonl:1: not a row of `kgwise ask --questions`"):
            answer_file(pipe, questions, foreign, progress=False)
