"""Entity linking beyond exact names: typo-tolerant (edit distance, ``rapidfuzz``) and semantic (label
embeddings in a ``faiss`` nearest-neighbour index) matches, ranked, each with its score and method.

The grounder (:mod:`kgwise.kg.grounding`) uses them only for a mention that exact matching (labels, then
aliases) leaves without a node. A fuzzy link's score is the normalised Levenshtein similarity
``1 − d(a, b) / max(|a|, |b|)`` of the two phrase keys; an embedding link's score is the cosine similarity
of the two MiniLM embeddings. :func:`did_you_mean` turns the best fuzzy candidates into the suggestion that
every "unknown node" error carries.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from kgwise.errors import ConfigError
from kgwise.settings import table

if TYPE_CHECKING:
    from kgwise.kg.csr import CSRGraph

__all__ = ["EmbeddingMatcher", "FuzzyNames", "Link", "LinkMethod", "LinkingConfig", "TextEncoder",
           "did_you_mean", "fuzzy_scores"]

LinkMethod = Literal["exact", "alias", "folded", "reordered", "partial", "contained", "derived", "fuzzy",
                     "embedding"]
"""How a mention reached its node: its spelling is a label (``exact``) or an alias (``alias``) of it, as
written or lemmatised; equal to one but for accents or dotted capitals (``folded``); the same content words
in another order (``reordered``); a distinctive word of a proper name, or a name holding the whole mention
(``partial``, :mod:`kgwise.kg.names`); a name a choice contains, scored by the share of the choice it covers
(``contained``); the medical word a choice spells out ("High LDL-cholesterol" → `Hypercholesterolemia`,
``derived``); by edit distance (``fuzzy``) or by label embedding (``embedding``)."""


@table("linking")
@dataclass(frozen=True, slots=True)
class LinkingConfig:
    """Fallback entity linking, used only where exact matching finds no node for a mention (a choice, a
    topic-entity name, or a question whose text matches no name at all).

    ``fuzzy``: try edit-distance matches; ``fuzzy_min_score``: the least normalised Levenshtein similarity
    (0–1) of a fuzzy link; ``fuzzy_min_length``: the shortest mention (characters) tried fuzzily;
    ``embedding``: try label-embedding matches (needs an encoder; every name is encoded once, cached per
    machine, ~10 min per 17 k names on 2 cores, so off by default); ``embedding_min_score``: the least
    cosine similarity of an embedding link (0.85: on the MedQA→DDB link set, MiniLM's links of 0.85 and
    more were right 21 times in 22, those of 0.80–0.85 fewer than half; `kgwise bench grounding --parts
    links`); ``suggestions``: names offered by "did you mean";
    ``max_topic_entities``: topic entities proposed for a question that names none; ``min_score``: every
    link scoring below it is dropped, whatever its method (exact and alias links score 1, partial names
    0.9, fuzzy and embedding links their similarity); ``partial``: link distinctive words of proper names
    (:mod:`kgwise.kg.names`).
    """

    fuzzy: bool = True
    fuzzy_min_score: float = 0.75
    fuzzy_min_length: int = 4
    embedding: bool = False
    embedding_min_score: float = 0.85
    suggestions: int = 3
    max_topic_entities: int = 3
    min_score: float = 0.0
    partial: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_score <= 1.0:
            raise ConfigError("LinkingConfig: min_score must be in [0, 1]")
        if not (0.0 < self.fuzzy_min_score <= 1.0 and 0.0 < self.embedding_min_score <= 1.0):
            raise ConfigError("LinkingConfig: fuzzy_min_score and embedding_min_score must be in (0, 1]")
        if self.fuzzy_min_length < 1 or self.suggestions < 0 or self.max_topic_entities < 1:
            raise ConfigError("LinkingConfig: fuzzy_min_length and max_topic_entities must be ≥ 1, "
                              "suggestions ≥ 0")


@dataclass(frozen=True, slots=True)
class Link:
    """One mention linked to a node: the ``name`` it matched (a label or an alias), by ``method``, with
    ``score`` (1 for exact and alias matches); ``start``/``end``: the mention's character offsets in the text
    it was found in (``None`` for a mention linked whole)."""

    mention: str
    node: int
    name: str
    method: LinkMethod
    score: float
    start: int | None = None
    end: int | None = None

    def to_dict(self) -> dict[str, Any]:
        out = {"mention": self.mention, "node": self.node, "name": self.name, "method": self.method,
               "score": round(self.score, 4)}
        if self.start is not None:
            out |= {"start": self.start, "end": self.end}
        return out


class TextEncoder(Protocol):
    """What the embedding matcher needs of an encoder (:class:`kgwise.embed.MiniLM` is one): unit-norm
    ``float32`` rows."""

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


def _rapidfuzz() -> Any:
    try:
        from rapidfuzz import process
        from rapidfuzz.distance import Levenshtein
    except ImportError as exc:  # pragma: no cover - a core dependency
        raise ConfigError("fuzzy linking needs rapidfuzz: pip install rapidfuzz") from exc
    return process, Levenshtein


def fuzzy_scores(query: str, names: Sequence[str], limit: int, min_score: float,
                 transpositions: bool = False) -> list[tuple[int, float]]:
    """``(position in names, similarity)`` of the ``limit`` names most similar to ``query`` with at least
    ``min_score``, best first (ties: the earlier name). ``transpositions``: two swapped neighbours count as
    one edit (optimal string alignment, as a typing slip: "Portgual"), not two (Levenshtein)."""
    if limit <= 0 or not query:
        return []
    process, lev = _rapidfuzz()
    if transpositions:
        from rapidfuzz.distance import OSA

        lev = OSA
    # rapidfuzz turns the cutoff into a whole distance and may drop a score equal to it (1 − 1/5 against
    # 0.8): ask a little lower, keep what reaches it
    found = process.extract(query, names, scorer=lev.normalized_similarity, processor=None, limit=limit,
                            score_cutoff=max(min_score - 1e-3, 0.0))
    ranked = sorted(((int(i), float(s)) for _, s, i in found if s >= min_score - 1e-9),
                    key=lambda x: (-x[1], x[0]))
    return ranked


class FuzzyNames:
    """Every phrase key of a graph's names (labels, then aliases) with its node, for fuzzy search in
    memory (``rapidfuzz``, a few ms per query per 100 k names)."""

    def __init__(self, keys: Sequence[str], nodes: npt.ArrayLike, names: Sequence[str],
                 transpositions: bool = False) -> None:
        self.transpositions = transpositions
        self.keys = list(keys)
        self.nodes = np.asarray(nodes, dtype=np.int64)
        self.names = list(names)
        if not len(self.keys) == len(self.nodes) == len(self.names):
            raise ValueError("FuzzyNames: keys, nodes and names must align")

    @classmethod
    def of_graph(cls, kg: CSRGraph) -> FuzzyNames:
        """The labels and aliases of ``kg``."""
        from kgwise.kg.text import phrase_keys

        alias_nodes, alias_names = kg.alias_pairs()
        names = [*kg.labels, *alias_names]
        nodes = np.concatenate([np.arange(kg.num_nodes, dtype=np.int64), alias_nodes.astype(np.int64)])
        return cls(phrase_keys(names), nodes, names)

    def search(self, key: str, limit: int, min_score: float) -> list[tuple[int, str, float]]:
        """``(node, matched name, score)``: the best ``limit`` distinct nodes, best first."""
        out: list[tuple[int, str, float]] = []
        seen: set[int] = set()
        for i, score in fuzzy_scores(key, self.keys, limit * 3, min_score, self.transpositions):
            node = int(self.nodes[i])
            if node not in seen:
                seen.add(node)
                out.append((node, self.names[i], score))
            if len(out) == limit:
                break
        return out


class EmbeddingMatcher:
    """Nearest names by embedding: every name encoded once, unit rows in a ``faiss`` inner-product index
    (exact ``IndexFlatIP`` up to ``exact_up_to`` names, HNSW above)."""

    def __init__(self, encoder: TextEncoder, names: Sequence[str], nodes: npt.ArrayLike,
                 exact_up_to: int = 200_000) -> None:
        try:
            import faiss
        except ImportError as exc:
            raise ConfigError("embedding linking needs faiss: pip install 'kgwise[ml]' (faiss-cpu)") from exc
        self.encoder = encoder
        self.names = list(names)
        self.nodes = np.asarray(nodes, dtype=np.int64)
        vectors = np.ascontiguousarray(encoder.encode(self.names), dtype=np.float32)
        if vectors.ndim != 2 or len(vectors) != len(self.names):
            raise ConfigError(f"the encoder returned shape {vectors.shape} for {len(self.names)} names")
        dim = vectors.shape[1]
        self.index = faiss.IndexFlatIP(dim) if len(vectors) <= exact_up_to else faiss.IndexHNSWFlat(
            dim, 32, faiss.METRIC_INNER_PRODUCT)
        self.index.add(vectors)

    def search(self, text: str, limit: int, min_score: float) -> list[tuple[int, str, float]]:
        """``(node, matched name, cosine)``: the best ``limit`` distinct nodes with at least ``min_score``."""
        if limit <= 0 or not self.names:
            return []
        q = np.ascontiguousarray(self.encoder.encode([text]), dtype=np.float32)
        scores, idx = self.index.search(q, min(len(self.names), limit * 3))
        out: list[tuple[int, str, float]] = []
        seen: set[int] = set()
        for s, i in zip(scores[0].tolist(), idx[0].tolist(), strict=True):
            if i < 0 or s < min_score:
                continue
            node = int(self.nodes[i])
            if node not in seen:
                seen.add(node)
                out.append((node, self.names[i], float(s)))
            if len(out) == limit:
                break
        return out


def suggestion_text(names: Sequence[str]) -> str:
    """`` (did you mean 'a', 'b'?)``, or ``""`` for no names."""
    return f" (did you mean {', '.join(repr(n) for n in names)}?)" if names else ""


@runtime_checkable
class Suggests(Protocol):
    """Anything that proposes the labels closest to a text (a label index)."""

    def suggest(self, text: str, limit: int = 3) -> Sequence[str]: ...


def did_you_mean(text: str, kg: Any, limit: int = 3, min_score: float = 0.6) -> str:
    """The "did you mean" suffix of an unknown-node error: up to ``limit`` preferred labels of the nodes
    whose names are closest to ``text`` (edit distance), or ``""``. Works on a graph with ``labels`` (and
    ``alias_pairs``), or anything with a ``suggest(text, limit)`` method (a label index); else ``""``."""
    from kgwise.kg.text import phrase_key

    key = phrase_key(text)
    if not key:
        return ""
    if isinstance(kg, Suggests):
        return suggestion_text(kg.suggest(text, limit))
    from kgwise.kg.csr import CSRGraph

    if not isinstance(kg, CSRGraph):
        return ""
    names = FuzzyNames.of_graph(kg)
    return suggestion_text([kg.label(v) for v, _, _ in names.search(key, limit, min_score)])
