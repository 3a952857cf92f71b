"""The service on a real uvicorn over 127.0.0.1 (a free port), serving a pipeline whose arms are external
(the caller runs them: ``/v1/route*``): hostile and malformed requests are 4xx naming the field and change
nothing, keys and hosts are checked, decisions expire, a full queue answers 429, and a server killed with
SIGKILL under load loses no acknowledged feedback (the pipeline's journal is made durable before it
answers)."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request

from kgwise.app.pipeline import Pipeline
from kgwise.app.state import StateDir
from kgwise.cli.main import app as cli
from kgwise.errors import ConfigError
from kgwise.eval.bench.net import free_port
from kgwise.server import ServerSettings, create_app
from kgwise.server.backpressure import ModelGate
from kgwise.server.guard import check_exposure, load_api_keys
from kgwise.server.pipeline_adapter import pipeline_hub

KEY = "k" * 24
QUESTIONS = ["Which drug treats high blood pressure?", "Where is the Eiffel Tower?", "Who wrote Hamlet?"]



def _dir(pipe: Pipeline) -> StateDir:
    """The pipeline's state folder (these tests reach into the folder state)."""
    assert isinstance(pipe.state, StateDir)
    return pipe.state


@dataclass
class Live:
    """A running server: its base URL and the pipeline it serves (``now``: its clock, seconds)."""

    url: str
    pipeline: Any
    now: list[float]

    def client(self, key: str | None = KEY) -> httpx.Client:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)


@pytest.fixture()
def live(tmp_path: Path, make_external: Any) -> Iterator[Live]:
    """uvicorn in a thread, serving a pipeline of three external arms (gnn 0, small 0.2, big 0.5) with
    API keys, Host checks, a 2 s decision lifetime on an injected clock and a 4 KB body cap."""
    served = make_external(tmp_path, small=0.2, big=0.5, external_ttl_s=2.0)
    now = [1000.0]
    served.pipeline.state.clock = lambda: now[0]
    port = free_port()
    settings = ServerSettings(api_keys=(KEY,), allowed_hosts=("127.0.0.1", "localhost"),
                              max_body_bytes=4_000)
    app = create_app(settings, pipelines=pipeline_hub({"kgwise": served}))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning",
                                           lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield Live(f"http://127.0.0.1:{port}", served, now)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        served.close()


