"""What ``kgwise ask`` and ``kgwise status`` print with ``[answer_sets] abstain`` (the stub-armed pipeline of
``tests/app``: a test double of the arms only): "not sure" with its set and reason, the promise of an
answer given, and per arm the share answered and the accuracy among answered, live from feedback."""

from __future__ import annotations

from pathlib import Path

from tests.cli.test_pipeline_cli import _printed
from tests.server.test_abstention import abstaining

from kgwise.app.abstain import NOT_SURE
from kgwise.cli.pipeline import print_answer, print_status


def test_ask_and_status_show_not_sure_its_set_and_the_share_answered(tmp_path: Path) -> None:
    from tests.app.test_pipeline import question

    pipe = abstaining(tmp_path).pipeline
    unsure = pipe.answer(*question(0))  # routed to the free arm, which certifies nothing
    sure = pipe.answer(*question(1), arm="dear")
    assert unsure.abstained and unsure.answer == NOT_SURE and unsure.answer_set is not None
    text = " ".join(_printed(print_answer, unsure).split())
    assert "answer: not sure" in text and f"set of {len(unsure.answer_set.texts)} (α = 0.3" in text
    assert "abstained: not sure: arm 'free': " in text and "certify no confidence threshold" in text
    text = " ".join(_printed(print_answer, sure).split())
    assert ("answered: accuracy ≥ 0.7 among the questions answered" in text) != sure.abstained
    pipe.feedback(sure.decision, correct=True)
    text = " ".join(_printed(print_status, pipe.status()).split())
    assert "free: answered 0 of 1 (0%), no feedback yet" in text
    given = int(not sure.abstained)
    assert f"dear: answered {given} of 1 ({100 * given}%), " + (
        "right on 100.0% of 1 graded" if given else "no feedback yet") in text
