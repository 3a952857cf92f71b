"""``Pipeline``: answer → feedback → status over one state directory.

The unit tests run the pipeline's own logic with test-double arms (``StubArm``) and a hash encoder
(``FakeEncoder``); ``test_live_*`` (slow) run it with real parts: smollm2-135m in-process as one arm and
a llama.cpp OpenAI-compatible server on 127.0.0.1 as another, over a KG and questions written here.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgwise.app.arms import ArmOutput
from kgwise.app.calibration import CalibrationSelector, HeldOutCalibration, calibrated_threshold
from kgwise.app.config import PipelineConfig
from kgwise.app.pipeline import BudgetExceededError, Pipeline, UnknownDecisionError
from kgwise.app.state import StateDir
from kgwise.errors import ConfigError, DataError
from kgwise.kg.loaders import open_graph_file
from kgwise.types import Question

from .conftest import DISEASES, STUB_CONFIG, TREATS, TRIPLES, FakeEncoder, StubArm, write_config, write_kg


def make(root: Path, cheap: float = 0.1, dear: float = 0.3, budget: float = 1.0, seed: int = 0,
         free: bool = True, kg: bool = False, context: str = "question", guarantee: str = "marginal"
         ) -> Pipeline:
    write_kg(root)
    body = STUB_CONFIG.format(cheap=cheap, dear=dear, budget=budget, seed=seed)
    body = body.replace("[answer_sets]\n", f"[answer_sets]\nguarantee = \"{guarantee}\"\n")
    body = body.replace("[router]\n", f"[router]\ncontext = {context!r}\n".replace("'", '"'))
    if not free:
        body = body.replace("price = 0\nobserve = true", "price = 0.2")
    cfg = PipelineConfig.load(write_config(root, body))
    runners = {"cheap": StubArm(cfg.arm("cheap"), 0.5), "dear": StubArm(cfg.arm("dear"), 0.9),
               "free": StubArm(cfg.arm("free"), 0.6, open_questions=False)}
    graph = open_graph_file(root / "kg.tsv") if kg else None
    return Pipeline(cfg, root / "state", runners, FakeEncoder(), graph)


def question(i: int) -> tuple[str, list[str]]:
    drug = list(TREATS)[i % len(TREATS)]
    wrong = [d for d in DISEASES if d not in TREATS[drug]][:2]
    return f"What does {drug} treat{'?' * (1 + i // len(TREATS))}", [TREATS[drug][0], *wrong]


def test_an_answer_names_its_arm_scores_cost_and_decision(tmp_path: Path) -> None:
    with make(tmp_path) as pipe:
        r = pipe.answer(*question(0))
        assert r.arm in {"cheap", "dear", "free"}
        assert [s.arm for s in r.scores] == ["cheap", "dear", "free"]
        assert {s.arm: s.cost_bound for s in r.scores} == {"cheap": 0.1, "dear": 0.3, "free": 0.0}
        assert r.cost == {"cheap": 0.1, "dear": 0.3, "free": 0.0}[r.arm]
        assert r.label in {"A", "B", "C"}
        assert r.answer == dict(zip("ABC", question(0)[1], strict=True))[r.label]
        assert set(r.probabilities) == {"A", "B", "C"}
        assert r.answer_set is None and "no calibration" in r.notes[0]
        pending = pipe.state.pending[r.decision]
        assert pending.arm == r.arm
        assert pending.bound == r.scores[["cheap", "dear", "free"].index(r.arm)].cost_bound
        if r.arm != "free":  # the free arm answered too, to be graded at feedback
            assert set(pending.observed) == {"free"}
        assert pipe.status().pending == 1
        assert pipe.status().reserved == 0.0 and pipe.status().spent == pytest.approx(r.cost)  # paid now


def _files(pipe: Pipeline) -> dict[str, bytes]:
    """The state directory's files (snapshot, journal) as they are on disk."""
    return {p.name: p.read_bytes() for p in pipe.state.root.iterdir() if p.name != "lock"}


