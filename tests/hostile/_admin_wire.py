"""Raw CreateTopics / CreatePartitions frames with any counts, replication factors and assignments (the
admin clients refuse to send what these tests send), and a second client that keeps timing the broker's
answers while an attack runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

from integration import wire

CREATE_PARTITIONS = 37

INVALID_PARTITIONS = 37
INVALID_REPLICATION_FACTOR = 38
INVALID_REPLICA_ASSIGNMENT = 39
POLICY_VIOLATION = 44
INVALID_REQUEST = 42

INT32_MAX = 2**31 - 1

# (name, num_partitions, replication_factor, [(partition, [broker ids])])
Topic = tuple[str, int, int, Sequence[tuple[int, Sequence[int]]]]


def create_topics(conn: wire.Conn, topics: Sequence[Topic], *, validate_only: bool = False,
                  timeout_ms: int = 60_000) -> list[tuple[str | None, int, str | None]]:
    """CreateTopics v4 -> [(name, error_code, error_message)]."""
    w = wire.Writer()
    w.array(topics, lambda w, t: w.string(t[0]).int32(t[1]).int16(t[2])
            .array(t[3], lambda w, a: w.int32(a[0]).array(a[1], lambda w, b: w.int32(b)))
            .array([], lambda w, c: None))
    w.int32(timeout_ms).bool(validate_only)
    r = conn.request(wire.CREATE_TOPICS, 4, w.done())
    r.int32()  # throttle
    return r.array(lambda rr: (rr.string(), rr.int16(), rr.string()))


def create_partitions(conn: wire.Conn, topics: Sequence[tuple[str, int, Sequence[Sequence[int]] | None]], *,
                      validate_only: bool = False, timeout_ms: int = 60_000) -> list[tuple[str | None, int, str | None]]:
    """CreatePartitions v1: [(name, new total count, assignments of the new partitions or None)]."""
    w = wire.Writer()
    w.array(topics, lambda w, t: w.string(t[0]).int32(t[1])
            .array(t[2], lambda w, a: w.array(a, lambda w, b: w.int32(b))))
    w.int32(timeout_ms).bool(validate_only)
    r = conn.request(CREATE_PARTITIONS, 1, w.done())
    r.int32()  # throttle
    return r.array(lambda rr: (rr.string(), rr.int16(), rr.string()))


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class Bystander(threading.Thread):
    """Another client: ApiVersions (or, with ``metadata``, Metadata v1 for every topic) on its own connection
    every 20 ms, timing each round trip; also samples the broker's RSS. A broker that stops answering shows
    as a round trip as long as it stays silent."""

    def __init__(self, bootstrap: str, pid: int, metadata: bool = False) -> None:
        super().__init__(daemon=True, name="bystander")
        self.bootstrap = bootstrap
        self.pid = pid
        self.metadata = metadata
        self.round_trips: list[float] = []
        self.max_rss_mb = 0.0
        self.error: BaseException | None = None
        self._halt = threading.Event()

    def run(self) -> None:
        try:
            with wire.Conn(self.bootstrap, timeout=30) as c:
                while not self._halt.is_set():
                    t0 = time.monotonic()
                    if self.metadata:
                        c.request(wire.METADATA, 1, wire.Writer().int32(-1).done())  # every topic
                    else:
                        wire.api_versions(c)
                    self.round_trips.append(time.monotonic() - t0)
                    self.max_rss_mb = max(self.max_rss_mb, rss_mb(self.pid))
                    self._halt.wait(0.02)
        except BaseException as e:  # reported by the test
            self.error = e

    def stop(self) -> None:
        self._halt.set()
        self.join(40)

    @property
    def slowest(self) -> float:
        return max(self.round_trips, default=0.0)


@contextmanager
def bystander(bootstrap: str, pid: int | None, metadata: bool = False) -> Iterator[Bystander]:
    assert pid is not None
    b = Bystander(bootstrap, pid, metadata)
    b.start()
    time.sleep(0.2)
    try:
        yield b
    finally:
        b.stop()
    assert b.error is None, f"the other client failed: {b.error!r}"
    assert b.round_trips, "the other client got no answer at all"
