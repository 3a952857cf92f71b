"""Who may reach the service and with how much: API keys (bearer tokens, compared in constant time), the
refusal to listen beyond loopback without them, and a cap on the request body.

Keys come from ``--api-key-file`` (one per line, ``#`` comments) and ``$KGWISE_API_KEYS`` (comma
separated); with any key, every request must carry ``Authorization: Bearer KEY`` (else 401).
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
from collections.abc import Sequence
from pathlib import Path

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kgwise.errors import ConfigError

__all__ = ["Guard", "check_exposure", "default_allowed_hosts", "is_loopback", "load_api_keys"]

MIN_KEY_CHARS = 16


def load_api_keys(file: Path | None, env: str | None = None) -> tuple[str, ...]:
    """The keys of ``file`` (one per line; blank lines and ``#`` comments skipped) and of ``env`` (the
    value of ``$KGWISE_API_KEYS``, comma separated); ``ConfigError`` naming the file and line of a key
    shorter than 16 characters or holding spaces."""
    keys: list[str] = []
    sources: list[tuple[str, int, str]] = []
    if file is not None:
        try:
            lines = file.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ConfigError(f"--api-key-file {file}: {exc.strerror or exc}") from exc
        sources += [(str(file), i, line.strip()) for i, line in enumerate(lines, 1)
                    if line.strip() and not line.strip().startswith("#")]
    if env:
        sources += [("$KGWISE_API_KEYS", i, k.strip()) for i, k in enumerate(env.split(","), 1) if k.strip()]
    for where, i, key in sources:
        if len(key) < MIN_KEY_CHARS or any(c.isspace() for c in key):
            raise ConfigError(f"{where}:{i}: an API key must be at least {MIN_KEY_CHARS} characters without "
                              "spaces")
        keys.append(key)
    if file is not None and not keys:
        raise ConfigError(f"--api-key-file {file} holds no key")
    return tuple(dict.fromkeys(keys))


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) only reaches this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_exposure(host: str, api_keys: Sequence[str], insecure: bool) -> None:
    """Refuse to listen on a non-loopback ``host`` without API keys, unless ``insecure``: anyone who
    reaches the port would control the budget and the models."""
    if not is_loopback(host) and not api_keys and not insecure:
        raise ConfigError(f"--host {host} is reachable from other machines: give API keys (--api-key-file or "
                          "$KGWISE_API_KEYS), or pass --insecure to serve without authentication")


def default_allowed_hosts(host: str) -> tuple[str, ...]:
    """Host headers accepted when the operator names none: the loopback names, plus ``host`` itself when
    it is a specific address (a wildcard bind accepts any: name them with --allowed-host)."""
    if host in ("0.0.0.0", "::", ""):
        return ("*",)
    return tuple(dict.fromkeys(("127.0.0.1", "localhost", "::1", "[::1]", host)))


PUBLIC_PATHS = ("/", "/docs", "/redoc", "/openapi.json", "/favicon.ico")
PUBLIC_PREFIXES = ("/static/", "/docs/", "/redoc/")
"""What loads without a key: the web page and the docs (static files), which then ask for a key."""


class Guard:
    """ASGI middleware: 401 without a valid bearer key (when there are keys) outside :data:`PUBLIC_PATHS`,
    413 for a body above ``max_body_bytes`` (by its Content-Length or as it streams in; the body is read
    here, then handed on)."""

    def __init__(self, app: ASGIApp, api_keys: Sequence[str], max_body_bytes: int) -> None:
        self.app = app
        self.keys = [k.encode() for k in api_keys]
        self.max_body = max_body_bytes

    def _authorised(self, header: bytes | None) -> bool:
        if not self.keys:
            return True
        if header is None or not header.startswith(b"Bearer "):
            return False
        given = header[len(b"Bearer "):].strip()
        ok = False
        for key in self.keys:  # every key compared, in constant time each
            ok |= hmac.compare_digest(given, key)
        return ok

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        path = scope.get("path", "")
        public = scope.get("method") == "GET" and (path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES))
        if not public and not self._authorised(headers.get(b"authorization")):
            await _reply(send, 401, "authorization: a valid API key is required (Authorization: Bearer KEY)",
                         [(b"www-authenticate", b"Bearer")])
            return
        length = headers.get(b"content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                await _reply(send, 400, "content-length: not a number")
                return
            if declared > self.max_body:
                await _reply(send, 413, f"body: {declared} bytes, more than the {self.max_body} allowed")
                return
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body = message.get("body", b"")
            size += len(body)
            if size > self.max_body:
                await _reply(send, 413, f"body: more than the {self.max_body} bytes allowed")
                return
            chunks.append(body)
            if not message.get("more_body", False):
                break
        whole = b"".join(chunks)
        handed = False

        async def replay() -> Message:
            nonlocal handed
            if not handed:
                handed = True
                return {"type": "http.request", "body": whole, "more_body": False}
            return await receive()  # later: the client's disconnect

        await self.app(scope, replay, send)


async def _reply(send: Send, status: int, detail: str, headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
    body = json.dumps({"detail": detail}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})


def keys_from_environment() -> str | None:
    """``$KGWISE_API_KEYS`` (None when unset)."""
    return os.environ.get("KGWISE_API_KEYS")
