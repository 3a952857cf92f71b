"""Extractors by name: a new extraction strategy is one class and one :func:`register_extractor` call.

``P_sub`` registers in :mod:`kgwise.extract.subgraph`, ``P_RL`` in :mod:`kgwise.extract.path_agent` (whose
factory loads PyTorch only when it builds the agent); importing :mod:`kgwise.extract` registers both.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kgwise.embed import Encoder
from kgwise.errors import ConfigError
from kgwise.extract.base import Extractor
from kgwise.extract.neighbourhood import HubStats
from kgwise.kg.base import KnowledgeGraph

__all__ = ["EXTRACTORS", "ExtractorFactory", "ExtractorOptions", "make_extractor", "register_extractor"]


@dataclass(frozen=True, slots=True)
class ExtractorOptions:
    """What building an extractor may need besides the graph: ``policy``, a trained P_RL policy file;
    ``encoder``, the sentence encoder to share (``None``: the extractor's default); ``stats``, stored
    degrees and hub lists of the graph (a bound label index of an endpoint: P_sub then reads only short
    edge lists from it)."""

    policy: Path | None = None
    encoder: Encoder | None = None
    stats: HubStats | None = None


ExtractorFactory = Callable[[KnowledgeGraph, ExtractorOptions], Extractor]

EXTRACTORS: dict[str, ExtractorFactory] = {}
"""Registered extractors by name, in registration order."""


def register_extractor(name: str, factory: ExtractorFactory) -> None:
    """Make ``name`` buildable by :func:`make_extractor`; a name taken twice, empty or holding ``+`` is an
    error."""
    if not name or "+" in name or name in EXTRACTORS:
        raise ConfigError(f"extractor name {name!r} is empty, holds '+' or is registered twice")
    EXTRACTORS[name] = factory


def make_extractor(name: str, kg: KnowledgeGraph, options: ExtractorOptions | None = None) -> Extractor:
    """The registered extractor ``name`` over ``kg``; ``ConfigError`` listing the names for an unknown one."""
    factory = EXTRACTORS.get(name)
    if factory is None:
        raise ConfigError(f"unknown extractor {name!r}; choose one of {', '.join(EXTRACTORS)}")
    return factory(kg, options or ExtractorOptions())
