"""Question subgraphs → tensors for the KG model (QA-GNN-style working graphs, Yasunaga et al. 2021).

One :class:`QuestionGraph` holds what a question needs, as numpy arrays: its extracted subgraph (global
node ids, local edges), which nodes ground the question and each choice, and the frozen MiniLM
embeddings of the question, each choice and each question+choice pair. :func:`collate` turns a batch of
them into one block-diagonal graph: for every (question, choice) pair a copy of the question's subgraph
plus a context node ``z`` linked to the question's and that choice's concepts (QA-GNN's "working
graph"), with node types and a node–context relevance score (QA-GNN scores relevance with the LM; here
it is the cosine of the frozen MiniLM embeddings of the node label and the question+choice text).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch

from kgwise.embed import Encoder
from kgwise.errors import ConfigError, DataError
from kgwise.kg.base import KnowledgeGraph
from kgwise.types import Question, Subgraph

__all__ = [
    "NODE_TYPES",
    "Batch",
    "FeatureConfig",
    "NodeTable",
    "QuestionGraph",
    "collate",
    "context_texts",
    "graph_from_subgraph",
    "node_text",
    "num_edge_types",
]

NODE_TYPES = 5
"""Node types of a pair graph: 0 other, 1 question concept, 2 this choice's concept, 3 another choice's
concept, 4 both question and this choice's concept. The context node has no type (its own input)."""

_SYNSET = re.compile(r"^(?P<lemma>.+)\.[nvasr]\.\d+$")


@dataclass(frozen=True, slots=True)
class FeatureConfig:
    """How a subgraph is cut down for the model: at most ``max_nodes`` nodes (grounded question and
    choice concepts first, then the extractor's order); a node's feature embeds its label, plus its gloss
    when ``gloss`` is set, cut to ``max_text_chars``. (Labels only by default: the senses of a word share
    one embedding and the graph tells them apart, as ConceptNet concepts in QA-GNN; glosses made the
    embedding step several times slower on two CPU cores.)"""

    max_nodes: int = 200
    max_text_chars: int = 100
    gloss: bool = False

    def __post_init__(self) -> None:
        if self.max_nodes < 1:
            raise ConfigError(f"max_nodes must be ≥ 1, got {self.max_nodes}")
        if self.max_text_chars < 1:
            raise ConfigError(f"max_text_chars must be ≥ 1, got {self.max_text_chars}")


def node_text(kg: KnowledgeGraph, node: int, max_chars: int = 100, gloss: bool = True) -> str:
    """The text a node's feature embeds: its label (a WordNet synset name ``dog.n.01`` shown as ``dog``)
    and, with ``gloss`` and where the graph keeps one, its gloss: ``"dog: a member of the genus Canis …"``."""
    label = kg.label(node)
    m = _SYNSET.match(label)
    shown = (m.group("lemma") if m else label).replace("_", " ")
    gloss_text = kg.text(node) if gloss else ""
    out = f"{shown}: {gloss_text}" if gloss_text else shown
    return out[:max_chars]


def context_texts(question: Question) -> tuple[list[str], list[str]]:
    """``(choices, pairs)``: each choice's text and each ``"question choice"`` pair text to embed."""
    if not question.choices:
        raise ConfigError(f"{question.ref} has no choices: the KG model answers multiple choice")
    stem = question.text.strip()
    choices = [c.text.strip() for c in question.choices]
    return choices, [f"{stem} {c}" for c in choices]


