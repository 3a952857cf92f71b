"""The OpenAI-compatible API on a real uvicorn (127.0.0.1), driven by the official ``openai`` SDK (sync and
async, streaming and not) and by ``curl``; over ``FakePipeline`` and, when the branch has it, the real
``kgwise.app.Pipeline`` (the ``live`` fixture of ``conftest.py``)."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
from typing import Any

import httpx
import openai
import pytest

from kgwise.errors import KgwiseError
from kgwise.server import ServerSettings, create_app
from kgwise.server.openai_api import OpenAIError, PipelineHub, split_choices

QUESTION = "Which medication is commonly prescribed to treat hypertension?"
CHOICES = ["Lisinopril", "Insulin", "Penicillin", "Levothyroxine"]
MESSAGE = QUESTION + "\n" + "\n".join(f"{label}) {c}" for label, c in zip("ABCD", CHOICES, strict=True))
USER: list[Any] = [{"role": "user", "content": MESSAGE}]


def _client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="unused", max_retries=0)


def _arms(url: str) -> list[str]:
    ids = [m.id for m in _client(url).models.list()]
    return [i.split("/", 1)[1] for i in ids if i.startswith("kgwise/")]


# --- choices in a message ---------------------------------------------------------------------------

def test_split_choices_lines_inline_json_and_open() -> None:
    assert split_choices(MESSAGE) == (QUESTION, CHOICES)
    assert split_choices("Q?\n(A) x\n(B) y") == ("Q?", ["x", "y"])
    assert split_choices("Q?\nA. x\nB. y\nC. z\n\n") == ("Q?", ["x", "y", "z"])
    assert split_choices("Pick one: A) red B) green C) blue") == ("Pick one:", ["red", "green", "blue"])
    block = 'Which?\n```json\n{"choices": ["cat", "dog"]}\n```\n'
    assert split_choices(block) == ("Which?", ["cat", "dog"])
    assert split_choices("What treats gout?") == ("What treats gout?", None)
    # labels out of order, a single option, or a non-json code block are not choices
    assert split_choices("Q?\nB) x\nA) y")[1] is None
    assert split_choices("Q?\nA) only")[1] is None
    assert split_choices("Q?\n```\nprint(1)\n```")[1] is None
    with pytest.raises(OpenAIError) as bad:
        split_choices("Q?\n```json\n{choices: [}\n```")
    assert bad.value.status == 400 and "json block" in str(bad.value)
    with pytest.raises(OpenAIError):
        split_choices('Q?\n```json\n{"choices": [1, 2]}\n```')


# --- the SDK -----------------------------------------------------------------------------------------

def test_models_list_each_pipeline_and_arm(live: Any) -> None:
    ids = [m.id for m in _client(live.url).models.list()]
    assert ids[:2] == ["kgwise", "kgwise:explain"] and len(ids) >= 3
    assert all(i in ("kgwise", "kgwise:explain") or i.startswith("kgwise/") for i in ids)
    assert _client(live.url).models.retrieve("kgwise/" + _arms(live.url)[0]).id.startswith("kgwise/")
    with pytest.raises(openai.NotFoundError) as err:
        _client(live.url).models.retrieve("kgwise/no-such-arm")
    assert err.value.code == "model_not_found"


def _check_extra(extra: dict[str, Any], arms: list[str]) -> None:
    assert extra["arm"] in arms and set(extra["scores"]) == set(arms)
    assert extra["question"] == QUESTION
    assert [c["text"] for c in extra["choices"]] == CHOICES
    assert extra["choice"] in "ABCD" and extra["answer"] == CHOICES["ABCD".index(extra["choice"])]
    assert extra["cost"] >= 0 and extra["decision_id"]
    if extra["answer_set"] is not None:
        assert 0 < extra["answer_set"]["alpha"] < 1 and extra["answer_set"]["guarantee"]
        assert extra["guaranteed"] == extra["answer_set"]["guaranteed"]


def test_sdk_sync_chat_completion_with_extras_and_cost_header(live: Any) -> None:
    client, arms = _client(live.url), _arms(live.url)
    raw = client.chat.completions.with_raw_response.create(
        model="kgwise", messages=[{"role": "system", "content": "Answer briefly."},
                                  {"role": "user", "content": MESSAGE}])
    completion = raw.parse()
    extra = (completion.model_extra or {})["kgwise"]
    _check_extra(extra, arms)
    assert completion.object == "chat.completion" and completion.model == "kgwise"
    assert completion.choices[0].message.content == f"{extra['choice']}) {extra['answer']}"
    assert completion.choices[0].finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == extra["usage"]["input_tokens"]
    assert completion.usage.total_tokens == extra["usage"]["input_tokens"] + extra["usage"]["output_tokens"]
    assert float(raw.headers["x-kgwise-cost"]) == pytest.approx(extra["cost"])
    assert raw.headers["x-kgwise-arm"] == extra["arm"]
    assert raw.headers["x-kgwise-decision-id"] == extra["decision_id"]
    if extra["cost_unit"] == "usd":
        assert float(raw.headers["x-kgwise-cost-usd"]) == pytest.approx(extra["cost"])
    ev = extra["evidence"]
    if ev is not None:
        assert len(ev["choice_concepts"]) == len(CHOICES)
        assert all(set(t) == {"head", "relation", "tail"} for t in ev["triples"])


def test_sdk_forced_arm_extra_body_choices_and_open_question(live: Any) -> None:
    client, arms = _client(live.url), _arms(live.url)
    for arm in arms:
        c = client.chat.completions.create(model=f"kgwise/{arm}", messages=[{"role": "user",
                                                                              "content": MESSAGE}])
        extra = (c.model_extra or {})["kgwise"]
        assert extra["arm"] == arm and extra["forced"] is True
    c = client.chat.completions.create(model="kgwise", messages=[{"role": "user", "content": QUESTION}],
                                       extra_body={"kgwise": {"choices": CHOICES}})
    _check_extra((c.model_extra or {})["kgwise"], arms)
    open_q = client.chat.completions.create(model="kgwise", messages=[
        {"role": "user", "content": [{"type": "text", "text": "What drug treats hypertension?"}]}])
    extra = (open_q.model_extra or {})["kgwise"]
    assert extra["choices"] is None and extra["choice"] is None
    assert open_q.choices[0].message.content == extra["answer"] and extra["answer"]


def test_sdk_sync_stream_and_completions(live: Any) -> None:
    client, arms = _client(live.url), _arms(live.url)
    chunks = list(client.chat.completions.create(model="kgwise", stream=True,
                                                 stream_options={"include_usage": True},
                                                 messages=[{"role": "user", "content": MESSAGE}]))
    assert all(ch.object == "chat.completion.chunk" for ch in chunks)
    assert len({ch.id for ch in chunks}) == 1
    text = "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices)
    finals = [ch for ch in chunks if ch.choices and ch.choices[0].finish_reason == "stop"]
    assert len(finals) == 1
    extra = (finals[0].model_extra or {})["kgwise"]
    _check_extra(extra, arms)
    assert text == f"{extra['choice']}) {extra['answer']}"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens == extra["usage"]["input_tokens"]

    done = client.completions.create(model="kgwise", prompt=MESSAGE)
    extra = (done.model_extra or {})["kgwise"]
    _check_extra(extra, arms)
    assert done.choices[0].text == f"{extra['choice']}) {extra['answer']}"
    streamed = list(client.completions.create(model="kgwise", prompt=MESSAGE, stream=True))
    assert "".join(s.choices[0].text for s in streamed if s.choices) in {
        f"{label}) {c}" for label, c in zip("ABCD", CHOICES, strict=True)}


def test_sdk_async_stream_and_not(live: Any) -> None:
    async def run() -> tuple[Any, list[Any]]:
        client = openai.AsyncOpenAI(base_url=live.url + "/v1", api_key="unused", max_retries=0)
        async with client:
            plain, stream = await asyncio.gather(
                client.chat.completions.create(model="kgwise", messages=USER),
                client.chat.completions.create(model="kgwise", stream=True,
                                               messages=[{"role": "user", "content": MESSAGE}]))
            return plain, [ch async for ch in stream]

    plain, chunks = asyncio.run(run())
    arms = _arms(live.url)
    _check_extra((plain.model_extra or {})["kgwise"], arms)
    final = next(ch for ch in chunks if ch.choices and ch.choices[0].finish_reason == "stop")
    _check_extra((final.model_extra or {})["kgwise"], arms)


def test_feedback_settles_once_and_status_counts(live: Any) -> None:
    client = _client(live.url)
    c = client.chat.completions.create(model="kgwise", messages=[{"role": "user", "content": MESSAGE}])
    extra = (c.model_extra or {})["kgwise"]
    before = httpx.get(live.url + "/v1/status").json()["pipelines"][0]
    assert extra["decision_id"] in [p["decision_id"] for p in before["pending"]]
    graded = {a["name"]: a["graded"] for a in before["arms"]}
    res = httpx.post(live.url + "/v1/feedback", json={"decision_id": extra["decision_id"], "correct": True})
    assert res.status_code == 200, res.text
    assert res.json() == {"object": "kgwise.feedback", "pipeline": "kgwise",
                          "decision_id": extra["decision_id"], "arm": extra["arm"], "correct": True}
    after = httpx.get(live.url + "/v1/status").json()["pipelines"][0]
    assert {a["name"]: a["graded"] for a in after["arms"]}[extra["arm"]] == graded[extra["arm"]] + 1
    assert extra["decision_id"] not in [p["decision_id"] for p in after["pending"]]
    assert after["history"] and after["history"][-1]["spent"] == pytest.approx(after["spent"])
    again = httpx.post(live.url + "/v1/feedback", json={"decision_id": extra["decision_id"], "correct": True})
    assert again.status_code == 404 and again.json()["error"]["code"] == "decision_not_found"
    c2 = client.chat.completions.create(model="kgwise", messages=[{"role": "user", "content": MESSAGE}])
    gold = httpx.post(live.url + "/v1/feedback", json={"decision_id": (c2.model_extra or {})["kgwise"][
        "decision_id"], "gold": "Lisinopril"})
    assert gold.status_code == 200 and isinstance(gold.json()["correct"], bool)


def _error(res: httpx.Response, status: int) -> dict[str, Any]:
    assert res.status_code == status, res.text
    body = res.json()
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}
    return dict(body["error"])


def test_errors_in_openai_shape(live: Any) -> None:
    url = live.url + "/v1/chat/completions"
    user = [{"role": "user", "content": MESSAGE}]
    err = _error(httpx.post(url, json={"model": "gpt-4o", "messages": user}), 404)
    assert err["code"] == "model_not_found" and err["param"] == "model"
    err = _error(httpx.post(url, json={"model": "kgwise", "messages": []}), 400)
    assert err["param"] == "messages" and err["type"] == "invalid_request_error"
    assert _error(httpx.post(url, json={"model": "kgwise", "messages": user, "n": 2}), 400)["param"] == "n"
    err = _error(httpx.post(url, json={"model": "kgwise", "messages": [{"role": "system", "content": "x"}]}),
                 400)
    assert "no user message" in err["message"]
    err = _error(httpx.post(url, content=b'{"model": "kgwise", "messages": [{"role": "user", '
                                         b'"content": "\\ud800 what?"}]}',
                            headers={"content-type": "application/json"}), 400)
    assert "surrogate" in err["message"]
    _error(httpx.post(url, content=b"{not json", headers={"content-type": "application/json"}), 400)
    err = _error(httpx.post(url, json={"model": "kgwise", "messages": [{"role": "user", "content": "   "}]}),
                 400)
    assert "empty" in err["message"]
    with pytest.raises(openai.BadRequestError):
        _client(live.url).chat.completions.create(model="kgwise", messages=[{"role": "user",
                                                                             "content": "Q?"}],
                                                  extra_body={"kgwise": {"choices": ["only one"]}})
    err = _error(httpx.post(url, json={"model": "kgwise", "messages": user,
                                       "kgwise": {"choices": ["Lisinopril", "  "]}}), 400)
    assert err["param"] == "kgwise.choices" and "choice 1 is empty" in err["message"]
    fb = live.url + "/v1/feedback"
    missing = _error(httpx.post(fb, json={"decision_id": "nope", "correct": True}), 404)
    assert missing["param"] == "decision_id"
    assert _error(httpx.post(fb, json={"decision_id": "x", "correct": True, "gold": "A"}), 400)
    assert _error(httpx.post(fb, json={"decision_id": "x"}), 400)


def test_budget_exhausted_is_429(fake_pipeline: Any, serve_pipelines: Any) -> None:
    with serve_pipelines({"kgwise": fake_pipeline(budget=0.001)}) as url:
        client = _client(url)
        client.chat.completions.create(model="kgwise/smollm2", messages=USER)
        with pytest.raises(openai.RateLimitError) as err:
            client.chat.completions.create(model="kgwise/gemma3",
                                           messages=[{"role": "user", "content": MESSAGE}])
        assert err.value.code == "budget_exhausted"


def test_openapi_declares_response_models_and_docs_are_local(live: Any) -> None:
    spec = httpx.get(live.url + "/openapi.json").json()
    ok = spec["paths"]["/v1/chat/completions"]["post"]["responses"]["200"]["content"]["application/json"]
    assert ok["schema"]["$ref"].endswith("/ChatCompletion")
    responses = spec["paths"]["/v1/chat/completions"]["post"]["responses"]
    assert {"400", "404", "429", "502"} <= set(responses) and "422" not in responses  # 400s, not 422s
    assert spec["paths"]["/v1/status"]["get"]["responses"]["200"]["content"]["application/json"][
        "schema"]["$ref"].endswith("/StatusResponse")
    assert "KgwiseExtra" in spec["components"]["schemas"] and "ErrorResponse" in spec["components"]["schemas"]
    for page in ("/docs", "/redoc"):
        html = httpx.get(live.url + page).text
        assert "/static/vendor/" in html and "cdn." not in html and "fonts.googleapis" not in html
    js = httpx.get(live.url + "/static/vendor/swagger-ui/swagger-ui-bundle.js",
                   headers={"accept-encoding": "gzip"})
    assert js.status_code == 200 and js.headers["content-encoding"] == "gzip"


# --- curl --------------------------------------------------------------------------------------------

CURL = shutil.which("curl")


def _curl(*args: str) -> tuple[dict[str, str], str]:
    assert CURL is not None
    out = subprocess.run([CURL, "-sS", "-D", "-", *args], capture_output=True, text=True, timeout=30,
                         check=True).stdout
    head, _, body = out.partition("\n\n")  # text mode turned \r\n into \n
    lines = head.splitlines()
    headers = {k.strip().lower(): v.strip() for k, _, v in (ln.partition(":") for ln in lines[1:])}
    headers[":status"] = lines[0].split()[1]
    return headers, body


@pytest.mark.skipif(CURL is None, reason="curl is not installed")
def test_curl_chat_stream_feedback_and_error(live: Any) -> None:
    body = json.dumps({"model": "kgwise", "messages": [{"role": "user", "content": MESSAGE}]})
    h, out = _curl("-H", "content-type: application/json", "-d", body, live.url + "/v1/chat/completions")
    assert h[":status"] == "200"
    completion = json.loads(out)
    extra = completion["kgwise"]
    _check_extra(extra, _arms(live.url))
    assert float(h["x-kgwise-cost"]) == pytest.approx(extra["cost"])

    stream = json.dumps({"model": "kgwise", "stream": True,
                         "messages": [{"role": "user", "content": MESSAGE}]})
    h, out = _curl("-N", "-H", "content-type: application/json", "-d", stream,
                   live.url + "/v1/chat/completions")
    assert h[":status"] == "200" and h["content-type"].startswith("text/event-stream")
    events = [ln.removeprefix("data: ") for ln in out.splitlines() if ln.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    final = chunks[-1]["kgwise"]
    assert "".join(c["choices"][0]["delta"].get("content", "") for c in chunks) == (
        f"{final['choice']}) {final['answer']}")

    fb = json.dumps({"decision_id": extra["decision_id"], "gold": "A"})
    h, out = _curl("-H", "content-type: application/json", "-d", fb, live.url + "/v1/feedback")
    assert h[":status"] == "200" and json.loads(out)["decision_id"] == extra["decision_id"]
    h, out = _curl("-H", "content-type: application/json", "-d", '{"model": "kgwise"}',
                   live.url + "/v1/chat/completions")
    assert h[":status"] == "400" and json.loads(out)["error"]["param"] == "messages"


class OwnDecisionError(KgwiseError):
    """A pipeline's own 'not pending' error class."""


