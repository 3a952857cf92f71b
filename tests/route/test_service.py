"""A router in use: decisions that wait for feedback across restarts, one owner per state file, and
routing from the shell (`kgwise route status/select/feedback`)."""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from typer.testing import CliRunner

from kgwise.cli.main import app as cli
from kgwise.errors import ConfigError, DataError
from kgwise.route import service as service_module
from kgwise.route.arms import ArmSpec
from kgwise.route.coke import BudgetExceededError, CokeRouter
from kgwise.route.service import RoutingService, UnknownDecisionError, read_status, repair_state

QUESTIONS = ["Which drug treats high blood pressure?", "Where is the Eiffel Tower?", "Who wrote Hamlet?"]
DIM = 8
ARMS = [ArmSpec("gnn", "KGM"), ArmSpec("small", "LLM"), ArmSpec("big", "LLM")]


def embed(text: str) -> np.ndarray:
    return np.ones(DIM) / np.sqrt(DIM)


@pytest.fixture()
def router_file(tmp_path: Path) -> Path:
    path = tmp_path / "router.json"
    CokeRouter(ARMS, DIM, budget=1.0).save(path)
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
    CokeRouter(ARMS, MiniLM().dim, budget=0.5).save(path)
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


def test_a_state_file_of_the_first_format_resumes_its_waiting_decision(tmp_path: Path) -> None:
    """``router_v1.json`` (written before routers named their arms; its waiting decision names arm 1 by
    position) opens, takes the decision's feedback on arm "gpt", and is written back in the current format."""
    path = tmp_path / "router.json"
    shutil.copy(Path(__file__).parent / "data" / "router_v1.json", path)
    with RoutingService(path, lambda text: np.ones(3) / np.sqrt(3), 3) as service:
        (decision, waiting), = service.pending.items()
        assert service.router.names[waiting.arm] == "gpt" and waiting.bound == 0.3
        out = service.feedback(decision, 1.0, 0.25)
        assert out["arm"] == "gpt" and out["spent"] == pytest.approx(0.75)
        service.route("one more", {"gnn": 0.0, "gpt": 0.5})
    state = json.loads(path.read_text())
    assert state["version"] == 2 and [a["name"] for a in state["arms"]] == ["gnn", "gpt"]
    assert [row["arm"] for row in state["pending"]] in (["gnn"], ["gpt"])
    state["pending"][0]["arm"] = 7
    path.write_text(json.dumps(state))
    with pytest.raises(DataError, match="arm 7 is not one of the router's arms"):
        read_status(path)


def test_a_cost_above_its_bound_is_refused_and_spending_stays_finite(router_file: Path) -> None:
    with RoutingService(router_file, embed, DIM) as service:
        d = service.route(QUESTIONS[0], [0.1, 0.1, 0.1])
        for cost in (100.0, 1e308):
            with pytest.raises(BudgetExceededError, match=r"above the bound 0\.1"):
                service.feedback(d["decision"], 1.0, cost)
        with pytest.raises(ConfigError, match="finite"):
            service.feedback(d["decision"], 1.0, float("inf"))
        assert service.router.spent == 0.0 and d["decision"] in service.pending
        assert service.feedback(d["decision"], 1.0, 0.1)["spent"] == pytest.approx(0.1)
    with RoutingService(router_file, embed, DIM, allow_overrun=True) as lax:
        first, second = (lax.route(q, [0.0, 0.0, 0.0])["decision"] for q in QUESTIONS[1:])
        assert "above the bound" in lax.feedback(first, 0.0, 1e308)["warning"]
        with pytest.raises(BudgetExceededError, match="non-finite"):  # 1e308 + 1e308 = inf
            lax.feedback(second, 0.0, 1e308)
        assert np.isfinite(lax.router.spent) and second in lax.pending


@pytest.mark.parametrize("field, value", [("spent", float("inf")), ("spent", float("nan")), ("spent", -1.0),
                                          ("overrun", float("inf")), ("arm_cost", [0.0, float("nan"), 0.0])])
def test_state_files_with_bad_money_are_refused_and_repaired(router_file: Path, field: str,
                                                             value: object) -> None:
    state = json.loads(router_file.read_text())
    state[field] = value
    router_file.write_text(json.dumps(state))  # Infinity / NaN, as a JSON writer that allows them writes
    with pytest.raises(DataError, match=f"{field} must be finite numbers ≥ 0") as err:
        RoutingService(router_file, embed, DIM)
    assert str(router_file) in str(err.value)
    if field == "spent":
        with pytest.raises(ConfigError, match="give it with --spent"):
            repair_state(router_file)
    report = repair_state(router_file, spent=0.25 if field == "spent" else None)
    assert report.changes and report.backup is not None and Path(report.backup).read_text()
    with RoutingService(router_file, embed, DIM) as service:
        assert service.router.spent == pytest.approx(0.25 if field == "spent" else 0.0)


