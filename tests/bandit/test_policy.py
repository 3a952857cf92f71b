"""Every bandit policy of kgwise speaks :class:`kgwise.bandit.Policy`'s verbs (river's policy checks, run over
each): ``pull`` returns one of its arms, ``update`` changes its state, a state round trip (JSON, and a file)
pulls exactly as the original, and a seeded policy is deterministic."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from kgwise.bandit import BetaThompson, LinUCB, Policy
from kgwise.errors import ConfigError
from kgwise.inject.bandit import ARMS, BanditConfig, PromptBandit
from kgwise.route.arms import ArmSpec
from kgwise.route.coke import CokeConfig, CokeRouter

DIM = 4
ROUTER_ARMS = (ArmSpec("gnn", "KGM", 0.6), ArmSpec("small", "LLM", 0.7), ArmSpec("big", "LLM", 0.9))
ROUTER_COSTS = {"gnn": 0.0, "small": 0.01, "big": 0.1}


@dataclass(frozen=True)
class Case:
    """How to drive one policy: make it with a seed, draw a context, pull, update (``extra``: what the
    policy asks beyond ``(arm, context, reward)``)."""

    make: Callable[[int], Policy[Any]]
    context: Callable[[np.random.Generator], Any]
    pull_args: tuple[Any, ...] = ()
    update_extra: Callable[[Any], tuple[Any, ...]] = lambda arm: ()
    file: str = "policy.json"


CASES = {
    "LinUCB": Case(lambda s: LinUCB(["a", "b", "c"], DIM, alpha=1.5, seed=s),
                   lambda rng: rng.normal(size=DIM)),
    "LinUCB-float32-int-arms": Case(lambda s: LinUCB(3, DIM, seed=s, precision="float32"),
                                    lambda rng: rng.normal(size=DIM)),
    "BetaThompson": Case(lambda s: BetaThompson(["KGM", "LLM"], seed=s), lambda rng: None),
    "PromptBandit": Case(lambda s: PromptBandit(DIM, ARMS, BanditConfig(seed=s, explore_at_test=True)),
                         lambda rng: rng.normal(size=DIM), file="bandit.npz"),
    "CokeRouter": Case(lambda s: CokeRouter(ROUTER_ARMS, DIM, budget=5.0, seed=s),
                       lambda rng: rng.normal(size=DIM), (ROUTER_COSTS,),
                       lambda arm: (ROUTER_COSTS[arm],)),
    "CokeRouter-price-paced": Case(
        lambda s: CokeRouter(ROUTER_ARMS, DIM, budget=1.0, seed=s, horizon=40,
                             config=CokeConfig(pacing="price", price_window=8)),
        lambda rng: rng.normal(size=DIM), (ROUTER_COSTS,), lambda arm: (ROUTER_COSTS[arm],)),
}


def _run(case: Case, policy: Policy[Any], steps: int, seed: int) -> list[Any]:
    """``steps`` rounds of pull and update (rewards drawn with ``seed``); the arms pulled."""
    rng = np.random.default_rng(seed)
    pulled = []
    for _ in range(steps):
        x = case.context(rng)
        arm = policy.pull(x, *case.pull_args)
        pulled.append(arm)
        if arm is not None:
            policy.update(arm, x, float(rng.random() < 0.5), *case.update_extra(arm))
    return pulled


def _state(policy: Policy[Any]) -> str:
    return json.dumps(policy.state_dict(), sort_keys=True, default=lambda a: np.asarray(a).tolist())


@pytest.fixture(params=list(CASES), ids=list(CASES))
def case(request: pytest.FixtureRequest) -> Case:
    return CASES[request.param]


def test_pull_returns_one_of_the_arms(case: Case) -> None:
    policy = case.make(0)
    assert len(policy.arms) == policy.n_arms > 1
    pulled = _run(case, policy, 30, seed=1)
    assert set(pulled) <= set(policy.arms) and pulled[0] is not None
    assert all(policy.index(a) == policy.arms.index(a) for a in policy.arms)


def test_update_changes_the_state_and_refuses_an_unknown_arm(case: Case) -> None:
    policy = case.make(0)
    rng = np.random.default_rng(2)
    x = case.context(rng)
    arm = policy.pull(x, *case.pull_args)
    before = _state(policy)
    policy.update(arm, x, 1.0, *case.update_extra(arm))
    assert _state(policy) != before
    with pytest.raises(ConfigError, match="arm"):
        policy.update("no such arm", x, 1.0, *case.update_extra(arm))


def test_a_state_round_trip_pulls_as_the_original(case: Case, tmp_path: Path) -> None:
    policy = case.make(3)
    _run(case, policy, 25, seed=4)
    cls = type(policy)
    twin = cls.from_state_dict(json.loads(json.dumps(policy.state_dict())))
    saved = cls.load(policy.save(tmp_path / case.file))
    assert twin.arms == saved.arms == policy.arms
    expected = _run(case, policy, 25, seed=5)
    assert _run(case, twin, 25, seed=5) == expected
    assert _run(case, saved, 25, seed=5) == expected
    assert _state(twin) == _state(policy)


def test_a_seeded_policy_is_deterministic(case: Case) -> None:
    first, second = case.make(7), case.make(7)
    assert _run(case, first, 40, seed=8) == _run(case, second, 40, seed=8)
    assert _state(first) == _state(second)


def test_a_state_of_another_policy_is_refused(case: Case) -> None:
    policy = case.make(0)
    other = LinUCB(2, DIM) if not isinstance(policy, LinUCB) else BetaThompson(2)
    with pytest.raises(ConfigError, match="not a"):
        type(policy).from_state_dict(other.state_dict())
