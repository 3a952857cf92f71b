"""P_RL: reinforcement-learned reasoning paths from question concepts to choice concepts (KnowGPT §3.1).

MDP (§3.1): the state of a walk at entity ``e_t`` heading for target ``e_target`` is
``s_t = (e_t, e_target − e_t)`` (Eq. 1); actions are the current entity's neighbours (either edge
direction), transitions are deterministic. Rewards:

* reachability ``r_reach`` = +1 when a target concept is reached within ``K = max_steps`` actions, −1
  otherwise (Eq. 2), given at the end of the walk;
* context relatedness ``r_cr`` (Eq. 3): after every step, ``cos(W·P_t, c)`` where ``P_t`` is the mean of
  the embeddings of the entities and relations walked so far and ``c`` the question's embedding, divided by
  ``K`` so that a walk of K steps earns the average (a shorter one earns less). Node, relation and
  question embeddings all come from the same sentence encoder (all-MiniLM-L6-v2), so they already share
  one space and ``W = I``;
* conciseness ``r_cs = 1/|P|`` (Eq. 4), given when the walk reaches a target (a failed walk earns none,
  otherwise dead ends would be rewarded for being short).

The total is ``λ1 r_reach + λ2 r_cr + λ3 r_cs``. Node embeddings encode a node's verbalised triples
(Feng et al. 2020): its label and its first ``node_text_edges`` edges as template clauses (kept short:
the encoder's cost grows with the text); they are computed lazily and cached per graph on disk.

Action pruning (the action space is every neighbour, which is thousands at hub nodes): neighbours
already on the walk are removed; target concepts are always kept; up to ``max_actions // 2`` neighbours
that still lie within the remaining step budget of a target ("on the way", from a bounded backward
breadth-first ball around the targets; the targets are the choices, known at inference too) are kept,
most target-similar first; the remaining slots go to the other neighbours most similar to the target
embedding, among the ``prefilter`` of highest degree (ties by id) when a node has more.

Each action carries one bit the paper does not name: ``ahead``, set when the neighbour is a target or on
the way to one. Without it the policy must discover reachability from embeddings alone, and on a sparse
KG (WordNet: about 3 % of OBQA's (source, choice) pairs are within K = 3 hops) a walk almost never earns
``r_reach``, so nothing is learnt (training reach stayed at 0.2 %). The policy learns how much to trust the
bit; which of the actions ahead to take (context relatedness, conciseness) is still its choice. For the same
reason training walks only from sources that can reach their target within K steps: the others earn −1
whatever the policy does, and add variance but no signal.

The policy ``π_θ(a|s)`` scores each action bilinearly between an MLP of the state and a projection of the
action's features (neighbour embedding, relation embedding, cosine of neighbour and target, direction,
ahead);
it is trained by REINFORCE with a learned value baseline (Xiong et al. 2017's policy gradient). No gold
answers are used: every choice concept is a target.
"""

from __future__ import annotations

import hashlib
import json
import math
import pickle
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path as FilePath
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from kgwise.config import cache_dir
from kgwise.embed import Encoder
from kgwise.errors import ConfigError, DataError
from kgwise.files import atomic_path, savez_atomic
from kgwise.kg.base import KnowledgeGraph
from kgwise.render.templates import clause, clean_label, relation_phrase
from kgwise.types import Path, Question, Subgraph

if TYPE_CHECKING:
    from kgwise.kg.grounding import Grounding

__all__ = [
    "NodeEmbeddings",
    "PathAgent",
    "PathAgentConfig",
    "PathPolicy",
    "TrainingLog",
    "train_path_policy",
]

Vectors = npt.NDArray[np.float32]
_BALL_CAP = 20_000
_SCALARS = ("cosine to target", "inverse edge", "ahead")  # the scalar action features, in order


