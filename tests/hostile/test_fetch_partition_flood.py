"""One Fetch naming a million distinct partitions must not stop the broker for everyone else (issue 33).

Every request is served on the broker's one event loop. A Fetch naming 1,000,000 distinct partitions (of
an unknown topic, or out of a real topic's range) held that loop 20-24 s: kio decoding an object per entry,
then the handler's work per partition, then the response. Kafka serves such a request on one of its
handler threads while the others go on; here a Fetch may name at most the cluster's partitions plus
10,000 (odradek.server.handlers.fetch.PARTITIONS_OVER_CLUSTER), and as many topic entries, counted on
the wire before anything is decoded: a larger one is refused with a log line and a closed connection.

Each attack is sent while another client asks for Metadata every 20 ms on its own connection; that
client must be answered within a second every time, the broker's peak RSS (VmHWM) must stay within
:data:`RSS_GROWTH_MB` of its RSS before the attacks (the frames themselves are up to 48 MB), the
attacker must see its connection closed, and the broker must go on serving. A Fetch of exactly the
bound is answered.
"""

from __future__ import annotations

import struct
import time
import uuid
from collections.abc import Sequence

import pytest
from integration import wire
from integration.broker import Broker
from integration.clients import assert_served, create_topic, unique

from ._admin_wire import bystander, rss_mb
from ._records import batch, produce_v8, records_section
from .test_fetch_amplification import parse_fetch_v4

MILLION = 1_000_000
OVER_CLUSTER = 10_000  # PARTITIONS_OVER_CLUSTER: entries a Fetch may name beyond the cluster's partitions
OTHER_CLIENT_S = 1.0  # the slowest Metadata answer another client may get meanwhile
REFUSED_S = 5.0  # the attacker's connection is closed within this (the frame read, a few counts)
RSS_GROWTH_MB = 200  # the broker's peak RSS over its RSS before the attacks (before the bound: VmHWM 867 MB
# after one Fetch of a million partitions, each in its own topic element)
UNKNOWN_TOPIC_OR_PARTITION = 3

# (topic name or topic id, [partition indexes])
Topic = tuple[str | uuid.UUID, Sequence[int]]


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def fetch_body(version: int, topics: Sequence[Topic], forgotten: Sequence[Topic] = ()) -> bytes:
    """A consumer's FetchRequest (v4, v7, v12 or v13) as raw bytes, each partition fetched from offset 0
    with 1 MiB; quick enough for a million entries."""
    assert version in (4, 7, 12, 13)
    flexible = version >= 12

    def count(n: int) -> bytes:
        return _uvarint(n + 1) if flexible else struct.pack(">i", n)

    def topic(t: str | uuid.UUID) -> bytes:
        if isinstance(t, uuid.UUID):
            assert version >= 13
            return t.bytes
        raw = t.encode()
        return _uvarint(len(raw) + 1) + raw if flexible else struct.pack(">h", len(raw)) + raw

    if version >= 12:  # partition, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset,
        entry = struct.Struct(">iiqiqib")  # partition_max_bytes, no tagged fields
        fields: tuple[int, ...] = (-1, 0, -1, -1, 1 << 20, 0)
    elif version >= 7:
        entry = struct.Struct(">iqqi")  # partition, fetch_offset, log_start_offset, partition_max_bytes
        fields = (0, -1, 1 << 20)
    else:
        entry = struct.Struct(">iqi")  # partition, fetch_offset, partition_max_bytes
        fields = (0, 1 << 20)
    tag = b"\x00" if flexible else b""
    out = [struct.pack(">iiiib", -1, 0, 0, 0x7FFFFFFF, 0) if version < 15 else b""]
    if version >= 7:
        out.append(struct.pack(">ii", 0, -1))  # no session
    out.append(count(len(topics)))
    for t, parts in topics:
        out += [topic(t), count(len(parts))]
        out.append(b"".join(entry.pack(p, *fields) for p in parts))
        out.append(tag)
    if version >= 7:
        out.append(count(len(forgotten)))
        for t, parts in forgotten:
            out += [topic(t), count(len(parts)), b"".join(struct.pack(">i", p) for p in parts), tag]
    if version >= 11:
        out.append(_uvarint(1) if flexible else struct.pack(">h", 0))  # rack_id ""
    out.append(tag)
    return b"".join(out)


