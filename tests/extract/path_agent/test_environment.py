"""P_RL's MDP (KnowGPT §3.1): pruned candidate actions, the rewards of Eq. 2–4, the ``ahead`` bit, shaping."""

from __future__ import annotations

import numpy as np
import pytest

from kgwise.embed import MiniLM
from kgwise.extract.path_agent import NodeEmbeddings, PathAgentConfig
from kgwise.extract.path_agent.environment import Environment, new_walks
from kgwise.kg import CSRGraph
from kgwise.types import Question


def test_candidates_are_pruned_unvisited_and_keep_adjacent_targets(
    small: tuple[CSRGraph, tuple[Question, ...]], encoder: MiniLM
) -> None:
    kg, _ = small
    cfg = PathAgentConfig(max_actions=6, prefilter=12)
    emb = NodeEmbeddings(kg, encoder, cache=False)
    env = Environment(kg, emb, cfg)
    hub = int(np.argmax(kg.degree(np.arange(kg.num_nodes))))
    assert kg.degree([hub])[0] > cfg.max_actions
    neighbours = kg.neighbors([hub])
    target = int(neighbours[-1])
    ctx = encoder.encode(["a question"])[0]
    walk = new_walks(emb, cfg, [hub], [(target,)], ctx)[0]
    cand = env.candidates(walk)
    assert len(cand.nodes) <= cfg.max_actions
    assert target in cand.nodes.tolist()  # an adjacent target is always an action
    assert hub not in cand.nodes.tolist()
    assert set(cand.nodes.tolist()) <= set(neighbours.tolist())
    # each action is a real edge in the stated direction
    for n, r, inv in zip(cand.nodes.tolist(), cand.relations.tolist(), cand.inverse.tolist(), strict=True):
        rels, others = kg.in_edges(hub) if inv else kg.out_edges(hub)
        assert any(int(a) == r and int(b) == n for a, b in zip(rels, others, strict=True))


def test_rewards_follow_eq_2_to_4(small: tuple[CSRGraph, tuple[Question, ...]], encoder: MiniLM) -> None:
    kg, _ = small
    cfg = PathAgentConfig(max_steps=2, lambda_reach=2.0, lambda_context=0.5, lambda_concise=3.0,
                          shape_reach=False)
    emb = NodeEmbeddings(kg, encoder, cache=False)
    env = Environment(kg, emb, cfg)
    hub = int(np.argmax(kg.degree(np.arange(kg.num_nodes))))
    ctx = encoder.encode(["a question"])[0]
    target = int(kg.neighbors([hub])[0])
    walk = new_walks(emb, cfg, [hub], [(target,)], ctx)[0]
    cand = env.candidates(walk)
    r = env.move(walk, cand, cand.nodes.tolist().index(target))
    assert walk.reached and walk.done
    step = r - (cfg.lambda_reach + cfg.lambda_concise / 1)  # reach +λ1 (Eq. 2), λ3·1/|P| (Eq. 4)
    assert abs(step) <= cfg.lambda_context / cfg.max_steps + 1e-6  # λ2·cos/K (Eq. 3)
    # a walk that never meets its target ends after K steps with −λ1
    distant = int(np.setdiff1d(np.arange(kg.num_nodes), kg.neighbors([hub]))[-1])
    far = new_walks(emb, cfg, [hub], [(distant,)], ctx)[0]
    total = 0.0
    while not far.done:
        c = env.candidates(far)
        if not len(c.nodes):
            break
        total += env.move(far, c, 0)
    if far.done and not far.reached:
        assert len(far.relations) == cfg.max_steps
        assert total <= -cfg.lambda_reach + cfg.lambda_context + 1e-6


def _hops_to(kg: CSRGraph, targets: set[int], limit: int) -> dict[int, int]:
    """Breadth-first distance (either edge direction) of every node within ``limit`` hops of ``targets``."""
    dist = dict.fromkeys(targets, 0)
    frontier = sorted(targets)
    for k in range(1, limit + 1):
        frontier = [int(v) for v in kg.neighbors(frontier) if int(v) not in dist] if frontier else []
        dist.update(dict.fromkeys(frontier, k))
    return dist


def test_ahead_marks_targets_and_the_nodes_on_the_way(
    small: tuple[CSRGraph, tuple[Question, ...]], encoder: MiniLM
) -> None:
    kg, _ = small
    cfg = PathAgentConfig(max_steps=3, max_actions=24, prefilter=64)
    emb = NodeEmbeddings(kg, encoder, cache=False)
    env = Environment(kg, emb, cfg)
    ctx = encoder.encode(["a question"])[0]
    rng = np.random.default_rng(0)
    checked = marked = 0
    for _ in range(40):
        source, target = (int(x) for x in rng.choice(kg.num_nodes, size=2, replace=False))
        dist = _hops_to(kg, {target}, cfg.max_steps)
        walk = new_walks(emb, cfg, [source], [(target,)], ctx)[0]
        assert env.reachable(walk) == (dist.get(source, 99) <= cfg.max_steps)
        while not walk.done:
            cand = env.candidates(walk)
            if not len(cand.nodes):
                break
            remaining = cfg.max_steps - len(walk.relations)
            for n, a in zip(cand.nodes.tolist(), cand.ahead.tolist(), strict=True):
                assert a == (dist.get(n, 99) <= remaining - 1), (n, remaining)
                checked += 1
                marked += a
            env.move(walk, cand, int(rng.integers(len(cand.nodes))))
    assert checked > 100 and 0 < marked < checked


def test_reach_shaping_moves_credit_but_not_a_walks_total(
    small: tuple[CSRGraph, tuple[Question, ...]], encoder: MiniLM
) -> None:
    kg, _ = small
    emb = NodeEmbeddings(kg, encoder, cache=False)
    ctx = encoder.encode(["a question"])[0]
    rng = np.random.default_rng(1)
    envs = {shape: Environment(kg, emb, PathAgentConfig(lambda_reach=2.0, shape_reach=shape))
            for shape in (True, False)}
    left_the_way = 0
    for _ in range(60):
        source, target = (int(x) for x in rng.choice(kg.num_nodes, size=2, replace=False))
        walks = {s: new_walks(emb, e.config, [source], [(target,)], ctx)[0] for s, e in envs.items()}
        if not envs[True].reachable(walks[True]):
            continue
        rewards: dict[bool, list[float]] = {True: [], False: []}
        while not walks[True].done:
            cands = {s: envs[s].candidates(w) for s, w in walks.items()}
            if not len(cands[True].nodes):
                rewards[True][-1] += envs[True].terminal(walks[True])
                rewards[False][-1] += envs[False].terminal(walks[False])
                break
            a = int(rng.integers(len(cands[True].nodes)))
            was_ahead = walks[True].ahead
            for s in envs:
                rewards[s].append(envs[s].move(walks[s], cands[s], a))
            step = rewards[True][-1] - rewards[False][-1]
            if not walks[True].done:  # λ1·(Φ(s') − Φ(s)): −λ1 exactly when the step leaves the way
                assert step == pytest.approx(2.0 * (walks[True].ahead - was_ahead))
                left_the_way += was_ahead and not walks[True].ahead
        # the shaping terms telescope to −λ1·Φ(s_0) = −λ1 whatever the walk did
        assert sum(rewards[True]) - sum(rewards[False]) == pytest.approx(-2.0)
    assert left_the_way > 0
