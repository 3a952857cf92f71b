"""The state directory: one owner at a time, and the Clopper–Pearson bounds of live coverage."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from scipy.stats import binom

from kgwise.app.config import PipelineConfig
from kgwise.app.state import CoverageCount, Pending, StateDir, clopper_pearson, coverage_bounds
from kgwise.errors import ConfigError, DataError

from .conftest import STUB_CONFIG, write_config, write_kg


def _config(tmp_path: Path, budget: float = 1.0) -> PipelineConfig:
    write_kg(tmp_path)
    return PipelineConfig.load(write_config(tmp_path, STUB_CONFIG.format(cheap=0.1, dear=0.3, budget=budget,
                                                                          seed=0)))


@pytest.mark.parametrize("k, n", [(0, 10), (3, 10), (10, 10), (95, 100), (180, 200)])
def test_clopper_pearson_bounds_are_the_exact_binomial_tail_inversions(k: int, n: int) -> None:
    delta = 0.05
    lower, upper = clopper_pearson(k, n, delta)
    # the lower bound p_L solves P(X ≥ k | p_L) = δ, the upper p_U solves P(X ≤ k | p_U) = δ
    if k > 0:
        assert binom.sf(k - 1, n, lower) == pytest.approx(delta, rel=1e-6)
    else:
        assert lower == 0.0
    if k < n:
        assert binom.cdf(k, n, upper) == pytest.approx(delta, rel=1e-6)
    else:
        assert upper == 1.0
    assert clopper_pearson(0, 0, delta) == (0.0, 1.0)


def test_drift_is_flagged_only_beyond_noise() -> None:
    assert not coverage_bounds(CoverageCount(20, 16), 0.1, 0.05)[3]  # 80 % of 20: could be 90 %
    rate, lower, upper, drift = coverage_bounds(CoverageCount(200, 150), 0.1, 0.05)
    assert rate == 0.75 and lower < 0.75 < upper < 0.9 and drift
    assert not coverage_bounds(CoverageCount(200, 185), 0.1, 0.05)[3]


def test_one_process_owns_a_state_directory(tmp_path: Path) -> None:
    cfg = _config(tmp_path)
    with StateDir(tmp_path / "st", cfg, 8), pytest.raises(ConfigError, match="in use by another kgwise"):
        StateDir(tmp_path / "st", cfg, 8)
    with StateDir(tmp_path / "st", cfg, 8) as again:  # released on close
        assert again.router.names == ["cheap", "dear", "free"]


def test_a_state_made_for_another_config_is_refused(tmp_path: Path) -> None:
    with StateDir(tmp_path / "st", _config(tmp_path), 8) as st:
        st.select("d", [0.1] * 8, {"cheap": 0.1, "dear": 0.3, "free": 5.0})  # free: out of reach
        arm, bound = st.selected["d"]
        st.record(Pending("d", "q", ["a"], arm, bound, bound, [0.1] * 8, "A", None))
        spent = st.router.spent
    with StateDir(tmp_path / "st", _config(tmp_path, budget=2.0), 8) as other:  # a budget change: journalled
        assert other.router.budget == 2.0 and other.router.spent == spent > 0
        assert any("budget changed from 1 to 2" in w for w in other.warnings)
    with StateDir(tmp_path / "st", _config(tmp_path, budget=2.0), 8) as again:
        assert again.router.budget == 2.0 and again.router.spent == spent and not again.warnings
    with pytest.raises(DataError, match=r"expects 8-d contexts, and its context \(question\) is 16-d with "
                       r"this encoder \(16-d\)"):
        StateDir(tmp_path / "st", _config(tmp_path), 16)
    (tmp_path / "st" / "state.json").write_text("{}", encoding="utf-8")
    with pytest.raises(DataError, match=r"state\.json: not a kgwise pipeline state"):
        StateDir(tmp_path / "st", _config(tmp_path), 8)


def test_feedback_on_uncertified_sets_is_counted_apart_and_survives_a_restart(tmp_path: Path) -> None:
    """A set given without guarantee does not enter the arm's live coverage (it promised none), before
    and after the journal is replayed and after a snapshot."""
    cfg = _config(tmp_path, budget=5.0)
    st = StateDir(tmp_path / "st", cfg, 8)
    x = [0.1] * 8
    for i, certified in enumerate((True, False, False)):
        arm = st.select(f"d{i}", x, {"cheap": 0.1, "dear": 0.3, "free": 0.0})
        assert arm is not None
        st.record(Pending(f"d{i}", "q", ["a", "b"], arm, {"cheap": 0.1, "dear": 0.3, "free": 0.0}[arm], 0.0,
                          x, "A", ["A"], certified=certified))
        st.feedback(f"d{i}", 1.0, {}, covered=True)
    counts = {a: (c.n, c.uncertified) for a, c in st.coverage.items() if c.graded}
    assert sum(n for n, _ in counts.values()) == 1 and sum(u for _, u in counts.values()) == 2
    st.sync()
    st._journal.close()  # as a kill leaves it: no snapshot, the journal only, the OS lock gone
    st._lock.release()
    assert json.loads((tmp_path / "st" / "state.json").read_text())["seq"] == 0  # snapshot made at creation
    with StateDir(tmp_path / "st", cfg, 8) as replayed:
        assert {a: (c.n, c.uncertified) for a, c in replayed.coverage.items() if c.graded} == counts
    with StateDir(tmp_path / "st", cfg, 8) as snapshot:
        assert {a: (c.n, c.uncertified) for a, c in snapshot.coverage.items() if c.graded} == counts
