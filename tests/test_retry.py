"""Back-off schedule, Retry-After parsing and the retry loop (with a recorded fake sleep)."""

from __future__ import annotations

import email.utils
import random
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kgwise.llm import LLMError, TransientLLMError
from kgwise.retry import RetryPolicy, RetryStats, call_with_retry, parse_retry_after


@given(st.integers(min_value=0, max_value=30), st.integers(min_value=0, max_value=2**31))
def test_backoff_is_bounded_by_the_exponential_cap(attempt: int, seed: int) -> None:
    p = RetryPolicy(base_delay_s=0.5, multiplier=2.0, max_delay_s=30.0)
    d = p.delay(attempt, None, random.Random(seed))
    assert 0.0 <= d <= min(30.0, 0.5 * 2.0**attempt)


@given(st.floats(min_value=0, max_value=1000, allow_nan=False), st.integers(min_value=0, max_value=2**31))
def test_retry_after_sets_the_floor(retry_after: float, seed: int) -> None:
    p = RetryPolicy(base_delay_s=0.5, max_retry_after_s=120.0)
    d = p.delay(3, retry_after, random.Random(seed))
    assert min(retry_after, 120.0) <= d <= min(retry_after, 120.0) + 0.5


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"Retry-After": "7"}) == 7.0
    assert parse_retry_after({"retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({}) is None
    assert parse_retry_after({"Retry-After": "soon"}) is None
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"Retry-After": date}, now=now) == pytest.approx(30, abs=1.0)


def test_retry_loop_counts_and_waits() -> None:
    script: list[Exception | str] = [TransientLLMError("x", status=429, retry_after=2.0),
                                     TransientLLMError("y", status=503), "ok"]
    slept: list[float] = []
    stats = RetryStats()

    def fn() -> str:
        item = script.pop(0)
        if isinstance(item, Exception):
            raise item
        return item

    result, attempts = call_with_retry(fn, RetryPolicy(base_delay_s=0.1), stats=stats, sleep=slept.append,
                                       rng=random.Random(0))
    assert (result, attempts) == ("ok", 3)
    assert slept[0] >= 2.0 and 0.0 <= slept[1] <= 0.2
    assert stats.snapshot() == {"requests": 3, "retries": 2, "failures": 0,
                                "reasons": {"http_429": 1, "http_503": 1}}


def test_retry_loop_gives_up_and_does_not_retry_permanent_errors() -> None:
    calls = []

    def always() -> None:
        calls.append(1)
        raise TransientLLMError("timeout: slow")

    with pytest.raises(LLMError, match="gave up after 3 attempts"):
        call_with_retry(always, RetryPolicy(max_retries=2), sleep=lambda s: None)
    assert len(calls) == 3

    def bad() -> None:
        calls.append(2)
        raise LLMError("HTTP 400")

    with pytest.raises(LLMError, match="HTTP 400"):
        call_with_retry(bad, RetryPolicy(), sleep=lambda s: None)
    assert calls.count(2) == 1
