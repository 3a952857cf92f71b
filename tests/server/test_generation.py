"""OpenAI's generation parameters and token streaming, end to end: the official ``openai`` client against a
real server over the real pipeline, whose two arms run smollm2-135m in-process (a plain LLM arm and a
KnowGPT injection arm over a small drug/disease graph). Each honoured parameter shows its effect on a
generated (open) answer; those a scored multiple-choice answer cannot apply are a 400 naming them."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

pytestmark = pytest.mark.slow

OPEN = "What drug treats hypertension?"
LONG = "Describe how lisinopril treats hypertension."
MC = ("Which medication is commonly prescribed to treat hypertension?\n"
      "A) Lisinopril\nB) Insulin\nC) Penicillin")


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)


def _ask(url: str, content: str = OPEN, *, model: str = "kgwise/smollm2", **params: Any) -> Any:
    return _client(url).chat.completions.create(model=model, messages=[{"role": "user", "content": content}],
                                                **params)


def _refused(url: str, param: str, content: str = OPEN, **params: Any) -> str:
    with pytest.raises(openai.BadRequestError) as err:
        _ask(url, content, **params)
    body = err.value.body
    assert isinstance(body, dict) and body["param"] == param, body
    assert body["message"].startswith(f"{param}: ")
    return str(body["message"])


def test_max_tokens_cuts_a_generated_answer_at_the_limit(real_live: Any) -> None:
    whole = _ask(real_live.url)
    assert whole.usage.completion_tokens > 2 and whole.choices[0].finish_reason == "stop"
    for name in ("max_tokens", "max_completion_tokens"):
        limit: dict[str, Any] = {name: 2}
        cut = _ask(real_live.url, OPEN, **limit)
        assert cut.usage.completion_tokens <= 2 and cut.choices[0].finish_reason == "length"
        assert whole.choices[0].message.content.startswith(cut.choices[0].message.content)
    text = _client(real_live.url).completions.create(model="kgwise/inject", prompt=OPEN, max_tokens=2)
    assert text.usage is not None and text.usage.completion_tokens <= 2
    assert text.choices[0].finish_reason == "length"


def test_stop_ends_the_text_before_the_stop_string(real_live: Any) -> None:
    whole = _ask(real_live.url).choices[0].message.content
    words = whole.split()
    assert len(words) >= 3, whole
    stop = " " + words[2]
    cut = _ask(real_live.url, stop=[stop]).choices[0].message.content
    assert cut == whole[:whole.index(stop)].strip()
    assert _ask(real_live.url, stop=stop).choices[0].message.content == cut  # one string or a list


def test_seed_reproduces_sampled_text_and_temperature_samples(real_live: Any) -> None:
    greedy = _ask(real_live.url).choices[0].message.content
    first = _ask(real_live.url, temperature=1.0, seed=7).choices[0].message.content
    assert _ask(real_live.url, temperature=1.0, seed=7).choices[0].message.content == first
    others = {_ask(real_live.url, temperature=1.0, seed=s).choices[0].message.content for s in (8, 9, 10)}
    assert others | {first} != {greedy} and len(others | {first}) > 1  # sampling draws other texts


def test_top_p_narrows_sampling_to_the_most_likely_token(real_live: Any) -> None:
    greedy = _ask(real_live.url).choices[0].message.content
    for seed in (8, 9):  # with a nucleus of one token, sampling at any seed is greedy decoding
        narrow = _ask(real_live.url, temperature=1.5, top_p=1e-6, seed=seed)
        assert narrow.choices[0].message.content == greedy


def test_n_above_one_is_a_400(real_live: Any) -> None:
    assert "one answer per question" in _refused(real_live.url, "n", n=2)


def test_a_multiple_choice_answer_refuses_sampling_and_keeps_max_tokens_and_seed(real_live: Any) -> None:
    for param, value in (("temperature", 0.7), ("top_p", 0.5), ("stop", ["x"])):
        message = _refused(real_live.url, param, MC, model="kgwise", **{param: value})
        assert "best-scored choice" in message
    scored = _ask(real_live.url, MC, model="kgwise", max_tokens=1, seed=3, temperature=0, top_p=1)
    assert scored.choices[0].message.content[:3] in {"A) ", "B) ", "C) "}
    assert scored.usage.completion_tokens == 0 and scored.choices[0].finish_reason == "stop"


def test_out_of_range_values_are_a_400_naming_them(real_live: Any) -> None:
    values: list[tuple[str, Any]] = [("temperature", 3), ("top_p", 0), ("max_tokens", 0),
                                     ("stop", ["a", "b", "c", "d", "e"])]
    for param, value in values:
        _refused(real_live.url, param, OPEN, **{param: value})


def test_streaming_sends_the_text_token_by_token_then_the_kgwise_fields(real_live: Any) -> None:
    chunks = list(_ask(real_live.url, stream=True, stream_options={"include_usage": True}))
    content = [c for c in chunks if c.choices and c.choices[0].delta.content]
    last = next(c for c in chunks if c.choices and c.choices[0].finish_reason)
    assert len(content) >= 2 and chunks.index(content[-1]) < chunks.index(last)
    extra = (last.model_extra or {})["kgwise"]
    assert "".join(c.choices[0].delta.content or "" for c in content).strip() == extra["answer"]
    assert extra["decision_id"] and extra["arm"] == "smollm2"
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens == extra["usage"]["output_tokens"]
    # a scored multiple-choice answer comes in one chunk once it is made
    mc = [c for c in _ask(real_live.url, MC, model="kgwise", stream=True) if c.choices and
          c.choices[0].delta.content]
    assert len(mc) == 1


def _pending(url: str) -> int:
    return int(httpx.get(url + "/v1/status").json()["pipelines"][0]["pending_total"])


def test_streamed_text_arrives_before_the_answer_is_made_and_recorded(real_live: Any) -> None:
    """Not one burst once made: when the first piece arrives the answer is not yet recorded (the state
    records it once complete); after the last chunk it is."""
    before = _pending(real_live.url)
    seen: list[int] = []
    for chunk in _ask(real_live.url, LONG, stream=True):
        if chunk.choices and chunk.choices[0].delta.content and not seen:
            seen.append(_pending(real_live.url))
    assert seen == [before] and _pending(real_live.url) == before + 1


def test_a_client_that_leaves_mid_stream_is_not_charged(real_live: Any) -> None:
    """Leaving after the first piece stops the generation at its next token: the decision is called off,
    so nothing is charged or recorded."""
    def status() -> dict[str, Any]:
        out = httpx.get(real_live.url + "/v1/status").json()["pipelines"][0]
        return {"spent": out["spent"], "pending": out["pending_total"]}

    before = status()
    body = {"model": "kgwise/smollm2", "stream": True, "max_tokens": 64,
            "messages": [{"role": "user", "content": LONG}]}
    with httpx.stream("POST", real_live.url + "/v1/chat/completions", json=body, timeout=60) as res:
        for line in res.iter_lines():
            if line.startswith("data: ") and json.loads(line[6:])["choices"][0]["delta"].get("content"):
                break  # the first piece of text: leave
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and sum(
            g["busy"] for g in httpx.get(real_live.url + "/health").json()["load"].values()):
        time.sleep(0.2)  # the generation stops at its next token; its gate's work then ends
    assert status() == before
    after = _ask(real_live.url)  # the arm answers the next request
    assert after.choices[0].message.content


UPSTREAM_CONFIG = """\
[kg]
graph = "kg.tsv"

