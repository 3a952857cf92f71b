"""External arms (models the caller runs): ``Pipeline.route`` → ``settle`` / ``cancel`` with the pipeline's
one router and budget, journaled in its state directory.

Unit tests of the pipeline's own logic: a hash encoder (``FakeEncoder``, a test double) and, for mixed
configs, ``StubArm`` runners (test doubles); the grounding test uses the real KG written here.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kgwise.app import BudgetExceededError, Pipeline, UnknownDecisionError
from kgwise.app.config import PipelineConfig
from kgwise.app.state import StateDir
from kgwise.errors import ConfigError, DataError
from kgwise.kg.loaders import open_graph_file

from .conftest import FakeEncoder, StubArm, write_config, write_kg

EXTERNAL = """\
[kg]
graph = "kg.tsv"

[[arms]]
name = "gnn"
kind = "external"
cluster = "KGM"
price = {gnn}
reported_accuracy = 0.7

[[arms]]
name = "small"
kind = "external"
price = {small}

[[arms]]
name = "big"
kind = "external"
price = {big}
reported_accuracy = 0.9

[router]
budget_usd = {budget}
{extra}
"""
QUESTIONS = ["What does aspirin treat?", "What does insulin treat?", "Which drug treats infection?"]
NAMES = ("gnn", "small", "big")


def _dir(pipe: Pipeline) -> StateDir:
    """The pipeline's state folder (these tests reach into the folder state)."""
    assert isinstance(pipe.state, StateDir)
    return pipe.state


def config(root: Path, gnn: float = 0.0, small: float = 0.2, big: float = 0.5, budget: float = 1.0,
           extra: str = "") -> PipelineConfig:
    write_kg(root)
    body = EXTERNAL.format(gnn=gnn, small=small, big=big, budget=budget, extra=extra)
    return PipelineConfig.load(write_config(root, body))


def make(root: Path, kg: bool = False, **kw: float | str) -> Pipeline:
    cfg = config(root, **kw)  # type: ignore[arg-type]
    graph = open_graph_file(root / "kg.tsv") if kg else None
    return Pipeline(cfg, root / "state", {}, FakeEncoder(), graph)


def crash(pipe: Pipeline) -> None:
    """Leave the state as a kill does: no snapshot, the journal only, the OS lock gone."""
    _dir(pipe)._journal.close()
    _dir(pipe)._lock.release()


def _files(pipe: Pipeline) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in pipe.state.root.iterdir() if p.name != "lock"}


def test_route_holds_the_bound_and_settle_pays_and_teaches_once(tmp_path: Path) -> None:
    with make(tmp_path, kg=True) as pipe:
        d = pipe.route(QUESTIONS[0])
        assert d.arm in NAMES and d.bound == {"gnn": 0.0, "small": 0.2, "big": 0.5}[d.arm]
        assert d.cluster == ("KGM" if d.arm == "gnn" else "LLM") and d.unit == "usd"
        assert d.question_entities == ("aspirin",)  # grounded in the KG
        assert d.expires_in_s == 3600.0
        st_ = pipe.status()
        assert st_.routed == 1 and st_.reserved == pytest.approx(d.bound) and st_.pending == 0
        s = pipe.settle(d.decision, True, d.bound / 2)
        assert (s.arm, s.outcome, s.reward, s.cost) == (d.arm, "settled", 1.0, d.bound / 2)
        st_ = pipe.status()
        assert st_.routed == 0 and st_.reserved == 0 and st_.spent == pytest.approx(d.bound / 2)
        assert {a.name: a.pulls for a in st_.arms}[d.arm] == 1
        with pytest.raises(UnknownDecisionError, match="settled"):
            pipe.settle(d.decision, True, 0.0)
        with pytest.raises(UnknownDecisionError, match="not made with this state"):
            pipe.cancel("f" * 32)
        with pytest.raises(ConfigError, match="every arm of this pipeline is external"):
            pipe.answer(QUESTIONS[0])
        with pytest.raises(ConfigError, match="question text is empty"):
            pipe.route("  ")