@dataclass(frozen=True, slots=True, eq=False)
class QuestionGraph:
    """One question ready for the model (numpy; see module docstring).

    ``nodes`` global KG ids (n); ``edges`` local ``(head, relation, tail)`` rows (m, 3); ``question_mask``
    (n,); ``choice_mask`` (C, n); ``question_emb`` (d,); ``choice_emb`` and ``pair_emb`` (C, d); ``label`` the
    gold choice index or -1.
    """

    qid: str
    nodes: npt.NDArray[np.int64]
    edges: npt.NDArray[np.int64]
    question_mask: npt.NDArray[np.bool_]
    choice_mask: npt.NDArray[np.bool_]
    question_emb: npt.NDArray[np.float32]
    choice_emb: npt.NDArray[np.float32]
    pair_emb: npt.NDArray[np.float32]
    label: int = -1

    @property
    def num_choices(self) -> int:
        return int(self.pair_emb.shape[0])

    def __post_init__(self) -> None:
        n, c = len(self.nodes), len(self.pair_emb)
        if self.edges.ndim != 2 or self.edges.shape[1] != 3:
            raise DataError(f"question {self.qid!r}: edges must have shape (m, 3), got {self.edges.shape}")
        if self.edges.size and (self.edges[:, [0, 2]].min() < 0 or self.edges[:, [0, 2]].max() >= n):
            raise DataError(f"question {self.qid!r}: edge endpoint outside its {n} nodes")
        if self.question_mask.shape != (n,) or self.choice_mask.shape != (c, n):
            raise DataError(f"question {self.qid!r}: masks do not match {n} nodes and {c} choices")
        if self.choice_emb.shape != self.pair_emb.shape:
            raise DataError(f"question {self.qid!r}: choice and pair embeddings differ in shape")
        if not -1 <= self.label < c:
            raise DataError(f"question {self.qid!r}: label {self.label} outside 0..{c - 1}")


def graph_from_subgraph(
    question: Question, subgraph: Subgraph, encoder: Encoder, config: FeatureConfig = FeatureConfig()
) -> QuestionGraph:
    """Cut ``subgraph`` to ``config.max_nodes`` nodes (grounded concepts first) and embed the question,
    its choices and its question+choice pairs with ``encoder``."""
    n_choices = len(question.choices)
    choice_sets = list(subgraph.choice_nodes) + [()] * (n_choices - len(subgraph.choice_nodes))
    if len(choice_sets) != n_choices:
        raise DataError(
            f"{question.ref}: subgraph grounds {len(subgraph.choice_nodes)} choices, "
            f"the question has {n_choices}"
        )
    order: dict[int, None] = {}
    for v in subgraph.question_nodes:
        order.setdefault(int(v), None)
    for group in choice_sets:
        for v in group:
            order.setdefault(int(v), None)
    for v in subgraph.nodes:
        order.setdefault(int(v), None)
    for h, _, t in subgraph.edges:
        order.setdefault(int(h), None)
        order.setdefault(int(t), None)
    nodes = np.fromiter(order, dtype=np.int64, count=len(order))[: config.max_nodes]
    local = {int(v): i for i, v in enumerate(nodes.tolist())}
    rows = [(local[h], r, local[t]) for h, r, t in subgraph.edges if h in local and t in local and h != t]
    edges = np.asarray(sorted(set(rows)), dtype=np.int64).reshape(-1, 3)
    qmask = np.zeros(len(nodes), dtype=bool)
    qmask[[local[v] for v in subgraph.question_nodes if v in local]] = True
    cmask = np.zeros((n_choices, len(nodes)), dtype=bool)
    for i, group in enumerate(choice_sets):
        cmask[i, [local[v] for v in group if v in local]] = True
    choices, pairs = context_texts(question)
    emb = encoder.encode([question.text.strip(), *choices, *pairs])
    label = question.gold_index if question.gold else -1
    return QuestionGraph(
        qid=question.id,
        nodes=nodes,
        edges=edges,
        question_mask=qmask,
        choice_mask=cmask,
        question_emb=emb[0],
        choice_emb=emb[1 : 1 + n_choices],
        pair_emb=emb[1 + n_choices :],
        label=label,
    )


