"""Grounding: question and choice text -> KG node ids, as KagNet/QA-GNN do for ConceptNet.

A phrase index (normalised name -> node id) is built once per graph, over every node's label and then its
aliases (a label wins over another node's alias of the same spelling); a :class:`kgwise.kg.label_index.
LabelIndex` on disk can stand in for it. A text is tokenised; n-grams are
matched longest first (a matched span's tokens are not matched again by shorter n-grams), each span tried
as written, with its last word lemmatised, and with every word lemmatised. A span made only of
stop-words, or starting with a determiner, is never matched: "a dog" grounds to "dog", while "yell at"
and "having fun" stay whole. Choice concepts are grounded from the choice text (the whole choice
first); question concepts exclude every choice concept. When a question names its topic entities
(KGQA), those are looked up directly.

With a :class:`~kgwise.kg.linking.LinkingConfig` (``GrounderConfig.linking``), a mention that exact
matching leaves without a node (a choice, a topic-entity name, a question text matching no name at all:
then its content words) is linked by edit distance, then (with an embedding matcher) by label embedding,
each link carrying its method and score (``Grounding.links``). :meth:`Grounder.topic_entities` proposes
the topic entities of a question that names none.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from kgwise.kg.base import ArrayGraph, KnowledgeGraph
from kgwise.kg.linking import EmbeddingMatcher, FuzzyNames, Link, LinkingConfig, LinkMethod, TextEncoder
from kgwise.kg.text import (
    Lemmatiser,
    determiners,
    load_exceptions,
    phrase_key,
    phrase_keys,
    stopwords,
    tokenize,
)
from kgwise.types import Question

__all__ = ["Grounder", "GrounderConfig", "Grounding", "NameIndex", "PhraseIndex", "embedding_matcher",
           "propose_topic_entities"]


class NameIndex(Protocol):
    """What the grounder looks names up in: :class:`PhraseIndex` (memory) or a ``LabelIndex`` (disk)."""

    @property
    def longest(self) -> int:
        """Tokens of the longest name."""
        ...

    @property
    def words(self) -> Collection[str]:
        """Every token of every name (the lemmatiser's vocabulary)."""
        ...

    def lookup(self, key: str) -> tuple[int, bool] | None:
        """``(node, via an alias?)`` of the phrase key ``key``: a label first, then an alias."""
        ...

    def fuzzy(self, key: str, limit: int, min_score: float) -> list[tuple[int, str, float]]:
        """``(node, name, similarity)`` of the names closest to ``key`` by edit distance, best first."""
        ...


@dataclass(frozen=True, slots=True)
class Grounding:
    """The KG nodes a question mentions: ``question_nodes`` and, per choice, ``choice_nodes[i]``;
    ``links``: how each mention was linked (not compared)."""

    question_nodes: tuple[int, ...] = ()
    choice_nodes: tuple[tuple[int, ...], ...] = ()
    links: tuple[Link, ...] = field(default=(), compare=False)

    @property
    def all_choice_nodes(self) -> tuple[int, ...]:
        """Union of the choices' nodes, in first-seen order."""
        return tuple(dict.fromkeys(n for nodes in self.choice_nodes for n in nodes))


@dataclass(frozen=True, slots=True)
class GrounderConfig:
    """Grounding options.

    ``max_ngram``: longest span tried (tokens); ``lemmatise``: also try lemmatised spans;
    ``wordnet_dir``: a WordNet directory whose ``*.exc`` irregular forms feed the lemmatiser (optional);
    ``text_fallback``: ground the question text when none of its topic entities is in the graph;
    ``linking``: fallback linking of mentions exact matching misses (``None``: exact names only).
    """

    max_ngram: int = 8
    lemmatise: bool = True
    wordnet_dir: Path | None = None
    text_fallback: bool = True
    linking: LinkingConfig | None = None


class PhraseIndex:
    """``phrase_key(name) -> node id`` over every node of ``kg``: labels (the lowest id wins a collision),
    then aliases in ``alias_keys`` (a label wins over an alias; ``aliases=False``: labels only); ``words`` is
    every token of every name."""

    def __init__(self, kg: KnowledgeGraph, aliases: bool = True) -> None:
        labels: Sequence[str] = kg.labels
        keys = phrase_keys(labels)
        # first (lowest) id wins: insert in reverse so earlier ids overwrite later ones
        index = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1), strict=True))
        index.pop("", None)
        alias_nodes, alias_names = (kg.alias_pairs() if aliases and isinstance(kg, ArrayGraph)
                                    else (np.zeros(0, np.int32), []))
        by_alias: dict[str, int] = {}
        for key, node in zip(phrase_keys(alias_names), alias_nodes.tolist(), strict=True):
            if key and key not in index:
                by_alias.setdefault(key, node)
        words = set(" ".join(index).split(" ")) | set(" ".join(by_alias).split(" "))
        longest = max((k.count(" ") + 1 for k in (*index, *by_alias)), default=0)
        self.keys = index
        self.alias_keys = by_alias
        self.longest = longest
        self.words: Collection[str] = frozenset(words)
        self._names = (labels, alias_nodes, alias_names)
        self._fuzzy: FuzzyNames | None = None

    def get(self, key: str) -> int | None:
        hit = self.keys.get(key)
        return hit if hit is not None else self.alias_keys.get(key)

    def lookup(self, key: str) -> tuple[int, bool] | None:
        hit = self.keys.get(key)
        if hit is not None:
            return hit, False
        hit = self.alias_keys.get(key)
        return None if hit is None else (hit, True)

    def names(self) -> tuple[list[str], np.ndarray]:
        """Every name (labels, then aliases) and its node."""
        labels, alias_nodes, alias_names = self._names
        nodes = np.concatenate([np.arange(len(labels), dtype=np.int64), alias_nodes.astype(np.int64)])
        return [*labels, *alias_names], nodes

    def fuzzy(self, key: str, limit: int, min_score: float) -> list[tuple[int, str, float]]:
        if self._fuzzy is None:
            names, nodes = self.names()
            self._fuzzy = FuzzyNames(phrase_keys(names), nodes, names)
        return self._fuzzy.search(key, limit, min_score)


