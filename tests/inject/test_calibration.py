"""Calibrated answer sets for the injector: the held-out check, persistence, and the CLI end to end."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from kgwise.conformal.split import SplitConformal
from kgwise.errors import ConfigError
from kgwise.inject.calibration import CalibrationConfig, calibrate, with_prediction_set
from kgwise.types import Answer


def _rows(n: int, seed: int) -> list[dict[str, object]]:
    """A classifier whose top choice is right about 60 % of the time, over 4 or 5 choices."""
    rng = np.random.default_rng(seed)
    rows: list[dict[str, object]] = []
    for i in range(n):
        k = 4 + i % 2
        gold = int(rng.integers(0, k))
        logits = rng.normal(size=k)
        logits[gold] += 1.5
        p = np.exp(logits) / np.exp(logits).sum()
        rows.append({"qid": f"q{i}", "probabilities": p.tolist(), "gold": gold})
    return rows


def test_heldout_coverage_meets_the_target_on_average() -> None:
    cp, report = calibrate(_rows(600, 0), CalibrationConfig(alpha=0.1, alphas=(0.1, 0.3), splits=40))
    assert report["questions"] == 600 and 0.4 < report["accuracy"] < 0.9
    for alpha, row in report["heldout_check"].items():
        assert row["coverage"] >= 1 - float(alpha) - 0.02  # mean over 40 halves of 300 questions
        assert 0.5 <= row["mean_set_size"] <= 5.0  # LAC may return an empty set
    assert report["heldout_check"]["0.1"]["mean_set_size"] > report["heldout_check"]["0.3"]["mean_set_size"]
    answer = Answer("q", "A", {"A": 0.7, "B": 0.2, "C": 0.1})
    assert with_prediction_set(answer, cp, 0.99).prediction_set == ()
    everything = with_prediction_set(answer, cp, 0.0).prediction_set
    assert everything is not None
    assert set(everything) == {"A", "B", "C"}
    default = with_prediction_set(answer, cp).prediction_set
    assert default is not None
    assert "A" in default
    with pytest.raises(ConfigError):
        calibrate(_rows(1, 0))
    with pytest.raises(ConfigError):
        CalibrationConfig(score="top")  # type: ignore[arg-type]


@pytest.mark.slow
def test_calibrate_then_answer_with_a_set_through_the_cli(data_dir: Path, tmp_path: Path) -> None:
    """Real MedQA questions, the DDB graph and SmolLM2-135M; the run resumes from its outcomes file."""
    from kgwise.cli.main import app
    from kgwise.kg.loaders import load_ddb

    kg = load_ddb(data_dir / "ddb").save(tmp_path / "ddb.npz")
    out = tmp_path / "cal.json"
    args = ["calibrate", "--dataset", "medqa", "--split", "test", "--kg", str(kg), "--out", str(out),
            "--limit", "4", "--combo", "P_sub+F_t", "--alpha", "0.2", "--data", str(data_dir),
            "--json", str(tmp_path / "report.json")]
    runner = CliRunner()
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    [outcomes] = tmp_path.glob("cal.outcomes-*.jsonl")
    assert len(outcomes.read_text().splitlines()) == 5  # the header and 4 rows
    cp = SplitConformal.load(out)
    assert cp.config.alpha == 0.2 and cp.calibration_scores_ is not None and cp.calibration_scores_.size == 4
    res = runner.invoke(app, args)  # resumes: no new outcome rows
    assert res.exit_code == 0 and len(outcomes.read_text().splitlines()) == 5  # the header and 4 rows
    # another scoring rule answers afresh instead of reusing answers scored by the other one
    res = runner.invoke(app, [*args, "--scoring", "mean"])
    assert res.exit_code == 0, res.output
    assert len(list(tmp_path.glob("cal.outcomes-*.jsonl"))) == 2
    assert len(outcomes.read_text().splitlines()) == 5  # the header and 4 rows
    ask = ["answer", "Which drug is used to treat hypertension?", "--choices",
           "Lisinopril|Insulin|Penicillin", "--kg", str(kg),
           "--combo", "P_sub+F_t", "--calibration", str(out), "--alpha", "0.5"]
    res = runner.invoke(app, [*ask, "--scoring", "mean"])  # the pipeline of the last calibration
    assert res.exit_code == 0, res.output
    assert "calibrated set (holds the answer w.p. ≥ 0.50)" in res.output
    # answers scored by another rule, or made with another combination, are not covered by its guarantee
    res = runner.invoke(app, ask)
    assert res.exit_code == 2 and "scoring: calibrated with 'mean', answering with 'sum'" in res.output
    # another combination is answered, without a set (kgwise.app.knowgpt)
    res = runner.invoke(app, [*ask[:-6], "--combo", "P_sub+F_s", *ask[-4:], "--scoring", "mean"])
    assert res.exit_code == 0 and "combo: calibrated with 'P_sub+F_t'" in res.output
    assert "calibrated set: none" in res.output
    res = runner.invoke(app, [*ask, "--allow-mismatch"])
    assert res.exit_code == 0, res.output
    assert "calibrated set (no guarantee: made by another pipeline)" in res.output
