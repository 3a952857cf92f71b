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
import itertools
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np

from kgwise.kg.base import ArrayGraph, KnowledgeGraph
from kgwise.kg.linking import EmbeddingMatcher, FuzzyNames, Link, LinkingConfig, LinkMethod, TextEncoder
from kgwise.kg.names import (
    LATIN_NUMBER,
    PARTIAL_SCORE,
    QUALIFIERS,
    NameVariants,
    another_count,
    another_quantity,
    bag_key,
    body_words,
    comma_qualifies,
    derived_keys,
    is_category,
    latin_singulars,
    names_a_state,
    opposite_degree,
    word_forms,
)
from kgwise.kg.text import (
    Lemmatiser,
    common_words,
    determiners,
    fold_key,
    is_acronym,
    load_exceptions,
    phrase_key,
    phrase_keys,
    stopwords,
    written_tokens,
)
from kgwise.types import Question

_NAMING_HEADS = frozenset({"syndrome", "disease", "disorder"})
"""Head nouns that name a condition as a whole: "Alcohol withdrawal syndrome" *is* alcohol withdrawal (it
narrows nothing)."""
_GENERIC_HEADS = _NAMING_HEADS | {"acute", "chronic", "therapy", "treatment", "administration"}
"""Words that may follow a choice in a name it narrows: naming heads, the condition's course ("Alcohol
withdrawal acute" is alcohol withdrawal too, narrowed) and the giving of a treatment, a qualifier the
choice's own words are read without ("IV fluids" → `Intravenous infusion`, named "IV fluid therapy")."""

_NUMERALS = {w: str(i) for i, w in enumerate((
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
    "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen", "twenty"))}
"""Number words and their digits: names write numbers in digits ("Trisomy 18", "Type 2 diabetes")."""

_PREPOSITIONS = frozenset({"of", "with", "in", "for", "from", "on", "by", "to", "at", "after", "during"})
"""Words that open a complement: after a term, what follows them modifies it ("Luteoma *of pregnancy*")."""

TIE_NEIGHBOURS = 3
"""A contained name that covers only half a choice must be among the choice's this many nearest names by
label embedding (:meth:`Grounder._settle_tie`). On the studied MedQA→DDB options (``tune``, ``check``,
``held_out``) the right half-cover links were all among the first 3 ("Inhaled beclomethasone": 2nd after
"Inhaled vomitus"), the wrong "Tsetse flies" → `Sandfly species` not."""

_RELATIONAL_ENDS = ("ac", "al", "ar", "ary", "eal", "ic", "ous")
"""Endings of relational adjectives ("cardiac", "renal", "pulmonary", "esophageal", "hepatic", "cutaneous"):
before a choice's last term such a word names a site or kind of it, a modifier (the MedQA→DDB labelling
rules: "Duodenal peptic ulcer" is a peptic ulcer), so it weighs as a common word (1), not as a term (2)."""

_ANTIBODY_HEADS = frozenset({"antibody", "antibodies"})
"""What an *anti-* choice names when a name adds it: "Anti-histone" is the `Anti-histone antibody`."""

_ARROWS = str.maketrans({"↑": " increased ", "↓": " decreased "})
"""Arrows a choice writes for a raised or lowered quantity ("↑ reticulocyte count")."""

_NOT_FOR_BODY = frozenset({"partial", "contained", "fuzzy", "embedding"})
"""Link methods that never link a choice naming a part of the body (:meth:`Grounder._body_part`): a name
inside it, narrowing it, a misspelling or a paraphrase of it is a disorder or procedure of the part."""

_CONJUNCTIONS = frozenset({"and", "plus"})
"""Words that join two concepts in one choice ("Inflammation and edema", "Ceftriaxone and azithromycin"):
each is linked as a choice of its own when the whole is no name."""

MAX_HOLDERS = 5
"""The most nodes whose names may hold a whole choice for one of them to narrow it: "Diabetes" is in the
names of 24 DDB nodes (diabetes mellitus, insipidus, gestational …) and names none of them."""

