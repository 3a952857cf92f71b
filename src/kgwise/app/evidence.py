"""The KG evidence of a question — what :meth:`kgwise.app.Pipeline.evidence` returns and what the CLI
(``kgwise kg subgraph``) and the server (``POST /v1/evidence``) serialise: the KG concepts the question and
each choice are grounded to, and P_sub's triples and its question→choice paths ranked to the question
(:func:`kgwise.extract.evidence.rank_evidence`, best first), by label, and how each mention was linked
(its method and score, :class:`ConceptLink`). An answer's evidence also lists its
``support``: the paths it read that end at the chosen answer (:mod:`kgwise.app.arms`).

Labels are read once per distinct node and relation of a subgraph (:class:`Labeller`), not once per edge
end: a P_sub subgraph of a MedQA question over DDB has ~700 edges over far fewer nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path as FilePath
from typing import TYPE_CHECKING

import numpy as np

from kgwise.errors import ConfigError, KgwiseError
from kgwise.extract.base import Extractor
from kgwise.extract.evidence import EVERY_PATH, rank_evidence
from kgwise.extract.subgraph import SubgraphConfig, SubgraphExtractor
from kgwise.kg.base import KnowledgeGraph
from kgwise.kg.grounding import Grounder, Grounding
from kgwise.types import CHOICE_LABELS, Choice, Path, Question, Subgraph, Triple

if TYPE_CHECKING:
    from kgwise.kg.label_index import BoundIndex
    from kgwise.kg.linking import LinkingConfig

__all__ = ["ConceptLink", "Evidence", "LabelPath", "Labeller", "graph_evidence", "grounder_of", "label_path",
           "question_evidence"]


@dataclass(frozen=True, slots=True)
class LabelPath:
    """A KG path by label: ``nodes[0] -relations[0]-> nodes[1] …``; ``inverse[i]``: hop ``i`` runs
    against its stored edge."""

    nodes: tuple[str, ...]
    relations: tuple[str, ...]
    inverse: tuple[bool, ...]

    def render(self) -> str:
        """``dog -[isa]-> animal <-[atlocation]- zoo`` (``<-`` marks an edge walked backwards)."""
        out = self.nodes[0]
        for i, r in enumerate(self.relations):
            out += (f" <-[{r}]- " if self.inverse[i] else f" -[{r}]-> ") + self.nodes[i + 1]
        return out


def label_path(chain: Sequence[Triple]) -> LabelPath:
    """A chain of triples (each sharing an entity with the next) as a label path; a hop whose triple
    points back to the path's current node is marked ``inverse``."""
    if not chain:
        raise KgwiseError("an empty KG path")
    first = chain[0]
    cur = first.head
    if len(chain) > 1 and first.head in (chain[1].head, chain[1].tail) and \
            first.tail not in (chain[1].head, chain[1].tail):
        cur = first.tail
    nodes, relations, inverse = [cur], [], []
    for t in chain:
        if t.head == cur:
            cur, back = t.tail, False
        elif t.tail == cur:
            cur, back = t.head, True
        else:
            raise KgwiseError(f"KG path is not connected at {cur!r}: next fact {t}")
        nodes.append(cur)
        relations.append(t.relation)
        inverse.append(back)
    return LabelPath(tuple(nodes), tuple(relations), tuple(inverse))


@dataclass(frozen=True, slots=True)
class ConceptLink:
    """A mention of the question or of a choice linked to KG concept ``concept`` (a label) by ``method``
    with ``score`` (:class:`kgwise.kg.linking.Link`: 1 for an exact or alias name, 0.9 for a partial or
    derived one, the similarity of a fuzzy one); links below ``[linking] min_score`` are not there."""

    mention: str
    concept: str
    method: str
    score: float


@dataclass(frozen=True, slots=True)
class Evidence:
    """A question's KG evidence: the concepts of the question and of each choice, the triples and the
    paths joining them (best first), the rendered ``text`` an answer read (``""`` when none was rendered)
    and ``support``: the paths that end at the chosen answer (none before an answer is chosen); ``links``:
    how the grounder reached each concept (given where the question was grounded here)."""

    question_concepts: tuple[str, ...]
    choice_concepts: tuple[tuple[str, ...], ...]
    triples: tuple[Triple, ...]
    paths: tuple[LabelPath, ...]
    text: str = ""
    support: tuple[LabelPath, ...] = ()
    links: tuple[ConceptLink, ...] = ()


