"""Every advertised API version fed requests that are well-formed on the wire but arbitrary
in content (hypothesis strategies from kio's schemas). The broker must answer or close that
one connection, never leave an exception unhandled on its loop, and keep serving."""

from __future__ import annotations

import contextlib
import io
import socket
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kio.index import load_request_schema
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from odradek.server.handlers import registry

from .broker import Broker
from .clients import assert_served

SHARED_BROKER_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}

# Produce: records cannot be generated; CreateTopics/CreatePartitions: arbitrary partition
# counts exhaust file descriptors by design; JoinGroup/SyncGroup/Fetch legitimately wait.
SKIP = {0, 19, 37, 11, 14, 1}


def _cases() -> list[tuple[int, int]]:
    return [(k, v) for k, h in sorted(registry.items()) if k not in SKIP for v in range(h.min_version, h.max_version + 1)]


def _send(port: int, frame: bytes) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(struct.pack(">i", len(frame)) + frame)
        with contextlib.suppress(OSError):
            s.recv(4)


def _fuzz(port: int, key: int, version: int) -> None:
    cls = load_request_schema(key, version)
    header = cls.__header_schema__

    @settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(st.from_type(cls))
    def one(req: object) -> None:
        buf = io.BytesIO()
        entity_writer(header)(buf, header(request_api_key=i16(key), request_api_version=i16(version),
                                          correlation_id=i32(7), client_id="fuzz"))
        entity_writer(cls)(buf, req)
        _send(port, buf.getvalue())

    one()


@pytest.mark.timeout(600)
def test_arbitrary_requests_never_break_the_broker(shared_broker: Broker) -> None:
    port = int(shared_broker.bootstrap.rsplit(":", 1)[1])
    for key, version in _cases():
        _fuzz(port, key, version)
    shared_broker.assert_alive()
    assert_served(shared_broker.bootstrap)
    log = shared_broker.log_text()
    assert "Exception in callback" not in log, log[log.index("Exception in callback") - 200:][:3000]
