"""What a KG's direct links say about a multiple-choice answer, with no LLM (``eval knowgpt``'s row "most
KG-linked choice").

A choice's link count is the number of KG edges between its nodes and the question's nodes. Answering
with the most-linked choice, ties broken uniformly at random (scored as their expectation), is a KG-only
baseline. Where it is near chance, the links touch the right and the wrong choices alike, so knowledge
built from them can help an LLM only by what the facts say, not by which choice they mention. CSQA is
built that way: most of its choices were chosen as concepts that share one ConceptNet relation with the
question's concept (Talmor et al. 2019).
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
    all_choices = np.asarray(grounding.all_choice_nodes, dtype=np.int64)
    if q_nodes.size == 0 or all_choices.size == 0:
        return counts
    heads, _, tails = kg.edges_among(np.union1d(q_nodes, all_choices))  # one graph query per question
    head_in_q = np.isin(heads, q_nodes)
    crossing = head_in_q != np.isin(tails, q_nodes)
    other_end = np.where(head_in_q, tails, heads)[crossing]
    for i, nodes in enumerate(grounding.choice_nodes):
        counts[i] = int(np.isin(other_end, np.asarray(nodes, dtype=np.int64)).sum())
    return counts


def link_baseline(kg: KnowledgeGraph, grounder: Grounder, questions: Sequence[Question]) -> dict[str, Any]:
    """The most-linked-choice baseline on the multiple-choice questions with a gold choice: ``accuracy``
    (ties split evenly; no link at all is a tie of every choice), ``gold_alone_most_linked`` (the gold choice
    has strictly the most links), ``all_choices_linked`` and ``no_choice_linked`` (shares of questions),
    and ``chance`` (the mean of 1 / number of choices)."""
    rows: list[tuple[float, float, float, float, float]] = []
    for q in questions:
        if not q.choices or not set(q.gold) & {c.label for c in q.choices}:
            continue
        counts = link_counts(kg, grounder.ground(q))
        top = counts == counts.max()
        gold, ties = q.gold_index, int(top.sum())
        rows.append((float(top[gold]) / ties, float(top[gold] and ties == 1 and counts[gold] > 0),
                     float(np.all(counts > 0)), float(np.all(counts == 0)), 1.0 / len(counts)))
    if not rows:
        return {"n": 0}
    keys = ("accuracy", "gold_alone_most_linked", "all_choices_linked", "no_choice_linked", "chance")
    return {"n": len(rows)} | {k: float(v) for k, v in zip(keys, np.mean(rows, axis=0), strict=True)}
