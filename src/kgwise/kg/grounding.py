"""Grounding: question and choice text -> KG node ids, as KagNet/QA-GNN do for ConceptNet.

A phrase index (normalised label -> node id) is built once per graph. A text is tokenised; n-grams are
matched longest first (a matched span's tokens are not matched again by shorter n-grams), each span tried
as written, with its last word lemmatised, and with every word lemmatised. A span made only of
stop-words, or starting with a determiner, is never matched: "a dog" grounds to "dog", while "yell at"
and "having fun" stay whole. Choice concepts are grounded from the choice text (the whole choice
first); question concepts exclude every choice concept. When a question names its topic entities
(KGQA), those are looked up directly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from kgwise.kg.base import KnowledgeGraph
from kgwise.kg.text import Lemmatiser, determiners, load_exceptions, phrase_keys, stopwords, tokenize
from kgwise.types import Question

__all__ = ["Grounder", "GrounderConfig", "Grounding", "PhraseIndex"]


@dataclass(frozen=True, slots=True)
class Grounding:
    """The KG nodes a question mentions: ``question_nodes`` and, per choice, ``choice_nodes[i]``."""

    question_nodes: tuple[int, ...] = ()
    choice_nodes: tuple[tuple[int, ...], ...] = ()

    @property
    def all_choice_nodes(self) -> tuple[int, ...]:
        """Union of the choices' nodes, in first-seen order."""
        return tuple(dict.fromkeys(n for nodes in self.choice_nodes for n in nodes))


@dataclass(frozen=True, slots=True)
class GrounderConfig:
    """Grounding options.

    ``max_ngram``: longest span tried (tokens); ``lemmatise``: also try lemmatised spans;
    ``wordnet_dir``: a WordNet directory whose ``*.exc`` irregular forms feed the lemmatiser (optional);
    ``text_fallback``: ground the question text when none of its topic entities is in the graph.
    """

    max_ngram: int = 8
    lemmatise: bool = True
    wordnet_dir: Path | None = None
    text_fallback: bool = True


class PhraseIndex:
    """``phrase_key(label) -> node id`` over every node of ``kg`` (the lowest id wins a collision);
    ``words`` is every token of every label (the lemmatiser's vocabulary)."""

    def __init__(self, kg: KnowledgeGraph) -> None:
        keys = phrase_keys(kg.labels)
        # first (lowest) id wins: insert in reverse so earlier ids overwrite later ones
        index = dict(zip(reversed(keys), range(len(keys) - 1, -1, -1), strict=True))
        index.pop("", None)
        words = set(" ".join(index).split(" "))
        longest = max((k.count(" ") + 1 for k in index), default=0)
        self.keys = index
        self.longest = longest
        self.words = frozenset(words)

    def get(self, key: str) -> int | None:
        return self.keys.get(key)


class Grounder:
    """Ground questions in one graph; build once (the phrase index takes ~1 s per million nodes)."""

    def __init__(self, kg: KnowledgeGraph, config: GrounderConfig | None = None,
                 index: PhraseIndex | None = None) -> None:
        self.kg = kg
        self.config = config or GrounderConfig()
        self.index = index or PhraseIndex(kg)
        exceptions = load_exceptions(self.config.wordnet_dir) if self.config.wordnet_dir else None
        self.lemmatiser = Lemmatiser(self.index.words, exceptions)
        self._stop = stopwords()
        self._det = determiners()
        self._max_n = max(1, min(self.config.max_ngram, self.index.longest))

    # ------------------------------------------------------------------ public
    def ground(self, question: Question) -> Grounding:
        """Question concepts (or topic entities) and per-choice concepts; see the module docstring."""
        choices = tuple(self.ground_choice(c.text) for c in question.choices)
        taken = {n for nodes in choices for n in nodes}
        q_nodes: tuple[int, ...] = ()
        if question.topic_entities:
            q_nodes = self.ground_names(question.topic_entities)
        if not q_nodes and (not question.topic_entities or self.config.text_fallback):
            q_nodes = self.ground_text(question.text)
        return Grounding(tuple(n for n in q_nodes if n not in taken), choices)

    def ground_text(self, text: str) -> tuple[int, ...]:
        """Nodes mentioned in ``text``: longest-first n-gram matching, in order of position."""
        return self._match(tokenize(text))

    def ground_choice(self, text: str) -> tuple[int, ...]:
        """A choice's nodes: the whole choice (also without leading/trailing stop-words) if it is a
        node, else its n-gram matches."""
        toks = tokenize(text)
        whole = self._lookup(toks)
        if whole is None:
            a, b = 0, len(toks)
            while a < b and toks[a] in self._stop:
                a += 1
            while b > a and toks[b - 1] in self._stop:
                b -= 1
            if 0 < b - a < len(toks):
                whole = self._lookup(toks[a:b])
        if whole is not None:
            return (whole,)
        return self._match(toks)

    def ground_names(self, names: Sequence[str]) -> tuple[int, ...]:
        """Entity names looked up whole (as written, then lemmatised); names not in the graph are
        dropped."""
        found: dict[int, None] = {}
        for name in names:
            node = self._lookup(tokenize(name))
            if node is not None:
                found[node] = None
        return tuple(found)

    # ------------------------------------------------------------------ matching
    def _lookup(self, toks: Sequence[str]) -> int | None:
        if not toks:
            return None
        keys = self.index.keys
        hit = keys.get(" ".join(toks))
        if hit is not None or not self.config.lemmatise:
            return hit
        lem = self.lemmatiser.lemma
        last = lem(toks[-1])
        if last != toks[-1]:
            hit = keys.get(" ".join([*toks[:-1], last]))
            if hit is not None:
                return hit
        if len(toks) > 1:
            lemmas = [lem(t) for t in toks[:-1]]
            if lemmas != list(toks[:-1]):
                return keys.get(" ".join([*lemmas, last]))
        return None

    def _match(self, toks: list[str]) -> tuple[int, ...]:
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
                node = self._lookup(toks[i:j])
                if node is not None:
                    hits.append((i, node))
                    for k in range(i, j):
                        claimed[k] = True
        hits.sort()
        return tuple(dict.fromkeys(node for _, node in hits))
