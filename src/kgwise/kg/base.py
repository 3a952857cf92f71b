"""The ``KnowledgeGraph`` protocol: what every KG store offers the rest of kgwise."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

__all__ = ["ArrayGraph", "BatchReader", "Direction", "EdgeArrays", "IdArray", "KnowledgeGraph",
           "normalise_label"]

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
    several nodes takes an array and is vectorised. ``name`` may be ``""``. (``isinstance`` against this
    protocol reads its properties, a query on a remote store; test a capability with its own protocol.)
    """

    name: str

    @property
    def num_nodes(self) -> int: ...

    @property
    def num_edges(self) -> int: ...

    @property
    def num_relations(self) -> int: ...

    def label(self, node: int) -> str:
        """The node's display label."""
        ...

    def text(self, node: int) -> str:
        """The node's description (a gloss, an ``rdfs:comment``), or ``""``."""
        ...

    @property
    def labels(self) -> Sequence[str]:
        """Every node's label in id order; ``ConfigError`` from a store that cannot list them (SPARQL)."""
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

    def degree(self, nodes: npt.ArrayLike, direction: Direction = "both") -> npt.NDArray[np.int64]:
        """Edges leaving (``out``), entering (``in``) or touching (``both``) each of ``nodes``."""
        ...

    def neighbors(self, nodes: npt.ArrayLike, direction: Direction = "both") -> IdArray:
        """Sorted unique nodes one hop from any of ``nodes``."""
        ...

    def edges_among(self, nodes: npt.ArrayLike) -> EdgeArrays:
        """Every edge whose head and tail are both in ``nodes`` (the induced subgraph)."""
        ...


@runtime_checkable
class ArrayGraph(Protocol):
    """Capability of a graph held whole in memory (``CSRGraph``): its edges as arrays, for the vectorised
    paths of P_sub and of a graph's fingerprint. Apart from ``KnowledgeGraph`` so that checking for it
    reads no property of a remote store."""

    @property
    def num_nodes(self) -> int: ...

    @property
    def relations(self) -> Sequence[str]:
        """Every relation's name in id order."""
        ...

    def degree(self, nodes: npt.ArrayLike, direction: Direction = "both") -> npt.NDArray[np.int64]: ...

    def incident(self, nodes: npt.ArrayLike, direction: Direction = "both") -> EdgeArrays:
        """Every edge leaving (``out``), entering (``in``) or touching (``both``) any of ``nodes``, out-edges
        first, each part grouped by node in the order of ``nodes``."""
        ...

    def all_edges(self) -> EdgeArrays:
        """Every edge as ``(heads, relations, tails)``."""
        ...

    def aliases(self, node: int) -> tuple[str, ...]:
        """The other names a source gives ``node`` (synonyms, surface forms, ``skos:altLabel``)."""
        ...

    def alias_pairs(self) -> tuple[IdArray, Sequence[str]]:
        """Every alias as ``(nodes, names)``, aligned."""
        ...


@runtime_checkable
class BatchReader(Protocol):
    """Capability of a graph read over a network (``SPARQLGraph``): many nodes' edge lists in one round
    trip, kept for the ``out_edges``/``in_edges`` calls that follow."""

    def prefetch(self, nodes: Iterable[int], out: bool | None = None) -> int:
        """Read the uncached edge lists of ``nodes``: outgoing, incoming, or both (``None``); the number
        of queries sent."""
        ...

    def edges_among(self, nodes: npt.ArrayLike, large: Collection[int] = ()) -> EdgeArrays:
        """Every edge among ``nodes``, never reading the whole edge list of a node in ``large``."""
        ...
