"""UAG's calibrated answer set (``kgwise.app.answer_sets``) for real WebQSP questions over the Freebase
fragment, Φ(P) written live by the local model, and the same set through the CLI and the server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kgwise.app import UAGApp
from kgwise.errors import ConfigError, DataError

QUESTION = "what does jamaican people speak?"


@pytest.mark.slow
def test_answer_set_of_a_question(uag_calibration: Path) -> None:
    with pytest.raises(ConfigError, match="--llm"):
        UAGApp(uag_calibration)  # recorded generations cannot answer new questions
    app = UAGApp(uag_calibration, llm="smollm2-135m")
    assert app.mismatch == () and app.same_generator is False and app.guaranteed is False
    status = app.status()
    assert status.alpha == 0.4 and status.delta == 0.05 and status.kg.endswith("freebase_fragment.tsv")
    r = app.answer(QUESTION, ["Jamaica", "No Such Entity 7"])
    s = r.answer_set
    assert s.alpha == 0.4 and s.generation and s.unknown_topic_entities == ["No Such Entity 7"]
    assert all(app.kg.find(a) is not None for a in r.answers)  # KG labels, not free text
    assert r.guaranteed is False and len(r.lambda_) == 4 and r.to_dict()["lambda"] == list(r.lambda_)
    with pytest.raises(DataError, match="No Such Entity 9"):
        app.answer("who?", ["No Such Entity 9"])
    with pytest.raises(ConfigError, match="topic entity"):
        app.answer("who?", [" "])
    with pytest.raises(ConfigError, match="empty"):
        app.answer("  ", ["Jamaica"])


@pytest.mark.slow
def test_the_cli_and_the_server_give_the_same_set(uag_calibration: Path, tmp_path: Path) -> None:
    from kgwise.cli.main import app as cli
    from kgwise.server import ServerSettings, create_app

    app = UAGApp(uag_calibration, llm="smollm2-135m")
    expected = json.loads(json.dumps(app.answer(QUESTION, ["Jamaica"]).to_dict()))
    with TestClient(create_app(ServerSettings(uag=uag_calibration, uag_llm="smollm2-135m"))) as client:
        assert client.get("/health").json()["uag"] == json.loads(json.dumps(app.status().to_dict()))
        ask = {"question": QUESTION, "topic_entities": ["Jamaica"]}
        body = client.post("/v1/answer-set", json=ask).json()
    assert body == expected
    res = CliRunner().invoke(cli, ["uag", "answer", QUESTION, "--topic", "Jamaica", "--kg", app.kg_file,
                                   "--uag", str(uag_calibration), "--llm", "smollm2-135m",
                                   "--json", str(tmp_path / "a.json")])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "a.json").read_text()) == expected
