"""The KG model (``GraphQA``, QA-GNN-style) and its text-only baseline (``TextQA``).

Both score every (question, choice) pair from the same frozen MiniLM inputs (:mod:`kgwise.kgm.features`)
and turn the scores into a softmax over the question's choices (as QA-GNN, Yasunaga et al. 2021:
``p(a|q) ∝ exp(MLP(z, h_z, g))``). ``GraphQA`` adds relational graph-attention message passing over the
pair's working graph (QA-GNN's GNN: messages carry the edge type, attention from query/key projections,
softmax over each node's incoming edges) and attention pooling of the graph from the context node.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from kgwise.kgm.config import ModelConfig
from kgwise.kgm.features import NODE_TYPES, Batch, num_edge_types

__all__ = ["GraphQA", "ModelConfig", "RelationalAttention", "TextQA", "build_model", "scatter_softmax"]


def scatter_softmax(scores: torch.Tensor, index: torch.Tensor, size: int) -> torch.Tensor:
    """Softmax of ``scores`` (E, H) within groups ``index`` (E,) of ``size`` groups (max-shifted)."""
    h = scores.shape[1]
    idx = index[:, None].expand(-1, h)
    peak = torch.full((size, h), -math.inf, dtype=scores.dtype, device=scores.device)
    peak = peak.scatter_reduce(0, idx, scores, reduce="amax", include_self=True)
    e = torch.exp(scores - peak[index])
    denom = torch.zeros((size, h), dtype=scores.dtype, device=scores.device).index_add_(0, index, e)
    return e / denom[index].clamp_min(1e-16)


class _ContextEncoder(nn.Module):
    """MLP on ``[pair ; choice ; question ⊙ choice]`` MiniLM embeddings (shared by both models)."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Dropout(cfg.dropout),
            nn.Linear(3 * cfg.emb_dim, cfg.context_hidden),
            nn.GELU(),
            nn.Dropout(cfg.dropout),
        )

    def forward(self, context: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.net(context)
        return out


def _to_choice_scores(pair_scores: torch.Tensor, batch: Batch) -> torch.Tensor:
    """(P,) pair scores → (B, max_choices) with ``-inf`` where a question has fewer choices."""
    full = torch.full(
        (batch.num_questions * batch.max_choices,),
        -math.inf,
        dtype=pair_scores.dtype,
        device=pair_scores.device,
    )
    full = full.index_put((batch.pair_slot,), pair_scores)
    return full.view(batch.num_questions, batch.max_choices)


class TextQA(nn.Module):
    """The baseline: the same frozen encoder and context MLP, no graph; one score per pair."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.config = cfg
        self.context = _ContextEncoder(cfg)
        self.head = nn.Sequential(
            nn.Linear(cfg.context_hidden, cfg.context_hidden // 2),
            nn.GELU(),
            nn.Dropout(cfg.dropout),
            nn.Linear(cfg.context_hidden // 2, 1),
        )

    def forward(self, batch: Batch) -> torch.Tensor:
        """Choice logits (B, max_choices)."""
        return _to_choice_scores(self.head(self.context(batch.context)).squeeze(-1), batch)


class RelationalAttention(nn.Module):
    """One relational graph-attention layer (after QA-GNN's message passing).

    Message ``m_ij = W_m h_i + e_r`` and key ``k_ij = W_k h_i + e'_r`` carry the edge type ``r``; query
    ``q_j = W_q h_j``; ``α_ij = softmax_{i→j}(q_j·k_ij / √d)`` per head; ``h_j ← LN(h_j + W_o GELU([h_j ;
    Σ_i α_ij m_ij]))``.
    """

    def __init__(self, hidden: int, heads: int, edge_types: int, dropout: float) -> None:
        super().__init__()
        self.heads, self.dh = heads, hidden // heads
        self.msg = nn.Linear(hidden, hidden)
        self.key = nn.Linear(hidden, hidden)
        self.query = nn.Linear(hidden, hidden)
        self.rel_msg = nn.Embedding(edge_types, hidden)
        self.rel_key = nn.Embedding(edge_types, hidden)
        self.out = nn.Linear(2 * hidden, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.drop = nn.Dropout(dropout)

    def forward(
        self, h: torch.Tensor, src: torch.Tensor, dst: torch.Tensor, etype: torch.Tensor
    ) -> torch.Tensor:
        n, d = h.shape
        if src.numel() == 0:
            agg = torch.zeros_like(h)
        else:
            m = (self.msg(h)[src] + self.rel_msg(etype)).view(-1, self.heads, self.dh)
            k = (self.key(h)[src] + self.rel_key(etype)).view(-1, self.heads, self.dh)
            q = self.query(h)[dst].view(-1, self.heads, self.dh)
            alpha = scatter_softmax((q * k).sum(-1) / math.sqrt(self.dh), dst, n)
            weighted = (alpha[..., None] * m).reshape(-1, d)
            agg = torch.zeros_like(h).index_add_(0, dst, weighted)
        update = self.out(torch.nn.functional.gelu(torch.cat([h, agg], dim=-1)))
        out: torch.Tensor = self.norm(h + self.drop(update))
        return out


class GraphQA(nn.Module):
    """QA-GNN-style KG model: node features from label embeddings, node type and relevance; a context
    node from the QA pair; ``layers`` relational attention layers; score ``MLP([z ; h_z ; pool(g)])``."""

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.config = cfg
        g = cfg.gnn_hidden
        self.context = _ContextEncoder(cfg)
        self.node_in = nn.Linear(cfg.emb_dim, g)
        self.type_emb = nn.Embedding(NODE_TYPES, g)
        self.relevance_in = nn.Linear(1, g)
        self.context_in = nn.Linear(cfg.context_hidden, g)
        self.layers = nn.ModuleList(
            RelationalAttention(g, cfg.heads, num_edge_types(cfg.num_relations), cfg.dropout)
            for _ in range(cfg.layers)
        )
        self.pool_query = nn.Linear(g, g)
        self.pool_key = nn.Linear(g, g)
        self.head = nn.Sequential(
            nn.Linear(cfg.context_hidden + 2 * g, cfg.context_hidden // 2),
            nn.GELU(),
            nn.Dropout(cfg.dropout),
            nn.Linear(cfg.context_hidden // 2, 1),
        )

    def forward(self, batch: Batch) -> torch.Tensor:
        """Choice logits (B, max_choices)."""
        z = self.context(batch.context)  # (P, context_hidden)
        P, N = batch.num_pairs, batch.num_graph_nodes
        nodes = (
            torch.nn.functional.gelu(self.node_in(batch.node_vectors))[batch.node_index]
            + self.type_emb(batch.node_type)
            + self.relevance_in(batch.node_relevance[:, None])
        )
        h = torch.cat([nodes, torch.nn.functional.gelu(self.context_in(z))], dim=0)
        for layer in self.layers:
            h = layer(h, batch.edge_src, batch.edge_dst, batch.edge_type)
        hz = h[N:]
        hg = h[:N]
        if N:
            q = self.pool_query(hz)[batch.node_pair]
            score = (q * self.pool_key(hg)).sum(-1, keepdim=True) / math.sqrt(hg.shape[1])
            w = scatter_softmax(score, batch.node_pair, P)
            pooled = torch.zeros_like(hz).index_add_(0, batch.node_pair, w * hg)
        else:
            pooled = torch.zeros_like(hz)
        logits = self.head(torch.cat([z, hz, pooled], dim=-1)).squeeze(-1)
        return _to_choice_scores(logits, batch)


def build_model(cfg: ModelConfig) -> GraphQA | TextQA:
    """The model ``cfg.kind`` names."""
    return GraphQA(cfg) if cfg.kind == "graph" else TextQA(cfg)