def test_feedback_teaches_once_and_refuses_unknown_or_settled_decisions(tmp_path: Path) -> None:
    with make(tmp_path, seed=3) as pipe:
        text, choices = question(2)
        r = pipe.answer(text, choices)
        before = _files(pipe)
        with pytest.raises(ConfigError, match="neither a choice label"):
            pipe.feedback(r.decision, gold="aspirin-x")
        with pytest.raises(ConfigError, match="exactly one of"):
            pipe.feedback(r.decision, correct=True, gold="A")
        assert _files(pipe) == before and r.decision in pipe.state.pending
        seen = dict(pipe.state.pending[r.decision].observed)
        fb = pipe.feedback(r.decision, gold=choices[0])  # by the choice's text
        assert fb.arm == r.arm and fb.reward == float(r.label == "A")
        assert fb.observed == {name: float(pred == "A") for name, pred in seen.items()}
        assert (r.arm == "free") == (not seen)
        status = pipe.status()
        assert status.pending == 0 and status.reserved == 0.0 and status.spent == pytest.approx(r.cost)
        after = _files(pipe)
        with pytest.raises(UnknownDecisionError, match="already settled"):
            pipe.feedback(r.decision, correct=True)
        with pytest.raises(UnknownDecisionError, match="not made with this state"):
            pipe.feedback("f" * 32, correct=True)
        assert _files(pipe) == after


def test_a_restart_keeps_pending_decisions_and_their_spending(tmp_path: Path) -> None:
    with make(tmp_path) as pipe:
        results = [pipe.answer(*question(i)) for i in range(4)]
        spent = pipe.status().spent
    assert spent == pytest.approx(sum(r.cost for r in results))
    with make(tmp_path) as again:
        assert set(again.state.pending) == {r.decision for r in results}
        assert again.status().spent == pytest.approx(spent) and again.status().reserved == 0.0
        for r in results:
            again.feedback(r.decision, correct=True)
        s = again.status()
        assert s.pending == 0 and s.reserved == 0.0
        assert s.spent == pytest.approx(sum(r.cost for r in results))
        assert sum(a.pulls for a in s.arms) == 4


def test_a_second_pipeline_cannot_open_the_same_state(tmp_path: Path) -> None:
    with make(tmp_path), pytest.raises(ConfigError, match="in use by another kgwise process"):
        make(tmp_path)


def test_no_affordable_arm_is_an_error_that_spends_nothing(tmp_path: Path) -> None:
    with make(tmp_path, cheap=0.4, dear=0.6, budget=0.5, free=False) as pipe:
        first = pipe.answer(*question(0))
        assert first.arm in {"cheap", "free"}
        with pytest.raises(BudgetExceededError, match="no arm's cost bound fits"):
            while True:
                pipe.answer(*question(1))
        assert pipe.status().spent + pipe.status().reserved <= 0.5


def held_out(pipe: Pipeline, n: int, seed: int = 0) -> HeldOutCalibration:
    """A calibration of ``n`` random held-out questions for ``pipe``'s router."""
    rng = np.random.default_rng(seed)
    k, d = len(pipe.runners), pipe.state.router.dim
    return HeldOutCalibration(tuple(pipe.runners), "lac", rng.normal(size=(n, d)),
                              np.tile([0.1, 0.3, 0.0], (n, 1)), rng.uniform(0, 0.9, (n, k)), {"questions": n})


def test_calibrated_sets_carry_their_statement_and_live_coverage_counts(tmp_path: Path) -> None:
    with make(tmp_path) as pipe:
        pipe.state.save_calibration(held_out(pipe, 150))
        r = pipe.answer(*question(1))
        s = r.answer_set
        assert s is not None and s.alpha == 0.2 and s.guarantee
        assert f"the router, as it stands, sends to arm {r.arm!r}" in s.statement
        assert "of 150 held-out dev questions" in s.statement and 0 < s.calibration_size < 150
        assert r.label in s.labels or len(s.labels) < 3
        fb = pipe.feedback(r.decision, gold="A")
        assert fb.covered == ("A" in s.labels)
        assert pipe.status().arms[["cheap", "dear", "free"].index(r.arm)].coverage.n == 1
        forced = pipe.answer(*question(2), arm="dear")  # a forced arm: every held-out question it answered
        assert forced.answer_set is not None and forced.answer_set.calibration_size == 150
        assert "forced" in forced.answer_set.statement
        # too few calibration questions for α: every choice, trivially covered
        pipe.state.save_calibration(held_out(pipe, 3))
        r2 = pipe.answer(*question(3))
        assert r2.answer_set is not None and len(r2.answer_set.labels) == 3
        assert "covers the truth trivially" in r2.answer_set.statement


