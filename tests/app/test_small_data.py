"""Small dev logs: an arm whose routed held-out questions are too few borrows every held-out question it
answered — or, with ``fallback = "all_dev"``, every graded dev question it answered — (its set then says
what it is guaranteed over), the messages give how many questions are needed, and ``fit`` reports per
arm what each kind of set needs and the smallest α it certifies now."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from kgwise.app.calibration import (
    HeldOutCalibration,
    fallback_scores,
    questions_needed,
    smallest_alpha,
    too_few,
)
from kgwise.app.config import AnswerSetConfig, SmallDataFallback
from kgwise.app.fit import fit
from kgwise.conformal.split import pac_rank
from kgwise.errors import DataError

from .conftest import dev_rows, write_questions
from .test_pipeline import make, question


def test_questions_needed_is_the_first_size_with_a_finite_threshold() -> None:
    for guarantee in ("pac", "pac_all_arms"):
        for alpha in (0.1, 0.2, 0.3):
            sets = AnswerSetConfig(alpha=alpha, guarantee=guarantee)
            n = questions_needed(sets, 4)
            d = 0.05 / 4 if guarantee == "pac_all_arms" else 0.05
            assert pac_rank(n, alpha, d) <= n and pac_rank(n - 1, alpha, d) > n - 1
    assert questions_needed(AnswerSetConfig(alpha=0.2, guarantee="marginal"), 4) == 4
    assert questions_needed(AnswerSetConfig(alpha=0.2), 4) == 14
    assert smallest_alpha(14, AnswerSetConfig(alpha=0.05), 4) == 0.2
    assert smallest_alpha(1, AnswerSetConfig(), 4) is None
    msg = too_few(6, AnswerSetConfig(alpha=0.2), 4, "questions")
    assert "it needs 14 (8 more)" in msg and "α = 0.4 is the smallest" in msg


@pytest.mark.parametrize("fallback, n, which, words", [
    ("held_out", 16, "held-out dev",
     "held-out dev questions it answered, which the router never learnt from"),
    ("all_dev", 32, "graded dev", "graded dev questions it answered, held out or not")])
def test_an_arm_with_too_few_routed_questions_borrows_all_it_answered_and_says_so(
        tmp_path: Path, fallback: SmallDataFallback, n: int, which: str, words: str) -> None:
    path = write_questions(tmp_path, dev_rows(4))  # 32 questions, 16 held out, 3 arms
    lines: list[str] = []
    with make(tmp_path, cheap=0.1, dear=0.3, budget=100.0, guarantee="pac") as pipe:
        pipe.config = replace(pipe.config, answer_sets=AnswerSetConfig(alpha=0.2, abstain=True,
                                                                       fallback=fallback))
        fit(pipe, path, max_spend=100.0, echo=lines.append)
        needs = [line for line in lines if "held-out questions routed here" in line]
        assert len(needs) == 3 and all("a set needs marginal 4, pac 14, pac_all_arms" in x for x in needs)
        assert all(f"{n} {which} questions answered in all" in x
                   and "smallest α for the pac set now" in x for x in needs)
        assert all("; abstention: " in x for x in needs)
        pooled = every = 0
        for i in range(10):
            r = pipe.answer(*question(i))
            s = r.answer_set
            assert s is not None
            if "not conditional on the router's choice" in s.statement:  # too few routed for pac at 0.2
                assert s.calibration_size == n and f"on all {n} {words}" in s.statement
                assert "held-out questions it sends there now are too few for a pac set" in s.statement
                pooled += 1
            every += "every choice" in s.statement
            pipe.feedback(r.decision, correct=True)
        assert pooled > 0 and every == 0


def test_a_calibration_made_with_other_arms_is_refused_by_name(tmp_path: Path) -> None:
    path = write_questions(tmp_path, dev_rows(2))
    with make(tmp_path, cheap=0.1, dear=0.3, budget=100.0) as pipe:
        fit(pipe, path, max_spend=100.0, echo=lambda _: None)
        assert pipe.state.calibration is not None and pipe.status().calibration_problem is None
    with make(tmp_path, cheap=0.2, dear=0.3, budget=100.0) as pipe:  # the cheap arm's price changed
        problem = pipe.status().calibration_problem
        assert problem is not None and "calibration" in problem and "other arm settings" in problem
        r = pipe.answer(*question(0))
        assert r.answer_set is None and "other arm settings" in r.notes[0]


def test_the_learning_questions_scores_join_the_held_out_ones_and_a_bad_shape_is_refused() -> None:

    held = np.array([[0.1, np.nan], [0.4, 0.2]])
    tune = np.array([[0.3, np.nan], [np.nan, np.nan], [0.5, np.nan]])  # "b": tuned on the dev log
    cal = HeldOutCalibration(("a", "b"), "lac", np.zeros((2, 1)), np.zeros((2, 2)), held, tune_scores=tune)
    assert cal.dev_scores("a").tolist() == [0.1, 0.4, 0.3, 0.5] and cal.dev_scores("b").tolist() == [0.2]
    assert fallback_scores(cal, "a", AnswerSetConfig()).tolist() == [0.1, 0.4]
    assert fallback_scores(cal, "a", AnswerSetConfig(fallback="all_dev")).size == 4
    old = HeldOutCalibration(("a", "b"), "lac", np.zeros((2, 1)), np.zeros((2, 2)), held)  # written before
    assert fallback_scores(old, "a", AnswerSetConfig(fallback="all_dev")).tolist() == [0.1, 0.4]
    with pytest.raises(DataError, match="tune_scores"):
        HeldOutCalibration(("a", "b"), "lac", np.zeros((2, 1)), np.zeros((2, 2)), held,
                           tune_scores=tune[:, :1])
