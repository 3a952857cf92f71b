"""``kgwise ask`` and ``kgwise eval llm`` with the real SmolLM2 (resumable records)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgwise.cli.main import app

pytestmark = pytest.mark.slow


def test_ask_prints_answer_probabilities_and_usage(tmp_path: Path) -> None:
    out = tmp_path / "ask.json"
    res = CliRunner().invoke(app, ["ask", "Where would you find a seashell?", "--choices",
                                   "beach|desert|office", "--llm", "smollm2-135m", "--json", str(out)])
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    assert report["answer"] in {"beach", "desert", "office"}
    assert set(report["probabilities"]) == {"beach", "desert", "office"}
    assert sum(report["probabilities"].values()) == pytest.approx(1.0, abs=1e-5)
    # smollm2-135m's measured rule, PMI, by default: one call for the choices, one for their prior
    assert report["usage"]["input_tokens"] > 0 and report["usage"]["calls"] == 2


def test_ask_rejects_bad_choices() -> None:
    res = CliRunner().invoke(app, ["ask", "Q?", "--choices", "only-one", "--llm", "smollm2-135m"])
    assert res.exit_code == 2 and "needs 2 to 26 non-empty choices" in res.output


def test_eval_llm_reports_and_resumes(tmp_path: Path, data_dir: Path) -> None:
    out = tmp_path / "obqa.json"
    args = ["eval", "llm", "--dataset", "obqa", "--split", "test", "--llm", "smollm2-135m", "--limit", "4",
            "--data", str(data_dir), "--json", str(out)]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    r1 = json.loads(out.read_text())
    for key in ("dataset", "split", "llm", "n", "accuracy", "questions_per_s", "usage"):
        assert key in r1
    assert r1["n"] == 4 and r1["ran_now"] == 4 and r1["resumed"] == 0
    assert set(r1["usage"]) >= {"input_tokens", "output_tokens", "calls", "cost"}
    assert r1["usage"]["calls"] == 8 and r1["usage"]["input_tokens"] > 0  # the question and the choice prior
    lines = [json.loads(x) for x in Path(r1["records"]).read_text().splitlines()]
    assert "fingerprint" in lines[0]  # a files.ResumeLog: its settings first, then one record a question
    records = [line["value"] for line in lines[1:]]
    assert r1["accuracy"] == sum(r["result"]["correct"] for r in records) / 4
    assert r1["accuracy"] == r1["accuracy_sum"]  # --method score ranks by the sum
    assert {"accuracy_mean", "accuracy_pmi"} <= set(r1)
    second = CliRunner().invoke(app, [*(a if a != "4" else "6" for a in args)])
    assert second.exit_code == 0, second.output
    r2 = json.loads(out.read_text())
    assert r2["resumed"] == 4 and r2["ran_now"] == 2 and r2["n"] == 6
    assert r2["records"] == r1["records"]


def test_eval_llm_on_an_unlabelled_split_reports_no_accuracy(tmp_path: Path, data_dir: Path) -> None:
    """CSQA's official test split has no answers: no accuracy of 0, but none at all, and a warning."""
    out = tmp_path / "csqa.json"
    res = CliRunner().invoke(app, ["eval", "llm", "--dataset", "csqa", "--split", "test", "--limit", "2",
                                   "--data", str(data_dir), "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "has no gold answers: no accuracy is reported" in " ".join(res.output.split())
    report = json.loads(out.read_text())
    assert report["labelled"] == 0 and report["accuracy"] is None and report["answered"] == 2
    assert "accuracy_sum" not in report