def embedding_matcher(index: PhraseIndex, encoder: TextEncoder) -> EmbeddingMatcher:
    """An embedding matcher over every name of ``index`` (each name encoded once; the encoder may cache)."""
    names, nodes = index.names()
    return EmbeddingMatcher(encoder, names, nodes)


class Grounder:
    """Ground questions in one graph; build once (the phrase index takes ~1 s per million nodes).
    ``index``: a prebuilt name index (e.g. a ``LabelIndex`` on disk); ``embedder``: the embedding
    fallback (used when ``config.linking.embedding``)."""

    def __init__(self, kg: KnowledgeGraph, config: GrounderConfig | None = None,
                 index: NameIndex | None = None, embedder: EmbeddingMatcher | None = None) -> None:
        self.kg = kg
        self.config = config or GrounderConfig()
        self.index: NameIndex = index if index is not None else PhraseIndex(kg)
        self.embedder = embedder
        exceptions = load_exceptions(self.config.wordnet_dir) if self.config.wordnet_dir else None
        self.lemmatiser = Lemmatiser(self.index.words, exceptions)
        self._stop = stopwords()
        self._det = determiners()
        self._max_n = max(1, min(self.config.max_ngram, self.index.longest))

    # ------------------------------------------------------------------ public
    def ground(self, question: Question) -> Grounding:
        """Question concepts (or topic entities) and per-choice concepts; see the module docstring."""
        links: list[Link] = []
        choices = tuple(self.ground_choice(c.text, links) for c in question.choices)
        taken = {n for nodes in choices for n in nodes}
        q_nodes: tuple[int, ...] = ()
        if question.topic_entities:
            q_nodes = self.ground_names(question.topic_entities, links)
        if not q_nodes and (not question.topic_entities or self.config.text_fallback):
            q_nodes = self.ground_text(question.text, links)
        return Grounding(tuple(n for n in q_nodes if n not in taken), choices, tuple(links))

    def ground_text(self, text: str, links: list[Link] | None = None) -> tuple[int, ...]:
        """Nodes mentioned in ``text``: longest-first n-gram matching, in order of position; a text matching
        no name links its content words by edit distance (``config.linking``)."""
        toks = tokenize(text)
        found = self._match(toks, links)
        if found or self.config.linking is None or not self.config.linking.fuzzy:
            return found
        cfg = self.config.linking
        out: dict[int, None] = {}
        for tok in dict.fromkeys(toks):
            if tok in self._stop or len(tok) < cfg.fuzzy_min_length or tok.isdigit():
                continue
            for node, name, score in self.index.fuzzy(tok, 1, cfg.fuzzy_min_score):
                out.setdefault(node)
                if links is not None:
                    links.append(Link(tok, node, name, "fuzzy", score))
        return tuple(out)

    def topic_entities(self, text: str) -> tuple[Link, ...]:
        """Proposed topic entities of a question that names none: its linked mentions, longest first, then
        by score, then in the order found, one per node, at most ``linking.max_topic_entities``."""
        links: list[Link] = []
        self.ground_text(text, links)
        limit = self.config.linking.max_topic_entities if self.config.linking is not None else 3
        ranked = sorted(range(len(links)), key=lambda i: (-len(links[i].mention.split()), -links[i].score, i))
        out: dict[int, Link] = {}
        for i in ranked:
            out.setdefault(links[i].node, links[i])
        return tuple(list(out.values())[:limit])

    def ground_choice(self, text: str, links: list[Link] | None = None) -> tuple[int, ...]:
        """A choice's nodes: the whole choice (also without leading/trailing stop-words) if it is a
        node, else its n-gram matches; with none, the best fallback link of the whole choice."""
        toks = tokenize(text)
        whole = self._lookup(toks, links)
        if whole is None:
            a, b = 0, len(toks)
            while a < b and toks[a] in self._stop:
                a += 1
            while b > a and toks[b - 1] in self._stop:
                b -= 1
            if 0 < b - a < len(toks):
                whole = self._lookup(toks[a:b], links)
        if whole is not None:
            return (whole,)
        found = self._match(toks, links)
        if found:
            return found
        link = self.fallback(text)
        if link is None:
            return ()
        if links is not None:
            links.append(link)
        return (link.node,)

    def ground_names(self, names: Sequence[str], links: list[Link] | None = None) -> tuple[int, ...]:
        """Entity names looked up whole (as written, then lemmatised), else by the fallbacks; names not
        linked are dropped."""
        found: dict[int, None] = {}
        for name in names:
            node = self._lookup(tokenize(name), links)
            if node is None:
                link = self.fallback(name)
                if link is not None:
                    node = link.node
                    if links is not None:
                        links.append(link)
            if node is not None:
                found[node] = None
        return tuple(found)

    def fallback(self, mention: str) -> Link | None:
        """The best fuzzy, else embedding, link of a mention exact matching missed (``None`` without
        ``config.linking``, or when none reaches its threshold)."""
        cfg = self.config.linking
        if cfg is None:
            return None
        key = phrase_key(mention)
        if cfg.fuzzy and len(key) >= cfg.fuzzy_min_length:
            for node, name, score in self.index.fuzzy(key, 1, cfg.fuzzy_min_score):
                return Link(mention, node, name, "fuzzy", score)
        if cfg.embedding and self.embedder is not None and key:
            for node, name, score in self.embedder.search(key, 1, cfg.embedding_min_score):
                return Link(mention, node, name, "embedding", score)
        return None

    def suggest(self, text: str, limit: int = 3) -> list[str]:
        """Preferred labels of the nodes whose names are closest to ``text`` (for "did you mean")."""
        return [self.kg.label(v) for v, _, _ in self.index.fuzzy(phrase_key(text), limit, 0.6)]

    # ------------------------------------------------------------------ matching
    def _lookup(self, toks: Sequence[str], links: list[Link] | None = None) -> int | None:
        if not toks:
            return None
        found = self._lookup_key(toks)
        if found is None:
            return None
        key, (node, via_alias) = found
        if links is not None:
            method: LinkMethod = "alias" if via_alias else "exact"
            links.append(Link(" ".join(toks), node, key, method, 1.0))
        return node

    def _lookup_key(self, toks: Sequence[str]) -> tuple[str, tuple[int, bool]] | None:
        lookup = self.index.lookup
        key = " ".join(toks)
        hit = lookup(key)
        if hit is not None:
            return key, hit
        if not self.config.lemmatise:
            return None
        lem = self.lemmatiser.lemma
        last = lem(toks[-1])
        if last != toks[-1]:
            key = " ".join([*toks[:-1], last])
            hit = lookup(key)
            if hit is not None:
                return key, hit
        if len(toks) > 1:
            lemmas = [lem(t) for t in toks[:-1]]
            if lemmas != list(toks[:-1]):
                key = " ".join([*lemmas, last])
                hit = lookup(key)
                if hit is not None:
                    return key, hit
        return None

    def _match(self, toks: list[str], links: list[Link] | None = None) -> tuple[int, ...]:
        n_tok = len(toks)
        if not n_tok:
            return ()
        det = [t in self._det for t in toks]
        n_stop = [0]  # n_stop[k]: stop-words among toks[:k]
        for t in toks:
            n_stop.append(n_stop[-1] + (t in self._stop))
        claimed = [False] * n_tok
        hits: list[tuple[int, int]] = []
        for n in range(min(self._max_n, n_tok), 0, -1):
            for i in range(n_tok - n + 1):
                j = i + n
                if det[i] or n_stop[j] - n_stop[i] == n or True in claimed[i:j]:
                    continue
                node = self._lookup(toks[i:j], links)
                if node is not None:
                    hits.append((i, node))
                    for k in range(i, j):
                        claimed[k] = True
        hits.sort()
        return tuple(dict.fromkeys(node for _, node in hits))


def propose_topic_entities(grounder: Grounder, question: Question) -> tuple[Question, tuple[Link, ...]]:
    """``question`` with topic entities: its own, or (when it names none) the preferred labels of those
    :meth:`Grounder.topic_entities` proposes, with their links (empty when it names its own or none is
    found). What the UAG commands and the pipeline call for open questions."""
    if question.topic_entities:
        return question, ()
    links = grounder.topic_entities(question.text)
    labels = tuple(dict.fromkeys(grounder.kg.label(link.node) for link in links))
    return dataclasses.replace(question, topic_entities=labels), links
