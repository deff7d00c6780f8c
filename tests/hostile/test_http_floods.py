"""Floods of the HTTP endpoint (the console and /metrics) on a real broker process: idle and
slowloris connections filling every slot, and 10,000 connections. The endpoint stays reachable for a
scraper (the connection waiting longest for its client makes room for a new one), its limits hold,
and the Kafka listener answers throughout."""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from integration import wire
from integration.broker import HOST, Broker, BrokerFactory

SLOTS = 64  # the HTTP server's max_connections


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
def _held(port: int, n: int, first_bytes: bytes = b"") -> Iterator[list[socket.socket]]:
    socks = []
    try:
        for _ in range(n):
            s = socket.create_connection((HOST, port), timeout=10)
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
