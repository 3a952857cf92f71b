"""``OpenAICompatible`` against llama.cpp's real OpenAI-compatible server (llama-cpp-python[server]) on
127.0.0.1 serving SmolLM2: the same choices as the in-process backend.

llama-cpp-python 0.3.36's ``/v1/completions`` with ``echo`` pairs each prompt token with the logits of the
*same* position (one too late) when the prompt does not start with BOS, and SmolLM2's GGUF does not add
one. Both sides therefore run with the GGUF override ``tokenizer.ggml.add_bos_token=true``, under which the
server's echo is aligned; the comparison is then like for like.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from kgwise.datasets import load
from kgwise.llm.answering import answer_by_scoring
from kgwise.llm.base import UsageError
from kgwise.llm.llamacpp import LlamaCpp, LlamaCppConfig
from kgwise.llm.openai_compat import OpenAICompatible, OpenAIConfig
from kgwise.retry import RetryPolicy

pytestmark = pytest.mark.slow

BOS = (("tokenizer.ggml.add_bos_token", True),)



@pytest.fixture()
def server(llama_server: str) -> str:
    """llama.cpp's OpenAI-compatible server on 127.0.0.1 (the shared ``llama_server`` fixture)."""
    return llama_server


def test_server_gives_the_same_choices_as_in_process(server: str, data_dir: Path) -> None:
    remote = OpenAICompatible(OpenAIConfig(model="smollm2", base_url=server, api_key="none"),
                              retry=RetryPolicy(timeout_s=60))
    local = LlamaCpp("smollm2-135m", config=LlamaCppConfig(n_threads=1, kv_overrides=BOS))
    # the server sorts the whole vocabulary in Python for every echoed token: keep prompts short
    questions = sorted(load("obqa", "test", data_dir),
                       key=lambda q: len(q.text) + sum(map(len, q.choice_texts)))[:3]
    for q in questions:
        a_remote, s_remote = answer_by_scoring(remote, q)
        a_local, s_local = answer_by_scoring(local, q)
        assert s_remote.method == "logprob"
        assert a_remote.prediction == a_local.prediction, q.id
        assert s_remote.token_counts == s_local.token_counts
        assert s_remote.logprobs == pytest.approx(s_local.logprobs, abs=0.05)
        assert s_remote.usage.calls == len(q.choices) and s_remote.usage.input_tokens > 0


def test_chat_generation_through_the_server(server: str) -> None:
    remote = OpenAICompatible(OpenAIConfig(model="smollm2", base_url=server, api_key="none"),
                              retry=RetryPolicy(timeout_s=60))
    gen = remote.generate("What is the capital of France? Answer in one word.", max_tokens=8)
    assert gen.text.strip() and gen.usage.input_tokens > 5 and 0 < gen.usage.output_tokens <= 8
    assert gen.usage.cost == 0.0 and not remote.priced and gen.attempts == 1


def test_generation_settings_reach_the_server(server: str) -> None:
    """``top_p``, ``seed`` and ``stop`` go to the upstream server as OpenAI's parameters: the same seed
    gives the same sampled text, a one-token nucleus gives greedy decoding; ``on_text`` gets the reply."""
    remote = OpenAICompatible(OpenAIConfig(model="smollm2", base_url=server, api_key="none"),
                              retry=RetryPolicy(timeout_s=60))
    prompt = "Tell me a short story about a cat."
    greedy = remote.generate(prompt, max_tokens=12).text
    first = remote.generate(prompt, max_tokens=12, temperature=1.0, seed=7).text
    assert remote.generate(prompt, max_tokens=12, temperature=1.0, seed=7).text == first
    drawn = {remote.generate(prompt, max_tokens=12, temperature=1.0, seed=s).text for s in (8, 9)}
    assert len(drawn | {first}) > 1
    assert remote.generate(prompt, max_tokens=12, temperature=1.5, top_p=1e-6, seed=8).text == greedy
    word = greedy.split()[1]
    remote.streams_usage = False  # this server streams without usage (test_streamed_generation_…)
    pieces: list[str] = []
    cut = remote.generate(prompt, max_tokens=12, stop=[word], on_text=pieces.append)
    assert word not in cut.text and greedy.startswith(cut.text) and pieces == [cut.text]


def test_streamed_generation_through_the_server(server: str) -> None:
    """With ``on_text`` the request is streamed: the text arrives token by token, the same as unstreamed.
    llama-cpp-python's server (0.3.36) ignores ``stream_options.include_usage``, so the stream reports no
    usage: the call's cost cannot be known (``UsageError``, as for any reply without usage), and the
    backend asks this server unstreamed from then on (the text in one piece, its usage reported)."""
    remote = OpenAICompatible(OpenAIConfig(model="smollm2", base_url=server, api_key="none"),
                              retry=RetryPolicy(timeout_s=60))
    prompt = "Tell me a short story about a cat."
    whole = remote.generate(prompt, max_tokens=12)
    pieces: list[str] = []
    with pytest.raises(UsageError, match="reports no usage"):
        remote.generate(prompt, max_tokens=12, on_text=pieces.append)
    assert len(pieces) >= 2 and "".join(pieces) == whole.text and remote.streams_usage is False
    later: list[str] = []
    again = remote.generate(prompt, max_tokens=12, on_text=later.append)
    assert later == [whole.text] and again.usage == replace(whole.usage, latency_s=again.usage.latency_s)


def test_a_streamed_generation_stops_when_on_text_raises(server: str) -> None:
    """An exception from ``on_text`` (a client gone) stops the reading at once and closes the upstream
    stream; it propagates as it is, not retried; the server answers the next request."""
    remote = OpenAICompatible(OpenAIConfig(model="smollm2", base_url=server, api_key="none"),
                              retry=RetryPolicy(timeout_s=60))
    pieces: list[str] = []

    class ClientGoneError(Exception):
        pass

    def leave(piece: str) -> None:
        pieces.append(piece)
        raise ClientGoneError(piece)

    with pytest.raises(ClientGoneError):
        remote.generate("Tell me a long story about a cat.", max_tokens=200, on_text=leave)
    assert len(pieces) == 1 and remote.stats.retries == 0 and remote.streams_usage is None
    assert remote.generate("Say yes.", max_tokens=4).text