class NodeTable:
    """Label embeddings of KG nodes: sorted global ids and one row of ``emb`` per id."""

    def __init__(self, ids: npt.ArrayLike, emb: npt.ArrayLike) -> None:
        ids_arr = np.asarray(ids, dtype=np.int64)
        emb_arr = np.asarray(emb, dtype=np.float32)
        if ids_arr.ndim != 1 or emb_arr.ndim != 2 or len(ids_arr) != len(emb_arr):
            raise DataError(f"node table: {ids_arr.shape} ids for embeddings of shape {emb_arr.shape}")
        order = np.argsort(ids_arr, kind="stable")
        self.ids = ids_arr[order]
        self.emb = emb_arr[order]
        if len(self.ids) > 1 and (np.diff(self.ids) == 0).any():
            raise DataError("node table: duplicate node ids")

    @classmethod
    def build(
        cls,
        kg: KnowledgeGraph,
        nodes: npt.ArrayLike,
        encoder: Encoder,
        max_chars: int = 100,
        gloss: bool = False,
    ) -> NodeTable:
        """Embed the text (:func:`node_text`) of every distinct node in ``nodes``."""
        ids = np.unique(np.asarray(nodes, dtype=np.int64))
        texts = [node_text(kg, int(v), max_chars, gloss) for v in ids.tolist()]
        emb = encoder.encode(texts) if texts else np.zeros((0, encoder.dim), dtype=np.float32)
        return cls(ids, emb)

    @property
    def dim(self) -> int:
        return int(self.emb.shape[1])

    def rows(self, nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """Row of each node id; raises ``DataError`` for an id the table lacks."""
        pos = np.searchsorted(self.ids, nodes)
        pos = np.minimum(pos, max(len(self.ids) - 1, 0))
        if len(nodes) and (len(self.ids) == 0 or (self.ids[pos] != nodes).any()):
            missing = nodes[(len(self.ids) == 0) | (self.ids[pos] != nodes)][0] if len(self.ids) else nodes[0]
            raise DataError(f"node table has no embedding for node id {int(missing)}")
        return pos.astype(np.int64)


def num_edge_types(num_relations: int) -> int:
    """KG relations, their inverses, and context→question, context→choice and their inverses."""
    return 2 * num_relations + 4


@dataclass(frozen=True, slots=True)
class Batch:
    """A batch of questions as one block-diagonal graph (torch tensors).

    Graph nodes of every pair copy come first (``node_*``, N rows), then the P context nodes; graph
    node ``i`` has label embedding ``node_vectors[node_index[i]]`` (each distinct node's vector once).
    ``edge_src``, ``edge_dst`` index that node list; ``pair_slot[p] = question * max_choices + choice``;
    ``labels`` (B,) gold indices (-1 unknown).
    """

    node_vectors: torch.Tensor
    node_index: torch.Tensor
    node_type: torch.Tensor
    node_relevance: torch.Tensor
    node_pair: torch.Tensor
    context: torch.Tensor
    edge_src: torch.Tensor
    edge_dst: torch.Tensor
    edge_type: torch.Tensor
    pair_slot: torch.Tensor
    labels: torch.Tensor
    num_questions: int
    max_choices: int

    @property
    def num_pairs(self) -> int:
        return int(self.context.shape[0])

    @property
    def num_graph_nodes(self) -> int:
        return int(self.node_index.shape[0])


def _context_features(g: QuestionGraph) -> npt.NDArray[np.float32]:
    """``[pair ; choice ; question ⊙ choice]`` per choice: the text-only input both models share."""
    return np.concatenate([g.pair_emb, g.choice_emb, g.question_emb[None, :] * g.choice_emb], axis=1)


def collate(
    graphs: Sequence[QuestionGraph], table: NodeTable | None, num_relations: int, with_graph: bool = True
) -> Batch:
    """Stack ``graphs`` into one :class:`Batch`; ``with_graph=False`` fills only the text inputs."""
    if not graphs:
        raise ConfigError("collate: empty batch")
    max_c = max(g.num_choices for g in graphs)
    R = num_relations
    ctx_parts, slots = [], []
    emb_rows: list[npt.NDArray[np.int64]] = []
    types: list[npt.NDArray[np.int64]] = []
    rel: list[npt.NDArray[np.float32]] = []
    owner: list[npt.NDArray[np.int64]] = []
    src: list[npt.NDArray[np.int64]] = []
    dst: list[npt.NDArray[np.int64]] = []
    etype: list[npt.NDArray[np.int64]] = []
    pair = 0
    offset = 0
    ctx_pairs: list[npt.NDArray[np.int64]] = []  # (pair, local graph node, edge type) for context edges
    for b, g in enumerate(graphs):
        ctx_parts.append(_context_features(g))
        slots.append(b * max_c + np.arange(g.num_choices))
        if not with_graph:
            pair += g.num_choices
            continue
        if table is None:
            raise ConfigError("collate: a node table is needed for the graph model")
        n = len(g.nodes)
        rows = table.rows(g.nodes)
        node_vecs = table.emb[rows]
        if g.edges.size and g.edges[:, 1].max() >= R:
            raise DataError(f"question {g.qid!r}: relation id {int(g.edges[:, 1].max())} ≥ {R} relations")
        other_choice = g.choice_mask.any(axis=0)
        for c in range(g.num_choices):
            cm = g.choice_mask[c]
            t = np.zeros(n, dtype=np.int64)
            t[other_choice & ~cm] = 3
            t[g.question_mask] = 1
            t[cm] = 2
            t[g.question_mask & cm] = 4
            emb_rows.append(rows)
            types.append(t)
            rel.append(node_vecs @ g.pair_emb[c] if n else np.zeros(0, dtype=np.float32))
            owner.append(np.full(n, pair, dtype=np.int64))
            if g.edges.size:
                h, r, tl = g.edges[:, 0] + offset, g.edges[:, 1], g.edges[:, 2] + offset
                src += [h, tl]
                dst += [tl, h]
                etype += [r, r + R]
            qn = np.flatnonzero(g.question_mask) + offset
            cn = np.flatnonzero(cm) + offset
            ctx_pairs.append(
                np.stack(
                    [
                        np.full(len(qn) + len(cn), pair, dtype=np.int64),
                        np.concatenate([qn, cn]),
                        np.concatenate([np.full(len(qn), 2 * R), np.full(len(cn), 2 * R + 1)]),
                    ],
                    axis=1,
                ).reshape(-1, 3)
            )
            offset += n
            pair += 1
    context = torch.from_numpy(np.concatenate(ctx_parts, axis=0).astype(np.float32))
    labels = torch.tensor([g.label for g in graphs], dtype=torch.long)
    pair_slot = torch.from_numpy(np.concatenate(slots).astype(np.int64))
    if not with_graph or table is None:
        empty_l = torch.zeros(0, dtype=torch.long)
        dim = int(graphs[0].pair_emb.shape[1])
        return Batch(
            torch.zeros((0, dim)),
            empty_l,
            empty_l,
            torch.zeros(0),
            empty_l,
            context,
            empty_l,
            empty_l,
            empty_l,
            pair_slot,
            labels,
            len(graphs),
            max_c,
        )
    N = offset
    ctx_e = np.concatenate(ctx_pairs, axis=0)
    ctx_node = ctx_e[:, 0] + N
    src += [ctx_node, ctx_e[:, 1]]
    dst += [ctx_e[:, 1], ctx_node]
    etype += [ctx_e[:, 2], ctx_e[:, 2] + 2]
    all_rows = np.concatenate(emb_rows) if emb_rows else np.zeros(0, dtype=np.int64)
    distinct, index = np.unique(all_rows, return_inverse=True)
    return Batch(
        node_vectors=torch.from_numpy(table.emb[distinct]),
        node_index=torch.from_numpy(index.reshape(-1).astype(np.int64)),
        node_type=torch.from_numpy(np.concatenate(types)),
        node_relevance=torch.from_numpy(np.concatenate(rel).astype(np.float32)),
        node_pair=torch.from_numpy(np.concatenate(owner)),
        context=context,
        edge_src=torch.from_numpy(np.concatenate(src).astype(np.int64)),
        edge_dst=torch.from_numpy(np.concatenate(dst).astype(np.int64)),
        edge_type=torch.from_numpy(np.concatenate(etype).astype(np.int64)),
        pair_slot=pair_slot,
        labels=labels,
        num_questions=len(graphs),
        max_choices=max_c,
    )