@pytest.mark.parametrize("guarantee", ["marginal", "pac", "pac_all_arms"])
def test_the_set_is_split_conformal_on_the_held_out_questions_the_same_rule_routes_alike(
        tmp_path: Path, guarantee: str) -> None:
    """Replaying the decision's draws on a copy of the router taken before the answer gives the same group,
    and the set's threshold is that group's split-conformal quantile (marginal), its training-conditional
    one at δ (pac), or at δ/3 for the three arms at once (pac_all_arms)."""
    from kgwise.conformal.split import conformal_quantile, pac_conformal_quantile

    delta = {"marginal": None, "pac": 0.05, "pac_all_arms": 0.05 / 3}[guarantee]
    with make(tmp_path, guarantee=guarantee) as pipe:
        cal = held_out(pipe, 200)
        pipe.state.save_calibration(cal)
        for i in range(6):
            before = pipe.state.router.copy().router
            r = pipe.answer(*question(i))
            selector = CalibrationSelector(cal)
            group = selector.group(before, r.decision)
            scores = cal.arm_scores(r.arm, group)
            assert r.answer_set is not None and r.answer_set.calibration_size == len(scores)
            t = calibrated_threshold(scores.tolist(), pipe.config.answer_sets, 3)
            assert t == (conformal_quantile(scores, 0.2) if delta is None else
                         pac_conformal_quantile(scores, 0.2, delta))
            want = tuple(lab for lab, p in r.probabilities.items() if 1 - p <= t)
            assert r.answer_set.labels == want
            if guarantee == "pac_all_arms":
                assert "with probability ≥ 0.95 over them for every arm at once (δ/3 per arm)" in \
                    r.answer_set.statement
            pipe.feedback(r.decision, correct=i % 2 == 0)


def test_open_questions_link_the_answer_to_kg_entities(tmp_path: Path) -> None:
    with make(tmp_path, kg=True) as pipe:
        r = pipe.answer("Which drug would you take for a headache?")
        assert r.arm in {"cheap", "dear"}  # the free arm answers multiple choice only
        assert r.label is None and r.question_entities == ("headache",)
        assert r.answer_entities == (("aspirin",) if r.answer == "aspirin" else ())
        assert any("open questions" in n for n in r.notes)
        fb = pipe.feedback(r.decision, gold=["aspirin", "ibuprofen"])
        assert fb.reward == float(r.answer == "aspirin")


def test_an_open_answer_names_first_the_entities_the_question_does_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kgwise.types import Usage

    with make(tmp_path, kg=True) as pipe:
        for name in ("cheap", "dear"):
            monkeypatch.setattr(pipe.runners[name], "answer", lambda q: ArmOutput(
                "For a headache, take aspirin.", {}, usage=Usage(calls=1)))
        r = pipe.answer("Which drug would you take for a headache?")
        assert r.question_entities == ("headache",) and r.answer_entities == ("aspirin", "headache")


OPS = st.lists(st.one_of(st.tuples(st.just("ask"), st.integers(0, 30)),
                         st.tuples(st.just("feedback"), st.integers(0, 10), st.booleans()),
                         st.tuples(st.just("restart"))), min_size=1, max_size=40)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(budget=st.floats(0.05, 3.0), cheap=st.floats(0.01, 0.5), dear=st.floats(0.01, 1.5),
       seed=st.integers(0, 5), free=st.booleans(), ops=OPS)