__all__ = ["Grounder", "GrounderConfig", "Grounding", "NameIndex", "PhraseIndex", "embedding_matcher"]


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
    ``linking``: fallback linking of mentions exact matching misses (``None``: exact names only);
    ``precise``: the precise rules of :mod:`kgwise.kg.names` (capitals-only names, no lemma onto a stop
    word, ambiguous aliases unlinked, accent-folded, reordered and partial names, misspelt proper names in
    running text, a whole choice linked before its words); ``False``: the earlier rules, kept to measure
    against (`kgwise bench grounding --parts links`).
    """

    max_ngram: int = 8
    lemmatise: bool = True
    wordnet_dir: Path | None = None
    text_fallback: bool = True
    linking: LinkingConfig | None = None
    precise: bool = True


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
        self._folded_fuzzy: FuzzyNames | None = None
        self._variants: NameVariants | None = None
        self._first: dict[bool, frozenset[str]] = {}

    def first_words(self, variants: bool) -> frozenset[str]:
        """The first word of every key a lookup may find: labels and aliases, and with ``variants`` the
        accent-folded keys and the head parts of :attr:`variants` (each set computed once per index)."""
        if variants not in self._first:
            names: list[Collection[str]] = [self.keys, self.alias_keys]
            if variants:
                names += [self.variants.folded, self.variants.heads]
            self._first[variants] = frozenset(k.split(" ", 1)[0] for d in names for k in d)
        return self._first[variants]

    @property
    def variants(self) -> NameVariants:
        """The names' variant keys (:mod:`kgwise.kg.names`), computed on first use."""
        if self._variants is None:
            labels, _, alias_names = self._names
            names, nodes = self.names()
            self._variants = NameVariants.of_names(
                names, nodes.tolist(), [False] * len(labels) + [True] * len(alias_names))
        return self._variants

    def caps_only(self, key: str) -> bool:
        """Whether every name keyed ``key`` is written in capitals (:mod:`kgwise.kg.names`)."""
        return key in self.variants.caps_only

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

    def fuzzy_folded(self, key: str, limit: int, min_score: float) -> list[tuple[int, str, float]]:
        """As :meth:`fuzzy` over accent-folded keys and the partial names (each found as its word), a
        transposition one edit; the key ``key`` is folded by the caller. Names that link no node (ambiguous
        aliases) are left out."""
        if self._folded_fuzzy is None:
            names, nodes = self.names()
            v = self.variants
            keep = [i for i, k in enumerate(phrase_keys(names)) if k and k not in v.ambiguous]
            part = list(v.partial.items())
            self._folded_fuzzy = FuzzyNames(
                [fold_key(phrase_key(names[i])) for i in keep] + [t for t, _ in part],
                np.concatenate([nodes[keep], np.asarray([n for _, n in part], dtype=np.int64)]),
                [names[i] for i in keep] + [t for t, _ in part], transpositions=True)
        return self._folded_fuzzy.search(key, limit, min_score)


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
        self._precise = self.config.precise
        self._variants: NameVariants | None = getattr(self.index, "variants", None) if self._precise else None
        self._near: tuple[str, list[tuple[int, str, float]]] = ("", [])  # _settle_tie's last search

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
        """Nodes mentioned in ``text``: longest-first n-gram matching, in order of position. Then, with
        ``config.linking``: precise rules link each word left unmatched that is written capitalised, is no
        common English word and has 5 letters or more (a misspelt proper name) by edit distance; the
        earlier rules link content words so only when the text matched no name at all."""
        written = written_tokens(text)
        toks = [w.lower() for w, _, _ in written]
        hits, claimed = self._match(toks, links, written if self._precise else None)
        cfg = self.config.linking
        if cfg is None or not cfg.fuzzy:
            return self._in_order(hits)
        if self._precise:
            return self._in_order(hits + self._fuzzy_words(written, claimed, cfg, links, any_case=not hits))
        if hits:
            return self._in_order(hits)
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
        node, else its n-gram matches; with none, the best fallback link of the whole choice. Precise
        rules try the whole choice's variants and a close misspelling of it (edit similarity ≥ 0.85)
        before its words: "Danish kroner" is the Danish krone, not the Danish language; then the medical
        word it spells out (:meth:`_derived`); then of its words one name, the one that covers
        the most of the choice (:meth:`_contained`), unless it leaves part of the choice uncovered and the
        names of a rare word hold the whole choice (:meth:`_containing`). Before those, an arrow is read as
        a word ("↑" is "increased"), a trailing acronym in parenthesis is dropped, and a choice joining
        concepts with *and*/*plus* is linked part by part (:meth:`_conjuncts`), never to a class of
        conditions (:meth:`_category`)."""
        src = text.translate(_ARROWS) if self._precise else text  # the positions ``written`` holds
        written = written_tokens(src)
        toks = [w.lower() for w, _, _ in written]
        if self._precise and self._body_part(toks):
            links_of_body: list[Link] = []  # a part of the body: by its whole name only
            self._ground_choice(text, src, written, toks, links_of_body, body=True)
            kept = [x for x in links_of_body if x.method not in _NOT_FOR_BODY or self._count([x.name], [0])]
            if links is not None:
                links += kept
            return tuple(dict.fromkeys(x.node for x in kept))
        return self._ground_choice(text, src, written, toks, links)

    def _ground_choice(self, text: str, src: str, written: list[tuple[str, int, int]], toks: list[str],
                       links: list[Link] | None, body: bool = False) -> tuple[int, ...]:
        """:meth:`ground_choice` of a choice read as ``written`` (``toks``, lower case) from ``src``;
        ``body``: a part of the body, which the fuzzy and embedding fallback never link."""
        link = self._whole(text, toks, written if self._precise else None)
        if link is not None:
            return self._keep(link, links)
        if self._precise:
            closed = _closed_prefixes(src, written)
            if closed is not None:  # "Anti-nuclear antibodies" is the name "Antinuclear antibodies"
                link = self._whole(text, closed, None)
                if link is not None:
                    return self._keep(link, links)
            link = self._synonym(text, toks)
            if link is not None:  # "Cherry hemangioma" is the name "Cherry angioma"
                return self._keep(link, links)
            if len(written) > 1 and text.rstrip().endswith(")") and is_acronym(written[-1][0]):
                link = self._whole(text, toks[:-1], written[:-1])  # "Polycystic ovarian syndrome (PCOS)"
                if link is not None:
                    return self._keep(link, links)
            parts = self._conjuncts(src, written)
            if parts:  # each concept of its own, never a category ("Inflammation and edema": the edema)
                return self._each(parts, links, every=False) or ()
            listed = [p.strip() for p in src.split(",")] if "," in src else []
            if len(listed) > 1 and all(listed):  # "Discontinue methimazole, start propylthiouracil"
                each = self._each(listed, links, every=True)
                if each is not None:
                    return each
                if comma_qualifies(src):  # "Gastric adenocarcinoma, intestinal type" is what it qualifies
                    return self.ground_choice(listed[0], links)
            link = self._concept(text, toks, written)
            for alt in word_forms(toks) if link is None else ():
                found = self._whole(text, alt, written) or self._concept(text, alt, written, formed=True)
                if found is not None:  # "History of psychosis" → `Psychotic disorders`
                    link = dataclasses.replace(found, method="derived", score=min(found.score, PARTIAL_SCORE))
                    break
            if link is None:
                link = self._head_of(text, toks, written)
            if link is not None:
                return self._keep(link, links)
            kinds = self._kinds(text, toks)
            if kinds:  # "Burkholderia": each of its species
                return tuple(n for x in kinds for n in self._keep(x, links))
            link = self._spread(text, toks)
            if link is not None:  # "Giardia intestinalis": `Giardia lamblia`, also "Cercomonas intestinalis"
                return self._keep(link, links)
        else:
            hits, _ = self._match(toks, [] if links is None else links)
            if hits:
                return self._in_order(hits)
        link = None if body else self.fallback(text)
        return self._keep(link, links) if link is not None else ()

    def _each(self, parts: Sequence[str], links: list[Link] | None, every: bool) -> tuple[int, ...] | None:
        """The nodes of a choice's ``parts``, each linked as a choice of its own, never to a category
        (:meth:`_category`); with ``every``, ``None`` (nothing recorded) unless every part links."""
        joined: list[Link] = []
        if not all([self.ground_choice(part, joined) for part in parts]) and every:
            return None
        kept = [x for x in joined if not self._category(x.node)]
        if links is not None:
            links += kept
        return tuple(dict.fromkeys(x.node for x in kept))

    def _head_of(self, text: str, toks: list[str], written: list[tuple[str, int, int]]) -> Link | None:
        """The head of a choice with a complement, when the whole names nothing: the words before its first
        :data:`_PREPOSITIONS` word, linked by its whole name ("Delusion of pregnancy" → `Delusion`), as the
        MedQA→DDB labels take a concept with a complement for the concept; not by a name narrowing it
        ("Lack of …" is no `Lack of energy`). Not a head of
        :data:`~kgwise.kg.names.QUALIFIERS` only ("History of …", "Administration of …"), nor a class of
        conditions. Method ``contained``, score the head's share of the choice's weighed words."""
        cut = next((i for i, t in enumerate(toks) if t in _PREPOSITIONS and i), None)
        if cut is None:
            return None
        head = toks[:cut]
        weight = [self._weight(t) for t in toks]
        if not any(weight[:cut]):
            return None
        part = text[written[0][1]:written[cut - 1][2]]
        found = self._whole(part, head, written[:cut])
        if found is None or self._category(found.node):
            return None
        share = sum(weight[:cut]) / sum(weight)
        return dataclasses.replace(found, mention=text, method="contained", score=share, start=None, end=None)

    def _spread(self, text: str, toks: list[str]) -> Link | None:
        """The one node whose names, together, hold every content word of a choice of two words or more, each
        a rare word (:attr:`~kgwise.kg.names.NameVariants.rare`) and no common English word, when no name
        holds them all: "Giardia intestinalis" → `Giardia lamblia`, named also "Cercomonas intestinalis" (a
        species renamed). A name holding them all is the narrowing rule's to judge ("Pyruvate kinase" is no
        `Pyruvate kinase deficiency`). Method ``partial``, score 0.9."""
        v = self._variants
        content = [fold_key(t) for t in toks if t not in self._stop and t not in QUALIFIERS]
        common = common_words()
        if (v is None or len(content) < 2
                or any(t not in v.rare or t in common or t.rstrip("s") in common for t in content)):
            return None
        if any(set(content) <= set(key.split(" ")) for _, key in v.rare[content[0]]):
            return None
        nodes = set.intersection(*({node for node, _ in v.rare[t]} for t in content))
        if len(nodes) != 1:
            return None
        node = nodes.pop()
        return Link(text, node, " ".join(content), "partial", PARTIAL_SCORE)

    def _synonym(self, text: str, toks: list[str]) -> Link | None:
        """The node a choice of two words or more names with one word replaced by a synonym the graph
        gives (:attr:`~kgwise.kg.names.NameVariants.synonyms`: two one-word names of one node, "Hemangioma"
        and "Angioma"): "Cherry hemangioma" → `Cherry angioma`. Only a name as written or folded, and
        only when one node is so reached. Method ``derived``, score 0.9."""
        v = self._variants
        if v is None or len(toks) < 2:
            return None
        folded = [fold_key(t) for t in toks]
        found: dict[int, str] = {}
        for i, t in enumerate(folded):
            for other in v.synonyms.get(t, ()):
                key = " ".join([*folded[:i], other, *folded[i + 1:]])
                hit = self.index.lookup(key)
                node = hit[0] if hit is not None and self._allowed(key, hit[1], None) else v.folded.get(key)
                if node is not None:
                    found.setdefault(node, key)
        if len(found) != 1:
            return None
        (node, key), = found.items()
        return Link(text, node, key, "derived", PARTIAL_SCORE)

    def _body_part(self, toks: Sequence[str]) -> bool:
        """Whether a choice names a part of the body (:func:`~kgwise.kg.names.body_words`, WordNet's
        ``noun.body``): its words, or its head (the last word before any complement), plurals as singular
        ("Fallopian tubes", "Hair follicles", "Vulva", "Inferior mesenteric artery"). Such a choice is
        linked by its whole name only, never by a name inside it, a name narrowing it, a misspelling or a
        paraphrase: "Fallopian tubes" is no `Ovarian tubal ligation`, "Vulva" no `Kraurosis vulvae`, "Hair
        follicles" no `Nabothian gland cyst` (the false links of the blind ``medqa_ddb_fresh2`` options);
        MedQA→DDB's labels take no organ for a disorder of it. A count stays ("Two eyes" → `two`, KagNet's
        convention on CSQA)."""
        cut = next((i for i, t in enumerate(toks) if t in _PREPOSITIONS and i), len(toks))
        words = [t for t in toks[:cut] if t.isalpha() and t not in self._stop]
        if not words:
            return False
        body = body_words()
        last = words[-1]
        for one in dict.fromkeys([last, last[:-1] if last.endswith("s") else last, *latin_singulars(last)]):
            if one in body or " ".join([*words[:-1], one]) in body:
                return True
        return False

    @staticmethod
    def _conjuncts(text: str, written: list[tuple[str, int, int]]) -> list[str]:
        """The parts of a choice that joins concepts with :data:`_CONJUNCTIONS` ("Inflammation and edema" →
        "Inflammation", "edema"), each of a word or more; ``[]`` for a choice that joins none."""
        cuts = [i for i, (w, _, _) in enumerate(written)
                if w.lower() in _CONJUNCTIONS and 0 < i < len(written) - 1]
        if not cuts:
            return []
        bounds = [0, *cuts, len(written)]
        parts = []
        for a, b in itertools.pairwise(bounds):
            first = a + 1 if a else 0
            if first < b:
                parts.append(text[written[first][1]:written[b - 1][2]].strip(" ,;"))
        return [x for x in parts if x]

    def _category(self, node: int) -> bool:
        """Whether ``node`` is a class of conditions (:func:`~kgwise.kg.names.is_category`): a name inside
        a choice ("Transmural inflammation" holds "inflammation", an alias of `Inflammatory conditions`)
        names a member of the class, not the class; the class is linked by its whole name, or a paraphrase
        of the whole choice ("Autosomal dominant" → `Autosomal dominant conditions`, by embedding)."""
        return is_category(self.kg.label(node))

    def _concept(self, text: str, toks: list[str], written: list[tuple[str, int, int]],
                 formed: bool = False) -> Link | None:
        """A whole choice's concept when its name is not the choice (see :meth:`ground_choice`); never a
        category (:meth:`_category`). ``formed``: ``toks`` has a word in its other form (see
        :meth:`_contained`)."""
        link = self._derived(text, toks)
        contained = self._contained(text, toks, written, formed) if link is None else None
        if contained is not None and contained.score <= 0.5:
            contained = self._settle_tie(text, contained)
        if link is None and (contained is None or contained.score < 1.0):
            link = self._containing(text, toks)
        found = link or contained
        return None if found is None or self._category(found.node) else found

    def ground_names(self, names: Sequence[str], links: list[Link] | None = None) -> tuple[int, ...]:
        """Entity names looked up whole (as written, then lemmatised), else by the fallbacks; names not
        linked are dropped."""
        found: dict[int, None] = {}
        for name in names:
            written = written_tokens(name)
            toks = [w.lower() for w, _, _ in written]
            link = self._whole(name, toks, written if self._precise else None, trim=self._precise)
            if link is None:
                link = self.fallback(name)
            if link is not None and self._keep(link, links):
                found[link.node] = None
        return tuple(found)

    def fallback(self, mention: str) -> Link | None:
        """The best fuzzy, else embedding, link of a mention exact matching missed (``None`` without
        ``config.linking``, or when none reaches its threshold). Under the precise rules a fuzzy link needs
        a similarity of 0.8 (one edit in a word of four letters is another word: "Iraq", "Iran"), and a
        mention that is a word of some name ("franc", "peso", "Palsy") is linked by neither: it is no
        misspelling, and the names holding it are many things it may mean ("rupee" is no `Indian rupee`,
        though MiniLM says so at 0.94, as "Diverticulitis" is `Colonic diverticulitis` at 0.93); nor is a
        common English word ("cAMP" is not "Cramp"). The embedding search reads the mention, then its core
        without :data:`~kgwise.kg.names.QUALIFIERS` ("Previous radiation therapy" → "radiation"), and
        refuses a name that is a state of the mention's concept (:func:`~kgwise.kg.names.names_a_state`:
        "Pyruvate kinase" → `Pyruvate kinase deficiency` at 0.90), as the head-noun rule does, or the mention
        with another count (:func:`~kgwise.kg.names.another_count`: "Adenosine diphosphate" is no `Adenosine
        triphosphate`, 0.94)."""
        cfg = self.config.linking
        if cfg is None:
            return None
        key = phrase_key(mention)
        if self._precise and key in self.index.words:
            return None
        if cfg.fuzzy and len(key) >= cfg.fuzzy_min_length and not (self._precise and key in common_words()):
            least = max(cfg.fuzzy_min_score, 0.8) if self._precise else cfg.fuzzy_min_score
            for node, name, score in self._fuzzy(key, least):
                return Link(mention, node, name, "fuzzy", score)
        if cfg.embedding and self.embedder is not None and key:
            tried = [key]
            core = " ".join(t for t in key.split(" ") if t not in QUALIFIERS) if self._precise else key
            if core and core != key:
                tried.append(core)
            for text in tried:
                for node, name, score in self.embedder.search(text, 1, cfg.embedding_min_score):
                    if not (self._precise and _not_a_paraphrase(text, name)):
                        return Link(mention, node, name, "embedding", score)
        return None

    def suggest(self, text: str, limit: int = 3) -> list[str]:
        """Preferred labels of the nodes whose names are closest to ``text`` (for "did you mean")."""
        return [self.kg.label(v) for v, _, _ in self.index.fuzzy(phrase_key(text), limit, 0.6)]

    # ------------------------------------------------------------------ matching
    @staticmethod
    def _in_order(hits: list[tuple[int, int]]) -> tuple[int, ...]:
        return tuple(dict.fromkeys(node for _, node in sorted(hits)))

    def _keep(self, link: Link, links: list[Link] | None) -> tuple[int, ...]:
        """``(link.node,)`` recorded in ``links``, or ``()`` when it scores below ``linking.min_score``."""
        cfg = self.config.linking
        if cfg is not None and link.score < cfg.min_score:
            return ()
        if links is not None:
            links.append(link)
        return (link.node,)

    def _fuzzy(self, key: str, min_score: float) -> list[tuple[int, str, float]]:
        """The best name by edit distance: over the names as spelled under the earlier rules; under the
        precise ones over folded names and partial names with transpositions (where the index has them),
        the best of five that is a typing slip of the key (:func:`is_typo`)."""
        if not self._precise:
            return self.index.fuzzy(key, 1, min_score)
        folded = getattr(self.index, "fuzzy_folded", None)
        key = fold_key(key)
        found: list[tuple[int, str, float]] = (folded or self.index.fuzzy)(key, 5, min_score)
        return [x for x in found if is_typo(key, fold_key(phrase_key(x[1])), common_words())][:1]

    def _whole(self, text: str, toks: list[str], written: list[tuple[str, int, int]] | None,
               trim: bool = True) -> Link | None:
        """The link of a whole mention (a choice, an entity name): its name as written or lemmatised, also
        without leading and trailing stop words; under the precise rules then its folded, reordered and
        partial names, the same with its number words in digits, and a misspelling of one (similarity
        ≥ 0.85) when one of its words is in no name (a mention made of the graph's own words is no slip:
        "Diverticulitis" is not "Diverticulosis")."""
        if not toks:
            return None
        a, b = 0, len(toks)
        found = self._lookup_key(toks, written)
        if found is None and trim:
            while a < b and toks[a] in self._stop:
                a += 1
            while b > a and toks[b - 1] in self._stop:
                b -= 1
            if 0 < b - a < len(toks):
                found = self._lookup_key(toks[a:b], written[a:b] if written is not None else None)
        if found is None and self._variants is not None:
            key = " ".join(toks[a:b]) if b > a else " ".join(toks)
            node = self._variants.bags.get(bag_key(key))
            if node is not None:
                found = (key, node, "reordered", 1.0)
        if found is None and self._precise and any(t in _NUMERALS for t in toks):
            link = self._whole(text, [_NUMERALS.get(t, t) for t in toks], None, trim)
            if link is not None:  # "Trisomy eighteen" is `Trisomy 18`: a spelling of the same name
                same = link.method in ("exact", "alias")
                return dataclasses.replace(link, method="folded") if same else link
        if found is None and self._precise:
            cfg = self.config.linking
            words = self.index.words
            if (cfg is not None and cfg.fuzzy and len(" ".join(toks)) >= cfg.fuzzy_min_length
                    and any(t not in words for t in toks)):
                for node, name, score in self._fuzzy(" ".join(toks), max(0.85, cfg.fuzzy_min_score)):
                    return Link(text, node, name, "fuzzy", score)
        if found is None:
            return None
        key, node, method, score = found
        return Link(" ".join(toks) if not self._precise else text, node, key, method, score)

    def _contained(self, text: str, toks: list[str], written: list[tuple[str, int, int]],
                   formed: bool = False) -> Link | None:
        """The name a choice contains that covers the most of it (method ``contained``): its words
        weighed by :meth:`_weight`, a contiguous match
        (as :meth:`_match` finds them) or, under precise rules, any two to four of its words as a name's
        word bag ("Duodenal peptic ulcer" holds "duodenal ulcer"). Kept when it covers at least half the
        choice's weight (``score``: the share); ties go to the earlier, longer name. A name in the
        complement of a term (after one of :data:`_PREPOSITIONS` that follows a term) is not the choice:
        "Luteoma of pregnancy" is no pregnancy; "Treatment with radioactive iodine" (no term before "with")
        and "Supplementation with vitamin D" (a qualifier before "with") keep their names. Under the precise
        rules a name that covers only half the choice must hold its head, the last word before any complement
        (English compounds are head-final: a "thromboplastin time" is a time, a "suicide attempt" an attempt):
        "Partial thromboplastin time" is no `Thromboplastin`, "Previous suicide attempt" no `Suicide`. A
        qualifier or number as the last word ("Ketotifen eye drops") leaves the head open, and so does a word
        put in its other form (``formed``: "Hamartomatous polyp" read as "hamartomatosis polyp" names the
        kind of polyp by the adjective's noun, `Hamartomatosis`). More than half a choice covered stands
        without its head ("Rubella virus" → `Rubella`): the rule at any cover lost 4 right links on the
        studied MedQA options, 2 on the development set and 1 on the fresh one. Measured (``kgwise bench
        grounding --parts links``, docs/linking.md): 3 false links fewer on the studied sets, none lost;
        on the blind ``medqa_ddb_fresh2`` options 1 right link fewer, none gained."""
        weight = [self._weight(t) for t in toks]
        last = max((i for i, w in enumerate(weight) if w), default=-1)
        weight = [1 if w == 2 and i < last and t.endswith(_RELATIONAL_ENDS) else w
                  for i, (t, w) in enumerate(zip(toks, weight, strict=True))]
        total = sum(weight)
        if not total:
            return None
        cut = next((i for i, t in enumerate(toks) if t in _PREPOSITIONS and 2 in weight[:i]), len(toks))
        head = next((i for i in range(cut - 1, -1, -1) if toks[i] not in self._stop), -1)
        if formed or not self._precise or head < 0 or toks[head] in QUALIFIERS or not toks[head].isalpha():
            head = -1  # no head rule (see the docstring)

        def headless(share: float, idx: Sequence[int]) -> bool:
            """Half a choice or less, before its head: "Partial thromboplastin time" is no thromboplastin."""
            return share <= 0.5 and idx[-1] < head and not self._count(toks, idx)

        found: list[Link] = []
        self._match(toks, found, written)
        best: tuple[float, int, Link] | None = None
        for link in found:
            lo, hi = link.start or 0, link.end or 0
            covered = [i for i, (_, a, b) in enumerate(written) if a >= lo and b <= hi]
            if not covered or covered[0] >= cut or toks[covered[-1] + 1:covered[-1] + 2] == ["free"]:
                continue  # "Lactose-free diet" is no lactose
            share = sum(weight[i] for i in covered) / total
            if headless(share, covered):
                continue
            cand = (share, len(covered), link)
            if best is None or cand[:2] > best[:2]:
                best = cand
        v = self._variants
        content = [i for i in range(len(toks)) if weight[i]]
        if v is not None and 2 < len(content) <= 8:
            for size in range(min(4, len(content) - 1), 1, -1):
                for subset in itertools.combinations(content, size):
                    if subset[0] >= cut:
                        continue
                    node = v.bags.get(bag_key(" ".join(toks[i] for i in subset)))
                    if node is None:
                        continue
                    share = sum(weight[i] for i in subset) / total
                    if headless(share, subset):
                        continue
                    if best is None or (share, size) > best[:2]:
                        best = (share, size, Link(text, node, " ".join(toks[i] for i in subset), "contained",
                                                  share))
        if best is None or best[0] < 0.5:
            return None
        share, _, link = best
        return dataclasses.replace(link, mention=text, method="contained", score=share, start=None, end=None)

    @staticmethod
    def _count(toks: list[str], covered: Sequence[int]) -> bool:
        """Whether the words ``covered`` are a number ("two eyes": a count, linked as a concept of its own
        where a graph has one, by KagNet's grounding convention), which the head rule leaves."""
        return all(toks[i].isdigit() or toks[i] in _NUMERALS for i in covered)

    def _settle_tie(self, text: str, link: Link) -> Link | None:
        """A contained name covering only half a choice (as many weighed words left out as covered: the
        left-out ones may be the concept as much) checked by label embedding, where the grounder has one:
        a confident paraphrase of the whole choice (``embedding_min_score`` or more) to another node wins
        ("Alzheimer dementia" → `Alzheimer disease` 0.94, not `Chronic brain failure` through "dementia"),
        unless it is known to say something else (:func:`_not_a_paraphrase`: "Adenosine diphosphate" is
        neither `Adenosine triphosphate` nor `Adenosine`);
        else the contained name stands only among the choice's :data:`TIE_NEIGHBOURS` nearest names
        ("Tsetse flies" is no `Sandfly species`), and ``None`` leaves the choice to the fallbacks. Without
        an embedder the contained name stands."""
        cfg = self.config.linking
        if cfg is None or not cfg.embedding or self.embedder is None:
            return link
        key = phrase_key(text)
        last = self._near
        if last[0] != key:  # once per choice, not once per word form tried (one tuple: safe across threads)
            last = self._near = (key, self.embedder.search(key, TIE_NEIGHBOURS, 0.0))
        near = last[1]
        if near and near[0][0] != link.node and near[0][2] >= cfg.embedding_min_score:
            node, name, score = near[0]  # a confident other node; refused, it leaves no half cover either
            return None if _not_a_paraphrase(key, name) else Link(text, node, name, "embedding", score)
        return link if any(node == link.node for node, _, _ in near) else None

    def _weight(self, tok: str) -> int:
        """A word's weight in a choice: 0 for a stop word or a qualifier (:data:`~kgwise.kg.names.
        QUALIFIERS`: "level", "intoxication"), 1 for a common English word (or its plural) or a number, 2
        for any other (a term; :meth:`_contained` weighs a relational adjective before the last term 1:
        "Cardiac contusion" is a contusion)."""
        if tok in self._stop or tok in QUALIFIERS:
            return 0
        common = common_words()
        return 1 if (tok in common or tok.rstrip("s") in common or tok.isdigit()) else 2

    def _derived(self, text: str, toks: list[str]) -> Link | None:
        """The name medical word formation makes of a choice (:func:`~kgwise.kg.names.derived_keys`:
        "High LDL-cholesterol" → `Hypercholesterolemia`, "Peritoneal inflammation" → `Peritonitis`), method
        ``derived``, score 0.9."""
        v = self._variants
        for key in derived_keys(toks):
            hit = self.index.lookup(key)
            if hit is not None and self._allowed(key, hit[1], None):
                return Link(text, hit[0], key, "derived", PARTIAL_SCORE)
            node = v.heads.get(key) if v is not None else None
            if node is not None:  # "Ferritin levels low (plasma or serum)"
                return Link(text, node, key, "derived", PARTIAL_SCORE)
        return None

    def _containing(self, text: str, toks: list[str]) -> Link | None:
        """The node whose name is the choice narrowed (the head-noun rule): a name holding the choice's
        content words in order (plurals aside, the choice's :data:`~kgwise.kg.names.QUALIFIERS` left
        out), after at most one modifier word and before nothing but a type or number ("type 2"), a
        generic head or course ("syndrome", "acute") or a phrase starting with a stop word ("of large
        intestine"). A choice that is one common English word is not narrowed by an adjective, which names a
        kind of it ("Dissociation" is no `Electromechanical dissociation`; "sterling" is `Pound sterling`).
        Found through the choice's rarest word (in the names of at most
        :data:`~kgwise.kg.names.RARE_NODES` nodes): "Diverticulitis" → `Colonic diverticulitis`, "Alcohol
        withdrawal" → `Alcohol withdrawal syndrome`, never "Myeloperoxidase" → `Myeloperoxidase
        deficiency` (the head is another word). The name adding fewest words wins (a naming head such as
        "syndrome" adds none); a tie between nodes links none, never one picked ("Palsy": `Bell palsy`,
        `Erb palsy`, …), nor does a choice that more than :data:`MAX_HOLDERS` nodes' names hold at all
        ("Diabetes"). Method ``partial``, score 0.9."""
        v = self._variants
        if v is None:
            return None

        def stem(w: str) -> str:
            return w[:-1] if len(w) > 3 and w.endswith("s") else w

        content = [fold_key(t) for t in toks if t not in self._stop and t not in QUALIFIERS]
        want = [stem(t) for t in content]
        rare = [v.rare[t] for t in content if t in v.rare]
        if not want or not rare:
            return None
        word = len(toks) == 1 and toks[0] in common_words()  # an English word alone: no kind of it
        n = len(want)
        best: dict[int, str] = {}
        least = 3
        holders: set[int] = set()
        modified: dict[str, set[int]] = {}  # a modifier → the nodes it names with the choice and a type
        naming = _NAMING_HEADS | (_ANTIBODY_HEADS if content[0].startswith("anti") else set())
        generic = _GENERIC_HEADS | naming
        for node, key in min(rare, key=len):
            words = [stem(w) for w in key.split(" ")]
            if any(words[i:i + n] == want for i in range(len(words) - n + 1)):
                holders.add(node)
            at = next((i for i in range(min(2, len(words) - n + 1)) if words[i:i + n] == want), None)
            if at is None or (at and words[0] in self._stop) or names_a_state(" ".join(content), key):
                continue  # nor a state of it: "Anion gap metabolic acidosis" is no "Normal anion gap …"
            if word and at and words[0].endswith(_RELATIONAL_ENDS):
                continue  # "Dissociation" is no "Electromechanical dissociation"
            tail = words[at + n:]
            if at and tail and (tail[0] == "type" or tail[-1].isdigit()):
                modified.setdefault(words[0], set()).add(node)
            if tail and not (tail[0] in self._stop or all(w in generic for w in tail)
                             or (tail[-1].isdigit() and len(tail) <= 2) or tail[0] == "type"):
                continue
            if at and tail and not set(tail) <= naming:
                continue  # a modifier and a type: a kind of a kind ("Amyloid polyneuropathy type 1")
            added = at + (len(tail) > 0 and not set(tail) <= naming)
            if added < least:
                least, best = added, {}
            if added == least:
                best.setdefault(node, key)
        if len(best) != 1 or len(holders) > MAX_HOLDERS:  # "Palsy", "Diabetes" are many things
            return None
        (node, key), = best.items()
        first = key.split(" ", 1)[0]
        if stem(first) != want[0] and len(modified.get(stem(first), set()) | {node}) > 1:
            return None  # the modifier names a genus of types: "Amyloid polyneuropathy" type 1 and type 2
        return Link(text, node, key, "partial", PARTIAL_SCORE)

    def _kinds(self, text: str, toks: list[str]) -> list[Link]:
        """The kinds of a general term that names no node (:attr:`~kgwise.kg.names.NameVariants.kinds`), all
        linked (method ``partial``, score 0.9): "Burkholderia" → `Burkholderia cepacia` and `Melioidosis`
        (named "Burkholderia pseudomallei"), "Teratoma" → its three nodes, as the MedQA→DDB labels take a
        genus for each of its species. Only when they are 2 to :data:`MAX_HOLDERS` nodes and every node
        whose names hold the term is one of them ("Diabetes": diabetes mellitus, insipidus and 22 more
        nodes, is no set of kinds); ``[]`` otherwise."""
        v = self._variants
        if v is None:
            return []
        content = [fold_key(t) for t in toks if t not in self._stop and t not in QUALIFIERS]
        nodes = v.kinds.get(" ".join(content), ())
        rare = [v.rare[t] for t in content if t in v.rare]
        if not 1 < len(nodes) <= MAX_HOLDERS or not rare:
            return []
        n = len(content)
        holders = set()
        for node, key in min(rare, key=len):
            words = key.split(" ")
            if any(words[i:i + n] == content for i in range(len(words) - n + 1)):
                holders.add(node)
        if not holders <= set(nodes) or any(self._category(x) for x in nodes):
            return []
        return [Link(text, x, " ".join(content), "partial", PARTIAL_SCORE) for x in nodes]

    def _allowed(self, key: str, via_alias: bool, written: Sequence[tuple[str, int, int]] | None) -> bool:
        """Whether a name keyed ``key`` may link the span written ``written`` (always, under the earlier
        rules): an ambiguous alias never does; a capitals-only name only a span written in capitals."""
        if not self._precise:
            return True
        v = self._variants
        if via_alias and v is not None and key in v.ambiguous:
            return False
        caps_only = getattr(self.index, "caps_only", None)
        if caps_only is not None and caps_only(key):
            return written is not None and all(w.isupper() or _biochemical(w) for w, _, _ in written)
        return True

    def _lookup_key(self, toks: Sequence[str], written: Sequence[tuple[str, int, int]] | None = None
                    ) -> tuple[str, int, LinkMethod, float] | None:
        """``(matched key, node, method, score)`` of a span: as written, with its last word lemmatised,
        with every word lemmatised; under the precise rules a lemma that is a stop word or shorter than
        3 letters is not tried ("used" is not "us"), then the accent-folded key, then a partial name
        (one word of a proper name, or a name without its parenthesis)."""
        lookup = self.index.lookup
        key = " ".join(toks)
        hit = lookup(key)
        if hit is not None and self._allowed(key, hit[1], written):
            return key, hit[0], "alias" if hit[1] else "exact", 1.0
        precise = self._precise
        if self.config.lemmatise:
            lem = self.lemmatiser.lemma
            last = lem(toks[-1])
            if precise and (last in self._stop or len(last) < 3):
                last = toks[-1]
            keys = []
            if last != toks[-1]:
                keys.append(" ".join([*toks[:-1], last]))
            elif precise and len(last) >= 4 and last.isalpha() and not last.endswith("s"):
                # a name in the plural ("Benzodiazepines", "Diabetic neuropathies")
                plural = last[:-1] + "ies" if last.endswith("y") and last[-2] not in "aeiou" else last + "s"
                keys.append(" ".join([*toks[:-1], plural]))
            if precise:  # a Latin or Greek plural ("emboli": the name "Embolus")
                keys += [" ".join([*toks[:-1], s]) for s in latin_singulars(toks[-1])]
            if len(toks) > 1:
                lemmas = [lem(t) for t in toks[:-1]]
                if precise:
                    lemmas = [m if m not in self._stop and len(m) >= 3 else t
                              for m, t in zip(lemmas, toks[:-1], strict=True)]
                if lemmas != list(toks[:-1]):
                    keys.append(" ".join([*lemmas, last]))
            for k in keys:
                hit = lookup(k)
                if hit is not None and self._allowed(k, hit[1], written):
                    return k, hit[0], "alias" if hit[1] else "exact", 1.0
        v = self._variants
        if v is None:
            return None
        f = fold_key(key)
        node = v.folded.get(f)
        if node is None and f != key:
            hit = lookup(f)
            node = hit[0] if hit is not None and self._allowed(f, hit[1], written) else None
        if node is not None and (f not in v.caps_only or self._allowed(f, True, written)):
            return f, node, "folded", 1.0
        cfg = self.config.linking
        if cfg is None or cfg.partial:
            node = v.partial.get(f) if len(toks) == 1 else None
            if node is None:
                node = v.heads.get(f)
            if node is not None:
                return f, node, "partial", PARTIAL_SCORE
        return None

    def _match(self, toks: list[str], links: list[Link] | None = None,
               written: list[tuple[str, int, int]] | None = None) -> tuple[list[tuple[int, int]], list[bool]]:
        """``(position, node)`` of the longest-first n-gram matches, and which tokens they claimed. With
        ``written`` (the precise rules) a token written in capitals is no stop word ("IT", "US")."""
        n_tok = len(toks)
        if not n_tok:
            return [], []
        det = [t in self._det for t in toks]
        stop = [t in self._stop and not (written is not None and len(t) > 1 and written[i][0].isupper())
                for i, t in enumerate(toks)]
        n_stop = [0]  # n_stop[k]: stop-words among toks[:k]
        for s in stop:
            n_stop.append(n_stop[-1] + s)
        claimed = [False] * n_tok
        hits: list[tuple[int, int]] = []
        min_score = self.config.linking.min_score if self.config.linking is not None else 0.0
        starts = self._may_start(toks) if n_tok > 1 else None
        for n in range(min(self._max_n, n_tok), 0, -1):
            for i in range(n_tok - n + 1):
                j = i + n
                if (det[i] and stop[i]) or n_stop[j] - n_stop[i] == n or True in claimed[i:j]:
                    continue
                if n > 1 and starts is not None and not starts[i]:
                    continue  # no key of two words or more that _lookup_key tries can begin so
                found = self._lookup_key(toks[i:j], written[i:j] if written is not None else None)
                if found is None or found[3] < min_score:
                    continue
                key, node, method, score = found
                if links is not None:
                    if written is not None:
                        links.append(Link(" ".join(w for w, _, _ in written[i:j]), node, key, method, score,
                                          written[i][1], written[j - 1][2]))
                    else:
                        links.append(Link(" ".join(toks[i:j]), node, key, method, score))
                hits.append((i, node))
                for k in range(i, j):
                    claimed[k] = True
        return hits, claimed

    def _may_start(self, toks: Sequence[str]) -> list[bool] | None:
        """Per token, whether a span of two tokens or more starting with it can be found by
        :meth:`_lookup_key`: every key it tries for such a span begins with the token as written, its lemma
        or its accent-folded form (a span's first word is never its last, so the last-word lemma and the
        plural change later words; a folded token of one letter may join the next ones, "u s" → "us", and
        is always tried). ``None`` when the index cannot list its keys (a ``LabelIndex``): every span is
        tried. An open answer of ~37 words holds ~230 spans of 2–8 words, few beginning as a name does: the
        answers' grounding in ``kgwise serve`` went from 1.17 to 0.33 ms each (200 recorded WebQSP answers
        over DDB, in-process; the spans skipped found nothing on 2,204 real texts, a test checks it)."""
        listed = getattr(self.index, "first_words", None)
        if listed is None:
            return None
        first: frozenset[str] = listed(self._variants is not None)
        lem = self.lemmatiser.lemma if self.config.lemmatise else None
        out = []
        for t in toks:
            f = fold_key(t)
            out.append(t in first or f in first or len(f) < 2 or " " in f
                       or (lem is not None and lem(t) in first))
        return out

    def _fuzzy_words(self, written: list[tuple[str, int, int]], claimed: list[bool], cfg: LinkingConfig,
                     links: list[Link] | None, any_case: bool) -> list[tuple[int, int]]:
        """Unclaimed words written capitalised (``any_case``: in any case, for a text that matched no name
        at all, as the earlier rules did), no stop or common word, of 5 letters or more (misspelt proper
        names: "Swizerland", "Kilimanjro"), linked by edit distance (similarity ≥ 0.8 and
        ``fuzzy_min_score``; for a text that matched nothing words of ``fuzzy_min_length`` letters)."""
        common = common_words()
        least = max(cfg.fuzzy_min_score, cfg.min_score, 0.8)
        shortest = cfg.fuzzy_min_length if any_case else max(5, cfg.fuzzy_min_length)
        out: list[tuple[int, int]] = []
        for i, (w, start, end) in enumerate(written):
            t = w.lower()
            if (claimed[i] or not (any_case or w[0].isupper()) or not t.isalpha()
                    or len(t) < shortest or t in self._stop or t in common):
                continue
            for node, name, score in self._fuzzy(fold_key(t), least):
                out.append((i, node))
                if links is not None:
                    links.append(Link(w, node, name, "fuzzy", score, start, end))
        return out


def _biochemical(written: str) -> bool:
    """Whether a word is written as biochemistry writes an acronym, one lower-case letter before two
    capitals or more ("hCG", "cAMP", "mRNA"): a capitals-only name may link it, as it links "HCG"."""
    return len(written) >= 3 and written[0].islower() and written[1:].isupper() and written.isalpha()


def _not_a_paraphrase(key: str, name: str) -> bool:
    """Whether an embedding's nearest ``name`` is known not to say what ``key`` says: a state of its concept
    (:func:`~kgwise.kg.names.names_a_state`), the same words with another count
    (:func:`~kgwise.kg.names.another_count`), or a lookalike of it, a name with *-like* the mention lacks
    ("Chediak-Higashi syndrome" is no `Griscelli syndrome type 1`, named "Chediak-Higashi-like syndrome",
    0.97)."""
    like = "like" in phrase_key(name).split(" ") and "like" not in key.split(" ")
    return like or names_a_state(key, name) or another_count(key, name)


_PREFIXES = frozenset({"anti", "non", "post", "pre", "co", "sub", "inter", "intra", "hyper", "hypo", "pseudo",
                       "poly", "peri", "para", "retro", "trans", "extra"})
"""Prefixes medicine writes with or without a hyphen ("anti-nuclear", "antinuclear"; "post-traumatic")."""


def _closed_prefixes(text: str, written: Sequence[tuple[str, int, int]]) -> list[str] | None:
    """The tokens of ``text`` with each of :data:`_PREFIXES` written before a hyphen joined to the next word
    ("Anti-nuclear antibodies" → "antinuclear antibodies"), or ``None`` when it writes none so."""
    out: list[str] = []
    joined = False
    for i, (w, _, end) in enumerate(written):
        if out and joined:
            out[-1] += w.lower()
            joined = False
            continue
        out.append(w.lower())
        joined = (w.lower() in _PREFIXES and i + 1 < len(written) and text[end:end + 1] == "-"
                  and written[i + 1][1] == end + 1)
    return out if len(out) < len(written) else None


def is_typo(key: str, name: str, words: Collection[str] = ()) -> bool:
    """Whether ``key`` may be ``name`` mistyped: as many words, each equal to its counterpart or, both of
    4 letters or more, within edit similarity 0.75 (transpositions one edit) and not another ending of
    the same stem (:func:`_other_ending`), nor the key with another count
    (:func:`~kgwise.kg.names.another_count`) or another quantity (:func:`~kgwise.kg.names.another_quantity`:
    "Hypovolemia" is no "Hypokalemia"), nor one of ``words`` (English words: a word the dictionary
    holds is no slip, "Repression" is not "Depression"). A different short word is
    another name, not a slip: "QT prolongation" is not "QRS prolongation", "Portal vein thrombosis" not
    "Renal vein thrombosis"."""
    from rapidfuzz.distance import OSA

    a, b = key.split(" "), name.split(" ")
    if another_count(key, name):  # "diphosphate" is no slip for "triphosphate"
        return False
    if len(a) != len(b):
        return len(a) == 1 and len(b) == 1 and not _other_ending(key, name)
    return all(x == y or (len(x) >= 4 and len(y) >= 4 and OSA.normalized_similarity(x, y) >= 0.75
                          and not _other_ending(x, y) and not opposite_degree(x, y) and x not in words
                          and not another_quantity(x, y))
               for x, y in zip(a, b, strict=True))


def _other_ending(x: str, y: str) -> bool:
    """Whether two words differ by two edits or more, all in their last three letters: the same stem with
    another ending is another word, not a slip ("somatotrophs" is no "somatotropin", "corticotrophs" no
    "corticotrophin"), unless the endings are a Latin singular and plural
    (:data:`~kgwise.kg.names.LATIN_NUMBER`: "bacilli", "bacillus"); one edit there is a slip
    ("Pseudomona")."""
    from rapidfuzz.distance import OSA

    stem = next((i for i, (a, b) in enumerate(zip(x, y, strict=False)) if a != b), min(len(x), len(y)))
    if stem < max(len(x), len(y)) - 3 or OSA.distance(x, y) < 2:
        return False
    return not any(u.endswith(a) and v.endswith(b) and u[:-len(a)] == v[:-len(b)]
                   for a, b in LATIN_NUMBER for u, v in ((x, y), (y, x)))

