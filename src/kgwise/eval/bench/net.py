"""Loopback helpers for the benchmarks (and the tests) that start a server of their own."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time
from collections.abc import Callable
from typing import Self

from kgwise.errors import ConfigError, ServiceError

__all__ = ["ServerProcess", "cpu_seconds", "free_port", "rss_mb", "sparql_answers", "stop_process"]


def cpu_seconds(pid: int, children: bool = False) -> float:
    """User + system CPU seconds of process ``pid`` (with ``children``: and of its live children, as
    PostgreSQL's backends are the postmaster's); ``ConfigError`` when there is no such process."""
    import psutil

    try:
        proc = psutil.Process(pid)
        procs = [proc, *(proc.children() if children else ())]
    except psutil.Error as exc:
        raise ConfigError(f"process {pid}: {exc}") from exc
    total = 0.0
    for p in procs:
        with contextlib.suppress(psutil.NoSuchProcess):  # a child that ended meanwhile
            t = p.cpu_times()
            total += t.user + t.system
    return total


def rss_mb(pid: int | None = None) -> float:
    """Resident memory of process ``pid`` (default: this one) in MB; ``ConfigError`` when there is no such
    process."""
    import psutil

    try:
        return float(psutil.Process(pid).memory_info().rss) / 2**20
    except psutil.Error as exc:
        raise ConfigError(f"process {pid}: {exc}") from exc


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def stop_process(proc: subprocess.Popen[bytes] | None, grace_s: float = 30.0) -> None:
    """Stop a server started by a benchmark: SIGTERM, then SIGKILL after ``grace_s``; nothing when it is
    ``None`` or has already ended."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)


class ServerProcess:
    """A server a benchmark starts (``start`` sets ``proc`` and returns ``self``) and stops; a context
    manager that starts it on entry and stops it on exit."""

    proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 60.0) -> Self:
        raise NotImplementedError

    def await_ready(self, ready: Callable[[], bool], timeout_s: float, name: str, tail: Callable[[], str]
                    ) -> Self:
        """Poll ``ready`` every 0.2 s until it holds; ``ServiceError`` with ``tail()`` (the server's last
        words) when the process ends first or ``timeout_s`` passes (the server is then stopped)."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise ServiceError(f"{name} exited with {self.proc.returncode}: {tail()}")
            if ready():
                return self
            time.sleep(0.2)
        self.stop()
        raise ServiceError(f"{name} did not answer within {timeout_s:.0f} s: {tail()}")

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 30 s)."""
        stop_process(self.proc)
        self.proc = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def sparql_answers(endpoint: str) -> bool:
    """Whether the SPARQL endpoint answers ``ASK {}`` (a refused or dropped connection: not yet)."""
    import httpx

    try:
        return httpx.post(endpoint, data={"query": "ASK {}"}, timeout=2,
                          headers={"Accept": "application/sparql-results+json"}).status_code == 200
    except httpx.TransportError:
        return False
