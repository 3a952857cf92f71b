"""``[answer_sets] calibrate_on = "arm"``: every set of an arm calibrated on all graded dev questions it
answered, ties split by a seeded coin (:func:`kgwise.app.calibration.arm_set`) — its coins, its sets for
an arm that gives only an answer, its PAC promise on fresh exchangeable draws, and the pipeline's sets
and ``fit``'s messages under it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from kgwise.app.calibration import (
    TIE_EPSILON,
    HeldOutCalibration,
    arm_rule_scores,
    arm_set,
    calibrated_threshold,
    tie_coin,
)
from kgwise.app.config import AnswerSetConfig, PipelineConfig
from kgwise.app.fit import fit

from .conftest import dev_rows, write_config, write_kg, write_questions
from .test_config import GOOD, _fault
from .test_pipeline import make, question

LABELS = ["A", "B", "C", "D"]
ONE_HOT = {"A": 1.0, "B": 0.0, "C": 0.0, "D": 0.0}  # an answer-only arm's letter reply: "A"


def _answer_only(wrong: int, n: int, fit_id: str, tune: int = 0) -> HeldOutCalibration:
    """One arm that gave only an answer on ``n`` held-out (and ``tune`` learning) dev questions, the first
    ``wrong`` of the held-out ones wrong (LAC score 1), the rest right (0)."""
    held = np.zeros((n, 1))
    held[:wrong, 0] = 1.0
    return HeldOutCalibration(("a",), "lac", np.zeros((n, 1)), np.zeros((n, 1)), held, {"fit": fit_id},
                              tune_scores=np.zeros((tune, 1)) if tune else None)


def test_the_coins_are_uniform_fixed_by_their_parts_and_move_scores_below_any_real_difference() -> None:
    coins = np.asarray([tie_coin("fit", "a", "question", str(i)) for i in range(4000)])
    assert coins.min() >= 0.0 and coins.max() < 1.0
    assert abs(coins.mean() - 0.5) < 0.02 and abs(np.mean(coins < 0.25) - 0.25) < 0.03
    assert tie_coin("x", "y") == tie_coin("x", "y") != tie_coin("x", "z")
    cal = _answer_only(3, 10, "f1", tune=5)
    moved = arm_rule_scores(cal, "a")
    assert moved.size == 15  # held out and learning questions
    assert np.all(moved - np.r_[cal.scores[:, 0], np.zeros(5)] < TIE_EPSILON)
    assert np.all(moved >= np.r_[cal.scores[:, 0], np.zeros(5)]) and len(set(moved.tolist())) == 15
    assert not np.array_equal(moved, arm_rule_scores(replace(cal, meta={"fit": "f2"}), "a"))  # another fit


def test_an_answer_only_arms_set_is_its_answer_or_every_choice_in_the_share_the_rank_leaves() -> None:
    sets = AnswerSetConfig(alpha=0.2, delta=0.05)  # pac rank 45 of 50: up to 5 wrong answers allowed
    few = _answer_only(5, 50, "f")
    assert {arm_set(few, "a", ONE_HOT, LABELS, f"q{i}", sets, 1).labels for i in range(200)} == {("A",)}
    many = _answer_only(8, 50, "f")  # 3 wrong ones beyond the rank's 5: about 3 of 9 coins reach it
    got = [arm_set(many, "a", ONE_HOT, LABELS, f"q{i}", sets, 1) for i in range(2000)]
    assert {s.labels for s in got} == {("A",), tuple(LABELS)}
    share = np.mean([len(s.labels) == 4 for s in got])
    moved = np.sort(arm_rule_scores(many, "a"))
    assert share == pytest.approx((moved[44] - 1.0) / TIE_EPSILON, abs=0.04)  # the 45th score's coin
    assert all(s.finite and "ties split by a seeded coin" in s.statement and "per arm, not conditional"
               in s.statement for s in got)
    thin = arm_set(_answer_only(0, 10, "f"), "a", ONE_HOT, LABELS, "q", sets, 1)
    assert thin.labels == tuple(LABELS) and not thin.finite
    assert "it needs 14 (4 more)" in thin.statement


def test_the_top_choice_is_always_in_the_set() -> None:
    cal = HeldOutCalibration(("a",), "lac", np.zeros((30, 1)), np.zeros((30, 1)),
                             np.linspace(0.0, 0.2, 30)[:, None], {"fit": "f"})
    unsure = {"A": 0.3, "B": 0.25, "C": 0.25, "D": 0.2}  # LAC 0.7 for its best: above every threshold
    got = arm_set(cal, "a", unsure, LABELS, "q", AnswerSetConfig(alpha=0.2), 1)
    assert got.labels == ("A",)


def test_pac_over_fresh_draws_of_an_answer_only_arm() -> None:
    """An arm right on 0.7 of the questions: its answer alone covers too rarely, so a calibration covers
    ≥ 0.8 only when enough of its sets are every choice. Over 1,000 fresh dev logs of 50 questions the
    coverage — ``acc + (1 − acc) × P(every choice)``, exact given the calibration, ``P`` the share of coins
    at or below the threshold's — is below 0.8 in at most δ = 0.05 of them plus three binomial standard
    errors (measured: 0.042; the marginal rank, 41st of 50, instead of PAC's 45th: 0.45)."""
    sets = AnswerSetConfig(alpha=0.2, delta=0.05)
    rng = np.random.default_rng(7)
    low, draws, accuracy = 0, 1000, 0.7
    for d in range(draws):
        cal = _answer_only(int(rng.binomial(50, 1 - accuracy)), 50, f"fit{d}")
        threshold = calibrated_threshold(arm_rule_scores(cal, "a").tolist(), sets, 1)
        every = min(max((threshold - 1.0) / TIE_EPSILON, 0.0), 1.0)
        low += accuracy + (1 - accuracy) * every < 0.8
    assert low / draws <= 0.05 + 3 * np.sqrt(0.05 * 0.95 / draws), low


def test_the_pipeline_calibrates_on_every_dev_question_an_arm_answered_and_fit_says_so(tmp_path: Path
                                                                                        ) -> None:
    path = write_questions(tmp_path, dev_rows(4))  # 32 questions, 16 held out, 3 arms
    lines: list[str] = []
    with make(tmp_path, cheap=0.1, dear=0.3, budget=100.0, guarantee="pac") as pipe:
        sets = AnswerSetConfig(alpha=0.2, calibrate_on="arm")
        pipe.config = replace(pipe.config, answer_sets=sets)
        report = fit(pipe, path, max_spend=100.0, echo=lines.append)
        assert "for a question like the dev log answered by that arm" in report.guarantee
        assert report.settings["calibrate_on"] == "arm"
        needs = [line for line in lines if "held-out questions routed here" in line]
        assert len(needs) == 3 and all("32 graded dev questions answered in all" in x
                                       and "(calibrate_on = arm: every set from all it answered)" in x
                                       for x in needs)
        cal = pipe.state.calibration
        assert cal is not None
        for i in range(6):
            text, choices = question(i)
            r = pipe.answer(text, choices)
            s = r.answer_set
            assert s is not None and s.calibration_size == 32 and s.guarantee
            assert "ties split by a seeded coin" in s.statement
            again = arm_set(cal, r.arm, r.probabilities, list(r.probabilities), text, sets, 3)
            assert s.labels == again.labels
            pipe.feedback(r.decision, correct=True)


def test_fit_under_the_default_rule_names_the_arm_rule_where_routed_questions_are_too_few(tmp_path: Path
                                                                                           ) -> None:
    path = write_questions(tmp_path, dev_rows(4))  # 16 held out over 3 arms: some arm gets < 14 of them
    lines: list[str] = []
    with make(tmp_path, cheap=0.1, dear=0.3, budget=100.0, guarantee="pac") as pipe:
        pipe.config = replace(pipe.config, answer_sets=AnswerSetConfig(alpha=0.2))
        fit(pipe, path, max_spend=100.0, echo=lines.append)
    needs = [line for line in lines if "held-out questions routed here" in line]
    hinted = [x for x in needs if 'too few routed: calibrate_on = "arm" would calibrate every set on the 32 '
              "graded dev questions it answered" in x]
    routed = [int(x.split(" held-out questions routed here")[0].rsplit(" ", 1)[1]) for x in needs]
    assert len(hinted) == sum(n < 14 for n in routed) > 0


def test_the_key_reads_from_the_config_file_and_a_bad_value_is_named(tmp_path: Path) -> None:
    write_kg(tmp_path)
    cfg = PipelineConfig.load(write_config(tmp_path, GOOD.replace('kind = "aps"',
                                                                  'kind = "aps"\ncalibrate_on = "arm"')))
    assert cfg.answer_sets.calibrate_on == "arm"
    assert PipelineConfig.load(write_config(tmp_path, GOOD)).answer_sets.calibrate_on == "routed"
    message = _fault(tmp_path, 'kind = "aps"', 'kind = "aps"\ncalibrate_on = "pooled"')
    assert ":31: answer_sets.calibrate_on: must be routed or arm, got 'pooled'" in message