def test_pipeline_error_classes_are_configurable(fake_pipeline: Any, serve_pipelines: Any) -> None:
    class Pipeline(fake_pipeline):
        def feedback(self, decision_id: str, correct: bool | None = None, gold: str | None = None) -> Any:
            raise OwnDecisionError(f"no decision {decision_id!r} is pending")

    body = {"decision_id": "d1", "correct": True}
    with serve_pipelines({"kgwise": Pipeline()}) as url:  # not named: a plain 400
        assert _error(httpx.post(url + "/v1/feedback", json=body), 400)["code"] == "invalid_request"
    hub = PipelineHub({"kgwise": Pipeline()}, unknown_decision=(OwnDecisionError,))
    with serve_pipelines({}, app=create_app(ServerSettings(), pipelines=hub)) as url:
        assert _error(httpx.post(url + "/v1/feedback", json=body), 404)["code"] == "decision_not_found"


def test_real_pipeline_cost_is_the_arm_price_and_the_answer_spends_it(live: Any) -> None:
    """An answer is paid when it is made (a client may never send feedback); feedback only teaches."""
    from kgwise.server.pipeline_adapter import ServedPipeline

    if not isinstance(live.pipeline, ServedPipeline):
        pytest.skip("FakePipeline prices its arms itself; this checks the real pipeline's config prices")
    per_call = {a.name: a.per_call for a in live.pipeline.pipeline.config.arms}

    def spent() -> float:
        return float(httpx.get(live.url + "/v1/status").json()["pipelines"][0]["spent"])

    for arm, price in per_call.items():
        before = spent()
        raw = _client(live.url).chat.completions.with_raw_response.create(model=f"kgwise/{arm}",
                                                                          messages=USER)
        extra = (raw.parse().model_extra or {})["kgwise"]
        assert extra["arm"] == arm and extra["usage"]["calls"] >= 1
        assert extra["cost"] == pytest.approx(price * extra["usage"]["calls"]) and extra["cost"] > 0
        assert float(raw.headers["x-kgwise-cost-usd"]) == pytest.approx(extra["cost"])
        answered = spent()
        assert answered == pytest.approx(before + extra["cost"])
        res = httpx.post(live.url + "/v1/feedback", json={"decision_id": extra["decision_id"], "gold": "A"})
        assert res.status_code == 200, res.text
        assert spent() == pytest.approx(answered)


