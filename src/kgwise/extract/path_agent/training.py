"""REINFORCE with a learned value baseline (Xiong et al. 2017) for P_RL's policy, resumable from a
checkpoint; no gold answers are used."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path as FilePath
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from kgwise.embed import Encoder
from kgwise.errors import ConfigError
from kgwise.extract.path_agent.agent import rollout
from kgwise.extract.path_agent.config import PathAgentConfig
from kgwise.extract.path_agent.embeddings import NodeEmbeddings, Vectors
from kgwise.extract.path_agent.environment import Environment, Walk, new_walks, pick_sources
from kgwise.extract.path_agent.policy import PathPolicy
from kgwise.files import atomic_path
from kgwise.kg.base import KnowledgeGraph
from kgwise.types import Question

if TYPE_CHECKING:
    from kgwise.kg.grounding import Grounding

__all__ = ["TrainItem", "TrainingLog", "train_path_policy"]


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


def training_walks(
    env: Environment, items: Sequence[TrainItem], contexts: Vectors, order: npt.NDArray[np.int64]
) -> tuple[list[Walk], int]:
    """The reachable walks of the questions ``items[order[0]], items[order[1]], …`` (``contexts``: their
    embeddings), taken until there are ``batch_walks`` of them (or the questions run out), and the number
    of walks looked at."""
    config = env.config
    walks: list[Walk] = []
    seen = 0
    for i in order.tolist():
        g, ctx = items[i][1], contexts[i]
        sources = pick_sources(env.emb, g.question_nodes, g.choice_nodes, ctx, config.max_sources)
        new = new_walks(env.emb, config, sources, g.choice_nodes, ctx)
        seen += len(new)
        walks.extend(w for w in new if env.reachable(w))
        if len(walks) >= config.batch_walks:
            break
    return walks, seen


def reinforce_step(
    env: Environment,
    policy: PathPolicy,
    optimiser: torch.optim.Optimizer,
    walks: list[Walk],
    config: PathAgentConfig,
    generator: torch.Generator,
) -> tuple[float, float, float]:
    """One REINFORCE-with-baseline update on ``walks``; returns their reach rate, mean return and mean
    length."""
    policy.train()
    steps = rollout(env, policy, walks, greedy=False, generator=generator)
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
    env = Environment(kg, embeddings, config)
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
        walks, seen = training_walks(env, usable, contexts, rng.permutation(len(usable)))
        if not walks:
            raise ConfigError(f"train_path_policy: no training question has a choice concept within "
                              f"max_steps = {config.max_steps} steps of its question concepts; "
                              "raise max_steps")
        reach, ret, length = reinforce_step(env, policy, optimiser, walks, config, generator)
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
