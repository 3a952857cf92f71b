"""Per-arm cost bounds of the routing service: given, or priced from the price table."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kgwise.errors import ConfigError
from kgwise.llm.prices import default_prices
from kgwise.route.bounds import TokenLimits, cost_bounds, parse_arm_costs, parse_token_limits


def test_priced_arms_are_bounded_by_their_largest_call() -> None:
    table = default_prices()
    bounds = cost_bounds(["gpt-4o-mini", "gpt-4o", "gnn"], {"gnn": 0.0}, TokenLimits(4000, 500))
    assert bounds == [table.cost("gpt-4o-mini", 4000, 500), table.cost("gpt-4o", 4000, 500), 0.0]
    assert bounds[1] == pytest.approx((4000 * 2.5 + 500 * 10.0) / 1e6)


def test_a_given_bound_wins_over_the_price() -> None:
    assert cost_bounds(["gpt-4o"], {"gpt-4o": 0.5}, TokenLimits(10**6, 10**6)) == [0.5]


def test_every_arm_without_a_bound_is_named() -> None:
    with pytest.raises(ConfigError, match=r"no bound for my-model, other \(not in the price table"):
        cost_bounds(["gpt-4o", "my-model", "other"], {}, TokenLimits(100, 10))
    with pytest.raises(ConfigError, match="no --max-tokens"):
        cost_bounds(["a", "b"], {"a": 1.0})


@pytest.mark.parametrize("spec", ["", "4096", "4096,", "a,b", "-1,5", "1,2,3"])
def test_malformed_token_limits_are_refused(spec: str) -> None:
    with pytest.raises(ConfigError, match="--max-tokens"):
        parse_token_limits(spec)


@pytest.mark.parametrize("spec", ["a", "a=", "z=1", "a=-1", "a=nan", "a=inf", "=1"])
def test_malformed_arm_costs_are_refused(spec: str) -> None:
    with pytest.raises(ConfigError, match="ARM=COST"):
        parse_arm_costs([spec], ["a", "b"])


def test_an_arm_name_may_hold_an_equals_sign() -> None:
    assert parse_arm_costs(["k=v=0.25"], ["k=v"]) == {"k=v": 0.25}


@given(st.integers(0, 10**7), st.integers(0, 10**7))
def test_priced_bounds_grow_with_the_tokens(i: int, o: int) -> None:
    small, = cost_bounds(["gpt-4o"], {}, TokenLimits(i, o))
    large, = cost_bounds(["gpt-4o"], {}, TokenLimits(i + 1, o + 1))
    assert 0.0 <= small < large
