"""``kgwise.eval.pipeline_live``: the live pipeline evaluation (fit, single arms, answer + feedback, sets)
on test-double arms; the real local models run in ``tests/cli/test_eval_pipeline_cli.py``."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from kgwise.app.arms import ArmOutput
from kgwise.app.config import AnswerSetConfig, ArmConfig
from kgwise.conformal.split import SplitConformal, SplitConformalConfig
from kgwise.datasets.user import read_graded_log, write_graded_log
from kgwise.errors import ConfigError
from kgwise.eval.pipeline_live import (
    LiveMCConfig,
    coverage_splits,
    evaluate_live_mcq,
    grade,
    live_graded_log,
    live_mcq_arms,
    logged_answers,
    question_key,
    set_at,
)
from kgwise.types import Choice, Question, Usage, make_question


class FakeEncoder:
    """Test double of :class:`kgwise.embed.Encoder`: a unit vector from the text's hash (8-d)."""

    dim = 8

    def encode(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        out = []
        for t in texts:
            v = np.random.default_rng(int(hashlib.sha1(t.encode()).hexdigest()[:8], 16)).normal(size=8)
            out.append(v / np.linalg.norm(v))
        return np.asarray(out, dtype=np.float32)


@dataclass
class FakeArm:
    """Test double of an arm runner: right with probability ``skill`` (seeded per arm and question;
    the gold label read from the text's last word), ``calls`` calls per answer, and a record of the
    questions it answered."""

    config: ArmConfig
    skill: float
    calls: int
    answered: list[str] = field(default_factory=list)

    def can_answer(self, question: Question) -> bool:
        return bool(question.choices)

    def usage_bound(self, question: Question) -> Usage:
        return Usage(calls=self.calls)

    def right(self, question: Question) -> bool:
        seed = int(hashlib.sha1((self.config.name + question.text).encode()).hexdigest()[:8], 16)
        return bool(np.random.default_rng(seed).random() < self.skill)

    def answer(self, question: Question) -> ArmOutput:
        self.answered.append(question.text)
        labels = [c.label for c in question.choices]
        gold = question.text.rstrip("?").split()[-1]
        pick = gold if self.right(question) else next(x for x in labels if x != gold)
        p = {x: 0.1 / (len(labels) - 1) for x in labels}
        p[pick] = 0.9
        return ArmOutput(pick, p, usage=Usage(calls=self.calls, input_tokens=10 * self.calls))


def _questions(prefix: str, n: int) -> list[Question]:
    return [make_question(f"{prefix} question number {i}, gold {'ABCD'[i % 4]}?",
                          ["red", "green", "blue", "black"], f"{prefix}{i}", "ABCD"[i % 4]) for i in range(n)]


def _arms() -> dict[str, FakeArm]:
    return {"kgm": FakeArm(ArmConfig("kgm", "kgm", "KGM", observe=True), 0.5, 0),
            "small": FakeArm(ArmConfig("small", "llm", "LLM", spec="x", per_call=1.0), 0.6, 2),
            "big": FakeArm(ArmConfig("big", "llm", "LLM", spec="y", per_call=1.0), 0.9, 3)}


def test_set_at_is_the_pipelines_split_conformal_rule() -> None:
    labels = ["A", "B", "C"]
    probs = {"A": 0.7, "B": 0.2, "C": 0.1}
    assert set_at([0.1] * 3, "lac", AnswerSetConfig(0.1), probs, labels) == ("A", "B", "C")  # too few
    scores = list(np.linspace(0.0, 0.9, 40))
    cp = SplitConformal(SplitConformalConfig(alpha=0.2, score="lac"))
    cp.calibration_scores_ = np.asarray(scores)
    mask = cp.predict_set(np.asarray([[0.7, 0.2, 0.1]]))[0]
    want = tuple(x for x, keep in zip(labels, mask, strict=True) if keep)
    assert set_at(scores, "lac", AnswerSetConfig(0.2, guarantee="marginal"), probs, labels) == want
    pac = AnswerSetConfig(0.2)  # training-conditional (the default): a higher rank, a larger set
    assert set(set_at(scores, "lac", pac, probs, labels)) >= set(want)


def test_grade_takes_labels_for_choices_and_names_for_open_questions() -> None:
    q = make_question("which?", ["a", "b"], "q", "B")
    assert grade(q, "B") and not grade(q, "A") and not grade(q, None)
    assert grade(Question("o", "who?", gold=("Barack Obama",)), "barack obama")


def test_the_issue_arms_are_costed_in_calls() -> None:
    arms = live_mcq_arms(Path("m.pt"), ("smollm2-135m",), "pmi", "P_sub+F_t")
    assert [a.name for a in arms] == ["kgm", "smollm2-135m", "smollm2-135m+kg"]
    assert [a.kind for a in arms] == ["kgm", "llm", "inject"]
    assert arms[0].per_call == 0.0 and arms[0].observe and all(a.per_call == 1.0 for a in arms[1:])
    assert arms[2].combo == "P_sub+F_t" and arms[1].scoring == "pmi"


def test_a_live_run_reports_arms_pipeline_and_sets_and_resumes_without_calls(tmp_path: Path) -> None:
    arms = _arms()
    fit, test = _questions("fit", 40), _questions("test", 30)
    cfg = LiveMCConfig(fit_n=40, test_n=30, alphas=(0.2, 0.3), budget=0.5)
    report = evaluate_live_mcq(fit, test, arms, FakeEncoder(), None, cfg, tmp_path, {"data": "fake"})
    for name, arm in arms.items():  # every arm on every fit and test question, once; kgm also observed
        assert arm.answered[:70].count(fit[0].text) == 1
        right = np.mean([arm.right(q) for q in test])
        assert report["arms"][name]["accuracy"] == pytest.approx(right)
        assert report["arms"][name]["cost_calls"] == pytest.approx(30 * arm.calls)
    p = report["pipeline"]
    assert p["budget_from"] == "big" and p["budget"] == pytest.approx(0.5 * 3 * 30)
    assert p["spent"] <= p["budget"] + 1e-9 and p["cost_calls"] == pytest.approx(p["spent"])
    assert sum(p["share"].values()) == pytest.approx(p["answered"] / 30)
    assert set(report["sets"]) == {"0.2", "0.3"} and report["sets_check"] == {
        "pipeline_set_differs_from_recomputed": 0}
    for s in report["sets"].values():
        per_arm = s["per_arm"]
        assert sum(v["n"] for v in per_arm.values()) == s["overall"]["n"]
    t = report["targets"]
    assert t["best_arm"] == max(report["arms"], key=lambda a: report["arms"][a]["accuracy"])
    assert t["accuracy >= best arm's"] == (p["accuracy"] >= t["best_arm_accuracy"])
    assert t["best_paid_arm"] in ("small", "big") and t["cost < best paid arm's"] == (
        p["cost_calls"] < report["arms"][t["best_paid_arm"]]["cost_calls"])
    before = {n: len(a.answered) for n, a in arms.items()}
    again = evaluate_live_mcq(fit, test, arms, FakeEncoder(), None, cfg, tmp_path, {"data": "fake"})
    assert {n: len(a.answered) for n, a in arms.items()} == before  # resumed: no arm called again
    assert again["pipeline"] == report["pipeline"] and again["sets"] == report["sets"]


def test_a_larger_run_reuses_the_fit_calls_and_test_answers(tmp_path: Path) -> None:
    arms = _arms()
    fit, test = _questions("fit", 30), _questions("test", 20)
    evaluate_live_mcq(fit[:20], test[:10], arms, FakeEncoder(), None,
                      LiveMCConfig(fit_n=20, test_n=10, alphas=(0.3,)), tmp_path, {})
    counts = {n: len(a.answered) for n, a in arms.items()}
    evaluate_live_mcq(fit, test, arms, FakeEncoder(), None, LiveMCConfig(fit_n=30, test_n=20, alphas=(0.3,)),
                      tmp_path, {})
    for n, a in arms.items():
        new = a.answered[counts[n]:]
        assert fit[0].text not in new and test[0].text not in new[:10]  # reused, not asked again
        assert fit[25].text in new and test[15].text in new


def test_a_run_with_one_arm_changed_asks_only_that_arm(tmp_path: Path) -> None:
    """A retrained KG model (another model file) answers every fit and test question anew; the other arms'
    logged answers are reused, and the coverage replay takes each arm's answers with its own settings."""
    from dataclasses import replace

    arms = _arms()
    fit, test = _questions("fit", 20), _questions("test", 10)
    cfg = LiveMCConfig(fit_n=20, test_n=10, alphas=(0.3,))
    evaluate_live_mcq(fit, test, arms, FakeEncoder(), None, cfg, tmp_path, {})
    counts = {n: len(a.answered) for n, a in arms.items()}
    new_kgm = FakeArm(replace(arms["kgm"].config, model=tmp_path / "retrained.pt"), 0.8, 0)
    arms2 = {**arms, "kgm": new_kgm}
    report = evaluate_live_mcq(fit, test, arms2, FakeEncoder(), None, cfg, tmp_path, {})
    for n in ("small", "big"):  # asked again only where the (new) pipeline run routes to them
        new = arms[n].answered[counts[n]:]
        assert not set(new) & {q.text for q in fit} and len(new) == len(set(new))
        assert len(new) == round(report["pipeline"]["share"][n] * len(test))
    assert set(new_kgm.answered) == {q.text for q in [*fit, *test]}  # the test ones in the pipeline too
    right = np.mean([new_kgm.right(q) for q in test])
    assert report["arms"]["kgm"]["accuracy"] == pytest.approx(right)
    configs = [a.config for a in arms2.values()]
    answers = logged_answers(tmp_path, [*fit, *test], configs, cfg.price_model)
    assert np.mean([answers["kgm"][question_key(q)]["correct"] for q in test]) == pytest.approx(right)
    with pytest.raises(ConfigError, match="no logged answer"):  # a third model file: nothing logged
        logged_answers(tmp_path, fit, [replace(new_kgm.config, model=tmp_path / "third.pt")], cfg.price_model)


def test_questions_without_choices_or_gold_are_refused(tmp_path: Path) -> None:
    arms = _arms()
    cfg = LiveMCConfig(fit_n=2, test_n=1)
    with pytest.raises(ConfigError, match="choices"):
        evaluate_live_mcq([Question("a", "x?", gold=("y",))] * 2, [Question("b", "z?", gold=("y",))], arms,
                          FakeEncoder(), None, cfg, tmp_path, {})
    with pytest.raises(ConfigError, match="gold"):
        evaluate_live_mcq(_questions("f", 2), [make_question("q?", ["a", "b"], "t")], arms, FakeEncoder(),
                          None, cfg, tmp_path, {})


@pytest.mark.parametrize("kwargs, match", [({"alphas": (0.0,)}, "α"), ({"budget": 0.0}, "budget"),
                                           ({"budget_of": "cheapest"}, "budget_of"),
                                           ({"price_model": "no-such-model"}, "price table"),
                                           ({"fit_n": 1}, "fit")])
def test_bad_settings_are_named(kwargs: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        LiveMCConfig(**kwargs)  # type: ignore[arg-type]


def test_coverage_over_random_splits_replays_the_logged_answers(tmp_path: Path) -> None:
    arms = _arms()
    fit, test = _questions("fit", 30), _questions("test", 30)
    cfg = LiveMCConfig(fit_n=30, test_n=30, alphas=(0.2,), budget=0.5)
    evaluate_live_mcq(fit, test, arms, FakeEncoder(), None, cfg, tmp_path, {})
    both = [*fit, *test]
    configs = [a.config for a in arms.values()]
    answers = logged_answers(tmp_path, both, configs, cfg.price_model)
    assert all(len(answers[n]) == 60 for n in arms)
    calls = {n: len(a.answered) for n, a in arms.items()}
    out = coverage_splits(both, configs, answers, FakeEncoder(), cfg, 3,
                          tmp_path / "splits")
    assert {n: len(a.answered) for n, a in arms.items()} == calls  # replayed, not asked
    assert out["splits"] == 3 and out["fit"] == out["test"] == 30
    assert set(out["arm_accuracy"]) == set(arms)
    assert all(0 <= v["mean"] <= 1 for v in out["arm_accuracy"].values())
    assert set(out["splits_pinned"]) == set(arms) and sum(out["splits_pinned"].values()) <= 3
    assert 0.0 <= out["every_arm_covered_share"]["0.2"] <= 1.0
    assert out["target (≥ 95 % of splits)"]["0.2"] == (out["every_arm_covered_share"]["0.2"] >= 0.95)
    for v in out["per_arm"]["0.2"].values():
        assert v["splits_with_questions"] <= 3
    pac, joint = out["pac"], out["pac_all_arms"]  # PAC sets contain the marginal ones, joint PAC the PAC
    assert pac["delta"] == cfg.delta and set(pac["per_arm"]["0.2"]) == set(out["per_arm"]["0.2"])
    assert joint["delta_per_arm"] == pytest.approx(cfg.delta / 3)
    for a, v in pac["per_arm"]["0.2"].items():
        if v["coverage_mean"] is not None:
            assert v["coverage_mean"] >= out["per_arm"]["0.2"][a]["coverage_mean"] - 1e-12
            assert joint["per_arm"]["0.2"][a]["coverage_mean"] >= v["coverage_mean"] - 1e-12
    # a set holds at most every choice; the larger guarantee's sets are no smaller
    choices = len(both[0].choices)
    assert 0.0 <= out["mean_set_size"]["0.2"] <= pac["mean_set_size"]["0.2"] + 1e-12
    assert pac["mean_set_size"]["0.2"] <= joint["mean_set_size"]["0.2"] + 1e-12 <= choices + 1e-12
    with pytest.raises(ConfigError, match="no logged answer"):
        logged_answers(tmp_path, [*both, *_questions("new", 1)], configs, cfg.price_model)
    # the run's graded log keeps each arm's choice probabilities and the gold choice, and reads back
    write_graded_log(tmp_path / "graded.jsonl", live_graded_log(tmp_path, both, configs, cfg.price_model))
    log = read_graded_log(tmp_path / "graded.jsonl")
    for q, g in zip(both, log.questions, strict=True):
        assert g.gold == q.gold[0]
        for name, o in g.arms.items():
            assert o.probabilities == pytest.approx(answers[name][question_key(q)]["probabilities"])


def test_a_question_the_pipeline_refuses_is_counted_not_fatal(tmp_path: Path) -> None:
    arms = _arms()
    test = _questions("test", 4)
    choices = (Choice("A", "red"), Choice("B", "Red"), Choice("C", "blue"))
    dup = Question("dup", "dup question, gold A?", choices, gold=("A",))
    report = evaluate_live_mcq(_questions("fit", 20), [*test, dup], arms, FakeEncoder(), None,
                               LiveMCConfig(fit_n=20, test_n=5, alphas=(0.3,)), tmp_path, {})
    p = report["pipeline"]
    assert p["refused_by_the_pipeline"] == 1 and p["unanswered"] >= 1
    assert all(report["arms"][n]["answered"] == 5 for n in arms)  # the arms themselves answer it
    same = report["targets"]["on_the_questions_the_pipeline_accepts"]  # and the comparison on the other 4
    logged = logged_answers(tmp_path, test, [a.config for a in arms.values()], LiveMCConfig().price_model)
    assert same["questions"] == 4 and same["best_arm_accuracy"] == pytest.approx(
        max(np.mean([r["correct"] for r in logged[a].values()]) for a in arms))
    assert same["accuracy >= best arm's"] == (same["pipeline_accuracy"] >= same["best_arm_accuracy"])


def test_a_text_repeated_with_other_choices_is_another_question(tmp_path: Path) -> None:
    arms = _arms()
    fit = _questions("fit", 20)
    twins = [make_question("which colour, gold A?", choices, f"twin{i}", "A")
             for i, choices in enumerate((["red", "green"], ["blue", "black"]))]
    cfg = LiveMCConfig(fit_n=20, test_n=3, alphas=(0.3,), budget=1.0)
    report = evaluate_live_mcq(fit, [*twins, *_questions("test", 1)], arms, FakeEncoder(), None, cfg,
                               tmp_path, {})
    assert report["pipeline"]["answered"] + report["pipeline"]["unanswered"] == 3
    answers = logged_answers(tmp_path, [*fit, *twins], [a.config for a in arms.values()], cfg.price_model)
    assert all(len(answers[n]) == 22 for n in arms)  # the twins are told apart
    with pytest.raises(ConfigError, match="repeat a question"):
        evaluate_live_mcq(fit, [twins[0], twins[0]], arms, FakeEncoder(), None, cfg, tmp_path / "b", {})
