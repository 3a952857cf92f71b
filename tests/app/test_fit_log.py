"""``fit --log``: the router is cross-fitted and warm-started from a graded log, no arm is called."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kgwise.app.config import PipelineConfig
from kgwise.app.fit import MIN_CROSS_FIT
from kgwise.app.fit_log import fit_log
from kgwise.app.pipeline import Pipeline
from kgwise.errors import DataError

from .conftest import STUB_CONFIG, FakeEncoder, StubArm, write_config, write_kg


def _pipeline(root: Path) -> tuple[Pipeline, dict[str, StubArm]]:
    write_kg(root)
    body = STUB_CONFIG.format(cheap=0.1, dear=0.3, budget=30.0, seed=0)
    cfg = PipelineConfig.load(write_config(root, body))
    stubs = {a.name: StubArm(a) for a in cfg.arms}  # test doubles: they must never be called here
    return Pipeline(cfg, root / "state", dict(stubs), FakeEncoder()), stubs


def _log(root: Path, n: int) -> Path:
    rng = np.random.default_rng(0)
    lines = []
    for i in range(n):
        hard = i % 2 == 0
        lines.append({"id": f"q{i}", "text": f"question number {i} about drug {i % 7}?", "arms": {
            "free": {"answer": "x" if hard else "y", "correct": not hard, "cost": 0,
                     "signals": [0.2 if hard else 0.9, float(rng.random())]},
            "cheap": {"answer": "y", "correct": bool(rng.random() < 0.5), "usage": {"calls": 1}},
            "dear": {"answer": "y", "correct": bool(rng.random() < 0.8), "cost": 0.3}}})
    path = root / "graded.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def test_a_graded_log_fits_the_router_without_calling_an_arm(tmp_path: Path) -> None:
    pipe, stubs = _pipeline(tmp_path)
    said: list[str] = []
    with pipe:
        report = fit_log(pipe, _log(tmp_path, MIN_CROSS_FIT + 20), echo=said.append)
        assert all(not s.answered for s in stubs.values())
        assert report.calls_made == 0 and report.spent == 0.0
        assert report.settings["outcomes_learnt"] == 3 * (MIN_CROSS_FIT + 20)  # open questions: none held out
        sel = report.router_selection
        assert sel is not None and sel.method == "cross-fitting"
        # usage is priced by the arm's config (0.1 a call), cost taken as given
        costs = {a.name: a.cost_mean for a in report.arms}
        assert costs == {"cheap": pytest.approx(0.1), "dear": pytest.approx(0.3), "free": 0.0}
        assert any("no arm is called" in line for line in said)


def test_an_arm_the_config_does_not_have_is_named(tmp_path: Path) -> None:
    pipe, _ = _pipeline(tmp_path)
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"id": "q1", "text": "t?", "arms": {"gpt-9": {"answer": "a", "correct": True,
                                                                            "cost": 1}}}) + "\n")
    with pipe, pytest.raises(DataError, match=r"bad\.jsonl.*gpt-9"):
        fit_log(pipe, path)


def test_the_fit_cross_fits_a_predicted_context_and_the_pipeline_answers_with_it(tmp_path: Path) -> None:
    pipe, _ = _pipeline(tmp_path)
    with pipe:
        report = fit_log(pipe, _log(tmp_path, MIN_CROSS_FIT + 20), echo=lambda _: None)
        sel = report.router_selection
        assert sel is not None and sel.cross_fit is not None
        assert {"predicted", "predicted-free"} <= {g.context for g in sel.cross_fit.grid}


def test_a_predicted_router_keeps_its_predictor_in_the_state_and_routes_on_it(tmp_path: Path) -> None:
    write_kg(tmp_path)
    body = STUB_CONFIG.format(cheap=0.1, dear=0.3, budget=30.0, seed=0).replace(
        "seed = 0\n", 'seed = 0\ncontext = "predicted"\n')
    cfg = PipelineConfig.load(write_config(tmp_path, body))
    # fewer questions than cross-fitting needs: the config's context stays, the predictor is still fitted
    log = _log(tmp_path, MIN_CROSS_FIT - 20)
    # test doubles of the arms: the code around them is tested
    stubs = {a.name: StubArm(a) for a in cfg.arms}
    with Pipeline(cfg, tmp_path / "state", dict(stubs), FakeEncoder()) as pipe:
        fit_log(pipe, log, echo=lambda _: None)
        assert pipe.state.context == "predicted"
        predicted = pipe.state.router.predicted
        assert predicted is not None and predicted.width == 1 + len(cfg.arms)
    with Pipeline(cfg, tmp_path / "state", dict(stubs), FakeEncoder()) as again:
        kept = again.state.router.predicted
        assert kept is not None
        # the free arm's signals enter the features: a confident and an unsure free answer differ
        e = FakeEncoder().encode(["question number 3 about drug 3?"])[0]
        sure = kept.vector("question number 3 about drug 3?", e, {"free": ("y", (0.9, 0.5))})
        unsure = kept.vector("question number 3 about drug 3?", e, {"free": ("x", (0.2, 0.5))})
        assert sure[0] == unsure[0] == 1.0 and sure.shape == (4,)
        assert sure[3] > unsure[3]  # the free arm is right when it is confident (the log's rule)
        result = again.answer("Which drug treats gout?", ["aspirin", "colchicine"])
        assert result.arm in {"cheap", "dear", "free"}
        x = again.state.pending[result.decision].embedding
        assert x[0] == 1.0 and len(x) == 4


def test_a_cascade_router_escalates_by_its_fitted_rule_and_keeps_it_in_the_state(tmp_path: Path) -> None:
    write_kg(tmp_path)
    body = STUB_CONFIG.format(cheap=0.1, dear=0.3, budget=30.0, seed=0).replace(
        "seed = 0\n", 'seed = 0\ncontext = "cascade"\n')
    cfg = PipelineConfig.load(write_config(tmp_path, body))
    log = _log(tmp_path, MIN_CROSS_FIT - 20)  # too few to cross-fit: the config's context stays
    stubs = {a.name: StubArm(a) for a in cfg.arms}  # test doubles of the arms: the code around them is tested
    with Pipeline(cfg, tmp_path / "state", dict(stubs), FakeEncoder()) as pipe:
        report = fit_log(pipe, log, echo=lambda _: None)
        sel = report.router_selection
        assert sel is not None and sel.context == "cascade" and sel.cascade is not None
        # the free arm is cheap; the dear arm (right 80 %) is the strong one
        assert (sel.cascade["cheap"], sel.cascade["strong"]) == ("free", "dear")
        assert 0.0 <= sel.cascade["share"] <= 1.0
        saved = json.loads((pipe.state.root / "fit-report.json").read_text())
        assert saved["router_selection"]["cascade"] == sel.cascade
    with Pipeline(cfg, tmp_path / "state", dict(stubs), FakeEncoder()) as again:
        rule = again.state.router.router.cascade
        assert rule is not None and again.state.router.predicted is not None
        names = again.state.router.names
        assert (names[rule.cheap], names[rule.strong]) == ("free", "dear")
        router = again.state.router.router
        # the rule decides between its two arms; the third is never picked while one of them is affordable
        mask = np.ones(3, dtype=bool)
        up = np.zeros(4)
        up[[0, 1 + rule.strong]] = 1.0
        down = np.zeros(4)
        down[[0, 1 + rule.cheap]] = 1.0
        assert router._narrow(mask, up).tolist() == [j == rule.strong for j in range(3)]
        assert router._narrow(mask, down).tolist() == [j == rule.cheap for j in range(3)]
        result = again.answer("Which drug treats gout?", ["aspirin", "colchicine"])
        assert result.arm in {"free", "dear"}
