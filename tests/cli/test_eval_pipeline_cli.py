"""``kgwise eval pipeline --live``: bad input is one error line before any model loads; a tiny live run
with a trained KG model and SmolLM2-135M (slow) reports arms, pipeline and sets, and resumes without
calling a model again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from kgwise.cli.main import app
from kgwise.eval.pipeline_run import unseen_offset

runner = CliRunner()


def said(args: list[str]) -> tuple[int, str]:
    result = runner.invoke(app, args)
    return result.exit_code, " ".join(result.output.replace("│", " ").split())


def test_unknown_live_set_and_missing_kg_model_are_named(tmp_path: Path, data_dir: Path) -> None:
    code, out = said(["eval", "pipeline", "--live", "medqa", "--data", str(data_dir)])
    assert code == 2 and "--live must be one of obqa, csqa, webqsp-open" in out
    code, out = said(["eval", "pipeline", "--live", "obqa", "--data", str(data_dir)])
    assert code == 2 and "needs --kgm-model" in out
    model = tmp_path / "m.pt"
    model.write_bytes(b"")
    code, out = said(["eval", "pipeline", "--live", "webqsp-open", "--kgm-model", str(model), "--data",
                      str(data_dir)])
    assert code == 2 and "--kgm-model is for --live obqa|csqa" in out
    code, out = said(["eval", "pipeline", "--live", "obqa", "--alphas", "0.1,x", "--data", str(data_dir)])
    assert code == 2 and "--alphas: expected values separated by commas" in out
    code, out = said(["eval", "pipeline", "--live", "webqsp-open", "--delta", "1.5", "--data", str(data_dir)])
    assert code == 2 and "--delta must lie in (0, 1), got 1.5" in out


@given(st.lists(st.tuples(st.integers(0, 60), st.integers(1, 30)), max_size=4), st.integers(1, 40))
def test_the_fit_window_is_the_first_one_the_model_did_not_see(raw: list[tuple[int, int]], n: int) -> None:
    spans = [(a, a + w) for a, w in raw]
    offset = unseen_offset(spans, n)
    window = set(range(offset, offset + n))
    assert not any(window & set(range(a, b)) for a, b in spans)
    assert all(any(set(range(o, o + n)) & set(range(a, b)) for a, b in spans) for o in range(offset))


@pytest.mark.slow  # trains a KG model on 16 questions and runs SmolLM2-135M in-process (minutes)
def test_a_tiny_live_run_through_the_cli(tmp_path: Path, data_dir: Path) -> None:
    model = tmp_path / "kgm.pt"
    result = runner.invoke(app, ["kg", "model", "train", "--dataset", "obqa", "--out", str(model), "--limit",
                                 "20", "--reserve", "0:4", "--epochs", "1", "--data", str(data_dir)])
    assert result.exit_code == 0, result.output
    code, out = said(["eval", "pipeline", "--live", "obqa", "--kgm-model", str(model), "--fit-offset", "2",
                      "--data", str(data_dir)])
    assert code == 2 and "was trained on train questions 4:20: fitting on 2:302 would overrate it" in out
    args = ["eval", "pipeline", "--live", "obqa", "--kgm-model", str(model), "--llm", "smollm2-135m",
            "--fit-n", "4", "--test-n", "2", "--alphas", "0.5,0.6", "--out-dir", str(tmp_path / "run"),
            "--data", str(data_dir), "--json", str(tmp_path / "r.json")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["config"]["fit_offset"] == 0 and report["test_split"] == "test"  # the reserved range
    assert set(report["arms"]) == {"kgm", "smollm2-135m", "smollm2-135m+kg"}
    for name, arm in report["arms"].items():
        assert arm["answered"] == 2 and 0.0 <= arm["accuracy"] <= 1.0
        assert arm["compute_seconds"] > 0
        if name == "kgm":
            assert arm["cost_calls"] == 0 and arm["usd_at_price_model"] == 0
        else:  # PMI scoring: the choices after the question, then after a bare "Answer:"
            assert arm["cost_calls"] == arm["calls"] == 4
            assert arm["tokens"] > 0 and arm["usd_at_price_model"] > 0
    p = report["pipeline"]
    assert p["answered"] + p["unanswered"] == 2 and p["spent"] <= p["budget"] + 1e-9
    assert sum(p["share"].values()) == pytest.approx(p["answered"] / 2)
    assert set(report["sets"]) == {"0.5", "0.6"}
    assert report["sets_check"]["pipeline_set_differs_from_recomputed"] == 0
    assert report["fit"]["questions"] == 4 and len(report["fit"]["arms"]) == 3
    arms_log = (tmp_path / "run" / "arms.jsonl").read_text()
    result = runner.invoke(app, args)  # resumed: the same report, no arm answers again
    assert result.exit_code == 0, result.output
    again = json.loads((tmp_path / "r.json").read_text())
    assert (tmp_path / "run" / "arms.jsonl").read_text() == arms_log
    assert again["pipeline"] == report["pipeline"] and again["arms"] == report["arms"]


@pytest.mark.slow  # SmolLM2-135M answers nine WebQSP questions in-process
def test_webqsp_opens_one_arm_gets_its_whole_cost_as_default_budget(tmp_path: Path, data_dir: Path) -> None:
    args = ["eval", "pipeline", "--live", "webqsp-open", "--fit-n", "6", "--test-n", "3", "--alphas", "0.5",
            "--delta", "0.3", "--no-plain", "--no-data-topics", "--out-dir", str(tmp_path / "run"),
            "--data", str(data_dir), "--json", str(tmp_path / "r.json")]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "r.json").read_text())
    assert list(report["arms"]) == ["smollm2-135m+kg"] and report["config"]["budget"] == 1.0
    fit_cost = report["fit"]["arms"][0]["cost_mean"]
    assert report["pipeline"]["budget"] == pytest.approx(fit_cost * 3)