def test_a_cost_above_its_bound_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    with make(tmp_path, gnn=0.1, small=0.1, big=0.1) as pipe:
        d = pipe.route(QUESTIONS[0])
        before = _files(pipe)
        for cost in (100.0, 1e308):
            with pytest.raises(BudgetExceededError, match=r"above the bound 0\.1"):
                pipe.settle(d.decision, True, cost)
        for bad, field in ((dict(correct=True, cost=float("inf")), "cost"),
                           (dict(correct=True, cost=-1.0), "cost"), (dict(correct=2.0, cost=0.0), "correct")):
            with pytest.raises(ConfigError, match=field):
                pipe.settle(d.decision, **bad)  # type: ignore[arg-type]
        assert _files(pipe) == before and d.decision in pipe.state.routed
        assert pipe.status().spent == 0.0
        assert pipe.settle(d.decision, 0.0, 0.1).spent == pytest.approx(0.1)


def test_costs_name_arms_and_are_capped_by_their_price(tmp_path: Path) -> None:
    with make(tmp_path) as pipe:
        d = pipe.route(QUESTIONS[0], {"gnn": 5.0, "small": 5.0, "big": 5.0})  # a greedy caller
        assert d.bound == {"gnn": 0.0, "small": 0.2, "big": 0.5}[d.arm]
        low = pipe.route(QUESTIONS[1], {"small": 0.01, "big": 0.01})  # lower bounds are kept
        assert low.bound == {"gnn": 0.0, "small": 0.01, "big": 0.01}[low.arm]
        for costs, field in (({"gpu": 1.0}, "costs.gpu"), ({"small": -1.0}, "costs.small"),
                             ({"big": float("nan")}, "costs.big")):
            with pytest.raises(ConfigError, match=field):
                pipe.route(QUESTIONS[2], costs)
        assert pipe.status().routed == 2


def test_waiting_decisions_hold_their_bound_against_the_budget(tmp_path: Path) -> None:
    """Two decisions that each fit the budget alone may not both be approved before they are settled."""
    with make(tmp_path, gnn=0.8, small=0.8, big=0.8) as pipe:
        first = pipe.route(QUESTIONS[0])
        assert first.remaining_budget == pytest.approx(0.2)
        with pytest.raises(BudgetExceededError, match=r"0\.2 usd \(0 spent, 0\.8 held"):
            pipe.route(QUESTIONS[1])
        assert pipe.settle(first.decision, 1.0, 0.5).remaining_budget == pytest.approx(0.5)


def test_settle_learns_the_grades_of_other_external_arms_at_no_cost(tmp_path: Path) -> None:
    with make(tmp_path) as pipe:
        d = pipe.route(QUESTIONS[0], {"small": 0.0, "big": 0.0})
        other = next(a for a in NAMES if a != d.arm)
        for bad in ({"gpu": 1.0}, {d.arm: 1.0}, {other: 1.5}):
            with pytest.raises(ConfigError, match="observed"):
                pipe.settle(d.decision, 1.0, 0.0, bad)
        assert d.decision in pipe.state.routed  # nothing learnt from a refused settle
        r = pipe.state.router.router
        alpha, beta = r.thompson.alpha.sum(), r.thompson.beta.sum()
        s = pipe.settle(d.decision, 1.0, 0.0, {other: 0.0})
        assert s.observed == {other: 0.0}
        assert r.pulls.sum() == 1 and r.spent == 0.0  # the observed arm was not pulled and spent nothing
        assert (r.thompson.alpha.sum(), r.thompson.beta.sum()) == (alpha + 1, beta + 1)  # right; wrong