def vm_hwm_mb(pid: int) -> float:
    """The process's peak resident set size so far."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def refused(bootstrap: str, version: int, body: bytes) -> float:
    """Send the Fetch; assert the broker closes the connection without an answer; the seconds it took."""
    with wire.Conn(bootstrap, timeout=60) as c:
        t0 = time.monotonic()
        c.send(wire.encode_request(wire.FETCH, version, c.next_corr(), body, flexible=version >= 12))
        what, _ = c.outcome(timeout=30)
        took = time.monotonic() - t0
    assert what == "closed", f"a Fetch v{version} of {len(body) >> 10} KiB was not refused: {what}"
    assert took < REFUSED_S, f"refused after {took:.1f} s"
    return took


@pytest.mark.timeout(300)
def test_a_million_partitions_in_one_fetch_are_refused_while_others_are_served(broker: Broker) -> None:
    b = broker
    topic = unique("real")
    create_topic(b.bootstrap, topic, 3)
    with wire.Conn(b.bootstrap, timeout=30) as c:
        err, *_ = produce_v8(c, topic, 0, batch(records_section(1, value=b"x" * 100), count=1))
        assert err == wire.NONE
    assert b.pid is not None
    before = rss_mb(b.pid)
    attacks: list[tuple[str, int, bytes]] = [
        ("v4, one unknown topic", 4, fetch_body(4, [("no-such-topic", range(MILLION))])),
        ("v4, a real topic's partitions 0..999,999, each its own topic element", 4,
         fetch_body(4, [(topic, (p,)) for p in range(MILLION)])),
        ("v4, a million topic entries naming no partition", 4, fetch_body(4, [("t", ()) for _ in range(MILLION)])),
        ("v4, 1,000 unknown topics of 1,000 partitions", 4,
         fetch_body(4, [(f"t{i}", range(1000)) for i in range(1000)])),
        ("v7, a million forgotten partitions", 7, fetch_body(7, [], [("gone", range(MILLION))])),
        ("v12, a real topic's partitions", 12, fetch_body(12, [(topic, range(MILLION))])),
        ("v13, a million unknown topic ids", 13, fetch_body(13, [(uuid.uuid4(), (0,)) for _ in range(MILLION)])),
    ]
    with bystander(b.bootstrap, b.pid, metadata=True) as other:
        for what, version, body in attacks:
            took = refused(b.bootstrap, version, body)
            print(f"{what}: {len(body) >> 20} MiB, refused in {took * 1000:.0f} ms")
    peak = vm_hwm_mb(b.pid)
    print(f"{len(other.round_trips)} Metadata round trips, slowest {other.slowest * 1000:.0f} ms; "
          f"RSS {before:.0f} MB before, peak {peak:.0f} MB")
    assert other.slowest < OTHER_CLIENT_S, f"another client waited {other.slowest:.2f} s for Metadata"
    assert peak - before < RSS_GROWTH_MB, f"RSS grew from {before:.0f} MB to a peak of {peak:.0f} MB"
    b.assert_alive()
    assert_served(b.bootstrap)


@pytest.mark.timeout(180)
def test_a_fetch_of_the_bound_is_answered_and_one_more_is_refused(broker: Broker) -> None:
    """The cluster holds 3 partitions: a Fetch naming 10,003 (3 real, 10,000 past the topic's range) gets an
    answer for each; 10,004 closes the connection, and the broker goes on answering the same Fetch."""
    b = broker
    topic = unique("edge")
    create_topic(b.bootstrap, topic, 3)
    limit = 3 + OVER_CLUSTER
    body = fetch_body(4, [(topic, range(limit))])
    with wire.Conn(b.bootstrap, timeout=60) as c:
        corr = c.next_corr()
        c.send(wire.encode_request(wire.FETCH, 4, corr, body))
        payload = c.recv_frame()
    got = parse_fetch_v4(payload)
    assert len(got) == limit
    assert {e for _, p, e, _ in got if p < 3} == {0}
    assert {e for _, p, e, _ in got if p >= 3} == {UNKNOWN_TOPIC_OR_PARTITION}
    refused(b.bootstrap, 4, fetch_body(4, [(topic, range(limit + 1))]))
    with wire.Conn(b.bootstrap, timeout=60) as c:
        c.send(wire.encode_request(wire.FETCH, 4, c.next_corr(), body))
        assert len(parse_fetch_v4(c.recv_frame())) == limit
    assert_served(b.bootstrap)
