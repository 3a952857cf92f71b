"""Precision and recall of entity links against labelled link sets (``tests/data/links/*.jsonl``).

Each line of a set is one mention: ``mention``, ``context``, ``kind``, ``gold`` (the labels of the nodes it
names; ``[]``: none in this KG), ``source`` and how it was labelled (``how``). A ``choice`` mention is
linked whole, as an answer option or an entity name is (:meth:`~kgwise.kg.grounding.Grounder.
ground_choice`); a ``span`` mention is a part of its ``context`` (from character ``start``), which is
grounded as running text (:meth:`~kgwise.kg.grounding.Grounder.ground_text`): the links whose characters
overlap the span are the mention's. In an ``exhaustive`` context every name is labelled, so a link that
overlaps no labelled span is a false link too ("used" → United States).

* **precision**: correct links / links (a link is correct when its node is one of the gold nodes);
* **recall**: mentions with a correct link / mentions with a gold node (the concept is in the KG) — the
  share that has one is ``in_kg``;
* per ``split`` (a set's parts, where its records name one: the MedQA set's ``tune`` and ``check`` halves
  and its ``held_out`` options): the same precision and recall;
* per method (exact, alias, folded, reordered, partial, contained, derived, fuzzy, embedding): its links
  and their precision, the mentions it made right (a mention's first right link counts) and their share of
  the mentions whose concept the KG holds (its part of the recall: the parts add up to the recall).

:func:`score_set` runs one grounder over one set; ``kgwise bench grounding --parts links`` runs every set
with the earlier rules and the precise ones side by side (:mod:`kgwise.eval.bench.grounding`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from kgwise.errors import DataError

if TYPE_CHECKING:
    from kgwise.kg.base import KnowledgeGraph
    from kgwise.kg.grounding import Grounder
    from kgwise.kg.linking import Link

__all__ = ["LinkMention", "read_link_set", "resolve_gold", "score_set"]


@dataclass(frozen=True, slots=True)
class LinkMention:
    """One labelled mention of a link set."""

    id: str
    kind: Literal["choice", "span"]
    mention: str
    context: str
    gold: tuple[str, ...]
    source: str
    start: int | None = None
    exhaustive: bool = False
    split: str = ""


def read_link_set(path: str | Path) -> list[LinkMention]:
    """The mentions of a JSONL link set; ``DataError`` naming file and line for a malformed record (a
    missing field, an unknown kind, a span that is not at its ``start`` in the context)."""
    p = Path(path)
    out: list[LinkMention] = []
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                r = json.loads(line)
                m = LinkMention(str(r["id"]), r["kind"], str(r["mention"]), str(r.get("context", "")),
                                tuple(str(g) for g in r["gold"]), str(r["source"]),
                                int(r["start"]) if r.get("start") is not None else None,
                                bool(r.get("exhaustive", False)), str(r.get("split", "")))
            except (ValueError, KeyError, TypeError) as exc:
                raise DataError(f"not a link-set record ({exc})", p, lineno) from exc
            if m.kind not in ("choice", "span"):
                raise DataError(f"kind must be 'choice' or 'span', got {m.kind!r}", p, lineno)
            if m.kind == "span" and (m.start is None or
                                     m.context[m.start:m.start + len(m.mention)] != m.mention):
                raise DataError(f"span {m.mention!r} is not at character {m.start} of its context", p, lineno)
            out.append(m)
    return out


def resolve_gold(kg: KnowledgeGraph, mentions: Sequence[LinkMention]) -> dict[str, frozenset[int]]:
    """Gold label → the nodes so labelled (a label that normalises to several nodes' labels names them
    all); ``DataError`` for a gold label that is no node of ``kg`` (a set made for another graph)."""
    from kgwise.kg.text import phrase_key

    wanted = {g for m in mentions for g in m.gold}
    by_key: dict[str, set[int]] = {}
    keys = {phrase_key(g): g for g in wanted}
    for v, label in enumerate(kg.labels):
        k = phrase_key(label)
        if k in keys:
            by_key.setdefault(k, set()).add(v)
    missing = sorted(g for g in wanted if phrase_key(g) not in by_key)
    if missing:
        raise DataError(f"{len(missing)} gold label(s) are no node of {kg.name or 'the graph'}, e.g. "
                        f"{missing[:3]}")
    return {g: frozenset(by_key[phrase_key(g)]) for g in wanted}


def _overlaps(link: Link, start: int, end: int) -> bool:
    return link.start is not None and link.end is not None and link.start < end and start < link.end


def score_set(grounder: Grounder, mentions: Sequence[LinkMention], gold_nodes: dict[str, frozenset[int]],
              examples: int = 12) -> dict[str, Any]:
    """Precision, recall and per-method figures of ``grounder`` on ``mentions`` (see the module
    docstring), with up to ``examples`` wrong links and misses to read."""
    per_mention: list[tuple[LinkMention, list[Link]]] = []
    stray: list[Link] = []  # links of exhaustive contexts that overlap no labelled span
    contexts: dict[str, list[LinkMention]] = {}
    for m in mentions:
        if m.kind == "choice":
            links: list[Link] = []
            grounder.ground_choice(m.mention, links)
            per_mention.append((m, list({x.node: x for x in reversed(links)}.values())))
        else:
            contexts.setdefault(m.context, []).append(m)
    for text, ms in contexts.items():
        links = []
        grounder.ground_text(text, links)
        if any(x.start is None for x in links):  # the earlier rules keep no offsets: find the words
            links = [_placed(x, text) for x in links]
        for m in ms:
            assert m.start is not None
            mine = [x for x in links if _overlaps(x, m.start, m.start + len(m.mention))]
            per_mention.append((m, list({x.node: x for x in reversed(mine)}.values())))
        if any(m.exhaustive for m in ms):
            stray += [x for x in links if not any(
                _overlaps(x, m.start or 0, (m.start or 0) + len(m.mention)) for m in ms)]
    n_links = correct = in_kg = found = 0
    methods: dict[str, dict[str, int]] = {}
    wrong: list[str] = []
    missed: list[str] = []
    for m, links in per_mention:
        gold = frozenset().union(*(gold_nodes[g] for g in m.gold)) if m.gold else frozenset()
        in_kg += bool(gold)
        right = [x for x in links if x.node in gold]
        n_links += len(links)
        correct += len(right)
        if gold and right:
            found += 1
        for x in links:
            st = methods.setdefault(x.method, {"links": 0, "correct": 0, "mentions_found": 0})
            st["links"] += 1
            st["correct"] += x.node in gold
        if right:
            methods[right[0].method]["mentions_found"] += 1
        for x in links:
            if x.node not in gold and len(wrong) < examples:
                wrong.append(f"{m.mention!r} → {grounder.kg.label(x.node)!r} ({x.method} {x.score:.2f}; gold "
                             f"{list(m.gold) or 'none in KG'})")
        if gold and not right and len(missed) < examples:
            missed.append(f"{m.mention!r} (gold {list(m.gold)}; linked "
                          f"{[grounder.kg.label(x.node) for x in links] or 'nothing'})")
    for x in stray:
        st = methods.setdefault(x.method, {"links": 0, "correct": 0, "mentions_found": 0})
        st["links"] += 1
        if len(wrong) < examples:
            wrong.append(f"{x.mention!r} → {grounder.kg.label(x.node)!r} ({x.method} {x.score:.2f}; an "
                         "unlabelled word of an exhaustive context)")
    n_links += len(stray)
    splits: dict[str, dict[str, Any]] = {}
    for name in sorted({m.split for m, _ in per_mention if m.split}):
        part = [(frozenset().union(*(gold_nodes[g] for g in m.gold)), found_links)
                for m, found_links in per_mention if m.split == name]
        made = sum(len(xs) for _, xs in part)
        held = sum(bool(g) for g, _ in part)
        good = sum(x.node in g for g, xs in part for x in xs)
        hit = sum(any(x.node in g for x in xs) for g, xs in part if g)
        splits[name] = {"mentions": len(part), "in_kg": held, "links": made,
                        "precision": good / made if made else 1.0, "recall": hit / held if held else None}
    for st in methods.values():
        st["precision"] = st["correct"] / st["links"] if st["links"] else None  # type: ignore[assignment]
        st["recall"] = st["mentions_found"] / in_kg if in_kg else None  # type: ignore[assignment]
    return {"mentions": len(per_mention), "in_kg": in_kg, "in_kg_share": in_kg / max(len(per_mention), 1),
            "links": n_links, "correct_links": correct, "stray_links": len(stray),
            "precision": correct / n_links if n_links else 1.0, "recall": found / in_kg if in_kg else None,
            "methods": methods, "splits": splits, "wrong_examples": wrong, "missed_examples": missed}


def _placed(link: Link, text: str) -> Link:
    """``link`` with the offsets of its mention's first occurrence in ``text`` (its words, any case and
    punctuation between them), for links made without offsets."""
    import dataclasses
    import re

    words = link.mention.split()
    found = re.search(r"(?<![^\W_])" + r"[\W_]+".join(map(re.escape, words)) + r"(?![^\W_])", text, re.I)
    if found is None:
        return link
    return dataclasses.replace(link, start=found.start(), end=found.end())
