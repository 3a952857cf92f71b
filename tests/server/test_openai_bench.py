"""``kgwise bench openai`` and ``kgwise bench page`` end to end: a ``FakePipeline`` server (no model time)
in its own process on 127.0.0.1, loaded through the CLI (chat completions at concurrency 8; the page in
headless Chromium); the reports are printed (the issue's targets — ≥ 100 requests/s, p99 ≤ 100 ms, the
page usable in ≤ 1 s — are reported, not asserted: they depend on the machine's load)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

HERE = Path(__file__).resolve().parent
CHROMIUM = Path("/usr/bin/chromium")

SERVER = """
import sys, uvicorn
sys.path.insert(0, {here!r})
from conftest import FakePipeline
from kgwise.server import ServerSettings, create_app
app = create_app(ServerSettings(), pipelines={{"kgwise": FakePipeline(budget=None)}})
uvicorn.run(app, host="127.0.0.1", port={port}, log_level="warning", access_log=False)
"""


@pytest.fixture(scope="module")
def fake_server() -> Iterator[tuple[str, int]]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    server = subprocess.Popen([sys.executable, "-c", SERVER.format(here=str(HERE), port=port)], env=env)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/v1/models", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            assert server.poll() is None and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
        yield url, server.pid
    finally:
        server.terminate()
        server.wait(10)


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True])
def test_bench_openai_on_a_fake_pipeline(tmp_path: Path, fake_server: tuple[str, int], stream: bool) -> None:
    url, pid = fake_server
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = tmp_path / "bench.json"
    n = int(os.environ.get("KGWISE_BENCH_REQUESTS", "1000"))
    cmd = [sys.executable, "-m", "kgwise.cli.main", "bench", "openai", "--url", url, "--requests", str(n),
           "--concurrency", "8", "--json", str(out), "--server-pid", str(pid),
           *(["--stream"] if stream else [])]
    subprocess.run(cmd, env=env, check=True, capture_output=True, timeout=600)
    report = json.loads(out.read_text())
    print(json.dumps(report))
    assert report["sent"] == n and report["ok"] == n and report["errors"] == {}
    assert report["latency_ms"]["p50"] <= report["latency_ms"]["p99"]
    assert report["server_cpu_ms_per_request"] > 0


@pytest.mark.slow
@pytest.mark.skipif(not CHROMIUM.exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)")
def test_bench_page_in_a_browser(tmp_path: Path, fake_server: tuple[str, int]) -> None:
    pytest.importorskip("playwright.sync_api", reason="playwright is not installed (dev extra)")
    url, _ = fake_server
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = tmp_path / "page.json"
    subprocess.run([sys.executable, "-m", "kgwise.cli.main", "bench", "page", "--url", url, "--runs", "2",
                    "--json", str(out)], env=env, check=True, capture_output=True, timeout=300)
    report = json.loads(out.read_text())
    print(json.dumps(report["first_visit"]))
    assert len(report["loads"]) == 4 and [x["cached"] for x in report["loads"]] == [False, True] * 2
    first = report["loads"][0]
    assert first["requests"] >= 3 and 0 < first["dom_interactive_ms"] <= first["load_event_ms"]
    assert first["bytes"] > 10_000 and first["ready_ms"] > 0
    assert report["foreign_requests"] == []
