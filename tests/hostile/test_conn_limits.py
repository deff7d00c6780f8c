"""Connection floods (issue 12, item 4): max.connections, max.connections.per.ip(.overrides),
connections.max.idle.ms, and running out of file descriptors.

Each test opens many raw sockets against a real broker process and checks what the broker does with
them: closes the idle ones, keeps the rest waiting in the backlog without spinning, refuses the ones
past an address's limit, and keeps enough descriptors for its own segment rolls.
"""

from __future__ import annotations

import os
import resource
import selectors
import socket
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from integration import wire
from integration.broker import Broker, BrokerFactory
from integration.clients import assert_served, unique
from waiting import wait_until

from odradek.protocol.records import build_batch

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def broker_sockets(pid: int) -> int:
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                n += 1
        except OSError:
            pass
    return n


@contextmanager
def open_sockets(b: Broker, n: int, first: bytes = b"") -> Iterator[list[socket.socket]]:
    """``n`` connected sockets (the kernel completes the handshake whether or not the broker accepts),
    each having sent ``first``."""
    socks: list[socket.socket] = []
    sel = selectors.DefaultSelector()
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            s.connect_ex((b.host, b.port))
            socks.append(s)
            sel.register(s, selectors.EVENT_WRITE)
        pending = set(socks)
        deadline = time.monotonic() + 20
        while pending and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=1):
                pending.discard(key.fileobj)  # type: ignore[arg-type]
                sel.unregister(key.fileobj)
        assert not pending, f"{len(pending)} of {n} connections not established"
        for s in socks:
            assert s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) == 0
            if first:
                s.send(first)
        yield socks
    finally:
        sel.close()
        for s in socks:
            s.close()


def closed_by_peer(s: socket.socket) -> bool:
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except (ConnectionResetError, BrokenPipeError):
        return True


API_VERSIONS_REQ = wire.encode_request(wire.API_VERSIONS, 0, 7)


def answered(s: socket.socket, timeout: float) -> bool:
    """The broker answered the ApiVersions request sent on ``s``."""
    s.settimeout(timeout)
    try:
        head = s.recv(4)
    except (TimeoutError, BlockingIOError, ConnectionResetError):
        return False
    finally:
        s.setblocking(False)
    return len(head) == 4 and struct.unpack(">i", head)[0] > 0


def test_idle_connections_on_partial_frames_are_closed(make_broker: BrokerFactory) -> None:
    """200 connections each sitting on half a request are closed after connections.max.idle.ms."""
    b = make_broker({"connections.max.idle.ms": 1000})
    assert b.pid is not None
    baseline = broker_sockets(b.pid)
    partial = struct.pack(">i", 100) + b"\x00\x12\x00\x00"  # a 100-byte request, 4 bytes of it
    t0 = time.monotonic()
    with open_sockets(b, 200, partial) as socks:
        wait_until(lambda: all(closed_by_peer(s) for s in socks), 6, "the idle connections to be closed",
                   detail=lambda: f"{sum(not closed_by_peer(s) for s in socks)} of 200 still open "
                                  f"{time.monotonic() - t0:.1f} s later")
        assert time.monotonic() - t0 > 0.9  # not before they were idle for a second
    wait_until(lambda: broker_sockets(b.pid) <= baseline + 2, 5, "the broker to close its sockets")
    assert "connections.max.idle.ms" in b.log_text()
    # an active connection is not idle: one request every 0.4 s keeps it open across 2 s
    with wire.Conn(b.bootstrap) as c:
        for _ in range(5):
            wire.api_versions(c)
            time.sleep(0.4)
    b.assert_alive()


def test_max_connections_pauses_accepting(make_broker: BrokerFactory) -> None:
    """300 connections against max.connections=100: 100 are served, the others wait in the backlog
    while the broker idles, and one is let in for each that closes."""
    b = make_broker({"max.connections": 100})
    assert b.pid is not None
    baseline = broker_sockets(b.pid)
    with open_sockets(b, 300, API_VERSIONS_REQ) as socks:
        time.sleep(1.0)
        served = [s for s in socks if answered(s, 0.01)]
        assert len(served) == 100, f"{len(served)} connections served, max.connections=100"
        assert broker_sockets(b.pid) - baseline <= 100 + 2
        cpu0 = cpu_seconds(b.pid)
        time.sleep(2.0)
        cpu = cpu_seconds(b.pid) - cpu0
        assert cpu < 0.3, f"broker used {cpu:.2f} s of CPU in 2 s while 200 connections waited"
        for s in served[:10]:
            s.close()
        waiting = [s for s in socks if s not in served]
        time.sleep(0.5)
        more = [s for s in waiting if answered(s, 0.01)]
        assert len(more) == 10, f"{len(more)} waiting connections let in after 10 closed"
    assert "not accepting until one closes" in b.log_text()
    wait_until(lambda: broker_sockets(b.pid) <= baseline + 2, 5, "the broker to close its sockets")
    assert_served(b.bootstrap)


