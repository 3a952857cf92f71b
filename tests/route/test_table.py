"""Graded logs: rewards per arm (NaN where not graded), and malformed lines named by file and line."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kgwise.errors import ConfigError, DataError
from kgwise.route.table import free_context, free_signal_row, read_graded_log


def _write(path: Path, *lines: object) -> Path:
    path.write_text("\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines) + "\n")
    return path


def test_read_graded_log(tmp_path: Path) -> None:
    log = _write(tmp_path / "log.jsonl", {"question": "Who wrote Hamlet?", "rewards": {"big": 1, "gnn": 0}},
                 "", {"question": "Where is Kingston?", "rewards": {"small": 0.5, "big": True}})
    texts, rewards = read_graded_log(log, ["gnn", "small", "big"])
    assert texts == ["Who wrote Hamlet?", "Where is Kingston?"]
    assert np.array_equal(rewards, [[0.0, np.nan, 1.0], [np.nan, 0.5, 1.0]], equal_nan=True)


@pytest.mark.parametrize(("line", "message"), [
    ({"question": "q", "rewards": {"gpu": 1}}, "unknown arm 'gpu'; the router's arms: gnn, big"),
    ({"question": "q", "rewards": {"big": 2}}, r"reward of 'big' must be a number in \[0, 1\], got 2"),
    ({"question": "q", "rewards": {"big": "yes"}}, "reward of 'big'"),
    ({"question": "", "rewards": {"big": 1}}, '"question"'),
    ({"question": "q", "rewards": {}}, '"rewards"'),
    ("not json", "invalid JSON"),
])
def test_malformed_graded_logs_are_named(tmp_path: Path, line: object, message: str) -> None:
    log = _write(tmp_path / "log.jsonl", {"question": "fine", "rewards": {"gnn": 1}}, line)
    with pytest.raises(DataError, match=message) as err:
        read_graded_log(log, ["gnn", "big"])
    assert "log.jsonl" in str(err.value) and ":2" in str(err.value)


def test_empty_or_missing_graded_log(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no questions"):
        read_graded_log(_write(tmp_path / "empty.jsonl", ""), ["gnn"])
    with pytest.raises(DataError, match="graded log not found"):
        read_graded_log(tmp_path / "nope.jsonl", ["gnn"])


def test_free_signals_say_whether_the_free_arms_agree_and_how_sure_they_are() -> None:
    assert free_signal_row([("m.1", 0.9), ("m.1", 0.6)]) == [1.0, 0.9, 0.6, 0.6]
    assert free_signal_row([("m.1", 0.9), ("m.2", 0.6)]) == [0.0, 0.9, 0.6, 0.0]
    assert free_signal_row([("", 0.0), ("", 0.0)]) == [0.0, 0.0, 0.0, 0.0]  # no answer: no agreement
    ctx = free_context([[1.0, 0.9, 0.6, 0.6]], [[0.5, -0.5]])
    assert ctx.tolist() == [[1.0, 1.0, 0.9, 0.6, 0.6, 0.5, -0.5]]  # intercept, signals, embedding
    with pytest.raises(ConfigError, match="at least one free arm"):
        free_signal_row([])
    with pytest.raises(ConfigError, match="for 1 questions, embeddings for 2"):
        free_context([[1.0]], np.zeros((2, 3)))
