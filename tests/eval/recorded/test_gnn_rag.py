"""GNN-RAG readers agree with the release's own summaries (eval_result.txt) and ReaRev's Hits@1."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgwise.errors import DataError
from kgwise.eval.recorded import question_key
from kgwise.eval.recorded.gnn_rag import (
    LLAMA2_CHAT_DETAILED,
    REAREV_TEST_INFO,
    ROG_GNN_DETAILED,
    read_detailed_eval,
    read_eval_summary,
    read_rog_predictions,
    rearev_outcomes,
)
from kgwise.grading import match_answer


@pytest.mark.parametrize("variant", sorted(ROG_GNN_DETAILED))
def test_detailed_hits_match_eval_result(data_dir: Path, variant: str) -> None:
    path = data_dir / ROG_GNN_DETAILED[variant]
    rows = read_detailed_eval(path)
    summary = read_eval_summary(path.with_name("eval_result.txt"))
    assert len(rows) == 1_628
    assert 100 * sum(r.correct for r in rows) / len(rows) == pytest.approx(summary["Hit"], abs=1e-9)
    assert all(r.qid.startswith("WebQTest-") for r in rows)


def test_llama2_chat_hits_and_our_matcher(data_dir: Path) -> None:
    path = data_dir / LLAMA2_CHAT_DETAILED
    rows = read_detailed_eval(path)
    summary = read_eval_summary(path.with_name("eval_result.txt"))
    assert 100 * sum(r.correct for r in rows) / len(rows) == pytest.approx(summary["Hit"], abs=1e-9)
    # kgwise's answer matcher reproduces the release's hit on ≥ 99% of questions
    raw = [json.loads(line) for line in path.read_text().splitlines()]
    agree = sum(match_answer("\n".join(r["prediction"]), r["ground_truth"]) == bool(r["hit"]) for r in raw)
    assert agree / len(raw) >= 0.99


def test_prompts_align_with_detailed(data_dir: Path) -> None:
    detailed = data_dir / ROG_GNN_DETAILED["rearev-sbert"]
    predictions = read_rog_predictions(detailed.with_name("predictions.jsonl"))
    prompts = {r.qid: (r.question, r.prompt) for r in predictions}
    ids = {r.qid for r in read_detailed_eval(detailed)}
    assert set(prompts) == ids
    q, prompt = prompts["WebQTest-0"]
    assert q == "what does jamaican people speak" and "Reasoning Paths:" in prompt


@pytest.mark.parametrize(("variant", "hits1"), [("rearev-sbert", 0.7639), ("rearev-lmsr", 0.7773)])
def test_rearev_hits(data_dir: Path, variant: str, hits1: float) -> None:
    rows = rearev_outcomes(data_dir / REAREV_TEST_INFO[variant])
    assert len(rows) == 1_639
    assert sum(r.correct for r in rows) / len(rows) == pytest.approx(hits1, abs=1e-4)
    assert question_key(rows[3].question) == question_key("where is jamarcus russell from")


def test_bad_files(tmp_path: Path) -> None:
    bad = tmp_path / "detailed_eval_result.jsonl"
    bad.write_text('{"id": "q1", "hit": 1, "prediction": []}\n{oops\n')
    with pytest.raises(DataError, match=":2:"):
        read_detailed_eval(bad)
    bad.write_text('{"id": "q1"}\n')
    with pytest.raises(DataError, match="missing"):
        read_detailed_eval(bad)
    with pytest.raises(DataError):
        read_eval_summary(tmp_path / "nope.txt")
