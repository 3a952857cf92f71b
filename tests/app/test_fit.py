"""``fit``: spend estimated first and limited, resumable arm runs, warm start, per-arm calibration."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kgwise.app.calibration import CalibrationSelector
from kgwise.app.config import PipelineConfig
from kgwise.app.fit import MIN_CROSS_FIT, REPORT_FILE, SpendLimitError, fit, held_out
from kgwise.app.pipeline import Pipeline, RoutedCalibration
from kgwise.app.state import CoverageCount
from kgwise.conformal.split import conformal_quantile
from kgwise.datasets.user import read_questions
from kgwise.errors import ConfigError, DataError
from kgwise.server.pipeline_adapter import ServedPipeline

from .conftest import STUB_CONFIG, FakeEncoder, StubArm, dev_rows, write_config, write_kg, write_questions
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
    read_questions(write_questions(tmp_path, bad))  # a question without gold is read, but not for a fit
    with pytest.raises(DataError, match=r"dev.jsonl:4: field 'gold' missing: a dev question needs its gold"):
        read_questions(write_questions(tmp_path, bad), require_gold=True)
    bad = [dict(r) for r in rows]
    bad[1]["answer"] = "water"
    with pytest.raises(DataError, match=r"dev.jsonl:2: field 'answer': 'water' is neither a choice label"):
        read_questions(write_questions(tmp_path, bad))
    bad = [dict(r) for r in rows]
    bad[5]["id"] = bad[0]["id"]
    with pytest.raises(DataError, match=r"dev.jsonl:6: id 'q0' is given twice"):
        read_questions(write_questions(tmp_path, bad))
    bad = [dict(r) for r in rows]
    bad[2]["choise"] = ["a", "b"]
    with pytest.raises(DataError, match=r"dev.jsonl:3: unknown field\(s\) choise"):
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


def test_the_fit_replay_selects_by_cost_bounds_as_the_live_router_does(tmp_path: Path) -> None:
    """``dear`` is bounded at 3 calls (0.9) but pays 1 (0.3): within a 0.5 budget the live router can
    never afford it, so the replay that gives the report's expectation must not route to it either."""
    path = write_questions(tmp_path, dev_rows(4))
    with make(tmp_path, cheap=0.1, dear=0.3, budget=0.5) as pipe:
        dear = pipe.runners["dear"]
        assert isinstance(dear, StubArm)
        pipe.runners["dear"] = StubArm(dear.config, 0.9, calls=3, extra_calls=-2)
        assert pipe.bounds(read_questions(path)[0])["dear"] == pytest.approx(0.9)
        report = fit(pipe, path, max_spend=100.0, echo=lambda _: None)
        assert {a.name: a.share_routed for a in report.arms}["dear"] == 0.0
        assert {a.name: a.cost_mean for a in report.arms}["dear"] == pytest.approx(0.3)
        assert report.replay_spend <= 0.5 + 1e-12
        assert pipe.answer("What does aspirin treat?", ["fever", "diabetes", "thirst"]).arm != "dear"


def test_fit_warm_starts_the_router_on_one_part_and_calibrates_on_the_other(tmp_path: Path) -> None:
    path = write_questions(tmp_path, dev_rows(4))
    with make(tmp_path, cheap=0.1, dear=0.3, budget=100.0) as pipe:
        report = fit(pipe, path, max_spend=100.0, echo=lambda _: None)
        n = report.questions
        assert n == 32 and report.settings["held_out"] == 16 and report.settings["replay_on"] == "held-out"
        assert sum(a.share_routed for a in report.arms) == pytest.approx(1.0)
        assert pipe.state.router.questions == 0  # a fresh router: learnt, not yet used
        assert report.settings["outcomes_learnt"] == 3 * 16  # the held-out half is never learnt
        cal = pipe.state.calibration
        assert cal is not None and len(cal) == 16 and not np.isnan(cal.scores).any()
        held = [q for q, h in zip(read_questions(path), held_out(read_questions(path), 0.5), strict=True)
                if h]
        assert [q.id for q in held] == [f"q{i}" for i in range(1, 32, 2)]  # interleaved
        group = CalibrationSelector(cal).group(pipe.state.router.router, "fit")
        assert sum(a.calibration_size for a in report.arms) == int((group >= 0).sum())
        routed = [a.calibration_routed_mean for a in report.arms]
        assert all(r is not None for r in routed) and 0 < sum(r or 0 for r in routed) <= 16 + 1e-9
        for a, arm in enumerate(report.arms):
            scores = cal.scores[group == a, a]
            assert arm.calibration_size == len(scores)
            if arm.threshold is not None:
                assert arm.threshold == conformal_quantile(scores, 0.2)
                assert arm.in_sample_coverage is not None and arm.in_sample_coverage >= 0.8 - 1e-9
        assert json.loads((pipe.state.root / REPORT_FILE).read_text())["questions"] == n
        # the live pipeline now attaches sets
        r = pipe.answer("What does aspirin treat?", ["fever", "diabetes", "thirst"])
        assert r.answer_set is not None