def test_max_connections_per_ip_and_overrides(make_broker: BrokerFactory) -> None:
    """Past its address's limit a connection is closed at once; an override raises the limit."""
    b = make_broker({"max.connections.per.ip": 5})
    with open_sockets(b, 12, API_VERSIONS_REQ) as socks:
        time.sleep(0.5)
        served = [s for s in socks if answered(s, 0.01)]
        refused = [s for s in socks if s not in served and closed_by_peer(s)]
        assert (len(served), len(refused)) == (5, 7)
    assert "Rejected connection from 127.0.0.1, address already has the configured maximum of 5" in b.log_text()
    b2 = make_broker({"max.connections.per.ip": 5, "max.connections.per.ip.overrides": "localhost:8,10.1.1.1:1"})
    with open_sockets(b2, 12, API_VERSIONS_REQ) as socks:
        time.sleep(0.5)
        assert sum(answered(s, 0.01) for s in socks) == 8
    b2.assert_alive()


FD_LIMIT = 256


def test_descriptor_exhaustion_leaves_room_for_segment_rolls(make_broker: BrokerFactory) -> None:
    """Under RLIMIT_NOFILE=256, 400 client connections must neither spin the accept loop nor take the
    descriptors the broker needs to roll segments (which would take the log dir offline and halt it)."""
    b = make_broker({"log.segment.bytes": 3000}, start=False)
    limits = b._limits

    def low_fd_limit() -> None:
        limits()
        resource.setrlimit(resource.RLIMIT_NOFILE, (FD_LIMIT, FD_LIMIT))

    b._limits = low_fd_limit  # type: ignore[method-assign]
    b.start()
    assert b.pid is not None
    topic = unique("fds")
    value = b"v" * 1000
    with wire.Conn(b.bootstrap) as c:
        assert wire.create_topics(c, [(topic, 1, {})])[0][1] == 0
        with open_sockets(b, 400) as socks:
            time.sleep(1.0)
            cpu0 = cpu_seconds(b.pid)
            log0 = len(b.log_text())
            time.sleep(2.0)
            cpu = cpu_seconds(b.pid) - cpu0
            grown = len(b.log_text()) - log0
            assert cpu < 0.3, f"broker used {cpu:.2f} s of CPU in 2 s at the descriptor limit"
            assert grown < 2000, f"broker wrote {grown} bytes of log in 2 s at the descriptor limit"
            # every produce rolls a segment: each roll opens a log, an offset and a time index
            for i in range(12):
                batch = build_batch([(b"k", value), (b"k", value)], timestamp=int(time.time() * 1000))
                err, base = wire.produce(c, topic, 0, batch, acks=1)
                assert (err, base) == (0, 2 * i), f"produce {i}: error {err}\n{b.log_tail()}"
            b.assert_alive()
            assert len(b.segment_files(topic)) >= 10
            assert fd_count(b.pid) < FD_LIMIT
            assert sum(closed_by_peer(s) for s in socks) == 0
    text = b.log_text()
    assert "I/O error" not in text and "halting" not in text, b.log_tail()
    assert text.count("accept failed") <= 5
    wait_until(lambda: fd_count(b.pid) < 100, 5, "the broker to close its descriptors")
    assert_served(b.bootstrap)


def vm_bytes(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} in /proc/{pid}/status")


def test_declared_frame_sizes_reserve_nothing(make_broker: BrokerFactory) -> None:
    """200 connections each declaring a 100 MB request and sending 128 KiB of it: 20 GB declared, under
    the suite's 2 GiB address-space cap. The broker holds what arrived (a few times over), not what was
    declared, and goes on serving."""
    b = make_broker({})
    assert b.pid is not None
    head = struct.pack(">i", 100_000_000) + b"\x00\x00\x00\x09\x00\x00\x00\x01" + b"\x00" * (128 * 1024)
    with open_sockets(b, 200, head) as socks:
        time.sleep(1.5)
        b.assert_alive()
        assert sum(closed_by_peer(s) for s in socks) == 0  # all held open, none dropped
        rss, vm = vm_bytes(b.pid, "VmRSS"), vm_bytes(b.pid, "VmSize")
        assert rss < 600 << 20, f"RSS {rss >> 20} MiB with 200 x 128 KiB received"
        assert vm < 2 << 30, f"address space {vm >> 20} MiB"
        assert_served(b.bootstrap)
    assert "out of memory" not in b.log_text()


def test_queued_max_request_bytes_bounds_requests_in_flight(make_broker: BrokerFactory) -> None:
    """queued.max.request.bytes (Kafka's MemoryPool): once a large request holds the pool, the broker
    reads no further request from anyone until the pool has room again; then the waiting one is served."""
    b = make_broker({"queued.max.request.bytes": 1_000_000})
    with open_sockets(b, 1, struct.pack(">i", 50_000_000) + b"\x00" * 1024) as (hog,):
        time.sleep(0.5)
        with open_sockets(b, 1, API_VERSIONS_REQ) as (waiting,):
            assert not answered(waiting, 1.0), "a request was read while the pool was exhausted"
            hog.close()  # its reservation is released when its connection closes
            assert answered(waiting, 5.0), "the waiting request was not served once the pool had room"
    b.assert_alive()
    assert_served(b.bootstrap)
