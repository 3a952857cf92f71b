"""``OpenAICompatible`` + ``run_batch`` against a real local HTTP server that injects faults."""

from __future__ import annotations

import importlib.util
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from kgwise.llm import CachedLLM, ResponseCache
from kgwise.llm.batch import run_batch
from kgwise.llm.openai_compat import OpenAICompatible, OpenAIConfig
from kgwise.retry import RetryPolicy


def _load_helper() -> ModuleType:
    """The fault server lives beside this file (pytest runs with --import-mode=importlib)."""
    path = Path(__file__).with_name("llm_fault_server.py")
    spec = importlib.util.spec_from_file_location("llm_fault_server", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


_helper = _load_helper()
FaultServer = _helper.FaultServer
EXPECTED_RETRIES: dict[int, int] = _helper.EXPECTED_RETRIES
RETRY_AFTER_S: float = _helper.RETRY_AFTER_S

POLICY = RetryPolicy(max_retries=4, base_delay_s=0.01, max_delay_s=0.05, timeout_s=0.5)


@pytest.fixture()
def server() -> Iterator[Any]:
    srv = FaultServer(slow_s=1.5).start()
    yield srv
    srv.stop()


def _backend(url: str, model: str = "fault-model") -> OpenAICompatible:
    return OpenAICompatible(OpenAIConfig(model=model, base_url=url, api_key="test-key"), retry=POLICY, seed=1)


def _ok_lines(path: Path) -> list[dict[str, object]]:
    out = []
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:  # after the ResumeLog's fingerprint
        if line.strip():
            rec = json.loads(line)
            if rec["value"]["ok"]:
                out.append(rec)
    return out


def test_batch_of_200_every_result_once_with_expected_retries(server: Any, tmp_path: Path) -> None:
    llm = _backend(server.url)
    out = tmp_path / "batch.jsonl"
    report = run_batch(((str(k), k) for k in range(200)), lambda k: llm.generate(f"item-{k}").to_dict(), out,
                       concurrency=8, progress=False)
    assert report.failed == {}
    assert report.ran == 200 and report.resumed == 0
    assert sorted(report.results, key=int) == [str(k) for k in range(200)]
    for k in range(200):
        res = report.results[str(k)]
        assert res["text"] == f"answer-{k}"
        assert res["attempts"] == 1 + EXPECTED_RETRIES[k % 8]
        assert server.attempts[k] == 1 + EXPECTED_RETRIES[k % 8]
        assert res["usage"]["input_tokens"] == 10 and res["usage"]["output_tokens"] == 2
    lines = _ok_lines(out)
    assert len(lines) == 200
    assert Counter(rec["key"] for rec in lines) == Counter(str(k) for k in range(200))
    stats = llm.stats.snapshot()
    assert stats["retries"] == sum(EXPECTED_RETRIES[k % 8] for k in range(200))
    assert stats["reasons"] == {"connection": 25, "http_429": 25, "http_500": 25, "http_503": 25,
                                "timeout": 25, "malformed": 50}
    assert stats["failures"] == 0


def test_retry_after_is_honoured(server: Any, tmp_path: Path) -> None:
    llm = _backend(server.url)
    report = run_batch(((str(k), k) for k in (1, 9, 17)), lambda k: llm.generate(f"item-{k}").text,
                       tmp_path / "ra.jsonl", concurrency=3, progress=False)
    assert report.results == {"1": "answer-1", "9": "answer-9", "17": "answer-17"}
    for k in (1, 9, 17):
        times = [t for (t, kk, _, _) in server.log if kk == k]
        assert len(times) == 2
        assert times[1] - times[0] >= RETRY_AFTER_S - 0.05


def test_gives_up_after_max_retries(server: Any) -> None:
    from kgwise.llm import LLMError

    llm = OpenAICompatible(OpenAIConfig(model="m", base_url=server.url, api_key="k"),
                           retry=RetryPolicy(max_retries=1, base_delay_s=0.0, timeout_s=0.5))
    with pytest.raises(LLMError, match="gave up after 2 attempts"):
        llm.generate("item-2")  # 500 then 503: needs 2 retries
    assert server.attempts[2] == 2


_CHILD = textwrap.dedent(
    """
    import sys
    from kgwise.llm.batch import run_batch
    from kgwise.llm.openai_compat import OpenAICompatible, OpenAIConfig
    from kgwise.retry import RetryPolicy
    url, out = sys.argv[1], sys.argv[2]
    llm = OpenAICompatible(OpenAIConfig(model="fault-model", base_url=url, api_key="k"),
                           retry=RetryPolicy(max_retries=4, base_delay_s=0.01, max_delay_s=0.05,
                                             timeout_s=0.5))
    run_batch(((str(k), k) for k in range(200)), lambda k: llm.generate(f"item-{k}").to_dict(), out,
              concurrency=4, progress=False)
    """
)


def test_killed_batch_resumes_without_repeating_finished_calls(tmp_path: Path) -> None:
    srv = FaultServer(slow_s=1.5, ok_delay_s=0.05).start()
    try:
        out = tmp_path / "killed.jsonl"
        child = subprocess.Popen([sys.executable, "-c", _CHILD, srv.url, str(out)], env=dict(os.environ))
        deadline = time.time() + 120
        while time.time() < deadline:
            if out.exists() and len(out.read_text(encoding="utf-8").splitlines()) >= 61:  # fingerprint + 60
                break
            if child.poll() is not None:
                pytest.fail(f"child exited early with {child.returncode}")
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        killed_at = time.time()
        first = {str(rec["key"]) for rec in _ok_lines(out)}
        assert 60 <= len(first) < 200, "the kill should land mid-batch"

        llm = _backend(srv.url)
        report = run_batch(((str(k), k) for k in range(200)), lambda k: llm.generate(f"item-{k}").to_dict(),
                           out, concurrency=4, progress=False)
        assert report.resumed == len(first)
        assert report.ran == 200 - len(first)
        asked_again = {str(k) for (t, k, _, _) in srv.log if t > killed_at}
        assert asked_again.isdisjoint(first)
        lines = _ok_lines(out)
        assert Counter(str(rec["key"]) for rec in lines) == Counter(str(k) for k in range(200))
        assert all(report.results[str(k)]["text"] == f"answer-{k}" for k in range(200))
    finally:
        srv.stop()


def test_cache_hit_is_free_and_reported(server: Any, tmp_path: Path) -> None:
    cache = ResponseCache(tmp_path / "cache.sqlite")
    llm = CachedLLM(_backend(server.url, model="gpt-4o-mini"), cache)
    first = llm.generate("item-6")
    assert first.usage.calls == 1 and first.usage.cached_calls == 0
    assert first.usage.cost == pytest.approx((10 * 0.15 + 2 * 0.60) / 1e6)
    second = llm.generate("item-6")
    assert second.text == first.text == "answer-6"
    assert second.usage.cost == 0.0 and second.usage.calls == 0 and second.usage.cached_calls == 1
    assert second.usage.input_tokens == 0 and second.usage.output_tokens == 0
    assert server.attempts[6] == 1
    # the cache persists: a new cache object on the same file still hits
    again = CachedLLM(_backend(server.url, model="gpt-4o-mini"), ResponseCache(tmp_path / "cache.sqlite"))
    assert again.generate("item-6").usage.cached_calls == 1
    assert server.attempts[6] == 1
    # different parameters are a different key
    llm.generate("item-6", max_tokens=5)
    assert server.attempts[6] == 2


def test_choice_scoring_falls_back_to_letters_without_echo(server: Any) -> None:
    llm = OpenAICompatible(OpenAIConfig(model="m", base_url=server.url, api_key="k", top_logprobs=5),
                           retry=POLICY)
    scores = llm.score_choices("Question: which is a colour?\nAnswer:", [" dog", " blue", " chair"])
    assert scores.method == "letter"
    assert scores.best() == 1
    p = scores.probabilities
    assert p[1] / p[0] == pytest.approx(math.exp(1.8)) and p[2] == 0.0
    assert llm.score_choices("Question: again?\nAnswer:", [" x", " y"]).method == "letter"  # remembered
