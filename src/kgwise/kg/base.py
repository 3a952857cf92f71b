"""The ``KnowledgeGraph`` protocol: what every KG store offers the rest of kgwise."""

from __future__ import annotations

from typing import Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["Direction", "EdgeArrays", "IdArray", "KnowledgeGraph", "normalise_label"]

IdArray = npt.NDArray[np.int32]
Direction = Literal["out", "in", "both"]
EdgeArrays = tuple[IdArray, IdArray, IdArray]
"""Edges as three aligned arrays ``(heads, relations, tails)``."""


def normalise_label(text: str) -> str:
    """The key labels are looked up by: lower case, ``_`` as space, single spaces, stripped."""
    return " ".join(text.replace("_", " ").lower().split())


@runtime_checkable
class KnowledgeGraph(Protocol):
    """A directed, relation-labelled multigraph with integer node and relation ids.

    Node ids are ``0 … num_nodes-1`` and relation ids ``0 … num_relations-1``. Every operation that takes
    several nodes takes an array and is vectorised.
    """

    @property
    def num_nodes(self) -> int: ...

    @property
    def num_edges(self) -> int: ...

    @property
    def num_relations(self) -> int: ...

    def label(self, node: int) -> str:
        """The node's display label."""
        ...

    def relation_name(self, relation: int) -> str: ...

    def find(self, label: str) -> int | None:
        """The node whose normalised label equals ``normalise_label(label)``, or ``None``."""
        ...

    def out_edges(self, node: int) -> tuple[IdArray, IdArray]:
        """``(relations, tails)`` of the edges leaving ``node``."""
        ...

    def in_edges(self, node: int) -> tuple[IdArray, IdArray]:
        """``(relations, heads)`` of the edges entering ``node``."""
        ...

    def neighbors(self, nodes: npt.ArrayLike, direction: Direction = "both") -> IdArray:
        """Sorted unique nodes one hop from any of ``nodes``."""
        ...

    def edges_among(self, nodes: npt.ArrayLike) -> EdgeArrays:
        """Every edge whose head and tail are both in ``nodes`` (the induced subgraph)."""
        ...
