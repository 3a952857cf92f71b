"""Coke router: budget never exceeded (adversarial costs), save/load → identical decisions, Eq. 2 parts,
named arms (costs by name or in arm order), state files of the first format."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from kgwise.errors import ConfigError, DataError
from kgwise.route.arms import ArmSpec, Cluster
from kgwise.route.coke import BudgetExceededError, CokeConfig, CokeRouter, cluster_priors

ARMS = (ArmSpec("kgm", "KGM", 0.7), ArmSpec("small", "LLM", 0.6), ArmSpec("big", "LLM", 0.9))
COL = {a.name: j for j, a in enumerate(ARMS)}
DATA = Path(__file__).parent / "data"


def _router(budget: float = math.inf, seed: int = 0, horizon: int | None = None, **kw: object) -> CokeRouter:
    return CokeRouter(ARMS, 4, budget=budget, config=CokeConfig(**kw), seed=seed,  # type: ignore[arg-type]
                      horizon=horizon)


@settings(max_examples=60, deadline=None)
@given(
    budget=st.floats(0.0, 50.0),
    steps=st.lists(
        st.tuples(
            st.lists(st.floats(0.0, 20.0), min_size=3, max_size=3),
            st.booleans(),
            st.lists(st.floats(-1, 1), min_size=4, max_size=4),
        ),
        max_size=60,
    ),
    seed=st.integers(0, 1000),
    pinned=st.sampled_from([None, *COL]),
)
def test_budget_is_never_exceeded(budget: float, steps: list, seed: int, pinned: str | None) -> None:
    """Whatever the costs and outcomes, with or without a pinned arm."""
    router = _router(budget, seed)
    router.pin(pinned)
    for costs, right, x in steps:
        arm = router.pull(np.array(x), costs)
        if arm is None:
            assert all(router.spent + c > budget for c in costs)
            continue
        assert router.spent + costs[COL[arm]] <= budget
        if pinned is not None and router.spent + costs[COL[pinned]] <= budget:
            assert arm == pinned  # the pinned arm wherever it is affordable
        router.update(arm, np.array(x), float(right), costs[COL[arm]])
        assert router.spent <= budget


@settings(max_examples=60, deadline=None)
@given(
    budget=st.floats(0.0, 50.0),
    horizon=st.integers(1, 40),
    steps=st.lists(
        st.tuples(st.lists(st.floats(0.0, 20.0), min_size=3, max_size=3), st.booleans()), max_size=60
    ),
    seed=st.integers(0, 1000),
)
# found by hypothesis: a vanishing budget overflowed the price to ∞, every value became −∞ or NaN, and the
# tie among them let an arm the allowance did not cover be picked
@example(budget=2.225073858507e-311, horizon=1, steps=[([1.0, 1.0, 5e-324], False), ([0.0, 1.0, 0.0], False)],
         seed=0)
@pytest.mark.parametrize("pacing", ["allowance", "price"])
def test_paced_budget_is_never_ahead_of_schedule(budget: float, horizon: int, steps: list, seed: int,
                                                 pacing: str) -> None:
    """With a horizon N, after the k-th question at most B·min(1, k/N) has been spent, also with a price."""
    router = _router(budget, seed, horizon=horizon, pacing=pacing, price_window=7)
    x = np.ones(4)
    for k, (costs, right) in enumerate(steps, start=1):
        allowed = budget * min(1.0, k / horizon)
        arm = router.pull(x, costs)
        if arm is None:
            assert all(router.spent + c > allowed for c in costs)
            continue
        router.update(arm, x, float(right), costs[COL[arm]])
        assert router.spent <= allowed + 1e-9


def test_pacing_spreads_a_tight_budget() -> None:
    """An expensive arm that an unpaced router can afford at once must wait for the paced allowance."""
    costs = [0.0, 1.0, 5.0]
    paced = _router(10.0, horizon=100)
    assert paced.affordable(costs).tolist() == [True, False, False]  # allowance 0.1 at question 1
    assert _router(10.0).affordable(costs).tolist() == [True, True, True]
    with pytest.raises(ConfigError):
        _router(10.0, horizon=0)


def _gain_stream(pacing: str, n: int = 1000) -> tuple[float, float]:
    """A free KG model right on kind-A questions (70 %), a paid LLM (cost 1) right on all; the budget pays
    for the LLM on 40 % of the questions. Returns the accuracy over the last 400 questions and the share
    of the LLM calls that went to kind A, where the free arm was right already."""
    rng = np.random.default_rng(7)
    router = CokeRouter([ArmSpec("kgm", "KGM", 0.7), ArmSpec("llm", "LLM", 0.9)], 2, budget=0.4 * n,
                        config=CokeConfig(pacing=pacing), seed=0, horizon=n)
    late, wasted, calls = [], 0, 0
    for k in range(n):
        kind_a = rng.random() < 0.7
        x = np.array([1.0, 0.0]) if kind_a else np.array([0.0, 1.0])
        arm = router.pull(x, {"kgm": 0.0, "llm": 1.0})
        assert arm is not None
        right = arm == "llm" or kind_a
        router.update(arm, x, float(right), float(arm == "llm"))
        if arm == "llm":
            router.observe("kgm", x, float(kind_a))  # the free model answered as well
            calls += 1
            wasted += kind_a
        if k >= n - 400:
            late.append(right)
    return float(np.mean(late)), wasted / max(calls, 1)


def test_a_price_keeps_the_budget_for_the_questions_that_need_it() -> None:
    """With a price the LLM calls go to the kind-B questions (every question right late in the stream;
    the budget pays for 40 % and kind B is 30 %, so a quarter of the calls can do no better than kind A);
    the allowance alone spends on whichever question comes while money is left."""
    priced, priced_waste = _gain_stream("price")
    allowance, allowance_waste = _gain_stream("allowance")
    assert priced > 0.97 and priced_waste < 0.3
    assert allowance < priced - 0.05 and allowance_waste > 0.5


def test_observe_learns_without_spending() -> None:
    router = _router(budget=5.0)
    x = np.ones(4) / 2
    before = router.thompson.alpha.copy(), router.linucb.expected(x).copy()
    router.observe("kgm", x, 1.0)
    assert router.thompson.alpha[0] == before[0][0] + 1 and router.linucb.expected(x)[0] > before[1][0]
    assert router.spent == 0.0 and router.pulls.sum() == 0 and router.reserved == 0.0
    with pytest.raises(ConfigError, match="reward"):
        router.observe("kgm", x, 2.0)
    with pytest.raises(ConfigError, match="arm names"):
        router.observe("gpt-5", x, 1.0)
    with pytest.raises(ConfigError, match="arm names"):
        router.observe(0, x, 1.0)  # type: ignore[arg-type]  # a position is not a name


@pytest.mark.parametrize("decomposed", [False, True])
def test_warm_start_is_observe_per_graded_outcome(decomposed: bool) -> None:
    rng = np.random.default_rng(3)
    X = rng.normal(size=(6, 4))
    R = (rng.random((6, 3)) < 0.6).astype(float)
    R[1, 2] = R[4, 0] = np.nan  # not graded
    warm, by_hand = _router(budget=5.0, decomposed_reward=decomposed), _router(
        budget=5.0, decomposed_reward=decomposed)
    assert warm.warm_start(X, R) == 16
    for i in range(6):
        for j in range(3):
            if not np.isnan(R[i, j]):
                by_hand.observe(ARMS[j].name, X[i], R[i, j])
    assert np.array_equal(warm.thompson.alpha, by_hand.thompson.alpha)
    assert np.array_equal(warm.thompson.beta, by_hand.thompson.beta)
    assert np.allclose(warm.linucb.expected(X[0]), by_hand.linucb.expected(X[0]))
    assert warm.spent == 0.0 and warm.pulls.sum() == 0
    for bad, match in ((R[:, :2], r"\(6, 3\)"), (R * 2, r"\[0, 1\]")):
        with pytest.raises(ConfigError, match=match):
            warm.warm_start(X, bad)
    with pytest.raises(ConfigError, match=r"\(questions, 4\)"):
        warm.warm_start(X[:, :3], R)


def test_price_pacing_needs_a_horizon_and_a_known_name() -> None:
    with pytest.raises(ConfigError, match="horizon"):
        _router(10.0, pacing="price")
    with pytest.raises(ConfigError, match="pacing"):
        CokeConfig(pacing="fast")
    with pytest.raises(ConfigError, match="price_window"):
        CokeConfig(price_window=0)


def test_unaffordable_update_raises() -> None:
    router = _router(budget=1.0)
    with pytest.raises(BudgetExceededError):
        router.update("kgm", np.ones(4), 1.0, 2.0)


@pytest.mark.parametrize("pacing", ["allowance", "price"])
def test_save_load_restores_identical_decisions(tmp_path: Path, pacing: str) -> None:
    rng = np.random.default_rng(0)
    router = _router(budget=15.0, seed=3, horizon=60, pacing=pacing, price_window=16)
    for _ in range(30):
        x, costs = rng.normal(size=4), rng.random(3)
        a = router.pull(x, costs)
        if a is not None:
            router.update(a, x, float(rng.random() < 0.6), float(costs[COL[a]]))
    assert (router.price > 0) == (pacing == "price")  # the price binds: 0.25 a question for costs up to 1
    router.save(tmp_path / "router.json")
    clone = CokeRouter.load(tmp_path / "router.json")
    assert clone.horizon == 60
    for _ in range(50):
        x, costs = rng.normal(size=4), rng.random(3)
        a, b = router.pull(x, costs), clone.pull(x, costs)
        assert a == b
        if a is None or b is None:
            continue
        y = float(rng.random() < 0.6)
        router.update(a, x, y, float(costs[COL[a]]))
        clone.update(b, x, y, float(costs[COL[a]]))
    assert clone.spent == router.spent


def test_cost_regret_is_failure_share_of_spending() -> None:
    router = _router()
    x = np.ones(4) / 2
    router.update("big", x, 0.0, 3.0)
    router.update("big", x, 1.0, 1.0)
    router.update("kgm", x, 0.0, 0.0)  # a free arm never regrets spending
    np.testing.assert_allclose(router.cost_regret(), [0.0, 0.0, 0.75])


def test_priors_are_cluster_means_of_reported_accuracy() -> None:
    pri = cluster_priors(["KGM", "LLM", "LLM"], [0.7, 0.6, 0.9], strength=10)
    assert pri[0] == pytest.approx((7.0, 3.0))
    assert pri[1] == pytest.approx((7.5, 2.5))
    assert cluster_priors(["LLM"], [None], 10) == [(1.0, 1.0), (1.0, 1.0)]


def test_learns_the_right_arm_per_context() -> None:
    """Arm 1 is right on contexts of kind A, arm 2 on kind B: Coke must learn to route by context."""
    rng = np.random.default_rng(1)
    router = CokeRouter(ARMS, 2, config=CokeConfig(delta=0.9, use_cluster=False), seed=0)
    late = []
    for k in range(600):
        kind = int(rng.integers(2))
        x = np.array([1.0, 0.0]) if kind == 0 else np.array([0.0, 1.0])
        a = router.pull(x, [0.0, 0.0, 0.0])
        assert a is not None
        right = (a == "small" and kind == 0) or (a == "big" and kind == 1)
        router.update(a, x, float(right), 0.0)
        if k >= 400:
            late.append(right)
    assert np.mean(late) > 0.9


def test_ablation_switches_and_errors() -> None:
    x = np.ones(4)
    r = _router(use_context=False, use_cluster=False, lam=0.0)
    assert np.all(r.expectations(x) == 0.0)
    with pytest.raises(ConfigError):
        CokeConfig(lam=-1.0)
    with pytest.raises(ConfigError, match="unique"):
        CokeRouter([ArmSpec("a", "KGM"), ArmSpec("a", "LLM")], 4)
    with pytest.raises(ConfigError, match="cluster"):
        CokeRouter([ArmSpec("a", "GPU")], 4)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="sequence of arms"):
        CokeRouter("ab", 4)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="each arm needs a name"):
        CokeRouter(["a", "b"], 4)  # type: ignore[list-item]  # the parallel lists of old
    with pytest.raises(ConfigError, match="at least one arm"):
        CokeRouter([], 4)
    with pytest.raises(ConfigError):
        _router().pull(x, [1.0, -1.0, 0.0])


@settings(max_examples=60, deadline=None)
@given(
    budget=st.floats(0.0, 20.0),
    steps=st.lists(st.tuples(st.lists(st.floats(0.0, 5.0), min_size=3, max_size=3),
                             st.sampled_from(["pull", "update", "cancel"]), st.floats(0.0, 1.0)),
                   max_size=60),
    seed=st.integers(0, 1000),
)
def test_selections_awaiting_outcomes_never_overspend_together(budget: float, steps: list, seed: int) -> None:
    """Interleaved selections, outcomes (at most the bound) and cancellations: what is spent plus what is
    held never exceeds the budget, and every settled cost is recorded."""
    router = _router(budget, seed)
    x = np.ones(4)
    waiting: list[tuple[str, float]] = []
    recorded = 0.0
    for costs, action, share in steps:
        if action == "pull" or not waiting:
            arm = router.pull(x, costs)
            if arm is not None:
                waiting.append((arm, costs[COL[arm]]))
        else:
            arm, bound = waiting.pop(int(share * (len(waiting) - 1)))
            if action == "update":
                router.update(arm, x, 1.0, bound * share, bound=bound)
                recorded += bound * share
            else:
                router.cancel(arm, bound)
        assert router.spent + router.reserved <= budget + 1e-9
        assert router.reserved == pytest.approx(sum(b for _, b in waiting))
    assert router.spent == pytest.approx(recorded) and router.overrun == 0.0


def test_costs_above_their_bound_are_refused_unless_allowed_and_bad_arms_named() -> None:
    router = _router(budget=1.0)
    x = np.ones(4)
    arm = router.pull(x, [0.5, 0.5, 0.5])
    assert arm is not None and router.remaining == pytest.approx(0.5)
    with pytest.raises(BudgetExceededError, match="above the bound"):
        router.update(arm, x, 1.0, 0.7)
    assert router.spent == 0.0 and router.reserved == pytest.approx(0.5)  # nothing recorded, still held
    router.update(arm, x, 1.0, 0.7, allow_overrun=True)  # spent beyond its bound: recorded when allowed
    assert router.spent == pytest.approx(0.7) and router.overrun == pytest.approx(0.2)
    with pytest.raises(ConfigError, match="no arm was pulled"):
        router.update(None, x, 1.0, 0.0)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="as returned by pull"):
        router.update("a", x, 1.0, 0.0)
    with pytest.raises(ConfigError, match="no selection awaiting an outcome"):
        router.cancel("kgm")


def test_costs_by_name_are_costs_in_arm_order() -> None:
    """A mapping of costs by arm name pulls as the same costs in arm order; a mapping that misses or adds
    an arm is refused, naming it."""
    by_name, in_order = _router(budget=3.0, seed=5), _router(budget=3.0, seed=5)
    rng = np.random.default_rng(2)
    for _ in range(20):
        x, costs = rng.normal(size=4), rng.random(3)
        a = by_name.pull(x, {"big": costs[2], "kgm": costs[0], "small": costs[1]})
        assert a == in_order.pull(x, costs)
        if a is not None:
            by_name.update(a, x, 1.0, float(costs[COL[a]]))
            in_order.update(a, x, 1.0, float(costs[COL[a]]))
    with pytest.raises(ConfigError, match="missing big"):
        by_name.pull(np.ones(4), {"kgm": 0.0, "small": 0.1})
    with pytest.raises(ConfigError, match="unknown gpt"):
        by_name.pull(np.ones(4), {"kgm": 0.0, "small": 0.1, "big": 1.0, "gpt": 1.0})


def test_takes_any_arm_record_and_returns_their_names() -> None:
    """Any arm record with a name, a cluster and a reported accuracy will do (here a frozen dataclass)."""

    @dataclass(frozen=True)
    class Record:
        name: str
        cluster: Cluster
        reported_accuracy: float | None = None
        per_call: float = 0.0

    free = Record("ReaRev", "KGM", reported_accuracy=0.7)
    paid = Record("gpt", "LLM", per_call=1.0)
    router = CokeRouter([free, paid], 2, budget=1.0)
    assert router.arms == ("ReaRev", "gpt") and router.reported_accuracy == [0.7, None]
    assert router.pull(np.ones(2), {"ReaRev": 2.0, "gpt": 1.0}) == "gpt"  # the only affordable one


def test_loads_a_state_file_of_the_first_format(tmp_path: Path) -> None:
    """``router_v1.json`` was written by the router before arms were named records (parallel names,
    clusters and reported accuracies; a decision waiting on arm 1): it loads, and pulls what that router
    pulled next (recorded then). Saved again it is in the current format; a newer version is refused."""
    state = json.loads((DATA / "router_v1.json").read_text())
    state.pop("pending")
    router = CokeRouter.from_state_dict(state)
    assert router.arms == ("gnn", "gpt") and router.reported_accuracy == [0.6, None]
    assert router.holds == [[], [0.3]] and router.spent == 0.5
    X = np.random.default_rng(5).normal(size=(8, 3))
    assert [router.pull(x, [0.0, 0.05]) for x in X] == ["gnn", "gnn", "gnn", "gnn", "gpt", "gnn", "gpt",
                                                         "gnn"]
    router.save(tmp_path / "v2.json")
    saved = json.loads((tmp_path / "v2.json").read_text())
    assert saved["version"] == 2 and saved["arms"][0] == {"name": "gnn", "cluster": "KGM",
                                                           "reported_accuracy": 0.6}
    assert CokeRouter.load(tmp_path / "v2.json").state_dict() == saved
    (tmp_path / "v3.json").write_text(json.dumps(saved | {"version": 3}))
    with pytest.raises(DataError, match="state version 3"):
        CokeRouter.load(tmp_path / "v3.json")


@pytest.mark.parametrize("pinned", [None, "small"])
@pytest.mark.parametrize("pacing", ["allowance", "price"])
def test_would_pull_picks_what_pull_would_and_changes_nothing(pacing: str, pinned: str | None) -> None:
    """With the cluster posteriors sharp (θ draws all but fixed), ``would_pull`` on many contexts equals a
    ``pull`` of each on a copy of the router, affordability, availability and a pinned arm included."""
    rng = np.random.default_rng(3)
    arms = [ArmSpec("kgm", "KGM"), ArmSpec("small", "LLM"), ArmSpec("big", "LLM")]
    cfg = CokeConfig(lam=0.5, pacing=pacing, price_window=50)
    router = CokeRouter(arms, 6, budget=3.0, config=cfg, seed=1, horizon=40)
    router.thompson.alpha *= 1e7
    router.thompson.beta *= 1e7
    for _ in range(25):
        x = rng.normal(size=6)
        arm = router.pull(x, [0.0, 0.05, 0.2])
        if arm is not None:
            router.update(arm, x, float(rng.random() < 0.6), {"kgm": 0.0, "small": 0.05, "big": 0.2}[arm])
    router.pin(pinned)
    Z = rng.normal(size=(60, 6))
    costs = np.tile([0.0, 0.05, 0.2], (60, 1)) * rng.uniform(0.5, 8.0, (60, 1))
    available = rng.random((60, 3)) > 0.2
    available[0] = False  # nothing can answer: no arm
    costs[1] = 5.0  # nothing affordable: no arm
    tracked = router.linucb.track(Z)
    state = router.state_dict()
    got = router.would_pull(tracked, costs, available, np.random.default_rng(0))
    assert router.state_dict() == state  # nothing changed
    want = []
    for z, c, ok in zip(Z, costs, available, strict=True):
        replica = CokeRouter.from_state_dict(state)
        arm = replica.pull(z, c, available=ok)
        want.append(-1 if arm is None else replica.names.index(arm))
    assert got[0] == got[1] == -1 and len(set(got.tolist())) >= 3
    if pinned is not None:  # the pinned arm wherever it can answer and is affordable, Eq. 2 elsewhere
        left = router.allowance(router.questions_seen + 1) - router.spent - router.reserved
        can = available[:, 1] & (costs[:, 1] <= left)
        assert np.all(got[can] == 1) and can.sum() >= 20 and np.any(got[~can] >= 0)
    # a pull under pacing="price" fits the price with the question's own values in its window,
    # would_pull keeps the last price: nearly always the same choice
    agree = float(np.mean(got == np.asarray(want)))
    assert agree >= (0.9 if pacing == "price" else 1.0), agree


def test_a_pinned_arm_answers_wherever_it_can_and_survives_a_save() -> None:
    router = _router(budget=1.0)
    router.pin("small")
    x = np.ones(4)

    def pick(costs: list[float], available: list[bool] | None = None) -> str | None:
        arm = router.pull(x, costs, available=available)
        if arm is not None:
            router.cancel(arm)
        return arm

    assert pick([0.0, 0.1, 0.1]) == "small"
    router.update(router.pull(x, [0.0, 0.1, 0.1]) or "", x, 0.0, 0.1)  # wrong: only a fit unpins
    assert pick([0.0, 0.1, 0.1]) == "small"
    assert pick([0.0, 0.1, 0.1], [True, False, True]) in {"kgm", "big"}  # it cannot answer this one
    assert pick([0.0, 2.0, 0.1]) in {"kgm", "big"}  # nor afford this one
    restored = CokeRouter.from_state_dict(json.loads(json.dumps(router.state_dict())))
    assert restored.pinned == 1 and restored.state_dict()["pinned"] == "small"
    restored.pin(None)
    assert restored.pinned is None and restored.state_dict()["pinned"] is None
    with pytest.raises(ConfigError, match="arm names"):
        router.pin("nope")