def test_decisions_wait_across_a_kill_and_replay_to_the_same_router(tmp_path: Path) -> None:
    pipe = make(tmp_path)
    decisions = [pipe.route(q) for q in QUESTIONS]
    pipe.settle(decisions[0].decision, 1.0, decisions[0].bound)
    pipe.cancel(decisions[1].decision)
    state = pipe.state.router.state_dict()
    crash(pipe)
    with make(tmp_path) as again:  # the journal replays every decision, settle and cancel
        assert list(again.state.routed) == [decisions[2].decision]
        assert again.state.router.state_dict() == state
        assert again.status().reserved == pytest.approx(decisions[2].bound)
        with pytest.raises(UnknownDecisionError, match="cancelled"):
            again.settle(decisions[1].decision, 1.0, 0.0)
        again.settle(decisions[2].decision, 0.0, 0.0)
    with make(tmp_path) as third:  # and from the snapshot close() wrote
        assert not third.state.routed and third.status().reserved == 0
        assert third.status().questions == 3


def test_decisions_expire_and_can_be_cancelled(tmp_path: Path) -> None:
    now = [1000.0]
    with make(tmp_path, gnn=0.5, extra="external_ttl_s = 60") as pipe:
        _dir(pipe).clock = lambda: now[0]
        old = pipe.route(QUESTIONS[0], {"gnn": 0.3, "small": 0.3, "big": 0.3})
        assert old.expires_in_s == 60
        now[0] += 30
        kept = pipe.route(QUESTIONS[1], {"gnn": 0.2, "small": 0.2, "big": 0.2})
        now[0] += 31  # the first is 61 s old
        assert pipe.status().reserved == pytest.approx(0.2)
        with pytest.raises(UnknownDecisionError, match="expired"):
            pipe.settle(old.decision, 1.0, 0.0)
        out = pipe.cancel(kept.decision)
        assert out.outcome == "cancelled" and out.bound == pytest.approx(0.2) and pipe.status().reserved == 0
        with pytest.raises(UnknownDecisionError, match="cancelled"):
            pipe.settle(kept.decision, 1.0, 0.0)
        waiting = pipe.route(QUESTIONS[2])
    now[0] += 59  # when a decision was made is saved: a restart does not restart its clock
    with make(tmp_path, gnn=0.5, extra="external_ttl_s = 60") as again:
        _dir(again).clock = lambda: now[0]
        assert waiting.decision in again.state.routed
        now[0] += 2
        assert again.status().routed == 0 and again.status().reserved == 0


def test_answer_never_picks_an_external_arm_nor_route_an_internal_one(tmp_path: Path) -> None:
    write_kg(tmp_path)
    internal = ('[[arms]]\nname = "kgm"\nkind = "llm"\nspec = "smollm2-135m"\nprice = 0\n\n'
                '[[arms]]\nname = "local"\nkind = "llm"\nspec = "smollm2-135m"\nprice = 0.3\n\n[router]')
    body = EXTERNAL.format(gnn=0.0, small=0.2, big=0.5, budget=100.0, extra="").replace("[router]", internal)
    cfg = PipelineConfig.load(write_config(tmp_path, body))
    runners = {"kgm": StubArm(cfg.arm("kgm")), "local": StubArm(cfg.arm("local"))}
    with Pipeline(cfg, tmp_path / "state", runners, FakeEncoder()) as pipe:
        for i in range(12):
            r = pipe.answer(QUESTIONS[i % 3] + "?" * i, ["headache", "fever"])
            assert r.arm in runners
            assert {s.arm: s.affordable for s in r.scores}["big"] is False
            d = pipe.route(QUESTIONS[i % 3] + "!" * i)
            assert d.arm in NAMES
            pipe.settle(d.decision, 1.0, d.bound)
            pipe.feedback(r.decision, correct=True)
        assert {a.name: a.kind for a in pipe.status().arms}["big"] == "external"


