"""The replica bench's HTTP/1.1 load client against small asyncio servers on 127.0.0.1: keep-alive reuse,
a reply without a Content-Length refused by name, a silent server timed out."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest

from kgwise.eval.bench import replicas
from kgwise.eval.bench.replicas import _Client

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _serve(handler: Handler) -> tuple[asyncio.Server, str]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    return server, f"http://127.0.0.1:{port}"


async def _read_request(reader: asyncio.StreamReader) -> bytes:
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return await reader.readexactly(length)


def test_json_replies_on_one_kept_alive_connection() -> None:
    connections = 0

    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal connections
        connections += 1
        while True:
            try:
                body = await _read_request(reader)
            except asyncio.IncompleteReadError:
                break
            if not body:
                break
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            await writer.drain()
        writer.close()

    async def run() -> list[tuple[int, bytes]]:
        server, base = await _serve(echo)
        client = _Client()
        async with server:
            return [await client.post(base, "/x", {"i": i}) for i in range(3)]

    replies = asyncio.run(run())
    assert replies == [(200, b'{"i": %d}' % i) for i in range(3)] and connections == 1


def test_a_reply_without_length_is_refused_by_name() -> None:
    async def chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
        await writer.drain()

    async def run() -> None:
        server, base = await _serve(chunked)
        async with server:
            await _Client().post(base, "/v1/x", {})

    with pytest.raises(ConnectionError, match="without a Content-Length"):
        asyncio.run(run())


def test_a_silent_server_times_out(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replicas, "REPLY_TIMEOUT_S", 0.2)

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        await asyncio.sleep(5)

    async def run() -> None:
        server, base = await _serve(silent)
        async with server:
            await _Client().post(base, "/x", {})

    with pytest.raises(TimeoutError):
        asyncio.run(run())