def test_repair_from_the_shell_and_while_owned(router_file: Path) -> None:
    state = json.loads(router_file.read_text())
    state["spent"] = float("inf")
    router_file.write_text(json.dumps(state))
    res = CliRunner().invoke(cli, ["route", "status", str(router_file)])
    assert res.exit_code == 2 and "route repair" in " ".join(res.output.split())
    res = CliRunner().invoke(cli, ["route", "repair", str(router_file), "--spent", "0"])
    assert res.exit_code == 0, res.output
    assert read_status(router_file)["spent"] == 0.0
    with RoutingService(router_file, embed, DIM):
        res = CliRunner().invoke(cli, ["route", "repair", str(router_file), "--spent", "0"])
        assert res.exit_code == 2 and "in use by another process" in " ".join(res.output.split())


def test_decisions_expire_and_can_be_cancelled(router_file: Path) -> None:
    now = [1000.0]
    with RoutingService(router_file, embed, DIM, pending_ttl_s=60, clock=lambda: now[0]) as service:
        old = service.route(QUESTIONS[0], [0.3, 0.3, 0.3])["decision"]
        now[0] += 30
        kept = service.route(QUESTIONS[1], [0.2, 0.2, 0.2])["decision"]
        now[0] += 31  # the first is 61 s old
        assert service.status()["reserved"] == pytest.approx(0.2)
        with pytest.raises(UnknownDecisionError, match="expired"):
            service.feedback(old, 1.0, 0.0)
        out = service.cancel(kept)
        assert out["released"] == pytest.approx(0.2) and service.router.reserved == 0
        with pytest.raises(UnknownDecisionError, match="cancelled"):
            service.feedback(kept, 1.0, 0.0)
        waiting = service.route(QUESTIONS[2], [0.1, 0.1, 0.1])["decision"]
    now[0] += 59  # the creation time is saved: a restart does not restart the clock
    with RoutingService(router_file, embed, DIM, pending_ttl_s=60, clock=lambda: now[0]) as again:
        assert waiting in again.pending
        now[0] += 2
        assert again.expire() == 1 and again.router.reserved == 0


def test_server_side_bounds_cap_the_clients(router_file: Path) -> None:
    with RoutingService(router_file, embed, DIM, max_costs=[0.0, 0.05, 0.2]) as service:
        d = service.route(QUESTIONS[0], [5.0, 5.0, 5.0])  # a greedy client cannot hold the whole budget
        assert d["bound"] <= 0.2 and service.router.reserved <= 0.2
        d2 = service.route(QUESTIONS[1])  # no costs: the service's own bounds
        assert d2["bound"] == [0.0, 0.05, 0.2][d2["arm_index"]]
        assert service.bounds([0.01, 0.01, 0.01]) == [0.0, 0.01, 0.01]  # lower client bounds are kept
    assert read_status(router_file)["max_costs"] == [0.0, 0.05, 0.2]  # saved with the state
    with RoutingService(router_file, embed, DIM) as again:
        assert again.max_costs == [0.0, 0.05, 0.2]
    with pytest.raises(ConfigError, match="max_costs must be 3 finite"):
        RoutingService(router_file, embed, DIM, max_costs=[1.0, float("nan"), 1.0])


