"""Hostile and malformed input over raw sockets. After each case a fresh confluent-kafka client must
still be served (metadata plus a produce/consume round trip) and the broker process must be alive."""

from __future__ import annotations

import errno
import os
import selectors
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import crc32c
import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_until

from odradek.protocol.records import build_batch

from . import wire
from .broker import Broker
from .clients import assert_served, create_topic, unique, watermarks

MAX_MESSAGE_BYTES = 20000
SHARED_BROKER_OVERRIDES = {
    "message.max.bytes": str(MAX_MESSAGE_BYTES),
    "auto.create.topics.enable": "false",
}


@pytest.fixture(scope="module")
def topic(shared_broker: Broker) -> str:
    name = unique("raw")
    create_topic(shared_broker.bootstrap, name, 1)
    return name


@pytest.fixture
def served(shared_broker: Broker) -> Iterator[Broker]:
    """Yields the shared broker; afterwards asserts it is alive and still serving a normal client."""
    yield shared_broker
    shared_broker.assert_alive()
    assert_served(shared_broker.bootstrap)
    shared_broker.assert_alive()


def records(n: int = 3, value: bytes = b"v" * 20) -> bytes:
    return build_batch([(f"k{i}".encode(), value) for i in range(n)], timestamp=int(time.time() * 1000))


# ---------------------------------------------------------------------------------------------- framing


def _hw(b: Broker, topic: str) -> int:
    return watermarks(b.bootstrap, topic)[1]



@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["random-stream", "random-in-frame", "random-after-request"])
def test_random_bytes(served: Broker, kind: str) -> None:
    with wire.Conn(served.bootstrap) as c:
        if kind == "random-stream":
            c.send(os.urandom(4096))
        elif kind == "random-in-frame":
            c.send(wire.frame(os.urandom(1000)))
        else:
            apis = wire.api_versions(c)  # a healthy exchange first
            assert _core_apis_listed(apis)
            c.send(os.urandom(4096))
        outcome, _ = c.outcome(timeout=2)
        assert outcome in ("closed", "frame", "open")


def _core_apis_listed(apis: dict[int, tuple[int, int]]) -> bool:
    return wire.API_VERSIONS in apis and wire.PRODUCE in apis and wire.FETCH in apis


@pytest.mark.timeout(60)
@pytest.mark.parametrize("size", [2**31 - 1, 200 * 1024 * 1024, -1, -(2**31)])
def test_absurd_size_field_closes_connection(served: Broker, size: int) -> None:
    with wire.Conn(served.bootstrap) as c:
        c.send(struct.pack(">i", size) + b"\x00" * 64)
        outcome, data = c.outcome(timeout=5)
        assert outcome == "closed", f"expected the broker to close the connection, got {outcome} {data[:40]!r}"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("size", [0, 1, 4, 6, 9])
def test_frame_smaller_than_header_closes_connection(served: Broker, size: int) -> None:
    header = wire.request_header(wire.METADATA, 1, 77, "x")  # 13 bytes; cut to `size`
    with wire.Conn(served.bootstrap) as c:
        c.send(struct.pack(">i", size) + header[:size])
        outcome, data = c.outcome(timeout=5)
        assert outcome == "closed", f"got {outcome} {data[:40]!r}"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("api_key", [32000, 1000, -5])
def test_unknown_api_key(served: Broker, api_key: int) -> None:
    with wire.Conn(served.bootstrap) as c:
        c.send(wire.encode_request(api_key, 0, 4242, b"\x00\x00\x00\x00"))
        outcome, data = c.outcome(timeout=5)
        assert outcome in ("closed", "frame"), "broker neither answered nor closed the connection"
        if outcome == "frame":
            assert struct.unpack_from(">i", data)[0] == 4242, "answer with a foreign correlation id"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["next", "max"])
def test_api_versions_unsupported_version_gets_v0_error_35(served: Broker, how: str) -> None:
    with wire.Conn(served.bootstrap) as c:
        apis = wire.api_versions(c)
        lo, hi = apis[wire.API_VERSIONS]
        assert lo == 0 and hi >= 3
        version = hi + 1 if how == "next" else 32767
        # ApiVersions v3+ uses the flexible request header and compact strings
        body = wire.Writer().compact_string("odradek-tests").compact_string("1.0").uvarint(0).done()
        c.send(wire.encode_request(wire.API_VERSIONS, version, 999, body, flexible=True))
        resp = c.recv_frame()
        r = wire.Reader(resp)
        assert r.int32() == 999
        error, listed = wire.parse_api_versions_v0(r)
        assert error == wire.UNSUPPORTED_VERSION
        assert listed.get(wire.API_VERSIONS) == (lo, hi), listed
        assert listed == apis, "the error answer must list the supported versions"
        # the connection stays usable: the client retries at a version it knows
        assert wire.api_versions(c) == apis


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("api_key", "version"), [(wire.METADATA, 32000), (wire.PRODUCE, 200), (wire.FETCH, -1)])
def test_unsupported_version_of_other_api_closes_connection(served: Broker, api_key: int, version: int) -> None:
    with wire.Conn(served.bootstrap) as c:
        c.send(wire.encode_request(api_key, version, 5, b"\x00\x00\x00\x00"))
        outcome, data = c.outcome(timeout=5)
        assert outcome == "closed", f"got {outcome} {data[:40]!r}"


