"""Arms of the Coke router: a model (KG model or LLM) with a cluster, a unit cost and a predictor.

What the router itself needs of an arm is :class:`ArmInfo`: its name (the label the router returns), its
cluster and its reported accuracy. :class:`ArmSpec` is that alone; :class:`Arm` adds the predictor.

A predictor is anything with ``answer(question) -> ArmResult`` and ``usage_bound(question) -> Usage`` (an
upper bound on what the call will spend, known before calling; the router's budget check uses it). It is
live (an LLM backend, the knowledge injector, a KG model) or replayed from recorded outcomes
(:class:`ReplayPredictor`). The arm turns usage into cost: ``per_call × calls`` plus, when ``price_model``
is set, token fees from the price table (``kgwise.llm.prices``) — Coke's ``p(a)‖q_a‖`` (Eq. 14).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable

from kgwise.errors import ConfigError, ReplayMissError
from kgwise.grading import match_answer
from kgwise.llm.prices import Price, PriceTable, default_prices
from kgwise.types import Question, Usage

__all__ = [
    "CLUSTERS",
    "Arm",
    "ArmInfo",
    "ArmResult",
    "ArmSpec",
    "Cluster",
    "Predictor",
    "ReplayMissError",
    "ReplayPredictor",
    "score_prediction",
]

Cluster = Literal["KGM", "LLM"]
CLUSTERS: tuple[Cluster, ...] = ("KGM", "LLM")


class ArmInfo(Protocol):
    """What the router and an outcome table need to know of an arm."""

    @property
    def name(self) -> str: ...
    @property
    def cluster(self) -> Cluster: ...
    @property
    def reported_accuracy(self) -> float | None: ...


def _check_arm_info(name: str, cluster: str, reported_accuracy: float | None) -> None:
    if not isinstance(name, str) or not name:
        raise ConfigError(f"an arm's name must be a non-empty string, got {name!r}")
    if cluster not in CLUSTERS:
        raise ConfigError(f"arm {name!r}: cluster must be one of {CLUSTERS}, got {cluster!r}")
    if reported_accuracy is not None and not 0.0 <= reported_accuracy <= 1.0:
        raise ConfigError(f"arm {name!r}: reported_accuracy must lie in [0, 1], got {reported_accuracy}")


@dataclass(frozen=True, slots=True)
class ArmSpec:
    """An arm as the router knows it: ``name``, ``cluster`` (``KGM`` or ``LLM``) and, if known, the
    accuracy its authors report (the prior of its cluster, Coke Eq. 3–4)."""

    name: str
    cluster: Cluster
    reported_accuracy: float | None = None

    def __post_init__(self) -> None:
        _check_arm_info(self.name, self.cluster, self.reported_accuracy)


@dataclass(frozen=True, slots=True)
class ArmResult:
    """What an arm answered: ``prediction`` (a choice label or answer text), ``usage``, and ``correct``
    when the predictor knows it (replayed outcomes); ``None`` means "score against the gold answer"."""

    prediction: str
    usage: Usage
    correct: bool | None = None


@runtime_checkable
class Predictor(Protocol):
    """Answers a question and bounds its own usage in advance."""

    def answer(self, question: Question) -> ArmResult: ...

    def usage_bound(self, question: Question) -> Usage: ...


@dataclass(frozen=True)
class ReplayPredictor:
    """Replays recorded outcomes keyed by question id (usage bound = the recorded usage)."""

    name: str
    outcomes: Mapping[str, ArmResult]

    def answer(self, question: Question) -> ArmResult:
        try:
            return self.outcomes[question.id]
        except KeyError:
            msg = f"arm {self.name!r} has no recorded outcome for {question.ref}"
            raise ReplayMissError(msg) from None

    def usage_bound(self, question: Question) -> Usage:
        return self.answer(question).usage


def score_prediction(question: Question, prediction: str) -> bool:
    """Multiple choice: the predicted label is gold. KGQA: a gold name matches the text (normalised)."""
    if question.is_multiple_choice:
        return prediction.strip() in question.gold
    return match_answer(prediction, question.gold)


@dataclass(frozen=True)
class Arm:
    """A routable model. ``cost(usage) = per_call·calls + price_model's token fees`` (dollars or calls)."""

    name: str
    cluster: Cluster
    predictor: Predictor
    per_call: float = 0.0
    price_model: str | None = None
    reported_accuracy: float | None = None
    prices: PriceTable | None = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        _check_arm_info(self.name, self.cluster, self.reported_accuracy)
        if self.per_call < 0:
            raise ConfigError(f"arm {self.name!r}: per_call cost must be ≥ 0, got {self.per_call}")
        if self.price_model is not None:
            self._price()  # fail early on an unknown model

    def _price(self) -> Price:
        assert self.price_model is not None
        table = self.prices or default_prices()
        price = table.lookup(self.price_model)
        if price is None:
            raise ConfigError(f"arm {self.name!r}: model {self.price_model!r} is not in the price table")
        return price

    def cost(self, usage: Usage) -> float:
        """Cost of ``usage`` on this arm (Eq. 14's ``p(a)‖q_a‖``)."""
        total = self.per_call * usage.calls
        if self.price_model is not None:
            total += self._price().cost(usage.input_tokens, usage.output_tokens)
        return total

    def cost_bound(self, question: Question) -> float:
        """Upper bound on the cost of answering ``question`` (from the predictor's usage bound)."""
        return self.cost(self.predictor.usage_bound(question))

    def answer(self, question: Question) -> tuple[ArmResult, bool, float]:
        """Call the predictor: ``(result, correct, cost)``; correctness scored when not recorded."""
        result = self.predictor.answer(question)
        correct = result.correct
        if correct is None:
            correct = score_prediction(question, result.prediction)
        return result, correct, self.cost(result.usage)
