"""`eval route --log` on WebQSP's graded log (exported by `eval data export`) gives the figures of `eval route
--dataset webqsp`: the replay path assumes no data set or arm name."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from kgwise.cli.main import app
from kgwise.eval.route.export import webqsp_graded_log

runner = CliRunner()


def _figures(x: Any) -> Any:
    """The report without what may differ between two equal runs: timings and prose."""
    if isinstance(x, dict):
        return {k: _figures(v) for k, v in x.items() if k not in ("ms_per_question", "confidence", "notes",
                                                                    "coverage")}
    if isinstance(x, list):
        return [_figures(v) for v in x]
    return x


@pytest.mark.slow
def test_route_log_gives_the_webqsp_figures(data_dir: Path, tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    res = runner.invoke(app, ["eval", "data", "export", "--dataset", "webqsp", "--log", str(log), "--data",
                              str(data_dir)])
    assert res.exit_code == 0, res.output
    _, arms, _ = webqsp_graded_log(data_dir)
    specs = [x for name, cluster, acc in arms for x in ("--arm", f"{name}:{cluster}:{acc!r}")]
    assert " ".join(specs[1::2]) in " ".join(res.output.split())  # printed with every digit
    common = ["--limit", "200", "--seeds", "2", "--no-tune", "--no-sensitivity", "--no-plots"]
    own, ref = tmp_path / "own.json", tmp_path / "ref.json"
    res = runner.invoke(app, ["eval", "route", "--log", str(log), *specs, *common, "--json", str(own)])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["eval", "route", "--dataset", "webqsp", "--no-gpt4", *common, "--data",
                              str(data_dir), "--json", str(ref)])
    assert res.exit_code == 0, res.output
    a, b = json.loads(own.read_text()), json.loads(ref.read_text())
    assert a["hindsight_cascade"] is not None and a["context_variants"]
    assert _figures(a) == _figures(b)
    assert a["coverage"]["graded_on_every_arm"] == 1578 and a["coverage"]["left_out"] == 0


def test_route_log_needs_arms(tmp_path: Path) -> None:
    log = tmp_path / "log.jsonl"
    log.write_text('{"id": "q1", "text": "t", "arms": {"a": {"answer": "x", "correct": true, "cost": 0}}}\n',
                   encoding="utf-8")
    res = runner.invoke(app, ["eval", "route", "--log", str(log)])
    assert res.exit_code == 2 and "--arm" in res.output
    res = runner.invoke(app, ["eval", "route", "--arm", "a:LLM:0.5"])
    assert res.exit_code == 2 and "--log" in res.output
    res = runner.invoke(app, ["eval", "route", "--log", str(log), "--arm", "a:XYZ"])
    assert res.exit_code == 2 and "CLUSTER" in res.output
