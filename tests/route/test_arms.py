"""Arms as the router knows them, and scoring of live predictions."""

from __future__ import annotations

import pytest

from kgwise.errors import ConfigError
from kgwise.route.arms import ArmSpec, score_prediction
from kgwise.types import Choice, Question

Q = Question("q1", "who wrote hamlet?", gold=("William Shakespeare",))
MC = Question("m1", "2+2?", choices=(Choice("A", "3"), Choice("B", "4")), gold=("B",))


def test_scoring() -> None:
    assert score_prediction(Q, "it was William Shakespeare") and not score_prediction(Q, "Marlowe")
    assert score_prediction(MC, "B") and not score_prediction(MC, "A")


def test_errors() -> None:
    with pytest.raises(ConfigError, match="cluster must be one of"):
        ArmSpec("x", "GPU")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="non-empty string"):
        ArmSpec("", "LLM")
    with pytest.raises(ConfigError, match=r"reported_accuracy must lie in \[0, 1\]"):
        ArmSpec("x", "LLM", 1.5)
