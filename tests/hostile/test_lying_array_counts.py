"""A request whose array count lies: kio's native reader reserved memory for the claimed count before
reading an element, and a failed allocation in Rust aborts the process, so 17 bytes of Metadata v12 took
the broker down (found by the fuzzer, tests/fuzz). Each must close that one connection (or be answered)
while the broker keeps serving."""

from __future__ import annotations

import struct

import pytest
from integration import wire
from integration.broker import Broker
from integration.clients import assert_served

# (api_key, version, body): counts of ~2^34 (compact, flexible versions) or 2^31 - 1 (legacy)
LIARS = [
    (3, 12, b"\xc3\xc3\xc3\xc3\x40"),  # Metadata topics
    (3, 4, b"\x7f\xff\xff\xff\x01"),  # Metadata topics, legacy array
    (9, 8, b"\xff\xff\xff\xff\x0f"),  # OffsetFetch groups
    (19, 7, b"\xff\xff\xff\xff\x0f"),  # CreateTopics topics
    (11, 9, b"\x02g\x00\x00\x00\x00\x01\x02m\x00\x01\x02c\x02p\xff\xff\xff\xff\x0f"),  # JoinGroup protocols
]


def _send(b: Broker, api_key: int, version: int, body: bytes, flexible: bool) -> str:
    with wire.Conn(b.bootstrap, timeout=5) as c:
        header = struct.pack(">hhih", api_key, version, 7, 1) + b"x" + (b"\x00" if flexible else b"")
        frame = header + body
        c.send(struct.pack(">i", len(frame)) + frame)
        return c.outcome()[0]


@pytest.mark.timeout(120)
def test_lying_array_counts_close_the_connection_and_the_broker_serves_on(broker: Broker) -> None:
    for api_key, version, body in LIARS:
        flexible = not (api_key == 3 and version == 4)
        outcome = _send(broker, api_key, version, body, flexible)
        broker.assert_alive()
        assert outcome in ("closed", "frame"), (api_key, version, outcome)
    assert_served(broker.bootstrap)
    assert "array of" in broker.log_text()
