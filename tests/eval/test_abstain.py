"""``kgwise eval abstain`` (:mod:`kgwise.eval.abstain`): the two confidences on a real graded log (the
local arms' OBQA answers) and WebQSP's recorded ReaRev answers; bad input refused naming what and where,
before any split runs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from kgwise.cli.main import app
from kgwise.errors import ConfigError
from kgwise.eval.abstain import AbstainEvalConfig, compare, graded_log_arms, oracle_share, rearev_logs

LOG = Path(__file__).parents[1] / "data" / "logs" / "obqa-local.jsonl"
runner = CliRunner()


def said(args: list[str]) -> tuple[int, str]:
    result = runner.invoke(app, args)
    return result.exit_code, " ".join(result.output.replace("│", " ").split())


def test_the_log_s_free_arm_witnesses_the_others() -> None:
    logs = {a.arm: a for a in graded_log_arms(LOG)}
    assert logs["kgm"].witnesses == () and logs["gemma3-270m"].witnesses == ("kgm",)
    rows = [json.loads(line) for line in LOG.read_text(encoding="utf-8").splitlines()]
    same = [r["arms"]["gemma3-270m"]["answer"] == r["arms"]["kgm"]["answer"] for r in rows]
    assert logs["gemma3-270m"].agreeing.tolist() == [int(s) for s in same]
    out = compare(logs["kgm"], AbstainEvalConfig(alphas=(0.5,), splits=5, tune=100, calibration=100))
    rules = out["alphas"]["0.5"]
    keys = ("answered", "accuracy_answered", "held_share", "certified_share")
    # no witness: the same rule, and the chosen one is the own score
    assert [rules["own"][k] for k in keys] == [rules["agreement"][k] for k in keys] == [
        rules["chosen"][k] for k in keys] and rules["chosen"]["agreement_splits"] == 0.0
    assert 0 <= rules["own"]["answered"] <= 1 and rules["own"]["held_share"] >= 0


def test_oracle_share_is_the_largest_confident_prefix_at_the_target() -> None:
    score = np.array([0.9, 0.8, 0.7, 0.6])
    assert oracle_share(score, np.array([True, True, False, False]), 0.4) == 0.75  # 2 of 3 right
    assert oracle_share(score, np.array([False, True, True, True]), 0.1) == 0.0


def test_agreement_answers_more_on_webqsp_at_the_same_guarantee(data_dir: Path) -> None:
    cfg = AbstainEvalConfig(alphas=(0.2,), splits=10)
    for log in rearev_logs(data_dir):
        row = compare(log, cfg)["alphas"]["0.2"]
        assert row["agreement"]["answered"] > row["own"]["answered"]
        assert row["agreement"]["oracle_share"] > row["own"]["oracle_share"]
        assert row["chosen"]["agreement_splits"] >= 0.8  # the tuning answers see agreement help


def test_bad_input_is_named_before_any_split(tmp_path: Path) -> None:
    code, out = said(["eval", "abstain", "--log", str(LOG), "--alphas", "0.2,1.5"])
    assert code == 2 and "alphas must lie in (0, 1), got [0.2, 1.5]" in out
    code, out = said(["eval", "abstain", "--log", str(LOG), "--arm", "gpt-9"])
    assert code == 2 and "no arm 'gpt-9' in the log" in out
    silent = tmp_path / "silent.jsonl"
    silent.write_text("".join(json.dumps({"id": f"q{i}", "text": f"q {i}?", "arms": {
        "a": {"answer": "A", "correct": True, "cost": 0, "signals": [0.9]}}}) + "\n" for i in range(3))
        + json.dumps({"id": "q3", "text": "q 3?",
                      "arms": {"b": {"answer": "B", "correct": False, "cost": 1}}}) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"silent\.jsonl:4: arm 'b' has no signals"):
        graded_log_arms(silent)
    code, out = said(["eval", "abstain", "--log", str(silent), "--arm", "a", "--tune", "2",
                      "--calibration", "1"])
    assert code == 2 and "arm 'a' answered 3 questions; tuning 2 + calibration 1 leave none to test" in out
