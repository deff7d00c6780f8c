"""One Fetch must not ask for a gigabyte (issue 33, item 6).

A Fetch request lists partitions with their own byte limits and carries a request-wide
``max_bytes``. Kafka bounds the response twice: a partition named several times is read once
(FetchRequest.fetchData is a map keyed by TopicIdPartition, so duplicates collapse), and the
response's record bytes stay within min(request max_bytes, broker ``fetch.max.bytes``), the
first partition with data excepted only so far as it needs to return one whole batch
(ReplicaManager.readFromLog). Raw wire frames against a real broker process under the hostile
suite's address-space cap.
"""

from __future__ import annotations

import struct
from pathlib import Path

from integration import wire
from integration.broker import Broker, BrokerFactory
from integration.clients import assert_served, create_topic, unique
from integration.wire import Conn, Reader, Writer

from ._records import batch, produce_v8, records_section

BATCH_VALUE = 700_000  # one record per batch: a batch of about 700 KB
INT32_MAX = 0x7FFFFFFF


def vm_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS in /proc/{pid}/status")


def fill(conn: Conn, topic: str, partition: int, batches: int) -> None:
    for i in range(batches):
        rec = batch(records_section(1, value=bytes([65 + i]) * BATCH_VALUE), count=1)
        err, *_ = produce_v8(conn, topic, partition, rec)
        assert err == wire.NONE, f"produce error {err}"


def fetch_v4_body(entries: list[tuple[str, int, int, int]], max_bytes: int) -> bytes:
    """Fetch v4 as a consumer: ``entries`` (topic, partition, fetch offset, partition max bytes), each
    topic entry written as its own topic element, in order (so a partition may repeat)."""
    w = Writer().int32(-1).int32(0).int32(0).int32(max_bytes).int8(0)
    w.array(entries, lambda w, e: w.string(e[0]).array(
        [e], lambda w2, e2: w2.int32(e2[1]).int64(e2[2]).int32(e2[3])))
    return w.done()


def send_fetch(conn: Conn, body: bytes) -> tuple[int, int]:
    """Send a Fetch v4 and read only the response's size prefix: (correlation id, size)."""
    corr = conn.next_corr()
    conn.send(wire.encode_request(wire.FETCH, 4, corr, body))
    (size,) = struct.unpack(">i", conn.recv_exact(4))
    return corr, size


def parse_fetch_v4(payload: bytes) -> list[tuple[str, int, int, int]]:
    """-> [(topic, partition, error code, record bytes)] in the response's order."""
    r = Reader(payload)
    r.int32()  # correlation id
    r.int32()  # throttle_time_ms
    out: list[tuple[str, int, int, int]] = []

    def part(rr: Reader, topic: str) -> None:
        idx = rr.int32()
        err = rr.int16()
        rr.int64()  # high watermark
        rr.int64()  # last stable offset
        rr.array(lambda r3: (r3.int64(), r3.int64()))  # aborted transactions
        records = rr.bytes_()
        out.append((topic, idx, err, len(records or b"")))

    def top(rr: Reader) -> None:
        name = rr.string()
        assert name is not None
        rr.array(lambda r2: part(r2, name))

    r.array(top)
    return out


def fetch(conn: Conn, entries: list[tuple[str, int, int, int]], max_bytes: int,
          bound: int) -> list[tuple[str, int, int, int]]:
    """A Fetch whose response must be at most ``bound`` bytes (checked on the size prefix, before
    reading any of it)."""
    corr, size = send_fetch(conn, fetch_v4_body(entries, max_bytes))
    assert size <= bound, f"a {len(entries)}-entry Fetch was answered with {size >> 20} MiB ({size} bytes)"
    payload = conn.recv_exact(size)
    assert struct.unpack_from(">i", payload)[0] == corr
    return parse_fetch_v4(payload)


def test_a_partition_listed_many_times_is_read_once(broker: Broker) -> None:
    """2,000 copies of one partition holding 1.4 MB in a 72 KB request: one partition's worth back
    (before the fix, every copy was read: a response of gigabytes)."""
    b = broker
    topic = unique("dup")
    create_topic(b.bootstrap, topic, 1)
    with Conn(b.bootstrap, timeout=60) as conn:
        fill(conn, topic, 0, 2)
        rss_before = vm_rss(b.pid)
        entries = [(topic, 0, 0, INT32_MAX)] * 2000
        body = fetch_v4_body(entries, INT32_MAX)
        assert len(body) < 80 << 10
        got = fetch(conn, entries, INT32_MAX, bound=2 * BATCH_VALUE + (64 << 10))
        assert [(t, p, e) for t, p, e, _ in got] == [(topic, 0, 0)]
        assert got[0][3] > 2 * BATCH_VALUE, "the partition's two batches"
        # the same request again and again: neither the responses nor the broker grow
        for _ in range(5):
            assert len(fetch(conn, entries, INT32_MAX, bound=2 * BATCH_VALUE + (64 << 10))) == 1
    rss_after = vm_rss(b.pid)
    assert rss_after - rss_before < 200 << 20, f"RSS grew {(rss_after - rss_before) >> 20} MiB"
    b.assert_alive()
    assert_served(b.bootstrap)


def test_fetch_max_bytes_bounds_the_response(make_broker: BrokerFactory) -> None:
    """fetch.max.bytes caps the whole response whatever the request's max_bytes asks: with 1 MiB,
    six partitions of two 700 KB batches each give back one batch (the first partition's first,
    whole); a request max_bytes below one batch still gets that whole batch, and nothing else."""
    b = make_broker({"fetch.max.bytes": 1 << 20})
    topic = unique("cap")
    create_topic(b.bootstrap, topic, 6)
    with Conn(b.bootstrap, timeout=60) as conn:
        for p in range(6):
            fill(conn, topic, p, 2)
        entries = [(topic, p, 0, INT32_MAX) for p in range(6)]
        got = fetch(conn, entries, INT32_MAX, bound=(1 << 20) + (64 << 10))
        assert {(t, p, e) for t, p, e, _ in got} == {(topic, p, 0) for p in range(6)}
        sizes = {p: n for _, p, _, n in got}
        assert BATCH_VALUE < sizes[0] <= 1 << 20, sizes
        assert sum(sizes.values()) <= 1 << 20, sizes
        # the request's own max_bytes below one batch: the first batch whole, no more
        got = fetch(conn, entries, 1000, bound=BATCH_VALUE + (64 << 10))
        sizes = {p: n for _, p, _, n in got}
        assert BATCH_VALUE < sizes[0] < BATCH_VALUE + 1000 and sum(sizes.values()) == sizes[0], sizes
    assert_served(b.bootstrap)