@pytest.mark.timeout(60)
@pytest.mark.parametrize("kind", ["metadata-array", "produce-cut", "api-versions-v3-cut", "half-frame-hangup"])
def test_truncated_body(served: Broker, topic: str, kind: str) -> None:
    before = _hw(served, topic)
    with wire.Conn(served.bootstrap) as c:
        if kind == "metadata-array":
            body = wire.Writer().int32(5).int16(10).raw(b"ab").done()  # 5 names announced, 2 bytes sent
            c.send(wire.encode_request(wire.METADATA, 1, 6, body))
        elif kind == "produce-cut":
            body = wire.produce_body({(topic, 0): records()})
            c.send(wire.encode_request(wire.PRODUCE, 3, 7, body[:-25]))
        elif kind == "api-versions-v3-cut":
            body = wire.Writer().compact_string("odradek-tests").done()[:5]
            c.send(wire.encode_request(wire.API_VERSIONS, 3, 8, body, flexible=True))
        else:
            full = wire.encode_request(wire.PRODUCE, 3, 9, wire.produce_body({(topic, 0): records()}))
            c.send(full[: len(full) // 2])
        if kind != "half-frame-hangup":
            outcome, _ = c.outcome(timeout=5)
            assert outcome in ("closed", "frame"), "a truncated request left hanging"
    # nothing may have been written by a cut produce
    assert _hw(served, topic) == before


# ---------------------------------------------------------------------------------------------- records


@pytest.mark.timeout(60)
def test_wrong_crc_is_corrupt_message(served: Broker, topic: str) -> None:
    before = _hw(served, topic)
    batch = bytearray(records(5))
    batch[-3] ^= 0xFF  # a byte inside the CRC-covered records
    with wire.Conn(served.bootstrap) as c:
        err, _ = wire.produce(c, topic, 0, bytes(batch))
        assert err == wire.CORRUPT_MESSAGE
        # the same connection keeps working, and a good batch is accepted
        err, base = wire.produce(c, topic, 0, records(2))
        assert (err, base) == (wire.NONE, before)
    assert _hw(served, topic) == before + 2


def _with_count(batch: bytes, count: int) -> bytes:
    b = bytearray(batch)
    struct.pack_into(">i", b, 23, count - 1)  # lastOffsetDelta
    struct.pack_into(">i", b, 57, count)  # recordCount
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    return bytes(b)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("claimed", [5, 2, 1000])
def test_lying_record_count_is_rejected(served: Broker, topic: str, claimed: int) -> None:
    before = _hw(served, topic)
    batch = _with_count(records(3), claimed)
    with wire.Conn(served.bootstrap) as c:
        err, _ = wire.produce(c, topic, 0, batch)
    assert err in (wire.INVALID_RECORD, wire.CORRUPT_MESSAGE), f"error code {err}"
    assert _hw(served, topic) == before


@pytest.mark.timeout(60)
def test_count_and_offset_delta_disagree(served: Broker, topic: str) -> None:
    before = _hw(served, topic)
    b = bytearray(records(3))
    struct.pack_into(">i", b, 23, 7)  # lastOffsetDelta 7 for 3 records
    struct.pack_into(">I", b, 17, crc32c.crc32c(bytes(b[21:])))
    with wire.Conn(served.bootstrap) as c:
        err, _ = wire.produce(c, topic, 0, bytes(b))
    assert err in (wire.INVALID_RECORD, wire.CORRUPT_MESSAGE), f"error code {err}"
    assert _hw(served, topic) == before


@pytest.mark.timeout(60)
@pytest.mark.parametrize("target", ["missing-partition", "missing-topic"])
def test_produce_to_missing_partition(served: Broker, topic: str, target: str) -> None:
    name, part = (topic, 7) if target == "missing-partition" else (unique("nope"), 0)
    with wire.Conn(served.bootstrap) as c:
        err, _ = wire.produce(c, name, part, records())
    assert err == wire.UNKNOWN_TOPIC_OR_PARTITION
    md = AdminClient({"bootstrap.servers": served.bootstrap}).list_topics(timeout=10)
    if target == "missing-topic":
        assert name not in md.topics, "produce must not create topics"
    else:
        assert len(md.topics[topic].partitions) == 1


@pytest.mark.timeout(60)
def test_message_over_max_bytes(served: Broker, topic: str) -> None:
    before = _hw(served, topic)
    big = records(1, b"x" * (MAX_MESSAGE_BYTES + 1000))
    small = records(1, b"y" * (MAX_MESSAGE_BYTES - 1000))
    assert len(big) > MAX_MESSAGE_BYTES > len(small)
    with wire.Conn(served.bootstrap) as c:
        assert wire.produce(c, topic, 0, big)[0] == wire.MESSAGE_TOO_LARGE
        assert wire.produce(c, topic, 0, small) == (wire.NONE, before)
    assert _hw(served, topic) == before + 1

    # librdkafka sees the broker's error on delivery
    errors: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": served.bootstrap, "linger.ms": 0, "message.send.max.retries": 0,
                  "enable.idempotence": False})
    p.produce(topic, value=b"z" * (MAX_MESSAGE_BYTES + 1000), partition=0,
              on_delivery=lambda e, m: errors.append(e))
    assert p.flush(20) == 0
    assert [e.code() if e else None for e in errors] == [KafkaError.MSG_SIZE_TOO_LARGE]
    assert _hw(served, topic) == before + 1