@dataclass(frozen=True)
class PathAgentConfig:
    """Hyper-parameters of P_RL. ``λ1 = λ2 = λ3 = 1``: the paper leaves them open. ``max_steps`` is K of
    Eq. 2. ``shape_reach`` adds λ1·(Φ(s') − Φ(s)) to each step, Φ = 1
    while a choice is within the remaining steps (potential-based shaping, Ng et al. 1999): the best
    policy is unchanged, and a step that leaves every way to the choices is charged at once.
    ``batch_walks``: walks that can reach their choice per policy-gradient update (whole questions are
    added until there are at least that many)."""

    max_steps: int = 3
    lambda_reach: float = 1.0
    lambda_context: float = 1.0
    lambda_concise: float = 1.0
    shape_reach: bool = True
    max_actions: int = 24
    prefilter: int = 64
    max_sources: int = 4
    node_text_edges: int = 2
    hidden: int = 256
    learning_rate: float = 3e-3  # the scalar feature weights learn 10× faster
    entropy_weight: float = 0.01
    value_weight: float = 0.5
    batch_walks: int = 64
    seed: int = 0

    def __post_init__(self) -> None:
        if self.max_steps < 1:
            raise ConfigError(f"PathAgentConfig.max_steps must be ≥ 1, got {self.max_steps}")
        if self.max_actions < 1 or self.prefilter < self.max_actions:
            raise ConfigError("PathAgentConfig: need 1 ≤ max_actions ≤ prefilter")
        if self.max_sources < 1 or self.batch_walks < 1 or self.hidden < 1:
            raise ConfigError("PathAgentConfig: max_sources, batch_walks and hidden must be ≥ 1")


