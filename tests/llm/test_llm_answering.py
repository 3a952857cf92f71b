"""Answer parsing and matching; the answering functions around a named test double."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import cast

import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from kgwise.errors import ConfigError
from kgwise.grading import match_answer, normalize_answer
from kgwise.llm import LLM, CachedLLM, ChoiceScores, Generation, Message, ResponseCache
from kgwise.llm.answering import (
    PRIOR_CONTEXT,
    MCConfig,
    answer_by_scoring,
    answer_mc,
    letter_reply,
    letter_reply_probabilities,
    parse_choice,
)
from kgwise.types import Choice, Question, Usage

CHOICES = (Choice("A", "dog"), Choice("B", "cat"), Choice("C", "dark red"), Choice("D", "red"))


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("B", 1), ("(B)", 1), (" b ", 1), ("Answer: B", 1), ("answer: (C)", 2), ("The answer is D.", 3),
        ("The correct answer is option B because cats purr.", 1), ("B. cat", 1), ("C) dark red", 2),
        ("**B**", 1), ("cat", 1), ("I think it is a cat.", 1), ("Dark red!", 2), ("It must be A dog", 0),
        ("A", 0), ("A. dog", 0), ("", None), ("no idea", None), ("dog or cat", None),
    ],
)
def test_parse_choice(reply: str, expected: int | None) -> None:
    assert parse_choice(reply, CHOICES) == expected


@given(st.text(max_size=60))
def test_parse_choice_never_crashes_and_is_in_range(reply: str) -> None:
    idx = parse_choice(reply, CHOICES)
    assert idx is None or 0 <= idx < len(CHOICES)


def test_normalize_and_match() -> None:
    assert normalize_answer("The  Beatles!") == "beatles"
    assert normalize_answer("Érik Satie") == "erik satie"
    assert match_answer("Barack Obama", ["barack obama"])
    assert match_answer("I believe it was Barack Obama, in 2009.", ["Obama", "Barack Obama"])
    assert not match_answer("Obamacare", ["Obama"])  # whole words only
    assert not match_answer("Barack Obama", ["Michelle Obama"])
    assert not match_answer("the", ["The"])  # empty after normalisation
    assert not match_answer("in Paris", ["Paris"], containment=False)


class ScriptedLLM:
    """Test double: replies with fixed text and fixed choice log-probabilities (``prior`` after the
    context-free prompt of PMI scoring); counts calls."""

    name = "scripted-test-double"

    def __init__(self, reply: str = "", logprobs: Sequence[float] = (), lengths: Sequence[int] = (),
                 prior: Sequence[float] = ()) -> None:
        self.reply, self.lp, self.lengths, self.prior = reply, tuple(logprobs), tuple(lengths), tuple(prior)
        self.calls: list[object] = []

    def generate(self, prompt: str | Sequence[Message], *, max_tokens: int = 256, temperature: float = 0.0,
                 stop: Sequence[str] | None = None) -> Generation:
        self.calls.append(prompt)
        return Generation(self.reply, Usage(5, 1, 1, 0.0, 0.002))

    def score_choices(self, context: str, choices: Sequence[str]) -> ChoiceScores:
        self.calls.append((context, tuple(choices)))
        lens = self.lengths or tuple(1 for _ in choices)
        lp = self.prior if context == PRIOR_CONTEXT else self.lp
        return ChoiceScores(lp, tuple(v / n for v, n in zip(lp, lens, strict=True)),
                            Usage(20, 0, 1, 0.0, 0.001), lens)


Q = Question("q1", "What purrs?", CHOICES, gold=("B",))


def test_scripted_double_satisfies_protocol() -> None:
    assert isinstance(ScriptedLLM(), LLM)


def test_answer_by_scoring_sum_and_mean() -> None:
    llm = ScriptedLLM(logprobs=[-4.0, -3.0, -5.0, -9.0], lengths=[1, 1, 5, 1])
    ans, _ = answer_by_scoring(llm, Q)
    assert ans.prediction == "B"
    assert math.isclose(sum(ans.probabilities.values()), 1.0)
    assert ans.probabilities["B"] / ans.probabilities["A"] == pytest.approx(math.e)
    ans_mean, _ = answer_by_scoring(llm, Q, rule="mean")
    assert ans_mean.prediction == "C"  # -5/5 = -1 is the best mean
    context, conts = cast(tuple[str, tuple[str, ...]], llm.calls[0])  # score_choices records this pair
    assert context.endswith("Question: What purrs?\nAnswer:")
    assert conts == (" dog", " cat", " dark red", " red")
    assert ans.usage.input_tokens == 20
    assert len(llm.calls) == 2  # sum and mean need no prior


def test_answer_by_scoring_pmi_divides_by_the_choice_prior() -> None:
    llm = ScriptedLLM(logprobs=[-4.0, -3.0, -5.0, -9.0], prior=[-1.0, -1.0, -6.0, -9.5])
    ans, scores = answer_by_scoring(llm, Q, rule="pmi")
    assert ans.prediction == "C"  # PMI (-3, -2, 1, 0.5): "dark red" gains most from the question
    assert scores.logprobs == (-4.0, -3.0, -5.0, -9.0)  # the conditional scores are returned as they are
    assert ans.probabilities["C"] / ans.probabilities["D"] == pytest.approx(math.exp(0.5))
    assert llm.calls[1] == (PRIOR_CONTEXT, (" dog", " cat", " dark red", " red"))
    assert ans.usage.input_tokens == 40 and ans.usage.calls == 2
    given, _ = answer_by_scoring(llm, Q, rule="pmi", prior=scores)  # a given prior is not fetched again
    assert len(llm.calls) == 3 and given.prediction == "A" and given.usage.calls == 1
    assert answer_mc(llm, Q, config=MCConfig(method="score-pmi")).prediction == "C"


def test_pmi_is_refused_for_a_backend_that_answers_by_letter() -> None:
    """Servers without prompt log-probabilities score by a letter reply: there is no prior to divide by."""

    class LetterLLM(ScriptedLLM):
        def score_choices(self, context: str, choices: Sequence[str]) -> ChoiceScores:
            s = super().score_choices(context, choices)
            return ChoiceScores(s.logprobs, s.normalised, s.usage, s.token_counts, method="letter")

    llm = LetterLLM(logprobs=[0.0, -50.0, -50.0, -50.0])
    assert answer_by_scoring(llm, Q)[0].prediction == "A"
    with pytest.raises(ConfigError, match="log-probabilities"):
        answer_by_scoring(llm, Q, rule="pmi")
    assert len(llm.calls) == 2  # refused before the prior was asked for


def test_answer_by_letter_parses_reply() -> None:
    ans = answer_mc(ScriptedLLM(reply="The answer is (B)."), Q, config=MCConfig(method="letter"))
    assert ans.prediction == "B" and ans.probabilities == {"A": 0.0, "B": 1.0, "C": 0.0, "D": 0.0}
    unparsed = answer_mc(ScriptedLLM(reply="hmm"), Q, config=MCConfig(method="letter"))
    assert unparsed.prediction == "" and unparsed.probabilities["A"] == pytest.approx(0.25)


class TopLogprobsLLM(ScriptedLLM):
    """Test double: a scripted reply whose first token's top log-probabilities are ``top``."""

    gives_top_logprobs = True

    def __init__(self, reply: str, top: dict[str, float]) -> None:
        super().__init__(reply=reply)
        self.top = top

    def generate(self, prompt: str | Sequence[Message], *, max_tokens: int = 256, temperature: float = 0.0,
                 stop: Sequence[str] | None = None, top_logprobs: int = 0) -> Generation:
        g = super().generate(prompt, max_tokens=max_tokens, temperature=temperature, stop=stop)
        return Generation(g.text, g.usage, top_logprobs=(self.top,) if top_logprobs else ())


