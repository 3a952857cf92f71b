"""CalibratedUAG: calibration on real WebQSP tables, save/load round trip, malformed files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kgwise.conformal.calibrated import CalibratedUAG, TableSettings, calibrate_uag, labelled_questions
from kgwise.conformal.grid import TableBatch
from kgwise.conformal.ltt import binomial_p_values
from kgwise.conformal.uag import UAG, UAGConfig
from kgwise.errors import ConfigError, DataError
from kgwise.types import Question


def test_calibrate_save_load_round_trip(webqsp_uag_tables: TableBatch, tmp_path: Path) -> None:
    tables, settings = webqsp_uag_tables, TableSettings()
    uag, summary = calibrate_uag(tables, 0.3, settings, seed=3)
    assert not uag.abstains and summary["certified"] and summary["calibration_miss_rate"] <= 0.3
    assert summary["tuning"] == 120 and summary["calibration"] == 180
    path = CalibratedUAG(uag, settings, summary).save(tmp_path / "u.json")
    back = CalibratedUAG.load(path)
    assert back.uag.chosen_thresholds_ == uag.chosen_thresholds_ and back.uag.lambda_ == uag.lambda_
    assert back.uag.evaluator_score_ == uag.evaluator_score_ and back.summary == json.loads(
        json.dumps(summary))
    for i in range(0, 300, 17):
        np.testing.assert_array_equal(back.uag.predict_set(tables.table(i)), uag.predict_set(tables.table(i)))
    np.testing.assert_array_equal(back.uag.evaluate(tables)["size"], uag.evaluate(tables)["size"])


def test_abstention_and_bad_files(webqsp_uag_tables: TableBatch, tmp_path: Path) -> None:
    tables = webqsp_uag_tables
    uag, summary = calibrate_uag(tables, 0.01, TableSettings())
    assert uag.abstains and not summary["certified"]
    with pytest.raises(ConfigError):
        CalibratedUAG(uag, TableSettings(), summary)
    with pytest.raises(ConfigError):
        calibrate_uag(tables.subset([0]), 0.3, TableSettings())
    scored = UAG(UAGConfig(alpha=0.3, steps=(0.2, 0.2, 0.2), scored_step=0.5))
    scored.chosen_thresholds_, scored.evaluator_score_ = (1.0, 1.0, 1.0, 1.0), "absolute"
    with pytest.raises(ConfigError, match="scored retriever"):
        CalibratedUAG(scored, TableSettings(), {})
    with pytest.raises(DataError, match="not found"):
        CalibratedUAG.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"kind": "kgwise.CalibratedUAG", "uag": {"alpha": 0.2}}))
    with pytest.raises(DataError, match=r"bad\.json"):
        CalibratedUAG.load(bad)
    certified = calibrate_uag(tables, 0.3, TableSettings())[0]
    good = CalibratedUAG(certified, TableSettings(), {}).save(tmp_path / "g.json")
    body = json.loads(good.read_text())
    body["evaluator_score"] = "nonsense"
    bad.write_text(json.dumps(body))
    with pytest.raises(DataError, match="evaluator score"):
        CalibratedUAG.load(bad)


def test_summary_says_what_the_largest_set_misses_and_why_nothing_is_certified(
        webqsp_uag_tables: TableBatch) -> None:
    tables = webqsp_uag_tables
    uag, summary = calibrate_uag(tables, 0.01, TableSettings())
    cal = tables.subset(np.random.default_rng(0).permutation(tables.num_questions)[120:])
    losses = uag.loss_counts(cal)
    k = summary["largest_set_misses"]
    assert k == losses[uag.largest_index] == losses.min() and k > 0
    assert summary["largest_set_p_value"] == pytest.approx(binomial_p_values([k], 180, 0.01)[0])
    assert summary["largest_set_mean_size"] == pytest.approx(np.mean(
        [cal.table(i).node_ids.size for i in range(180)]))
    assert summary["calibration_needed"] is None  # k/180 ≥ 0.01
    assert "no λ certified at α=0.01" in summary["note"] and "no calibration size" in summary["note"]
    few = calibrate_uag(tables.subset(range(40)), 0.2, TableSettings())[1]  # 24 calibration questions
    assert not few["certified"] and few["largest_set_p_value"] > 0.05 and few["calibration_needed"] > 24
    assert f"about {few['calibration_needed']} calibration questions, there are 24" in few["note"]
    ok = calibrate_uag(tables, 0.3, TableSettings())[1]
    assert ok["note"].startswith("certified at α=0.3, δ=0.05: λ=")


def test_labelled_questions() -> None:
    qs = [Question("a", "q?", gold=("x",), topic_entities=("t",)), Question("b", "q?", gold=("x",))]
    assert [q.id for q in labelled_questions(qs, "f")] == ["a"]
    with pytest.raises(DataError, match="topic_entities"):
        labelled_questions(qs[1:], "f")


def test_small_data_advice() -> None:
    from kgwise.conformal.calibrated import reachability_advice, sample_size_advice
    from kgwise.conformal.retriever import RetrieverConfig

    few, enough = sample_size_advice(20, [0.1, 0.3], 0.05)
    assert "needs at least 29" in few and "no λ can be certified" in few
    assert "needs at least 9" in enough and "cannot" not in enough
    assert reachability_advice(0.95, [0.1], RetrieverConfig()) is None
    said = reachability_advice(0.6, [0.1, 0.5], RetrieverConfig())
    assert said is not None and "--direction both" in said and "α = 0.1" in said and "0.5" not in said
    both = reachability_advice(0.6, [0.1], RetrieverConfig(direction="both"))
    assert both is not None and "--direction" not in both and "--max-hops 3" in both