class Labeller:
    """The labels of one graph's nodes and relations, read in bulk: each distinct node and relation of a
    batch of edges once (a graph held in memory: straight from its label list), memoised for the
    labeller's life (make one per subgraph or per answer)."""

    def __init__(self, kg: KnowledgeGraph) -> None:
        from kgwise.kg.csr import CSRGraph

        self.kg = kg
        self._all: Sequence[str] | None = kg.labels if isinstance(kg, CSRGraph) else None
        self._nodes: dict[int, str] = {}
        self._relations: dict[int, str] = {}

    def nodes(self, ns: Iterable[int]) -> tuple[str, ...]:
        ids = [int(n) for n in ns]
        if self._all is not None:
            every = self._all
            return tuple(every[n] for n in ids)
        missing = {n for n in ids if n not in self._nodes}
        self._nodes.update({n: self.kg.label(n) for n in missing})
        return tuple(self._nodes[n] for n in ids)

    def relations(self, rs: Iterable[int]) -> tuple[str, ...]:
        ids = [int(r) for r in rs]
        missing = {r for r in ids if r not in self._relations}
        self._relations.update({r: self.kg.relation_name(r) for r in missing})
        return tuple(self._relations[r] for r in ids)

    def triples(self, edges: Iterable[tuple[int, int, int]]) -> tuple[Triple, ...]:
        """``(head, relation, tail)`` ids as labelled triples: one label read per distinct id."""
        arr = np.asarray(list(edges), dtype=np.int64).reshape(-1, 3)
        if not len(arr):
            return ()
        nodes, ends = np.unique(arr[:, [0, 2]], return_inverse=True)
        rels, kinds = np.unique(arr[:, 1], return_inverse=True)
        node_names, rel_names = self.nodes(nodes.tolist()), self.relations(rels.tolist())
        pairs = ends.reshape(-1, 2).tolist()
        return tuple(Triple(node_names[h], rel_names[r], node_names[t])
                     for (h, t), r in zip(pairs, kinds.reshape(-1).tolist(), strict=True))

    def path(self, p: Path) -> LabelPath:
        return LabelPath(self.nodes(p.nodes), self.relations(p.relations), p.inverse)


def grounder_of(kg: KnowledgeGraph | None, names: BoundIndex | None, linking: LinkingConfig | None = None
                ) -> Grounder | None:
    """The grounder of a pipeline over ``kg``: over its bound label index ``names`` when it has one, else
    over the labels of a graph held in memory, linking as ``linking`` says (the config's ``[linking]``:
    fallbacks, and ``min_score`` below which a link is dropped; ``None``: exact names only); ``None``
    without a KG, or for an endpoint without an index (free text cannot be grounded against labels it does
    not list)."""
    from kgwise.kg.csr import CSRGraph
    from kgwise.kg.grounding import GrounderConfig

    if kg is None:
        return None
    config = GrounderConfig(linking=linking)
    if names is not None:
        return Grounder(kg, config, index=names)
    return Grounder(kg, config) if isinstance(kg, CSRGraph) else None


def evidence_of(kg: KnowledgeGraph, grounding: Grounding, sub: Subgraph, text: str = "") -> Evidence:
    """``sub`` and the grounded concepts (KG ids) as :class:`Evidence`, by label, with the paths from a
    question concept to a choice ranked (:func:`kgwise.extract.evidence.rank_evidence`, no cut)."""
    names = Labeller(kg)
    ranked = rank_evidence(sub, grounding.question_nodes, grounding.choice_nodes, EVERY_PATH)
    concepts = names.nodes(link.node for link in grounding.links)
    links = tuple(ConceptLink(link.mention, concept, link.method, link.score)
                  for link, concept in zip(grounding.links, concepts, strict=True))
    choices = tuple(names.nodes(c) for c in grounding.choice_nodes)
    return Evidence(names.nodes(grounding.question_nodes), choices, names.triples(sub.edges),
                    tuple(names.path(rp.path) for rp in ranked.paths), text, links=links)


def question_evidence(kg: KnowledgeGraph, grounder: Grounder, extractor: Extractor, question: Question
                      ) -> Evidence:
    """Ground ``question`` with ``grounder`` and extract its subgraph with ``extractor`` (no LLM call)."""
    grounding = grounder.ground(question)
    sub = extractor.extract(question, grounding)
    return evidence_of(kg, grounding, sub)


def graph_evidence(graph: str | FilePath, text: str, choices: Sequence[str] = (),
                   topics: Sequence[str] = (), hops: int | None = None, max_nodes: int | None = None,
                   max_expand: int | None = None, wordnet: FilePath | None = None
                   ) -> tuple[Evidence, tuple[str, ...]]:
    """P_sub's evidence of a question over a graph file, with P_sub's settings where given (else its
    defaults, :class:`kgwise.extract.subgraph.SubgraphConfig`) and ``wordnet``'s exception lists for
    lemmatising; also the ``topics`` the graph does not hold. ``ConfigError`` for a bad question."""
    from kgwise.kg.grounding import GrounderConfig
    from kgwise.kg.loaders import open_graph_file

    try:
        options = tuple(Choice(CHOICE_LABELS[i], c) for i, c in enumerate(choices))
        q = Question("", text, options, topic_entities=tuple(topics))
        given = {k: v for k, v in (("hops", hops), ("max_nodes", max_nodes), ("max_expand", max_expand))
                 if v is not None}
        cfg = replace(SubgraphConfig(), **given)
    except (ValueError, IndexError) as exc:
        raise ConfigError(str(exc)) from exc
    kg = open_graph_file(graph)
    unknown = tuple(t for t in q.topic_entities if kg.find(t) is None)
    grounder = Grounder(kg, GrounderConfig(wordnet_dir=wordnet))
    return question_evidence(kg, grounder, SubgraphExtractor(kg, cfg), q), unknown
