"""``OpenAICompatible``'s streamed generation (``on_text``), unit-tested against a test double of the
upstream: ``httpx.MockTransport`` answering with scripted server-sent events, so that what a real server
rarely does on demand (a dropped stream, no usage, a client leaving) is exact. The same path against
llama.cpp's real server is in ``test_llm_server.py`` and, through kgwise's server, ``tests/server``."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from kgwise.llm.base import Generation, LLMError, UsageError
from kgwise.llm.openai_compat import OpenAICompatible, OpenAIConfig
from kgwise.retry import RetryPolicy

USAGE = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}


def _chunk(content: str | None = None, finish: str | None = None, usage: dict[str, int] | None = None,
           choices: bool = True) -> dict[str, Any]:
    delta = {} if content is None else {"content": content}
    listed = [{"index": 0, "delta": delta, "finish_reason": finish}] if choices else []
    body: dict[str, Any] = {"object": "chat.completion.chunk", "choices": listed}
    if usage is not None:
        body["usage"] = usage
    return body


class ScriptedStreamDouble(httpx.SyncByteStream):
    """Test double of an upstream's event stream: yields ``events`` as ``data:`` lines (``None``: the
    connection breaks there); records how many it sent and whether the reader closed it."""

    def __init__(self, events: list[dict[str, Any] | None], done: bool = True) -> None:
        self.events = events
        self.done = done
        self.sent = 0
        self.closed = False

    def __iter__(self) -> Iterator[bytes]:
        for event in self.events:
            if event is None:
                raise httpx.ReadError("connection reset by the test double")
            self.sent += 1
            yield f"data: {json.dumps(event)}\n\n".encode()
        if self.done:
            yield b"data: [DONE]\n\n"

    def close(self) -> None:
        self.closed = True


class UpstreamDouble:
    """Test double of an OpenAI-compatible upstream: each request gets the next scripted reply (a status
    with its stream, or a plain JSON body); ``requests`` holds the payloads received."""

    def __init__(self, *replies: tuple[int, ScriptedStreamDouble | dict[str, Any]]) -> None:
        self.replies = list(replies)
        self.requests: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content))
        status, body = self.replies.pop(0)
        if isinstance(body, ScriptedStreamDouble):
            return httpx.Response(status, stream=body, headers={"content-type": "text/event-stream"})
        return httpx.Response(status, json=body)

    def backend(self) -> OpenAICompatible:
        client = httpx.Client(transport=httpx.MockTransport(self))
        return OpenAICompatible(OpenAIConfig(model="gpt-4o-mini", base_url="http://upstream.test/v1",
                                             api_key="none"),
                                retry=RetryPolicy(max_retries=2, base_delay_s=0.0, max_delay_s=0.0),
                                client=client)


def _ok(*pieces: str, usage: dict[str, int] | None = USAGE) -> ScriptedStreamDouble:
    events = [_chunk(p) for p in pieces] + [_chunk(finish="stop"), _chunk(usage=usage, choices=False)]
    return ScriptedStreamDouble([e for e in events if usage is not None or e.get("choices")])


def test_each_delta_reaches_on_text_and_the_usage_is_priced_as_unstreamed() -> None:
    up = UpstreamDouble((200, _ok("Dou", "ala", " city")),
                        (200, {"choices": [{"message": {"content": "Douala city"}, "finish_reason": "stop"}],
                               "usage": USAGE}))
    llm = up.backend()
    pieces: list[str] = []
    gen = llm.generate("Capital?", max_tokens=8, on_text=pieces.append)
    assert pieces == ["Dou", "ala", " city"] and isinstance(gen, Generation)
    assert (gen.text, gen.finish_reason, gen.attempts) == ("Douala city", "stop", 1)
    assert up.requests[0]["stream"] is True and up.requests[0]["stream_options"] == {"include_usage": True}
    whole = llm.generate("Capital?", max_tokens=8)
    assert "stream" not in up.requests[1]
    assert (gen.usage.input_tokens, gen.usage.output_tokens, gen.usage.calls) == (11, 3, 1)
    assert gen.usage.cost == whole.usage.cost > 0 and llm.streams_usage is True


def test_an_exception_from_on_text_stops_reading_and_closes_the_upstream() -> None:
    stream = _ok("one", "two", "three")
    up = UpstreamDouble((200, stream))

    class ClientGoneError(Exception):
        pass

    def leave(piece: str) -> None:
        raise ClientGoneError(piece)

    with pytest.raises(ClientGoneError, match="one"):
        up.backend().generate("Capital?", on_text=leave)
    assert stream.sent == 1 and stream.closed and len(up.requests) == 1  # not retried, nothing more read


def test_a_stream_without_usage_is_a_usage_error_and_later_replies_are_not_streamed() -> None:
    up = UpstreamDouble((200, _ok("a", "b", usage=None)),
                        (200, {"choices": [{"message": {"content": "ab"}, "finish_reason": "stop"}],
                               "usage": USAGE}))
    llm = up.backend()
    pieces: list[str] = []
    with pytest.raises(UsageError, match="reports no usage"):
        llm.generate("Capital?", on_text=pieces.append)
    assert pieces == ["a", "b"] and llm.streams_usage is False
    gen = llm.generate("Capital?", on_text=pieces.append)
    assert "stream" not in up.requests[1] and pieces[2:] == ["ab"] and gen.usage.output_tokens == 3


def test_a_failure_before_the_first_text_is_retried_and_one_after_it_is_final() -> None:
    broken_early = ScriptedStreamDouble([None])
    up = UpstreamDouble((503, {"error": "busy"}), (200, broken_early), (200, _ok("x", "y")))
    llm = up.backend()
    pieces: list[str] = []
    gen = llm.generate("Capital?", on_text=pieces.append)
    assert gen.text == "xy" and pieces == ["x", "y"] and gen.attempts == 3
    late = UpstreamDouble((200, ScriptedStreamDouble([_chunk("x"), None])), (200, _ok("x", "y")))
    seen: list[str] = []
    with pytest.raises(LLMError, match="broke after its first text") as err:
        late.backend().generate("Capital?", on_text=seen.append)
    assert not isinstance(err.value, UsageError) and seen == ["x"] and len(late.requests) == 1


@pytest.mark.parametrize(("event", "error"), [
    ({"error": {"message": "overloaded"}}, "sent an error"),
    (_chunk(choices=True) | {"choices": [{"index": 0, "delta": {"content": 5}}]}, "not text"),
])
def test_a_bad_event_is_named(event: dict[str, Any], error: str) -> None:
    up = UpstreamDouble((200, ScriptedStreamDouble([event])))
    pieces: list[str] = []
    with pytest.raises(LLMError, match=error):
        up.backend().generate("Capital?", on_text=pieces.append)
