"""Arms: cost from usage and the price table, replayed predictors, scoring of live predictions."""

from __future__ import annotations

import pytest

from kgwise.errors import ConfigError
from kgwise.llm.prices import default_prices
from kgwise.route.arms import Arm, ArmResult, ReplayMissError, ReplayPredictor, score_prediction
from kgwise.types import Choice, Question, Usage

Q = Question("q1", "who wrote hamlet?", gold=("William Shakespeare",))
MC = Question("m1", "2+2?", choices=(Choice("A", "3"), Choice("B", "4")), gold=("B",))


def test_token_priced_arm_cost() -> None:
    usage = Usage(input_tokens=1000, output_tokens=500, calls=1)
    pred = ReplayPredictor("gpt4", {"q1": ArmResult("Shakespeare", usage, correct=False)})
    arm = Arm("gpt4", "LLM", pred, price_model="gpt-4")
    price = default_prices().lookup("gpt-4")
    assert price is not None
    assert arm.cost(usage) == pytest.approx((1000 * price.input + 500 * price.output) / 1e6)
    assert arm.cost_bound(Q) == arm.cost(usage)
    result, correct, cost = arm.answer(Q)
    assert result.prediction == "Shakespeare" and correct is False and cost == arm.cost(usage)


def test_per_call_arm_and_scoring() -> None:
    class EchoPredictor:  # test double: a live predictor that answers without knowing the gold answer
        def answer(self, question: Question) -> ArmResult:
            return ArmResult("it was William Shakespeare", Usage(calls=2))

        def usage_bound(self, question: Question) -> Usage:
            return Usage(calls=2)

    arm = Arm("echo", "KGM", EchoPredictor(), per_call=1.0)
    _, correct, cost = arm.answer(Q)
    assert correct and cost == 2.0
    assert score_prediction(MC, "B") and not score_prediction(MC, "A")


def test_errors() -> None:
    pred = ReplayPredictor("x", {})
    with pytest.raises(ReplayMissError):
        pred.answer(Q)
    with pytest.raises(ConfigError):
        Arm("x", "GPU", pred)  # type: ignore[arg-type]
    with pytest.raises(ConfigError):
        Arm("x", "LLM", pred, price_model="no-such-model-xyz")
    with pytest.raises(ConfigError):
        Arm("x", "LLM", pred, per_call=-1)
