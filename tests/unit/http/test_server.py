"""odradek.http.server: routes, limits and hostile input, on a real socket in-process."""

from __future__ import annotations

import asyncio
import contextlib

import pytest

from odradek.connection_quotas import INT_MAX, ConnectionQuotas
from odradek.http.server import HttpRequest, HttpResponse, HttpServer, RateLimitedLog, parse_listener


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


async def _exchange_from(source: str, port: int, data: bytes, wait: float = 5.0) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    writer.write(data)
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(), wait)
    finally:
        writer.close()


def test_one_address_cannot_take_every_slot(caplog: pytest.LogCaptureFixture) -> None:
    """http.max.connections.per.ip (2 here, of 8 slots): a third busy connection from 127.0.0.1 is
    closed at once and logged once per interval; 127.0.0.2 keeps being served; the counts go back
    to zero as the connections end."""
    async def run() -> None:
        quotas = ConnectionQuotas(INT_MAX, 2, {}, per_ip_name="http.max.connections.per.ip")
        s = HttpServer("127.0.0.1", 0, max_connections=8, per_ip=quotas)
        release = asyncio.Event()

        async def slow(_r: HttpRequest) -> HttpResponse:
            await release.wait()
            return HttpResponse(200, b"slow")

        s.register("/slow", slow)
        s.register("/", lambda r: HttpResponse(200, b"root"))
        _, port = await s.start()
        try:
            busy = [asyncio.create_task(_exchange_from("127.0.0.1", port, b"GET /slow HTTP/1.0\r\n\r\n"))
                    for _ in range(2)]
            await asyncio.sleep(0.2)
            assert quotas.counts == {"127.0.0.1": 2}
            for _ in range(3):
                loop = asyncio.get_running_loop()
                t0 = loop.time()
                with contextlib.suppress(ConnectionResetError):
                    assert await _exchange_from("127.0.0.1", port, b"GET / HTTP/1.0\r\n\r\n") == b""
                assert loop.time() - t0 < 1.0  # at once, not after a timeout
            assert s.over_ip_limit == 3 and s.evicted == 0
            assert (await _exchange_from("127.0.0.2", port, b"GET / HTTP/1.0\r\n\r\n")).endswith(b"root")
            release.set()
            assert all(r.endswith(b"slow") for r in await asyncio.gather(*busy))
            await asyncio.sleep(0.05)
            assert quotas.counts == {} and quotas.total == 0
        finally:
            await s.stop()

    with caplog.at_level("WARNING", logger="odradek.http"):
        asyncio.run(run())
    lines = [r.getMessage() for r in caplog.records if "http.max.connections.per.ip" in r.getMessage()]
    assert len(lines) == 1, lines  # three closes within LOG_INTERVAL_S: one line
    assert "127.0.0.1" in lines[0] and "maximum of 2" in lines[0]


def test_an_address_at_its_limit_churns_its_own_idle_connections() -> None:
    """Idle connections of an address at its limit make room for that address's newcomer (its own,
    never another address's): a flood of idle connections from one address cannot lock out a scraper
    from the same address, and holds no more than its limit."""
    async def run() -> None:
        quotas = ConnectionQuotas(INT_MAX, 2, {})
        s = HttpServer("127.0.0.1", 0, max_connections=8, per_ip=quotas)
        s.register("/", lambda r: HttpResponse(200, b"root"))
        _, port = await s.start()
        try:
            other = await asyncio.open_connection("127.0.0.1", port, local_addr=("127.0.0.2", 0))
            await asyncio.sleep(0.05)
            mine = [await asyncio.open_connection("127.0.0.1", port) for _ in range(5)]
            await asyncio.sleep(0.1)
            assert quotas.counts == {"127.0.0.1": 2, "127.0.0.2": 1}
            assert (await _exchange(port, b"GET / HTTP/1.0\r\n\r\n")).endswith(b"root")
            for r, _ in mine[:4]:  # the oldest went first
                assert await asyncio.wait_for(r.read(), 2.0) == b""
            assert s.evicted == 4 and s.over_ip_limit == 4
            other[1].write(b"GET / HTTP/1.0\r\n\r\n")  # the other address's idle connection was left alone
            assert (await asyncio.wait_for(other[0].read(), 2.0)).endswith(b"root")
            for _, w in [*mine, other]:
                w.close()
        finally:
            await s.stop()

    asyncio.run(run())


def test_rate_limited_log() -> None:
    r = RateLimitedLog(10.0)
    assert r.note(100.0) == 1
    assert [r.note(t) for t in (101.0, 105.0, 109.9)] == [0, 0, 0]
    assert r.note(110.0) == 4  # the three held back and this one
    assert r.note(119.0) == 0 and r.note(200.0) == 2
