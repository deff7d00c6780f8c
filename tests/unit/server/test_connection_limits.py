"""Connection limits and request memory: ConnectionQuotas, RequestMemoryPool, and a Connection's read
path under memory pressure (a real socketpair on a real event loop, with a stand-in broker)."""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Any

import pytest

from odradek.config import ConfigError
from odradek.connection_quotas import (
    FD_RESERVE_MIN,
    INT_MAX,
    ConnectionQuotas,
    RequestMemoryPool,
    fd_reserve,
    normalise_ip,
    parse_ip_overrides,
)
from odradek.protocol import framing
from odradek.server.connection import Connection, ConnectionEdges


def test_parse_ip_overrides() -> None:
    resolved = {"broker-a": ["10.0.0.1", "::ffff:10.0.0.2"]}
    got = parse_ip_overrides(" 127.0.0.1:5, broker-a:7,[::1]:3,::2:9 ", resolved.__getitem__)
    assert got == {"127.0.0.1": 5, "10.0.0.1": 7, "10.0.0.2": 7, "::1": 3, "::2": 9}
    assert parse_ip_overrides("") == {}
    for bad in ("127.0.0.1", "127.0.0.1:x", "127.0.0.1:-1", ":4"):
        with pytest.raises(ConfigError):
            parse_ip_overrides(bad)


def test_normalise_ip() -> None:
    assert normalise_ip("::ffff:127.0.0.1") == "127.0.0.1"
    assert normalise_ip("0:0::1") == "::1"
    assert normalise_ip("fe80::1%eth0") == "fe80::1"


def test_per_ip_limit_with_overrides() -> None:
    q = ConnectionQuotas(INT_MAX, 2, {"10.0.0.9": 3})
    assert q.inc("10.0.0.1") is None and q.inc("10.0.0.1") is None
    assert q.inc("10.0.0.1") == 2  # one too many: the caller closes it and gives the count back
    q.dec("10.0.0.1")
    assert [q.inc("10.0.0.9") for _ in range(4)] == [None, None, None, 3]
    q.dec("10.0.0.9")
    assert q.total == 5 and q.counts == {"10.0.0.1": 2, "10.0.0.9": 3}
    for _ in range(2):
        q.dec("10.0.0.1")
    assert "10.0.0.1" not in q.counts and q.total == 3


def test_zero_per_ip_needs_overrides() -> None:
    with pytest.raises(ConfigError):
        ConnectionQuotas(INT_MAX, 0, {})
    q = ConnectionQuotas(INT_MAX, 0, {"127.0.0.1": 1})
    assert q.inc("10.0.0.1") == 0 and q.inc("127.0.0.1") is None


def test_broker_wide_limit_and_descriptor_room() -> None:
    q = ConnectionQuotas(3, INT_MAX, {})
    for i in range(3):
        assert q.slot_available()
        q.inc(f"10.0.0.{i}")
    assert not q.slot_available()
    q.dec("10.0.0.0")
    assert q.slot_available()
    # the descriptor limit: 1000 soft, 40 descriptors of the broker's own besides 2 connections
    q2 = ConnectionQuotas(INT_MAX, INT_MAX, {})
    q2.inc("a")
    q2.inc("b")
    assert q2.refresh_fd_limit(1000, 42) == 1000 - 40 - FD_RESERVE_MIN
    assert q2.limit == 1000 - 40 - FD_RESERVE_MIN
    assert fd_reserve(100_000) == 5000
    assert q2.refresh_fd_limit(None, 42) == INT_MAX
    assert q2.refresh_fd_limit(100, 90) == 0  # no room at all: accept nothing


def test_memory_pool_is_non_strict_and_wakes_waiters_in_order() -> None:
    calls: list[Any] = []
    pool = RequestMemoryPool(100, calls.append)
    assert pool.try_reserve(60) and pool.try_reserve(60)  # granted while any memory is free
    assert pool.out_of_memory and not pool.try_reserve(1)
    woken: list[str] = []

    def waiter(name: str, size: int) -> Any:
        def resume() -> bool:
            woken.append(name)
            if pool.try_reserve(size):
                return True
            pool.wait(resume)
            return False
        return resume

    a, b = waiter("a", 50), waiter("b", 50)
    pool.wait(a)
    pool.wait(b)
    pool.release(60)
    assert len(calls) == 1  # the wake-up runs on a later loop turn
    pool.release(10)
    assert len(calls) == 1
    calls.pop()()
    assert woken == ["a"] and pool.used == 100 and list(pool.waiters) == [b]
    pool.forget(b)
    pool.release(100)
    assert not calls and pool.used == 0


class _Broker:
    """The broker's side of a connection: the ConnectionEdges it hands each connection."""

    def __init__(self, pool: RequestMemoryPool | None = None) -> None:
        self.closed: list[Connection] = []
        self.reads = 0
        self.edges = ConnectionEdges(
            services=None,  # type: ignore[arg-type]  # no request reaches a handler here
            max_request_bytes=104857600,
            request_memory=pool,
            on_closed=self.closed.append,
            on_read=self._read,
            inter_broker=None,
        )

    def _read(self) -> None:
        self.reads += 1


def _recv_closed(sock: socket.socket) -> bool:
    sock.settimeout(2)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def test_memory_error_reading_a_frame_closes_that_connection(monkeypatch: pytest.MonkeyPatch,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    def no_memory(n: int) -> bytearray:
        raise MemoryError

    monkeypatch.setattr(framing, "_frame_buffer", no_memory)

    async def run() -> None:
        broker = _Broker()
        a, b = socket.socketpair()
        conn = Connection(broker.edges, a, ("10.0.0.1", 5555), "PLAINTEXT")
        conn.start()
        b.sendall(struct.pack(">i", 50_000_000) + b"\x00" * 1000)
        for _ in range(100):
            if conn.closed:
                break
            await asyncio.sleep(0.01)
        assert conn.closed and broker.closed == [conn]
        assert await asyncio.get_running_loop().run_in_executor(None, _recv_closed, b)
        b.close()

    with caplog.at_level("ERROR", logger="odradek.network"):
        asyncio.run(run())
    assert "out of memory reading a request from 10.0.0.1:5555" in caplog.text


def test_connection_muted_while_the_pool_is_out_of_memory() -> None:
    """A connection refused a reservation stops reading; memory released elsewhere resumes it, and the
    request it had buffered is then handled. Its reservations go back when it closes."""

    async def run() -> None:
        loop = asyncio.get_running_loop()
        pool = RequestMemoryPool(1000, loop.call_soon)
        broker = _Broker(pool)
        a, b = socket.socketpair()
        conn = Connection(broker.edges, a, ("10.0.0.1", 5555), "PLAINTEXT")
        handled: list[bytes] = []
        conn._on_frame = lambda frame: handled.append(bytes(frame))  # type: ignore[method-assign]
        conn.start()
        assert pool.try_reserve(1000)  # someone else holds the whole pool
        b.sendall(struct.pack(">i", 10) + b"r" * 10)
        await asyncio.sleep(0.05)
        assert handled == [] and conn.memory_muted and not conn.reading
        pool.release(1000)
        await asyncio.sleep(0.05)
        assert handled == [b"r" * 10] and not conn.memory_muted and conn.reading
        assert conn.held == 0 and pool.used == 0  # no response slot took it: released at once
        # a partial frame's reservation is held until the connection closes
        b.sendall(struct.pack(">i", 500) + b"p" * 10)
        await asyncio.sleep(0.05)
        assert conn.held == 500 and pool.used == 500
        conn.close()
        assert pool.used == 0
        b.close()

    asyncio.run(run())
