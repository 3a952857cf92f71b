"""ReaRev ``test.info`` scored candidates and RoG ``predictions.jsonl`` readers (used by UAG's baselines)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kgwise.errors import DataError
from kgwise.eval.recorded.gnn_rag import (
    REAREV_TEST_INFO,
    ROG_GNN_PREDICTIONS,
    read_rog_predictions,
    read_test_info_candidates,
)


def test_real_files(data_dir: Path) -> None:
    info = read_test_info_candidates(data_dir / REAREV_TEST_INFO["rearev-sbert"])
    assert len(info) == 1639
    assert info[0].answers == ("m.01428y", "m.04ygk0") and info[0].hit
    assert info[0].candidates[0] == ("m.01428y", pytest.approx(0.5187, abs=1e-4))
    rog = read_rog_predictions(data_dir / ROG_GNN_PREDICTIONS["rearev-sbert"])
    assert len(rog) == 1628 and rog[0].qid == "WebQTest-0"
    assert "Reasoning Paths:" in rog[0].prompt and rog[0].answer.startswith("Jamaican English")


def test_malformed_lines_name_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "test.info"
    good = {"question": "q", "answers": ["m.1"], "cand": [["m.1", 0.5]], "hit": 1.0}
    broken = {"question": "q", "cand": [["m.1"]], "hit": 0}  # no answers
    bad.write_text(json.dumps(good) + "\n" + json.dumps(broken) + "\n")
    with pytest.raises(DataError, match=r"test.info:2:"):
        read_test_info_candidates(bad)
    preds = tmp_path / "predictions.jsonl"
    preds.write_text(json.dumps({"id": "a", "input": "p"}) + "\n")
    with pytest.raises(DataError, match=r"predictions.jsonl:1:"):
        read_rog_predictions(preds)