@pytest.mark.parametrize("arm, message", [
    ('name = "x"\nkind = "external"\nprice = 0.1\nspec = "openai:gpt-4o"', r"arms\[0\]\.spec: not for an "
     "external arm"),
    ('name = "x"\nkind = "external"', r"arms\[0\]\]: an external arm needs price"),
    ('name = "x"\nkind = "external"\nprice = -1', r"arms\[0\]\.price: a price must be ≥ 0"),
])
def test_external_arms_are_checked(tmp_path: Path, arm: str, message: str) -> None:
    write_kg(tmp_path)
    path = write_config(tmp_path, f'[kg]\ngraph = "kg.tsv"\n\n[[arms]]\n{arm}\n\n[router]\nbudget_usd = 1\n')
    with pytest.raises(DataError, match=message):
        PipelineConfig.load(path)
    calls = write_config(tmp_path, '[kg]\ngraph = "kg.tsv"\n\n[[arms]]\nname = "x"\nkind = "external"\n\n'
                         '[router]\nbudget_calls = 5\nexternal_ttl_s = 0\n', "calls.toml")
    cfg = PipelineConfig.load(calls)
    assert cfg.arm("x").per_call == 1.0 and cfg.router.external_ttl_s is None  # one call; 0: never


def test_a_router_file_of_the_previous_version_is_refused_with_what_to_do(tmp_path: Path) -> None:
    """The router state file `kgwise route init` wrote (``router_v1.json``: its first format) is neither read
    nor migrated: the error says so, and what to write instead."""
    path = tmp_path / "router.json"
    shutil.copy(Path(__file__).parents[1] / "route" / "data" / "router_v1.json", path)
    assert json.loads(path.read_text())["kind"] == "CokeRouter"
    with pytest.raises(DataError, match=r'neither read nor migrated.*kind = "external".*kgwise serve '
                                        r"--config") as err:
        PipelineConfig.load(path)
    assert str(path) in str(err.value)


class BudgetMachine(RuleBasedStateMachine):
    """Route, settle (right, over-bound, huge costs), cancel, expiry and kill/restart in any order: the
    budget is never exceeded, the spending never non-finite, the held bounds are the waiting decisions'."""

    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp())
        self.now = [0.0]
        self.pipe = self._open()
        self.decisions: list[str] = []

    def _open(self) -> Pipeline:
        pipe = make(self.root, small=0.3, big=0.6, extra="external_ttl_s = 10")
        _dir(pipe).clock = lambda: self.now[0]
        return pipe

    @rule(costs=st.lists(st.floats(0, 10), min_size=3, max_size=3))
    def route(self, costs: list[float]) -> None:
        with contextlib.suppress(BudgetExceededError):
            self.decisions.append(self.pipe.route("q", dict(zip(NAMES, costs, strict=True))).decision)

    @rule(pick=st.integers(0, 50), cost=st.one_of(st.floats(0, 1), st.sampled_from([1e308, 5.0])),
          reward=st.floats(0, 1))
    def settle(self, pick: int, cost: float, reward: float) -> None:
        if self.decisions:
            with contextlib.suppress(UnknownDecisionError, BudgetExceededError):
                self.pipe.settle(self.decisions[pick % len(self.decisions)], reward, cost)

    @rule(pick=st.integers(0, 50))
    def cancel(self, pick: int) -> None:
        if self.decisions:
            with contextlib.suppress(UnknownDecisionError):
                self.pipe.cancel(self.decisions[pick % len(self.decisions)])

    @rule(seconds=st.floats(0, 15))
    def wait(self, seconds: float) -> None:
        self.now[0] += seconds

    @rule(kill=st.booleans())
    def restart(self, kill: bool) -> None:
        if kill:
            crash(self.pipe)
        else:
            self.pipe.close()
        self.pipe = self._open()

    @invariant()
    def within_budget(self) -> None:
        r = self.pipe.state.router
        assert np.isfinite(r.spent) and r.spent >= 0
        assert r.spent + r.reserved <= r.budget + 1e-9
        assert r.reserved == pytest.approx(sum(x.bound for x in self.pipe.state.routed.values()))

    def teardown(self) -> None:
        self.pipe.close()
        shutil.rmtree(self.root, ignore_errors=True)


BudgetMachine.TestCase.settings = settings(max_examples=25, stateful_step_count=25, deadline=None)
test_budget_sequences = BudgetMachine.TestCase