def test_the_budget_is_never_exceeded(budget: float, cheap: float, dear: float, seed: int, free: bool,
                                      ops: list[tuple[object, ...]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        pipe = make(root, cheap, dear, budget, seed, free)
        paid = 0.0
        try:
            for op in ops:
                if op[0] == "ask":
                    with contextlib.suppress(BudgetExceededError):
                        paid += pipe.answer(*question(int(op[1]))).cost  # type: ignore[call-overload]
                elif op[0] == "feedback" and pipe.state.pending:
                    ids = list(pipe.state.pending)
                    pipe.feedback(ids[int(op[1]) % len(ids)], correct=bool(op[2]))  # type: ignore[call-overload]
                elif op[0] == "restart":
                    pipe.close()
                    pipe = make(root, cheap, dear, budget, seed, free)
                s = pipe.status()
                assert paid <= budget + 1e-9
                assert s.spent + s.reserved <= budget + 1e-9
                assert s.spent <= paid + 1e-9
        finally:
            pipe.close()


LIVE_CONFIG = """\
[kg]
graph = "kg.tsv"

[[arms]]
name = "local"
kind = "llm"
spec = "smollm2-135m"
price = 0.001

[[arms]]
name = "server"
kind = "llm"
spec = "openai:smollm2"
base_url = "{url}"
price = 0.002

[[arms]]
name = "local-kg"
kind = "inject"
spec = "smollm2-135m"
price = 0.003

[router]
budget_usd = 0.5
seed = 0

[answer_sets]
alpha = 0.5
"""


@pytest.mark.slow
def test_live_pipeline_fits_answers_learns_and_restarts(tmp_path: Path, llama_server: str) -> None:
    """Real parts end to end through the CLI: an in-process smollm2 arm, the same model with injected KG
    knowledge, and a llama.cpp server arm on 127.0.0.1."""
    import json

    from typer.testing import CliRunner

    from kgwise.cli.main import app

    from .conftest import dev_rows, write_questions

    write_kg(tmp_path)
    config = write_config(tmp_path, LIVE_CONFIG.format(url=llama_server))
    dev = write_questions(tmp_path, dev_rows())
    cli = CliRunner()
    base = ["--config", str(config)]
    refused = cli.invoke(app, ["fit", *base, "--questions", str(dev), "--max-spend", "0.01"])
    assert refused.exit_code == 2 and "exceeds max_spend 0.01" in " ".join(refused.output.split())
    done = cli.invoke(app, ["fit", *base, "--questions", str(dev), "--max-spend", "1",
                            "--json", str(tmp_path / "fit.json")])
    assert done.exit_code == 0, done.output
    report = json.loads((tmp_path / "fit.json").read_text())
    assert [a["answered"] for a in report["arms"]] == [8, 8, 8]
    # the server arm was called once per choice: 3 calls per question
    log = [json.loads(x)["value"] for x in (tmp_path / ".kgwise-state" / "fit-log.jsonl").read_text()
           .splitlines()[1:]]
    assert {r["usage"]["calls"] for r in log if r["arm"] == "server"} == {3}
    assert sum(r["cost"] for r in log) == pytest.approx(report["spent"])
    # the local arms score by PMI, smollm2's measured rule: 2 calls a question each
    assert report["spent"] == pytest.approx(8 * (2 * 0.001 + 0.006 + 2 * 0.003))
    asked = cli.invoke(app, ["ask", "What does metformin treat?", "--choices", "fever|diabetes|swelling",
                             *base, "--json", str(tmp_path / "ask.json")])
    assert asked.exit_code == 0, asked.output
    r = json.loads((tmp_path / "ask.json").read_text())
    assert r["arm"] in {"local", "server", "local-kg"} and r["label"] in {"A", "B", "C"}
    assert len(r["scores"]) == 3
    assert r["cost"] == {"local": 0.001, "server": 0.006, "local-kg": 0.003}[r["arm"]]
    if r["arm"] == "local-kg":
        assert ["metformin", "treats", "diabetes"] in [list(t.values()) for t in r["knowledge"]["triples"]]
    assert r["answer_set"] is not None and r["answer_set"]["alpha"] == 0.5
    # a restart (a new process per command) keeps the decision; feedback settles it once
    fb = cli.invoke(app, ["feedback", r["decision"], "--gold", "diabetes", *base])
    assert fb.exit_code == 0, fb.output
    again = cli.invoke(app, ["feedback", r["decision"], "--correct", *base])
    assert again.exit_code == 2 and "already settled" in again.output
    st_out = cli.invoke(app, ["status", *base, "--json", str(tmp_path / "status.json")])
    assert st_out.exit_code == 0, st_out.output
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["pending"] == 0 and status["spent"] == pytest.approx(r["cost"])
    assert sum(a["coverage"]["n"] for a in status["arms"]) == 1
    # an open question through the pipeline: free text, linked to KG entities
    with Pipeline.from_config(config) as pipe:
        open_r = pipe.answer("What does aspirin treat?")
        assert open_r.label is None and "aspirin" in open_r.question_entities
        assert set(open_r.answer_entities) <= {t[0] for t in TRIPLES} | {t[2] for t in TRIPLES}


def _run_and_kill(tmp_path: Path, body: str) -> list[str]:
    """Run ``body`` (after ``pipe = make(root)``) in a child process that ends with ``os._exit`` — no
    close, no snapshot, like a kill — and return the JSON list it printed last."""
    import json
    import subprocess
    import sys

    tmp_path.mkdir(parents=True, exist_ok=True)
    script = "\n".join([
        "import json, os, sys", "from pathlib import Path",
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})",
        "from app.test_pipeline import make, question",
        f"pipe = make(Path({str(tmp_path)!r}))", body, "os._exit(9)"])
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert out.returncode == 9, out.stderr
    return list(json.loads(out.stdout.strip().splitlines()[-1]))


