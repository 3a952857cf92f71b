"""The free arms' signals and the router context they join."""

from __future__ import annotations

import numpy as np
import pytest

from kgwise.errors import ConfigError
from kgwise.route.table import OutcomeTable, free_context, free_signal_row


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


def test_the_budgeted_oracle_buys_the_cheapest_right_answers_first() -> None:
    # arms: free (cost 0), cheap (1), dear (3); questions: free right; only cheap right; only dear right;
    # cheap and dear right; nobody right
    correct = np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 1, 1], [0, 0, 0]], dtype=bool)
    cost = np.tile([0.0, 1.0, 3.0], (5, 1))
    n = len(correct)
    table = OutcomeTable(tuple(map(str, range(n))), tuple(f"q{i}" for i in range(n)),
                         ("free", "cheap", "dear"), ("KGM", "LLM", "LLM"), (0.5, 0.5, 0.5), correct, cost)
    rows = np.arange(n)
    assert table.budgeted_oracle(rows, 0.0) == pytest.approx(1 / 5)  # the free arm's right answer only
    assert table.budgeted_oracle(rows, 1.0) == pytest.approx(2 / 5)
    assert table.budgeted_oracle(rows, 2.0) == pytest.approx(3 / 5)  # cheap where it is right, not dear
    assert table.budgeted_oracle(rows, 4.9) == pytest.approx(3 / 5)  # dear's 3 does not fit in 2.9
    assert table.budgeted_oracle(rows, 5.0) == pytest.approx(4 / 5)  # = the oracle: some arm right
    assert table.budgeted_oracle(rows, 1e9) == pytest.approx(4 / 5)
    assert table.budgeted_oracle(np.array([2, 4]), 3.0) == pytest.approx(1 / 2)
    with pytest.raises(ConfigError, match="at least one question"):
        table.budgeted_oracle(np.array([], dtype=np.int64), 1.0)
