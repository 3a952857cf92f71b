"""Arms of the Coke router: what the router needs of an arm (:class:`ArmInfo`: its name, the label the
router returns; its cluster; its reported accuracy), :class:`ArmSpec` holding that alone, and
:func:`score_prediction`, how an arm's prediction is graded against a question's gold answer. What runs an
arm and prices its calls is the pipeline's (:mod:`kgwise.app.arms`) or an evaluation's
(:mod:`kgwise.eval.route.live`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from kgwise.errors import ConfigError
from kgwise.grading import match_answer
from kgwise.types import Question

__all__ = ["CLUSTERS", "ArmInfo", "ArmSpec", "Cluster", "score_prediction"]

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


@dataclass(frozen=True, slots=True)
class ArmSpec:
    """An arm as the router knows it: ``name``, ``cluster`` (``KGM`` or ``LLM``) and, if known, the
    accuracy its authors report (the prior of its cluster, Coke Eq. 3–4)."""

    name: str
    cluster: Cluster
    reported_accuracy: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"an arm's name must be a non-empty string, got {self.name!r}")
        if self.cluster not in CLUSTERS:
            raise ConfigError(f"arm {self.name!r}: cluster must be one of {CLUSTERS}, got {self.cluster!r}")
        if self.reported_accuracy is not None and not 0.0 <= self.reported_accuracy <= 1.0:
            raise ConfigError(f"arm {self.name!r}: reported_accuracy must lie in [0, 1], got "
                              f"{self.reported_accuracy}")


def score_prediction(question: Question, prediction: str) -> bool:
    """Multiple choice: the predicted label is gold. KGQA: a gold name matches the text (normalised)."""
    if question.is_multiple_choice:
        return prediction.strip() in question.gold
    return match_answer(prediction, question.gold)
