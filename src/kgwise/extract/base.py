"""The ``Extractor`` protocol: one knowledge-extraction strategy (P_sub, P_RL, …) of KnowGPT §3.2.1."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from kgwise.kg.grounding import Grounding
from kgwise.types import Question, Subgraph

__all__ = ["Extractor"]


@runtime_checkable
class Extractor(Protocol):
    """Turns a grounded question into the knowledge (node/edge ids and paths) to show the model."""

    def extract(self, question: Question, grounding: Grounding) -> Subgraph:
        """The ``Subgraph`` of KG ids for ``question``, whose concepts are ``grounding``."""
        ...
