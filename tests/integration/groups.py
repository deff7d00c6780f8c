"""Consumer-group members for the integration tests, each polling in its own thread (or process), with a
common view: the current assignment, the rebalance callbacks seen, and the messages read.

- :class:`ConfluentMember`: confluent-kafka in a thread (``call`` runs a function on its consumer there).
- :class:`ProcessMember`: confluent-kafka in a subprocess (group_member.py) that ``kill()`` SIGKILLs.
- :class:`KafkaPythonMember`, :class:`AioKafkaMember`: the other two clients, subscribe-based.
- :class:`RawGroupClient`: JoinGroup/SyncGroup/Heartbeat/OffsetCommit built with kio for bad-input tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from datetime import timedelta
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

TP = tuple[str, int]
Event = tuple[str, frozenset[TP]]

# settings every librdkafka group member in these tests gets (classic protocol)
CLASSIC_CONF: dict[str, object] = {
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "fetch.queue.backoff.ms": 10,
    "fetch.wait.max.ms": 100,
    "auto.offset.reset": "earliest",
    "enable.partition.eof": False,
    "topic.metadata.refresh.interval.ms": 2000,
}

GROUP_MEMBER_SCRIPT = Path(__file__).with_name("group_member.py")


def partitions_of(tps: Iterable[TP]) -> list[int]:
    return sorted(p for _, p in tps)


class Member:
    """What every member kind records. Attributes are replaced (not mutated) under the lock, so readers
    may take them without it."""

    name: str

    def __init__(self, name: str) -> None:
        self.name = name
        self._lock = threading.Lock()
        self.assignment: frozenset[TP] = frozenset()
        self.events: list[Event] = []
        self.messages: list[tuple[int, int, bytes]] = []
        self.errors: list[str] = []
        self.assignment_changes = 0

    def _set_assignment(self, tps: Iterable[TP]) -> None:
        new = frozenset(tps)
        if new != self.assignment:
            with self._lock:
                self.assignment = new
                self.assignment_changes += 1

    def _event(self, kind: str, tps: Iterable[TP]) -> None:
        with self._lock:
            self.events = [*self.events, (kind, frozenset(tps))]

    def _messages(self, msgs: Sequence[tuple[int, int, bytes]]) -> None:
        if msgs:
            with self._lock:
                self.messages = [*self.messages, *msgs]

    def callbacks(self, kinds: Iterable[str] = ("assign", "revoke", "lost"), nonempty: bool = True) -> list[Event]:
        ks = set(kinds)
        return [e for e in self.events if e[0] in ks and (e[1] or not nonempty)]

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name} owns {sorted(self.assignment)}>"


# ============================================================================ confluent-kafka


class ConfluentMember(Member):
    """A subscribed confluent-kafka consumer polled by its own thread."""

    def __init__(self, bootstrap: str, group: str, topics: Sequence[str], name: str = "c",
                 conf: dict[str, object] | None = None, classic: bool = True) -> None:
        super().__init__(name)
        self.conf: dict[str, object] = {"bootstrap.servers": bootstrap, "group.id": group,
                                        "client.id": name}
        if classic:
            self.conf.update(CLASSIC_CONF)
        else:  # KIP-848: the broker owns session timeout, heartbeat interval and the assignor
            self.conf.update({k: v for k, v in CLASSIC_CONF.items()
                              if k not in ("session.timeout.ms", "heartbeat.interval.ms")})
        self.conf.update(conf or {})
        self.topics = list(topics)
        self._calls: queue.Queue[tuple[Callable[[Consumer], Any], Future[Any]]] = queue.Queue()
        self._stop = threading.Event()
        self._started = threading.Event()
        self.member_id: str | None = None
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)
        self._thread.start()
        if not self._started.wait(20):
            raise AssertionError(f"member {name} did not start")

    def _run(self) -> None:
        try:
            c = Consumer(self.conf)
        except Exception as e:  # noqa: BLE001 - reported to the test
            self.errors.append(f"create: {e!r}")
            self._started.set()
            return
        self._started.set()
        c.subscribe(
            self.topics,
            on_assign=lambda _c, ps: self._event("assign", ((tp.topic, tp.partition) for tp in ps)),
            on_revoke=lambda _c, ps: self._event("revoke", ((tp.topic, tp.partition) for tp in ps)),
            on_lost=lambda _c, ps: self._event("lost", ((tp.topic, tp.partition) for tp in ps)),
        )
        try:
            while not self._stop.is_set():
                batch = []
                for m in c.consume(num_messages=500, timeout=0.05):
                    err = m.error()
                    if err is not None:
                        self.errors.append(str(err))
                        continue
                    batch.append((int(m.partition() or 0), int(m.offset() or 0), m.value() or b""))
                self._messages(batch)
                self._set_assignment((tp.topic, tp.partition) for tp in c.assignment())
                with contextlib.suppress(Exception):  # not yet in a group
                    self.member_id = c.memberid()
                while not self._calls.empty():
                    fn, fut = self._calls.get_nowait()
                    try:
                        fut.set_result(fn(c))
                    except BaseException as e:  # noqa: BLE001 - handed to the caller
                        fut.set_exception(e)
        finally:
            c.close()
            self._set_assignment(())

    def call(self, fn: Callable[[Consumer], Any], timeout: float = 30.0) -> Any:
        """Run ``fn(consumer)`` on the polling thread and return its result."""
        fut: Future[Any] = Future()
        self._calls.put((fn, fut))
        return fut.result(timeout)

    def commit(self, offsets: dict[TP, int] | None = None) -> None:
        """Synchronous commit: of ``offsets``, or of the positions consumed so far."""
        if offsets is None:
            self.call(lambda c: c.commit(asynchronous=False))
        else:
            tps = [TopicPartition(t, p, o) for (t, p), o in offsets.items()]
            self.call(lambda c: c.commit(offsets=tps, asynchronous=False))

    def close(self, timeout: float = 30.0) -> None:
        """Close the consumer (LeaveGroup for dynamic members) and wait for the thread."""
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"member {self.name} did not close within {timeout}s"

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()


class ProcessMember(Member):
    """A confluent-kafka member in a subprocess: ``kill()`` is a SIGKILL, ``close()`` a clean close."""

    def __init__(self, bootstrap: str, group: str, topic: str, name: str = "p",
                 conf: dict[str, object] | None = None) -> None:
        super().__init__(name)
        extra: dict[str, object] = {**CLASSIC_CONF, "client.id": name, **(conf or {})}
        self.proc = subprocess.Popen(
            [sys.executable, str(GROUP_MEMBER_SCRIPT), bootstrap, group, topic, json.dumps(extra)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        self._reader = threading.Thread(target=self._read, name=f"reader-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            ev = obj.get("ev")
            if ev in ("assign", "revoke", "lost"):
                self._event(ev, ((t, p) for t, p in obj["tps"]))
            elif ev == "assignment":
                self._set_assignment((t, p) for t, p in obj["tps"])
            elif ev == "msg":
                self._messages([(obj["p"], obj["o"], obj["v"].encode("latin-1"))])
            elif ev == "error":
                self.errors.append(obj["err"])

    def kill(self) -> None:
        """SIGKILL: the member vanishes without LeaveGroup; its assignment view is frozen as it was."""
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def close(self, timeout: float = 30.0) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise AssertionError(f"member process {self.name} did not close within {timeout}s") from None
        self._reader.join(5)


def close_all(members: Iterable[Member]) -> None:
    """Best-effort cleanup for ``finally`` blocks (kills processes, closes threads)."""
    for m in members:
        try:
            if isinstance(m, ProcessMember):
                if m.proc.poll() is None:
                    m.kill()
            elif isinstance(m, ConfluentMember | KafkaPythonMember | AioKafkaMember):
                m.close()
        except Exception:  # noqa: BLE001 - cleanup only
            pass


# ============================================================================ kafka-python and aiokafka


KAFKA_PYTHON_POLL_MS = 3000  # see KafkaPythonMember.__init__


class KafkaPythonMember(Member):
    def __init__(self, bootstrap: str, group: str, topic: str, name: str = "kp",
                 assignor: str = "range") -> None:
        super().__init__(name)
        from kafka import KafkaConsumer
        from kafka.coordinator.assignors.range import RangePartitionAssignor
        from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        cls = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[assignor]
        self._consumer = KafkaConsumer(
            bootstrap_servers=bootstrap, group_id=group, client_id=name, auto_offset_reset="earliest",
            enable_auto_commit=True, auto_commit_interval_ms=500, fetch_max_wait_ms=100,
            session_timeout_ms=6000, heartbeat_interval_ms=500, partition_assignment_strategy=[cls],
        )
        # kafka-python 3.0.12 drops a completed rebalance when poll() returns on its timeout while the
        # JoinGroup/SyncGroup round trip is in flight and that round trip completes before the next poll():
        # the SyncGroup succeeds but the assignment is never applied and heartbeats stay disabled, so the
        # broker expires the member and it never rejoins (its debug log shows no "Enabling heartbeat" after
        # the successful SyncGroup). So the member subscribes only once its metadata has the topic (a leader
        # that assigned before it had the metadata rejoins when it arrives), and polls with a timeout
        # longer than a rebalance here takes (one heartbeat interval of the other member).
        if not self._consumer.partitions_for_topic(topic):
            raise AssertionError(f"kafka-python has no metadata for {topic}")
        self._consumer.subscribe([topic])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        c = self._consumer
        try:
            while not self._stop.is_set():
                batch = []
                for _tp, recs in c.poll(timeout_ms=KAFKA_PYTHON_POLL_MS, max_records=1000).items():
                    batch += [(r.partition, r.offset, r.value or b"") for r in recs]
                self._messages(batch)
                self._set_assignment((tp.topic, tp.partition) for tp in c.assignment())
        except Exception as e:  # noqa: BLE001 - reported to the test
            self.errors.append(repr(e))
        finally:
            c.close()
            self._set_assignment(())

    def close(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"kafka-python member {self.name} did not close"


class AioKafkaMember(Member):
    def __init__(self, bootstrap: str, group: str, topic: str, name: str = "aio",
                 assignor: str = "range") -> None:
        super().__init__(name)
        self._args = (bootstrap, group, topic, assignor)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), name=f"member-{name}",
                                        daemon=True)
        self._thread.start()

    async def _run(self) -> None:
        from aiokafka import AIOKafkaConsumer
        from aiokafka.coordinator.assignors.range import RangePartitionAssignor
        from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor

        bootstrap, group, topic, assignor = self._args
        cls = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[assignor]
        c = AIOKafkaConsumer(
            topic, bootstrap_servers=bootstrap, group_id=group, client_id=self.name,
            auto_offset_reset="earliest", enable_auto_commit=True, auto_commit_interval_ms=500,
            fetch_max_wait_ms=100, session_timeout_ms=6000, heartbeat_interval_ms=500,
            partition_assignment_strategy=(cls,),
        )
        try:
            await c.start()
            while not self._stop.is_set():
                data = await c.getmany(timeout_ms=100, max_records=1000)
                batch = []
                for _tp, recs in data.items():
                    batch += [(r.partition, r.offset, r.value or b"") for r in recs]
                self._messages(batch)
                self._set_assignment((tp.topic, tp.partition) for tp in c.assignment())
        except Exception as e:  # noqa: BLE001 - reported to the test
            self.errors.append(repr(e))
        finally:
            await c.stop()
            self._set_assignment(())

    def close(self, timeout: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"aiokafka member {self.name} did not close"


# ============================================================================ raw requests (kio)

# Kafka error codes used by the group tests
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3
REBALANCE_IN_PROGRESS = 27
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
MEMBER_ID_REQUIRED = 79


def consumer_protocol_metadata(topics: Sequence[str]) -> bytes:
    """ConsumerProtocolSubscription v0: version, topics, user data (null)."""
    import struct

    out = bytearray(struct.pack(">hi", 0, len(topics)))
    for t in topics:
        b = t.encode()
        out += struct.pack(">h", len(b)) + b
    out += struct.pack(">i", -1)
    return bytes(out)


def consumer_protocol_assignment(assignment: dict[str, list[int]]) -> bytes:
    """ConsumerProtocolAssignment v0: version, [topic, [partition]], user data (null)."""
    import struct

    out = bytearray(struct.pack(">hi", 0, len(assignment)))
    for t, ps in assignment.items():
        b = t.encode()
        out += struct.pack(">h", len(b)) + b + struct.pack(">i", len(ps))
        for p in ps:
            out += struct.pack(">i", p)
    out += struct.pack(">i", -1)
    return bytes(out)


class RawGroupClient:
    """Group requests over :class:`odradek.client.wire.WireClient` (one connection to the coordinator)."""

    def __init__(self, bootstrap: str, timeout: float = 20.0) -> None:
        from odradek.client.wire import WireClient

        self.bootstrap = bootstrap
        self.timeout = timeout
        self.wire = WireClient(bootstrap, timeout=timeout, client_id="odradek-raw-groups")

    def close(self) -> None:
        self.wire.close()

    def __enter__(self) -> RawGroupClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def find_coordinator(self, group: str) -> tuple[int, str, int]:
        """-> (error_code, host, port), FindCoordinator v1."""
        from kio.static.primitive import i8

        r = self.wire.request(10, 1, key=group, key_type=i8(0))
        return int(r.error_code), r.host, int(r.port)

    def join(self, group: str, member_id: str = "", *, session_timeout_ms: int = 30000,
             rebalance_timeout_ms: int = 30000, protocol_type: str = "consumer",
             protocols: Sequence[tuple[str, bytes]] | None = None, instance_id: str | None = None,
             topics: Sequence[str] = ("t",)) -> Any:
        """JoinGroup v5 (raw: no MEMBER_ID_REQUIRED handling)."""
        from kio.schema.join_group.v5.request import JoinGroupRequestProtocol
        from kio.schema.types import GroupId

        if protocols is None:
            protocols = [("range", consumer_protocol_metadata(topics))]
        return self.wire.request(
            11, 5, group_id=GroupId(group), session_timeout=timedelta(milliseconds=session_timeout_ms),
            rebalance_timeout=timedelta(milliseconds=rebalance_timeout_ms), member_id=member_id,
            group_instance_id=instance_id, protocol_type=protocol_type,
            protocols=tuple(JoinGroupRequestProtocol(name=n, metadata=m) for n, m in protocols),
        )

    def join_with_member_id(self, group: str, **kw: Any) -> Any:
        """JoinGroup v5 including the MEMBER_ID_REQUIRED round trip."""
        r = self.join(group, **kw)
        if int(r.error_code) == MEMBER_ID_REQUIRED:
            assert r.member_id, "MEMBER_ID_REQUIRED without a member id"
            r = self.join(group, member_id=r.member_id, **kw)
        return r

    def sync(self, group: str, generation: int, member_id: str,
             assignments: dict[str, bytes] | None = None) -> Any:
        from kio.schema.sync_group.v3.request import SyncGroupRequestAssignment
        from kio.schema.types import GroupId
        from kio.static.primitive import i32

        return self.wire.request(
            14, 3, group_id=GroupId(group), generation_id=i32(generation), member_id=member_id,
            group_instance_id=None,
            assignments=tuple(SyncGroupRequestAssignment(member_id=m, assignment=a)
                              for m, a in (assignments or {}).items()),
        )

    def heartbeat(self, group: str, generation: int, member_id: str) -> int:
        from kio.schema.types import GroupId
        from kio.static.primitive import i32

        r = self.wire.request(12, 3, group_id=GroupId(group), generation_id=i32(generation), member_id=member_id,
                              group_instance_id=None)
        return int(r.error_code)

    def commit(self, group: str, offsets: dict[TP, int], generation: int = -1, member_id: str = "") -> dict[TP, int]:
        """OffsetCommit v8 -> {(topic, partition): error_code}."""
        from kio.schema.offset_commit.v8.request import OffsetCommitRequestPartition, OffsetCommitRequestTopic
        from kio.schema.types import GroupId, TopicName
        from kio.static.primitive import i32, i64

        by_topic: dict[str, list[tuple[int, int]]] = {}
        for (t, p), o in offsets.items():
            by_topic.setdefault(t, []).append((p, o))
        topics = tuple(
            OffsetCommitRequestTopic(name=TopicName(t), partitions=tuple(
                OffsetCommitRequestPartition(partition_index=i32(p), committed_offset=i64(o),
                                             committed_leader_epoch=i32(-1), committed_metadata="")
                for p, o in ps))
            for t, ps in by_topic.items()
        )
        r = self.wire.request(8, 8, group_id=GroupId(group), generation_id_or_member_epoch=i32(generation),
                              member_id=member_id, group_instance_id=None, topics=topics)
        return {(t.name, int(p.partition_index)): int(p.error_code) for t in r.topics for p in t.partitions}

    def fetch_offsets(self, group: str, tps: Sequence[TP]) -> dict[TP, int]:
        """OffsetFetch v7 -> {(topic, partition): committed offset (-1: none)}."""
        from kio.schema.offset_fetch.v7.request import OffsetFetchRequestTopic
        from kio.schema.types import GroupId, TopicName
        from kio.static.primitive import i32

        by_topic: dict[str, list[int]] = {}
        for t, p in tps:
            by_topic.setdefault(t, []).append(p)
        r = self.wire.request(9, 7, group_id=GroupId(group), require_stable=False, topics=tuple(
            OffsetFetchRequestTopic(name=TopicName(t), partition_indexes=tuple(i32(p) for p in ps))
            for t, ps in by_topic.items()))
        assert int(r.error_code) == NONE, f"OffsetFetch error {r.error_code}"
        return {(t.name, int(p.partition_index)): int(p.committed_offset) for t in r.topics for p in t.partitions}