[[arms]]
name = "remote"
kind = "llm"
spec = "openai:{model}"
base_url = "{url}"
price = 0.001

[router]
budget_usd = 1.0
seed = 0
"""


@pytest.fixture
def upstream_live(real_live: Any, serve_pipelines: Any, tmp_path: Any) -> Iterator[str]:
    """A second kgwise whose one arm is OpenAI-compatible (``openai:`` with ``base_url``): its upstream is
    ``real_live``, a real server that streams smollm2-135m's text token by token and reports usage at the
    end of a stream (``stream_options.include_usage``). Yields the second server's URL."""
    from kgwise.server.pipeline_adapter import ServedPipeline, pipeline_hub

    (tmp_path / "kg.tsv").write_text("lisinopril\ttreats\thypertension\n", encoding="utf-8")
    config = UPSTREAM_CONFIG.format(url=real_live.url + "/v1", model="kgwise/smollm2")
    (tmp_path / "kgwise.toml").write_text(config, encoding="utf-8")
    pipeline = ServedPipeline.from_config(tmp_path / "kgwise.toml", tmp_path / "state")
    try:
        with serve_pipelines(pipeline_hub({"kgwise": pipeline})) as url:
            yield url
    finally:
        pipeline.close()


def _spent(url: str) -> tuple[float, int]:
    out = httpx.get(url + "/v1/status").json()["pipelines"][0]
    return float(out["spent"]), int(out["pending_total"])


