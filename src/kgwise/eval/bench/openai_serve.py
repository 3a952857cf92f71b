"""``kgwise bench openai``: a bounded loopback load on a server's ``POST /v1/chat/completions``.

``concurrency`` clients send ``requests`` chat completions in all (each question made distinct by a
number), after ``warmup`` untimed ones, and stop early at ``max_s``; the report gives throughput, latency
percentiles (nearest rank) and every failure by HTTP status. The targets for a pipeline without
model time (replay arms): ≥ 100 requests/s at concurrency 8 and p99 ≤ 100 ms. With the server's process
id, the report adds the server's CPU time per answered request (user + system, from ``psutil``), a
figure that depends far less than throughput on what else the machine is running. Streamed, it also gives
the time to the first chunk with content (percentiles, ms): for a generated answer, how long before its
first token arrives, against the whole answer's latency.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from kgwise.errors import ConfigError
from kgwise.eval.bench.net import cpu_seconds
from kgwise.types import Serialisable

__all__ = ["TARGET_P99_MS", "TARGET_RPS", "ServeBenchReport", "bench_chat_completions", "percentile"]

TARGET_RPS = 100.0
TARGET_P99_MS = 100.0


def percentile(sorted_values: list[float], q: float) -> float:
    """The nearest-rank ``q``-th percentile (0 < q ≤ 100) of ascending ``sorted_values``."""
    if not sorted_values:
        raise ValueError("no values")
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]


@dataclass(frozen=True)
class ServeBenchReport(Serialisable):
    """One load run: ``ok`` answers of ``sent`` requests in ``wall_s``; ``errors`` by HTTP status (or the
    exception's name); latencies of the successful requests in ms."""

    url: str
    model: str
    stream: bool
    concurrency: int
    sent: int
    ok: int
    errors: dict[str, int]
    wall_s: float
    requests_per_s: float
    latency_ms: dict[str, float]
    targets: dict[str, bool] = field(default_factory=dict)
    server_cpu_ms_per_request: float | None = None
    first_content_ms: dict[str, float] = field(default_factory=dict)
    """Streamed: from sending to the first chunk with content, over the successful requests."""


async def _one(client: httpx.AsyncClient, body: dict[str, Any], stream: bool
               ) -> tuple[str | None, float | None]:
    """Send one request: ``None`` when it succeeded, else what failed (status or exception name); and,
    streamed, the seconds until the first chunk with content."""
    start = time.perf_counter()
    try:
        if stream:
            async with client.stream("POST", "/v1/chat/completions", json=body) as res:
                if res.status_code != 200:
                    await res.aread()
                    return str(res.status_code), None
                done, first = False, None
                async for line in res.aiter_lines():
                    done = done or line == "data: [DONE]"
                    if first is None and line.startswith("data: {") and _has_content(line[6:]):
                        first = time.perf_counter() - start
                return (None, first) if done else ("no [DONE]", None)
        res = await client.post("/v1/chat/completions", json=body)
        if res.status_code != 200:
            return str(res.status_code), None
        content = res.json()["choices"][0]["message"]["content"]
        return (None, None) if isinstance(content, str) and content else ("empty content", None)
    except (httpx.HTTPError, ValueError, KeyError, IndexError) as exc:
        return type(exc).__name__, None


def _has_content(event: str) -> bool:
    """Whether a chat.completion.chunk carries text."""
    choices = json.loads(event).get("choices") or [{}]
    return bool((choices[0].get("delta") or {}).get("content"))


async def _run(url: str, model: str, question: str, choices: list[str] | None, requests: int,
               concurrency: int, warmup: int, stream: bool, max_s: float, api_key: str | None,
               timeout_s: float, server_pid: int | None) -> ServeBenchReport:
    headers = {"authorization": f"Bearer {api_key}"} if api_key else {}
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)

    def body(i: int) -> dict[str, Any]:
        b: dict[str, Any] = {"model": model, "stream": stream,
                             "messages": [{"role": "user", "content": f"{question} (#{i})"}]}
        if choices:
            b["kgwise"] = {"choices": choices}
        return b

    async with httpx.AsyncClient(base_url=url, headers=headers, limits=limits, timeout=timeout_s) as client:
        for i in range(warmup):
            failure, _ = await _one(client, body(-1 - i), stream)
            if failure is not None:
                raise ConfigError(f"{url}: the warm-up request failed ({failure}); is it a kgwise server "
                                  f"serving model {model!r}?")
        latencies: list[float] = []
        firsts: list[float] = []
        errors: dict[str, int] = {}
        counter = iter(range(requests))
        cpu0 = None if server_pid is None else cpu_seconds(server_pid)
        t0 = time.perf_counter()
        deadline = t0 + max_s

        async def worker() -> None:
            for i in counter:
                if time.perf_counter() > deadline:
                    return
                start = time.perf_counter()
                failure, first = await _one(client, body(i), stream)
                if failure is None:
                    latencies.append((time.perf_counter() - start) * 1000)
                    if first is not None:
                        firsts.append(first * 1000)
                else:
                    errors[failure] = errors.get(failure, 0) + 1

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - t0
        cpu1 = None if server_pid is None else cpu_seconds(server_pid)
    sent = len(latencies) + sum(errors.values())
    lat = _summary(latencies)
    rps = len(latencies) / wall if wall > 0 else 0.0
    targets = {f"requests_per_s >= {TARGET_RPS:g}": rps >= TARGET_RPS,
               f"p99_ms <= {TARGET_P99_MS:g}": bool(lat) and lat["p99"] <= TARGET_P99_MS,
               "no errors": not errors}
    return ServeBenchReport(url=url, model=model, stream=stream, concurrency=concurrency, sent=sent,
                            ok=len(latencies), errors=errors, wall_s=wall, requests_per_s=rps,
                            latency_ms=lat, targets=targets, first_content_ms=_summary(firsts),
                            server_cpu_ms_per_request=None if cpu0 is None or cpu1 is None or not latencies
                            else (cpu1 - cpu0) * 1000 / len(latencies))


def _summary(values_ms: list[float]) -> dict[str, float]:
    """Mean, p50, p90, p99 and max of ``values_ms`` (empty without values)."""
    v = sorted(values_ms)
    return {} if not v else {"mean": sum(v) / len(v), "p50": percentile(v, 50), "p90": percentile(v, 90),
                             "p99": percentile(v, 99), "max": v[-1]}


def bench_chat_completions(url: str, model: str = "kgwise", *, requests: int = 2000, concurrency: int = 8,
                           warmup: int = 20, stream: bool = False, max_s: float = 120.0,
                           question: str = "Which drug is used to treat hypertension?",
                           choices: list[str] | None = None, api_key: str | None = None,
                           timeout_s: float = 30.0, server_pid: int | None = None) -> ServeBenchReport:
    """Load ``url``'s ``/v1/chat/completions`` (see the module doc); ``choices`` default to four drugs
    (``[]``: open questions); ``server_pid``: the server's process, for its CPU time per request."""
    if requests < 1 or concurrency < 1 or warmup < 0 or max_s <= 0:
        raise ConfigError("requests and concurrency must be ≥ 1, warmup ≥ 0 and max_s > 0")
    if choices is None:
        choices = ["Lisinopril", "Insulin", "Penicillin", "Levothyroxine"]
    return asyncio.run(_run(url.rstrip("/"), model, question, choices or None, requests, concurrency,
                            warmup, stream, max_s, api_key, timeout_s, server_pid))
