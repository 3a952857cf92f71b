"""Run-time estimates from a measured warm-up; bars off when the stream is not a terminal."""

from __future__ import annotations

import io

import pytest

from kgwise.progress import Estimate, bar, duration, estimate, estimate_steps, interactive


def test_estimate_extrapolates_the_warm_up() -> None:
    ticks = iter([10.0, 16.0])  # a fake clock: the warm-up of 3 items took 6 s
    done: list[int] = []

    def warmup() -> int:
        done.extend([1, 2, 3])
        return len(done)

    est = estimate(100, warmup, clock=lambda: next(ticks))
    assert est == Estimate(100, 3, 6.0) and est.per_item_s == 2.0 and est.remaining_s == 194.0
    line = est.describe("tables to build", 1.0)
    assert "100 tables to build, about 100 LLM calls" in line and "3 min" in line
    with pytest.raises(ValueError, match="warm-up did 5 of 4"):
        estimate(4, lambda: 5)


def test_estimate_steps_times_past_cached_items() -> None:
    """Two cached items (no time) then real ones of 2 s each: the warm-up goes on until a second is
    measured, so it does not promise the rest in no time; it never does more than there is."""
    now = [0.0]
    cost = [0.0, 0.0, 2.0, 2.0, 2.0]
    done: list[int] = []

    def step(i: int) -> None:
        now[0] += cost[i]
        done.append(i)

    est = estimate_steps(50, step, clock=lambda: now[0])
    assert done == [0, 1, 2] and est == Estimate(50, 3, 2.0)
    done.clear()
    now[0] = 0.0
    assert estimate_steps(2, step, clock=lambda: now[0]).warmup_items == 2 and done == [0, 1]


def test_duration_units() -> None:
    assert (duration(30), duration(600), duration(7200)) == ("30 s", "10 min", "2.0 h")


def test_bar_is_off_when_not_a_terminal() -> None:
    stream = io.StringIO()
    assert not interactive(stream)
    b = bar(total=3, file=stream)
    b.update(3)
    b.close()
    assert stream.getvalue() == ""
    shown = io.StringIO()
    b = bar(total=3, file=shown, enabled=True)
    b.update(3)
    b.close()
    assert "3/3" in shown.getvalue()
