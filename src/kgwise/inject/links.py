"""What a KG's direct links say about a multiple-choice answer, with no LLM (``eval knowgpt``'s "KG links"
row).

A choice's link count is the number of KG edges between its nodes and the question's nodes. Answering
with the most-linked choice, ties broken uniformly at random (scored as their expectation), is a KG-only
baseline. Where it is near chance, the links touch the right and the wrong choices alike, so knowledge
built from them can help an LLM only by what the facts say, not by which choice they mention: CSQA's
choices were chosen as concepts that share a ConceptNet relation with the question's concept (Talmor et
al. 2019), and its ConceptNet slice holds exactly those links.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from kgwise.kg.base import KnowledgeGraph
from kgwise.kg.grounding import Grounder, Grounding
from kgwise.types import Question

__all__ = ["link_baseline", "link_counts"]


def link_counts(kg: KnowledgeGraph, grounding: Grounding) -> npt.NDArray[np.int64]:
    """Per choice, the KG edges (either direction) between the choice's nodes and the question's nodes."""
    q_nodes = np.asarray(grounding.question_nodes, dtype=np.int64)
    counts = np.zeros(len(grounding.choice_nodes), dtype=np.int64)
    if q_nodes.size == 0:
        return counts
    for i, nodes in enumerate(grounding.choice_nodes):
        c_nodes = np.asarray(nodes, dtype=np.int64)
        if c_nodes.size == 0:
            continue
        heads, _, tails = kg.edges_among(np.union1d(q_nodes, c_nodes))
        forward = np.isin(heads, q_nodes) & np.isin(tails, c_nodes)
        backward = np.isin(heads, c_nodes) & np.isin(tails, q_nodes)
        counts[i] = int(np.sum(forward | backward))
    return counts


def link_baseline(kg: KnowledgeGraph, grounder: Grounder, questions: Sequence[Question]) -> dict[str, Any]:
    """The most-linked-choice baseline on the multiple-choice questions with a gold choice: ``accuracy``
    (ties split evenly; all-zero counts are a five-way tie), ``gold_alone_most_linked`` (the gold choice
    has strictly the most links), ``all_choices_linked`` and ``no_choice_linked`` (shares of questions),
    and ``chance`` (the mean of 1 / number of choices)."""
    accuracy, alone, every, none, chance = [], [], [], [], []
    for q in questions:
        if not q.choices or not set(q.gold) & {c.label for c in q.choices}:
            continue
        counts = link_counts(kg, grounder.ground(q))
        top = counts == counts.max()
        gold = q.gold_index
        accuracy.append(float(top[gold]) / int(top.sum()))
        alone.append(bool(top[gold] and top.sum() == 1 and counts[gold] > 0))
        every.append(bool(np.all(counts > 0)))
        none.append(bool(np.all(counts == 0)))
        chance.append(1.0 / len(counts))
    if not accuracy:
        return {"n": 0}

    def share(values: list[bool] | list[float]) -> float:
        return float(np.mean(values))

    return {"n": len(accuracy), "accuracy": share(accuracy), "gold_alone_most_linked": share(alone),
            "all_choices_linked": share(every), "no_choice_linked": share(none), "chance": share(chance)}
