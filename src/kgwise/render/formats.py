"""The three knowledge formats of KnowGPT (§3.2.1): triples F_t, sentences F_s, graph description F_g.

Every format turns a :class:`kgwise.types.Subgraph` (KG ids) into prompt text. The edges used are, in
order: the edges of the subgraph's paths (question concept → choice concept chains), then the remaining
edges touching a question or choice concept, then the rest; duplicates removed, at most
``FormatConfig.max_triples``, the answer choices taking turns (:func:`select_edges`). An edge whose two
ends read the same (WordNet's ``make in_synset make.v.01``, a lemma and its synset) says nothing and
is left out, so it takes no place under the cap; F_s chains pass over such hops. So is an edge that
states a kept edge's fact backwards (``canine hyponym dog`` after ``dog hypernym canine``, either
direction of a symmetric relation): it would say the same thing twice.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import TYPE_CHECKING, Protocol, TypeVar, runtime_checkable

from kgwise.errors import ConfigError
from kgwise.kg.base import KnowledgeGraph
from kgwise.render.prompts import graph_description_prompt
from kgwise.render.templates import clause, clean_label, mirror_phrase, relation_phrase
from kgwise.types import Path, Question, Subgraph, Usage

if TYPE_CHECKING:
    from kgwise.llm import LLM

__all__ = [
    "FORMATS",
    "FORMAT_NAMES",
    "Format",
    "FormatConfig",
    "FormatFactory",
    "GraphDescriptionFormat",
    "Rendered",
    "SentenceFormat",
    "TripleFormat",
    "make_format",
    "register_format",
    "says_nothing",
    "select_edges",
]

Edge = tuple[int, int, int]
T = TypeVar("T")
FORMAT_NAMES = ("F_t", "F_s", "F_g")
"""The paper's three formats, in its order (:data:`FORMATS` holds every registered one)."""


@dataclass(frozen=True)
class FormatConfig:
    """``max_triples``: cap on the facts rendered (small models have short contexts);
    ``description_tokens``: generation budget of the F_g description."""

    max_triples: int = 8
    description_tokens: int = 96

    def __post_init__(self) -> None:
        if self.max_triples <= 0 or self.description_tokens <= 0:
            raise ConfigError("FormatConfig: max_triples and description_tokens must be positive")


@dataclass(frozen=True)
class Rendered:
    """Rendered knowledge and what rendering cost (only F_g calls the LLM)."""

    text: str
    usage: Usage = field(default_factory=Usage)


@runtime_checkable
class Format(Protocol):
    """A knowledge format: ``name`` (``F_t``/``F_s``/``F_g``) and ``render``."""

    name: str

    def render(
        self, kg: KnowledgeGraph, subgraph: Subgraph, question: Question | None = None
    ) -> Rendered: ...


def select_edges(subgraph: Subgraph, max_triples: int, kg: KnowledgeGraph | None = None) -> list[Edge]:
    """At most ``max_triples`` distinct edges: the paths' edges first, then the edges touching a question
    or choice concept, then the rest. In the first two tiers the answer choices take turns (each path
    belongs to the choice it reaches, each edge to the choice it touches, then the question's own), so a
    cap never keeps the facts of one choice alone. With ``kg``, edges whose ends read the same
    (:func:`says_nothing`) and edges that state a kept edge's fact backwards are left out."""
    n = len(subgraph.choice_nodes)
    owner: dict[int, int] = {}  # node → its group: choice i → i, question concept → n
    for i, nodes in enumerate(subgraph.choice_nodes):
        for v in nodes:
            owner.setdefault(v, i)
    for v in subgraph.question_nodes:
        owner.setdefault(v, n)
    other = n + 1

    def path_group(path: Path) -> int:
        return next((owner[v] for v in reversed(path.nodes) if owner.get(v, other) < n),
                    min((owner.get(v, other) for v in path.nodes), default=other))

    ordered: dict[Edge, None] = {}
    for path in _take_turns(subgraph.paths, path_group):
        for e in path.edges():
            ordered.setdefault(e, None)
    rest = [e for e in subgraph.edges if e not in ordered]
    touching = [e for e in rest if e[0] in owner or e[2] in owner]
    for e in _take_turns(touching, lambda e: min(owner.get(e[0], other), owner.get(e[2], other))):
        ordered.setdefault(e, None)
    for e in rest:
        ordered.setdefault(e, None)
    kept = ordered if kg is None else _new_facts(kg, ordered)
    return list(islice(kept, max_triples))


