"""The KG as P_RL's MDP (KnowGPT §3.1): walks, pruned candidate actions, their features, and the rewards of
Eq. 2–4 with the reach shaping term (see :mod:`kgwise.extract.path_agent`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
import torch

from kgwise.extract.path_agent.config import SCALARS, PathAgentConfig
from kgwise.extract.path_agent.embeddings import NodeEmbeddings, Vectors
from kgwise.kg.base import KnowledgeGraph

__all__ = ["BALL_CAP", "Environment", "Moves", "Walk", "new_walks", "pick_sources"]

BALL_CAP = 20_000
"""Nodes a backward ball around the targets grows to before it stops expanding."""


@dataclass
class Walk:
    source: int
    targets: frozenset[int]
    target_vec: Vectors
    context_vec: Vectors
    nodes: list[int]
    relations: list[int] = field(default_factory=list)
    inverse: list[bool] = field(default_factory=list)
    path_sum: Vectors | None = None
    path_count: int = 1
    done: bool = False
    reached: bool = False
    ahead: bool = True  # Φ of the shaping term: a target is still within the remaining steps


@dataclass
class Moves:
    nodes: npt.NDArray[np.int64]
    relations: npt.NDArray[np.int64]
    inverse: npt.NDArray[np.bool_]
    ahead: npt.NDArray[np.bool_]  # a target, or on the way to one (all False before ``candidates``)


class Environment:
    """The KG as an MDP: candidate actions (pruned), features, rewards."""

    def __init__(self, kg: KnowledgeGraph, emb: NodeEmbeddings, config: PathAgentConfig) -> None:
        self.kg, self.emb, self.config = kg, emb, config
        self._neigh: dict[int, Moves] = {}
        self._balls: dict[frozenset[int], list[npt.NDArray[np.int64]]] = {}

    def balls(self, targets: frozenset[int]) -> list[npt.NDArray[np.int64]]:
        """``balls[k]``: sorted nodes within ``k`` hops of a target (either direction), ``k < max_steps``;
        expansion stops at ``BALL_CAP`` nodes (the ball is then a subset)."""
        found = self._balls.get(targets)
        if found is not None:
            return found
        ball = np.array(sorted(targets), dtype=np.int64)
        out = [ball]
        for _ in range(1, self.config.max_steps):
            if len(ball) > BALL_CAP:
                out.append(ball)
                continue
            ball = np.union1d(ball, np.asarray(self.kg.neighbors(ball), dtype=np.int64))
            out.append(ball)
        if len(self._balls) > 50_000:
            self._balls.clear()
        self._balls[targets] = out
        return out

    def _neighbours(self, node: int) -> Moves:
        """All distinct neighbours (first edge kept per neighbour), highest degree first (ties by id)."""
        found = self._neigh.get(node)
        if found is not None:
            return found
        out_r, out_t = self.kg.out_edges(node)
        in_r, in_h = self.kg.in_edges(node)
        nodes = np.concatenate([out_t, in_h]).astype(np.int64)
        rels = np.concatenate([out_r, in_r]).astype(np.int64)
        inv = np.concatenate([np.zeros(len(out_t), bool), np.ones(len(in_h), bool)])
        keep = nodes != node
        nodes, rels, inv = nodes[keep], rels[keep], inv[keep]
        _, first = np.unique(nodes, return_index=True)
        nodes, rels, inv = nodes[first], rels[first], inv[first]
        order = np.lexsort((nodes, -np.asarray(self.kg.degree(nodes), dtype=np.int64)))
        cand = Moves(nodes[order], rels[order], inv[order], np.zeros(len(order), dtype=bool))
        if len(self._neigh) < 200_000:
            self._neigh[node] = cand
        return cand

    def candidates(self, walk: Walk) -> Moves:
        """The pruned action set of ``walk`` at its current node (see the module docstring)."""
        node = walk.nodes[-1]
        cand = self._neighbours(node)
        visited = np.asarray(walk.nodes, dtype=np.int64)
        ok = ~np.isin(cand.nodes, visited)
        nodes, rels, inv = cand.nodes[ok], cand.relations[ok], cand.inverse[ok]
        is_target = np.isin(nodes, np.fromiter(walk.targets, dtype=np.int64))
        remaining = self.config.max_steps - len(walk.relations)  # steps left, this one included
        if remaining >= 2:
            on_way = ~is_target & np.isin(nodes, self.balls(walk.targets)[remaining - 1])
        else:
            on_way = np.zeros(len(nodes), dtype=bool)
        budget = self.config.max_actions - int(is_target.sum())
        half = min(budget, self.config.max_actions // 2)
        way = self._most_similar(nodes, np.flatnonzero(on_way), walk, half)
        rest = np.flatnonzero(~is_target & ~on_way)
        rest = rest[: self.config.prefilter]  # neighbours are stored highest degree first
        rest = self._most_similar(nodes, rest, walk, budget - len(way))
        pick = np.sort(np.concatenate([np.flatnonzero(is_target), way, rest]))
        return Moves(nodes[pick], rels[pick], inv[pick], (is_target | on_way)[pick])

    def reachable(self, walk: Walk) -> bool:
        """Whether ``walk`` can still reach a target: a neighbour of its node lies within the remaining
        steps of one (a capped ball may answer False for a far, reachable target)."""
        remaining = self.config.max_steps - len(walk.relations)
        if remaining < 1:
            return False
        ball = self.balls(walk.targets)[remaining - 1]
        return bool(np.isin(self._neighbours(walk.nodes[-1]).nodes, ball).any())

    def _most_similar(
        self, nodes: npt.NDArray[np.int64], idx: npt.NDArray[np.int64], walk: Walk, k: int
    ) -> npt.NDArray[np.int64]:
        if k <= 0:
            return idx[:0]
        if len(idx) <= k:
            return idx
        sims = self.emb.get(nodes[idx]) @ walk.target_vec
        return idx[np.argsort(-sims, kind="stable")[:k]]

    def features(
        self, walks: Sequence[Walk], cands: Sequence[Moves]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """State ``(e_t, e_target − e_t)`` (Eq. 1), padded action features and the action mask."""
        d = self.emb.dim
        cur = self.emb.get([w.nodes[-1] for w in walks])
        tgt = np.stack([w.target_vec for w in walks])
        state = np.concatenate([cur, tgt - cur], axis=1)
        width = max(1, max(len(c.nodes) for c in cands))
        feats = np.zeros((len(walks), width, 2 * d + len(SCALARS)), dtype=np.float32)
        mask = np.zeros((len(walks), width), dtype=bool)
        all_nodes = np.concatenate([c.nodes for c in cands]) if cands else np.empty(0, np.int64)
        node_vecs = self.emb.get(all_nodes) if all_nodes.size else np.empty((0, d), np.float32)
        pos = 0
        for i, c in enumerate(cands):
            n = len(c.nodes)
            if n == 0:
                continue
            nv = node_vecs[pos : pos + n]
            pos += n
            feats[i, :n, :d] = nv
            feats[i, :n, d : 2 * d] = self.emb.relations[c.relations]
            feats[i, :n, 2 * d] = nv @ walks[i].target_vec
            feats[i, :n, 2 * d + 1] = c.inverse.astype(np.float32)
            feats[i, :n, 2 * d + 2] = c.ahead.astype(np.float32)
            mask[i, :n] = True
        return torch.from_numpy(state), torch.from_numpy(feats), torch.from_numpy(mask)

    def move(self, walk: Walk, cand: Moves, action: int) -> float:
        """Take ``action``; returns the step reward λ2·r_cr/K (Eq. 3), plus the terminal λ1·r_reach (Eq. 2)
        and λ3·r_cs (Eq. 4) when the walk ends.

        With ``shape_reach`` each step also earns ``λ1·(Φ(s') − Φ(s))``, ``Φ`` = 1 while a target is
        within the remaining steps and 0 once the walk ends (Ng et al. 1999). Over a walk the terms sum to
        −λ1·Φ(s_0), the same for every policy, so the best policy is unchanged; but a step that leaves every
        way to the targets is charged at once instead of sharing the end's −λ1 with the steps before it."""
        cfg = self.config
        before = walk.ahead
        walk.ahead = bool(cand.ahead[action])
        node, rel = int(cand.nodes[action]), int(cand.relations[action])
        walk.nodes.append(node)
        walk.relations.append(rel)
        walk.inverse.append(bool(cand.inverse[action]))
        vec = self.emb.get([node])[0] + self.emb.relations[rel]
        walk.path_sum = (walk.path_sum if walk.path_sum is not None else self.emb.get([walk.source])[0]) + vec
        walk.path_count += 2
        mean = walk.path_sum / walk.path_count
        r_cr = float(mean @ walk.context_vec / max(float(np.linalg.norm(mean)), 1e-6))
        reward = cfg.lambda_context * r_cr / cfg.max_steps
        if cfg.shape_reach:
            reward += cfg.lambda_reach * (walk.ahead - before)
        if node in walk.targets:
            walk.done = walk.reached = True
        elif len(walk.relations) >= cfg.max_steps:
            walk.done = True
        if walk.done:
            reward += self.terminal(walk)
        return reward

    def terminal(self, walk: Walk) -> float:
        """The end-of-walk reward: Eq. 2 and Eq. 4, and the shaping term's −λ1·Φ (Φ of an end is 0)."""
        cfg = self.config
        shaping = -cfg.lambda_reach * walk.ahead if cfg.shape_reach else 0.0
        walk.ahead = False
        if walk.reached:
            return cfg.lambda_reach + cfg.lambda_concise / len(walk.relations) + shaping
        return -cfg.lambda_reach + shaping


def new_walks(
    emb: NodeEmbeddings,
    config: PathAgentConfig,
    sources: Sequence[int],
    choices: Sequence[Sequence[int]],
    context_vec: Vectors,
) -> list[Walk]:
    walks: list[Walk] = []
    for nodes in choices:
        targets = frozenset(int(x) for x in nodes)
        if not targets:
            continue
        tv = emb.get(sorted(targets)).mean(axis=0)
        tv /= max(float(np.linalg.norm(tv)), 1e-6)
        for s in sources:
            if s in targets:
                continue
            walks.append(Walk(int(s), targets, tv.astype(np.float32), context_vec, [int(s)]))
    return walks


def pick_sources(
    emb: NodeEmbeddings, question_nodes: Sequence[int], choice_nodes: Sequence[Sequence[int]],
    context_vec: Vectors, k: int,
) -> list[int]:
    """At most ``k`` question concepts that are not choice concepts, most similar to the question first."""
    taken = {int(x) for nodes in choice_nodes for x in nodes}
    qn = [int(x) for x in dict.fromkeys(question_nodes) if int(x) not in taken]
    if len(qn) <= k:
        return qn
    sims = emb.get(qn) @ context_vec
    return [qn[i] for i in np.argsort(-sims, kind="stable")[:k]]


