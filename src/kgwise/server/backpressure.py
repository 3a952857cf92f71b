"""Backpressure: each model (the LLM, the question encoder, the graph) works through a :class:`ModelGate`,
its own threads and a bounded queue. A request beyond the queue is answered ``429`` with ``Retry-After``
at once; one that waits longer than the timeout gets ``503``; a queued request whose client has gone is
dropped before it runs (a model call already running finishes: llama.cpp cannot be interrupted). The
event loop never runs model work, so ``/health`` answers while the models are busy.

:class:`QueueShed` refuses a request to a full gate before FastAPI parses and validates its body: a burst
of 200 chats over a queue of 8 is 190 refusals, and refusing each after FastAPI's parsing and validation
kept ``/health`` waiting behind them: its slowest probe fell from 76–137 ms to 49–55 ms with this
(``tests/server/test_hardening.py``, docs/operations.md)."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import HTTPException, Request
from starlette.types import ASGIApp, Receive, Scope, Send

from kgwise.errors import ConfigError

__all__ = ["GateStats", "ModelGate", "QueueShed"]

T = TypeVar("T")

_POLL_S = 0.25  # how often a waiting request checks that its client is still there


@dataclass(slots=True)
class GateStats:
    """Counters of a gate (``/health`` shows them)."""

    workers: int
    queue_limit: int
    busy: int
    served: int
    refused: int
    timed_out: int
    dropped: int
    mean_s: float


class ModelGate:
    """``workers`` threads for one model, at most ``queue_limit`` requests waiting for them; each request
    may take ``timeout_s`` in all (waiting and running)."""

    def __init__(self, name: str, workers: int = 1, queue_limit: int = 8, timeout_s: float = 120.0) -> None:
        if workers < 1 or queue_limit < 0 or not timeout_s > 0:
            raise ConfigError(f"gate {name}: workers must be ≥ 1, queue_limit ≥ 0 and timeout_s > 0, got "
                              f"{workers}, {queue_limit}, {timeout_s}")
        self.name = name
        self.workers = workers
        self.queue_limit = queue_limit
        self.timeout_s = timeout_s
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix=f"kgwise-{name}")
        self._lock = threading.Lock()
        self._busy = 0  # submitted and not finished (queued or running)
        self._served = self._refused = self._timed_out = self._dropped = 0
        self._mean_s = 0.0

    def stats(self) -> GateStats:
        with self._lock:
            return GateStats(self.workers, self.queue_limit, self._busy, self._served, self._refused,
                             self._timed_out, self._dropped, round(self._mean_s, 4))

    def _finished(self, _: object) -> None:
        with self._lock:
            self._busy -= 1

    def _timed(self, fn: Callable[..., T], *args: Any) -> T:
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            took = time.perf_counter() - t0
            with self._lock:
                self._served += 1
                self._mean_s = took if self._served == 1 else 0.9 * self._mean_s + 0.1 * took

    def _full(self) -> HTTPException | None:
        """The 429 (with ``Retry-After``: the mean work time × the requests ahead / workers) while every
        worker is busy and the queue holds ``queue_limit``, counted as a refusal; None otherwise. Call
        under ``_lock``."""
        if self._busy < self.workers + self.queue_limit:
            return None
        self._refused += 1
        wait = max(1, math.ceil(self._mean_s * (self._busy + 1) / self.workers))
        return HTTPException(status_code=429, headers={"Retry-After": str(wait)},
                             detail=f"{self.name}: {self._busy} requests in work or waiting (the queue "
                                    f"holds {self.queue_limit}); retry after {wait} s")

    def refusal(self) -> HTTPException | None:
        """What :meth:`run` would answer now if the queue is full (counted), else None (nothing taken)."""
        with self._lock:
            return self._full()

    async def run(self, request: Request | None, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on the gate's threads; HTTP 429 when the queue is full, 503 past the timeout, 499
        when the client went away while it waited (``request``: None skips that check)."""
        with self._lock:
            full = self._full()
            if full is not None:
                raise full
            self._busy += 1
        try:
            future = self._pool.submit(self._timed, fn, *args)
        except BaseException:
            self._finished(None)
            raise
        future.add_done_callback(self._finished)
        waiting = asyncio.wrap_future(future)
        deadline = time.monotonic() + self.timeout_s
        while True:
            left = deadline - time.monotonic()
            done, _ = await asyncio.wait({waiting}, timeout=max(0.0, min(_POLL_S, left)))
            if done:
                return waiting.result()
            if request is not None and await request.is_disconnected():
                if future.cancel():
                    with self._lock:
                        self._dropped += 1
                raise HTTPException(status_code=499, detail="the client closed the connection")
            if time.monotonic() >= deadline:
                future.cancel()
                with self._lock:
                    self._timed_out += 1
                raise HTTPException(status_code=503, headers={"Retry-After": str(math.ceil(self.timeout_s))},
                                    detail=f"{self.name}: no answer within {self.timeout_s:g} s")

    def close(self) -> None:
        """Stop taking work; queued work is dropped, running work finishes."""
        self._pool.shutdown(wait=False, cancel_futures=True)


Render = Callable[[HTTPException], bytes]


class QueueShed:
    """ASGI middleware: a ``POST`` to one of ``gates``' paths while that gate is full is answered its 429
    at once, its body unread and unparsed (``render``: the JSON body of the refusal for that path, e.g.
    OpenAI's error shape). A request let through may still be refused by :meth:`ModelGate.run`, which
    decides; this only spares the event loop the work of refusing late."""

    def __init__(self, app: ASGIApp, gates: Mapping[str, tuple[ModelGate, Render]]) -> None:
        self.app = app
        self.gates = dict(gates)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        hit = self.gates.get(scope.get("path", "")) if scope["type"] == "http" else None
        refusal = hit[0].refusal() if hit is not None and scope.get("method") == "POST" else None
        if hit is None or refusal is None:
            await self.app(scope, receive, send)
            return
        body = hit[1](refusal)
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
        headers += [(k.lower().encode(), v.encode()) for k, v in (refusal.headers or {}).items()]
        await send({"type": "http.response.start", "status": refusal.status_code, "headers": headers})
        await send({"type": "http.response.body", "body": body})
