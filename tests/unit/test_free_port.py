"""odradek.devcluster.zookeeper.free_port: ports below the ephemeral range, a slice per xdist worker."""

from __future__ import annotations

import socket

import pytest

from odradek.devcluster import zookeeper as zkmod


def _picker(monkeypatch: pytest.MonkeyPatch, worker: str) -> zkmod._PortPicker:
    monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
    monkeypatch.setattr(zkmod, "_ephemeral_range", lambda: (32768, 60999))
    return zkmod._PortPicker()


def test_ports_are_below_the_ephemeral_range_distinct_and_free(monkeypatch: pytest.MonkeyPatch) -> None:
    p = _picker(monkeypatch, "gw1")
    ports = [p.pick() for _ in range(50)]
    assert len(set(ports)) == 50
    assert all(10000 <= port < 32768 for port in ports)
    for port in ports[:5]:
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


def test_workers_get_disjoint_slices(monkeypatch: pytest.MonkeyPatch) -> None:
    a = {_picker(monkeypatch, "gw0").pick() for _ in range(20)}
    b = {_picker(monkeypatch, "gw1").pick() for _ in range(20)}
    width = (32768 - 10000) // zkmod._PortPicker.SLICES
    assert all(10000 <= x < 10000 + width for x in a)
    assert all(10000 + width <= x < 10000 + 2 * width for x in b)


def test_a_taken_port_is_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    p = _picker(monkeypatch, "gw2")
    first = p.pick()
    assert p._next is not None
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", p._next))
        holder.listen()
        taken = holder.getsockname()[1]
        assert p.pick() not in (taken, first)


def test_no_room_below_the_ephemeral_range_falls_back_to_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(zkmod, "_ephemeral_range", lambda: (1024, 65535))
    port = zkmod._PortPicker().pick()
    assert 1024 <= port <= 65535