def _malformed() -> list[tuple[str, Any, str]]:
    """(path, body, field the answer must name): bodies as JSON values, or raw bytes."""
    q, costs = QUESTIONS[0], {"gnn": 0.0, "small": 0.1, "big": 0.2}
    route = "/v1/route"
    fb = "/v1/route/feedback"
    ok_fb = {"decision": "d" * 32, "reward": 1, "cost": 0}
    cases: list[tuple[str, Any, str]] = [
        (route, {}, "question"), (route, {"question": ""}, "question"),
        (route, {"question": None}, "question"), (route, {"question": {"a": 1}}, "question"),
        (route, {"question": 5}, "question"), (route, {"question": ["a"]}, "question"),
        (route, {"question": "\ud800"}, "question"), (route, {"question": "ok \udfff"}, "question"),
        (route, {"question": "x" * 9000}, "body"), (route, {"question": q, "costs": {}}, "costs"),
        (route, {"question": q, "costs": [0.1]}, "costs"),  # arms are names, never positions
        (route, {"question": q, "costs": "cheap"}, "costs"),
        (route, {"question": q, "costs": {"gnn": [0]}}, "costs.gnn"),
        (route, {"question": q, "costs": {"gnn": -1}}, "costs.gnn"),
        (route, {"question": q, "costs": {"big": "x"}}, "costs.big"),
        (route, {"question": q, "costs": {"big": None}}, "costs.big"),
        (route, {"question": q, "costs": {"gpu": 0.1}}, "costs.gpu"),  # not an arm of the pipeline
        (route, {"question": q, "costs": {f"a{i}": 0 for i in range(200)}}, "costs"),
        (route, {"question": q, "model": "other"}, "model"),
        (route, {"question": q, "costs": costs, "extra": 1}, "extra"),
        (route, [q], "body"), (route, "question", "body"), (route, None, "body"), (route, 7, "body"),
        (route, b"{", "body"), (route, b"\xff\xfe", "body"), (route, b"", "body"),
        (route, b'{"question": "a", "costs": {"gnn": NaN}}', "costs.gnn"),
        (route, b'{"question": "a", "costs": {"gnn": Infinity}}', "costs.gnn"),
        (route, b'{"question": "a", "costs": {"gnn": 1e999}}', "costs.gnn"),
        (route, b"[" * 1900 + b"]" * 1900, "body"),
        (fb, {}, "decision"), (fb, {**ok_fb, "decision": ""}, "decision"),
        (fb, {**ok_fb, "decision": "d" * 10_000}, "body"),  # over the body cap: 413
        (fb, {**ok_fb, "decision": "d" * 65}, "decision"), (fb, {**ok_fb, "decision": "\ud800"}, "decision"),
        (fb, {**ok_fb, "decision": 12}, "decision"), (fb, {**ok_fb, "reward": 2}, "reward"),
        (fb, {**ok_fb, "reward": -0.1}, "reward"), (fb, {**ok_fb, "reward": "good"}, "reward"),
        (fb, {**ok_fb, "reward": None}, "reward"), (fb, {**ok_fb, "cost": -1}, "cost"),
        (fb, {**ok_fb, "cost": "free"}, "cost"), (fb, {**ok_fb, "observed": []}, "observed"),
        (fb, {**ok_fb, "observed": {"gnn": 2}}, "observed.gnn"),
        (fb, {**ok_fb, "observed": {"\ud800": 1}}, "observed"),
        (fb, {**ok_fb, "observed": {"gnn": "x"}}, "observed.gnn"),
        (fb, {**ok_fb, "unknown": True}, "unknown"), (fb, {"reward": 1, "cost": 0}, "decision"),
        (fb, {**ok_fb, "observed": {"gnn": None}}, "observed.gnn"),
        (fb, {**ok_fb, "observed": "gnn"}, "observed"),
        ("/v1/route/cancel", {"decision": "x", "extra": 1}, "extra"),
        (fb, b'{"decision": "d", "reward": NaN, "cost": 0}', "reward"),
        (fb, b'{"decision": "d", "reward": 1, "cost": NaN}', "cost"),
        (fb, b'{"decision": "d", "reward": 1, "cost": Infinity}', "cost"),
        (fb, b'{"decision": "d", "reward": 1, "cost": -Infinity}', "cost"),
        (fb, ok_fb, "decision"),  # well formed, never made: 404 naming the decision
        ("/v1/route/cancel", {}, "decision"), ("/v1/route/cancel", {"decision": "\udfff"}, "decision"),
        ("/v1/route/cancel", {"decision": "nope"}, "decision"),
        ("/v1/route/cancel", {"decision": ["a"]}, "decision"),
        (route, {"question": "x" * 3990}, "body"),  # 3,990 characters fit the field, not the 4 KB body
        ("/v1/answer", {"question": q, "choices": ["a", "b"]}, ""),  # no graph served: 404
        ("/v1/nothing", {}, ""),
    ]
    return cases


def _send(client: httpx.Client, path: str, body: Any) -> httpx.Response:
    if isinstance(body, bytes):
        return client.post(path, content=body, headers={"Content-Type": "application/json"})
    raw = json.dumps(body).encode()  # lone surrogates travel as JSON escapes, as a hostile client sends them
    return client.post(path, content=raw, headers={"Content-Type": "application/json"})


