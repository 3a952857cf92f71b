"""AoG and GPT-family readers on the real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from kgwise.datasets import load
from kgwise.errors import DataError
from kgwise.eval.recorded import estimate_tokens, question_key
from kgwise.eval.recorded.aog import AOG_WEBQSP, read_aog
from kgwise.eval.recorded.gpt_family import GPT_FILES, read_answers, score_answers


def test_aog_reader(data_dir: Path) -> None:
    rows = read_aog(data_dir / AOG_WEBQSP)
    assert len(rows) == 1_636
    first = rows[0]
    assert first.question == "where does the columbia river start?" and first.correct
    assert (first.input_tokens, first.output_tokens, first.calls) == (4290, 242, 8)
    assert not first.tokens_estimated
    assert sum(r.correct for r in rows) / len(rows) == pytest.approx(0.8185, abs=1e-4)


def test_gpt_family_scoring(data_dir: Path) -> None:
    questions = load("webqsp", "test", data_dir)
    gold = {question_key(q.text): q.gold for q in questions if q.gold}
    raw = read_answers(data_dir / GPT_FILES["chatgpt"])
    assert len(raw) == 4_737 and raw[0].idx == 0 and raw[0].question == "what does jamaican people speak"
    scored = score_answers(raw, gold)
    assert len({r.key for r in scored}) == len(gold)  # every test question with gold names is answered
    acc = sum(r.correct for r in scored) / len(scored)
    assert 0.6 < acc < 0.75  # ChatGPT's WebQSP hit rate by name matching (Tan et al. report ~0.66 EM-hit)
    ken = next(r for r in scored if r.question == "who plays ken barlow in coronation street")
    assert ken.correct and ken.tokens_estimated and ken.input_tokens == estimate_tokens(ken.question)
    gpt4 = read_answers(data_dir / GPT_FILES["gpt-4"])
    assert len(gpt4) == 500


def test_gpt_reader_errors(tmp_path: Path) -> None:
    f = tmp_path / "a.txt"
    f.write_text("0\tq\ta\nnot a row\n")
    with pytest.raises(DataError, match=":2:"):
        read_answers(f)
    with pytest.raises(DataError):
        read_aog(tmp_path / "missing.jsonl")


def test_question_key_and_tokens() -> None:
    assert question_key("where is jam ##ar ##cus russell from ") == question_key(
        "Where is JaMarcus Russell from?"
    )
    assert estimate_tokens("") == 0 and estimate_tokens("abcde") == 2
