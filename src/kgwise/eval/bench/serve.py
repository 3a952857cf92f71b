"""``kgwise bench serve``: a bounded load on a real ``kgwise serve`` over loopback.

The benchmark starts the server itself (``kgwise serve --config`` over a one-arm pipeline: KnowGPT's
injection with the local LLM over the graph; a child process on 127.0.0.1, a free port, with its own empty
cache folder, so no answer or embedding comes from an earlier run), so it can read the server's resident
memory; then, per endpoint and concurrency, it sends a fixed number of requests (and stops early at a time
limit): ``/v1/evidence`` (grounding and P_sub, no LLM call); ``/v1/chat/completions`` answered by the
local LLM, while ``/health`` is polled to time it under full answer load. Each phase reports throughput,
p50/p99 latency, the status codes, transport errors, the server's RSS before and after, and what a client
refused for load got (status, ``Retry-After``, message).

:func:`run_chat_benchmark` does the same for ``POST /v1/chat/completions`` on a second server, ``kgwise
serve --config`` over a pipeline whose arms replay recorded answers (no model time): the cost of the
OpenAI-compatible door, grounding, routing and recording per question; the targets are ≥ 100
requests/s at concurrency 8 and p99 ≤ 100 ms. The same pipeline has three external arms
(:data:`EXTERNAL_ARMS`): on it, ``/v1/route`` + ``/v1/route/feedback`` pairs (feedback cost = the bound the
decision holds) time external routing through the pipeline's router, budget and journal.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from kgwise.errors import ConfigError
from kgwise.eval.bench.net import free_port, rss_mb, stop_process
from kgwise.llm.local_models import DEFAULT_LLM

__all__ = ["EXTERNAL_ARMS", "REPLAY_ARMS", "PhaseResult", "ServeBenchConfig", "run_chat_benchmark",
           "run_serve_benchmark"]


@dataclass(frozen=True)
class ServeBenchConfig:
    """What to load: ``requests`` per concurrency for ``/v1/evidence``, ``answer_requests`` per
    concurrency for answers by the LLM; each phase stops issuing at ``phase_s``; ``queue``: the server's
    ``--queue``."""

    concurrency: tuple[int, ...] = (1, 8, 32)
    requests: int = 1000
    answer_requests: int = 16
    phase_s: float = 120.0
    questions: int = 300
    queue: int = 4
    llm: str = DEFAULT_LLM
    chat_requests: int = 1000


@dataclass
class PhaseResult:
    """One (endpoint, concurrency) phase; latencies in ms; ``units``: requests."""

    endpoint: str
    concurrency: int
    units: int
    seconds: float
    throughput_per_s: float
    p50_ms: float
    p99_ms: float
    statuses: dict[str, int]
    transport_errors: dict[str, int]
    server_5xx: int
    rss_before_mb: float
    rss_after_mb: float
    over_queue: dict[str, Any] | None = None
    health: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)



def _percentile(values: Sequence[float], q: float) -> float:
    return round(float(np.percentile(values, q)), 2) if values else float("nan")


One = Callable[[int], Awaitable[tuple[int, float]]]


async def _drive(n: int, concurrency: int, deadline: float, one: One
                 ) -> tuple[list[int], list[float], Counter[str], float]:
    """Run ``one(i)`` for i < n with ``concurrency`` workers until done or ``deadline``: statuses,
    latencies (s), transport errors by kind, wall time."""
    statuses: list[int] = []
    latencies: list[float] = []
    errors: Counter[str] = Counter()
    counter = iter(range(n))
    t0 = time.perf_counter()

    async def worker() -> None:
        for i in counter:
            if time.monotonic() > deadline:
                return
            try:
                status, took = await one(i)
            except Exception as exc:  # a refused or reset connection: counted by kind, not fatal
                errors[type(exc).__name__] += 1
                continue
            statuses.append(status)
            latencies.append(took)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return statuses, latencies, errors, time.perf_counter() - t0


class _Server:
    """``kgwise serve`` in a child process on 127.0.0.1."""

    def __init__(self, args: list[str], log: Path, cache: Path) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self._log = log.open("w")
        self.proc = subprocess.Popen([sys.executable, "-m", "kgwise", "serve", *args, "--port",
                                      str(self.port)], stdout=self._log, stderr=subprocess.STDOUT,
                                     env={**os.environ, "KGWISE_CACHE": str(cache)})

    def wait_ready(self, timeout_s: float = 180.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ConfigError(f"the server exited with {self.proc.returncode}; see {self._log.name}")
            try:
                if httpx.get(self.base + "/health", timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        raise ConfigError(f"the server did not answer /health within {timeout_s:g} s")

    def client(self, cfg: ServeBenchConfig) -> Any:
        """An HTTP client of this server, with a connection for each concurrent request ``cfg`` makes."""
        import httpx

        most = max(cfg.concurrency) + 4
        limits = httpx.Limits(max_connections=most, max_keepalive_connections=most)
        return httpx.AsyncClient(base_url=self.base, limits=limits, timeout=300)

    def rss(self) -> float:
        return round(rss_mb(self.proc.pid), 1)

    def stop(self) -> None:
        stop_process(self.proc)
        self._log.close()


def _phase(endpoint: str, conc: int, server: _Server, before: float, statuses: list[int],
           latencies: list[float], errors: Counter[str], wall: float) -> PhaseResult:
    counts = Counter(statuses)
    return PhaseResult(endpoint, conc, len(statuses), round(wall, 2), round(len(statuses) / wall, 1),
                       _percentile([x * 1000 for x in latencies], 50),
                       _percentile([x * 1000 for x in latencies], 99),
                       {str(k): v for k, v in sorted(counts.items())}, dict(errors),
                       sum(v for k, v in counts.items() if k >= 500), before, server.rss())


def run_serve_benchmark(kg: Path, questions: Sequence[tuple[str, list[str]]], cfg: ServeBenchConfig,
                        workdir: Path | None = None,
                        progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Start ``kgwise serve --config`` over a one-arm pipeline on ``kg`` (a graph file) answering with the
    local LLM, load it as :class:`ServeBenchConfig` says, stop it; the report (phases, RSS, settings,
    machine load)."""
    if not questions:
        raise ConfigError("bench serve needs questions")
    work = workdir or Path(tempfile.mkdtemp(prefix="kgwise-bench-serve-"))
    work.mkdir(parents=True, exist_ok=True)
    config = work / "one-arm.toml"
    config.write_text(f'[kg]\ngraph = {json.dumps(str(kg.resolve()))}\n\n[[arms]]\nname = "knowgpt"\n'
                      f'kind = "inject"\nspec = {json.dumps(cfg.llm)}\nprice = 0\n\n[router]\n'
                      'budget_calls = 1000000000\n', encoding="utf-8")
    server = _Server(["--config", str(config), "--state", str(work / "state"), "--queue", str(cfg.queue)],
                     work / "server.log", work / "cache")
    try:
        server.wait_ready()
        return asyncio.run(_bench(server, questions[: cfg.questions], cfg, progress)) | {
            "settings": asdict(cfg), "kg": str(kg), "load_average": os.getloadavg(), "cpus": os.cpu_count()}
    finally:
        server.stop()