def _new_facts(kg: KnowledgeGraph, edges: Iterable[Edge]) -> Iterator[Edge]:
    """``edges`` without those that say nothing or that state a fact already given, read backwards."""
    given: set[tuple[int, str, int]] = set()
    for e in edges:
        if says_nothing(kg, e):
            continue
        h, r, t = e
        mirror = mirror_phrase(kg.relation_name(r))
        if mirror is not None and (t, mirror, h) in given:
            continue
        given.add((h, relation_phrase(kg.relation_name(r)), t))
        yield e


def says_nothing(kg: KnowledgeGraph, edge: Edge) -> bool:
    """Whether ``edge``'s head and tail read the same as words (``make`` and ``make.v.01``)."""
    return clean_label(kg.label(edge[0])).casefold() == clean_label(kg.label(edge[2])).casefold()


def _take_turns(items: Sequence[T], group: Callable[[T], int]) -> list[T]:
    """``items`` reordered so that their groups (in increasing order) take turns, each keeping its own
    order: ``a1 a2 b1 c1 c2`` → ``a1 b1 c1 a2 c2``."""
    groups: dict[int, list[T]] = {}
    for item in items:
        groups.setdefault(group(item), []).append(item)
    queues = [groups[k] for k in sorted(groups)]
    return [q[i] for i in range(max(map(len, queues), default=0)) for q in queues if i < len(q)]


def _names(kg: KnowledgeGraph, edge: Edge) -> tuple[str, str, str]:
    h, r, t = edge
    return kg.label(h), kg.relation_name(r), kg.label(t)