# --- what a plain chat client sees --------------------------------------------------------------------
def test_an_ordinary_chat_client_sees_the_explained_answer_and_can_give_feedback(live: Any) -> None:
    client = _client(live.url)
    assert "kgwise:explain" in [m.id for m in client.models.list()]
    asks: list[dict[str, Any]] = [{"model": "kgwise:explain"},
                                  {"model": "kgwise", "extra_body": {"kgwise": {"explain": True}}}]
    for kwargs in asks:
        c = client.chat.completions.create(messages=USER, **kwargs)
        extra = (c.model_extra or {})["kgwise"]
        content = c.choices[0].message.content or ""
        assert content.startswith(f"**{extra['choice']}) {extra['answer']}**")
        assert f"decision `{extra['decision_id']}`" in content and f"Arm `{extra['arm']}`" in content
        assert f"cost {extra['cost']:.6g} {extra['cost_unit']}" in content
        if extra["answer_set"] is not None:
            assert f"Answer set at α = {extra['answer_set']['alpha']:g}" in content
        if extra["evidence"] is not None and (extra["evidence"]["paths"] or extra["evidence"]["triples"]):
            assert "Evidence:\n- " in content
            # the paths that support the answer come first, marked
            n = len(extra["evidence"]["support"])
            lines = content.split("Evidence:\n", 1)[1].splitlines()
            assert [x.endswith("(supports the answer)") for x in lines[:n + 1]] == [True] * n + [False]
    decision = extra["decision_id"]
    reply = client.chat.completions.create(model="kgwise", messages=[
        {"role": "user", "content": f"/feedback {decision} correct"}])
    assert reply.choices[0].message.content == (f"Thanks: decision `{decision}` recorded as right for arm "
                                                f"`{extra['arm']}`; the router has learnt it.")
    with pytest.raises(openai.NotFoundError):  # once per decision, as POST /v1/feedback
        client.chat.completions.create(model="kgwise", messages=[
            {"role": "user", "content": f"/feedback {decision} wrong"}])


