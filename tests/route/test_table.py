"""The free arms' signals and the router context they join."""

from __future__ import annotations

import numpy as np
import pytest

from kgwise.errors import ConfigError
from kgwise.route.table import free_context, free_signal_row


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