async def _phases(out: dict[str, Any], server: _Server, path: str, one: One, n: int, cfg: ServeBenchConfig,
                  progress: Callable[[str], None]) -> None:
    """``n`` requests of ``one`` at each of ``cfg.concurrency``: a phase of ``out`` each."""
    for conc in cfg.concurrency:
        before = server.rss()
        res = await _drive(n, conc, time.monotonic() + cfg.phase_s, one)
        out["phases"].append(asdict(_phase(path, conc, server, before, *res)))
        last = out["phases"][-1]
        progress(f"{path} at concurrency {conc}: {last['throughput_per_s']}/s, p99 {last['p99_ms']} ms")


async def _bench(server: _Server, questions: Sequence[tuple[str, list[str]]], cfg: ServeBenchConfig,
                 progress: Callable[[str], None]) -> dict[str, Any]:
    out: dict[str, Any] = {"rss_start_mb": server.rss(), "phases": []}
    async with server.client(cfg) as client:

        async def evidence(i: int) -> tuple[int, float]:
            q, choices = questions[i % len(questions)]
            t0 = time.perf_counter()
            res = await client.post("/v1/evidence", json={"question": q, "choices": choices})
            return res.status_code, time.perf_counter() - t0

        progress("warm-up: grounding every question once")
        await _drive(len(questions), 2, time.monotonic() + 600, evidence)
        await _phases(out, server, "/v1/evidence", evidence, cfg.requests, cfg, progress)
        out["rss_after_evidence_mb"] = server.rss()
        for conc in cfg.concurrency:
            n = cfg.answer_requests if conc > 1 else max(2, cfg.answer_requests // 8)
            phase = await _answer_phase(client, server, questions, conc, n, cfg.phase_s)
            out["phases"].append(asdict(phase))
            progress(f"{ANSWER} at concurrency {conc}: {phase.throughput_per_s}/s, /health p99 "
                     f"{phase.health['p99_ms'] if phase.health else None} ms")
        out["health_at_end"] = (await client.get("/health")).json().get("load")
    out["rss_end_mb"] = server.rss()
    out["requests_sent"] = sum(p["units"] for p in out["phases"])
    return out


ANSWER = "/v1/chat/completions"
"""The endpoint of the answer phases (the one-arm pipeline's LLM answers)."""


async def _answer_phase(client: Any, server: _Server, questions: Sequence[tuple[str, list[str]]], conc: int,
                        n: int, phase_s: float) -> PhaseResult:
    """``n`` answers at concurrency ``conc`` while ``/health`` is polled every 50 ms."""
    import httpx

    over: dict[str, Any] = {}
    health_lat: list[float] = []
    health_status: Counter[int] = Counter()
    stop = asyncio.Event()

    async def answer(i: int) -> tuple[int, float]:
        q, choices = questions[i % len(questions)]
        t0 = time.perf_counter()
        res = await client.post(ANSWER, json={"model": "kgwise", "messages": [{"role": "user", "content": q}],
                                              "kgwise": {"choices": choices}})
        took = time.perf_counter() - t0
        if res.status_code in (429, 503) and not over:
            over.update(status=res.status_code, retry_after=res.headers.get("retry-after"),
                        detail=res.text[:500], ms=round(took * 1000, 1))
        return int(res.status_code), took

    async def poll_health() -> None:
        while not stop.is_set():
            t0 = time.perf_counter()
            try:
                res = await client.get("/health")
                health_status[res.status_code] += 1
                health_lat.append(time.perf_counter() - t0)
            except httpx.HTTPError:
                health_status[0] += 1
            await asyncio.sleep(0.05)

    before = server.rss()
    poller = asyncio.create_task(poll_health())
    res = await _drive(n, conc, time.monotonic() + phase_s, answer)
    stop.set()
    await poller
    phase = _phase(ANSWER, conc, server, before, *res)
    phase.over_queue = over or None
    ms = [x * 1000 for x in health_lat]
    phase.health = {"polls": len(ms), "p50_ms": _percentile(ms, 50), "p99_ms": _percentile(ms, 99),
                    "max_ms": round(max(ms, default=0.0), 2),
                    "statuses": {str(k): v for k, v in health_status.items()}}
    return phase


# two recordings that cover every WebQSP question (train and test), at their list prices
REPLAY_ARMS = (("chatgpt", "replay:chatgpt"), ("davinci-003", "replay:text-davinci-003"))
# external arms (the caller runs them): name, cluster, price (the cost bound a decision holds)
EXTERNAL_ARMS = (("gnn", "KGM", 0.0), ("small", "LLM", 0.01), ("big", "LLM", 0.1))


def _write_replay_config(path: Path, kg: Path) -> None:
    """A pipeline over ``kg`` whose arms replay recorded answers, beside :data:`EXTERNAL_ARMS`, with a budget
    no load here can spend."""
    arms = "".join(f'\n[[arms]]\nname = "{name}"\nkind = "llm"\nspec = "{spec}"\ncluster = "LLM"\n'
                   for name, spec in REPLAY_ARMS)
    arms += "".join(f'\n[[arms]]\nname = "{name}"\nkind = "external"\ncluster = "{cluster}"\n'
                    f'price = {price}\n' for name, cluster, price in EXTERNAL_ARMS)
    path.write_text(f'[kg]\ngraph = {json.dumps(str(kg.resolve()))}\n{arms}\n[router]\nbudget_usd = 1e9\n',
                    encoding="utf-8")


def run_chat_benchmark(kg: Path, questions: Sequence[str], cfg: ServeBenchConfig, workdir: Path | None = None,
                       progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Start ``kgwise serve --config`` over a replay pipeline (:data:`REPLAY_ARMS`, graph ``kg``), send
    ``cfg.chat_requests`` chat completions per concurrency level of ``questions`` (recorded ones: WebQSP's)
    after a warm-up pass over them (embeddings cached), stop it; the report."""
    if not questions:
        raise ConfigError("bench serve's chat phase needs questions")
    work = workdir or Path(tempfile.mkdtemp(prefix="kgwise-bench-chat-"))
    work.mkdir(parents=True, exist_ok=True)
    config = work / "replay.toml"
    _write_replay_config(config, kg)
    server = _Server(["--config", str(config), "--state", str(work / "chat-state")], work / "chat-server.log",
                     work / "chat-cache")
    try:
        server.wait_ready()
        return asyncio.run(_chat(server, questions[: cfg.questions], cfg, progress)) | {
            "arms": dict(REPLAY_ARMS), "load_average": os.getloadavg(), "cpus": os.cpu_count()}
    finally:
        server.stop()


async def _chat(server: _Server, questions: Sequence[str], cfg: ServeBenchConfig,
                progress: Callable[[str], None]) -> dict[str, Any]:
    out: dict[str, Any] = {"rss_start_mb": server.rss(), "phases": []}
    async with server.client(cfg) as client:

        async def chat(i: int) -> tuple[int, float]:
            text = questions[i % len(questions)]
            body = {"model": "kgwise", "messages": [{"role": "user", "content": text}]}
            t0 = time.perf_counter()
            res = await client.post("/v1/chat/completions", json=body)
            took = time.perf_counter() - t0
            if res.status_code == 200 and not res.json()["choices"][0]["message"]["content"]:
                return 298, took  # an empty answer counts as a failure
            return res.status_code, took

        async def pair(i: int) -> tuple[int, float]:
            t0 = time.perf_counter()
            res = await client.post("/v1/route", json={"question": questions[i % len(questions)]})
            if res.status_code != 200:
                return res.status_code, time.perf_counter() - t0
            d = res.json()
            fb = await client.post("/v1/route/feedback", json={"decision": d["decision"], "reward": i % 2,
                                                                "cost": d["bound"]})
            return fb.status_code, time.perf_counter() - t0

        progress("warm-up: one chat completion per question (embeddings cached)")
        await _drive(len(questions), 2, time.monotonic() + 600, chat)
        await _phases(out, server, "/v1/chat/completions", chat, cfg.chat_requests, cfg, progress)
        # external routing on the same pipeline (its router and budget)
        await _phases(out, server, "/v1/route+feedback", pair, cfg.requests, cfg, progress)
    out["rss_end_mb"] = server.rss()
    return out