def test_a_kill_loses_no_acknowledged_answer_or_feedback(tmp_path: Path) -> None:
    ids = _run_and_kill(tmp_path / "a", "\n".join([
        "rs = [pipe.answer(*question(i)) for i in range(5)]",
        "pipe.feedback(rs[0].decision, correct=True)",
        "pipe.feedback(rs[1].decision, gold='B')",
        "print(json.dumps([r.decision for r in rs]), flush=True)"]))
    snapshot = json.loads((tmp_path / "a" / "state" / "state.json").read_text())
    assert snapshot["seq"] == 0  # the snapshot made at creation: the answers are in the journal only
    with make(tmp_path / "a") as after:
        assert set(after.state.pending) == set(ids[2:])
        assert set(after.state.settled) == set(ids[:2])
        s = after.status()
        assert s.questions == 5 and sum(a.pulls for a in s.arms) == 5  # every answer is paid when made
        replayed = after.state.router.state_dict()
    # the same calls in one process that closes normally: the replayed router is the same, draws included
    (tmp_path / "b").mkdir()
    with make(tmp_path / "b") as ref:
        rs = [ref.answer(*question(i)) for i in range(5)]
        ref.feedback(rs[0].decision, correct=True)
        ref.feedback(rs[1].decision, gold="B")
        assert [r.arm for r in rs] == [after.state.pending[i].arm if i in after.state.pending else r.arm
                                       for i, r in zip(ids, rs, strict=True)]
        assert ref.state.router.state_dict() == replayed


def test_a_decision_whose_arm_was_running_at_a_kill_is_called_off(tmp_path: Path) -> None:
    ids = _run_and_kill(tmp_path, "\n".join([
        "first = pipe.answer(*question(0))",
        "print(json.dumps([first.decision]), flush=True)",
        "for name in ('cheap', 'dear'):",  # the arms that can answer an open question
        "    pipe.runners[name].answer = lambda q: os._exit(9)",  # the kill strikes while one runs
        "pipe.answer('Which drug treats a headache?')"]))
    with make(tmp_path) as after:
        assert list(after.state.pending) == ids
        assert isinstance(after.state, StateDir) and len(after.state.recovered) == 1
        s = after.status()
        assert s.questions == 2 and s.reserved == 0.0  # the running one's hold is released
        assert s.spent == pytest.approx(after.state.pending[ids[0]].cost)


def test_a_forced_arm_answers_and_the_counts_survive_a_restart(tmp_path: Path) -> None:
    with make(tmp_path, free=False) as pipe:
        forced = [pipe.answer(*question(i), arm="dear") for i in range(3)]
        assert {r.arm for r in forced} == {"dear"}
        assert {s.arm: s.cost_bound for s in forced[0].scores} == {"cheap": 0.1, "dear": 0.3, "free": 0.2}
        assert [p.decision for p in pipe.pending()] == [r.decision for r in forced]
        with pytest.raises(ConfigError, match="no arm 'nope'"):
            pipe.answer(*question(0), arm="nope")
        with pytest.raises(BudgetExceededError, match="arm 'dear' is forced"):
            pipe.answer(*question(4), arm="dear")  # 3 × 0.3 held of 1.0: a fourth does not fit
        pipe.feedback(forced[0].decision, gold="A")
        pipe.feedback(forced[1].decision, correct=False)
        right = int(forced[0].label == "A")
    with make(tmp_path, free=False) as again:
        count = again.state.coverage["dear"]
        assert (count.graded, count.correct) == (2, right)
        assert [p.decision for p in again.pending()] == [forced[2].decision]


