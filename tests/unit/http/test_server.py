"""odradek.http.server: routes, limits and hostile input, on a real socket in-process."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from odradek.http.server import HttpRequest, HttpResponse, HttpServer, parse_listener


async def _exchange(port: int, data: bytes, wait: float = 5.0) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), wait)
    finally:
        writer.close()


def _server(**kw: float) -> HttpServer:
    s = HttpServer("127.0.0.1", 0, **kw)  # type: ignore[arg-type]
    s.register("/metrics", lambda r: HttpResponse(200, b"m " + r.method.encode()))
    s.register("/", lambda r: HttpResponse(200, b"root " + r.path.encode()))

    async def boom(_r: HttpRequest) -> HttpResponse:
        raise RuntimeError("handler bug")

    s.register("/boom", boom)
    return s


def test_routes_longest_prefix_and_errors() -> None:
    async def run() -> None:
        s = _server()
        _, port = await s.start()
        try:
            assert (await _exchange(port, b"GET /metrics HTTP/1.1\r\nConnection: close\r\n\r\n")).endswith(b"m GET")
            assert (await _exchange(port, b"GET /metrics/x HTTP/1.0\r\n\r\n")).endswith(b"m GET")
            assert (await _exchange(port, b"GET /metricsx HTTP/1.0\r\n\r\n")).endswith(b"root /metricsx")
            assert (await _exchange(port, b"GET /boom HTTP/1.0\r\n\r\n")).startswith(b"HTTP/1.1 500")
            head = await _exchange(port, b"HEAD /metrics HTTP/1.0\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200") and head.endswith(b"\r\n\r\n")
        finally:
            await s.stop()

    asyncio.run(run())


def test_slow_and_oversized_requests_are_refused() -> None:
    async def run() -> None:
        s = _server(header_timeout_s=0.3, idle_timeout_s=0.3, max_connections=4)
        _, port = await s.start()
        try:
            # slowloris: headers never finish -> 408 after the header timeout
            out = await _exchange(port, b"GET /metrics HTTP/1.1\r\nX-A: b", wait=3.0)
            assert out.startswith(b"HTTP/1.1 408")
            # idle keep-alive connection: closed silently
            assert await _exchange(port, b"", wait=3.0) == b""
            assert (await _exchange(port, b"GET / HTTP/1.1\r\nA: " + b"x" * 10_000 + b"\r\n\r\n")).startswith(
                b"HTTP/1.1 431")
            many = b"GET / HTTP/1.1\r\n" + b"".join(b"H%d: v\r\n" % i for i in range(100)) + b"\r\n"
            assert (await _exchange(port, many)).startswith(b"HTTP/1.1 431")
            # past max_connections, all of them idle: the one idle longest makes room for the newcomer
            held = [await asyncio.open_connection("127.0.0.1", port) for _ in range(4)]
            await asyncio.sleep(0.05)
            assert (await _exchange(port, b"GET / HTTP/1.0\r\n\r\n")).endswith(b"root /")
            assert s.evicted == 1
            assert await asyncio.wait_for(held[0][0].read(), 2.0) == b""  # the oldest one went
            for _, w in held:
                w.close()
            assert s.refused >= 3
        finally:
            await s.stop()

    asyncio.run(run())


def test_full_of_busy_connections_refuses_the_newcomer() -> None:
    async def run() -> None:
        s = _server(max_connections=2)
        release = asyncio.Event()

        async def slow(_r: HttpRequest) -> HttpResponse:
            await release.wait()
            return HttpResponse(200, b"slow")

        s.register("/slow", slow)
        _, port = await s.start()
        try:
            busy = [asyncio.create_task(_exchange(port, b"GET /slow HTTP/1.0\r\n\r\n")) for _ in range(2)]
            await asyncio.sleep(0.2)
            with contextlib.suppress(ConnectionResetError):  # reset or closed: either is a refusal
                assert await _exchange(port, b"GET / HTTP/1.0\r\n\r\n") == b""
            release.set()
            assert all(r.endswith(b"slow") for r in await asyncio.gather(*busy))
            assert s.evicted == 0 and s.refused == 1
        finally:
            await s.stop()

    asyncio.run(run())


def test_parse_listener() -> None:
    assert parse_listener("http://127.0.0.1:9644") == ("127.0.0.1", 9644)
    assert parse_listener("http://0.0.0.0:0") == ("0.0.0.0", 0)
    for bad in ("https://h:1", "http://h", "h:1", "http://h:1/x", "http://h:notaport"):
        with pytest.raises(ValueError):
            parse_listener(bad)
