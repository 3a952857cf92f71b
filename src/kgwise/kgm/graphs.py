"""Which knowledge graph each KG-model dataset uses, built once and cached as a ``CSRGraph`` file."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kgwise.config import data_dir
from kgwise.errors import ConfigError
from kgwise.files import short_hash
from kgwise.kg.cache import cached_graph
from kgwise.kg.csr import CSRGraph
from kgwise.kg.loaders import load_conceptnet_jsonl_triples, load_wordnet, merge_graphs

__all__ = ["DATASET_KGS", "KGSpec", "build_kg"]


@dataclass(frozen=True, slots=True)
class KGSpec:
    """A KG as paths relative to the data directory: WordNet (``wordnet``, a directory, or ``""``) merged
    with ConceptNet choice-triple slices (``conceptnet_slices``), relations merged with
    ``merge_file`` (KagNet's 17 groups, or ``""`` to keep ConceptNet's own)."""

    wordnet: str = "wordnet"
    conceptnet_slices: tuple[str, ...] = ()
    merge_file: str = "conceptnet/merge_relation_kagnet.txt"

    def __post_init__(self) -> None:
        if not self.wordnet and not self.conceptnet_slices:
            raise ConfigError("KGSpec names no graph: give wordnet and/or conceptnet_slices")

    def key(self) -> str:
        """A short stable hash of the spec (names cache files)."""
        return short_hash(self.to_dict())

    def sources(self, root: Path) -> list[Path]:
        """The data files and directories the graph is built from, under the data directory ``root``."""
        return [root / p for p in (self.wordnet, *self.conceptnet_slices, self.merge_file) if p]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KGSpec:
        return cls(
            wordnet=str(data.get("wordnet", "")),
            conceptnet_slices=tuple(data.get("conceptnet_slices", ())),
            merge_file=str(data.get("merge_file", "")),
        )


_CSQA_SLICES = (
    "conceptnet/csqa_choice_triples_jessionlin/dev_data.json",
    "conceptnet/csqa_choice_triples_jessionlin/test_data.json",
)

DATASET_KGS: dict[str, KGSpec] = {
    "csqa": KGSpec(wordnet="wordnet", conceptnet_slices=_CSQA_SLICES),
    "obqa": KGSpec(wordnet="wordnet"),
}
"""The KG of each dataset: CSQA on WordNet + the ConceptNet slice, OBQA on WordNet."""


def build_kg(spec: KGSpec, data: str | Path | None = None, use_cache: bool = True) -> CSRGraph:
    """Load (or reopen from the cache, :func:`kgwise.kg.cache.cached_graph`) the graph ``spec`` describes."""
    root = data_dir(data)
    merge = root / spec.merge_file if spec.merge_file else None
    slices = [root / p for p in spec.conceptnet_slices]

    def build() -> CSRGraph:
        parts: list[CSRGraph] = []
        if spec.wordnet:
            parts.append(load_wordnet(root / spec.wordnet))
        if slices:
            parts.append(load_conceptnet_jsonl_triples(slices, merge))
        return parts[0] if len(parts) == 1 else merge_graphs(parts)

    return cached_graph(f"kgm/kg-{spec.key()}", spec.sources(root), build, use_cache)
