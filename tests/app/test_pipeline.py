"""``Pipeline``: answer → feedback → status over one state directory.

The unit tests run the pipeline's own logic with test-double arms (``StubArm``) and a hash encoder
(``FakeEncoder``); ``test_live_*`` (slow) run it with real parts: smollm2-135m in-process as one arm and
a llama.cpp OpenAI-compatible server on 127.0.0.1 as another, over a KG and questions written here.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kgwise.app.config import PipelineConfig
from kgwise.app.pipeline import BudgetExhaustedError, Pipeline, UnknownDecisionError
from kgwise.app.state import ArmCalibration
from kgwise.errors import ConfigError
from kgwise.kg.loaders import open_graph_file

from .conftest import DISEASES, STUB_CONFIG, TREATS, FakeEncoder, StubArm, write_config, write_kg


def make(root: Path, cheap: float = 0.1, dear: float = 0.3, budget: float = 1.0, seed: int = 0,
         free: bool = True, kg: bool = False) -> Pipeline:
    write_kg(root)
    body = STUB_CONFIG.format(cheap=cheap, dear=dear, budget=budget, seed=seed)
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
        assert r.label in {"A", "B", "C"} and r.answer == dict(zip("ABC", question(0)[1]))[r.label]
        assert set(r.probabilities) == {"A", "B", "C"}
        assert r.answer_set is None and "no calibration" in r.notes[0]
        pending = pipe.state.pending[r.decision]
        assert pending.arm == r.arm and pending.bound == r.scores[["cheap", "dear", "free"].index(r.arm)].cost_bound
        if r.arm != "free":  # the free arm answered too, to be graded at feedback
            assert set(pending.observed) == {"free"}
        assert pipe.status().pending == 1
        assert pipe.status().reserved == pytest.approx(r.cost)


def test_feedback_teaches_once_and_refuses_unknown_or_settled_decisions(tmp_path: Path) -> None:
    with make(tmp_path, seed=3) as pipe:
        text, choices = question(2)
        r = pipe.answer(text, choices)
        state_file = pipe.state.state_file
        before = state_file.read_bytes()
        with pytest.raises(ConfigError, match="neither a choice label"):
            pipe.feedback(r.decision, gold="aspirin-x")
        with pytest.raises(ConfigError, match="exactly one of"):
            pipe.feedback(r.decision, correct=True, gold="A")
        assert state_file.read_bytes() == before and r.decision in pipe.state.pending
        seen = dict(pipe.state.pending[r.decision].observed)
        fb = pipe.feedback(r.decision, gold=choices[0])  # by the choice's text
        assert fb.arm == r.arm and fb.reward == float(r.label == "A")
        assert fb.observed == {name: float(pred == "A") for name, pred in seen.items()}
        assert (r.arm == "free") == (not seen)
        status = pipe.status()
        assert status.pending == 0 and status.reserved == 0.0 and status.spent == pytest.approx(r.cost)
        after = state_file.read_bytes()
        with pytest.raises(UnknownDecisionError, match="already settled"):
            pipe.feedback(r.decision, correct=True)
        with pytest.raises(UnknownDecisionError, match="not made with this state"):
            pipe.feedback("f" * 32, correct=True)
        assert state_file.read_bytes() == after


def test_a_restart_keeps_pending_decisions_and_their_held_budget(tmp_path: Path) -> None:
    with make(tmp_path) as pipe:
        results = [pipe.answer(*question(i)) for i in range(4)]
        held = pipe.status().reserved
    with make(tmp_path) as again:
        assert set(again.state.pending) == {r.decision for r in results}
        assert again.status().reserved == pytest.approx(held)
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
        with pytest.raises(BudgetExhaustedError, match="no arm's cost bound fits"):
            while True:
                pipe.answer(*question(1))
        assert pipe.status().spent + pipe.status().reserved <= 0.5


def test_calibrated_sets_carry_their_statement_and_live_coverage_counts(tmp_path: Path) -> None:
    with make(tmp_path) as pipe:
        rng = np.random.default_rng(0)
        cals = {n: ArmCalibration(n, "lac", tuple(rng.uniform(0, 0.9, 40).tolist())) for n in pipe.runners}
        pipe.state.save_calibration(cals, {"questions": 40})
        r = pipe.answer(*question(1))
        s = r.answer_set
        assert s is not None and s.alpha == 0.2 and s.guarantee
        assert f"fitted router sends to arm {r.arm!r}" in s.statement
        assert r.label in s.labels or len(s.labels) < 3
        fb = pipe.feedback(r.decision, gold="A")
        assert fb.covered == ("A" in s.labels)
        assert pipe.status().arms[["cheap", "dear", "free"].index(r.arm)].coverage.n == 1
        # too few calibration questions for α: every choice, trivially covered
        pipe.state.save_calibration({n: ArmCalibration(n, "lac", (0.1, 0.2)) for n in pipe.runners}, {})
        r2 = pipe.answer(*question(3))
        assert r2.answer_set is not None and len(r2.answer_set.labels) == 3
        assert "covers the truth trivially" in r2.answer_set.statement


def test_open_questions_link_the_answer_to_kg_entities(tmp_path: Path) -> None:
    with make(tmp_path, kg=True) as pipe:
        r = pipe.answer("Which drug would you take for a headache?")
        assert r.arm in {"cheap", "dear"}  # the free arm answers multiple choice only
        assert r.label is None and r.question_entities == ("headache",)
        assert r.answer_entities == (("aspirin",) if r.answer == "aspirin" else ())
        assert any("open questions" in n for n in r.notes)
        fb = pipe.feedback(r.decision, gold=["aspirin", "ibuprofen"])
        assert fb.reward == float(r.answer == "aspirin")


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
                    try:
                        paid += pipe.answer(*question(int(op[1]))).cost  # type: ignore[call-overload]
                    except BudgetExhaustedError:
                        pass
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
