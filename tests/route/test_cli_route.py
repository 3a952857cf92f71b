"""CLI: ``kgwise bench route`` and ``kgwise eval route`` end to end (small settings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgwise.cli.main import app

runner = CliRunner()


def test_bench_route(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    res = runner.invoke(
        app, ["bench", "route", "--steps", "50", "--naive-steps", "5", "--dim", "32", "--json", str(out)]
    )
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    assert report["max_score_diff_vs_naive"] < 1e-8
    assert report["coke_select_update_ms"] > 0 and report["speedup_linucb_vs_naive"] > 0
    assert report["price_paced_same_prices_as_full_scan"] is True


def test_eval_route_rejects_unknown_dataset(data_dir: Path) -> None:
    res = runner.invoke(app, ["eval", "route", "--dataset", "csqa", "--data", str(data_dir)])
    assert res.exit_code == 2 and "webqsp" in res.output
    res = runner.invoke(app, ["eval", "route", "--gamma", "-1", "--data", str(data_dir)])
    assert res.exit_code == 2 and "gamma" in res.output


def test_eval_route_limit_replays_the_first_questions(tmp_path: Path, data_dir: Path) -> None:
    out = tmp_path / "route.json"
    args = ["eval", "route", "--limit", "80", "--seeds", "2", "--no-gpt4", "--no-sensitivity", "--no-plots",
            "--data", str(data_dir), "--json", str(out)]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    assert report["setup"]["questions"] == 80 and report["limit"] == 80
    assert sum(report["coke"]["selections"].values()) == pytest.approx(80)
    tuned = report["cross_tuned"]
    assert tuned["half_sizes"] == [40, 40] and len(tuned["folds"]) == 2 and len(tuned["grid"]) == 3 * 4 * 2
    assert {f["context"] for f in tuned["folds"]} <= {"embedding", "free_gnn_signals",
                                                       "free_gnn_signals+embedding"}
    warm = report["targets"]["cross_tuned_warm_60"]
    assert warm["accuracy_minus_best"] == pytest.approx(tuned["warm_held_out_minus_best_arm"])
    assert warm["met_cost_le_60pct_best"] == (warm["cost_over_best"] <= 0.6)


@pytest.mark.slow
def test_eval_route_small(tmp_path: Path, data_dir: Path) -> None:
    out = tmp_path / "route.json"
    res = runner.invoke(
        app,
        [
            "eval",
            "route",
            "--seeds",
            "2",
            "--no-gpt4",
            "--no-sensitivity",
            "--no-tune",
            "--limit",
            "500",  # every part of the report on the first 500 questions (the whole test set: minutes more)
            "--data",
            str(data_dir),
            "--json",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    cov = report["coverage"]  # the log's (every question graded on every arm) and the recordings' alignment
    assert cov["left_out"] == 0 and cov["graded_on_every_arm"] == cov["recorded"]["covered_by_all_arms"]
    assert report["setup"]["questions"] == 500
    assert set(report["ablations"]) == {"wo_Ec", "wo_Ea", "wo_Ra"}
    assert [p["lambda"] for p in report["lambda_sweep"]] == [0.001, 0.1, 1.0, 10.0, 100.0]
    assert all(b["cost"] <= b["budget"] + 1e-9 for b in report["budget_sweep"])
    assert all(b["cost"] <= b["budget"] + 1e-9 for b in report["paced_budget_sweep"])
    cascade = report["hindsight_cascade"]
    assert cascade["cheap_arm"] == "ReaRev-lmsr" and cascade["curve"][0]["cost"] == 0.0
    for kind in ("agreement", "learned"):  # all cheap at share 0, all strong at share 1
        curve = cascade[kind]["curve"]
        assert curve[0]["accuracy"] == pytest.approx(report["arms"]["ReaRev-lmsr"]["accuracy"])
        assert curve[-1]["accuracy"] == pytest.approx(report["arms"][cascade["strong_arm"]]["accuracy"])
    variants = report["context_variants"]
    assert {k: v["dim"] for k, v in variants.items()} == {"free_gnn_signals": 5,
                                                          "free_gnn_signals+embedding": 389}
    for v in variants.values():
        assert all(b["cost"] <= b["budget"] + 1e-9 for b in v["paced_budget_sweep"])
        assert "met_accuracy_ge_best" in v["paced_60"]
    assert all(Path(f).is_file() for f in report["figures"])


@pytest.mark.slow
def test_eval_route_live_small(tmp_path: Path, data_dir: Path) -> None:
    """Two live arms on three OBQA questions: a local LLM, and the same LLM with knowledge injection."""
    out = tmp_path / "live.json"
    res = runner.invoke(
        app,
        [
            "eval",
            "route-live",
            "--dataset",
            "obqa",
            "--limit",
            "3",
            "--seeds",
            "2",
            "--arm",
            "smollm2-135m",
            "--arm",
            "smollm2-135m+kg",
            "--data",
            str(data_dir),
            "--json",
            str(out),
        ],
    )
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    assert report["setup"]["unit"] == "calls" and report["setup"]["questions"] == 3
    assert report["setup"]["scoring"] == "pmi"  # the default: LLM arms are named with their rule
    assert report["live_arms"]["smollm2-135m/pmi"]["calls"] == 6  # the question and the choices' prior
    assert report["arms"]["smollm2-135m/pmi"]["cost"] == 6.0  # one per LLM call
    assert set(report["arms"]) == {"smollm2-135m/pmi", "smollm2-135m+kg/pmi"}
    assert (tmp_path / "live.outcomes.jsonl").is_file()
    bad = runner.invoke(app, ["eval", "route-live", "--arm", "smollm2-135m", "--scoring", "max",
                              "--limit", "3", "--data", str(data_dir)])
    assert bad.exit_code != 0 and "max" in bad.output
