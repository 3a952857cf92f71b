"""UAG over HTTP: ``POST /v1/answer-set`` with a calibration of real WebQSP questions over the Freebase
fragment, answered live by the local model."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from kgwise.conformal.calibrated import CalibratedUAG
from kgwise.errors import ConfigError
from kgwise.server import ServerSettings, create_app


@pytest.fixture(scope="module")
def calibration(uag_calibration: Path) -> Path:
    """UAG calibrated at α = 0.4 on 300 WebQSP questions with RoG's recorded generations."""
    return uag_calibration


def test_answer_set_route(calibration: Path) -> None:
    with pytest.raises(ConfigError, match="--llm"):
        create_app(ServerSettings(uag=calibration))  # recorded generations cannot answer new questions
    app = create_app(ServerSettings(uag=calibration, uag_llm="smollm2-135m"))
    with TestClient(app) as client:
        health = client.get("/health").json()
        assert health["uag"]["alpha"] == 0.4 and health["uag"]["same_generator_as_calibration"] is False
        assert health["uag"]["calibration_mismatch"] == []
        r = client.post("/v1/answer-set", json={"question": "what does jamaican people speak?",
                                                "topic_entities": ["Jamaica"]})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["alpha"] == 0.4 and body["delta"] == 0.05 and body["generation"]
        assert isinstance(body["answers"], list) and all(isinstance(a, str) for a in body["answers"])
        r = client.post("/v1/answer-set", json={"question": "who?", "topic_entities": ["No Such Entity 9"]})
        assert r.status_code == 422 and "No Such Entity 9" in r.json()["detail"]
        r = client.post("/v1/answer-set", json={"question": "who?", "topic_entities": []})
        assert r.status_code == 422
        assert client.post("/v1/answer", json={"question": "q", "choices": ["a", "b"]}).status_code == 404


def test_another_kg_than_the_calibration_is_refused_unless_allowed(calibration: Path, tmp_path: Path) -> None:
    """A graph with one triple less is another graph: its answer sets carry no guarantee."""
    lines = Path(CalibratedUAG.load(calibration).summary["kg"]).read_text(encoding="utf-8").splitlines()
    other = tmp_path / "other.tsv"
    other.write_text("\n".join(lines[1:]) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="kg: calibrated with 'sha1:"):
        create_app(ServerSettings(uag=calibration, uag_kg=str(other), uag_llm="smollm2-135m"))
    app = create_app(ServerSettings(uag=calibration, uag_kg=str(other), uag_llm="smollm2-135m",
                                    allow_calibration_mismatch=True))
    with TestClient(app) as client:
        assert client.get("/health").json()["uag"]["calibration_mismatch"][0].startswith("kg: ")
        r = client.post("/v1/answer-set", json={"question": "what does jamaican people speak?",
                                                "topic_entities": ["Jamaica"]})
        assert r.status_code == 200 and r.json()["guaranteed"] is False
