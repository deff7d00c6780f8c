"""Floods of the HTTP endpoint (the console and /metrics) on a real broker process: idle and
slowloris connections filling every slot, and 10,000 connections. The endpoint stays reachable for a
scraper (the connection waiting longest for its client makes room for a new one), its limits hold,
and the Kafka listener answers throughout. One address holds at most http.max.connections.per.ip of
the slots, so another address's connections are left alone (127.0.0.1 against 127.0.0.2)."""

from __future__ import annotations

import base64
import http.client
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from integration import wire
from integration.broker import HOST, Broker, BrokerFactory

SLOTS = 64  # the HTTP server's max_connections
PER_IP = 16  # http.max.connections.per.ip's default


def _scrape(port: int, timeout: float = 10.0) -> int:
    c = http.client.HTTPConnection(HOST, port, timeout=timeout)
    try:
        c.request("GET", "/metrics", headers={"Connection": "close"})
        r = c.getresponse()
        r.read()
        return r.status
    finally:
        c.close()


def _kafka_round_trips(b: Broker, seconds: float) -> list[float]:
    """ApiVersions round trips on one Kafka connection for ``seconds``; each one's latency."""
    out = []
    with wire.Conn(b.bootstrap, timeout=15) as conn:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            t0 = time.monotonic()
            wire.api_versions(conn)
            out.append(time.monotonic() - t0)
            time.sleep(0.02)
    return out


@contextmanager
def _held(port: int, n: int, first_bytes: bytes = b"", source: str = HOST) -> Iterator[list[socket.socket]]:
    socks = []
    try:
        for _ in range(n):
            s = socket.create_connection((HOST, port), timeout=10, source_address=(source, 0))
            if first_bytes:
                s.sendall(first_bytes)
            socks.append(s)
        yield socks
    finally:
        for s in socks:
            s.close()


def test_idle_and_slowloris_connections_do_not_lock_the_scraper_out(make_broker: BrokerFactory) -> None:
    b = make_broker()
    port = b.http_port
    assert _scrape(port) == 200
    # every slot taken, three times over: idle (not a byte), slowloris (a header never ended), and a
    # body promised and never sent
    slow_body = b"POST /actions/create-topic HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\nname="
    with _held(port, SLOTS), _held(port, SLOTS, b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a"), \
            _held(port, SLOTS, slow_body):
        time.sleep(0.5)
        statuses = [_scrape(port) for _ in range(5)]
        lat = _kafka_round_trips(b, 1.0)
    assert statuses == [200] * 5
    assert lat and max(lat) < 5.0
    b.assert_alive()


def test_ten_thousand_connections(make_broker: BrokerFactory) -> None:
    b = make_broker()
    port = b.http_port
    opened: list[socket.socket] = []
    failures: list[str] = []
    lock = threading.Lock()

    def flood(n: int) -> None:
        mine = []
        for i in range(n):
            try:
                s = socket.create_connection((HOST, port), timeout=10)
                if i % 2:
                    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # headers never ended
                mine.append(s)
            except OSError as e:
                failures.append(repr(e))
        with lock:
            opened.extend(mine)

    threads = [threading.Thread(target=flood, args=(2500,)) for _ in range(4)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    lat: list[float] = []
    while any(t.is_alive() for t in threads):
        lat += _kafka_round_trips(b, 0.5)
    took = time.monotonic() - t0
    try:
        assert len(opened) + len(failures) == 10_000
        assert len(opened) >= 9_000, failures[:5]  # connect() itself succeeds: the broker keeps accepting
        assert lat and max(lat) < 5.0, f"Kafka round trips up to {max(lat):.2f}s during the flood"
        statuses = [_scrape(port) for _ in range(3)]  # with all 10,000 still open
        assert statuses == [200] * 3
        text = b.log_text()
        assert "Traceback" not in text
    finally:
        for s in opened:
            s.close()
    print(f"10,000 connections in {took:.1f}s; Kafka ApiVersions max {max(lat) * 1000:.0f} ms over {len(lat)} "
          f"round trips")
    b.assert_alive()
    assert _scrape(port) == 200


def _get(conn: http.client.HTTPConnection, path: str) -> int:
    conn.request("GET", path)
    r = conn.getresponse()
    r.read()
    return r.status


def _closed(s: socket.socket) -> bool:
    """Whether the server closed ``s`` (EOF or reset within a short wait)."""
    s.settimeout(0.5)
    try:
        return s.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def test_one_address_holds_at_most_its_share_of_the_slots(make_broker: BrokerFactory) -> None:
    """127.0.0.1 opens every slot's worth of idle connections, then as many slowloris ones: it never
    holds more than http.max.connections.per.ip (its oldest are closed as newer ones come), and
    127.0.0.2's keep-alive connection, idle all along and the longest-waiting of all, is still served
    on the same connection. A third address gets in at once, and the closes are logged, not every one."""
    b = make_broker()
    port = b.http_port
    other = http.client.HTTPConnection(HOST, port, timeout=10, source_address=("127.0.0.2", 0))
    try:
        assert _get(other, "/metrics") == 200
        assert other.sock is not None
        other_local = other.sock.getsockname()
        with _held(port, SLOTS) as idle, _held(port, SLOTS, b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: a"):
            time.sleep(0.5)
            open_idle = [s for s in idle if not _closed(s)]
            assert not open_idle, f"{len(open_idle)} of the first flood still open"  # the later ones took their place
            assert _get(other, "/metrics") == 200  # not evicted: its address is under its limit
            assert other.sock is not None and other.sock.getsockname() == other_local  # the same connection
            with _held(port, 1, source="127.0.0.3") as third:
                third[0].sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
                assert third[0].recv(12) == b"HTTP/1.1 200"
            assert _scrape(port) == 200  # 127.0.0.1 itself: its newcomer takes its own oldest one's place
    finally:
        other.close()
    text = b.log_text()
    lines = [ln for ln in text.splitlines() if "over http.max.connections.per.ip" in ln]
    assert lines and len(lines) < 10, lines  # ~2 * 64 - 16 closes, one line per 10 s
    assert f"which had its maximum of {PER_IP}" in lines[0] and "127.0.0.1" in lines[0]
    b.assert_alive()


def test_busy_connections_over_the_limit_are_closed_at_once(make_broker: BrokerFactory) -> None:
    """With http.max.connections.per.ip=2 and both of 127.0.0.1's connections busy (each answering a
    wrong password after connection.failed.authentication.delay.ms, 8 s here), a third from 127.0.0.1
    is closed at once, not queued; 127.0.0.2 is served meanwhile."""
    b = make_broker({"http.max.connections.per.ip": 2, "connection.failed.authentication.delay.ms": 8000})
    port = b.http_port
    wrong = (b"GET /topics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic "
             + base64.b64encode(b"nobody:nothing") + b"\r\n\r\n")
    with _held(port, 2, wrong) as busy:
        time.sleep(2.0)  # both requests read (a loaded machine): they are being answered
        t0 = time.monotonic()
        with _held(port, 1, b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") as over:
            over[0].settimeout(3)
            assert over[0].recv(1) == b""
        assert time.monotonic() - t0 < 3
        t0 = time.monotonic()
        other = http.client.HTTPConnection(HOST, port, timeout=10, source_address=("127.0.0.2", 0))
        try:
            assert _get(other, "/metrics") == 200
        finally:
            other.close()
        assert time.monotonic() - t0 < 3
        for s in busy:  # still answered, after the delay
            s.settimeout(10)
            assert s.recv(12) == b"HTTP/1.1 401"
    assert "all of them were being answered, so the new one was closed" in b.log_text()
    b.assert_alive()
