"""A local HTTP server that speaks the OpenAI chat-completions protocol and injects faults on purpose.

The prompt of each request carries an item number ``item-<k>``; the fault plan is a function of ``k`` and
of how many times the server has seen ``k`` before, so the expected retries are known in advance:

===========  ===========================================================  =================
``k % 8``    first attempt(s)                                              retries expected
===========  ===========================================================  =================
0            connection dropped without a reply                            1
1            429 with ``Retry-After: 1`` (seconds)                         1
2            500, then 503                                                 2
3            slow reply (``slow_s``, longer than the client's timeout)     1
4            200 with a body that is not JSON                              1
5            200 with JSON lacking ``choices``                             1
6, 7         answered at once                                              0
===========  ===========================================================  =================

Every request is logged as ``(time, k, attempt, outcome)``. The answer to item ``k`` is ``answer-<k>``.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

EXPECTED_RETRIES = {0: 1, 1: 1, 2: 2, 3: 1, 4: 1, 5: 1, 6: 0, 7: 0}
RETRY_AFTER_S = 1.0


def plan(k: int, attempt: int) -> str:
    """The outcome of attempt ``attempt`` (0-based) for item ``k``."""
    kind = k % 8
    if kind == 0 and attempt == 0:
        return "drop"
    if kind == 1 and attempt == 0:
        return "429"
    if kind == 2 and attempt == 0:
        return "500"
    if kind == 2 and attempt == 1:
        return "503"
    if kind == 3 and attempt == 0:
        return "slow"
    if kind == 4 and attempt == 0:
        return "malformed"
    if kind == 5 and attempt == 0:
        return "nochoices"
    return "ok"


class FaultServer:
    """Run with ``start()``; ``url`` is the base URL (``…/v1``); ``log`` the request log."""

    def __init__(self, slow_s: float = 1.5, ok_delay_s: float = 0.0) -> None:
        self.slow_s = slow_s
        self.ok_delay_s = ok_delay_s
        self.log: list[tuple[float, int, int, str]] = []
        self.attempts: dict[int, int] = {}
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # silence
                return

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    server._send(self, 404, b'{"error": {"message": "only chat completions here"}}')
                    return
                text = " ".join(m.get("content", "") for m in body.get("messages", []))
                m = re.search(r"item-(\d+)", text)
                k = int(m.group(1)) if m else -1
                with server._lock:
                    attempt = server.attempts.get(k, 0)
                    server.attempts[k] = attempt + 1
                    outcome = plan(k, attempt)
                    server.log.append((time.time(), k, attempt, outcome))
                server.respond(self, k, outcome)

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._httpd.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        self.url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    def start(self) -> FaultServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _send(
        self, h: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None
    ) -> None:
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        try:
            h.wfile.write(body)
            h.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    def respond(self, h: BaseHTTPRequestHandler, k: int, outcome: str) -> None:
        if outcome == "drop":
            h.close_connection = True
            with contextlib.suppress(OSError):
                h.connection.shutdown(socket.SHUT_RDWR)
            return
        if outcome == "429":
            self._send(h, 429, b'{"error": {"message": "rate limited"}}',
                       {"Retry-After": str(int(RETRY_AFTER_S))})
            return
        if outcome in {"500", "503"}:
            self._send(h, int(outcome), b'{"error": {"message": "server error"}}')
            return
        if outcome == "slow":
            time.sleep(self.slow_s)
        if outcome == "malformed":
            self._send(h, 200, b'{"choices": [{"message": {"content": "answ')
            return
        if outcome == "nochoices":
            self._send(h, 200, b'{"object": "chat.completion", "choices": []}')
            return
        if self.ok_delay_s:
            time.sleep(self.ok_delay_s)
        reply: dict[str, Any] = {
            "id": f"cmpl-{k}",
            "object": "chat.completion",
            "model": "fault-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": f"answer-{k}"},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12},
        }
        if k < 0:  # no item number: a multiple-choice prompt; reply "B" with first-token log-probabilities
            reply["choices"][0]["message"]["content"] = "B"
            reply["choices"][0]["logprobs"] = {"content": [
                {"token": "B", "logprob": -0.2, "top_logprobs": [{"token": "B", "logprob": -0.2},
                                                                 {"token": "A", "logprob": -2.0},
                                                                 {"token": "Hello", "logprob": -3.0}]}]}
        self._send(h, 200, json.dumps(reply).encode())