# ---------------------------------------------------------------------------------------------- topics

INVALID_NAMES = ["", ".", "..", "a" * 250, "bad/name", "bad name", "bad\\name", "ümlaut", "a:b"]


@pytest.mark.timeout(60)
def test_invalid_topic_names(served: Broker) -> None:
    valid = [unique("ok.name_X-1"), "b" * 249]
    with wire.Conn(served.bootstrap) as c:
        hi = wire.api_versions(c)[wire.CREATE_TOPICS][1]
        version = min(hi, 4)
        assert version >= 2
        for name in INVALID_NAMES:
            res = wire.create_topics(c, [(name, 1, {})], version=version)
            assert [(n, e) for n, e, _ in res] == [(name, wire.INVALID_TOPIC_EXCEPTION)], f"{name!r}: {res}"
        res = wire.create_topics(c, [(n, 1, {}) for n in valid], version=version)
        assert sorted((n, e) for n, e, _ in res) == sorted((n, wire.NONE) for n in valid), res
    md = AdminClient({"bootstrap.servers": served.bootstrap}).list_topics(timeout=10)
    for name in INVALID_NAMES:
        assert name not in md.topics
    for name in valid:
        assert name in md.topics
    assert not any(p.name.startswith("bad") for p in served.logdir.iterdir())

    # through a real admin client too
    admin = AdminClient({"bootstrap.servers": served.bootstrap})
    fs = admin.create_topics([NewTopic("bad/name", num_partitions=1, replication_factor=1)], operation_timeout=10)
    with pytest.raises(KafkaException) as info:
        fs["bad/name"].result(timeout=20)
    assert info.value.args[0].code() == KafkaError.TOPIC_EXCEPTION


# ---------------------------------------------------------------------------------------------- load


def _fd_count(pid: int) -> int | None:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None


@pytest.mark.timeout(120)
def test_thousand_connections_opened_and_dropped(served: Broker) -> None:
    pid = served.pid
    assert pid is not None
    baseline = _fd_count(pid)
    host, port = served.host, served.port
    socks: list[socket.socket] = []
    sel = selectors.DefaultSelector()
    try:
        for _ in range(1000):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.setblocking(False)
            rc = s.connect_ex((host, port))
            assert rc in (0, errno.EINPROGRESS, errno.EAGAIN), os.strerror(rc)
            socks.append(s)
            sel.register(s, selectors.EVENT_WRITE)
        pending = set(socks)
        deadline = time.monotonic() + 30
        while pending and time.monotonic() < deadline:
            for key, _ in sel.select(timeout=1):
                s = key.fileobj  # type: ignore[assignment]
                if s in pending:
                    pending.discard(s)
                    sel.unregister(s)
        assert not pending, f"{len(pending)} of 1000 connections not established within 30 s"
        errors = [s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) for s in socks]
        assert errors.count(0) == 1000, f"{1000 - errors.count(0)} connections failed"
        # half of them leave a request behind, unread
        req = wire.encode_request(wire.API_VERSIONS, 0, 1)
        for s in socks[::2]:
            s.send(req)
        # a third hang up with RST instead of FIN
        for s in socks[::3]:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    finally:
        sel.close()
        for s in socks:
            s.close()
    if baseline is not None and Path(f"/proc/{pid}").exists():

        def released() -> bool:
            count = _fd_count(pid)
            return count is not None and count <= baseline + 20

        wait_until(released, 15, "the broker to release the descriptors", interval=0.2,
                   detail=lambda: f"broker holds {_fd_count(pid)} fds (was {baseline})")