def test_a_letter_reply_reads_the_first_tokens_log_probabilities_or_says_where_it_fell_back() -> None:
    top = {"B": math.log(0.6), " C": math.log(0.2), "(A": math.log(0.1), "The": math.log(0.05)}
    read = letter_reply(TopLogprobsLLM("B", top), Q)
    probs = dict(zip("ABCD", read.scores.ranked_probabilities(), strict=True))
    assert (read.prediction, read.source, read.scores.method) == ("B", "logprobs", "letter")
    assert probs == pytest.approx({"A": 1 / 9, "B": 6 / 9, "C": 2 / 9, "D": 0.0})  # over the letters only
    said = letter_reply(TopLogprobsLLM("The answer is D", {"The": -0.1, "A": -5.0}), Q)
    assert (said.prediction, said.source) == ("D", "reply")  # the text names another option than "A"
    silent = letter_reply(TopLogprobsLLM("I cannot tell", {"I": -0.1}), Q)
    assert (silent.prediction, silent.source) == ("", "none")  # no letter: no guess
    assert silent.scores.ranked_probabilities() == pytest.approx((0.25,) * 4)
    guess = letter_reply(TopLogprobsLLM("I cannot tell", {"I": -0.01, " A": -9.0}), Q)
    assert (guess.prediction, guess.source) == ("", "none")  # a letter deep in the top-k is no reply
    article = letter_reply(TopLogprobsLLM("a bird", {"a": -0.05, "B": -3.0}), Q)
    assert article.source != "logprobs"  # the article "a" is no option letter


