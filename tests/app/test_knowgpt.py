"""The calibrated KnowGPT answer (``kgwise.app.knowgpt``) with the real DDB graph and the real local model
(SmolLM2-135M), and the same answer through the CLI and the server: one behaviour for both."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kgwise.app import KnowGPTApp
from kgwise.conformal.split import SplitConformal, SplitConformalConfig
from kgwise.errors import ConfigError
from kgwise.inject.build import build_injector
from kgwise.inject.calibration import pipeline_of
from kgwise.inject.injector import KnowledgeInjector
from kgwise.kg.loaders import load_ddb
from kgwise.types import make_question

QUESTION = "Which drug is used to treat hypertension?"
CHOICES = ["Lisinopril", "Insulin", "Penicillin", "Levothyroxine"]


@pytest.fixture(scope="module")
def ddb_file(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return load_ddb(data_dir / "ddb").save(tmp_path_factory.mktemp("app") / "ddb.npz")


@pytest.fixture(scope="module")
def injector(ddb_file: Path) -> KnowledgeInjector:
    return build_injector(ddb_file)


@pytest.fixture(scope="module")
def calibration(injector: KnowledgeInjector, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A split-conformal calibration at α = 0.2 recorded as made with this pipeline and P_sub+F_t."""
    rng = np.random.default_rng(0)
    cal = SplitConformal(SplitConformalConfig(alpha=0.2)).conformalize(
        rng.dirichlet(np.ones(4), size=50), rng.integers(0, 4, size=50))
    return cal.save(tmp_path_factory.mktemp("cal") / "cal.json",
                    {"made_with": pipeline_of(injector, "P_sub+F_t")})


@pytest.mark.slow
def test_without_a_calibration_the_injector_chooses(injector: KnowledgeInjector) -> None:
    app = KnowGPTApp(injector)
    r = app.answer(make_question(QUESTION, CHOICES))
    assert r.combination == "P_sub+F_s" and r.calibrated_set is None and r.guaranteed is None
    assert r.choice_text == CHOICES["ABCD".index(r.prediction)] and r.scoring == "sum"
    assert sum(r.probabilities.values()) == pytest.approx(1.0, abs=1e-6) and r.prep_ms > 0
    assert "guaranteed" not in r.to_dict() and "prediction_set" not in r.to_dict()
    with pytest.raises(ConfigError, match="needs a calibration"):
        app.answer(make_question(QUESTION, CHOICES), alpha=0.1)


@pytest.mark.slow
def test_the_calibrated_combination_answers_with_a_guaranteed_set(injector: KnowledgeInjector,
                                                                  calibration: Path) -> None:
    app = KnowGPTApp(injector, calibration)
    assert app.calibrated and app.mismatch == () and app.default_combo == "P_sub+F_t"
    q = make_question(QUESTION, CHOICES)
    r = app.answer(q)
    q_hat = SplitConformal.load(calibration).quantile()
    assert r.combination == "P_sub+F_t" and r.guaranteed is True and r.alpha == 0.2
    assert r.calibrated_set == tuple(k for k, p in r.probabilities.items() if 1 - p <= q_hat)
    assert app.answer(q, alpha=0.0).calibrated_set == ("A", "B", "C", "D")
    with pytest.raises(ConfigError, match="alpha"):
        app.answer(q, alpha=2.0)
    # another combination: answered, but without a set, and the result says why
    other = app.answer(q, "P_sub+F_s")
    assert other.combination == "P_sub+F_s" and other.calibrated_set is None and other.guaranteed is False
    assert other.mismatch == ("combo: calibrated with 'P_sub+F_t', answering with 'P_sub+F_s'",)
    allowed = KnowGPTApp(injector, calibration, allow_mismatch=True).answer(q, "P_sub+F_s")
    assert allowed.calibrated_set is not None and allowed.guaranteed is False


@pytest.mark.slow
def test_another_pipeline_is_refused_when_the_app_opens(injector: KnowledgeInjector, tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    cal = SplitConformal(SplitConformalConfig(alpha=0.2)).conformalize(
        rng.dirichlet(np.ones(4), size=20), rng.integers(0, 4, size=20))
    other = cal.save(tmp_path / "other.json", {"made_with": {**pipeline_of(injector, None), "llm": "x"}})
    with pytest.raises(ConfigError, match=r"llm: calibrated with 'x'.*--allow-me"):
        KnowGPTApp(injector, other, option="--allow-me")
    app = KnowGPTApp(injector, other, allow_mismatch=True)
    assert app.mismatch == ("llm: calibrated with 'x', answering with 'smollm2-135m'",)
    r = app.answer(make_question(QUESTION, CHOICES))  # the calibration's combination: bandit-less default
    assert r.combination == "P_sub+F_s" and r.guaranteed is False and r.calibrated_set is not None


@pytest.mark.slow
def test_the_cli_and_the_server_give_the_same_calibrated_answer(ddb_file: Path, calibration: Path) -> None:
    """Neither names a combination: both answer with the calibration's and attach the same set."""
    from kgwise.cli.main import app as cli
    from kgwise.server import ServerSettings, create_app

    expected = KnowGPTApp.build(ddb_file, calibration=calibration).answer(make_question(QUESTION, CHOICES))
    body = TestClient(create_app(ServerSettings(kg=ddb_file, calibration=calibration))).post(
        "/v1/answer", json={"question": QUESTION, "choices": CHOICES}).json()
    same = json.loads(json.dumps(expected.to_dict()))
    assert body == same | {"prep_ms": body["prep_ms"], "usage": body["usage"]}
    res = CliRunner().invoke(cli, ["answer", QUESTION, "--choices", "|".join(CHOICES), "--kg", str(ddb_file),
                                   "--calibration", str(calibration)])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert f"answer: {expected.prediction}) {expected.choice_text}" in out
    assert "combination: P_sub+F_t" in out
    assert f"holds the answer w.p. ≥ 0.80): {', '.join(expected.calibrated_set or ())}" in out
