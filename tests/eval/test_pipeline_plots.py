"""``plot_set_coverage``: the per-arm coverage figure of ``kgwise eval pipeline``'s sets."""

from __future__ import annotations

from pathlib import Path

from kgwise.eval.pipeline_plots import plot_set_coverage


def _arm(coverage: float) -> dict[str, object]:
    return {"questions": 20, "coverage": coverage, "mean_size": 3.0, "on_target": coverage >= 0.9,
            "below_beyond_noise": False}


def test_a_figure_is_written_for_runs_with_sets_and_none_without(tmp_path: Path) -> None:
    row = {"alpha": 0.1, "certified": True, "coverage": 0.9, "arms": {"a": _arm(0.92), "b": _arm(0.85)},
           "per_arm": {"a": {"certified": True, **_arm(0.95)}, "b": {"certified": False}}}
    runs = [{"answer_sets": {"alphas": [row, {**row, "alpha": 0.2, "certified": False}]}}] * 3
    path = plot_set_coverage(runs, ["a", "b", "c"], tmp_path / "out" / "sets.png")
    assert path is not None and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot_set_coverage([{"answer_sets": None}], ["a"], tmp_path / "none.png") is None
    assert not (tmp_path / "none.png").exists()
