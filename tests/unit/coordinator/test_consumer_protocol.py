"""The consumer embedded protocol codec (Kafka's ConsumerProtocol): what DescribeGroups writes
for a KIP-848 group's members reads back, and the bytes are Kafka's v0 layouts."""

from __future__ import annotations

import struct

import pytest

from odradek.coordinator.group.consumer_protocol import (
    assignment_partitions,
    encode_assignment,
    encode_subscription,
    subscription_topics,
)


def test_subscription_v0_bytes() -> None:
    assert encode_subscription(["b", "a"]) == (
        struct.pack(">hi", 0, 2) + b"\x00\x01a" + b"\x00\x01b" + struct.pack(">i", -1)
    )
    assert encode_subscription([]) == struct.pack(">hii", 0, 0, -1)


def test_assignment_v0_bytes() -> None:
    assert encode_assignment({"t": [2, 0], "a": []}) == (
        struct.pack(">hi", 0, 2) + b"\x00\x01a" + struct.pack(">i", 0)
        + b"\x00\x01t" + struct.pack(">iii", 2, 0, 2) + struct.pack(">i", -1)
    )


def test_round_trip() -> None:
    topics = {"orders", "payments", "ünïcode"}
    assert subscription_topics(encode_subscription(topics)) == topics
    parts = {"orders": [0, 3, 1], "payments": [7]}
    assert assignment_partitions(encode_assignment(parts)) == {"orders": [0, 1, 3], "payments": [7]}
    assert assignment_partitions(encode_assignment({})) == {}


@pytest.mark.parametrize("data", [b"\x00\x00\x00\x00\x00\x05", b"\x00\x00\x00\x00\x00\x01\x00\x09ab"])
def test_malformed_raises_value_error(data: bytes) -> None:
    with pytest.raises(ValueError):
        subscription_topics(data)
    with pytest.raises(ValueError):
        assignment_partitions(data)
