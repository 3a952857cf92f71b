"""The PostgreSQL state: replicas over one real PostgreSQL on 127.0.0.1 (Debian's ``postgresql``, started by
a session fixture in a temporary directory) share one router and one budget.

The pipelines here answer with test-double arms (``StubArm``) and a hash encoder (``FakeEncoder``), so
that what is tested is the state; the database is real.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kgwise.app.config import PipelineConfig
from kgwise.app.pipeline import BudgetExceededError, Pipeline
from kgwise.app.state import Pending, StateDir
from kgwise.app.state_pg import SCHEMA_VERSION, PgState
from kgwise.errors import DataError, StateUnavailableError
from kgwise.eval.bench.postgres import LocalPostgres, postgres_binaries

from .conftest import STUB_CONFIG, FakeEncoder, StubArm, write_config, write_kg

if postgres_binaries() is None:
    pytest.skip("PostgreSQL is not installed (apt-get install postgresql; .ci/install does)",
                allow_module_level=True)

COSTS = {"cheap": 0.1, "dear": 0.3, "free": 0.0}


@pytest.fixture(scope="session")
def postgres() -> Iterator[LocalPostgres]:
    with LocalPostgres() as server:
        yield server


@pytest.fixture
def db(postgres: LocalPostgres, request: pytest.FixtureRequest) -> str:
    """A fresh database for one test."""
    return str(postgres.create_database(f"t_{abs(hash(request.node.nodeid)) % 10**12}"))


def config(root: Path, url: str, budget: float = 1.0, cheap: float = 0.1, dear: float = 0.3
           ) -> PipelineConfig:
    root.mkdir(parents=True, exist_ok=True)
    write_kg(root)
    body = STUB_CONFIG.format(cheap=cheap, dear=dear, budget=budget, seed=0)
    return PipelineConfig.load(write_config(root, body + f'\n[state]\nurl = "{url}"\ntimeout_s = 2\n'))


def pipeline(root: Path, url: str, budget: float = 1.0, cheap: float = 0.1, dear: float = 0.3) -> Pipeline:
    cfg = config(root, url, budget, cheap, dear)
    runners = {"cheap": StubArm(cfg.arm("cheap"), 0.5), "dear": StubArm(cfg.arm("dear"), 0.9),
               "free": StubArm(cfg.arm("free"), 0.6, open_questions=False)}
    return Pipeline(cfg, root / "state", runners, FakeEncoder())


def question(i: int) -> tuple[str, list[str]]:
    return f"What does aspirin treat{'?' * (i + 1)}", ["headache", "diabetes", "infection"]


def test_the_state_url_is_validated_with_file_line_and_key(tmp_path: Path) -> None:
    write_kg(tmp_path)
    body = STUB_CONFIG.format(cheap=0.1, dear=0.3, budget=1.0, seed=0)
    path = write_config(tmp_path, body + '\n[state]\nurl = "mysql://x"\n')
    line = body.count("\n") + 3
    with pytest.raises(DataError, match=rf"kgwise\.toml:{line}: state\.url: must be a postgresql:// URL"):
        PipelineConfig.load(path)
    path = write_config(tmp_path, body + '\n[state]\nurl = "postgresql://h/db"\ntimeout_s = 0\n')
    with pytest.raises(DataError, match=rf"kgwise\.toml:{line + 1}: state\.timeout_s: must be a number > 0"):
        PipelineConfig.load(path)


def test_feedback_reaches_the_decision_whichever_replica_made_it(tmp_path: Path, db: str) -> None:
    with pipeline(tmp_path / "a", db) as a, pipeline(tmp_path / "b", db) as b:
        r = a.answer(*question(0))
        assert r.decision in b.state.pending and b.pending()[0].arm == r.arm
        fb = b.feedback(r.decision, gold="headache")
        assert fb.arm == r.arm and fb.spent == pytest.approx(r.cost)
        assert r.decision not in a.state.pending and r.decision in a.state.settled
        assert isinstance(a.state, PgState)
        a.state.refresh()
        assert a.status().spent == pytest.approx(b.status().spent)
        assert a.state.router.router.linucb.counts.tolist() == b.state.router.router.linucb.counts.tolist()
        with pytest.raises(Exception, match="already settled"):
            a.feedback(r.decision, correct=True)
    with pipeline(tmp_path / "c", db) as c:  # a new replica reads it all back
        s = c.status()
        assert s.questions == 1 and s.spent == pytest.approx(r.cost) and s.pending == 0


def test_spend_is_the_status_spend_as_of_the_replicas_last_transaction(tmp_path: Path, db: str) -> None:
    """``Pipeline.spend()`` (the server's spend history samples it) reads nothing from the database: it is
    this replica's router's spend, which a routing decision brings up to every replica's payments."""
    with pipeline(tmp_path / "a", db) as a, pipeline(tmp_path / "b", db) as b:
        ra = a.answer(*question(0), arm="cheap")
        assert a.spend() == pytest.approx(ra.cost) == pytest.approx(a.status().spent)
        rb = b.answer(*question(1), arm="dear")  # its routing read a's payment
        assert b.spend() == pytest.approx(ra.cost + rb.cost) == pytest.approx(b.status().spent)
        assert a.spend() == pytest.approx(ra.cost)  # a has not been to the database since its answer
        a.answer(*question(2), arm="cheap")
        assert a.spend() == pytest.approx(a.status().spent) == pytest.approx(2 * ra.cost + rb.cost)


def test_replicas_never_exceed_the_budget_together(tmp_path: Path, db: str) -> None:
    """Three replicas, four threads each, answer with the paid arms (forced) until the budget refuses: the
    spend reaches the budget and never passes it (the arms cost what their bound says)."""
    replicas = [pipeline(tmp_path / f"r{k}", db, budget=3.0, cheap=0.1, dear=0.3) for k in range(3)]
    answered: list[float] = []
    refused = [0]
    lock = threading.Lock()

    def work(p: Pipeline, k: int) -> None:
        for i in range(40):
            try:
                r = p.answer(*question(100 * k + i), arm=("cheap", "dear")[i % 2])
            except BudgetExceededError:
                with lock:
                    refused[0] += 1
                continue
            with lock:
                answered.append(r.cost)

    threads = [threading.Thread(target=work, args=(replicas[k % 3], k)) for k in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    try:
        spent = sum(answered)
        assert refused[0] > 0 and spent <= 3.0 + 1e-9
        st = replicas[0].status()
        assert st.spent == pytest.approx(spent) and st.reserved == pytest.approx(0.0)
        assert 3.0 - spent < 0.1 + 1e-9  # nothing affordable was left: less than the cheapest bound
    finally:
        for p in replicas:
            p.close()


def _feed(states: list[PgState], order: list[int], seed: int) -> None:
    """Answer questions (arm forced by the bounds) round-robin through ``states``, then give each decision's
    feedback through the replica ``order`` names, in a shuffled order."""
    rng = np.random.default_rng(seed)
    decisions = []
    for i in range(12):
        st = states[i % len(states)]
        arm = ["cheap", "dear", "free"][i % 3]
        x = rng.normal(size=8).tolist()
        costs = {n: (c if n == arm else 99.0) for n, c in COSTS.items()}
        assert st.select(f"d{i}", x, costs) == arm
        st.record(Pending(f"d{i}", "q", ["a", "b"], arm, COSTS[arm], COSTS[arm], x, "A", ["A"]))
        decisions.append((f"d{i}", float(rng.random() < 0.6), {"free": float(rng.random() < 0.5)}))
    for j, k in enumerate(order):
        d, reward, observed = decisions[k]
        states[j % len(states)].feedback(d, reward, observed if d != "d2" else {}, covered=reward > 0)


@pytest.mark.parametrize("seed, checkpoint", [(0, 5000), (1, 5000), (2, 7)])
def test_router_statistics_are_the_same_through_one_replica_or_three_in_any_order(
        tmp_path: Path, postgres: LocalPostgres, seed: int, checkpoint: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same questions and feedback through one replica, or spread over three with the feedback
    shuffled, give the same router (to float rounding) in every replica and in one opened afterwards;
    ``checkpoint = 7``: bases rewritten every 7 events on the way (replicas behind one reload from it)."""
    import kgwise.app.state_pg as state_pg

    monkeypatch.setattr(state_pg, "CHECKPOINT_EVENTS", checkpoint)
    order = list(range(12))
    random.Random(seed).shuffle(order)
    one_url = postgres.create_database(f"one_{seed}")
    three_url = postgres.create_database(f"three_{seed}")
    cfg_one = config(tmp_path / "one", one_url, budget=10.0)
    cfg_three = config(tmp_path / "three", three_url, budget=10.0)
    one = PgState(one_url, tmp_path / "one" / "s", cfg_one, 8)
    _feed([one], list(range(12)), seed)
    three = [PgState(three_url, tmp_path / "three" / f"s{k}", cfg_three, 8) for k in range(3)]
    _feed(three, order, seed)
    for st in three:
        st.refresh()
    late = PgState(three_url, tmp_path / "three" / "late", cfg_three, 8)
    routers = [one.router.router] + [st.router.router for st in [*three, late]]
    ref = routers[0]
    for r in routers[1:]:
        np.testing.assert_allclose(r.linucb.A_inv, ref.linucb.A_inv, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(r.linucb.b, ref.linucb.b, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(r.linucb.theta, ref.linucb.theta, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(r.thompson.alpha, ref.thompson.alpha)
        np.testing.assert_allclose(r.thompson.beta, ref.thompson.beta)
        for key in ("arm_cost", "graded_cost", "arm_fail_cost", "pulls", "cost_seen"):
            np.testing.assert_allclose(getattr(r, key), getattr(ref, key), err_msg=key)
        assert (r.spent, r.questions_seen) == pytest.approx((ref.spent, ref.questions_seen))
        assert r.linucb.counts.tolist() == ref.linucb.counts.tolist()
    assert {a: (c.n, c.graded) for a, c in three[0].coverage.items()} == \
        {a: (c.n, c.graded) for a, c in one.coverage.items()}
    if checkpoint < 12:
        assert three[0]._base_upto > 0  # a checkpoint was written
    for st in [one, *three, late]:
        st.close()


_REPLICA = """
import json, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from app.test_state_pg import pipeline, question
pipe = pipeline(Path({root!r}), {url!r}, budget=50.0)
for i in range(1000):
    r = pipe.answer(*question(1000 * {k} + i))
    if i % 2:
        pipe.feedback(r.decision, correct=True)
    print(json.dumps([r.decision, i % 2 == 1]), flush=True)
"""


def test_a_kill_9_loses_no_acknowledged_answer_or_feedback_and_frees_its_holds(tmp_path: Path, db: str
                                                                               ) -> None:
    """Two replica processes answer and give feedback; both are killed with SIGKILL mid-run: every answer
    and feedback they acknowledged (printed) is in the database, and no bound stays reserved once a live
    replica has swept the dead ones' holds."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    tests = str(Path(__file__).resolve().parents[1])
    scripts = [_REPLICA.format(tests=tests, root=str(tmp_path / f"k{k}"), url=db, k=k) for k in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, env=env, text=True)
             for script in scripts]
    seen: list[list[tuple[str, bool]]] = [[], []]
    deadline = time.monotonic() + 120
    for k, proc in enumerate(procs):
        assert proc.stdout is not None
        while len(seen[k]) < 6 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            d, fed = json.loads(line)
            seen[k].append((d, fed))
    for proc in procs:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    for k, proc in enumerate(procs):  # what was printed after our last read was acknowledged too
        assert proc.stdout is not None
        seen[k] += [(str(d), bool(f)) for d, f in map(json.loads, proc.stdout.read().splitlines())]
    acked = [x for s in seen for x in s]
    assert len(acked) >= 12
    with pipeline(tmp_path / "after", db, budget=50.0) as after:
        settled = set(after.state.settled)
        pending = set(after.state.pending)
        for d, fed in acked:
            assert d in (settled if fed else pending | settled), d
        st = after.status()
        assert st.reserved == pytest.approx(0.0)  # the killed replicas' holds were released
        assert st.spent >= sum(after.state.pending[d].cost for d, fed in acked if not fed) - 1e-9
        assert st.questions >= len(acked)


def test_a_database_outage_fails_fast_and_the_state_resumes(tmp_path: Path) -> None:
    """With the database stopped an answer fails within the timeout with StateUnavailableError and is
    not returned; the payment of an answer whose arm had run is written once the database is back."""
    with LocalPostgres() as server:
        url = server.create_database("outage")
        with pipeline(tmp_path / "a", url) as p:
            r = p.answer(*question(0))
            cost = r.cost
            original = p.state.record
            halted: list[float] = []

            def record_after_halt(pending: Pending) -> None:  # the database goes down while the arm answers
                server.halt()
                halted.append(pending.cost)
                original(pending)

            p.state.record = record_after_halt  # type: ignore[method-assign]
            t = time.monotonic()
            with pytest.raises(StateUnavailableError, match="down or did not answer"):
                p.answer(*question(1))
            assert halted and time.monotonic() - t < 10
            p.state.record = original  # type: ignore[method-assign]
            t = time.monotonic()
            with pytest.raises(StateUnavailableError):
                p.answer(*question(2))
            assert time.monotonic() - t < 10
            server.start()
            r3 = p.answer(*question(3))
            st = p.status()
            assert st.questions == 3  # the third question, refused, was never seen by the database
            assert st.spent == pytest.approx(cost + halted[0] + r3.cost)  # the unacknowledged answer paid
            assert st.reserved == pytest.approx(0.0) and st.pending == 2


def test_a_schema_of_another_version_is_refused_naming_the_migrate_command(tmp_path: Path, db: str) -> None:
    import psycopg

    cfg = config(tmp_path, db)
    PgState(db, tmp_path / "s", cfg, 8).close()
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("UPDATE kgwise_meta SET value = '99' WHERE key = 'schema_version'")
    with pytest.raises(DataError, match=r"schema is version 99, newer than .*kgwise state migrate"):
        PgState(db, tmp_path / "s", cfg, 8)
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute("UPDATE kgwise_meta SET value = '0' WHERE key = 'schema_version'")
    with pytest.raises(DataError, match=r"run `kgwise state migrate --to postgresql://"):
        PgState(db, tmp_path / "s", cfg, 8)
    PgState(db, tmp_path / "s", cfg, 8, upgrade=True).close()
    PgState(db, tmp_path / "s", cfg, 8).close()


def test_a_version_1_schema_is_upgraded_in_place_and_keeps_its_state(tmp_path: Path, db: str) -> None:
    """Version 2 keeps decisions' bodies in their rows (``toast_tuple_target``); a version 1 database is
    refused until `kgwise state migrate --to URL` (here ``upgrade=True``) applies it, the spend kept."""
    import psycopg

    from kgwise.app.state_pg import MIGRATIONS

    cfg = config(tmp_path, db)
    with PgState(db, tmp_path / "s", cfg, 8) as state:
        arm = state.select("d1", [1.0] * 8, COSTS)
        assert arm is not None
        state.record(Pending("d1", "q", ["a", "b"], arm, COSTS[arm], COSTS[arm], [1.0] * 8, "a", ["a"]))
    with psycopg.connect(db, autocommit=True) as conn:  # back to what version 1 made
        conn.execute("ALTER TABLE kgwise_pending RESET (toast_tuple_target)")
        conn.execute("ALTER TABLE kgwise_events RESET (toast_tuple_target)")
        conn.execute("UPDATE kgwise_meta SET value = '1' WHERE key = 'schema_version'")
    assert len(MIGRATIONS) == SCHEMA_VERSION == 2
    with pytest.raises(DataError, match=r"version 1, this kgwise reads 2: .*kgwise state migrate --to"):
        PgState(db, tmp_path / "s", cfg, 8)
    with PgState(db, tmp_path / "s", cfg, 8, upgrade=True) as state:
        assert state.router.spent == pytest.approx(COSTS[arm]) and "d1" in state.pending
    with psycopg.connect(db, autocommit=True) as conn:
        rows = conn.execute("SELECT relname, reloptions FROM pg_class WHERE relname IN "
                            "('kgwise_pending', 'kgwise_events') ORDER BY relname").fetchall()
    assert rows == [("kgwise_events", ["toast_tuple_target=8160"]),
                    ("kgwise_pending", ["toast_tuple_target=8160"])]


def test_a_database_made_for_another_config_is_refused(tmp_path: Path, db: str) -> None:
    PgState(db, tmp_path / "s", config(tmp_path, db), 8).close()
    with pytest.raises(DataError, match=r"made for another config .*its budget is 1, the config's 2"):
        PgState(db, tmp_path / "s", config(tmp_path, db, budget=2.0), 8)


def test_the_folder_state_still_satisfies_the_protocol(tmp_path: Path) -> None:
    from kgwise.app.store import PipelineState, open_state

    write_kg(tmp_path)
    cfg = PipelineConfig.load(write_config(tmp_path, STUB_CONFIG.format(cheap=0.1, dear=0.3, budget=1.0,
                                                                        seed=0)))
    st: PipelineState = open_state(tmp_path / "st", cfg, 8)
    assert isinstance(st, StateDir)
    st.close()


def test_state_migrate_moves_a_folder_into_postgresql_and_back_unchanged(tmp_path: Path, db: str) -> None:
    """``kgwise state migrate``: a folder's router, decisions, counts and calibration go into the database,
    a replica there carries on from them, and the way back gives the same router the database holds."""
    from typer.testing import CliRunner

    from kgwise.cli.main import app

    cfg = config(tmp_path / "f", db)
    folder_cfg = tmp_path / "f" / "folder.toml"
    folder_cfg.write_text(cfg.path.read_text().split("\n[state]")[0], encoding="utf-8")
    runners = {"cheap": StubArm(cfg.arm("cheap"), 0.5), "dear": StubArm(cfg.arm("dear"), 0.9),
               "free": StubArm(cfg.arm("free"), 0.6, open_questions=False)}
    with Pipeline(PipelineConfig.load(folder_cfg), tmp_path / "f" / "state", runners, FakeEncoder()) as p:
        rs = [p.answer(*question(i)) for i in range(4)]
        p.feedback(rs[0].decision, gold="headache")
        before = p.status()
        router = p.state.router.state_dict()
    (tmp_path / "f" / "state" / "calibration.json").write_text("{}", encoding="utf-8")
    runner = CliRunner()
    out = runner.invoke(app, ["state", "migrate", "--config", str(cfg.path), "--from",
                              str(tmp_path / "f" / "state"), "--to", db])
    assert out.exit_code == 0, out.output
    said = " ".join(out.output.split())  # rich wraps long lines
    assert "3 awaiting feedback, 1 settled" in said and "calibration.json" in said
    again = runner.invoke(app, ["state", "migrate", "--config", str(cfg.path), "--from",
                                str(tmp_path / "f" / "state"), "--to", db])
    assert again.exit_code == 2 and "already holds a kgwise state" in " ".join(again.output.split())
    with pipeline(tmp_path / "r", db) as replica:
        st = replica.status()
        assert (st.spent, st.questions, st.pending) == (before.spent, before.questions, before.pending)
        assert replica.state.router.state_dict() == router
        assert (tmp_path / "r" / "state" / "calibration.json").read_text() == "{}"
        assert "not a kgwise calibration" in (st.calibration_problem or "")
        replica.feedback(rs[1].decision, correct=True)
        moved = replica.state.router.state_dict()
    back = runner.invoke(app, ["state", "migrate", "--config", str(cfg.path), "--from", db, "--to",
                               str(tmp_path / "back")])
    assert back.exit_code == 0, back.output
    with Pipeline(PipelineConfig.load(folder_cfg), tmp_path / "back", runners, FakeEncoder()) as p:
        assert p.state.router.state_dict() == moved
        assert set(p.state.pending) == {r.decision for r in rs[2:]}
        assert set(p.state.settled) == {rs[0].decision, rs[1].decision}


def test_kgwise_status_reads_the_database(tmp_path: Path, db: str) -> None:
    from typer.testing import CliRunner

    from kgwise.cli.main import app

    cfg = config(tmp_path, db, budget=2.0)
    with PgState(db, tmp_path / "s", cfg, 384) as st:  # MiniLM's width: what `kgwise status` opens with
        x = [0.05] * 384
        assert st.select("d0", x, {"cheap": 0.1, "dear": 99.0, "free": 99.0}) == "cheap"
        st.record(Pending("d0", "q", ["a", "b"], "cheap", 0.1, 0.1, x, "A", ["A"]))
    out = CliRunner().invoke(app, ["status", "--config", str(cfg.path), "--json", str(tmp_path / "s.json")])
    assert out.exit_code == 0, out.output
    status = json.loads((tmp_path / "s.json").read_text())
    assert status["spent"] == pytest.approx(0.1) and status["pending"] == 1 and status["questions"] == 1


def test_the_server_answers_503_with_retry_after_while_the_database_is_down(tmp_path: Path) -> None:
    """Over HTTP (the real app and pipeline, a real database that goes down and comes back): a chat
    completion gets 503 and Retry-After while the database is down, /health says so, and answers resume."""
    from fastapi.testclient import TestClient

    from kgwise.server.app import HEALTH_STATE_MAX_AGE_S, ServerSettings, create_app
    from kgwise.server.pipeline_adapter import ServedPipeline, pipeline_hub

    body = {"model": "kgwise", "messages": [{"role": "user", "content": "What does aspirin treat?\n"
                                              "A. headache\nB. diabetes\nC. infection"}]}
    with LocalPostgres() as server, pipeline(tmp_path, server.create_database("http")) as p:
        hub = pipeline_hub({"kgwise": ServedPipeline(p)})
        client = TestClient(create_app(ServerSettings(), pipelines=hub))
        assert client.post("/v1/chat/completions", json=body).status_code == 200
        health = client.get("/health").json()["state"]["kgwise"]
        assert health["backend"] == "postgresql" and health["ok"]
        assert health["schema_version"] == SCHEMA_VERSION
        server.halt()
        down = client.post("/v1/chat/completions", json=body)
        assert down.status_code == 503 and int(down.headers["Retry-After"]) >= 1
        assert down.json()["error"]["code"] == "state_unavailable"
        time.sleep(HEALTH_STATE_MAX_AGE_S)  # /health reads the database at most once a second
        assert client.get("/health").json()["state"]["kgwise"]["ok"] is False
        server.start()
        assert client.post("/v1/chat/completions", json=body).status_code == 200
        assert client.get("/v1/status").status_code == 200
        assert p.status().questions == 2  # the refused one never reached the database


def test_state_migrate_names_what_is_wrong(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from kgwise.cli.main import app

    runner = CliRunner()
    both = runner.invoke(app, ["state", "migrate", "--from", "postgresql://a/b", "--to", "postgresql://c/d"])
    assert both.exit_code == 2 and "one a state folder, the other a postgresql:// URL" in both.output
    folder = runner.invoke(app, ["state", "migrate", "--to", str(tmp_path)])
    assert folder.exit_code == 2 and "upgrades a database: give a postgresql:// URL" in folder.output
    down = runner.invoke(app, ["state", "migrate", "--to", "postgresql://kgwise@127.0.0.1:1/x",
                               "--timeout-s", "1"])
    said = " ".join(down.output.split())
    assert down.exit_code == 2 and "cannot reach postgresql://kgwise@127.0.0.1:1/x" in said


def test_a_fit_on_one_replica_gives_every_replica_its_router_and_calibration(tmp_path: Path, db: str) -> None:
    """``fit`` through one replica writes a new epoch (router, calibration) in the database; a replica
    already running picks it up at its next routing decision (the next answer's set is calibrated)."""
    from kgwise.app.fit import fit

    from .conftest import dev_rows, write_questions

    path = write_questions(tmp_path, dev_rows(4))
    with pipeline(tmp_path / "a", db, budget=100.0) as a, pipeline(tmp_path / "b", db, budget=100.0) as b:
        b.answer(*question(0), arm="dear")
        b.feedback(b.pending()[0].decision, correct=True)
        fit(a, path, max_spend=100.0, echo=lambda _: None)
        assert isinstance(b.state, PgState) and b.state.epoch == 1
        r = b.answer("What does aspirin treat?", ["fever", "diabetes", "thirst"])
        assert b.state.epoch == 2 and b.state.calibration is not None  # read with the answer
        assert b.state.router.router.linucb.counts.tolist() == a.state.router.router.linucb.counts.tolist()
        assert r.decision in a.state.pending
        assert b.answer(*question(1)).answer_set is not None
    with pipeline(tmp_path / "c", db, budget=100.0) as c:  # a replica opened now gets them too
        assert c.state.calibration is not None and c.answer(*question(2)).answer_set is not None


def test_replicas_checkpoint_once_per_interval_not_at_every_decision(tmp_path: Path, db: str,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Two replicas alternating decisions with a checkpoint every 10 events: the base is rewritten about
    once per 10 events (each decision writes 2: select and charge), not by every replica at every decision
    once the first checkpoint passed (a replica that had applied the events a checkpoint dropped must
    take up its mark)."""
    import psycopg

    monkeypatch.setattr("kgwise.app.state_pg.CHECKPOINT_EVENTS", 10)
    cfg = config(tmp_path, db)
    states = [PgState(db, tmp_path / f"r{i}", cfg, 8) for i in range(2)]
    rng = np.random.default_rng(0)
    marks = []
    try:
        with psycopg.connect(db, autocommit=True) as conn:
            for i in range(60):
                st = states[i % 2]
                x = rng.normal(size=8).tolist()
                arm = st.select(f"d{i}", x, COSTS)
                assert arm is not None
                st.record(Pending(f"d{i}", "q", ["a", "b"], arm, COSTS[arm], COSTS[arm], x, "A", ["A"]))
                row = conn.execute("SELECT base_upto FROM kgwise_ledger WHERE id = 1").fetchone()
                assert row is not None
                marks.append(int(row[0]))
    finally:
        for st in states:
            st.close()
    checkpoints = len(set(marks)) - (0 in marks)
    assert 8 <= checkpoints <= 13, marks  # 120 events, one base per 10 (give or take a decision's two)
