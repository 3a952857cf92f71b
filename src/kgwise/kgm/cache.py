"""Ground → extract (P_sub) → embed, once per split, into a resumable on-disk feature cache.

A cache directory holds ``meta.json`` (what it was built from), ``part-NNNNN.npz`` files of
:class:`~kgwise.kgm.features.QuestionGraph` arrays (written one chunk at a time, so an interrupted build
resumes at the first missing part) and ``nodes.npz``, the label embeddings of every node the parts use.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from kgwise.embed import Encoder
from kgwise.errors import DataError
from kgwise.extract.subgraph import SubgraphConfig, SubgraphExtractor
from kgwise.files import savez_atomic
from kgwise.kg.base import KnowledgeGraph
from kgwise.kg.grounding import Grounder, GrounderConfig
from kgwise.kgm.features import FeatureConfig, NodeTable, QuestionGraph, graph_from_subgraph
from kgwise.progress import bar as progress_bar
from kgwise.types import Question

__all__ = ["FeatureCache", "GraphBuilder", "pack_graphs", "unpack_graphs"]


class GraphBuilder:
    """Question → :class:`QuestionGraph` on one KG: ground (``Grounder``), extract (``SubgraphExtractor``,
    P_sub) and embed the QA texts."""

    def __init__(
        self,
        kg: KnowledgeGraph,
        encoder: Encoder,
        feature: FeatureConfig | None = None,
        subgraph: SubgraphConfig | None = None,
        wordnet_dir: Path | None = None,
    ) -> None:
        self.kg = kg
        self.encoder = encoder
        self.feature = feature = feature or FeatureConfig()
        self.subgraph = subgraph or SubgraphConfig(max_nodes=feature.max_nodes)
        self.grounder = Grounder(kg, GrounderConfig(wordnet_dir=wordnet_dir))
        self.extractor = SubgraphExtractor(kg, self.subgraph)

    def build(self, question: Question) -> QuestionGraph:
        grounding = self.grounder.ground(question)
        sub = self.extractor.extract(question, grounding)
        return graph_from_subgraph(question, sub, self.encoder, self.feature)

    def node_table(self, graphs: Sequence[QuestionGraph]) -> NodeTable:
        nodes = np.concatenate([g.nodes for g in graphs]) if graphs else np.zeros(0, dtype=np.int64)
        return NodeTable.build(self.kg, nodes, self.encoder, self.feature.max_text_chars, self.feature.gloss)


def _offsets(lengths: Sequence[int]) -> npt.NDArray[np.int64]:
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def pack_graphs(graphs: Sequence[QuestionGraph]) -> dict[str, npt.NDArray[Any]]:
    """Flatten ``graphs`` into named arrays (no pickles) for ``np.savez``."""
    n = [len(g.nodes) for g in graphs]
    c = [g.num_choices for g in graphs]
    d = graphs[0].question_emb.shape[0] if graphs else 0

    def cat(arrays: list[npt.NDArray[Any]], empty: npt.NDArray[Any]) -> npt.NDArray[Any]:
        return np.concatenate(arrays) if graphs else empty

    emb = np.zeros((0, d), np.float32)
    return {
        "qids": np.array([g.qid for g in graphs], dtype=np.str_),
        "labels": np.array([g.label for g in graphs], dtype=np.int64),
        "node_off": _offsets(n),
        "nodes": cat([g.nodes for g in graphs], np.zeros(0, np.int64)),
        "edge_off": _offsets([len(g.edges) for g in graphs]),
        "edges": cat([g.edges for g in graphs], np.zeros((0, 3), np.int64)),
        "question_mask": cat([g.question_mask for g in graphs], np.zeros(0, bool)),
        "cmask_off": _offsets([a * b for a, b in zip(n, c, strict=True)]),
        "choice_mask": cat([g.choice_mask.ravel() for g in graphs], np.zeros(0, bool)),
        "choice_off": _offsets(c),
        "question_emb": np.stack([g.question_emb for g in graphs]) if graphs else emb,
        "choice_emb": cat([g.choice_emb for g in graphs], emb),
        "pair_emb": cat([g.pair_emb for g in graphs], emb),
    }


def unpack_graphs(z: Any) -> list[QuestionGraph]:
    """Inverse of :func:`pack_graphs` (``z``: the loaded npz or the dict)."""
    no, eo, mo, co = z["node_off"], z["edge_off"], z["cmask_off"], z["choice_off"]
    nodes, edges, qm, cm = z["nodes"], z["edges"], z["question_mask"], z["choice_mask"]
    qe, ce, pe, labels = z["question_emb"], z["choice_emb"], z["pair_emb"], z["labels"]
    out = []
    for i, qid in enumerate(z["qids"].tolist()):
        n = no[i + 1] - no[i]
        k = co[i + 1] - co[i]
        out.append(
            QuestionGraph(
                qid=str(qid),
                nodes=nodes[no[i] : no[i + 1]],
                edges=edges[eo[i] : eo[i + 1]],
                question_mask=qm[no[i] : no[i + 1]],
                choice_mask=cm[mo[i] : mo[i + 1]].reshape(k, n),
                question_emb=qe[i],
                choice_emb=ce[co[i] : co[i + 1]],
                pair_emb=pe[co[i] : co[i + 1]],
                label=int(labels[i]),
            )
        )
    return out


class FeatureCache:
    """The resumable feature cache of one split at ``directory`` (see the module docstring)."""

    def __init__(self, directory: str | Path, meta: dict[str, Any], chunk_size: int = 250) -> None:
        self.directory = Path(directory)
        self.meta = meta
        self.chunk_size = chunk_size

    def _check_meta(self) -> None:
        path = self.directory / "meta.json"
        if path.is_file():
            found = json.loads(path.read_text(encoding="utf-8"))
            if found != self.meta:
                raise DataError(
                    f"feature cache was built with other settings ({found}); remove it or use another "
                    "directory",
                    path,
                )
        else:
            self.directory.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(self.meta, indent=1, sort_keys=True), encoding="utf-8")

    @property
    def complete(self) -> bool:
        return (self.directory / "nodes.npz").is_file()

    def build(self, questions: Sequence[Question], builder: GraphBuilder, desc: str = "") -> None:
        """Build every missing part, then the node table; a finished cache is left as it is."""
        self._check_meta()
        if self.complete:
            return
        chunks = range(0, len(questions), self.chunk_size)
        bar = progress_bar(total=len(questions), desc=desc or f"features {self.directory.name}", unit="q")
        for k, start in enumerate(chunks):
            part = self.directory / f"part-{k:05d}.npz"
            chunk = questions[start : start + self.chunk_size]
            if not part.is_file():
                savez_atomic(part, pack_graphs([builder.build(q) for q in chunk]))
            bar.update(len(chunk))
        bar.close()
        table = builder.node_table(self.graphs())
        savez_atomic(self.directory / "nodes.npz", {"ids": table.ids, "emb": table.emb})

    def graphs(self) -> list[QuestionGraph]:
        parts = sorted(self.directory.glob("part-[0-9]*.npz"))
        parts = [p for p in parts if ".tmp" not in p.name]
        out: list[QuestionGraph] = []
        for p in parts:
            with np.load(p, allow_pickle=False) as z:
                out += unpack_graphs(z)
        expected = self.meta.get("questions")
        if expected is not None and len(out) != expected:
            raise DataError(f"feature cache holds {len(out)} questions, expected {expected}", self.directory)
        return out

    def table(self) -> NodeTable:
        path = self.directory / "nodes.npz"
        if not path.is_file():
            raise DataError("feature cache is incomplete (no node table); build it first", path)
        with np.load(path, allow_pickle=False) as z:
            return NodeTable(z["ids"], z["emb"])


def cache_meta(
    dataset: str, split: str, kg_key: str, n_questions: int, feature: FeatureConfig, subgraph: SubgraphConfig
) -> dict[str, Any]:
    """What a cache is keyed by (compared on resume)."""
    return {
        "dataset": dataset,
        "split": split,
        "kg": kg_key,
        "questions": n_questions,
        "feature": asdict(feature),
        "subgraph": asdict(subgraph),
        "version": 1,
    }
