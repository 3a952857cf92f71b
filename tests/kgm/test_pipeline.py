"""``kgwise.kgm.pipeline.reserved_spans``: the questions a reservation leaves to train on."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kgwise.errors import ConfigError
from kgwise.kgm.pipeline import reserved_spans


@given(st.integers(2, 500), st.data())
def test_spans_and_reserve_partition_the_split(n: int, data: st.DataObject) -> None:
    start = data.draw(st.integers(0, n - 1))
    stop = data.draw(st.integers(start + 1, n))
    if (start, stop) == (0, n):
        return  # nothing left: the error below
    spans = reserved_spans(n, (start, stop))
    trained = [i for a, b in spans for i in range(a, b)]
    assert trained == [i for i in range(n) if not start <= i < stop]
    assert all(b > a for a, b in spans)


def test_no_reserve_is_the_whole_split() -> None:
    assert reserved_spans(7, None) == [(0, 7)]


@pytest.mark.parametrize("reserve", [(3, 3), (5, 2), (0, 11), (-1, 4)])
def test_a_bad_range_is_named(reserve: tuple[int, int]) -> None:
    with pytest.raises(ConfigError, match=f"reserved range {reserve[0]}:{reserve[1]} is not a non-empty "
                                          "range within the 10 ihtrain questions"):
        reserved_spans(10, reserve, "ihtrain")


def test_reserving_everything_is_refused() -> None:
    with pytest.raises(ConfigError, match="leaves none of the 10 train questions"):
        reserved_spans(10, (0, 10))
