"""``fit``: spend estimated first and limited, resumable arm runs, warm start, per-arm calibration."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kgwise.app.config import PipelineConfig
from kgwise.app.fit import MIN_CROSS_FIT, REPORT_FILE, SpendLimitError, fit, read_questions
from kgwise.app.pipeline import Pipeline
from kgwise.conformal.split import conformal_quantile
from kgwise.errors import ConfigError, DataError
from kgwise.types import Question, Usage

from .conftest import STUB_CONFIG, StubArm, dev_rows, write_config, write_kg, write_questions
from .test_pipeline import make


def _stubs(pipe: Pipeline) -> dict[str, StubArm]:
    return {n: r for n, r in pipe.runners.items() if isinstance(r, StubArm)}


def test_a_bad_question_line_is_named_by_file_line_and_key(tmp_path: Path) -> None:
    rows = dev_rows()
    path = write_questions(tmp_path, rows)
    assert [q.gold for q in read_questions(path)][:1] == [(next(
        c.label for c in read_questions(path)[0].choices if c.text == rows[0]["answer"]),)]
    bad = [dict(r) for r in rows]
    del bad[3]["answer"]
    with pytest.raises(DataError, match=r"dev.jsonl:4: gold: missing: a dev question needs its gold"):
        read_questions(write_questions(tmp_path, bad))
    bad = [dict(r) for r in rows]
    bad[1]["answer"] = "water"
    with pytest.raises(DataError, match=r"dev.jsonl:2: answer: 'water' is neither a choice label"):
        read_questions(write_questions(tmp_path, bad))
    bad = [dict(r) for r in rows]
    bad[5]["id"] = bad[0]["id"]
    with pytest.raises(DataError, match=r"dev.jsonl:6: id: 'q0' is used twice"):
        read_questions(write_questions(tmp_path, bad))
    bad = [dict(r) for r in rows]
    bad[2]["choise"] = ["a", "b"]
    with pytest.raises(DataError, match=r"dev.jsonl:3: choise: unknown key"):
        read_questions(write_questions(tmp_path, bad))


def test_the_estimate_comes_first_and_a_fit_beyond_max_spend_calls_nothing(tmp_path: Path) -> None:
    path = write_questions(tmp_path, dev_rows(3))
    said: list[str] = []
    with make(tmp_path, cheap=0.1, dear=0.3) as pipe:
        with pytest.raises(SpendLimitError, match=r"estimated spend 9.6 usd exceeds max_spend 9"):
            fit(pipe, path, max_spend=9.0, echo=said.append)
        assert "72 calls to make" in said[0] and "estimated spend 9.6 usd" in said[0]  # 24 × (0.1 + 0.3 + 0)
        assert all(not s.answered for s in _stubs(pipe).values())


def test_a_fit_resumes_without_paying_twice(tmp_path: Path) -> None:
    path = write_questions(tmp_path, dev_rows(3))
    with make(tmp_path, cheap=0.1, dear=0.3) as pipe:
        first = fit(pipe, path, max_spend=20.0, echo=lambda _: None)
        assert first.calls_made == 72 and first.calls_resumed == 0
        assert first.spent == pytest.approx(9.6)
    with make(tmp_path, cheap=0.1, dear=0.3) as again:
        second = fit(again, path, max_spend=0.0, echo=lambda _: None)
        assert second.calls_made == 0 and second.calls_resumed == 72 and second.spent == 0.0
        assert all(not s.answered for s in _stubs(again).values())
        assert second.arms == first.arms


def test_a_run_stops_before_a_call_that_could_pass_the_limit(tmp_path: Path) -> None:
    path = write_questions(tmp_path, dev_rows(3))
    with make(tmp_path, cheap=0.1, dear=0.3) as pipe:
        stubs = _stubs(pipe)
        pipe.runners["dear"] = StubArm(stubs["dear"].config, 0.9, extra_calls=1)  # pays twice its bound
        with pytest.raises(SpendLimitError, match=r"stopped before a call that could pass max_spend 9\.6"):
            fit(pipe, path, max_spend=9.6, echo=lambda _: None)
        log = (pipe.state.root / "fit-log.jsonl").read_text().splitlines()
        paid = sum(json.loads(row)["value"]["cost"] for row in log[1:])
        assert 9.6 - 0.4 < paid <= 9.6 + 0.3  # stopped near the limit; past it by one call's overrun at most


def test_fit_warm_starts_the_router_and_calibrates_each_arm_on_its_own_questions(tmp_path: Path) -> None:
    path = write_questions(tmp_path, dev_rows(4))
    with make(tmp_path, cheap=0.1, dear=0.3, budget=100.0) as pipe:
        report = fit(pipe, path, max_spend=100.0, echo=lambda _: None)
        n = report.questions
        assert n == 32
        assert sum(a.share_routed for a in report.arms) == pytest.approx(1.0)
        assert pipe.state.router.questions == 0  # a fresh router: learnt, not yet used
        assert report.settings["outcomes_learnt"] == 3 * n
        cal = pipe.state.calibrations
        assert sum(len(c.scores) for c in cal.values()) == n  # Mondrian: each question in one group
        for arm in report.arms:
            assert arm.calibration_size == (len(cal[arm.name].scores) if arm.name in cal else 0)
            if arm.threshold is not None:
                assert arm.threshold == conformal_quantile(np.asarray(cal[arm.name].scores), 0.2)
                assert arm.in_sample_coverage is not None and arm.in_sample_coverage >= 0.8 - 1e-9
        assert json.loads((pipe.state.root / REPORT_FILE).read_text())["questions"] == n
        # the live pipeline now attaches sets
        r = pipe.answer("What does aspirin treat?", ["fever", "diabetes", "thirst"])
        assert r.answer_set is not None or r.arm not in cal


def test_fit_refuses_while_decisions_await_feedback(tmp_path: Path) -> None:
    path = write_questions(tmp_path, dev_rows())
    with make(tmp_path) as pipe:
        pipe.answer("What does aspirin treat?", ["fever", "diabetes", "thirst"])
        with pytest.raises(ConfigError, match=r"1 decision.* await feedback"):
            fit(pipe, path, max_spend=100.0, echo=lambda _: None)


def test_a_small_log_keeps_the_configs_router_settings_and_says_why(tmp_path: Path) -> None:
    path = write_questions(tmp_path, dev_rows(4))
    with make(tmp_path, budget=100.0) as pipe:
        report = fit(pipe, path, max_spend=100.0, echo=lambda _: None)
        sel = report.router_selection
        assert sel is not None and sel.method == "config" and sel.cross_fit is None
        assert f"32 questions answered by every arm, fewer than the {MIN_CROSS_FIT}" in sel.reason
        assert (sel.context, sel.gamma, sel.decomposed_reward) == ("question", None, False)
        assert any("router settings" in n for n in report.not_fitted)


def test_a_large_log_chooses_gamma_reward_form_and_context_by_cross_fitting(tmp_path: Path) -> None:
    path = write_questions(tmp_path, dev_rows(13))  # 104 questions
    with make(tmp_path, budget=100.0) as pipe:
        report = fit(pipe, path, max_spend=100.0, echo=lambda _: None)
        sel = report.router_selection
        assert sel is not None and sel.method == "cross-fitting" and sel.cross_fit is not None
        grid = sel.cross_fit.grid
        assert len(grid) == 2 * 4 * 2  # contexts × γ × reward forms
        assert {g.context for g in grid} == {"question", "question+free"}
        assert sel.cross_fit.fold_sizes == (52, 52)
        best = max(g.accuracy for g in grid)
        chosen = sel.cross_fit.chosen
        assert chosen.accuracy == best and (sel.context, sel.gamma, sel.decomposed_reward) == (
            chosen.context, chosen.gamma, chosen.decomposed_reward)
        # the live router runs with the chosen settings, over the chosen context, and keeps them
        router = pipe.state.router.router
        assert (router.config.gamma_override, router.config.decomposed_reward) == (sel.gamma,
                                                                                   sel.decomposed_reward)
        assert pipe.state.context == sel.context
        assert router.dim == (8 if sel.context == "question" else 8 + 3 + 1)
        saved = json.loads((pipe.state.root / REPORT_FILE).read_text())
        assert saved["router_selection"]["method"] == "cross-fitting"
        assert len(saved["router_selection"]["cross_fit"]["grid"]) == 16
        assert all({"accuracy", "cost_per_question", "accuracy_by_fold"} <= set(g)
                   for g in saved["router_selection"]["cross_fit"]["grid"])
        assert not any("router settings" in n for n in report.not_fitted)
        pipe.answer("What does aspirin treat?", ["fever", "diabetes", "thirst"])


def test_the_mondrian_groups_come_from_routers_that_did_not_learn_the_question(tmp_path: Path) -> None:
    from kgwise.app.fit import LoggedCall, _out_of_fold_routes

    write_kg(tmp_path)
    cfg = PipelineConfig.load(write_config(tmp_path, STUB_CONFIG.format(cheap=0.1, dear=0.3, budget=100.0,
                                                                        seed=0)))
    names = list(cfg.names)
    n = 20
    qs = [Question(f"q{i}", f"question {i}") for i in range(n)]
    X = np.random.default_rng(0).normal(size=(n, 8))
    calls = {(a, q.id): LoggedCall(a, q.id, "x", {}, (i + k) % 3 == 0, 0.0 if a == "free" else 0.1,
                                   Usage(calls=1))
             for k, a in enumerate(names) for i, q in enumerate(qs)}
    rewards = {a: [float(calls[(a, q.id)].correct) for q in qs] for a in names}
    routed = _out_of_fold_routes(cfg, qs, calls, X, rewards, cfg.router.coke)
    assert len(routed) == n and all(a in names for a in routed)
    for i in (0, 7, 13):  # a question's own outcomes never reach the router that routes it
        flipped = {a: [1.0 - v if j == i else v for j, v in enumerate(vals)] for a, vals in rewards.items()}
        assert _out_of_fold_routes(cfg, qs, calls, X, flipped, cfg.router.coke)[i] == routed[i]
