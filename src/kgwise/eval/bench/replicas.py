"""``kgwise bench serve --replicas K``: several ``kgwise serve --config`` processes on 127.0.0.1 over one
PostgreSQL (started here, :class:`kgwise.eval.bench.postgres.LocalPostgres`), the pipeline's arms
replaying recorded answers (:data:`kgwise.eval.bench.serve.REPLAY_ARMS`: no model time, so the load is
about the state).

Phases, each on a fresh database:

* ``budget`` — ``K`` replicas, a budget of ``budget_calls`` calls (every answer costs one call), ``requests``
  chat completions at ``concurrency`` spread round-robin over the replicas, feedback on each answered one
  through another replica; once half the budget's worth of requests were sent one replica is killed with
  SIGKILL (its requests then fail, counted), at the end all are. A fresh reader then checks that the
  spend is ≤ the budget, that every answer a client got (HTTP 200) is a decision in the database, and
  every acknowledged feedback a settled one;
* ``throughput`` — ``K`` replicas on one database with a budget no load here spends, each warmed up (every
  question's embedding cached); then ``rounds`` rounds, each sending chat completions for
  ``throughput_s`` seconds at ``concurrency`` to the first 1, 2, … ``K`` replicas in turn (interleaved, so
  that every count meets the same machine load) with ``wrk`` (:mod:`kgwise.eval.bench.wrk`: one thread per
  replica, the questions in turn): answers/s, p50/p99, and the CPU seconds per answer of the client (wrk
  and this process), the replicas and PostgreSQL, read from ``/proc`` and ``getrusage``; the ratios k / 1
  per round and their median. The client runs at ``client_nice`` above the replicas' niceness (it shares
  the 2 cores with them);
* ``overhead`` — one replica on the state folder and one on PostgreSQL, answering ``requests // 4``
  questions one at a time (concurrency 1), in turn for ``rounds`` rounds: the median ms per answer of
  each, their difference per round and its median; and the state alone, in this process: ``requests //
  4`` routing decisions with their record (select, pay, keep the decision; 384-d contexts), alternating
  between the two backends decision by decision, the median ms of each and their difference.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import suppress
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from kgwise.errors import ConfigError
from kgwise.eval.bench.net import cpu_seconds
from kgwise.eval.bench.postgres import LocalPostgres
from kgwise.eval.bench.serve import _drive, _percentile, _Server, _write_replay_config
from kgwise.eval.bench.wrk import require_wrk, wrk_pass

__all__ = ["ReplicaBenchConfig", "run_replica_benchmark"]


@dataclass(frozen=True)
class ReplicaBenchConfig:
    """``replicas``: K; ``requests`` chat completions of the budget phase (a quarter of them per overhead
    round) at ``concurrency``; ``budget_calls``: the budget phase's budget; ``questions``: distinct recorded
    questions sent; ``phase_s``: time limit; ``throughput_s``: the length of each throughput pass."""

    replicas: int = 3
    requests: int = 1000
    concurrency: int = 8
    budget_calls: int = 100
    questions: int = 200
    phase_s: float = 300.0
    seed: int = 0
    rounds: int = 3
    client_nice: int = 5
    throughput_s: float = 5.0


def _config(work: Path, kg: Path, name: str, budget: str, url: str | None) -> Path:
    path = work / f"{name}.toml"
    _write_replay_config(path, kg)
    text = path.read_text(encoding="utf-8").replace("budget_usd = 1e9", budget)
    if url is not None:
        text += f'\n[state]\nurl = "{url}"\ntimeout_s = 5\n'
    path.write_text(text, encoding="utf-8")
    return path


def _start(config: Path, work: Path, name: str, k: int) -> list[_Server]:
    servers = [_Server(["--config", str(config), "--state", str(work / f"{name}-state-{i}"),
                        "--no-access-log"], work / f"{name}-{i}.log", work / f"cache-{i}") for i in range(k)]
    try:
        for s in servers:
            s.wait_ready()
    except BaseException:
        for s in servers:
            s.stop()
        raise
    return servers


def _kill(server: _Server) -> None:
    if server.proc.poll() is None:
        server.proc.kill()  # SIGKILL: no shutdown, no flush
        server.proc.wait(timeout=30)


REPLY_TIMEOUT_S = 120.0
"""How long the load generator waits for one reply (as the httpx client it replaces did)."""


class _Client:
    """The load generator's HTTP/1.1 client: JSON POSTs on keep-alive connections to 127.0.0.1, and
    nothing else (the servers answer with a Content-Length). It shares the 2 cores with the replicas it
    measures: httpx took 1.3–1.9 ms of CPU per answer (17 % of all the CPU a measurement used), this
    0.3 ms. A failure raises ``OSError`` (a refused or reset connection, a timeout, a reply without a
    length) or ``asyncio.IncompleteReadError``, counted by the caller as a transport error."""

    def __init__(self) -> None:
        self._idle: dict[str, list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]] = {}

    async def post(self, base: str, path: str, body: dict[str, Any]) -> tuple[int, bytes]:
        """``(status, body)`` of ``POST base+path`` with ``body`` as JSON (``base``: http://host:port); a
        reply that takes over :data:`REPLY_TIMEOUT_S` raises ``TimeoutError``, one without a Content-Length
        ``ConnectionError`` (its body would be left on the connection)."""
        host, _, port = base.removeprefix("http://").partition(":")
        data = json.dumps(body).encode()
        head = (f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n\r\n").encode()
        idle = self._idle.setdefault(base, [])
        reused = bool(idle)
        reader, writer = idle.pop() if reused else await asyncio.open_connection(host, int(port))
        try:
            async with asyncio.timeout(REPLY_TIMEOUT_S):
                writer.write(head + data)
                try:
                    line = await reader.readline()
                except (ConnectionResetError, BrokenPipeError):
                    if not reused:
                        raise
                    line = b""
                if not line and reused:  # the server closed the idle connection (keep-alive timeout): anew
                    writer.close()
                    reader, writer = await asyncio.open_connection(host, int(port))
                    writer.write(head + data)
                    line = await reader.readline()
                if not line:
                    raise ConnectionResetError(f"{base} closed the connection before answering")
                status, length, close = int(line.split(b" ", 2)[1]), None, False
                while (header := await reader.readline()) not in (b"\r\n", b""):
                    name, _, value = header.partition(b":")
                    name = name.strip().lower()
                    if name == b"content-length":
                        length = int(value)
                    elif name == b"connection":
                        close = value.strip().lower() == b"close"
                if length is None:
                    raise ConnectionError(f"{base}{path} answered without a Content-Length (chunked replies "
                                          "are not read)")
                payload = await reader.readexactly(length)
        except BaseException:
            writer.close()
            raise
        if close:
            writer.close()
        else:
            idle.append((reader, writer))
        return status, payload

    def close(self) -> None:
        for conns in self._idle.values():
            for _, writer in conns:
                writer.close()
        self._idle.clear()


def _chat_body(text: str) -> dict[str, Any]:
    """A chat completion request asking ``text`` of the served pipeline."""
    return {"model": "kgwise", "messages": [{"role": "user", "content": text}]}


async def _load(servers: Sequence[_Server], questions: Sequence[str], n: int, concurrency: int,
                deadline: float, feedback: bool, kill_at: int | None = None) -> dict[str, Any]:
    """``n`` chat completions over ``servers`` round-robin (with ``feedback``: each answered one's
    feedback through the next replica); SIGKILL of ``servers[0]`` once ``kill_at`` were sent."""
    acked: list[str] = []
    fed: list[str] = []
    feedback_status: Counter[int] = Counter()
    sent = [0]
    client = _Client()

    async def one(i: int) -> tuple[int, float]:
        sent[0] += 1
        if kill_at is not None and sent[0] == kill_at:
            await asyncio.to_thread(_kill, servers[0])
        server = servers[i % len(servers)]
        text = questions[i % len(questions)]
        t0 = time.perf_counter()
        status, body = await client.post(server.base, "/v1/chat/completions", _chat_body(text))
        took = time.perf_counter() - t0
        if status == 200:
            decision = json.loads(body)["kgwise"]["decision_id"]
            acked.append(decision)
            if feedback:
                other = servers[(i + 1) % len(servers)]
                try:
                    fb, _ = await client.post(other.base, "/v1/feedback",
                                              {"decision_id": decision, "correct": i % 3 != 0})
                    feedback_status[fb] += 1
                    if fb == 200:
                        fed.append(decision)
                except (OSError, asyncio.IncompleteReadError):
                    feedback_status[0] += 1
        return status, took

    try:
        statuses, latencies, errors, wall = await _drive(n, concurrency, deadline, one)
    finally:
        client.close()
    counts = Counter(statuses)
    return {"requests": len(statuses) + sum(errors.values()), "seconds": round(wall, 2),
            "answers_per_s": round(counts.get(200, 0) / wall, 1),
            "p50_ms": _percentile([x * 1000 for x in latencies], 50),
            "p99_ms": _percentile([x * 1000 for x in latencies], 99),
            "statuses": {str(k): v for k, v in sorted(counts.items())}, "transport_errors": dict(errors),
            "feedback_statuses": {str(k): v for k, v in sorted(feedback_status.items())},
            "_acked": acked, "_fed": fed}


def _state_alone(config: Path, work: Path, url: str, n: int) -> dict[str, float]:
    """Median ms of ``select`` + ``record`` (+ ``sync``) on the folder and on PostgreSQL, in-process,
    alternating decision by decision."""
    import statistics

    import numpy as np

    from kgwise.app.config import PipelineConfig
    from kgwise.app.state import Pending, StateDir
    from kgwise.app.state_pg import PgState

    cfg = PipelineConfig.load(config)
    rng = np.random.default_rng(0)
    costs = {a.name: 1.0 for a in cfg.arms}
    states: dict[str, StateDir | PgState] = {"folder": StateDir(work / "alone-folder", cfg, 384),
              "postgresql": PgState(url, work / "alone-pg", cfg, 384)}
    times: dict[str, list[float]] = {name: [] for name in states}
    try:
        for i in range(n):
            x = rng.normal(size=384).tolist()
            for name, state in states.items():
                t = time.perf_counter()
                arm = state.select(f"d{i}", x, costs)
                assert arm is not None
                state.record(Pending(f"d{i}", "q", ["a", "b"], arm, 1.0, 1.0, x, "A", ["A"]))
                state.sync()
                times[name].append(time.perf_counter() - t)
    finally:
        for state in states.values():
            state.close()
    out = {f"state_median_ms_{name}": round(statistics.median(t) * 1000, 3) for name, t in times.items()}
    out["state_postgresql_minus_folder_ms"] = round(out["state_median_ms_postgresql"]
                                                     - out["state_median_ms_folder"], 3)
    return out


def _verify(config: Path, work: Path, acked: Sequence[str], fed: Sequence[str]) -> dict[str, Any]:
    """Open the database as a fresh replica would: the spend and which acknowledged work it holds."""
    from kgwise.app import Pipeline

    with Pipeline.from_config(config, work / "verify-state", models=False) as pipe:
        st = pipe.status()
        pending, settled = set(pipe.state.pending), set(pipe.state.settled)
    return {"spent": st.spent, "reserved": st.reserved, "budget": st.budget, "questions": st.questions,
            "answers_acknowledged": len(acked), "feedback_acknowledged": len(fed),
            "answers_missing": sum(1 for d in acked if d not in pending and d not in settled),
            "feedback_missing": sum(1 for d in fed if d not in settled),
            "spend_within_budget": st.spent <= st.budget + 1e-9}


def run_replica_benchmark(kg: Path, questions: Sequence[str], cfg: ReplicaBenchConfig,
                          workdir: Path | None = None, progress: Callable[[str], None] = lambda _: None
                          ) -> dict[str, Any]:
    """The three phases of the module docstring; the report (with the machine's load and CPUs)."""
    if cfg.replicas < 1:
        raise ConfigError(f"--replicas must be ≥ 1, got {cfg.replicas}")
    if not questions:
        raise ConfigError("bench serve --replicas needs recorded questions")
    require_wrk()  # before anything starts: the throughput phase cannot run without it
    qs = list(questions)
    random.Random(cfg.seed).shuffle(qs)
    qs = qs[: cfg.questions]
    work = workdir or Path(tempfile.mkdtemp(prefix="kgwise-bench-replicas-"))
    work.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"settings": asdict(cfg), "kg": str(kg), "cpus": os.cpu_count(),
                              "load_average_start": os.getloadavg()}
    with LocalPostgres() as pg:
        progress(f"PostgreSQL on 127.0.0.1:{pg.port}")
        # budget: K replicas share budget_calls calls; one killed half-way, then all
        url = pg.create_database("budget")
        config = _config(work, kg, "budget", f"budget_calls = {cfg.budget_calls}", url)
        servers = _start(config, work, "budget", cfg.replicas)
        try:
            progress(f"budget phase: {cfg.requests} chat completions over {cfg.replicas} replicas, budget "
                     f"{cfg.budget_calls} calls")
            # killed while the budget is being spent: half-way to it (every answer costs one call)
            kill_at = max(1, min(cfg.requests, cfg.budget_calls) // 2) if cfg.replicas > 1 else None
            res = asyncio.run(_load(servers, qs, cfg.requests, cfg.concurrency,
                                    time.monotonic() + cfg.phase_s, True, kill_at))
        finally:
            for s in servers:
                _kill(s)
                s.stop()
        acked, fed = res.pop("_acked"), res.pop("_fed")
        report["budget"] = {**res, "killed": f"replica 0 at request {kill_at} (SIGKILL), then all",
                            **_verify(config, work, acked, fed)}
        progress(f"budget phase: {report['budget']}")
        report["throughput"], report["overhead"] = _throughput_and_overhead(pg, kg, qs, cfg, work, progress)
    report["load_average_end"] = os.getloadavg()
    return report


def _median(values: Sequence[float]) -> float:
    import statistics

    return round(float(statistics.median(values)), 3)


def _throughput_and_overhead(pg: LocalPostgres, kg: Path, qs: Sequence[str], cfg: ReplicaBenchConfig,
                             work: Path, progress: Callable[[str], None]
                             ) -> tuple[dict[str, Any], dict[str, Any]]:
    """The ``throughput`` and ``overhead`` phases (module docstring), their rounds interleaved."""
    config = _config(work, kg, "throughput", "budget_calls = 1e9", pg.create_database("throughput"))
    servers = _start(config, work, "throughput", cfg.replicas)
    folder_config = _config(work, kg, "overhead-folder", "budget_calls = 1e9", None)
    pg_config = _config(work, kg, "overhead-postgresql", "budget_calls = 1e9", pg.create_database("overhead"))
    pair = [*_start(folder_config, work, "overhead-folder", 1), *_start(pg_config, work, "overhead-pg", 1)]
    assert pg.proc is not None
    pg_pid, niceness = pg.proc.pid, os.getpriority(os.PRIO_PROCESS, 0)
    try:
        for s in [*servers, *pair]:  # warm-up: every question's embedding cached in every replica
            asyncio.run(_load([s], qs, len(qs), 2, time.monotonic() + cfg.phase_s, False))
        os.nice(cfg.client_nice)  # the load generator yields to the replicas it measures
        passes: list[dict[str, Any]] = []
        overhead: list[dict[str, float]] = []
        bodies = [_chat_body(q) for q in qs]
        for r in range(cfg.rounds):
            for k in range(1, cfg.replicas + 1):
                cpu0 = (time.process_time(), sum(cpu_seconds(s.proc.pid) for s in servers),
                        cpu_seconds(pg_pid, True))
                run = wrk_pass([s.port for s in servers[:k]], "/v1/chat/completions", bodies, cfg.concurrency,
                               cfg.throughput_s, work / "wrk", REPLY_TIMEOUT_S)
                cpu1 = (time.process_time() + run.cpu_s, sum(cpu_seconds(s.proc.pid) for s in servers),
                        cpu_seconds(pg_pid, True))
                res = run.report()
                n = max(run.replied, 1)
                used = {name: round((b - a) * 1000 / n, 3)
                        for name, a, b in zip(("client", "replicas", "postgresql"), cpu0, cpu1, strict=True)}
                passes.append({"round": r + 1, "replicas": k, **res, "cpu_ms_per_answer": used,
                               "client_cpu_share": round(used["client"] / max(sum(used.values()), 1e-9), 3),
                               "load_average": os.getloadavg()[0]})
                progress(f"round {r + 1}, {k} replica(s): {res['answers_per_s']}/s, p50 {res['p50_ms']} ms, "
                         f"CPU ms per answer {used}")
            medians = {}
            for name, server in zip(("folder", "postgresql"), pair, strict=True):
                res = asyncio.run(_load([server], qs, max(cfg.requests // 4, 1), 1,
                                        time.monotonic() + cfg.phase_s, False))
                medians[name] = res["p50_ms"]
            overhead.append({**medians, "postgresql_minus_folder_ms":
                             round(medians["postgresql"] - medians["folder"], 2)})
            progress(f"round {r + 1}, one at a time: {overhead[-1]}")
    finally:
        with suppress(PermissionError):  # only root may lower it again
            os.setpriority(os.PRIO_PROCESS, 0, niceness)
        for s in [*servers, *pair]:
            s.stop()
    rate = {(p["round"], p["replicas"]): p["answers_per_s"] for p in passes}
    throughput: dict[str, Any] = {"passes": passes, "client_nice": cfg.client_nice}
    for k in range(1, cfg.replicas + 1):
        throughput[f"answers_per_s_{k}"] = _median([rate[r + 1, k] for r in range(cfg.rounds)])
        if k > 1:
            ratios = [rate[r + 1, k] / max(rate[r + 1, 1], 1e-9) for r in range(cfg.rounds)]
            throughput[f"ratio_{k}_over_1"] = [round(x, 3) for x in ratios]
            throughput[f"ratio_{k}_over_1_median"] = _median(ratios)
    throughput["client_cpu_share_median"] = _median([p["client_cpu_share"] for p in passes])
    alone = _state_alone(folder_config, work, pg.create_database("alone"), max(cfg.requests // 4, 1))
    progress(f"the state alone: {alone}")
    return throughput, {**alone, "rounds": overhead,
                        "median_ms_folder": _median([o["folder"] for o in overhead]),
                        "median_ms_postgresql": _median([o["postgresql"] for o in overhead]),
                        "postgresql_minus_folder_ms": _median([o["postgresql_minus_folder_ms"]
                                                               for o in overhead])}