def test_malformed_requests_are_4xx_naming_the_field_and_change_nothing(live: Live) -> None:
    cases = _malformed()
    assert len(cases) >= 60
    with live.client() as client:
        before = client.get("/v1/route/status").json()
        for path, body, field in cases:
            res = _send(client, path, body)
            assert 400 <= res.status_code < 500, (path, body if not isinstance(body, dict) else list(body),
                                                 res.status_code, res.text[:300])
            text = res.text
            assert len(text) < 5_000  # a huge value is never echoed back
            if field and field != "body":
                assert field.split(".")[0] in text, (path, field, text[:300])
        after = client.get("/v1/route/status").json()
    assert after == before


def test_keys_and_hosts_are_checked(live: Live) -> None:
    with live.client(key=None) as anonymous:
        res = anonymous.get("/health")
        assert res.status_code == 401 and res.headers["www-authenticate"] == "Bearer"
    with live.client(key="x" * 24) as wrong:
        assert wrong.post("/v1/route", json={"question": "q"}).status_code == 401
    with live.client() as client:
        assert client.get("/health").status_code == 200
        rebound = client.get("/health", headers={"Host": "evil.example"})  # DNS rebinding
        assert rebound.status_code == 400
        cors = client.options("/v1/route", headers={"Origin": "http://evil.example",
                                                     "Access-Control-Request-Method": "POST"})
        assert "access-control-allow-origin" not in cors.headers  # CORS is off by default


def test_decisions_expire_and_can_be_cancelled_over_http(live: Live) -> None:
    with live.client() as client:
        d = client.post("/v1/route", json={"question": QUESTIONS[0],
                                           "costs": {"gnn": 5, "small": 5, "big": 5}}).json()
        assert d["bound"] <= 0.5  # the client's bound of 5 is capped by the arm's price
        c = client.post("/v1/route", json={"question": QUESTIONS[1]}).json()
        out = client.post("/v1/route/cancel", json={"decision": c["decision"]})
        assert out.status_code == 200 and out.json()["bound"] == c["bound"]
        assert client.post("/v1/route/cancel", json={"decision": c["decision"]}).status_code == 404
        live.now[0] += 2.5  # the pipeline's clock: d is older than its 2 s lifetime
        status = client.get("/v1/route/status").json()
        assert status["routed"] == 0 and status["reserved"] == 0
        late = client.post("/v1/route/feedback", json={"decision": d["decision"], "reward": 1, "cost": 0})
        assert late.status_code == 404 and "expired" in late.text


def test_exposure_and_keys_are_checked_before_serving(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="--insecure"):
        check_exposure("0.0.0.0", (), False)
    check_exposure("0.0.0.0", (), True)
    check_exposure("0.0.0.0", (KEY,), False)
    check_exposure("127.0.0.1", (), False)
    check_exposure("::1", (), False)
    keys = tmp_path / "keys"
    keys.write_text(f"# operators\n{KEY}\n\nshort\n")
    with pytest.raises(ConfigError, match=f"{keys}:4: an API key must be at least 16"):
        load_api_keys(keys)
    keys.write_text(f"{KEY}\n")
    assert load_api_keys(keys, "a" * 16 + ", " + KEY) == (KEY, "a" * 16)
    from typer.testing import CliRunner

    config = tmp_path / "kgwise.toml"  # refused before the config is read
    config.write_text("")
    res = CliRunner().invoke(cli, ["serve", "--config", str(config), "--host", "0.0.0.0"],
                             env={"KGWISE_API_KEYS": ""})
    assert res.exit_code == 2 and "--insecure" in " ".join(res.output.split())


