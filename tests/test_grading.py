"""Grading against gold and matching question texts across files."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kgwise.grading import match_answer, question_key, repair_text


def test_question_key_repairs_double_encoded_utf8() -> None:
    text = "Who is the president of México?"
    once = text.encode("utf-8").decode("latin-1")
    twice = once.encode("utf-8").decode("latin-1")
    assert repair_text(once) == text
    assert question_key(once) == question_key(twice) == question_key(text) == "whoisthepresidentofmexico"


def test_question_key_undoes_wordpiece_and_width() -> None:
    assert question_key("who is jam ##ar ##cus") == question_key("Who is Jamarcus?")
    assert question_key("ＷＨＯ") == "who"  # NFKC: full-width letters


@given(st.text(alphabet=st.characters(codec="latin-1"), max_size=40))
def test_question_key_is_stable_under_repair(text: str) -> None:
    assert question_key(repair_text(text)) == question_key(text)


def test_match_answer() -> None:
    assert match_answer("The president was Barack Obama.", ["barack obama"])
    assert not match_answer("Obamacare", ["obama"])
