"""``kgwise bench llm`` on the real SmolLM2: every question timed under the model's own rule, the ladder,
the load average and the API comparison in the JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kgwise.cli.main import app
from kgwise.llm.local_models import LOCAL_MODELS

pytestmark = pytest.mark.slow


def test_bench_llm_reports_seconds_rule_and_load(tmp_path: Path, data_dir: Path) -> None:
    out = tmp_path / "bench.json"
    res = CliRunner().invoke(app, ["bench", "llm", "--llm", "smollm2-135m", "--limit", "3", "--data",
                                   str(data_dir), "--json", str(out)])
    assert res.exit_code == 0, res.output
    report = json.loads(out.read_text())
    (m,) = report["models"]
    assert m["llm"] == "smollm2-135m" and m["rule"] == LOCAL_MODELS["smollm2-135m"].scoring
    assert m["questions"] == 3 and 0.0 <= m["accuracy"] <= 1.0
    s = m["seconds_per_question"]
    assert 0 < s["median"] <= s["p90"] and m["input_tokens_per_question"] > 0
    assert len(m["load_average_before"]) == 3 and report["cpus"] >= 1 and report["ladder"] == ["smollm2-135m"]
    assert m["api_usd_per_question"]["llama-2-7b"] == pytest.approx(m["input_tokens_per_question"] * 0.2e-6,
                                                                     rel=0.05)
    assert "| smollm2-135m | pmi |" in res.output


def test_bench_llm_names_an_unknown_api_model(data_dir: Path) -> None:
    res = CliRunner().invoke(app, ["bench", "llm", "--llm", "smollm2-135m", "--limit", "1", "--data",
                                   str(data_dir), "--api-model", "no-such-model"])
    assert res.exit_code != 0 and "no-such-model" in res.output and "price table" in res.output
