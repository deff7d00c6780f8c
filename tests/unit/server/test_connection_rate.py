"""KIP-612 connection creation rates: broker-wide (held) and per address (closed)."""

from __future__ import annotations

from odradek.server.quota.connection_rate import INT_MAX, ConnectionRateQuotas

T0 = 1_000_000


def test_broker_wide_rate_holds_connections_over_it() -> None:
    bound = [5]
    q = ConnectionRateQuotas(lambda: bound[0], dict, samples=2, window_s=1)
    holds = [q.record_broker(T0) for _ in range(8)]
    assert holds[:5] == [0] * 5 and all(h > 0 for h in holds[5:])
    assert holds[5] == 200 and max(holds) <= 1000  # (6 - 5) / 5 of a window, at most one window
    bound[0] = INT_MAX  # dynamic: unbounded again
    assert q.record_broker(T0) == 0


def test_ip_rate_closes_connections_over_it_and_does_not_count_them() -> None:
    rates: dict[str | None, float] = {"10.0.0.1": 2.0}
    q = ConnectionRateQuotas(lambda: INT_MAX, lambda: rates, samples=2, window_s=1)
    assert [q.record_ip("10.0.0.1", T0) for _ in range(2)] == [0, 0]
    assert q.record_ip("10.0.0.1", T0) == 500  # the third in a second: closed after (3 - 2) / 2 s
    assert q.record_ip("10.0.0.1", T0) == 500  # a refused one was not counted
    assert q.record_ip("10.0.0.2", T0) == 0  # no quota for this address
    assert q.record_ip("10.0.0.1", T0 + 2500) == 0  # the samples aged out
    rates[None] = 1.0  # the default ip entity now bounds every other address
    assert q.record_ip("10.0.0.2", T0) == 0
    assert q.record_ip("10.0.0.2", T0) > 0
    assert q.ip_quota("10.0.0.1") == 2.0 and q.ip_quota("10.9.9.9") == 1.0


def test_a_listeners_own_rate() -> None:
    q = ConnectionRateQuotas(lambda: INT_MAX, dict, samples=2, window_s=1)
    assert [q.record_listener("EXTERNAL", 2, T0) for _ in range(2)] == [0, 0]
    assert q.record_listener("EXTERNAL", 2, T0) == 500
    assert q.record_listener("INTERNAL", 2, T0) == 0  # each listener has its own rate
    assert q.record_listener("EXTERNAL", INT_MAX, T0) == 0  # unbounded
