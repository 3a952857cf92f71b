"""The price of price-paced Coke (:class:`kgwise.route.price.PriceWindow`) equals, bit for bit, the
bisection that scores every arm of every recent question at every step (the rule as first written, kept
here as the reference): on arbitrary windows (ties, equal and zero costs, NaN values) and along a seeded
router run whose ring wraps."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgwise.errors import ConfigError
from kgwise.route.arms import ArmSpec
from kgwise.route.coke import CokeConfig, CokeRouter
from kgwise.route.price import PriceWindow

Array = npt.NDArray[np.float64]


def _spends(E: Array, C: Array, eta: float) -> float:
    """Every arm of every row: ``mean_r c̄_{r, argmax_a E_ra − η·c̄_ra}``."""
    return float(C[np.arange(len(C)), np.argmax(E - eta * C, axis=1)].mean())


def _price(E: Array, C: Array, per_question: float) -> float:
    """The bisection over ``η`` on :func:`_spends`, step for step."""
    positive = C[C > 0]
    if _spends(E, C, 0.0) <= per_question or positive.size == 0:
        return 0.0
    scale = 1.0 / max(per_question, float(positive.min()), 1e-200)
    lo, hi = 0.0, scale
    while _spends(E, C, hi) > per_question and hi < 1e9 * scale:
        lo, hi = hi, 4 * hi
    for _ in range(20):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _spends(E, C, mid) > per_question else (lo, mid)
    return hi


# a few values drawn often, so that ties of values and of costs are common
_value = st.one_of(st.sampled_from([0.0, 0.25, 0.5, 1.0, -0.5, float("nan")]), st.floats(-3.0, 3.0))
_cost = st.one_of(st.sampled_from([0.0, 0.001, 1.0, 2.0]), st.floats(0.0, 5.0))


@settings(max_examples=200, deadline=None)
@given(
    n_arms=st.integers(1, 6),
    size=st.integers(1, 9),
    data=st.data(),
    etas=st.lists(st.floats(0.0, 1e6), min_size=1, max_size=5),
    per_question=st.floats(0.0, 3.0),
)
def test_spending_and_price_equal_the_full_evaluation(
    n_arms: int, size: int, data: st.DataObject, etas: list[float], per_question: float
) -> None:
    pushed = data.draw(st.integers(1, 2 * size))
    window = PriceWindow(size, n_arms)
    for _ in range(pushed):
        E = np.array(data.draw(st.lists(_value, min_size=n_arms, max_size=n_arms)))
        C = np.array(data.draw(st.lists(_cost, min_size=n_arms, max_size=n_arms)))
        window.push(E, C)
    rows = min(pushed, size)
    E, C = window.values[:rows], window.costs[:rows]
    for eta in [0.0, *etas]:
        assert window.spends(eta) == _spends(E, C, eta)
    assert window.price(per_question) == _price(E, C, per_question)
    reloaded = PriceWindow(size, n_arms)
    reloaded.load(window.values.tolist(), window.costs.tolist(), window.count)
    assert reloaded.price(per_question) == window.price(per_question)


def test_a_seeded_router_run_sets_every_price_as_the_full_bisection() -> None:
    """300 questions, 8 arms, a 40-question ring: before each pull the budget left per question left is
    read; after it, the price the router set equals the reference bisection on the router's own ring."""
    n_arms, dim, steps = 8, 6, 300
    rng = np.random.default_rng(7)
    X = rng.normal(size=(steps, dim))
    rewards = rng.random((steps, n_arms)) < np.linspace(0.3, 0.9, n_arms)
    costs = np.tile(np.linspace(0.0, 1.0, n_arms), (steps, 1)) * rng.uniform(0.5, 1.5, (steps, 1))
    arms = [ArmSpec(f"a{i}", "KGM" if i < 2 else "LLM") for i in range(n_arms)]
    router = CokeRouter(arms, dim, budget=0.3 * steps, horizon=steps, seed=3,
                        config=CokeConfig(pacing="price", price_window=40))
    positive = 0
    for k in range(steps):
        remaining = router.remaining
        name = router.pull(X[k], costs[k])
        assert name is not None
        left = max(steps - router.questions_seen + 1, 1)
        rows = min(router.recent.count, 40)
        expected = _price(router.recent.values[:rows], router.recent.costs[:rows], remaining / left)
        assert router.price == expected, k
        positive += router.price > 0
        a = int(name[1:])
        router.update(name, X[k], float(rewards[k, a]), float(costs[k, a]))
    assert positive > 50  # the price binds on many questions, so the bisection ran


def test_a_malformed_saved_window_is_refused_by_name() -> None:
    router = CokeRouter([ArmSpec("a", "KGM"), ArmSpec("b", "LLM")], 2, budget=1.0, horizon=10,
                        config=CokeConfig(pacing="price", price_window=3))
    state = router.state_dict()
    state["recent_values"] = [0.0, 1.0, 2.0]
    with pytest.raises(ConfigError, match="price's window"):
        CokeRouter.from_state_dict(state)
