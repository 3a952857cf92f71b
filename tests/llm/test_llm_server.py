"""``OpenAICompatible`` against llama.cpp's real OpenAI-compatible server (llama-cpp-python[server]) on
127.0.0.1 serving SmolLM2: the same choices as the in-process backend.

llama-cpp-python 0.3.36's ``/v1/completions`` with ``echo`` pairs each prompt token with the logits of the
*same* position (one too late) when the prompt does not start with BOS, and SmolLM2's GGUF does not add
one. Both sides therefore run with the GGUF override ``tokenizer.ggml.add_bos_token=true``, under which the
server's echo is aligned; the comparison is then like for like.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kgwise.datasets import load
from kgwise.llm.answering import answer_by_scoring
from kgwise.llm.llamacpp import LlamaCpp, LlamaCppConfig, resolve_model_path
from kgwise.llm.openai_compat import OpenAICompatible, OpenAIConfig
from kgwise.retry import RetryPolicy

pytestmark = pytest.mark.slow

BOS = (("tokenizer.ggml.add_bos_token", True),)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    _, path = resolve_model_path("smollm2-135m")
    port = _free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    with log.open("w") as fh:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--model", str(path), "--model_alias", "smollm2",
             "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "1024", "--n_threads", "1",
             "--logits_all", "true", "--kv_overrides", "tokenizer.ggml.add_bos_token=bool:true"],
            stdout=fh, stderr=subprocess.STDOUT,
        )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.time() + 120
        while True:
            if proc.poll() is not None:
                pytest.fail(f"llama.cpp server exited with {proc.returncode}:\n{log.read_text()[-2000:]}")
            try:
                if httpx.get(f"{url}/models", timeout=1.0).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.time() > deadline:
                pytest.fail(f"llama.cpp server did not start:\n{log.read_text()[-2000:]}")
            time.sleep(0.3)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


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