def test_a_full_queue_answers_429_and_health_does_not_wait(tmp_path: Path) -> None:
    """A gate of one worker and one waiting place, its work slow: the third concurrent request is
    refused at once with Retry-After, and /health answers while the work runs."""
    gate = ModelGate("slow", workers=1, queue_limit=1, timeout_s=30)
    app = FastAPI()

    def slow_work() -> dict[str, bool]:
        time.sleep(1.0)
        return {"done": True}

    @app.post("/work")
    async def work(request: Request) -> dict[str, bool]:
        return await gate.run(request, slow_work)

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"busy": gate.stats().busy}

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    try:
        async def scenario() -> tuple[list[httpx.Response], list[float]]:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                tasks = [asyncio.create_task(client.post("/work")) for _ in range(3)]
                lat: list[float] = []
                busy: list[int] = []
                while not all(t.done() for t in tasks):
                    t0 = time.perf_counter()
                    busy.append((await client.get("/health")).json()["busy"])
                    lat.append(time.perf_counter() - t0)
                    await asyncio.sleep(0.05)
                assert max(busy) == 2  # one at work, one waiting
                return list(await asyncio.gather(*tasks)), lat

        responses, health_s = asyncio.run(scenario())
        codes = sorted(r.status_code for r in responses)
        assert codes == [200, 200, 429]
        refused = next(r for r in responses if r.status_code == 429)
        assert int(refused.headers["retry-after"]) >= 1 and "queue" in refused.json()["detail"]
        assert len(health_s) >= 5 and max(health_s) < 0.5  # the event loop never waits for the work
        # a client that leaves while queued: its work is dropped before it runs
        async def leave() -> None:
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                running = asyncio.create_task(client.post("/work"))
                await asyncio.sleep(0.2)
                with pytest.raises(httpx.TimeoutException):
                    await client.post("/work", timeout=0.3)
                await running

        asyncio.run(leave())
        time.sleep(0.6)
        assert gate.stats().dropped == 1
    finally:
        server.should_exit = True
        thread.join(timeout=30)
        gate.close()


@pytest.mark.slow
def test_kill_9_under_load_loses_no_acknowledged_feedback(tmp_path: Path, make_external: Any) -> None:
    make_external(tmp_path, small=0.2, big=0.5, budget=1e6).close()  # writes kgwise.toml and the KG
    config, state = tmp_path / "kgwise.toml", tmp_path / "state"
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "kgwise.cli.main", "serve", "--config", str(config),
                             "--state", str(state), "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=os.environ.copy())
    url = f"http://127.0.0.1:{port}"
    acked: list[str] = []
    stop = threading.Event()
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(url + "/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                assert proc.poll() is None and time.monotonic() < deadline, "server did not start"
                time.sleep(0.3)

        def client(i: int) -> None:
            with httpx.Client(base_url=url, timeout=30) as c:
                k = 0
                while not stop.is_set():
                    k += 1
                    try:
                        d = c.post("/v1/route", json={"question": QUESTIONS[(i + k) % 3]}).json()
                        fb = {"decision": d["decision"], "reward": 1, "cost": d["bound"]}
                        if c.post("/v1/route/feedback", json=fb).status_code == 200:
                            acked.append(d["decision"])
                    except httpx.TimeoutException:
                        continue  # a slow answer on a loaded machine: ask again
                    except httpx.HTTPError:
                        return  # the server is gone

        with ThreadPoolExecutor(4) as pool:
            for i in range(4):
                pool.submit(client, i)
            until = time.monotonic() + 120
            while len(acked) < 60 and time.monotonic() < until:
                time.sleep(0.1)
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait()
            stop.set()
    finally:
        stop.set()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    from kgwise.app import Pipeline

    with Pipeline.from_config(config, state, models=False) as pipe:  # the lock died with the process
        st = pipe.status()
        settled = [d for d in acked if _dir(pipe).ended.get(d) == "settled"]
    print(f"kill -9 after {len(acked)} acknowledged feedbacks: {len(settled)} settled in the state, "
          f"{st.routed} routed and waiting, {sum(a.pulls for a in st.arms)} paid")
    assert len(acked) >= 60 and settled == acked  # every acknowledged feedback survived the kill
    assert sum(a.pulls for a in st.arms) >= len(acked)
    assert st.spent + st.reserved <= st.budget