def test_held_out_questions_are_never_learnt_by_the_router(tmp_path: Path) -> None:
    """Flipping every held-out question's outcomes changes nothing in the fitted router."""
    rows = dev_rows(4)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    path = write_questions(tmp_path / "a", rows)
    with make(tmp_path / "a", budget=100.0) as pipe:
        fit(pipe, path, max_spend=100.0, echo=lambda _: None)
        base = pipe.state.router.router
        assert pipe.state.calibration is not None
        base_scores = pipe.state.calibration.scores.copy()
    flipped = [dict(r, answer=r["choices"][(r["choices"].index(r["answer"]) + 1) % len(r["choices"])])
               if i % 2 else r for i, r in enumerate(rows)]
    path = write_questions(tmp_path / "b", flipped)
    with make(tmp_path / "b", budget=100.0) as pipe:
        fit(pipe, path, max_spend=100.0, echo=lambda _: None)
        other = pipe.state.router.router
        assert np.array_equal(other.linucb.theta, base.linucb.theta)
        assert np.array_equal(other.thompson.alpha, base.thompson.alpha)
        assert pipe.state.calibration is not None  # the held-out part (the truth moved) is what differs
        assert not np.array_equal(pipe.state.calibration.scores, base_scores)


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
        assert f"16 questions answered by every arm, fewer than the {MIN_CROSS_FIT}" in sel.reason
        assert (sel.context, sel.gamma, sel.decomposed_reward) == ("question", None, False)
        assert any("router settings" in n for n in report.not_fitted)


def test_a_large_log_chooses_gamma_reward_form_and_context_by_cross_fitting(tmp_path: Path) -> None:
    path = write_questions(tmp_path, dev_rows(26))  # 208 questions: 104 teach the router
    with make(tmp_path, budget=100.0) as pipe:
        report = fit(pipe, path, max_spend=100.0, echo=lambda _: None)
        sel = report.router_selection
        assert sel is not None and sel.method == "cross-fitting" and sel.cross_fit is not None
        grid = sel.cross_fit.grid
        assert len(grid) == 5 * 4 * 2 + 1  # contexts × γ × reward forms, and the cascade's one point
        assert {g.context for g in grid} == {"question", "question+free", "free", "predicted", "cascade",
                                             "predicted-free"}
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
        assert router.dim == {"question": 8, "question+free": 8 + 3 + 1, "free": 3 + 1,
                              "predicted": 1 + 3, "cascade": 1 + 3, "predicted-free": 1 + 3}[sel.context]
        saved = json.loads((pipe.state.root / REPORT_FILE).read_text())
        assert saved["router_selection"]["method"] == "cross-fitting"
        assert len(saved["router_selection"]["cross_fit"]["grid"]) == 41
        assert all({"accuracy", "cost_per_question", "accuracy_by_fold"} <= set(g)
                   for g in saved["router_selection"]["cross_fit"]["grid"])
        assert not any("router settings" in n for n in report.not_fitted)
        pipe.answer("What does aspirin treat?", ["fever", "diabetes", "thirst"])


def _skilled(root: Path, skills: dict[str, float], pin: bool = True) -> Pipeline:
    """The stub pipeline with these arm skills (budget 100: every arm is affordable)."""
    write_kg(root)
    body = STUB_CONFIG.format(cheap=0.1, dear=0.3, budget=100.0, seed=0)
    body = body.replace("[router]\n", f"[router]\npin_single_arm = {str(pin).lower()}\n")
    cfg = PipelineConfig.load(write_config(root, body))
    runners = {n: StubArm(cfg.arm(n), k, open_questions=n != "free") for n, k in skills.items()}
    return Pipeline(cfg, root / "state", runners, FakeEncoder())


