"""The load driver of ``kgwise bench openai`` against a stub chat server on a real uvicorn (127.0.0.1):
counts, failures by status, percentiles, early stop."""

from __future__ import annotations

import itertools
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.responses import JSONResponse, StreamingResponse

from kgwise.errors import ConfigError
from kgwise.eval.bench.openai_serve import bench_chat_completions, percentile

STREAM_CPU_S = 0.02


def _burn_cpu(seconds: float) -> None:
    """Spend ``seconds`` of this thread's CPU time: a process CPU reading (10 ms ticks) cannot round to 0."""
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def _stub_chat_server(fail_every: int) -> FastAPI:
    """A stand-in for a kgwise server: every ``fail_every``-th timed request is a 503; a streamed answer
    spends ``STREAM_CPU_S`` of CPU."""
    app = FastAPI()
    calls = itertools.count()

    @app.post("/v1/chat/completions")
    async def chat(body: dict) -> object:
        n = next(calls)
        if fail_every and n >= 3 and n % fail_every == 0:  # the 3 warm-up requests always pass
            return JSONResponse({"error": {"message": "busy"}}, status_code=503)
        if body.get("stream"):
            _burn_cpu(STREAM_CPU_S)

            async def events() -> AsyncIterator[str]:
                yield 'data: {"choices": []}\n\n'
                yield "data: [DONE]\n\n"
            return StreamingResponse(events(), media_type="text/event-stream")
        return {"choices": [{"message": {"role": "assistant", "content": "A) Lisinopril"}}]}

    return app


@pytest.fixture
def stub_url() -> Iterator[str]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(_stub_chat_server(fail_every=5), host="127.0.0.1", port=port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def test_percentile_nearest_rank() -> None:
    values = [float(v) for v in range(1, 101)]
    assert percentile(values, 50) == 50 and percentile(values, 99) == 99 and percentile(values, 100) == 100
    assert percentile([7.0], 99) == 7.0
    with pytest.raises(ValueError):
        percentile([], 50)


def test_counts_failures_by_status_and_streams(stub_url: str) -> None:
    report = bench_chat_completions(stub_url, requests=50, concurrency=4, warmup=3)
    assert report.sent == 50 and report.ok + report.errors["503"] == 50 and report.errors["503"] == 10
    assert report.requests_per_s > 0 and 0 < report.latency_ms["p50"] <= report.latency_ms["p99"]
    assert report.targets["no errors"] is False
    assert report.server_cpu_ms_per_request is None
    streamed = bench_chat_completions(stub_url, requests=10, concurrency=2, warmup=0, stream=True,
                                      server_pid=os.getpid())  # the stub runs in this process
    assert streamed.stream and streamed.sent == 10
    # each answered stream spent 20 ms of CPU (per answered request; the reading's ticks are 10 ms)
    assert streamed.server_cpu_ms_per_request is not None
    assert streamed.server_cpu_ms_per_request >= STREAM_CPU_S * 1000 - 10


def test_bad_settings_and_unreachable_server() -> None:
    with pytest.raises(ConfigError):
        bench_chat_completions("http://127.0.0.1:9", requests=0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens there once closed
    with pytest.raises(ConfigError, match="warm-up request failed"):
        bench_chat_completions(f"http://127.0.0.1:{port}", requests=1, warmup=1, timeout_s=2)