@hypothesis_settings(deadline=None)
@given(st.integers(2, 8), st.integers(-1, 7), st.floats(0.0, 1.0, exclude_max=True))
def test_a_letter_reply_is_all_mass_on_its_choice_and_its_lac_set_that_choice_or_every_one(
        k: int, said: int, threshold: float) -> None:
    """A letter reply without log-probabilities (also a graded log's answer-only arm,
    ``kgwise.eval.pipeline_mc``): its LAC set at any threshold below 1 is its choice alone (none, when it
    named none and the threshold is below 1 − 1/k), and every choice at 1."""
    from kgwise.conformal.split import lac_scores

    def choice_set(probs: dict[str, float], threshold: float) -> tuple[str, ...]:
        scores = lac_scores([[probs[x] for x in labels]])[0]
        return tuple(x for x, v in zip(labels, scores.tolist(), strict=True) if v <= threshold)

    labels = [chr(ord("A") + i) for i in range(k)]
    answer = labels[said] if 0 <= said < k else ""
    p = letter_reply_probabilities(labels, answer)
    assert list(p) == labels and sum(p.values()) == pytest.approx(1.0)
    below = choice_set(p, threshold)
    if answer:
        assert below == (answer,)
    else:
        assert below == (tuple(labels) if threshold >= 1 - 1 / k else ())
    assert choice_set(p, 1.0) == tuple(labels)
    with pytest.raises(ValueError, match="not one of the choices"):
        letter_reply_probabilities(labels, "Z")


def test_cached_double_calls_inner_once(tmp_path: Path) -> None:
    inner = ScriptedLLM(reply="B", logprobs=[-1.0, -2.0, -3.0, -4.0])
    llm = CachedLLM(inner, ResponseCache(tmp_path / "c.sqlite"))
    a = llm.score_choices("ctx", ["a", "b", "c", "d"])
    b = llm.score_choices("ctx", ["a", "b", "c", "d"])
    assert a.logprobs == b.logprobs and len(inner.calls) == 1
    assert b.usage == Usage(latency_s=b.usage.latency_s, cached_calls=1)
    llm.generate("hello", temperature=0.7)
    llm.generate("hello", temperature=0.7)
    assert len(inner.calls) == 3  # sampled generations are not cached by default


def test_free_text_reply_streams_the_first_line_and_refuses_settings_a_recording_cannot_apply() -> None:
    """With a backend that is not tunable (the scripted double, like a replayed recording): settings are a
    ``SettingError`` naming the first one; ``on_text`` gets the prediction's line once the reply is made."""
    from kgwise.errors import SettingError
    from kgwise.llm.answering import free_text_reply
    from kgwise.types import GenerationSettings

    llm = ScriptedLLM(reply="\n  Paris, France\nQuestion: more")
    open_q = Question("q2", "Capital of France?")
    pieces: list[str] = []
    ans, finish = free_text_reply(llm, open_q, on_text=pieces.append)
    assert ans.prediction == "Paris, France" and "".join(pieces) == "Paris, France" and finish == "stop"
    for settings, param in ((GenerationSettings(temperature=0.5), "temperature"),
                            (GenerationSettings(max_tokens=3, seed=1), "max_tokens")):
        with pytest.raises(SettingError) as err:
            free_text_reply(llm, open_q, settings=settings)
        assert err.value.param == param and "recorded replies" in str(err.value)
    assert free_text_reply(llm, open_q, settings=GenerationSettings(temperature=0, top_p=1))[0] == ans