def test_a_free_arm_that_routing_cannot_beat_is_pinned_and_answers(tmp_path: Path) -> None:
    path = write_questions(tmp_path, dev_rows(26))
    lines: list[str] = []
    with _skilled(tmp_path, {"cheap": 0.4, "dear": 0.5, "free": 0.95}) as pipe:
        report = fit(pipe, path, max_spend=100.0, echo=lines.append)
        sel = report.router_selection
        assert sel is not None and sel.cross_fit is not None and sel.cross_fit.gain is not None
        gain = sel.cross_fit.gain
        assert gain.single_arm_cost_per_question == 0.0 and not gain.pays(1.0)
        assert sel.pinned == "free" and pipe.status().pinned == "free"
        assert ServedPipeline(pipe).status().pinned == "free"  # what the server's /v1/status shows
        said = next(line for line in lines if "pinned" in line and "gain" in line)
        need = gain.questions_needed(1.0)  # how many questions would tell, where more could
        assert ("would be clear with about" in said) == (need is not None)
        assert need is None or f"about {need} questions" in said
        assert json.loads((pipe.state.root / REPORT_FILE).read_text())["router_selection"]["pinned"] == "free"
        # the held-out replay and the live pipeline answer with it, for free
        assert {a.name: a.share_routed for a in report.arms}["free"] == 1.0 and report.replay_spend == 0.0
        r = pipe.answer("What does aspirin treat?", ["fever", "diabetes", "thirst"])
        assert r.arm == "free" and r.cost == 0.0
        assert r.answer_set is not None  # calibrated on the held-out questions the pinned rule sends it
        assert r.answer_set.calibration_size == sum(held_out(read_questions(path), 0.5))
        routed = {a.name: a.routed for a in pipe.status().arms}  # what the next sets rest on, per arm
        assert routed == {"cheap": RoutedCalibration(0), "dear": RoutedCalibration(0),
                          "free": RoutedCalibration(r.answer_set.calibration_size)}
        served = {a.name: a for a in ServedPipeline(pipe).status().arms}  # the same on /v1/status
        assert (served["free"].calibration_questions, served["cheap"].calibration_questions) == (
            r.answer_set.calibration_size, 0) and served["free"].open_certified is None
        kept = pipe.state.coverage["free"]
        pipe.state.coverage["free"] = CoverageCount(n=30, covered=12)  # .4 against a target of .9
        free = next(a for a in ServedPipeline(pipe).status().arms if a.name == "free")
        assert free.drift and free.coverage_lower < 0.4 < free.coverage_upper < 0.9
        pipe.state.coverage["free"] = kept
        pipe.feedback(r.decision, correct=False)
        assert pipe.answer("What does aspirin treat??", ["fever", "diabetes", "thirst"]).arm == "free"
    with _skilled(tmp_path, {"cheap": 0.4, "dear": 0.5, "free": 0.95}) as reopened:
        assert reopened.status().pinned == "free"  # a restart keeps it
        assert reopened.answer("What does aspirin treat???", ["fever", "diabetes", "thirst"]).arm == "free"


def test_without_pinning_the_fit_only_reports_that_routing_does_not_pay(tmp_path: Path) -> None:
    path = write_questions(tmp_path, dev_rows(26))
    lines: list[str] = []
    with _skilled(tmp_path, {"cheap": 0.4, "dear": 0.5, "free": 0.95}, pin=False) as pipe:
        report = fit(pipe, path, max_spend=100.0, echo=lines.append)
        assert report.router_selection is not None and report.router_selection.pinned is None
        assert pipe.status().pinned is None
        assert any("routing does not beat answering with it alone" in line for line in lines)


def test_routing_that_clears_the_best_single_arm_is_not_pinned(tmp_path: Path) -> None:
    path = write_questions(tmp_path, dev_rows(26))
    with make(tmp_path, budget=100.0) as pipe:  # the dear arm (0.9) beats the free one (0.6); all affordable
        report = fit(pipe, path, max_spend=100.0, echo=lambda _: None)
        sel = report.router_selection
        assert sel is not None and sel.cross_fit is not None and sel.cross_fit.gain is not None
        gain = sel.cross_fit.gain
        assert (sel.pinned is None) == gain.pays(1.0)


def test_a_log_of_open_questions_holds_nothing_out_and_says_so(tmp_path: Path) -> None:
    rows = [{"id": f"o{i}", "text": f"Which drug treats {d}{'?' * (1 + i // 8)}", "gold": ["aspirin"]}
            for i, d in enumerate(["fever", "headache", "pain", "gout"] * 4)]
    path = write_questions(tmp_path, rows)
    with make(tmp_path, budget=100.0) as pipe:
        report = fit(pipe, path, max_spend=100.0, echo=lambda _: None)
        assert report.settings["held_out"] == 0 and report.settings["replay_on"] == "in-sample"
        assert pipe.state.calibration is not None and len(pipe.state.calibration) == 0
        r = pipe.answer("What does aspirin treat?", ["fever", "diabetes", "thirst"])
        assert r.answer_set is None and "has no calibration" in r.notes[0]



