"""P_RL (KnowGPT §3.1): environment, rewards (Eq. 2–4), pruning, persistence, and learning on real data."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import numpy as np
import pytest
import torch

from kgwise.embed import MiniLM
from kgwise.errors import ConfigError, DataError
from kgwise.extract.path_agent import (
    NodeEmbeddings,
    PathAgent,
    PathAgentConfig,
    PathPolicy,
    _Environment,
    _new_walks,
    train_path_policy,
)
from kgwise.kg import CSRGraph
from kgwise.kg.grounding import Grounder, Grounding
from kgwise.types import Choice, Question


@cache
def _small_real_graph(data: Path) -> tuple[CSRGraph, tuple[Question, ...]]:
    """The union of the P_sub subgraphs of 30 real MedQA questions in the DDB graph, as its own graph."""
    from kgwise.datasets import load
    from kgwise.extract import SubgraphConfig, SubgraphExtractor
    from kgwise.kg.loaders import load_ddb

    kg = load_ddb(data / "ddb")
    qs = load("medqa", "test", data)[:30]
    grounder = Grounder(kg)
    psub = SubgraphExtractor(kg, SubgraphConfig(max_nodes=60))
    nodes: set[int] = set()
    for q in qs:
        nodes.update(psub.extract(q, grounder.ground(q)).nodes)
    keep = np.array(sorted(nodes))
    h, r, t = kg.edges_among(keep)
    new_id = {int(v): i for i, v in enumerate(keep.tolist())}
    heads = [new_id[int(x)] for x in h]
    tails = [new_id[int(x)] for x in t]
    small = CSRGraph.from_arrays([kg.label(int(v)) for v in keep], list(kg.relations), heads, r, tails,
                                 name="ddb-small")
    return small, tuple(qs)


@pytest.fixture(scope="module")
def small(data_dir: Path) -> tuple[CSRGraph, tuple[Question, ...]]:
    return _small_real_graph(data_dir)


@pytest.fixture(scope="module")
def encoder() -> MiniLM:
    return MiniLM()


def _items(kg: CSRGraph, qs: tuple[Question, ...]) -> list[tuple[Question, Grounding]]:
    g = Grounder(kg)
    return [(q, g.ground(q)) for q in qs]


def test_config_validates() -> None:
    with pytest.raises(ConfigError):
        PathAgentConfig(max_steps=0)
    with pytest.raises(ConfigError):
        PathAgentConfig(max_actions=10, prefilter=5)
    assert PathAgentConfig().lambda_reach == PathAgentConfig().lambda_context == 1.0


def test_candidates_are_pruned_unvisited_and_keep_adjacent_targets(
    small: tuple[CSRGraph, tuple[Question, ...]], encoder: MiniLM
) -> None:
    kg, _ = small
    cfg = PathAgentConfig(max_actions=6, prefilter=12)
    emb = NodeEmbeddings(kg, encoder, cache=False)
    env = _Environment(kg, emb, cfg)
    hub = int(np.argmax(kg.degree(np.arange(kg.num_nodes))))
    assert kg.degree([hub])[0] > cfg.max_actions
    neighbours = kg.neighbors([hub])
    target = int(neighbours[-1])
    ctx = encoder.encode(["a question"])[0]
    walk = _new_walks(emb, cfg, [hub], [(target,)], ctx)[0]
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
    env = _Environment(kg, emb, cfg)
    hub = int(np.argmax(kg.degree(np.arange(kg.num_nodes))))
    ctx = encoder.encode(["a question"])[0]
    target = int(kg.neighbors([hub])[0])
    walk = _new_walks(emb, cfg, [hub], [(target,)], ctx)[0]
    cand = env.candidates(walk)
    r = env.move(walk, cand, cand.nodes.tolist().index(target))
    assert walk.reached and walk.done
    step = r - (cfg.lambda_reach + cfg.lambda_concise / 1)  # reach +λ1 (Eq. 2), λ3·1/|P| (Eq. 4)
    assert abs(step) <= cfg.lambda_context / cfg.max_steps + 1e-6  # λ2·cos/K (Eq. 3)
    # a walk that never meets its target ends after K steps with −λ1
    distant = int(np.setdiff1d(np.arange(kg.num_nodes), kg.neighbors([hub]))[-1])
    far = _new_walks(emb, cfg, [hub], [(distant,)], ctx)[0]
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
    env = _Environment(kg, emb, cfg)
    ctx = encoder.encode(["a question"])[0]
    rng = np.random.default_rng(0)
    checked = marked = 0
    for _ in range(40):
        source, target = (int(x) for x in rng.choice(kg.num_nodes, size=2, replace=False))
        dist = _hops_to(kg, {target}, cfg.max_steps)
        walk = _new_walks(emb, cfg, [source], [(target,)], ctx)[0]
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
    envs = {shape: _Environment(kg, emb, PathAgentConfig(lambda_reach=2.0, shape_reach=shape))
            for shape in (True, False)}
    left_the_way = 0
    for _ in range(60):
        source, target = (int(x) for x in rng.choice(kg.num_nodes, size=2, replace=False))
        walks = {s: _new_walks(emb, e.config, [source], [(target,)], ctx)[0] for s, e in envs.items()}
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


def test_training_needs_a_reachable_choice(encoder: MiniLM) -> None:
    kg = CSRGraph.from_arrays(["aspirin", "pain", "insulin", "diabetes"], ["treats"], [0, 2], [0, 0], [1, 3])
    q = Question("q1", "does aspirin help?", choices=(Choice("A", "diabetes"),))
    with pytest.raises(ConfigError, match="no training question has a choice concept within max_steps = 3"):
        train_path_policy(kg, [(q, Grounding((0,), ((3,),)))], iterations=2, progress=False,
                          embeddings=NodeEmbeddings(kg, encoder, cache=False))


def test_policy_save_load_round_trip(tmp_path: Path) -> None:
    torch.manual_seed(0)
    policy = PathPolicy(dim=8, hidden=16)
    with torch.no_grad():
        policy.scalar_weights.fill_(0.7)
    cfg = PathAgentConfig(max_steps=4)
    path = policy.save(tmp_path / "p.pt", cfg, {"reach": 0.5})
    loaded, cfg2, meta = PathPolicy.load(path)
    assert cfg2 == cfg and meta == {"reach": 0.5}
    s, a, m = torch.randn(3, 16), torch.randn(3, 5, 19), torch.ones(3, 5, dtype=torch.bool)
    assert torch.allclose(policy(s, a, m)[0], loaded(s, a, m)[0])
    with pytest.raises(DataError, match="not found"):
        PathPolicy.load(tmp_path / "missing.pt")
    blob = torch.load(path, weights_only=True)
    del blob["scalars"]  # a file of a kgwise before the 'ahead' action feature
    torch.save(blob, tmp_path / "old.pt")
    with pytest.raises(DataError, match=r"^\S*old\.pt: a policy of an older kgwise .* train it again"):
        PathPolicy.load(tmp_path / "old.pt")
    torch.save([1, 2], tmp_path / "list.pt")
    with pytest.raises(DataError, match=r"list\.pt: not a path-agent policy file: it holds a list"):
        PathPolicy.load(tmp_path / "list.pt")
    torch.save({"state_dict": {}, "optimiser": {}, "iteration": 3}, tmp_path / "p.ckpt")
    with pytest.raises(DataError, match=r"p\.ckpt: not a path-agent policy file: a training checkpoint"):
        PathPolicy.load(tmp_path / "p.ckpt")
    (tmp_path / "bad.pt").write_bytes(b"not a torch file")
    with pytest.raises(DataError, match=r"bad\.pt: not a path-agent policy file"):
        PathPolicy.load(tmp_path / "bad.pt")
    (tmp_path / "text.pt").write_text("aspirin\ttreats\tpain\n")  # torch's unpickler: IndexError
    with pytest.raises(DataError, match=r"text\.pt: not a path-agent policy file: [^\n]*$"):
        PathPolicy.load(tmp_path / "text.pt")


@pytest.mark.slow
def test_agent_learns_to_reach_targets_on_a_small_real_subgraph(
    small: tuple[CSRGraph, tuple[Question, ...]], encoder: MiniLM, tmp_path: Path
) -> None:
    torch.set_num_threads(1)
    kg, qs = small
    items = _items(kg, qs)
    cfg = PathAgentConfig(batch_walks=32, seed=1)
    emb = NodeEmbeddings(kg, encoder, cache=False)
    policy, log = train_path_policy(kg, items, cfg, embeddings=emb, iterations=70, progress=False,
                                    checkpoint=tmp_path / "ckpt.pt")
    first, last = np.mean(log.reach_rate[:15]), np.mean(log.reach_rate[-15:])
    assert last > first + 0.5, (first, last)
    # the trained agent extracts paths that start at a question concept and end at a choice concept
    agent = PathAgent(kg, policy, cfg, embeddings=emb)
    found = 0
    for q, g in items:
        sub = agent.extract(q, g)
        for p in sub.paths:
            found += 1
            assert p.nodes[0] in g.question_nodes
            assert any(p.nodes[-1] in c for c in g.choice_nodes)
            assert 1 <= len(p) <= cfg.max_steps
            for h, r, t in p.edges():
                rels, tails = kg.out_edges(h)
                assert any(int(a) == r and int(b) == t for a, b in zip(rels, tails, strict=True))
        assert set(sub.edges) == {e for p in sub.paths for e in p.edges()}
    assert found > 0
    # resuming from the finished checkpoint trains no further and keeps the log
    _, log2 = train_path_policy(kg, items, cfg, embeddings=emb, iterations=70, progress=False,
                                checkpoint=tmp_path / "ckpt.pt")
    assert log2.reach_rate == log.reach_rate
    # a saved policy loads into an agent that extracts the same subgraph
    policy.save(tmp_path / "policy.pt", cfg)
    again = PathAgent.load(kg, tmp_path / "policy.pt", encoder)
    q, g = items[0]
    assert again.extract(q, g) == agent.extract(q, g)
