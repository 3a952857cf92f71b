"""The wrk driver of the replica bench's throughput phase, against two small asyncio servers on 127.0.0.1:
every body reaches every server in turn, statuses and in-flight requests are counted as the servers saw
them, and a machine without wrk is told which package to install."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections import Counter
from pathlib import Path

import pytest

from kgwise.errors import ConfigError
from kgwise.eval.bench import wrk
from kgwise.eval.bench.wrk import WrkPass, wrk_pass

needs_wrk = pytest.mark.skipif(shutil.which("wrk") is None,
                               reason="wrk is not installed (apt-get install wrk; .ci/install does)")


@needs_wrk
def test_bodies_go_to_every_server_in_turn_and_statuses_are_counted(tmp_path: Path) -> None:
    seen: Counter[tuple[int, int]] = Counter()
    refused = [0]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        port = writer.get_extra_info("sockname")[1]
        while True:
            length = None
            while (line := await reader.readline()) not in (b"\r\n", b""):
                if line.lower().startswith(b"content-length:"):
                    length = int(line.split(b":")[1])
            if length is None:
                break
            i = json.loads(await reader.readexactly(length))["i"]
            seen[port, i] += 1
            status = b"429 Too Many Requests" if i == 2 else b"200 OK"
            refused[0] += i == 2
            writer.write(b"HTTP/1.1 " + status + b"\r\nContent-Length: 2\r\n\r\n{}")
            await writer.drain()
        writer.close()

    async def run() -> tuple[WrkPass, list[int]]:
        servers = [await asyncio.start_server(handle, "127.0.0.1", 0) for _ in range(2)]
        ports = [s.sockets[0].getsockname()[1] for s in servers]
        try:
            return await asyncio.to_thread(wrk_pass, ports, "/v1/x", [{"i": i} for i in range(4)], 4, 1.0,
                                           tmp_path), ports
        finally:
            for s in servers:
                s.close()

    result, ports = asyncio.run(run())
    assert result.connections == 4 and result.transport_errors == dict.fromkeys(
        ("connect", "read", "write", "timeout"), 0)
    assert {(p, i) for p in ports for i in range(4)} <= set(seen)  # every body to every server
    done = result.replied + result.other_status
    assert 0 <= sum(seen.values()) - done <= result.connections  # at most one in flight per connection
    assert 0 <= refused[0] - result.other_status <= result.connections
    assert result.replied > 0 and result.seconds > 0.5 and result.cpu_s >= 0
    report = result.report()
    assert report["statuses"] == {"2xx": result.replied, "other": result.other_status}
    assert report["answers_per_s"] == round(result.replied / result.seconds, 1)


def test_without_wrk_the_package_is_named(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(wrk.shutil, "which", lambda _: None)
    with pytest.raises(ConfigError, match=r"apt-get install wrk"):
        wrk_pass([1], "/x", [{}], 1, 1.0, tmp_path)
