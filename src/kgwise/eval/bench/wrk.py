"""A throughput pass driven by ``wrk`` (Debian's ``wrk`` package, an HTTP load generator written in C): JSON
POSTs from a fixed set of bodies, in turn, to one or more servers on 127.0.0.1, on keep-alive connections.

What the replica bench's throughput phase measures shares the 2 cores with its load generator: its own
Python HTTP client took 0.19–0.22 ms of CPU per answer there (``client`` in
docs/measurements/scale-out/quiet-2-replicas-*.json), CPU the replicas measured need. ``wrk`` reads no
reply beyond its status and length. It is used only where no reply needs to be read (the budget and
overhead phases, which check answers and feedback, keep the Python client). A machine without ``wrk`` gets
a :class:`~kgwise.errors.ConfigError` naming the package: there is no fallback to another client.
"""

from __future__ import annotations

import json
import resource
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kgwise.errors import ConfigError, ServiceError

__all__ = ["WrkPass", "require_wrk", "wrk_pass"]

MARK = "KGWISE-WRK"
"""The line the script's ``done`` writes its figures on (wrk's own report is around it)."""

_SCRIPT = """\
-- POST the bodies of one file in turn, thread i to the (i mod n)-th port; figures on one line at the end
local ports = {%(ports)s}
local started = 0
function setup(thread)
  started = started + 1
  thread.addr = wrk.lookup("127.0.0.1", tostring(ports[(started - 1) %% #ports + 1]))[1]
  thread:set("first", started - 1)
end
function init(args)
  posts = {}
  for line in io.lines(%(bodies)s) do
    posts[#posts + 1] = wrk.format("POST", %(path)s, {["Content-Type"] = "application/json"}, line)
  end
  turn = first
end
function request()
  turn = turn + 1
  return posts[(turn - 1) %% #posts + 1]
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format("%(mark)s %%d %%d %%d %%d %%d %%d %%d %%d %%d\\n", summary.duration,
    summary.requests, e.status, e.connect, e.read, e.write, e.timeout, latency:percentile(50),
    latency:percentile(99)))
end
"""


def require_wrk() -> str:
    """The path of ``wrk``; ``ConfigError`` naming the package when it is not installed."""
    found = shutil.which("wrk")
    if found is None:
        raise ConfigError("`kgwise bench serve --replicas` drives its throughput phase with wrk, which is "
                          "not installed: apt-get install wrk (Debian's package; .ci/install installs it)")
    return found


def _lua_string(text: str) -> str:
    """``text`` as a Lua long-bracket literal."""
    level = 0
    while f"]{'=' * level}]" in text:
        level += 1
    return f"[{'=' * level}[{text}]{'=' * level}]"


@dataclass(frozen=True)
class WrkPass:
    """One pass: ``replied`` answers with a 2xx status (wrk counts 3xx with them; the servers send none),
    ``other_status`` with another (wrk does not say which), ``transport_errors`` by kind (connect, read,
    write, timeout), over ``seconds``; p50/p99 of the replies' latency (ms); ``cpu_s`` the CPU time wrk
    used (user + system); ``connections`` open at once."""

    replied: int
    other_status: int
    transport_errors: dict[str, int]
    seconds: float
    p50_ms: float
    p99_ms: float
    cpu_s: float
    connections: int

    def report(self) -> dict[str, Any]:
        """The figures the bench saves for a pass (as its Python client's passes report them)."""
        return {"requests": self.replied + self.other_status + sum(self.transport_errors.values()),
                "seconds": round(self.seconds, 2), "answers_per_s": round(self.replied / self.seconds, 1),
                "p50_ms": round(self.p50_ms, 2), "p99_ms": round(self.p99_ms, 2),
                "statuses": {"2xx": self.replied, "other": self.other_status},
                "transport_errors": {k: v for k, v in self.transport_errors.items() if v},
                "client": "wrk", "connections": self.connections}


def wrk_pass(ports: Sequence[int], path: str, bodies: Sequence[dict[str, Any]], concurrency: int,
             seconds: float, work: Path, timeout_s: float = 120.0) -> WrkPass:
    """Run ``wrk`` for ``seconds`` with one thread per port, each on ``concurrency / len(ports)`` (rounded,
    at least 1) keep-alive connections to ``127.0.0.1:port``, POSTing ``bodies`` as JSON in turn (thread i
    starts at body i). ``ServiceError`` with wrk's output when it fails."""
    exe = require_wrk()
    if not ports or not bodies:
        raise ConfigError("a wrk pass needs at least one port and one body")
    work.mkdir(parents=True, exist_ok=True)
    body_file = work / "wrk-bodies.jsonl"
    body_file.write_text("".join(json.dumps(b, ensure_ascii=False) + "\n" for b in bodies), encoding="utf-8")
    script = work / "wrk-post.lua"
    script.write_text(_SCRIPT % {"ports": ", ".join(str(int(p)) for p in ports),
                                 "bodies": _lua_string(str(body_file)), "path": _lua_string(path),
                                 "mark": MARK}, encoding="utf-8")
    per = max(1, round(concurrency / len(ports)))
    argv = [exe, "-t", str(len(ports)), "-c", str(per * len(ports)), "-d", f"{seconds:g}s",
            "--timeout", f"{timeout_s:g}s", "-s", str(script), f"http://127.0.0.1:{int(ports[0])}{path}"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=seconds + timeout_s + 30, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = next((x for x in proc.stdout.splitlines() if x.startswith(MARK + " ")), None)
    if proc.returncode != 0 or line is None:
        raise ServiceError(f"wrk failed (exit {proc.returncode}): {(proc.stdout + proc.stderr)[-800:]}")
    duration_us, done, status, connect, read, write, timeout, p50_us, p99_us = map(int, line.split()[1:])
    errors = {"connect": connect, "read": read, "write": write, "timeout": timeout}
    cpu_s = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return WrkPass(done - status, status, errors, duration_us / 1e6, p50_us / 1000, p99_us / 1000, cpu_s,
                   per * len(ports))