def _with_combos(root: Path) -> Pipeline:
    """A pipeline whose inject arm ``dear`` learns its prompt over two combinations (test doubles)."""
    from kgwise.app.config import PipelineConfig

    from .conftest import STUB_CONFIG, FakeEncoder, StubPromptArm, write_config, write_kg

    write_kg(root)
    body = STUB_CONFIG.format(cheap=0.1, dear=0.3, budget=100.0, seed=0).replace(
        'kind = "inject"\n', 'kind = "inject"\ncombos = ["P_sub+F_t", "P_sub+F_s"]\n')
    cfg = PipelineConfig.load(write_config(root, body))
    runners = {"cheap": StubArm(cfg.arm("cheap"), 0.5), "dear": StubPromptArm(cfg.arm("dear")),
               "free": StubArm(cfg.arm("free"), 0.6, open_questions=False)}
    return Pipeline(cfg, root / "state", runners, FakeEncoder())


def test_an_inject_arm_with_combos_answers_with_each_and_learns_its_prompt_bandit(tmp_path: Path) -> None:
    from kgwise.app.calibration import nonconformity
    from kgwise.app.prompt_fit import MIN_PROMPT_FIT
    from kgwise.inject.bandit import PromptBandit

    from .conftest import StubPromptArm

    path = write_questions(tmp_path, dev_rows(6))
    questions = read_questions(path)
    said: list[str] = []
    with _with_combos(tmp_path) as pipe:
        report = fit(pipe, path, max_spend=100.0, echo=said.append)
        assert "192 calls to make" in said[0]  # 48 questions × (cheap + free + dear × 2 combinations)
        (p,) = report.prompts
        assert p.arm == "dear" and p.reason == "" and p.questions == 24 >= MIN_PROMPT_FIT
        assert p.accuracy["P_sub+F_t"] > p.accuracy["P_sub+F_s"]
        assert p.held_out_share["P_sub+F_t"] > 0.5 and not any("prompt" in x for x in report.not_fitted)
        arm = pipe.runners["dear"]
        assert isinstance(arm, StubPromptArm) and isinstance(arm.bandit, PromptBandit)
        saved = PromptBandit.load(pipe.state.prompt_bandit_file("dear"))
        np.testing.assert_array_equal(saved.policy.theta, arm.bandit.policy.theta)
        # the calibration holds, per held-out question, the score of what the arm now answers there
        cal = pipe.state.calibration
        assert cal is not None
        held = [q for q, h in zip(questions, held_out(questions, 0.5), strict=True) if h]
        d = list(pipe.config.names).index("dear")
        expected = [nonconformity("lac", arm.answer(q).probabilities,
                                  [c.label for c in q.choices])[q.gold_index] for q in held]
        np.testing.assert_allclose(cal.scores[:, d], expected)
        # the small-data fallback calibrates on every dev question, except where the fit tuned the answer:
        # the learning questions' scores are kept for the other arms, not for the prompt-fitted one
        c = list(pipe.config.names).index("cheap")
        assert cal.tune_scores is not None and np.isnan(cal.tune_scores[:, d]).all()
        assert np.isfinite(cal.tune_scores[:, c]).all() and cal.dev_scores("cheap").size == len(questions)
        np.testing.assert_array_equal(cal.dev_scores("dear"), cal.arm_scores("dear"))
    with _with_combos(tmp_path) as again:  # reopened: the arm answers with the saved bandit
        assert again.state.calibration is not None and again.state.calibration.tune_scores is not None
        np.testing.assert_array_equal(again.state.calibration.dev_scores("cheap"), cal.dev_scores("cheap"))
        arm = again.runners["dear"]
        assert isinstance(arm, StubPromptArm) and isinstance(arm.bandit, PromptBandit)
        np.testing.assert_array_equal(arm.bandit.policy.theta, saved.policy.theta)
        second = fit(again, path, max_spend=0.0, echo=lambda _: None)
        assert second.calls_made == 0 and second.prompts == report.prompts


