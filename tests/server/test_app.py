"""The HTTP service, with the real DDB graph and the real local model (SmolLM2-135M via llama.cpp)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from kgwise.errors import ConfigError
from kgwise.eval.bench.net import free_port
from kgwise.inject import PromptBandit
from kgwise.inject.build import build_injector
from kgwise.kg.loaders import load_ddb
from kgwise.server import ServerSettings, create_app

QUESTION = "Which drug is used to treat hypertension?"
CHOICES = ["Lisinopril", "Insulin", "Penicillin", "Levothyroxine"]


@pytest.fixture(scope="module")
def ddb_file(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return load_ddb(data_dir / "ddb").save(tmp_path_factory.mktemp("server") / "ddb.npz")


@pytest.mark.slow
def test_answer_subgraph_and_bad_input_in_process(ddb_file: Path) -> None:
    client = TestClient(create_app(ServerSettings(kg=ddb_file)))
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["kg"]["nodes"] == 9958 and "P_sub+F_s" in health["combos"]

    res = client.post("/v1/answer", json={"question": QUESTION, "choices": CHOICES, "combo": "P_sub+F_t"})
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["prediction"] in "ABCD" and body["choice_text"] in CHOICES
    assert sum(body["probabilities"].values()) == pytest.approx(1.0, abs=1e-6)
    usage = body["usage"]
    assert body["combo"] == "P_sub+F_t" and body["prep_ms"] > 0
    assert usage["calls"] + usage["cached_calls"] >= 1

    sub = client.post("/v1/subgraph", json={"question": QUESTION, "choices": CHOICES}).json()
    assert "Lisinopril" in [c for cs in sub["choice_concepts"] for c in cs]
    assert sub["triples"] and all(len(t) == 3 for t in sub["triples"])

    # each request grounds its own question, though neither names an id (both are "request")
    other = {"question": "Which drug treats type 2 diabetes?", "choices": ["Metformin", "Warfarin"],
             "combo": "P_sub+F_t"}
    knowledge = client.post("/v1/answer", json=other).json()["knowledge"]
    assert "Warfarin" in knowledge and "Lisinopril" not in knowledge
    assert client.post("/v1/answer", json=other | {"choices": ["a", "A "]}).status_code == 422

    assert client.post("/v1/answer", json={"question": QUESTION, "choices": ["only"]}).status_code == 422
    assert client.post("/v1/answer", json={"question": "", "choices": CHOICES}).status_code == 422
    bad = client.post("/v1/answer", json={"question": QUESTION, "choices": CHOICES, "combo": "P_x+F_t"})
    assert bad.status_code == 422 and "unknown combination" in bad.json()["detail"]


@pytest.mark.slow
def test_the_scoring_rule_reaches_the_answers(ddb_file: Path) -> None:
    """``scoring="mean"`` ranks by per-token mean log-probability, ``"pmi"`` by the gain over each choice's
    context-free log-probability: other probabilities than the sum's; an unknown rule is refused by name."""
    ask = {"question": QUESTION, "choices": CHOICES, "combo": "P_sub+F_t"}
    by_sum = TestClient(create_app(ServerSettings(kg=ddb_file))).post("/v1/answer", json=ask).json()
    by_mean = TestClient(create_app(ServerSettings(kg=ddb_file, scoring="mean"))).post("/v1/answer", json=ask)
    assert by_mean.status_code == 200, by_mean.text
    assert by_mean.json()["probabilities"] != pytest.approx(by_sum["probabilities"], abs=1e-3)
    by_pmi = TestClient(create_app(ServerSettings(kg=ddb_file, scoring="pmi"))).post("/v1/answer", json=ask)
    assert by_pmi.status_code == 200, by_pmi.text
    assert by_pmi.json()["probabilities"] != pytest.approx(by_sum["probabilities"], abs=1e-3)
    assert sum(by_pmi.json()["probabilities"].values()) == pytest.approx(1.0)
    with pytest.raises(ConfigError, match="scoring"):
        create_app(ServerSettings(kg=ddb_file, scoring="max"))


