"""A ConceptNet-scale synthetic knowledge graph for speed benchmarks (seeded, vectorised).

Shape of English ConceptNet after KagNet's relation merging: ~1.6 M nodes, ~3.4 M edges, 17 relations,
power-law degrees, no isolated nodes. Node ``i`` is an edge endpoint with weight ``(i + 1) ** -exponent``
(a Zipf law: the top node gets ~50 k edges, the median node one or two); every node also heads one edge
so none is isolated. The first labels are real English words (WordNet lemmas, most frequent first, so
common words are the hubs, as in ConceptNet) and the rest are two-word compounds of them, so grounding
real questions finds concepts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kgwise.errors import DataError
from kgwise.kg.csr import CSRGraph

__all__ = ["RELATIONS", "SyntheticConfig", "synthetic_conceptnet", "wordnet_words"]

# the 17 merged ConceptNet relations of KagNet/QA-GNN, most frequent first
RELATIONS: tuple[str, ...] = (
    "relatedto", "isa", "atlocation", "usedfor", "hascontext", "antonym", "capableof", "hassubevent",
    "hasproperty", "partof", "causes", "desires", "madeof", "receivesaction", "createdby",
    "notcapableof", "notdesires",
)


@dataclass(frozen=True, slots=True)
class SyntheticConfig:
    """Size and shape of the synthetic graph; ``seed`` fixes everything."""

    num_nodes: int = 1_600_000
    num_edges: int = 3_400_000
    exponent: float = 0.75
    relation_exponent: float = 1.2
    seed: int = 0


def wordnet_words(wordnet_dir: str | Path) -> list[str]:
    """WordNet lemmas (``_`` as space) from ``index.{noun,verb,adj,adv}``, most frequent first (by the
    summed ``tagsense_cnt`` SemCor counts), ties by the lemma."""
    root = Path(wordnet_dir)
    counts: dict[str, int] = {}
    for pos in ("noun", "verb", "adj", "adv"):
        path = root / f"index.{pos}"
        if not path.is_file():
            raise DataError("WordNet index file not found", path)
        with path.open(encoding="utf-8") as fh:
            for lineno, line in enumerate(fh, 1):
                if line.startswith(" "):
                    continue  # licence header
                parts = line.split()
                try:
                    p_cnt = int(parts[3])
                    tagged = int(parts[5 + p_cnt])
                except (IndexError, ValueError) as exc:
                    raise DataError(f"malformed index line: {exc}", path, lineno) from exc
                word = parts[0].replace("_", " ")
                counts[word] = counts.get(word, 0) + tagged
    return sorted(counts, key=lambda w: (-counts[w], w))


def _labels(words: Sequence[str], n: int, rng: np.random.Generator) -> list[str]:
    base = list(dict.fromkeys(words))[:n]
    need = n - len(base)
    if need <= 0:
        return base
    if len(base) < 2:
        raise ValueError("need at least two words to build compound labels")
    w = len(base)
    if need > w * (w - 1):
        raise ValueError(f"{w} words cannot make {need} distinct compounds")
    taken = {x.lower() for x in base}
    out: list[str] = []
    while len(out) < need:
        m = int((need - len(out)) * 1.3) + 16
        i = rng.integers(0, w, m)
        j = rng.integers(0, w, m)
        keep = i != j
        _, first = np.unique(i[keep] * w + j[keep], return_index=True)
        for a, b in zip(i[keep][np.sort(first)].tolist(), j[keep][np.sort(first)].tolist(), strict=True):
            label = f"{base[a]} {base[b]}"
            if label.lower() not in taken:
                taken.add(label.lower())
                out.append(label)
                if len(out) == need:
                    break
    return base + out


def synthetic_conceptnet(words: Sequence[str], config: SyntheticConfig | None = None) -> CSRGraph:
    """The synthetic graph (see the module docstring); ``words`` seed the labels (e.g. ``wordnet_words``)."""
    cfg = config or SyntheticConfig()
    n, e = cfg.num_nodes, cfg.num_edges
    if e < n:
        raise ValueError("num_edges must be >= num_nodes (every node heads one edge)")
    rng = np.random.default_rng(cfg.seed)
    labels = _labels(words, n, rng)
    cdf = np.cumsum(np.arange(1, n + 1, dtype=np.float64) ** -cfg.exponent)
    cdf /= cdf[-1]
    k = len(RELATIONS)
    rel_p = np.arange(1, k + 1, dtype=np.float64) ** -cfg.relation_exponent
    rel_p /= rel_p.sum()
    heads = np.arange(n, dtype=np.int64)
    tails = np.minimum(np.searchsorted(cdf, rng.random(n)), n - 1).astype(np.int64)
    rels = rng.choice(k, size=n, p=rel_p).astype(np.int64)
    keys = np.empty(0, dtype=np.int64)
    while True:
        key = (heads * k + rels) * n + tails
        ok = heads != tails
        _, first = np.unique(key[ok], return_index=True)
        keys = key[ok][np.sort(first)]
        if keys.size >= e:
            keys = keys[:e]
            break
        m = int((e - keys.size) * 1.2) + 1024
        more_h = np.minimum(np.searchsorted(cdf, rng.random(m)), n - 1).astype(np.int64)
        more_t = np.minimum(np.searchsorted(cdf, rng.random(m)), n - 1).astype(np.int64)
        more_r = rng.choice(k, size=m, p=rel_p).astype(np.int64)
        heads, rest = np.divmod(keys, k * n)
        rels, tails = np.divmod(rest, n)
        heads = np.concatenate((heads, more_h))
        rels = np.concatenate((rels, more_r))
        tails = np.concatenate((tails, more_t))
    h, rest = np.divmod(keys, k * n)
    r, t = np.divmod(rest, n)
    return CSRGraph.from_arrays(labels, list(RELATIONS), h, r, t, name="synthetic-conceptnet")
