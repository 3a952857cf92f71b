"""``RouterAdapter``: the app's view of the Coke router, arms by name."""

from __future__ import annotations

import numpy as np
import pytest

from kgwise.app.config import paced_coke
from kgwise.app.router import RouterAdapter
from kgwise.route.arms import ArmSpec
from kgwise.route.coke import CokeConfig, CokeRouter


def _adapter(config: CokeConfig | None = None, horizon: int | None = None, budget: float = 10.0
             ) -> RouterAdapter:
    arms = [ArmSpec("gnn", "KGM", 0.7), ArmSpec("llm", "LLM", 0.9)]
    return RouterAdapter(CokeRouter(arms, 2, budget=budget, config=config, horizon=horizon))


def test_an_arm_that_cannot_answer_is_not_picked_and_does_not_look_dear() -> None:
    a = _adapter()
    x = np.array([1.0, 0.0])
    first = a.select(x, {"gnn": 0.0, "llm": 1.0})
    assert first is not None
    a.cancel(first, {"gnn": 0.0, "llm": 1.0}[first])
    for _ in range(3):
        assert a.select(x, {"gnn": 0.0, "llm": a.unreachable()}) == "gnn"
        a.cancel("gnn", 0.0)
    # the placeholder bound (budget + 1) never entered llm's mean cost bound: it stays at its one real bound
    assert a.router.cost_seen[1] / a.router.questions_seen == 1.0


def _spend(config: CokeConfig, seed: int, n: int = 300) -> tuple[float, dict[str, int]]:
    """spent/budget and pulls of a router warm-started on 100 graded questions, then run on ``n`` with a
    budget that buys the best arm on half of them: a free KG model (.8), a dear accurate LLM (.92) and a
    dear weak one (.5), which pulls the LLM cluster's mean below the KG model's."""
    acc = {"gnn": 0.8, "llm": 0.92, "weak": 0.5}
    cost = {"gnn": 0.0, "llm": 1.0, "weak": 1.0}
    rng = np.random.default_rng(seed)

    def vec() -> np.ndarray:
        return np.array([1.0, *rng.normal(scale=0.3, size=2)])

    arms = [ArmSpec("gnn", "KGM", None), ArmSpec("llm", "LLM", None), ArmSpec("weak", "LLM", None)]
    a = RouterAdapter(CokeRouter(arms, 3, budget=n * 0.5, config=config, horizon=n, seed=seed))
    a.warm_start(np.array([vec() for _ in range(100)]),
                 {k: [float(rng.random() < p) for _ in range(100)] for k, p in acc.items()})
    for _ in range(n):
        x = vec()
        arm = a.select(x, cost)
        assert arm is not None
        a.update(arm, x, float(rng.random() < acc[arm]), cost[arm], cost[arm])
    return a.spent / a.budget, a.pulls()


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_paced_defaults_spend_a_budget_that_buys_accuracy(seed: int) -> None:
    """The defect of fixed regret: with the paper's fixed cost regret (λ = 1) the router leaves such a budget
    nearly unspent; the pipeline's paced defaults spend it, on the accurate dear arm."""
    old, _ = _spend(CokeConfig(), seed)
    new, pulls = _spend(paced_coke(CokeConfig()), seed)
    assert old < 0.1
    assert new >= 0.9 and pulls["llm"] > pulls["weak"]