@pytest.mark.slow
def test_a_bandit_brings_the_scoring_rule_it_was_trained_with(ddb_file: Path, tmp_path: Path) -> None:
    bandit = PromptBandit(384)
    bandit.scoring = "mean"
    path = bandit.save(tmp_path / "bandit.npz")
    assert build_injector(ddb_file, bandit=path).config.scoring == "mean"
    assert build_injector(ddb_file, bandit=path, scoring="mean").config.scoring == "mean"
    assert build_injector(ddb_file).config.scoring == "sum"
    with pytest.raises(ConfigError, match="trained with 'mean'"):
        build_injector(ddb_file, bandit=path, scoring="sum")



def _post(url: str, payload: dict[str, Any]) -> dict[str, Any]:
    req = urllib.request.Request(url, json.dumps(payload).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        out: dict[str, Any] = json.loads(resp.read())
        return out


@pytest.mark.slow
def test_kgwise_serve_answers_over_loopback(ddb_file: Path) -> None:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "kgwise.cli.main", "serve", "--kg", str(ddb_file), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=os.environ.copy(),
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(base + "/health", timeout=5) as resp:
                    assert json.loads(resp.read())["status"] == "ok"
                break
            except (urllib.error.URLError, ConnectionError):
                assert proc.poll() is None, proc.stdout.read().decode() if proc.stdout else ""
                assert time.monotonic() < deadline, "server did not start within 120 s"
                time.sleep(0.5)
        body = _post(base + "/v1/answer", {"question": QUESTION, "choices": CHOICES})
        assert body["combo"] == "P_sub+F_s" and body["choice_text"] in CHOICES
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
def test_answers_carry_a_calibrated_set_when_configured(ddb_file: Path, tmp_path: Path) -> None:
    import numpy as np

    from kgwise.conformal.split import SplitConformal, SplitConformalConfig
    from kgwise.inject.calibration import pipeline_of

    rng = np.random.default_rng(0)
    cal = SplitConformal(SplitConformalConfig(alpha=0.2)).conformalize(
        rng.dirichlet(np.ones(4), size=50), rng.integers(0, 4, size=50))
    injector = build_injector(ddb_file)
    path = cal.save(tmp_path / "cal.json", {"made_with": pipeline_of(injector, "P_sub+F_t")})
    client = TestClient(create_app(ServerSettings(kg=ddb_file, calibration=path), injector))
    health = client.get("/health").json()
    assert health["calibrated"] is True and health["calibration_mismatch"] == []
    ask = {"question": QUESTION, "choices": CHOICES}
    body = client.post("/v1/answer", json=ask).json()  # answered with the calibrated combination
    assert body["combo"] == "P_sub+F_t" and body["guaranteed"] is True
    probs = body["probabilities"]
    expected = [k for k in probs if 1 - probs[k] <= cal.quantile()]
    assert body["prediction_set"] == expected
    everything = client.post("/v1/answer", json=ask | {"alpha": 0.0}).json()
    assert everything["prediction_set"] == ["A", "B", "C", "D"]
    other = client.post("/v1/answer", json=ask | {"combo": "P_sub+F_s"}).json()
    assert "prediction_set" not in other and other["guaranteed"] is False
    assert other["calibration_mismatch"] == ["combo: calibrated with 'P_sub+F_t', answering with 'P_sub+F_s'"]
    bad = client.post("/v1/answer", json={"question": QUESTION, "choices": CHOICES, "alpha": 2})
    assert bad.status_code == 422
    # a calibration made with another LLM is refused when the service starts
    other_llm = cal.save(tmp_path / "other.json", {"made_with": {**pipeline_of(injector, None), "llm": "x"}})
    with pytest.raises(ConfigError, match="llm: calibrated with 'x', answering with 'smollm2-135m'"):
        create_app(ServerSettings(kg=ddb_file, calibration=other_llm), injector)
