"""CalibratedUAG: calibration on real WebQSP tables, save/load round trip, malformed files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kgwise.conformal.calibrated import CalibratedUAG, TableSettings, calibrate_uag, labelled_questions
from kgwise.conformal.grid import TableBatch
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