def test_a_log_too_small_for_a_prompt_bandit_keeps_the_first_combination_and_says_so(tmp_path: Path) -> None:
    from .conftest import StubPromptArm

    with _with_combos(tmp_path) as pipe:
        arm = pipe.runners["dear"]
        assert isinstance(arm, StubPromptArm)
        arm.bandit = "an old fit's bandit, in memory"
        (tmp_path / "state" / "prompt-bandits").mkdir(exist_ok=True)
        stale = pipe.state.prompt_bandit_file("dear")
        stale.write_bytes(b"an old fit's bandit")
        report = fit(pipe, write_questions(tmp_path, dev_rows(3)), max_spend=100.0, echo=lambda _: None)
        assert ("fewer than the 20 a prompt bandit needs: the arm answers with P_sub+F_t"
                in report.not_fitted[-1])
        assert not stale.exists() and arm.bandit is None


@pytest.mark.slow
def test_a_real_inject_arm_learns_its_prompt_bandit_and_answers_with_it(tmp_path: Path) -> None:
    """Real parts: smollm2 with KnowGPT's injection over the drug KG, two combinations on 40 questions."""
    from kgwise.app.arms import InjectArm
    from kgwise.types import make_question

    from .conftest import write_config, write_kg

    write_kg(tmp_path)
    config = write_config(tmp_path, '[kg]\ngraph = "kg.tsv"\n\n[[arms]]\nname = "plain"\nkind = "llm"\n'
                          'spec = "smollm2-135m"\n\n[[arms]]\nname = "kg"\nkind = "inject"\n'
                          'spec = "smollm2-135m"\ncombos = ["P_sub+F_t", "P_sub+F_s"]\n\n'
                          '[router]\nbudget_calls = 100\n')
    path = write_questions(tmp_path, dev_rows(5))
    with Pipeline.from_config(config) as pipe:
        report = fit(pipe, path, max_spend=300.0, echo=lambda _: None)
        assert report.calls_made == 40 * 3  # answers; each is scored by PMI (smollm2's rule), 2 LLM calls
        (p,) = report.prompts
        assert p.reason == "" and p.questions == 20 and sum(p.held_out_share.values()) == pytest.approx(1.0)
        arm = pipe.runners["kg"]
        assert isinstance(arm, InjectArm) and arm.injector.bandit is not None
        text, choices = "What does metformin treat?", ["fever", "diabetes", "swelling"]
        r = pipe.answer(text, choices, arm="kg")
        assert r.knowledge.combo == str(arm.injector.choose(make_question(text, choices)))
    with Pipeline.from_config(config) as again:
        arm = again.runners["kg"]
        assert isinstance(arm, InjectArm) and arm.injector.bandit is not None


def test_a_watched_inject_arm_still_learns_its_prompt(tmp_path: Path) -> None:
    """:class:`ObservedArm` (progress bars, benchmarks) passes the prompt methods through."""
    from kgwise.app.arms import ObservedArm

    from .conftest import StubPromptArm

    seen: list[float] = []
    with _with_combos(tmp_path) as pipe:
        inner = pipe.runners["dear"]
        pipe.runners = {n: ObservedArm(r, seen.append) for n, r in pipe.runners.items()}
        report = fit(pipe, write_questions(tmp_path, dev_rows(6)), max_spend=100.0, echo=lambda _: None)
        assert report.prompts[0].reason == "" and len(seen) == 192
        assert isinstance(inner, StubPromptArm) and inner.bandit is not None


def test_a_saved_bandit_for_other_combinations_is_named_and_does_not_block_a_fit(tmp_path: Path) -> None:
    from kgwise.inject.bandit import PromptBandit

    from .conftest import StubPromptArm

    with _with_combos(tmp_path) as pipe:
        PromptBandit(8, ["P_sub+F_t", "P_sub+F_g"]).save(pipe.state.prompt_bandit_file("dear"))
    with _with_combos(tmp_path) as pipe:
        assert "the prompt bandit chooses among P_sub+F_t, P_sub+F_g" in pipe.prompt_problems["dear"]
        assert "dear" in pipe.status().prompt_problems
        r = pipe.answer("What does aspirin treat?", ["fever", "diabetes", "thirst"], arm="dear")
        assert any("first combination until a fit" in n for n in r.notes)
        fit(pipe, write_questions(tmp_path, dev_rows(6)), max_spend=100.0, echo=lambda _: None, force=True)
        arm = pipe.runners["dear"]
        assert isinstance(arm, StubPromptArm) and isinstance(arm.bandit, PromptBandit)
        assert sorted(arm.bandit.arms) == ["P_sub+F_s", "P_sub+F_t"]