# ---------------------------------------------------------------------------------------------- embeddings
def _graph_key(kg: KnowledgeGraph) -> str:
    h = hashlib.blake2b(digest_size=8)
    h.update(f"{getattr(kg, 'name', '')}|{kg.num_nodes}|{kg.num_edges}|{kg.num_relations}".encode())
    for v in range(0, kg.num_nodes, max(1, kg.num_nodes // 64)):
        h.update(kg.label(v).encode())
    return h.hexdigest()


class NodeEmbeddings:
    """Lazily computed, disk-cached embeddings of a graph's nodes (verbalised triples) and relations."""

    def __init__(
        self,
        kg: KnowledgeGraph,
        encoder: Encoder,
        text_edges: int = 2,
        cache: bool | str | FilePath = True,
    ) -> None:
        self.kg = kg
        self.encoder = encoder
        self.text_edges = text_edges
        self.dim = int(encoder.dim)
        self._vecs = np.zeros((kg.num_nodes, self.dim), dtype=np.float16)
        self._have = np.zeros(kg.num_nodes, dtype=bool)
        self._dirty = False
        if cache is True:
            cache = cache_dir() / f"node-embeddings-{_graph_key(kg)}-{text_edges}.npz"
        self.path = FilePath(cache) if cache else None
        if self.path is not None and self.path.is_file():
            with np.load(self.path) as z:
                if z["vecs"].shape == self._vecs.shape:
                    self._vecs, self._have = z["vecs"].copy(), z["have"].copy()
        names = [relation_phrase(kg.relation_name(r)) for r in range(kg.num_relations)]
        self.relations = encoder.encode(names)

    def verbalise(self, node: int) -> str:
        """``label. fact. fact`` for ``node`` (its first ``text_edges`` edges, out-edges first)."""
        kg = self.kg
        parts = [clean_label(kg.label(node))]
        rels, tails = kg.out_edges(node)
        facts = [clause(kg.label(node), kg.relation_name(int(r)), kg.label(int(t)))
                 for r, t in zip(rels[: self.text_edges].tolist(), tails[: self.text_edges].tolist(),
                                 strict=True)]
        if len(facts) < self.text_edges:
            rels, heads = kg.in_edges(node)
            k = self.text_edges - len(facts)
            facts += [clause(kg.label(int(h)), kg.relation_name(int(r)), kg.label(node))
                      for r, h in zip(rels[:k].tolist(), heads[:k].tolist(), strict=True)]
        return ". ".join(parts + facts)

    def get(self, nodes: npt.ArrayLike) -> Vectors:
        """Embeddings of ``nodes`` (shape ``(n, dim)``, float32, unit rows), encoding the missing ones."""
        v = np.asarray(nodes, dtype=np.int64).reshape(-1)
        missing = np.unique(v[~self._have[v]]) if v.size else v
        if missing.size:
            vecs = self.encoder.encode([self.verbalise(int(x)) for x in missing])
            self._vecs[missing] = vecs.astype(np.float16)
            self._have[missing] = True
            self._dirty = True
        out = self._vecs[v].astype(np.float32)
        out /= np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-6)
        return out

    def save(self) -> None:
        """Write newly encoded embeddings to the cache file."""
        if self.path is None or not self._dirty:
            return
        savez_atomic(self.path, {"vecs": self._vecs, "have": self._have})
        self._dirty = False

    @property
    def encoded(self) -> int:
        return int(self._have.sum())


# ---------------------------------------------------------------------------------------------- policy
class PathPolicy(nn.Module):
    """π_θ(a|s): bilinear score between an MLP of the state (Eq. 1) and the action features; a value
    head V(s) serves as the REINFORCE baseline."""

    def __init__(self, dim: int = 384, hidden: int = 256) -> None:
        super().__init__()
        self.dim, self.hidden = dim, hidden
        n = len(_SCALARS)
        self.state_net = nn.Sequential(nn.Linear(2 * dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.action_net = nn.Sequential(nn.Linear(2 * dim + n, hidden), nn.ReLU(), nn.Linear(hidden, hidden))
        self.value_head = nn.Sequential(nn.Linear(2 * dim, 64), nn.ReLU(), nn.Linear(64, 1))
        # direct weights on the scalar action features (_SCALARS), so that the most informative ones are
        # not diluted among the 2d embedding inputs; they start at 0 (uniform)
        self.scalar_weights = nn.Parameter(torch.zeros(n))

    def forward(
        self, state: torch.Tensor, actions: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """``state (R, 2d)``, ``actions (R, A, 2d+3)``, ``mask (R, A)`` → masked logits ``(R, A)``, V(s)."""
        q = self.state_net(state)
        k = self.action_net(actions)
        logits = torch.einsum("rh,rah->ra", q, k) / math.sqrt(self.hidden)
        logits = logits + actions[..., 2 * self.dim :] @ self.scalar_weights
        logits = logits.masked_fill(~mask, -1e9)
        return logits, self.value_head(state).squeeze(-1)

    def save(
        self, path: str | FilePath, config: PathAgentConfig, meta: dict[str, Any] | None = None
    ) -> FilePath:
        """Write weights, the config and ``meta`` (training statistics) to ``path``."""
        with atomic_path(path) as tmp:
            torch.save({"dim": self.dim, "hidden": self.hidden, "scalars": list(_SCALARS),
                        "config": asdict(config), "state_dict": self.state_dict(),
                        "meta": json.dumps(meta or {})}, tmp)
        return FilePath(path)

    @classmethod
    def load(cls, path: str | FilePath) -> tuple[PathPolicy, PathAgentConfig, dict[str, Any]]:
        """The policy, its config and its metadata from a file written by :meth:`save`."""
        path = FilePath(path)
        if not path.is_file():
            raise DataError("path-agent policy file not found", path)
        def refuse(exc: BaseException | str) -> DataError:
            reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]  # torch's are long
            return DataError(f"not a path-agent policy file: {reason}", path)

        try:
            blob = torch.load(path, map_location="cpu", weights_only=True)
        except (IndexError, RuntimeError, TypeError, ValueError, EOFError, pickle.UnpicklingError) as exc:
            raise refuse(exc) from exc
        if not isinstance(blob, dict) or "state_dict" not in blob:
            raise refuse(f"it holds a {type(blob).__name__}, not a saved policy")
        if "optimiser" in blob:
            raise refuse("a training checkpoint; use the path_policy.pt that training writes beside it")
        if blob.get("scalars", list(_SCALARS[:2])) != list(_SCALARS):
            raise DataError("a policy of an older kgwise (its actions lack the 'ahead' feature); train it "
                            "again (kgwise eval knowgpt writes path_policy.pt)", path)
        try:
            policy = cls(int(blob["dim"]), int(blob["hidden"]))
            policy.load_state_dict(blob["state_dict"])
            config = PathAgentConfig(**blob["config"])
            meta = json.loads(blob.get("meta", "{}"))
        except (KeyError, RuntimeError, TypeError, ValueError) as exc:
            raise refuse(exc) from exc
        policy.eval()
        return policy, config, meta


# ---------------------------------------------------------------------------------------------- walks
@dataclass
class _Walk:
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
class _Candidates:
    nodes: npt.NDArray[np.int64]
    relations: npt.NDArray[np.int64]
    inverse: npt.NDArray[np.bool_]
    ahead: npt.NDArray[np.bool_]  # a target, or on the way to one (all False before ``candidates``)


class _Environment:
    """The KG as an MDP: candidate actions (pruned), features, rewards."""

    def __init__(self, kg: KnowledgeGraph, emb: NodeEmbeddings, config: PathAgentConfig) -> None:
        self.kg, self.emb, self.config = kg, emb, config
        self._neigh: dict[int, _Candidates] = {}
        self._balls: dict[frozenset[int], list[npt.NDArray[np.int64]]] = {}

    def balls(self, targets: frozenset[int]) -> list[npt.NDArray[np.int64]]:
        """``balls[k]``: sorted nodes within ``k`` hops of a target (either direction), ``k < max_steps``;
        expansion stops at ``_BALL_CAP`` nodes (the ball is then a subset)."""
        found = self._balls.get(targets)
        if found is not None:
            return found
        ball = np.array(sorted(targets), dtype=np.int64)
        out = [ball]
        for _ in range(1, self.config.max_steps):
            if len(ball) > _BALL_CAP:
                out.append(ball)
                continue
            ball = np.union1d(ball, np.asarray(self.kg.neighbors(ball), dtype=np.int64))
            out.append(ball)
        if len(self._balls) > 50_000:
            self._balls.clear()
        self._balls[targets] = out
        return out

    def _neighbours(self, node: int) -> _Candidates:
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
        order = np.lexsort((nodes, -self._degree(nodes)))
        cand = _Candidates(nodes[order], rels[order], inv[order], np.zeros(len(order), dtype=bool))
        if len(self._neigh) < 200_000:
            self._neigh[node] = cand
        return cand

    def _degree(self, nodes: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        degree = getattr(self.kg, "degree", None)
        if callable(degree):
            return np.asarray(degree(nodes), dtype=np.int64)
        return np.array([len(self.kg.out_edges(int(v))[1]) + len(self.kg.in_edges(int(v))[1]) for v in nodes])

    def candidates(self, walk: _Walk) -> _Candidates:
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
        return _Candidates(nodes[pick], rels[pick], inv[pick], (is_target | on_way)[pick])

    def reachable(self, walk: _Walk) -> bool:
        """Whether ``walk`` can still reach a target: a neighbour of its node lies within the remaining
        steps of one (a capped ball may answer False for a far, reachable target)."""
        remaining = self.config.max_steps - len(walk.relations)
        if remaining < 1:
            return False
        ball = self.balls(walk.targets)[remaining - 1]
        return bool(np.isin(self._neighbours(walk.nodes[-1]).nodes, ball).any())

    def _most_similar(
        self, nodes: npt.NDArray[np.int64], idx: npt.NDArray[np.int64], walk: _Walk, k: int
    ) -> npt.NDArray[np.int64]:
        if k <= 0:
            return idx[:0]
        if len(idx) <= k:
            return idx
        sims = self.emb.get(nodes[idx]) @ walk.target_vec
        return idx[np.argsort(-sims, kind="stable")[:k]]

    def features(
        self, walks: Sequence[_Walk], cands: Sequence[_Candidates]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """State ``(e_t, e_target − e_t)`` (Eq. 1), padded action features and the action mask."""
        d = self.emb.dim
        cur = self.emb.get([w.nodes[-1] for w in walks])
        tgt = np.stack([w.target_vec for w in walks])
        state = np.concatenate([cur, tgt - cur], axis=1)
        width = max(1, max(len(c.nodes) for c in cands))
        feats = np.zeros((len(walks), width, 2 * d + len(_SCALARS)), dtype=np.float32)
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

    def move(self, walk: _Walk, cand: _Candidates, action: int) -> float:
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

    def terminal(self, walk: _Walk) -> float:
        """The end-of-walk reward: Eq. 2 and Eq. 4, and the shaping term's −λ1·Φ (Φ of an end is 0)."""
        cfg = self.config
        shaping = -cfg.lambda_reach * walk.ahead if cfg.shape_reach else 0.0
        walk.ahead = False
        if walk.reached:
            return cfg.lambda_reach + cfg.lambda_concise / len(walk.relations) + shaping
        return -cfg.lambda_reach + shaping


def _new_walks(
    emb: NodeEmbeddings,
    config: PathAgentConfig,
    sources: Sequence[int],
    choices: Sequence[Sequence[int]],
    context_vec: Vectors,
) -> list[_Walk]:
    walks: list[_Walk] = []
    for nodes in choices:
        targets = frozenset(int(x) for x in nodes)
        if not targets:
            continue
        tv = emb.get(sorted(targets)).mean(axis=0)
        tv /= max(float(np.linalg.norm(tv)), 1e-6)
        for s in sources:
            if s in targets:
                continue
            walks.append(_Walk(int(s), targets, tv.astype(np.float32), context_vec, [int(s)]))
    return walks


def _pick_sources(
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


# ---------------------------------------------------------------------------------------------- agent
class PathAgent:
    """The P_RL extractor: greedy walks of a trained policy from each question concept towards each
    choice's concepts; the walks that reach their target form the subgraph (``Extractor`` protocol)."""

    name = "P_RL"

    def __init__(
        self,
        kg: KnowledgeGraph,
        policy: PathPolicy,
        config: PathAgentConfig | None = None,
        encoder: Encoder | None = None,
        embeddings: NodeEmbeddings | None = None,
    ) -> None:
        self.kg = kg
        self.policy = policy.eval()
        self.config = config or PathAgentConfig()
        if embeddings is None:
            if encoder is None:
                from kgwise.embed import MiniLM

                encoder = MiniLM()
            embeddings = NodeEmbeddings(kg, encoder, self.config.node_text_edges)
        self.emb = embeddings
        self.env = _Environment(kg, self.emb, self.config)

    @classmethod
    def load(cls, kg: KnowledgeGraph, path: str | FilePath, encoder: Encoder | None = None) -> PathAgent:
        policy, config, _ = PathPolicy.load(path)
        return cls(kg, policy, config, encoder)

    def _context(self, question: Question) -> Vectors:
        return self.emb.encoder.encode([question.text])[0]

    def walk(
        self, question: Question, grounding: Grounding, greedy: bool = True
    ) -> list[_Walk]:
        """Run the policy from every (source, choice) pair; returns the finished walks."""
        ctx = self._context(question)
        sources = _pick_sources(self.emb, grounding.question_nodes, grounding.choice_nodes, ctx,
                                self.config.max_sources)
        walks = _new_walks(self.emb, self.config, sources, grounding.choice_nodes, ctx)
        with torch.no_grad():
            _rollout(self.env, self.policy, walks, greedy=greedy, generator=None)
        return walks

    def extract(self, question: Question, grounding: Grounding) -> Subgraph:
        """The subgraph made of the walks that reached a choice concept (KnowGPT §3.1)."""
        walks = self.walk(question, grounding)
        paths: dict[tuple[tuple[int, ...], tuple[int, ...]], Path] = {}
        for w in walks:
            if w.reached:
                p = Path(tuple(w.nodes), tuple(w.relations), tuple(w.inverse))
                paths.setdefault((p.nodes, p.relations), p)
        nodes: dict[int, None] = {}
        edges: dict[tuple[int, int, int], None] = {}
        for p in paths.values():
            nodes.update(dict.fromkeys(p.nodes))
            edges.update(dict.fromkeys(p.edges()))
        return Subgraph(
            nodes=tuple(nodes),
            edges=tuple(edges),
            question_nodes=tuple(grounding.question_nodes),
            choice_nodes=tuple(tuple(c) for c in grounding.choice_nodes),
            paths=tuple(paths.values()),
        )


def _rollout(
    env: _Environment,
    policy: PathPolicy,
    walks: Sequence[_Walk],
    greedy: bool,
    generator: torch.Generator | None,
) -> list[list[tuple[int, torch.Tensor, torch.Tensor, torch.Tensor, float]]]:
    """Advance all walks to the end. Per walk, the steps ``(walk index, log π(a|s), V(s), entropy,
    reward)``; dead ends (no action left) end the walk with the failure reward."""
    steps: list[list[tuple[int, torch.Tensor, torch.Tensor, torch.Tensor, float]]] = [[] for _ in walks]
    for _ in range(env.config.max_steps):
        live = [i for i, w in enumerate(walks) if not w.done]
        if not live:
            break
        cands = [env.candidates(walks[i]) for i in live]
        for i, c in zip(live, cands, strict=True):
            if len(c.nodes) == 0:
                walks[i].done = True
                if steps[i]:
                    j, lp, v, ent, r = steps[i][-1]
                    steps[i][-1] = (j, lp, v, ent, r + env.terminal(walks[i]))
        keep = [(i, c) for i, c in zip(live, cands, strict=True) if len(c.nodes)]
        if not keep:
            break
        state, feats, mask = env.features([walks[i] for i, _ in keep], [c for _, c in keep])
        logits, values = policy(state, feats, mask)
        logp = torch.log_softmax(logits, dim=-1)
        if greedy:
            actions = logits.argmax(dim=-1)
        else:
            actions = torch.multinomial(logp.exp(), 1, generator=generator).squeeze(-1)
        probs = logp.exp()
        entropy = -(probs * logp.masked_fill(~mask, 0.0)).sum(-1)
        for row, ((i, c), a) in enumerate(zip(keep, actions.tolist(), strict=True)):
            reward = env.move(walks[i], c, int(a))
            steps[i].append((i, logp[row, a], values[row], entropy[row], reward))
    return steps


# ---------------------------------------------------------------------------------------------- training
@dataclass
class TrainingLog:
    """Per-iteration statistics of policy training: ``reach_rate`` is the fraction of the walks trained on
    (those that can reach their target within K steps) that reach it; ``reachable_share`` the fraction of
    all (source, choice) walks that can."""

    reach_rate: list[float] = field(default_factory=list)
    reachable_share: list[float] = field(default_factory=list)
    mean_return: list[float] = field(default_factory=list)
    mean_length: list[float] = field(default_factory=list)
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


TrainItem = tuple[Question, "Grounding"]


def _training_walks(
    env: _Environment, items: Sequence[TrainItem], contexts: Vectors, order: npt.NDArray[np.int64]
) -> tuple[list[_Walk], int]:
    """The reachable walks of the questions ``items[order[0]], items[order[1]], …`` (``contexts``: their
    embeddings), taken until there are ``batch_walks`` of them (or the questions run out), and the number
    of walks looked at."""
    config = env.config
    walks: list[_Walk] = []
    seen = 0
    for i in order.tolist():
        g, ctx = items[i][1], contexts[i]
        sources = _pick_sources(env.emb, g.question_nodes, g.choice_nodes, ctx, config.max_sources)
        new = _new_walks(env.emb, config, sources, g.choice_nodes, ctx)
        seen += len(new)
        walks.extend(w for w in new if env.reachable(w))
        if len(walks) >= config.batch_walks:
            break
    return walks, seen


def _reinforce_step(
    env: _Environment,
    policy: PathPolicy,
    optimiser: torch.optim.Optimizer,
    walks: list[_Walk],
    config: PathAgentConfig,
    generator: torch.Generator,
) -> tuple[float, float, float]:
    """One REINFORCE-with-baseline update on ``walks``; returns their reach rate, mean return and mean
    length."""
    policy.train()
    steps = _rollout(env, policy, walks, greedy=False, generator=generator)
    policy_loss: list[torch.Tensor] = []
    value_loss: list[torch.Tensor] = []
    entropies: list[torch.Tensor] = []
    returns: list[float] = []
    for walk_steps in steps:
        ret = 0.0
        for _, lp, v, ent, r in reversed(walk_steps):
            ret += r
            adv = ret - float(v.detach())
            policy_loss.append(-lp * adv)
            value_loss.append((v - ret) ** 2)
            entropies.append(ent)
        if walk_steps:
            returns.append(ret)
    if policy_loss:
        loss = (torch.stack(policy_loss).mean() + config.value_weight * torch.stack(value_loss).mean()
                - config.entropy_weight * torch.stack(entropies).mean())
        optimiser.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(policy.parameters(), 5.0)
        optimiser.step()
    reach = float(np.mean([w.reached for w in walks]))
    length = float(np.mean([len(w.relations) for w in walks]))
    return reach, float(np.mean(returns)) if returns else 0.0, length


def train_path_policy(
    kg: KnowledgeGraph,
    items: Sequence[TrainItem],
    config: PathAgentConfig | None = None,
    *,
    encoder: Encoder | None = None,
    embeddings: NodeEmbeddings | None = None,
    iterations: int = 200,
    time_limit_s: float | None = None,
    checkpoint: str | FilePath | None = None,
    progress: bool = True,
    on_iteration: Callable[[int, TrainingLog], None] | None = None,
) -> tuple[PathPolicy, TrainingLog]:
    """Train π_θ by REINFORCE with a value baseline on grounded training questions (no gold labels).

    Each iteration walks from the (source, choice) pairs, of randomly drawn questions, whose target is
    within K steps, until it has ``batch_walks`` walks. With ``checkpoint`` the policy, optimiser and log
    are saved every 10 iterations and at the end, and a run restarts from an existing checkpoint
    (resumable). ``time_limit_s`` stops early.
    """
    config = config or PathAgentConfig()
    usable = [(q, g) for q, g in items if g.question_nodes and any(g.choice_nodes)]
    if not usable:
        raise ConfigError("train_path_policy: no training question has both question and choice concepts")
    if embeddings is None:
        if encoder is None:
            from kgwise.embed import MiniLM

            encoder = MiniLM()
        embeddings = NodeEmbeddings(kg, encoder, config.node_text_edges)
    torch.manual_seed(config.seed)
    policy = PathPolicy(embeddings.dim, config.hidden)
    scalars = [policy.scalar_weights]
    others = [p for n, p in policy.named_parameters() if n != "scalar_weights"]
    optimiser = torch.optim.Adam([{"params": others, "lr": config.learning_rate},
                                  {"params": scalars, "lr": 10 * config.learning_rate}])
    log = TrainingLog()
    start_it = 0
    ckpt = FilePath(checkpoint) if checkpoint is not None else None
    if ckpt is not None and ckpt.is_file():
        blob = torch.load(ckpt, map_location="cpu", weights_only=True)
        policy.load_state_dict(blob["state_dict"])
        optimiser.load_state_dict(blob["optimiser"])
        log = TrainingLog(**blob["log"])
        start_it = int(blob["iteration"])
    env = _Environment(kg, embeddings, config)
    contexts = embeddings.encoder.encode([q.text for q, _ in usable])  # once, not per sampled question
    rng = np.random.default_rng(config.seed + start_it)
    generator = torch.Generator().manual_seed(config.seed + start_it)

    def save_ckpt(it: int) -> None:
        embeddings.save()
        if ckpt is None:
            return
        with atomic_path(ckpt) as tmp:
            torch.save({"state_dict": policy.state_dict(), "optimiser": optimiser.state_dict(),
                        "log": log.to_dict(), "iteration": it, "config": asdict(config)}, tmp)

    from tqdm import tqdm

    t0 = time.perf_counter() - log.seconds
    bar = tqdm(range(start_it, iterations), desc="P_RL training", disable=not progress,
               initial=start_it, total=iterations)
    it = start_it
    for it in bar:
        walks, seen = _training_walks(env, usable, contexts, rng.permutation(len(usable)))
        if not walks:
            raise ConfigError(f"train_path_policy: no training question has a choice concept within "
                              f"max_steps = {config.max_steps} steps of its question concepts; "
                              "raise max_steps")
        reach, ret, length = _reinforce_step(env, policy, optimiser, walks, config, generator)
        log.reach_rate.append(reach)
        log.reachable_share.append(len(walks) / seen)
        log.mean_return.append(ret)
        log.mean_length.append(length)
        log.seconds = time.perf_counter() - t0
        window = log.reach_rate[-20:]
        bar.set_postfix(reach=f"{np.mean(window):.2f}", ret=f"{np.mean(log.mean_return[-20:]):.2f}")
        if on_iteration is not None:
            on_iteration(it, log)
        if (it + 1) % 10 == 0:
            save_ckpt(it + 1)
        if time_limit_s is not None and log.seconds > time_limit_s:
            it += 1
            break
    else:
        it = iterations
    save_ckpt(max(it, start_it))
    policy.eval()
    return policy, log
