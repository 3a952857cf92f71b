"""Knowledge-graph storage and access."""

from kgwise.kg.base import KnowledgeGraph, normalise_label
from kgwise.kg.csr import CSRGraph

__all__ = ["CSRGraph", "KnowledgeGraph", "normalise_label"]
