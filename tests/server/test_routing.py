"""Coke over HTTP: route → feedback with deferred rewards, budget errors, state saved and resumed."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kgwise.cli.main import app as cli
from kgwise.embed import MiniLM
from kgwise.errors import ConfigError
from kgwise.route.arms import ArmSpec
from kgwise.route.coke import CokeRouter
from kgwise.server import ServerSettings, create_app

QUESTIONS = ["Which drug treats high blood pressure?", "Where is the Eiffel Tower?",
             "Who wrote Hamlet?", "What is the capital of Jamaica?"]


@pytest.fixture()
def router_file(tmp_path: Path) -> Path:
    out = tmp_path / "router.json"
    res = CliRunner().invoke(cli, ["route", "init", "--arm", "gnn:KGM:0.7", "--arm", "small:LLM",
                                   "--arm", "big:LLM:0.9", "--budget", "1.0", "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def test_route_init_writes_a_router_and_rejects_bad_input(router_file: Path, tmp_path: Path) -> None:
    r = CokeRouter.load(router_file)
    assert r.names == ["gnn", "small", "big"] and r.clusters == ["KGM", "LLM", "LLM"]
    assert r.reported_accuracy == [0.7, None, 0.9] and r.budget == 1.0 and r.dim == MiniLM().dim
    for bad in (["--arm", "gnn:KGM", "--budget", "0"], ["--arm", "gnn:GPU", "--budget", "1"],
                ["--arm", "gnn:KGM:high", "--budget", "1"], ["--arm", "gnn", "--budget", "1"]):
        res = CliRunner().invoke(cli, ["route", "init", *bad, "--out", str(tmp_path / "x.json")])
        assert res.exit_code != 0 and not (tmp_path / "x.json").exists(), bad


def test_route_feedback_budget_and_resume(router_file: Path) -> None:
    settings = ServerSettings(router=router_file, router_save_every_s=3600)
    costs = [0.0, 0.1, 0.4]
    with TestClient(create_app(settings)) as client:
        assert client.get("/health").json()["router"]["arms"] == ["gnn", "small", "big"]
        decisions = []
        for q in QUESTIONS:
            body = client.post("/v1/route", json={"question": q, "costs": costs}).json()
            assert body["arm"] in ("gnn", "small", "big") and body["decision"]
            decisions.append(body)
        assert client.get("/health").json()["router"]["pending"] == len(QUESTIONS)
        # rewards arrive later, in any order
        spent = 0.0
        for body in reversed(decisions):
            cost = costs[body["arm_index"]]
            fb = {"decision": body["decision"], "reward": 1, "cost": cost}
            res = client.post("/v1/route/feedback", json=fb)
            assert res.status_code == 200, res.text
            spent += cost
            assert res.json()["spent"] == pytest.approx(spent)
        again = client.post("/v1/route/feedback", json={"decision": decisions[0]["decision"], "reward": 1,
                                                         "cost": 0})
        assert again.status_code == 404  # once per decision
        # a cost above the decision's bound is refused (the service does not allow overruns); nothing is
        # spent and the decision still waits for a correct feedback
        d = client.post("/v1/route", json={"question": QUESTIONS[0], "costs": [0.0, 0.0, 0.0]}).json()
        over = client.post("/v1/route/feedback", json={"decision": d["decision"], "reward": 0, "cost": 0.05})
        assert over.status_code == 422 and "above the bound 0" in over.json()["detail"]
        router = client.get("/health").json()["router"]
        assert router["overrun"] == 0 and router["spent"] == pytest.approx(spent) and router["pending"] == 1
        ok = client.post("/v1/route/feedback", json={"decision": d["decision"], "reward": 0, "cost": 0})
        assert ok.status_code == 200, ok.text
        assert client.post("/v1/route", json={"question": "x", "costs": [0.1]}).status_code == 422
        assert client.post("/v1/route", json={"question": "", "costs": costs}).status_code == 422
        bad_reward = {"decision": "nope", "reward": 2, "cost": 0}
        assert client.post("/v1/route/feedback", json=bad_reward).status_code == 422
        # the free KG model answered too: its outcome is learned, nothing spent; an unknown arm is named
        d = client.post("/v1/route", json={"question": QUESTIONS[1], "costs": [0.0, 0.0, 0.0]}).json()
        others = [a for a in ("gnn", "small", "big") if a != d["arm"]]
        fb = {"decision": d["decision"], "reward": 1, "cost": 0, "observed": {"gpu": 1}}
        res = client.post("/v1/route/feedback", json=fb)
        assert res.status_code == 422 and "'gpu' is not one of the router's arms" in res.text
        fb["observed"] = {others[0]: 0}
        assert client.post("/v1/route/feedback", json=fb).status_code == 200
        health = client.get("/health").json()["router"]
    # the service wrote its state when it stopped: a new one resumes the spending and the bandits
    saved = CokeRouter.load(router_file)
    assert health["spent"] == pytest.approx(spent)
    assert saved.spent == pytest.approx(health["spent"]) and saved.questions_seen == len(QUESTIONS) + 2
    assert saved.pulls.sum() == len(QUESTIONS) + 2
    x = MiniLM().encode(["a new question"])[0]
    twin = CokeRouter.load(router_file)
    assert [saved.pull(x, costs) for _ in range(5)] == [twin.pull(x, costs) for _ in range(5)]
    assert json.loads(router_file.read_text())["kind"] == "CokeRouter"


def test_nothing_to_serve_and_dimension_mismatch(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        create_app(ServerSettings())
    small = tmp_path / "small.json"
    CokeRouter([ArmSpec("a", "KGM"), ArmSpec("b", "LLM")], 8, budget=1.0).save(small)
    with pytest.raises(ConfigError, match="8-d"):
        create_app(ServerSettings(router=small))


def test_decisions_awaiting_feedback_hold_their_cost_bound(router_file: Path) -> None:
    """Two decisions that each fit the budget alone may not both be approved before their feedback."""
    with TestClient(create_app(ServerSettings(router=router_file))) as client:
        first = client.post("/v1/route", json={"question": QUESTIONS[0], "costs": [0.8, 0.8, 0.8]}).json()
        assert first["decision"] and first["remaining_budget"] == pytest.approx(0.2)
        second = client.post("/v1/route", json={"question": QUESTIONS[1], "costs": [0.8, 0.8, 0.8]}).json()
        assert second["decision"] is None
        assert "0.2 (0 spent, 0.8 held by decisions awaiting feedback)" in second["reason"]
        fb = {"decision": first["decision"], "reward": 1, "cost": 0.5}
        assert client.post("/v1/route/feedback", json=fb).json()["remaining_budget"] == pytest.approx(0.5)


def test_a_malformed_router_state_is_named(tmp_path: Path) -> None:
    from kgwise.errors import DataError

    good = CokeRouter([ArmSpec("a", "KGM"), ArmSpec("b", "LLM")], 4, budget=1.0).state_dict()
    for broken, message in (({"kind": "CokeRouter"}, "missing 'budget'"), ([1, 2], "expected a JSON object"),
                            ({**good, "spent": "lots"}, "could not convert string to float"),
                            ({**good, "pulls": [0]}, "pulls do not match 2 arms")):
        path = tmp_path / "bad.json"
        path.write_text(json.dumps(broken))
        with pytest.raises(DataError, match=message) as err:
            create_app(ServerSettings(router=path))
        assert str(path) in str(err.value)


def test_route_init_keeps_a_router_in_use_and_reads_names_with_colons(router_file: Path) -> None:
    args = ["route", "init", "--arm", "openai:gpt-4o:LLM:0.9", "--arm", "gguf:/m/q.gguf:LLM", "--arm",
            "gnn:KGM", "--budget", "1"]
    res = CliRunner().invoke(cli, [*args, "--out", str(router_file)])
    assert res.exit_code == 2 and "pass --force to replace it" in " ".join(res.output.split())
    assert CokeRouter.load(router_file).names == ["gnn", "small", "big"]
    res = CliRunner().invoke(cli, [*args, "--out", str(router_file), "--force"])
    assert res.exit_code == 0, res.output
    r = CokeRouter.load(router_file)
    assert r.names == ["openai:gpt-4o", "gguf:/m/q.gguf", "gnn"] and r.reported_accuracy == [0.9, None, None]


def test_route_init_warm_starts_from_a_graded_log(tmp_path: Path) -> None:
    log = tmp_path / "graded.jsonl"
    rows = [{"question": q, "rewards": {"gnn": i % 2, "big": 1}} for i, q in enumerate(QUESTIONS)]
    log.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    out = tmp_path / "router.json"
    base = ["route", "init", "--arm", "gnn:KGM:0.7", "--arm", "small:LLM", "--arm", "big:LLM:0.9",
            "--budget", "1.0"]
    res = CliRunner().invoke(cli, [*base, "--out", str(out), "--warm-start", str(log)])
    assert res.exit_code == 0, res.output
    assert "warm-started from 8 outcomes on 4 questions" in " ".join(res.output.split())
    warm = CokeRouter.load(out)
    cold = CokeRouter(warm.arm_specs, warm.dim, budget=1.0)
    # KGM cluster: 2 right, 2 wrong; LLM cluster: 4 right (Eq. 5 on the logged outcomes)
    assert np.allclose(warm.thompson.alpha - cold.thompson.alpha, [2, 4])
    assert np.allclose(warm.thompson.beta - cold.thompson.beta, [2, 0])
    assert warm.spent == 0.0 and warm.pulls.sum() == 0
    log.write_text(json.dumps({"question": "q", "rewards": {"huge": 1}}) + "\n")
    res = CliRunner().invoke(cli, [*base, "--out", str(tmp_path / "x.json"), "--warm-start", str(log)])
    assert res.exit_code != 0 and "unknown arm 'huge'" in " ".join(res.output.split())
    assert not (tmp_path / "x.json").exists()


def test_costs_may_name_the_arms(router_file: Path) -> None:
    """``costs`` by arm name route as the same costs in the router's order; a mapping that misses an arm
    is a 422 naming it."""
    with TestClient(create_app(ServerSettings(router=router_file))) as client:
        body = client.post("/v1/route", json={"question": QUESTIONS[0],
                                              "costs": {"big": 0.9, "gnn": 0.9, "small": 0.9}}).json()
        assert body["arm"] in ("gnn", "small", "big") and body["remaining_budget"] == pytest.approx(0.1)
        res = client.post("/v1/route", json={"question": QUESTIONS[1], "costs": {"gnn": 0.0}})
        assert res.status_code == 422 and "missing small, big" in res.json()["detail"]
