"""KIP-612 connection creation rates against a real broker: an address's connection_creation_rate
(``odradek configs --entity-type ips``) gets connections past it closed after the throttle time
while another address is not held; ``max.connection.creation.rate`` delays, and does not refuse,
connections past the broker-wide rate. Clients connect from chosen loopback addresses
(127.0.0.2, 127.0.0.3) and send ApiVersions v0."""

from __future__ import annotations

import socket
import struct
import time

from .broker import Broker, BrokerFactory
from .test_client_quotas import configs_cli

API_VERSIONS_V0 = struct.pack(">hhih", 18, 0, 7, 4) + b"test"


def _connect(b: Broker, source: str) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(10)
    s.bind((source, 0))
    s.connect((b.host, b.port))
    return s


def _served(s: socket.socket) -> tuple[bool, float]:
    """(answered, seconds until answered or closed) for one ApiVersions on ``s``."""
    t0 = time.monotonic()
    try:
        s.sendall(struct.pack(">i", len(API_VERSIONS_V0)) + API_VERSIONS_V0)
        head = s.recv(8)
    except OSError:
        return False, time.monotonic() - t0
    finally:
        s.close()
    return len(head) == 8 and struct.unpack(">i", head[4:])[0] == 7, time.monotonic() - t0


def test_an_address_over_its_connection_creation_rate_is_closed(make_broker: BrokerFactory) -> None:
    b = make_broker(quota_window_num=2)
    res = configs_cli(b, "--alter", "--entity-type", "ips", "--entity-name", "127.0.0.3", "--add-config",
                      "connection_creation_rate=2")
    assert res.returncode == 0 and "Completed updating config for ip '127.0.0.3'." in res.stdout, res.stderr
    res = configs_cli(b, "--describe", "--entity-type", "ips")
    assert "Quota configs for ip '127.0.0.3' are connection_creation_rate=2.0" in res.stdout, res.stdout
    throttled = [_connect(b, "127.0.0.3") for _ in range(8)]
    free = [_connect(b, "127.0.0.2") for _ in range(8)]
    results = [_served(s) for s in throttled]
    served = sum(ok for ok, _ in results)
    assert 1 <= served <= 3, results  # two a second, measured over one window at first
    closed_after = [t for ok, t in results if not ok]
    assert closed_after and max(closed_after) >= 0.2, results  # closed after the throttle time, not at once
    assert all(ok for ok, _ in (_served(s) for s in free))
    # a second later the address may connect again
    time.sleep(2.5)
    assert _served(_connect(b, "127.0.0.3"))[0]
    # the default ip entity bounds every address without its own quota
    res = configs_cli(b, "--alter", "--entity-type", "ips", "--entity-default", "--add-config",
                      "connection_creation_rate=1")
    assert res.returncode == 0, res.stderr
    later = [_served(_connect(b, "127.0.0.2")) for _ in range(5)]
    assert sum(ok for ok, _ in later) <= 2, later


def test_broker_wide_rate_delays_connections(make_broker: BrokerFactory) -> None:
    b = make_broker(quota_window_num=2, max_connection_creation_rate=5)
    t0 = time.monotonic()
    socks = [_connect(b, "127.0.0.2") for _ in range(20)]
    results = [_served(s) for s in socks]
    took = time.monotonic() - t0
    assert all(ok for ok, _ in results), results  # held, never refused
    assert 1.5 <= took <= 8.0, took  # 20 connections at 5/s, the first window's worth at once
    res = configs_cli(b, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
                      "max.connection.creation.rate=2147483647")
    assert res.returncode == 0, res.stderr
    time.sleep(0.5)
    t0 = time.monotonic()
    assert all(ok for ok, _ in (_served(_connect(b, "127.0.0.2")) for _ in range(20)))
    assert time.monotonic() - t0 < 1.0


def test_a_listeners_own_rate_delays_its_connections(make_broker: BrokerFactory) -> None:
    b = make_broker({"quota.window.num": "2", "listener.name.plaintext.max.connection.creation.rate": "5"})
    assert "not implemented" not in b.log_tail()  # a per-listener override of an implemented setting
    t0 = time.monotonic()
    results = [_served(_connect(b, "127.0.0.2")) for _ in range(20)]
    took = time.monotonic() - t0
    assert all(ok for ok, _ in results), results
    assert 1.5 <= took <= 8.0, took
