"""kgwise.app.prompt_fit: an inject arm's prompt bandit learnt on the dev log."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kgwise.app.prompt_fit import MIN_PROMPT_FIT, fit_prompts

COMBOS = ("P_sub+F_t", "P_sub+F_s")


def _log(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Embeddings and rewards where F_t is right when the first coordinate is positive and F_s otherwise
    (each wrong 10 % of the time): the best single combination gets ~.5, the right pick ~.9."""
    rng = np.random.default_rng(seed)
    E = rng.normal(size=(n, 4))
    E /= np.linalg.norm(E, axis=1, keepdims=True)
    good = np.where(E[:, 0] > 0, 0, 1)
    R = np.zeros((n, 2))
    R[np.arange(n), good] = 1.0
    flip = rng.random((n, 2)) < 0.1
    return E, np.where(flip, 1.0 - R, R)


def test_the_bandit_learns_which_combination_suits_which_question() -> None:
    E, R = _log(400)
    held = [i % 2 == 1 for i in range(400)]
    bandit, picks, report = fit_prompts("arm", COMBOS, E, R, held)
    assert bandit is not None and report.reason == ""
    assert report.questions == 200 and max(report.accuracy.values()) < 0.65
    assert report.held_out_accuracy is not None and report.held_out_accuracy > 0.8
    assert report.cross_fitted_accuracy is not None and report.cross_fitted_accuracy > 0.8
    assert all(p is not None for p in picks)
    assert report.held_out_share["P_sub+F_t"] == pytest.approx(np.mean(E[1::2, 0] > 0), abs=0.1)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**16))
def test_held_out_outcomes_never_reach_the_bandit(seed: int) -> None:
    """What a held-out question's combinations scored changes neither the bandit nor any pick: its answer
    stays what the arm will do on a new question (the sets' calibration depends on it)."""
    E, R = _log(60, seed)
    held = [i % 3 == 0 for i in range(60)]
    other = R.copy()
    other[0::3] = np.random.default_rng(seed + 1).integers(0, 2, size=other[0::3].shape)
    b1, p1, _ = fit_prompts("arm", COMBOS, E, R, held)
    b2, p2, _ = fit_prompts("arm", COMBOS, E, other, held)
    assert b1 is not None and b2 is not None
    assert p1 == p2
    np.testing.assert_array_equal(b1.policy.theta, b2.policy.theta)


def test_a_learning_question_is_picked_by_a_bandit_that_never_saw_it() -> None:
    """Cross-fitting: flipping a learning question's own outcomes cannot change its own pick."""
    E, R = _log(80)
    held = [False] * 80
    _, picks, _ = fit_prompts("arm", COMBOS, E, R, held)
    for i in (0, 1, 7):
        flipped = R.copy()
        flipped[i] = 1.0 - flipped[i]
        assert fit_prompts("arm", COMBOS, E, flipped, held)[1][i] == picks[i]


def test_too_few_questions_keep_the_first_combination_and_say_why() -> None:
    E, R = _log(2 * MIN_PROMPT_FIT - 2)
    held = [i % 2 == 1 for i in range(len(R))]
    bandit, picks, report = fit_prompts("arm", COMBOS, E, R, held)
    assert bandit is None and set(picks) == {0}
    assert f"fewer than the {MIN_PROMPT_FIT}" in report.reason and "P_sub+F_t" in report.reason


def test_a_question_some_combinations_could_not_answer_gets_one_that_did() -> None:
    E, R = _log(80)
    R[5, 0] = np.nan  # e.g. P_RL on an open question
    R[6, :] = np.nan  # not answered at all
    held = [i % 2 == 1 for i in range(80)]
    _, picks, report = fit_prompts("arm", COMBOS, E, R, held)
    assert picks[5] == 1 and picks[6] is None
    assert report.questions == 39  # learning questions with every combination's outcome


def test_the_report_compares_each_combination_with_the_picks_on_the_held_out_questions() -> None:
    E, R = _log(200)
    held = [i % 2 == 1 for i in range(200)]
    _, picks, report = fit_prompts("arm", COMBOS, E, R, held)
    hold = list(range(1, 200, 2))
    assert report.held_out_questions == 100
    each = {c: pytest.approx(R[hold, k].mean()) for k, c in enumerate(COMBOS)}
    assert report.held_out_accuracy_each == each
    assert report.held_out_accuracy == pytest.approx(np.mean([R[i, picks[i]] for i in hold]))