def test_an_upstream_arm_streams_token_by_token_and_is_charged_as_unstreamed(upstream_live: str) -> None:
    """The arm's upstream request is streamed: the text reaches the client in pieces before the last
    chunk, and the answer's usage and charge are those of the same question not streamed."""
    model = "kgwise/remote"
    chunks = list(_ask(upstream_live, model=model, stream=True, stream_options={"include_usage": True}))
    content = [c for c in chunks if c.choices and c.choices[0].delta.content]
    last = next(c for c in chunks if c.choices and c.choices[0].finish_reason)
    assert len(content) >= 2 and chunks.index(content[-1]) < chunks.index(last)
    streamed = (last.model_extra or {})["kgwise"]
    assert "".join(c.choices[0].delta.content or "" for c in content).strip() == streamed["answer"]
    spent_streamed, pending = _spent(upstream_live)
    whole = _ask(upstream_live, model=model)
    plain = (whole.model_extra or {})["kgwise"]
    spent_plain, _ = _spent(upstream_live)
    # the usage is the upstream's report, under the same rule: kgwise's upstream, streaming from llama.cpp,
    # also counts the end-of-text token it sampled (docs/serving.md), so output tokens may be one more
    s_usage, p_usage = streamed["usage"], plain["usage"]
    assert plain["answer"] == streamed["answer"] and s_usage["input_tokens"] == p_usage["input_tokens"] > 0
    assert 0 <= s_usage["output_tokens"] - p_usage["output_tokens"] <= 1 and s_usage["calls"] == 1
    assert spent_streamed == pytest.approx(0.001) and spent_plain == pytest.approx(2 * spent_streamed)
    assert pending == 1 and plain["cost"] == streamed["cost"] == pytest.approx(0.001)


def test_a_client_leaving_an_upstream_arm_s_stream_is_not_charged(upstream_live: str, real_live: Any) -> None:
    """Leaving after the first piece closes the upstream stream: the decision is called off, nothing is
    charged or recorded, and the arm answers the next request. The upstream, its client gone, calls its
    own decision off too."""
    upstream_before = _spent(real_live.url)
    body = {"model": "kgwise/remote", "stream": True, "messages": [{"role": "user", "content": LONG}]}
    with httpx.stream("POST", upstream_live + "/v1/chat/completions", json=body, timeout=60) as res:
        for line in res.iter_lines():
            if line.startswith("data: ") and json.loads(line[6:])["choices"][0]["delta"].get("content"):
                break  # the first piece of text: leave
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and sum(
            g["busy"] for u in (upstream_live, real_live.url)
            for g in httpx.get(u + "/health").json()["load"].values()):
        time.sleep(0.2)
    assert _spent(upstream_live) == (0.0, 0) and _spent(real_live.url) == upstream_before
    assert _ask(upstream_live, model="kgwise/remote").choices[0].message.content


def test_an_upstream_that_streams_without_usage_is_charged_its_bound_then_asked_unstreamed(
        llama_server: str, serve_pipelines: Any, tmp_path: Any) -> None:
    """llama.cpp's server (llama-cpp-python 0.3.36) streams but reports no usage in a stream: the first
    streamed answer's cost is unknown, so it is an upstream error charged at the arm's bound (an error
    event after the text); the arm then asks that server unstreamed (one chunk, its usage reported)."""
    from kgwise.server.pipeline_adapter import ServedPipeline, pipeline_hub

    (tmp_path / "kg.tsv").write_text("lisinopril\ttreats\thypertension\n", encoding="utf-8")
    (tmp_path / "kgwise.toml").write_text(UPSTREAM_CONFIG.format(url=llama_server, model="smollm2"),
                                          encoding="utf-8")
    pipeline = ServedPipeline.from_config(tmp_path / "kgwise.toml", tmp_path / "state")
    try:
        with serve_pipelines(pipeline_hub({"kgwise": pipeline})) as url:
            body = {"model": "kgwise/remote", "stream": True, "messages": [{"role": "user", "content": OPEN}]}
            with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=120) as res:
                events = [json.loads(line[6:]) for line in res.iter_lines()
                          if line.startswith("data: ") and line != "data: [DONE]"]
            texts = [e for e in events if e.get("choices") and e["choices"][0]["delta"].get("content")]
            assert len(texts) >= 2 and "reports no usage" in events[-1]["error"]["message"]
            assert _spent(url) == (pytest.approx(0.001), 0)  # the bound of a 0.001-per-call arm
            chunks = list(_ask(url, model="kgwise/remote", stream=True))
            content = [c for c in chunks if c.choices and c.choices[0].delta.content]
            assert len(content) == 1 and _spent(url) == (pytest.approx(0.002), 1)
    finally:
        pipeline.close()
