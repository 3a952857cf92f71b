"""The KG of each benchmark data set — one map for every user (KnowGPT's evaluation, the KG model, the
``+kg`` arms of ``eval route-live``), so they all see the same graph — built once and cached as a
``CSRGraph`` file (:func:`kgwise.kg.cache.cached_graph`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kgwise.config import data_dir
from kgwise.errors import ConfigError
from kgwise.files import short_hash
from kgwise.kg.cache import cached_graph
from kgwise.kg.csr import CSRGraph
from kgwise.kg.loaders import load_conceptnet_jsonl_triples, load_ddb, load_wordnet, merge_graphs
from kgwise.kg.loaders.wordnet import SENSES

__all__ = ["DATASET_KGS", "KGSpec", "benchmark_kg", "build_kg"]


@dataclass(frozen=True, slots=True)
class KGSpec:
    """A KG as paths relative to the data directory: WordNet (``wordnet``, a directory, or ``""``) with the
    word senses ``wordnet_senses`` (``frequent``: a word's rare senses only put noise in a prompt, 'Go is a
    word for adam'; or ``all``) merged with ConceptNet choice-triple slices (``conceptnet_slices``),
    relations merged with ``merge_file`` (KagNet's 17 groups, or ``""`` to keep ConceptNet's own); or the
    DDB medical graph (``ddb``, a directory, alone); or a user's graph file (``graph_file``, alone: any file
    :func:`~kgwise.kg.loaders.open_graph_file` opens; an absolute path needs no data directory)."""

    wordnet: str = "wordnet"
    conceptnet_slices: tuple[str, ...] = ()
    merge_file: str = "conceptnet/merge_relation_kagnet.txt"
    wordnet_senses: str = "frequent"
    ddb: str = ""
    graph_file: str = ""

    def __post_init__(self) -> None:
        if self.ddb and (self.wordnet or self.conceptnet_slices):
            raise ConfigError("KGSpec: the DDB graph stands alone; give ddb or wordnet/conceptnet_slices")
        if self.graph_file and (self.ddb or self.wordnet or self.conceptnet_slices):
            raise ConfigError("KGSpec: a graph file stands alone; give graph_file or a benchmark's sources")
        if not self.ddb and not self.wordnet and not self.conceptnet_slices and not self.graph_file:
            raise ConfigError("KGSpec names no graph: give wordnet and/or conceptnet_slices, ddb or "
                              "graph_file")
        if self.wordnet_senses not in SENSES:
            raise ConfigError(f"KGSpec: wordnet_senses must be one of {', '.join(SENSES)}, "
                              f"got {self.wordnet_senses!r}")

    @classmethod
    def of_file(cls, path: str | Path) -> KGSpec:
        """The spec of the user's graph file ``path`` (kept as an absolute path)."""
        return cls(wordnet="", merge_file="", graph_file=str(Path(path).resolve()))

    @property
    def needs_data(self) -> bool:
        """Whether the graph's sources lie under the data directory (a benchmark's KG, or a relative
        graph file)."""
        return not self.graph_file or not Path(self.graph_file).is_absolute()

    def key(self) -> str:
        """A short stable hash of the spec (names cache files)."""
        return short_hash(self.to_dict())

    def sources(self, root: Path) -> list[Path]:
        """The data files and directories the graph is built from, under the data directory ``root``."""
        if self.graph_file:
            return [root / self.graph_file]
        if self.ddb:
            return [root / self.ddb]
        return [root / p for p in (self.wordnet, *self.conceptnet_slices, self.merge_file) if p]

    def to_dict(self) -> dict[str, Any]:
        """The fields as a dict (``graph_file`` only when set, so a benchmark's key stays what it was)."""
        out = asdict(self)
        if not self.graph_file:
            del out["graph_file"]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> KGSpec:
        """The spec of :meth:`to_dict`; a record without ``wordnet_senses`` (saved before the field
        existed, by a KG model trained on such a graph) means ``all``."""
        return cls(
            wordnet=str(data.get("wordnet", "")),
            conceptnet_slices=tuple(data.get("conceptnet_slices", ())),
            merge_file=str(data.get("merge_file", "")),
            wordnet_senses=str(data.get("wordnet_senses", "all")),
            ddb=str(data.get("ddb", "")),
            graph_file=str(data.get("graph_file", "")),
        )


_CSQA_SLICES = (
    "conceptnet/csqa_choice_triples_jessionlin/dev_data.json",
    "conceptnet/csqa_choice_triples_jessionlin/test_data.json",
)

DATASET_KGS: dict[str, KGSpec] = {
    "csqa": KGSpec(wordnet="wordnet", conceptnet_slices=_CSQA_SLICES),
    "obqa": KGSpec(wordnet="wordnet"),
    "medqa": KGSpec(wordnet="", merge_file="", ddb="ddb"),
}
"""The KG of each data set: CSQA on WordNet (frequent senses) + the ConceptNet slice, OBQA on WordNet
(frequent senses), MedQA on DDB."""


def build_kg(spec: KGSpec, data: str | Path | None = None, use_cache: bool = True) -> CSRGraph:
    """Load (or reopen from the cache) the graph ``spec`` describes, under the data directory ``data`` (not
    needed for an absolute ``graph_file``)."""
    root = data_dir(data) if spec.needs_data else Path("/")
    if spec.graph_file:
        from kgwise.kg.loaders import open_graph_file

        path = root / spec.graph_file
        if not path.exists():
            raise ConfigError(f"{path}: the KG's graph file does not exist")
        if path.suffix == ".npz":
            return open_graph_file(path)
        return cached_graph(f"kg/file-{spec.key()}", [path], lambda: open_graph_file(path), use_cache)
    merge = root / spec.merge_file if spec.merge_file else None
    slices = [root / p for p in spec.conceptnet_slices]

    def build() -> CSRGraph:
        if spec.ddb:
            return load_ddb(root / spec.ddb)
        parts: list[CSRGraph] = []
        if spec.wordnet:
            parts.append(load_wordnet(root / spec.wordnet, senses=spec.wordnet_senses))
        if slices:
            parts.append(load_conceptnet_jsonl_triples(slices, merge))
        return parts[0] if len(parts) == 1 else merge_graphs(parts, name="wordnet+conceptnet-slice")

    return cached_graph(f"kg/benchmark-{spec.key()}", spec.sources(root), build, use_cache)


def benchmark_kg(dataset: str, data: str | Path | None = None, use_cache: bool = True) -> CSRGraph:
    """The KG of the benchmark ``dataset`` (:data:`DATASET_KGS`); ``ConfigError`` naming the known ones."""
    if dataset not in DATASET_KGS:
        raise ConfigError(f"no KG configured for data set {dataset!r}; choose one of "
                          f"{', '.join(DATASET_KGS)}")
    return build_kg(DATASET_KGS[dataset], data, use_cache)