def _sentence(text: str) -> str:
    text = text.strip()
    return (text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")) if text else ""


class TripleFormat:
    """F_t: one ``(head, relation, tail)`` per line, relation names as the KG spells them."""

    name = "F_t"

    def __init__(self, config: FormatConfig | None = None) -> None:
        self.config = config or FormatConfig()

    def render(self, kg: KnowledgeGraph, subgraph: Subgraph, question: Question | None = None) -> Rendered:
        lines = []
        for e in select_edges(subgraph, self.config.max_triples, kg):
            h, r, t = _names(kg, e)
            lines.append(f"({clean_label(h)}, {r}, {clean_label(t)})")
        return Rendered("\n".join(lines))


class SentenceFormat:
    """F_s: each path as one fluent sentence chaining relation templates (``A is a kind of B, which is
    used for C.``); edges outside the paths as one sentence each. One-fact sentences that share their
    head and relation are said once, their tails listed (``Revolving door is found at bank, mall and
    library.``): CSQA's ranked knowledge is mostly one such fact per choice, and listing them takes
    about half the tokens of one sentence each."""

    name = "F_s"

    def __init__(self, config: FormatConfig | None = None) -> None:
        self.config = config or FormatConfig()

    @staticmethod
    def _said(kg: KnowledgeGraph, path: Path, budget: set[Edge]) -> list[Edge]:
        """The edges of ``path`` its sentence says: those that say something, up to the first one outside
        ``budget``."""
        said: list[Edge] = []
        for edge in path.edges():
            if says_nothing(kg, edge):
                continue
            if edge not in budget:
                break
            said.append(edge)
        return said

    @staticmethod
    def _chain(kg: KnowledgeGraph, edges: Sequence[Edge]) -> str:
        parts: list[str] = []
        last = ""  # the words the sentence ends with: "which" may only continue from them
        for edge in edges:
            h, r, t = _names(kg, edge)
            if not parts:
                parts.append(clause(h, r, t))
            elif clean_label(h).casefold() == last:
                parts.append(f"which {clause(h, r, t)[len(clean_label(h)) :].strip()}")
            else:
                parts.append(f"and {clause(h, r, t)}")
            last = clean_label(t).casefold()
        return _sentence(", ".join(parts))

    def render(self, kg: KnowledgeGraph, subgraph: Subgraph, question: Question | None = None) -> Rendered:
        edges = select_edges(subgraph, self.config.max_triples, kg)
        budget = set(edges)
        items: list[str | list[Edge]] = []  # a chained sentence, or one-fact sentences sharing a stem
        by_stem: dict[str, list[Edge]] = {}
        covered: set[Edge] = set()

        def fact(edge: Edge) -> None:
            stem = _stem(kg, edge)
            if stem not in by_stem:
                by_stem[stem] = []
                items.append(by_stem[stem])
            if edge not in by_stem[stem]:
                by_stem[stem].append(edge)

        for path in subgraph.paths:
            said = self._said(kg, path, budget)
            if len(said) == 1:
                fact(said[0])
            elif said and (text := self._chain(kg, said)) not in items:
                items.append(text)
            covered.update(said)
        for e in edges:
            if e not in covered:
                fact(e)
        return Rendered(" ".join(x if isinstance(x, str) else _listed(kg, x) for x in items))


def _stem(kg: KnowledgeGraph, edge: Edge) -> str:
    """An edge's clause without its tail: its head and relation phrase (``revolving door is found at ``)."""
    h, r, t = _names(kg, edge)
    return clause(h, r, t)[: -len(clean_label(t)) or None]


def _listed(kg: KnowledgeGraph, facts: Sequence[Edge]) -> str:
    """One-fact sentences with one stem (head and relation phrase) as one: ``A is found at B, C and D.``"""
    tails = list(dict.fromkeys(clean_label(kg.label(e[2])) for e in facts))
    listed = tails[0] if len(tails) == 1 else f"{', '.join(tails[:-1])} and {tails[-1]}"
    return _sentence(_stem(kg, facts[0]) + listed)


class GraphDescriptionFormat:
    """F_g: the LLM itself describes the subgraph around its central entity (the node in most of the
    selected edges, question concepts first on ties). Descriptions are memoised per triple set here and
    persisted by the LLM layer's response cache."""

    name = "F_g"

    def __init__(self, llm: LLM, config: FormatConfig | None = None) -> None:
        self.llm = llm
        self.config = config or FormatConfig()
        self._memo: dict[str, str] = {}
        self._lock = threading.Lock()

    def render(self, kg: KnowledgeGraph, subgraph: Subgraph, question: Question | None = None) -> Rendered:
        edges = select_edges(subgraph, self.config.max_triples, kg)
        if not edges:
            return Rendered("")
        counts: Counter[int] = Counter()
        for h, _, t in edges:
            counts[h] += 1
            counts[t] += 1
        qnodes = set(subgraph.question_nodes)
        center = max(counts, key=lambda v: (counts[v], v in qnodes, -v))
        triples = "\n".join(
            f"({clean_label(h)}, {r}, {clean_label(t)})" for h, r, t in (_names(kg, e) for e in edges)
        )
        prompt = graph_description_prompt(triples, clean_label(kg.label(center)))
        with self._lock:
            memo = self._memo.get(prompt)
        if memo is not None:
            return Rendered(memo, Usage(cached_calls=1))
        gen = self.llm.generate(prompt, max_tokens=self.config.description_tokens, temperature=0.0,
                                stop=["\n\n"])
        text = " ".join(gen.text.split())
        with self._lock:
            self._memo[prompt] = text
        return Rendered(text, gen.usage)


FormatFactory = Callable[["LLM | None", FormatConfig | None], Format]
"""Builds a format from the LLM (``None`` where none is given) and the rendering options."""

FORMATS: dict[str, FormatFactory] = {}
"""Registered formats by name (:func:`register_format`), in registration order."""
_ALIASES: dict[str, str] = {}


def register_format(name: str, factory: FormatFactory, aliases: Sequence[str] = ()) -> None:
    """Make ``name`` (and each alias) buildable by :func:`make_format`; a name taken twice is an error."""
    for key in (name, *aliases):
        if key in FORMATS or key in _ALIASES or "+" in key or not key:
            raise ConfigError(f"knowledge format name {key!r} is empty, holds '+' or is registered twice")
    FORMATS[name] = factory
    _ALIASES.update(dict.fromkeys(aliases, name))


def _graph_description(llm: LLM | None, config: FormatConfig | None) -> GraphDescriptionFormat:
    if llm is None:
        raise ConfigError("format F_g (graph description) needs an LLM")
    return GraphDescriptionFormat(llm, config)


register_format("F_t", lambda llm, config: TripleFormat(config), aliases=("triples",))
register_format("F_s", lambda llm, config: SentenceFormat(config), aliases=("sentences",))
register_format("F_g", _graph_description, aliases=("graph",))


def make_format(name: str, llm: LLM | None = None, config: FormatConfig | None = None) -> Format:
    """The registered format ``name`` (``F_t``/``F_s``/``F_g``, also ``triples``/``sentences``/``graph``);
    F_g needs ``llm``."""
    factory = FORMATS.get(_ALIASES.get(name, name))
    if factory is None:
        raise ConfigError(f"unknown knowledge format {name!r}; choose one of {', '.join(FORMATS)}")
    return factory(llm, config)
