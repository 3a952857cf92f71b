"""Example questions made from the pipeline's own knowledge graph (what the web page offers a newcomer), so
that they are about the KG in use, whatever its domain.

Rule: for each of the ``count`` relations with the most edges, one fact ``(head, relation, tail)`` whose
answer side is the best connected (most edges) node, asked as a multiple-choice question whose choices
are its answer and ``choices − 1`` other nodes on the same side of that relation not linked to the
question's node by it, in label order. A relation named like a path (``people.person.nationality``,
``/r/IsA``, ``…#partOf``) is read by its last part; a dotted (Freebase-style) name is a property of the
head, asked ``What is the nationality of Barack Obama?`` (answer: the tail); any other is a verb phrase
between head and tail, asked ``What treats hypertension?`` (answer: the head). Only a graph held in memory
(:class:`~kgwise.kg.base.ArrayGraph`) lists its edges; another gets no examples. Nodes whose label is a
bare id (``m.0gw7kvp``) are left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from kgwise.kg.base import ArrayGraph, KnowledgeGraph

__all__ = ["Example", "kg_examples", "relation_words"]

_OPAQUE = re.compile(r"[a-z]\.[0-9a-z_]+")
"""A label that is a bare id (Freebase's ``m.0gw7kvp`` for a node without a name): never in an example."""
_TRIED = 1000
"""Facts and other answers looked at per relation, best connected first, for ones with names."""


@dataclass(frozen=True, slots=True)
class Example:
    """An example question and its answer choices (labels of the KG's nodes)."""

    question: str
    choices: tuple[str, ...]


def relation_words(name: str) -> tuple[str, bool]:
    """``(words, property)``: a relation's name as lower-case words (its last path part, camel case and
    ``_`` split) and whether it names a property of the head (a dotted, Freebase-style name)."""
    dotted = "." in name and "/" not in name and " " not in name
    last = re.split(r"[/#.:]", name.strip().strip("/#.:"))[-1]
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", " ", last).replace("_", " ").lower()
    return " ".join(words.split()), dotted


def kg_examples(kg: KnowledgeGraph, count: int = 3, choices: int = 3) -> tuple[Example, ...]:
    """Up to ``count`` example questions about ``kg`` (the module docstring's rule); none for a graph not
    held in memory, or whose relations have too few distinct nodes to make ``choices`` choices."""
    if not isinstance(kg, ArrayGraph) or kg.num_nodes == 0:
        return ()
    heads, rels, tails = kg.all_edges()
    if len(rels) == 0:
        return ()
    degree = kg.degree(np.arange(kg.num_nodes))

    def named(node: int) -> bool:
        return _OPAQUE.fullmatch(kg.label(node)) is None

    out: list[Example] = []
    for rel in np.argsort(-np.bincount(rels, minlength=len(kg.relations)), kind="stable"):
        if len(out) == count:
            break
        words, prop = relation_words(kg.relations[int(rel)])
        mask = rels == rel
        if not words or not mask.any():
            continue
        asked, answers = (heads[mask], tails[mask]) if prop else (tails[mask], heads[mask])
        facts = np.argsort(-degree[answers], kind="stable")[:_TRIED]  # best connected answers first
        best = next((int(i) for i in facts if named(int(asked[i])) and named(int(answers[i]))), None)
        if best is None:
            continue
        node, answer = int(asked[best]), int(answers[best])
        linked = set(answers[asked == node].tolist())
        others = [int(n) for n in np.unique(answers) if int(n) not in linked]
        others.sort(key=lambda n: (-int(degree[n]), n))
        picked = [n for n in others[:_TRIED] if named(n)][:choices - 1]
        labels = [kg.label(answer), *(kg.label(n) for n in picked)]
        if len(set(labels)) < choices:
            continue
        about = kg.label(node)
        question = f"What is the {words} of {about}?" if prop else f"What {words} {about}?"
        out.append(Example(question, tuple(sorted(labels, key=str.casefold))))
    return tuple(out)
