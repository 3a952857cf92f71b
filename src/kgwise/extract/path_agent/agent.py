"""The P_RL extractor: greedy walks of a trained policy from the question concepts to the choice concepts."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path as FilePath
from typing import TYPE_CHECKING

import torch

from kgwise.embed import Encoder
from kgwise.extract.path_agent.config import PathAgentConfig
from kgwise.extract.path_agent.embeddings import NodeEmbeddings, Vectors
from kgwise.extract.path_agent.environment import Environment, Walk, new_walks, pick_sources
from kgwise.extract.path_agent.policy import PathPolicy
from kgwise.kg.base import KnowledgeGraph
from kgwise.types import Path, Question, Subgraph

if TYPE_CHECKING:
    from kgwise.kg.grounding import Grounding

__all__ = ["PathAgent", "rollout"]


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
        self.env = Environment(kg, self.emb, self.config)

    @classmethod
    def load(cls, kg: KnowledgeGraph, path: str | FilePath, encoder: Encoder | None = None) -> PathAgent:
        policy, config, _ = PathPolicy.load(path)
        return cls(kg, policy, config, encoder)

    def _context(self, question: Question) -> Vectors:
        return self.emb.encoder.encode([question.text])[0]

    def walk(
        self, question: Question, grounding: Grounding, greedy: bool = True
    ) -> list[Walk]:
        """Run the policy from every (source, choice) pair; returns the finished walks."""
        ctx = self._context(question)
        sources = pick_sources(self.emb, grounding.question_nodes, grounding.choice_nodes, ctx,
                                self.config.max_sources)
        walks = new_walks(self.emb, self.config, sources, grounding.choice_nodes, ctx)
        with torch.no_grad():
            rollout(self.env, self.policy, walks, greedy=greedy, generator=None)
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


def rollout(
    env: Environment,
    policy: PathPolicy,
    walks: Sequence[Walk],
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


