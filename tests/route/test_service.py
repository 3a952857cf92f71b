"""A router in use: decisions that wait for feedback across restarts, one owner per state file, and
routing from the shell (`kgwise route status/select/feedback`)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from kgwise.cli.main import app as cli
from kgwise.errors import ConfigError
from kgwise.route.coke import CokeRouter
from kgwise.route.service import RoutingService, UnknownDecisionError, read_status

QUESTIONS = ["Which drug treats high blood pressure?", "Where is the Eiffel Tower?", "Who wrote Hamlet?"]
DIM = 8


def embed(text: str) -> np.ndarray:
    return np.ones(DIM) / np.sqrt(DIM)


@pytest.fixture()
def router_file(tmp_path: Path) -> Path:
    path = tmp_path / "router.json"
    CokeRouter(["gnn", "small", "big"], ["KGM", "LLM", "LLM"], DIM, budget=1.0).save(path)
    return path


def test_waiting_decisions_survive_a_restart_and_state_is_saved_without_a_request(router_file: Path) -> None:
    service = RoutingService(router_file, embed, DIM, max_pending=2, save_every_s=0.1)
    decisions = [service.route(q, [0.1, 0.2, 0.3])["decision"] for q in QUESTIONS]
    assert len(service.pending) == 2 and decisions[0] not in service.pending  # the oldest was called off
    assert service.router.reserved == pytest.approx(sum(p.bound for p in service.pending.values()))
    time.sleep(0.5)  # the saving thread writes the state: no request, no shutdown
    assert len(json.loads(router_file.read_text())["pending"]) == 2
    reserved = service.router.reserved
    service._stop.set()  # a crash: the thread stops, nothing more is written, the process lets go
    service._file_lock.release()
    with RoutingService(router_file, embed, DIM) as restarted:
        assert restarted.router.reserved == pytest.approx(reserved)
        out = restarted.feedback(decisions[2], 1.0, 0.1)
        assert out["spent"] == pytest.approx(0.1) and len(restarted.pending) == 1
        with pytest.raises(UnknownDecisionError, match="unknown decision"):
            restarted.feedback(decisions[2], 1.0, 0.1)
        with pytest.raises(ConfigError, match="reward"):
            restarted.feedback(next(iter(restarted.pending)), 2.0, 0.1)
        assert len(restarted.pending) == 1  # a refused outcome keeps its decision waiting
    assert len(json.loads(router_file.read_text())["pending"]) == 1


def test_feedback_with_free_arms_observed(router_file: Path) -> None:
    with RoutingService(router_file, embed, DIM) as service:
        d = service.route(QUESTIONS[0], [0.0, 0.2, 0.3])
        chosen = d["arm"]
        other = next(a for a in ("gnn", "small") if a != chosen)
        for bad, match in (({"gpu": 1.0}, "not one of the router's arms"), ({chosen: 1.0}, "own arm"),
                           ({other: 1.5}, r"\[0, 1\]")):
            with pytest.raises(ConfigError, match=match):
                service.feedback(d["decision"], 1.0, 0.1, bad)
        assert d["decision"] in service.pending  # nothing was learned from a refused feedback
        alpha, beta = service.router.thompson.alpha.sum(), service.router.thompson.beta.sum()
        service.feedback(d["decision"], 1.0, 0.0, {other: 0.0})
        r = service.router
        assert r.pulls.sum() == 1 and r.spent == 0.0  # the observed arm was not pulled and spent nothing
        assert (r.thompson.alpha.sum(), r.thompson.beta.sum()) == (alpha + 1, beta + 1)  # right; wrong
    res = CliRunner().invoke(cli, ["route", "feedback", str(router_file), "nope", "--reward", "1", "--cost",
                                   "0", "--observed", "gnn"])
    assert res.exit_code == 2 and "expected ARM=REWARD" in res.output


def test_one_process_at_a_time_owns_a_state_file(router_file: Path) -> None:
    with RoutingService(router_file, embed, DIM) as owner:
        with pytest.raises(ConfigError, match="in use by another process"):
            RoutingService(router_file, embed, DIM)
        res = CliRunner().invoke(cli, ["route", "select", str(router_file), QUESTIONS[0], "--cost", "0",
                                       "--cost", "0.1", "--cost", "0.2"])
        assert res.exit_code == 2 and "in use by another process" in " ".join(res.output.split())
        owner.route(QUESTIONS[0], [0.0, 0.1, 0.2])
        assert read_status(router_file)["questions"] == 0  # status reads the file; the owner has not saved
    assert read_status(router_file)["questions"] == 1
    with pytest.raises(ConfigError, match="16-d"):
        RoutingService(router_file, embed, 16)
    RoutingService(router_file, embed, DIM).close()  # a refused opening let go of the file


def test_routing_from_the_shell(router_file: Path, tmp_path: Path) -> None:
    from kgwise.embed import MiniLM

    path = tmp_path / "minilm.json"
    CokeRouter(["gnn", "small", "big"], ["KGM", "LLM", "LLM"], MiniLM().dim, budget=0.5).save(path)
    run = CliRunner().invoke
    costs = ["--cost", "0.05", "--cost", "0.1", "--cost", "0.3"]
    res = run(cli, ["route", "select", str(path), QUESTIONS[1], *costs])
    assert res.exit_code == 0, res.output
    decision = json.loads(res.stdout)
    assert decision["arm"] in ("gnn", "small", "big") and decision["decision"]
    status = json.loads(run(cli, ["route", "status", str(path)]).stdout)
    held = [0.05, 0.1, 0.3][decision["arm_index"]]
    assert status["pending"] == 1 and status["reserved"] == pytest.approx(held)
    res = run(cli, ["route", "feedback", str(path), decision["decision"], "--reward", "1", "--cost", "0.05"])
    assert res.exit_code == 0, res.output
    status = json.loads(run(cli, ["route", "status", str(path)]).stdout)
    assert status["pending"] == 0 and status["spent"] == pytest.approx(0.05) and sum(status["pulls"]) == 1
    assert status["reserved"] == 0
    res = run(cli, ["route", "feedback", str(path), decision["decision"], "--reward", "1", "--cost", "0"])
    assert res.exit_code == 2 and "unknown decision" in res.output
    res = run(cli, ["route", "select", str(path), QUESTIONS[2], "--cost", "1", "--cost", "1", "--cost", "1"])
    assert res.exit_code == 1 and json.loads(res.stdout)["arm"] is None  # nothing fits: says why
    assert "0.45" in json.loads(res.stdout)["reason"]
    assert run(cli, ["route", "select", str(path), "q", "--cost", "0"]).exit_code == 2  # one cost per arm


def test_a_crashed_owner_leaves_the_state_file_free(router_file: Path) -> None:
    import subprocess
    import sys

    code = ("import sys, time, numpy as np; from pathlib import Path; "
            "from kgwise.route.service import RoutingService; "
            f"s = RoutingService(Path(sys.argv[1]), lambda t: np.ones({DIM}), {DIM}); "
            "print('ready', flush=True); time.sleep(60)")
    owner = subprocess.Popen([sys.executable, "-c", code, str(router_file)], stdout=subprocess.PIPE,
                             text=True)
    try:
        assert owner.stdout is not None and owner.stdout.readline().strip() == "ready"
        with pytest.raises(ConfigError, match="in use by another process"):
            RoutingService(router_file, embed, DIM)
    finally:
        owner.kill()  # no close(), no clean-up: as a crash
        owner.wait()
    RoutingService(router_file, embed, DIM).close()
