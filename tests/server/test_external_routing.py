"""External routing over HTTP, a view of the served pipeline (``Pipeline.route`` / ``settle`` / ``cancel``):
route → feedback with deferred rewards, the budget's refusals, 4xx naming the field, the state kept in the
pipeline's state directory. Real parts: the pipeline from a kgwise.toml over a small KG, the real question
encoder (all-MiniLM-L6-v2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kgwise.app import Pipeline
from kgwise.cli.main import app as cli
from kgwise.server import ServerSettings, create_app
from kgwise.server.pipeline_adapter import pipeline_hub

QUESTIONS = ["Which drug treats high blood pressure?", "What does insulin treat?",
             "Who discovered penicillin?", "What does levothyroxine treat?"]
PRICES = {"gnn": 0.0, "small": 0.1, "big": 0.4}


def client_of(served: Any) -> TestClient:
    return TestClient(create_app(ServerSettings(), pipelines=pipeline_hub({"kgwise": served})))


def test_route_feedback_budget_and_resume(tmp_path: Path, make_external: Any) -> None:
    served = make_external(tmp_path)
    with client_of(served) as client:
        decisions = []
        for q in QUESTIONS:
            body = client.post("/v1/route", json={"question": q}).json()
            assert body["arm"] in PRICES and body["bound"] == PRICES[body["arm"]] and body["decision"]
            decisions.append(body)
        assert decisions[1]["question_entities"] == ["insulin"]  # grounded in the pipeline's KG
        status = client.get("/v1/route/status").json()
        assert status["routed"] == len(QUESTIONS) and status["reserved"] == pytest.approx(
            sum(d["bound"] for d in decisions))
        spent = 0.0
        for body in reversed(decisions):  # outcomes arrive later, in any order
            res = client.post("/v1/route/feedback", json={"decision": body["decision"], "reward": 1,
                                                           "cost": body["bound"]})
            assert res.status_code == 200, res.text
            spent += body["bound"]
            assert res.json()["spent"] == pytest.approx(spent) and res.json()["outcome"] == "settled"
        again = client.post("/v1/route/feedback", json={"decision": decisions[0]["decision"], "reward": 1,
                                                         "cost": 0})
        assert again.status_code == 404 and "decision" in again.text and "settled" in again.text
        health = client.get("/health").json()
        assert health["status"] == "ok" and "router" not in health  # one router: the pipeline's
    served.close()
    with Pipeline.from_config(tmp_path / "kgwise.toml", tmp_path / "state", models=False) as pipe:
        st = pipe.status()  # the state directory resumes the spending and the learning
    assert st.spent == pytest.approx(spent) and st.questions == len(QUESTIONS) and st.routed == 0
    assert sum(a.pulls for a in st.arms) == len(QUESTIONS)


def test_refused_requests_are_4xx_naming_the_field_and_change_nothing(tmp_path: Path,
                                                                     make_external: Any) -> None:
    served = make_external(tmp_path)
    with client_of(served) as client:
        # a cost above the decision's bound is refused: nothing is spent, the decision still waits
        d = client.post("/v1/route", json={"question": QUESTIONS[0], "costs": {"small": 0, "big": 0}}).json()
        over = client.post("/v1/route/feedback", json={"decision": d["decision"], "reward": 0, "cost": 0.05})
        assert over.status_code == 422 and "above the bound 0" in over.json()["detail"]
        status = client.get("/v1/route/status").json()
        assert status["overrun"] == 0 and status["spent"] == 0 and status["routed"] == 1
        assert client.post("/v1/route/feedback", json={"decision": d["decision"], "reward": 0,
                                                       "cost": 0}).status_code == 200
        for body, field in (({"question": "x", "costs": [0.1]}, "costs"), ({"question": ""}, "question"),
                            ({"question": "x", "costs": {"gpu": 0}}, "costs.gpu")):
            res = client.post("/v1/route", json=body)
            assert res.status_code == 422 and field in res.text, (body, res.text)
        res = client.post("/v1/route/feedback", json={"decision": "nope", "reward": 2, "cost": 0})
        assert res.status_code == 422 and "reward" in res.text
        # another external arm the caller ran: its grade is learnt, nothing spent; an unknown one is named
        d = client.post("/v1/route", json={"question": QUESTIONS[1], "costs": {"small": 0, "big": 0}}).json()
        other = next(a for a in PRICES if a != d["arm"])
        fb = {"decision": d["decision"], "reward": 1, "cost": 0, "observed": {"gpu": 1}}
        res = client.post("/v1/route/feedback", json=fb)
        assert res.status_code == 422 and "observed.gpu" in res.text
        fb["observed"] = {other: 0}
        assert client.post("/v1/route/feedback", json=fb).json()["observed"] == {other: 0.0}
        status = client.get("/v1/route/status").json()
        assert status["questions"] == 2 and sum(a["pulls"] for a in status["arms"]) == 2
    served.close()


def test_waiting_decisions_hold_their_bound_and_the_budget_answers_429(tmp_path: Path,
                                                                        make_external: Any) -> None:
    served = make_external(tmp_path, gnn=0.8, small=0.8, big=0.8)
    try:
        with client_of(served) as client:
            first = client.post("/v1/route", json={"question": QUESTIONS[0]}).json()
            assert first["remaining_budget"] == pytest.approx(0.2)
            second = client.post("/v1/route", json={"question": QUESTIONS[1]})
            assert second.status_code == 429 and "0.8 held by decisions" in second.json()["detail"]
            fb = {"decision": first["decision"], "reward": 1, "cost": 0.5}
            left = client.post("/v1/route/feedback", json=fb).json()["remaining_budget"]
            assert left == pytest.approx(0.5)
            cheap = {a: 0.1 for a in PRICES}
            c = client.post("/v1/route", json={"question": QUESTIONS[2], "costs": cheap}).json()
            out = client.post("/v1/route/cancel", json={"decision": c["decision"]})
            assert out.status_code == 200 and out.json()["outcome"] == "cancelled"
            assert client.post("/v1/route/cancel", json={"decision": c["decision"]}).status_code == 404
            assert client.post("/v1/route", json={"question": "q", "model": "other"}).status_code == 404
    finally:
        served.close()


def test_a_router_file_of_the_previous_version_is_refused_by_serve(tmp_path: Path) -> None:
    router = tmp_path / "router.json"
    router.write_text(json.dumps({"kind": "CokeRouter", "version": 2}), encoding="utf-8")
    res = CliRunner().invoke(cli, ["serve", "--config", str(router)])
    said = " ".join(res.output.split())
    assert res.exit_code == 2 and "neither read nor migrated" in said and 'kind = "external"' in said
    res = CliRunner().invoke(cli, ["status", "--config", str(router)])
    assert res.exit_code == 2 and "neither read nor migrated" in " ".join(res.output.split())


def test_one_budget_for_the_arms_kgwise_runs_and_the_external_ones(tmp_path: Path, data_dir: Path,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   make_replay_external: Any) -> None:
    """One pipeline, one router, one budget: a chat completion answered by an arm kgwise runs (ChatGPT's
    recorded WebQSP answers, priced at its list price) and an external decision the caller settles spend
    the same budget, and /v1/status and /v1/route/status agree on it."""
    monkeypatch.setenv("KGWISE_CACHE", str(tmp_path / "cache"))  # a cached response would cost nothing
    from kgwise.datasets import load

    questions = load("webqsp", "test", data_dir)
    served = make_replay_external(tmp_path)
    try:
        with client_of(served) as client:
            chat = client.post("/v1/chat/completions", json={
                "model": "kgwise", "messages": [{"role": "user", "content": questions[0].text}]})
            assert chat.status_code == 200 and chat.headers["x-kgwise-arm"] == "chatgpt"
            paid = float(chat.headers["x-kgwise-cost"])
            assert paid > 0
            d = client.post("/v1/route", json={"question": questions[1].text}).json()
            assert d["arm"] == "mine" and d["remaining_budget"] == pytest.approx(1 - paid - 0.01)
            fb = client.post("/v1/route/feedback", json={"decision": d["decision"], "reward": 1,
                                                          "cost": 0.004}).json()
            assert fb["spent"] == pytest.approx(paid + 0.004)
            assert client.get("/v1/status").json()["pipelines"][0]["spent"] == pytest.approx(paid + 0.004)
            status = client.get("/v1/route/status").json()
            assert {a["name"]: a["pulls"] for a in status["arms"]} == {"chatgpt": 1, "mine": 1}
    finally:
        served.close()