def test_answers_without_feedback_hold_no_budget(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An OpenAI client sends no feedback: its answers are paid when made and wait for a grade that never
    comes; they do not hold the budget, and beyond PENDING_KEPT the oldest are dropped and counted."""
    import kgwise.app.state as state_module

    monkeypatch.setattr(state_module, "PENDING_KEPT", 3)
    with make(tmp_path, free=False, budget=10.0) as pipe:
        results = [pipe.answer(*question(i % 4)) for i in range(6)]
        s = pipe.status()
        assert s.reserved == 0.0 and s.spent == pytest.approx(sum(r.cost for r in results))
        assert s.pending == 3 and s.expired == 3
        assert list(pipe.state.pending) == [r.decision for r in results[3:]]
        with pytest.raises(UnknownDecisionError, match="dropped unanswered"):
            pipe.feedback(results[0].decision, correct=True)
        pipe.feedback(results[-1].decision, correct=True)
    with make(tmp_path, free=False, budget=10.0) as again:
        assert again.status().expired == 3 and again.status().pending == 2


def test_a_version_1_state_pays_its_waiting_answers_when_opened(tmp_path: Path) -> None:
    """Version 1 paid an answer at its feedback (its bound held until then): opened now, the waiting
    answers are paid and their holds released, so the spending is what version 2 would show."""
    import json

    with make(tmp_path) as pipe:
        results = [pipe.answer(*question(i)) for i in range(3)]
    path = tmp_path / "state" / "state.json"
    body = json.loads(path.read_text())
    router = body["router"]
    # back to version 1: nothing paid, each waiting answer holding its bound, embeddings as lists
    router["spent"] = 0.0
    router["arm_cost"] = [0.0] * len(router["arm_cost"])
    router["pulls"] = [0] * len(router["pulls"])
    names = [a["name"] for a in router["arms"]]
    router["holds"] = [[p["bound"] for p in body["pending"] if p["arm"] == n] for n in names]
    from kgwise.app.state import decode_vector

    for p in body["pending"]:
        p["embedding"] = decode_vector(p["embedding"])
    del body["version"]
    path.write_text(json.dumps(body))
    with make(tmp_path) as again:
        s = again.status()
        assert s.reserved == 0.0 and s.spent == pytest.approx(sum(r.cost for r in results))
        assert sum(a.pulls for a in s.arms) == 3 and s.pending == 3
        again.feedback(results[0].decision, correct=True)


def test_the_question_plus_free_context_reads_the_free_arm_and_reuses_its_answer(tmp_path: Path) -> None:
    with make(tmp_path, context="question+free") as pipe:
        assert pipe.state.context == "question+free" and pipe.state.router.dim == 8 + 3 + 1
        free = pipe.runners["free"]
        assert isinstance(free, StubArm)
        r = pipe.answer(*question(0))
        x = pipe.state.pending[r.decision].embedding
        emb = FakeEncoder().encode([question(0)[0]])[0]
        # [1, agree, s_free, agree · s_free, embedding]: one free arm agrees with itself; a StubArm
        # gives no signal
        assert x[:4] == [1.0, 1.0, 0.0, 0.0] and np.allclose(x[4:], emb)
        assert free.answered.count(question(0)[0]) == 1
        forced = pipe.answer(*question(1), arm="free")  # picked: the answer given for the context is reused
        assert forced.arm == "free" and free.answered.count(question(1)[0]) == 1
        assert pipe.state.pending[forced.decision].observed == {}
        # an open question: the free arm cannot answer, so it says nothing (agree = 0)
        r = pipe.answer("Which drug treats diabetes?")
        assert pipe.state.pending[r.decision].embedding[:4] == [1.0, 0.0, 0.0, 0.0]
        pipe.feedback(r.decision, correct=True)
    with make(tmp_path) as again:  # the state keeps its context over a config that says "question"
        assert again.state.context == "question+free" and len(again.state.pending) == 2


def test_a_state_from_before_contexts_reads_as_question_and_a_mismatch_is_named(tmp_path: Path) -> None:
    import json

    with make(tmp_path) as pipe:
        pipe.answer(*question(0))
    state = tmp_path / "state" / "state.json"
    body = json.loads(state.read_text())
    assert body["context"] == "question"
    del body["context"]
    state.write_text(json.dumps(body))
    with make(tmp_path, context="question+free") as pipe:
        assert pipe.state.context == "question" and pipe.state.router.dim == 8
    body["context"] = "question+free"
    state.write_text(json.dumps(body))
    with pytest.raises(DataError, match=r"expects 8-d contexts, and its context \(question\+free\) is 12-d"):
        make(tmp_path)


def test_snapshots_written_in_the_background_lose_nothing_at_a_kill(tmp_path: Path) -> None:
    """Every few events the journal is set aside and the snapshot written by a background thread; a kill
    at any point leaves a snapshot and segments that replay to the same state as a clean run."""
    ids = _run_and_kill(tmp_path / "a", "\n".join([
        "pipe.state.snapshot_every = 3",
        "rs = [pipe.answer(*question(i % 4)) for i in range(7)]",
        "[pipe.feedback(r.decision, correct=True) for r in rs[:3]]",
        "pipe.state._snapshotter.join()",  # a snapshot was written and its segments removed
        "assert (pipe.state.root / 'state.json').exists()",
        "rs.append(pipe.answer(*question(1)))",
        "print(json.dumps([r.decision for r in rs]), flush=True)"]))
    root = tmp_path / "a" / "state"
    assert all(int(p.name.rsplit(".", 1)[1]) > 0 for p in root.glob("journal.jsonl.*"))
    with make(tmp_path / "a") as after:
        assert list(after.state.pending) == ids[3:]
        s = after.status()
        assert s.questions == 8 and sum(a.pulls for a in s.arms) == 8
        replayed = after.state.router.state_dict()
    (tmp_path / "b").mkdir()
    with make(tmp_path / "b") as ref:
        rs = [ref.answer(*question(i % 4)) for i in range(7)]
        for r in rs[:3]:
            ref.feedback(r.decision, correct=True)
        ref.answer(*question(1))
        assert ref.state.router.state_dict() == replayed
    assert not list(root.glob("journal.jsonl.*"))  # the clean close wrote the snapshot and removed them


def test_concurrent_answers_and_feedback_keep_the_books_and_run_an_in_process_arm_alone(
        tmp_path: Path) -> None:
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    pipe = make(tmp_path, budget=3.0)
    inside: dict[str, int] = {}
    overlap: list[str] = []
    guard = threading.Lock()
    for name, runner in pipe.runners.items():  # every stub arm here is in-process (not an API arm)
        real = runner.answer

        def slow(question: Question, name: str = name, real: Callable[[Question], ArmOutput] = real
                 ) -> ArmOutput:
            with guard:
                inside[name] = inside.get(name, 0) + 1
                if inside[name] > 1:
                    overlap.append(name)
            time.sleep(0.002)
            with guard:
                inside[name] -= 1
            return real(question)

        runner.answer = slow  # type: ignore[method-assign]

    def one(i: int) -> float:
        try:
            r = pipe.answer(*question(i))
        except BudgetExceededError:
            return 0.0
        pipe.feedback(r.decision, correct=i % 2 == 0)
        return r.cost

    with pipe, ThreadPoolExecutor(8) as pool:
        costs = list(pool.map(one, range(40)))
        st_ = pipe.status()
    assert not overlap
    assert st_.spent == pytest.approx(sum(costs)) and st_.spent <= 3.0 + 1e-9
    assert st_.pending == 0
    with make(tmp_path, budget=3.0) as again:  # the journal replays to the same books
        assert again.status().spent == pytest.approx(st_.spent)


def test_an_old_or_broken_calibration_is_named_in_every_answer_and_a_fit_replaces_it(tmp_path: Path) -> None:
    with make(tmp_path) as pipe:
        pipe.state.calibration_file.write_text('{"kind": "kgwise.MondrianCalibration", "arms": {}}')
    with make(tmp_path) as pipe:  # opening does not fail: the fit that mends it must be able to run
        assert pipe.status().calibration_problem is not None
        r = pipe.answer(*question(0))
        assert r.answer_set is None and "calibrations made before the held-out split" in r.notes[0]
        pipe.feedback(r.decision, correct=True)
        pipe.state.save_calibration(held_out(pipe, 100))
        assert pipe.status().calibration_problem is None and pipe.answer(*question(1)).answer_set is not None


def test_a_snapshot_waits_until_the_journal_is_as_large_as_the_last_snapshot(tmp_path: Path) -> None:
    with make(tmp_path) as pipe:
        state = pipe.state
        assert isinstance(state, StateDir)
        state.snapshot_every = 1
        state.save()
        bar = state.state_file.stat().st_size
        before = 0
        for i in range(500):
            pipe.feedback(pipe.answer(*question(i % 4)).decision, correct=True)
            if state._journal.bytes_written < before:  # set aside: a snapshot is being written
                break
            before = state._journal.bytes_written
        else:
            raise AssertionError("no snapshot in 500 answers")
        assert before < bar <= before + 10_000  # not one event before the journal reached the snapshot's size