def test_feedback_commands_are_read_exactly() -> None:
    from kgwise.server.explain import FeedbackCommand, feedback_command, split_explain

    assert feedback_command("/feedback abc123 correct") == FeedbackCommand("abc123", True, None)
    assert feedback_command("  /FEEDBACK abc WRONG ") == FeedbackCommand("abc", False, None)
    assert feedback_command("/feedback abc gold= Lisinopril ") == FeedbackCommand("abc", None, "Lisinopril")
    assert feedback_command("What is /feedback abc correct?") is None
    assert feedback_command("/feedback abc maybe") is None
    assert split_explain("kgwise/arm:explain") == ("kgwise/arm", True)
    assert split_explain("kgwise") == ("kgwise", False)


@pytest.mark.parametrize(("param", "value"), [
    ("tools", [{"type": "function", "function": {"name": "f", "parameters": {}}}]),
    ("tool_choice", "auto"), ("functions", [{"name": "f"}]), ("function_call", "auto"),
    ("logprobs", True), ("top_logprobs", 3), ("logit_bias", {"50256": -100}), ("audio", {"voice": "x"}),
    ("prediction", {"type": "content", "content": "x"}), ("presence_penalty", 0.5),
    ("frequency_penalty", -1.0), ("response_format", {"type": "json_object"}), ("modalities", ["audio"]),
    ("reasoning_effort", "high"), ("web_search_options", {}),
])
def test_an_openai_parameter_kgwise_cannot_honour_is_a_400_naming_it(live: Any, param: str, value: Any
                                                                     ) -> None:
    err = _error(httpx.post(live.url + "/v1/chat/completions",
                            json={"model": "kgwise", "messages": USER, param: value}), 400)
    assert err["param"] == param and err["code"] == "unsupported_parameter"
    assert err["message"].startswith(f"{param}: not supported: ")


def test_openai_parameters_at_their_neutral_values_are_accepted(live: Any) -> None:
    body = {"model": "kgwise", "messages": USER, "logprobs": False, "presence_penalty": 0,
            "frequency_penalty": 0, "response_format": {"type": "text"}, "modalities": ["text"],
            "user": "someone", "seed": 7, "tools": None}
    assert httpx.post(live.url + "/v1/chat/completions", json=body, timeout=120).status_code == 200
    for param, value in (("echo", True), ("best_of", 2), ("suffix", "x")):
        err = _error(httpx.post(live.url + "/v1/completions",
                                json={"model": "kgwise", "prompt": MESSAGE, param: value}), 400)
        assert err["param"] == param and err["code"] == "unsupported_parameter"