def test_the_lock_and_the_write_go_through_a_symlink(router_file: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.json"
    link.symlink_to(router_file)
    with RoutingService(router_file, embed, DIM) as owner:
        with pytest.raises(ConfigError, match="in use by another process"):
            RoutingService(link, embed, DIM)  # one state, one owner, however it is spelled
        owner.route(QUESTIONS[0], [0.1, 0.1, 0.1])
    assert link.is_symlink() and read_status(link)["questions"] == 1


def test_saving_copies_under_the_lock_and_writes_outside_it(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A large state (384-d, 8 arms, 2,000 waiting decisions) is serialised and written with the service
    lock free, so routing waits only for the copy."""
    path = tmp_path / "big.json"
    names = [f"arm{i}" for i in range(8)]
    CokeRouter([ArmSpec(n, "LLM") for n in names], 384, budget=1e9).save(path)
    x = np.ones(384) / np.sqrt(384)
    held_while_writing: list[bool] = []
    real_write = service_module.write_text_atomic

    def write_checking_the_lock(target: Path, text: str) -> None:
        held_while_writing.append(service.lock.locked())
        real_write(target, text)

    monkeypatch.setattr(service_module, "write_text_atomic", write_checking_the_lock)
    with RoutingService(path, lambda _: x, 384) as service:
        for i in range(2000):
            service.route("q" * 200 + str(i), [0.1] * 8)
        service.save()
        timing = service.last_save
    assert held_while_writing and not any(held_while_writing)
    assert timing.bytes > 5_000_000 and read_status(path)["pending"] == 2000
    print(f"save of {timing.bytes / 1e6:.1f} MB: {timing.copy_s * 1000:.1f} ms under the lock, "
          f"{timing.write_s * 1000:.1f} ms serialising and writing outside it")


class BudgetMachine(RuleBasedStateMachine):
    """Route, feedback (right, over-bound, huge and non-finite costs), cancel, expiry and restart in any
    order: the budget is never exceeded, the spending never non-finite, the holds match the decisions."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp())
        self.path = self.dir / "r.json"
        arms = [ArmSpec("gnn", "KGM"), ArmSpec("small", "LLM"), ArmSpec("big", "LLM")]
        CokeRouter(arms, DIM, budget=1.0).save(self.path)
        self.now = [0.0]
        self.service = self._open()
        self.decisions: list[str] = []

    def _open(self) -> RoutingService:
        return RoutingService(self.path, embed, DIM, max_pending=5, pending_ttl_s=10.0,
                              max_costs=[0.0, 0.3, 0.6], clock=lambda: self.now[0])

    @rule(costs=st.lists(st.floats(0, 10), min_size=3, max_size=3))
    def route(self, costs: list[float]) -> None:
        d = self.service.route("q", costs)["decision"]
        if d is not None:
            self.decisions.append(d)

    @rule(pick=st.integers(0, 50), cost=st.one_of(st.floats(0, 1), st.sampled_from([1e308, 5.0])),
          reward=st.floats(0, 1))
    def feedback(self, pick: int, cost: float, reward: float) -> None:
        if not self.decisions:
            return
        d = self.decisions[pick % len(self.decisions)]
        with contextlib.suppress(UnknownDecisionError, BudgetExceededError):
            self.service.feedback(d, reward, cost)

    @rule(pick=st.integers(0, 50))
    def cancel(self, pick: int) -> None:
        if self.decisions:
            with contextlib.suppress(UnknownDecisionError):
                self.service.cancel(self.decisions[pick % len(self.decisions)])

    @rule(seconds=st.floats(0, 15))
    def wait(self, seconds: float) -> None:
        self.now[0] += seconds

    @rule()
    def restart(self) -> None:
        self.service.close()
        self.service = self._open()

    @invariant()
    def within_budget(self) -> None:
        r = self.service.router
        assert np.isfinite(r.spent) and r.spent >= 0
        assert r.spent + r.reserved <= r.budget + 1e-9
        assert r.reserved == pytest.approx(sum(p.bound for p in self.service.pending.values()))

    def teardown(self) -> None:
        self.service.close()


BudgetMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=30, deadline=None)
test_budget_sequences = BudgetMachine.TestCase


def test_commands_do_not_overwrite_a_router(router_file: Path, tmp_path: Path) -> None:
    before = router_file.read_text()
    res = CliRunner().invoke(cli, ["route", "status", str(router_file), "--json", str(router_file)])
    assert res.exit_code == 2 and "is also ROUTER" in " ".join(res.output.split())
    init = ["route", "init", "--arm", "a:KGM", "--arm", "b:LLM", "--budget", "1", "--out", str(router_file),
            "--force"]
    with RoutingService(router_file, embed, DIM):
        res = CliRunner().invoke(cli, init)
        assert res.exit_code == 2 and "in use by another process" in " ".join(res.output.split())
        res = CliRunner().invoke(cli, ["kg", "subgraph", str(tmp_path / "g.npz"), "-q", "x", "--json",
                                       str(router_file)])
        assert res.exit_code == 2 and "in use by another process" in " ".join(res.output.split())
    assert router_file.read_text() == before
    res = CliRunner().invoke(cli, [*init, "--max-cost", "a=0", "--max-cost", "b=0.5"])
    assert res.exit_code == 0, res.output
    assert read_status(router_file)["max_costs"] == [0.0, 0.5]
    res = CliRunner().invoke(cli, [*init, "--max-cost", "a=0"])
    assert res.exit_code == 2 and "no bound for b" in " ".join(res.output.split())


def test_route_init_prices_the_bounds_of_listed_models(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    init = ["route", "init", "--arm", "gnn:KGM", "--arm", "gpt-4o-mini:LLM", "--budget", "1",
            "--out", str(out)]
    res = CliRunner().invoke(cli, [*init, "--max-tokens", "4000,500"])
    assert res.exit_code == 2 and "no bound for gnn (not in the price table" in " ".join(res.output.split())
    assert not out.exists()
    res = CliRunner().invoke(cli, [*init, "--max-tokens", "4000,500", "--max-cost", "gnn=0"])
    assert res.exit_code == 0, res.output
    assert read_status(out)["max_costs"] == [0.0, pytest.approx((4000 * 0.15 + 500 * 0.6) / 1e6)]


def test_repair_drops_waiting_decisions_of_a_named_arms_state(router_file: Path) -> None:
    with RoutingService(router_file, embed, DIM) as service:
        service.route(QUESTIONS[0], [0.1, 0.1, 0.1])
    report = repair_state(router_file, drop_pending=True)
    assert any("ended" in c for c in report.changes)
    state = json.loads(router_file.read_text())
    assert state["pending"] == [] and len(state["holds"]) == len(state["arms"])
    with RoutingService(router_file, embed, DIM) as service:
        assert not service.pending and service.router.reserved == 0.0
