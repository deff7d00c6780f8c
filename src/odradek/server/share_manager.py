"""The broker's share-partitions and share sessions (KIP-932): Kafka's SharePartitionManager and ShareSessionCache.

- One :class:`~odradek.coordinator.share.share_partition.SharePartition` per (group, topic id, partition) led
  here, created on first use and initialized from the persisted state (ReadShareGroupState through the
  persister; a share-partition never initialized gets InitializeShareGroupState with start offset -1 first, and
  its start offset is then placed by ``share.auto.offset.reset``, latest, and persisted at once).
- Share sessions (:class:`ShareSessionCache`): one per (group, member), opened by ShareFetch epoch 0, closed by
  epoch -1, otherwise the request's epoch must be the session's next one (INVALID_SHARE_SESSION_EPOCH;
  SHARE_SESSION_NOT_FOUND without a session); at most ``group.share.max.share.sessions``
  (SHARE_SESSION_LIMIT_REACHED). Closing a session, or the member leaving its group, releases what it holds.
- ShareFetch: the acknowledgements it carries are applied first and persisted (WriteShareGroupState) before they
  are committed and answered; then each partition of the session is read from its next fetch offset and the
  records acquired (``max_records``, ``batch_size``); the acquired record batches are returned whole with the
  AcquiredRecords list, as file regions of the log (sent with sendfile; the batches past the last acquired
  offset left out). When nothing could be acquired the fetch waits up to ``max_wait`` in the fetch purgatory
  under its partitions (woken by appends, released records and expired locks) and tries again.
- ShareAcknowledge: the same acknowledgement path without a fetch.
- Acquisition locks expire on timers of the event loop armed at each share-partition's next lock deadline; the
  released records are persisted and waiting fetches woken.

Reads stop at the high watermark (share.isolation.level read_uncommitted, Kafka's default) or, for a group with
``share.isolation.level=read_committed``, at the last stable offset, the batches of aborted transactions archived
instead of delivered.
"""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from odradek.coordinator.share.share_partition import (
    AcknowledgementBatch,
    AcquiredRecords,
    AutoOffsetReset,
    Pending,
    SharePartition,
    SharePartitionConfig,
    StateWrite,
)
from odradek.coordinator.share.share_state import (
    READ_UNINITIALIZED_SHARE_PARTITION,
    PartitionResult,
    StateBatch,
)
from odradek.log.fetch_isolation import FetchIsolation
from odradek.metrics.share_stats import ShareGroupStats
from odradek.protocol import errors
from odradek.protocol.fetch_response import FileRegion
from odradek.purgatory import DelayedOperation

log = logging.getLogger("odradek.share")

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
_HEADER = struct.Struct(">qi")  # base offset, batch length
_LAST_DELTA = struct.Struct(">i")  # at byte 23 of a batch header

# the share coordinator is not ready (its topic being created, its partition loading or led elsewhere for now)
_STATE_NOT_READY = frozenset({errors.COORDINATOR_NOT_AVAILABLE, errors.NOT_COORDINATOR,
                              errors.COORDINATOR_LOAD_IN_PROGRESS})

TopicIdPartition = tuple[uuid.UUID, int]
ShareKey = tuple[str, uuid.UUID, int]  # (group, topic id, partition)



def persister_call(fn: Callable[[Callable[[PartitionResult], None]], None]) -> asyncio.Future[PartitionResult]:
    """The result a persister call hands its ``done`` callback, as a future (the first one wins)."""
    fut: asyncio.Future[PartitionResult] = asyncio.get_running_loop().create_future()

    def done(r: PartitionResult) -> None:
        if not fut.done():
            fut.set_result(r)

    fn(done)
    return fut

class Persister(Protocol):
    """Kafka's Persister (coordinator.share_runtime.ShareStatePersister)."""

    def write_state(self, group_id: str, topic_id: uuid.UUID, partition: int, write: StateWrite,
                    done: Callable[[PartitionResult], None]) -> None: ...

    def read_state(self, group_id: str, topic_id: uuid.UUID, partition: int, leader_epoch: int,
                   done: Callable[[PartitionResult], None]) -> None: ...

    def initialize_state(self, group_id: str, topic_id: uuid.UUID, partition: int, state_epoch: int,
                         start_offset: int, done: Callable[[PartitionResult], None]) -> None: ...


class LogReader(Protocol):
    """What the manager needs of the replica manager."""

    fetch_purgatory: Any

    def read(self, topic: str, partition: int, fetch_offset: int, max_bytes: int, isolation: FetchIsolation,
             min_one_message: bool) -> tuple[int, Any, Any]: ...

    def leader_epoch(self, topic: str, partition: int) -> int: ...

    def get_log(self, topic: str, partition: int) -> Any: ...


@dataclass
class ShareSession:
    """Kafka's ShareSession: the partitions a member fetches from this broker and the next epoch expected."""

    group_id: str
    member_id: str
    epoch: int = 1
    partitions: dict[TopicIdPartition, None] = field(default_factory=dict)
    ended: asyncio.Future[None] | None = None  # set when the session goes (see SharePartitionManager.watch_session)

    def end(self) -> None:
        if self.ended is not None and not self.ended.done():
            self.ended.set_result(None)


class ShareSessionCache:
    """Kafka's ShareSessionCache: at most ``max_sessions`` sessions, one per (group, member)."""

    def __init__(self, max_sessions: int = 2000) -> None:
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def open(self, group_id: str, member_id: str) -> ShareSession | None:
        """A new session (epoch 0); replaces the member's previous one; None at the limit."""
        key = (group_id, member_id)
        old = self.sessions.get(key)
        if old is None and len(self.sessions) >= self.max_sessions:
            return None
        if old is not None:
            old.end()
        s = self.sessions[key] = ShareSession(group_id, member_id)
        return s

    def get(self, group_id: str, member_id: str) -> ShareSession | None:
        return self.sessions.get((group_id, member_id))

    def remove(self, group_id: str, member_id: str) -> ShareSession | None:
        s = self.sessions.pop((group_id, member_id), None)
        if s is not None:
            s.end()
        return s

    def check(self, group_id: str, member_id: str, epoch: int) -> tuple[int, ShareSession | None]:
        """The session a request of ``epoch`` (> 0 or -1) continues, or the error (Kafka's newContext)."""
        s = self.get(group_id, member_id)
        if s is None:
            return errors.SHARE_SESSION_NOT_FOUND, None
        if epoch != FINAL_EPOCH and epoch != s.epoch:
            return errors.INVALID_SHARE_SESSION_EPOCH, None
        return errors.NONE, s


@dataclass
class PartitionAnswer:
    """One partition of a ShareFetch / ShareAcknowledge response."""

    error_code: int = errors.NONE
    error_message: str | None = None
    acknowledge_error_code: int = errors.NONE
    acknowledge_error_message: str | None = None
    records: list[Any] = field(default_factory=list)  # FileRegions of the log (sent with sendfile)
    records_size: int = 0
    acquired: tuple[AcquiredRecords, ...] = ()
    leader_epoch: int = -1
    acknowledged: bool = False


@dataclass
class FetchAnswer:
    error_code: int = errors.NONE
    error_message: str | None = None
    lock_timeout_ms: int = 0
    partitions: dict[TopicIdPartition, PartitionAnswer] = field(default_factory=dict)


class _Wakeup(DelayedOperation[None]):
    """A ShareFetch waiting for something to acquire: completes on any change of a watched partition (an
    append, records released) or when its wait is over (Kafka's DelayedShareFetch, the check done by the
    fetch itself once woken)."""

    def try_complete(self, key: Any = None) -> bool:
        return key is not None and self.force_complete()

    def on_complete(self) -> None:
        return None


class _Offsets:
    """share.auto.offset.reset's view of a log (Kafka's PartitionMetadataProvider)."""

    def __init__(self, plog: Any) -> None:
        self.plog = plog

    def earliest(self) -> int:
        return int(self.plog.log_start_offset)

    def latest(self) -> int:
        return int(self.plog.high_watermark)

    def for_timestamp(self, timestamp_ms: int) -> int:
        found = self.plog.fetch_offset_by_timestamp(timestamp_ms)
        return self.latest() if found is None else int(found[1])


def batch_bounds(data: bytes) -> list[tuple[int, int]]:
    """(base offset, last offset) of each whole record batch in ``data``."""
    out = []
    pos = 0
    n = len(data)
    while pos + 27 <= n:
        base, length = _HEADER.unpack_from(data, pos)
        end = pos + 12 + length
        if end > n:
            break
        (delta,) = _LAST_DELTA.unpack_from(data, pos + 23)
        out.append((base, base + delta))
        pos = end
    return out


@dataclass(frozen=True, slots=True)
class BatchSpan:
    """One whole record batch of a read: its offsets, where its bytes are, and its producer and kind."""

    base: int
    last: int
    file: Any
    position: int
    size: int
    producer_id: int = -1
    transactional: bool = False
    control: bool = False


_HEADER_BYTES = 61  # a v2 record batch's header, up to its record count
_ATTRIBUTES = struct.Struct(">h")  # at byte 21
_PRODUCER_ID = struct.Struct(">q")  # at byte 43


def scan_batches(fd: Any) -> list[BatchSpan]:
    """The whole batches of a FetchData's file regions, from their headers only (61 bytes read per batch; the
    records stay in the file and go out with sendfile)."""
    out = []
    for region in fd.regions:
        f, position, length = region
        fileno = f.fileno()
        pos, end = position, position + length
        while pos + _HEADER_BYTES <= end:
            head = os.pread(fileno, _HEADER_BYTES, pos)
            if len(head) < _HEADER_BYTES:
                break
            base, blen = _HEADER.unpack_from(head, 0)
            size = 12 + blen
            if pos + size > end:
                break
            (delta,) = _LAST_DELTA.unpack_from(head, 23)
            (attrs,) = _ATTRIBUTES.unpack_from(head, 21)
            (pid,) = _PRODUCER_ID.unpack_from(head, 43)
            out.append(BatchSpan(base, base + delta, f, pos, size, pid, bool(attrs & 0x10), bool(attrs & 0x20)))
            pos += size
    return out


def aborted_ranges(spans: list[BatchSpan], aborted: Iterable[Any]) -> list[tuple[int, int]]:
    """read_committed: the offsets of the batches of aborted transactions among ``spans`` (the consumer's
    algorithm, as Kafka's share fetch applies it: a producer's aborted transaction starts at its first offset and
    ends at its abort marker). ``aborted``: the log's AbortedTxn entries overlapping the read."""
    txns = sorted(aborted, key=lambda t: t.first_offset)
    i = 0
    active: set[int] = set()
    out: list[tuple[int, int]] = []
    for s in spans:
        while i < len(txns) and txns[i].first_offset <= s.last:
            active.add(txns[i].producer_id)
            i += 1
        if not s.transactional or s.producer_id not in active:
            continue
        if s.control:
            active.discard(s.producer_id)
        else:
            out.append((s.base, s.last))
    return out


def regions_up_to(spans: list[BatchSpan], last_offset: int) -> tuple[list[Any], int]:
    """The file regions of the batches up to the one holding ``last_offset`` (Kafka's
    ShareFetchUtils.maybeSliceFetchRecords: what was not acquired is not sent), adjacent ones merged."""
    regions: list[Any] = []
    size = 0
    for s in spans:
        if s.base > last_offset:
            break
        if regions and regions[-1].file is s.file and regions[-1].position + regions[-1].length == s.position:
            prev = regions[-1]
            regions[-1] = FileRegion(prev.file, prev.position, prev.length + s.size)
        else:
            regions.append(FileRegion(s.file, s.position, s.size))
        size += s.size
    return regions, size


class SharePartitionManager:
    """Kafka's SharePartitionManager on this broker."""

    def __init__(
        self,
        replicas: LogReader,
        topic_name: Callable[[uuid.UUID], str | None],
        persister: Persister,
        now_ms: Callable[[], int],
        partition_config: Callable[[str], SharePartitionConfig],
        max_sessions: int = 2000,
        reset: Callable[[str], AutoOffsetReset] | None = None,
        isolation: Callable[[str], FetchIsolation] | None = None,
        stats: ShareGroupStats | None = None,
    ) -> None:
        self.replicas = replicas
        self.stats = stats or ShareGroupStats()  # Kafka's ShareGroupMetrics and the share BrokerTopicMetrics
        self.topic_name = topic_name
        self.persister = persister
        self.now_ms = now_ms
        self.partition_config = partition_config
        self.reset = reset or (lambda _g: AutoOffsetReset())
        self.isolation = isolation or (lambda _g: FetchIsolation.HIGH_WATERMARK)
        self.sessions = ShareSessionCache(max_sessions)
        self.partitions: dict[ShareKey, SharePartition] = {}
        self._initializing: dict[ShareKey, asyncio.Future[int]] = {}
        self._timers: dict[ShareKey, tuple[int, asyncio.TimerHandle]] = {}

    # ------------------------------------------------------------------------------- persisting

    def _call(self, fn: Callable[[Callable[[PartitionResult], None]], None]) -> asyncio.Future[PartitionResult]:
        return persister_call(fn)

    async def _persist(self, key: ShareKey, write: StateWrite) -> PartitionResult:
        g, t, p = key
        return await self._call(lambda done: self.persister.write_state(g, t, p, write, done))

    def _persist_later(self, key: ShareKey, write: StateWrite | None) -> None:
        """Persist a change already applied (expired locks): Kafka keeps it even when the write fails."""
        if write is None:
            return
        g, t, p = key

        def done(r: PartitionResult) -> None:
            if r.error_code:
                log.warning("persisting released records of %s failed: error %d", key, r.error_code)

        self.persister.write_state(g, t, p, write, done)

    async def _settle(self, key: ShareKey, sp: SharePartition, pending: Pending) -> tuple[int, str | None]:
        """Persist an acknowledgement's or release's write, then commit it (or roll it back)."""
        self._persist_later(key, pending.expired)
        if pending.error_code:
            return pending.error_code, pending.error_message
        if pending.write is None or pending.token is None:
            return errors.NONE, None
        r = await self._persist(key, pending.write)
        if r.error_code:
            sp.rollback(pending.token)
            return r.error_code, r.error_message
        sp.commit(pending.token)
        self._rearm(key, sp)
        self._wake(key)
        return errors.NONE, None

    # ------------------------------------------------------------------------------- share-partitions

    async def share_partition(self, group_id: str, topic_id: uuid.UUID, partition: int) -> tuple[int, SharePartition | None]:
        """The share-partition, initialized from its persisted state on first use (Kafka's
        getOrCreateSharePartition + maybeInitialize)."""
        key = (group_id, topic_id, partition)
        sp = self.partitions.get(key)
        if sp is not None:
            return errors.NONE, sp
        waiting = self._initializing.get(key)
        if waiting is not None:
            code = await asyncio.shield(waiting)
            return code, self.partitions.get(key)
        fut: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._initializing[key] = fut
        code = errors.UNKNOWN_SERVER_ERROR
        start = self.now_ms()
        try:
            code = await self._initialize(key)
            if code == errors.NONE:  # PartitionLoadTimeMs: read (and placed) from the persisted state
                self.stats.partition_loaded(self.now_ms() - start)
        except Exception:
            log.exception("initializing share-partition %s failed", key)
        finally:  # never leave the others waiting, even when this fetch is cancelled
            self._initializing.pop(key, None)
            fut.set_result(code)
        return code, self.partitions.get(key)

    async def _initialize(self, key: ShareKey) -> int:
        g, t, p = key
        name = self.topic_name(t)
        if name is None:
            return errors.UNKNOWN_TOPIC_ID
        epoch = self.replicas.leader_epoch(name, p)
        plog = self.replicas.get_log(name, p)
        if epoch < 0 or plog is None:
            return errors.NOT_LEADER_OR_FOLLOWER
        r = await self._call(lambda done: self.persister.read_state(g, t, p, epoch, done))
        if r.error_code == errors.INVALID_REQUEST and r.error_message == READ_UNINITIALIZED_SHARE_PARTITION:
            # never initialized (Kafka's group coordinator initializes it when it first assigns the partition)
            init = await self._call(lambda done: self.persister.initialize_state(g, t, p, 0, -1, done))
            if init.error_code:
                return init.error_code
            r = await self._call(lambda done: self.persister.read_state(g, t, p, epoch, done))
        if r.error_code:
            return r.error_code
        sp = SharePartition(g, t, p, self.now_ms, self.partition_config(g), leader_epoch=epoch)
        sp.initialize(r.start_offset, r.state_epoch, r.state_batches, _Offsets(plog), self.reset(g))
        if r.start_offset == -1:  # the start offset share.auto.offset.reset placed, persisted at once
            w = await self._persist(key, StateWrite(sp.state_epoch, epoch, sp.start_offset, ()))
            if w.error_code:
                return w.error_code
        if plog.log_start_offset > sp.start_offset:
            sp.update_log_start_offset(plog.log_start_offset)
        self.partitions[key] = sp
        return errors.NONE

    # ------------------------------------------------------------------------------- locks

    def _rearm(self, key: ShareKey, sp: SharePartition) -> None:
        deadline = sp.next_lock_deadline()
        armed = self._timers.get(key)
        if armed is not None:
            if deadline is not None and armed[0] <= deadline:
                return
            armed[1].cancel()
            del self._timers[key]
        if deadline is None:
            return
        loop = asyncio.get_running_loop()
        delay = max(0.0, (deadline - self.now_ms()) / 1000.0)
        self._timers[key] = (deadline, loop.call_later(delay, self.expire_locks, key))

    def expire_locks(self, key: ShareKey) -> None:
        """The lock timer of a share-partition fired: release what expired, persist it, wake waiting fetches."""
        armed = self._timers.pop(key, None)
        if armed is not None:
            armed[1].cancel()
        sp = self.partitions.get(key)
        if sp is None:
            return
        write = sp.expire_locks()
        self._persist_later(key, write)
        self._rearm(key, sp)
        if write is not None:
            self._wake(key)

    def _wake(self, key: ShareKey) -> None:
        name = self.topic_name(key[1])
        if name is not None:
            self.replicas.fetch_purgatory.check_and_complete((name, key[2]))

    # ------------------------------------------------------------------------------- acknowledging

    async def _acknowledge(self, group_id: str, member_id: str,
                           acks: dict[TopicIdPartition, list[AcknowledgementBatch]],
                           answer: FetchAnswer) -> None:
        async def one(tp: TopicIdPartition, batches: list[AcknowledgementBatch]) -> None:
            pa = answer.partitions.setdefault(tp, PartitionAnswer())
            pa.acknowledged = True
            code, sp = await self.share_partition(group_id, tp[0], tp[1])
            if sp is None:
                pa.acknowledge_error_code = code
                return
            pending = sp.acknowledge(member_id, batches)
            pa.acknowledge_error_code, pa.acknowledge_error_message = await self._settle(
                (group_id, tp[0], tp[1]), sp, pending)
            if pa.acknowledge_error_code == errors.NONE:
                self.stats.records_acknowledged(batches)

        await asyncio.gather(*(one(tp, b) for tp, b in acks.items()))
        # Kafka's Total/FailedShareAcknowledgementRequestsPerSec: once per topic of the acknowledgement, failed once
        # per topic with a partition that failed
        topics: dict[str, bool] = {}
        for tp in acks:
            name = self.topic_name(tp[0])
            if name is not None:
                pa = answer.partitions.get(tp)
                topics[name] = topics.get(name, False) or (pa is not None and pa.acknowledge_error_code != 0)
        self.stats.acknowledgement(topics, [t for t, failed in topics.items() if failed])

    async def release_member(self, group_id: str, member_id: str) -> None:
        """A member left its group or closed its session: what it holds becomes available again."""
        for key, sp in list(self.partitions.items()):
            if key[0] != group_id:
                continue
            pending = sp.release_acquired_records(member_id)
            await self._settle(key, sp, pending)

    def member_removed(self, group_id: str, member_id: str, expired: bool) -> None:
        """The group coordinator removed a member (Kafka's ShareGroupListener). A member that left with a share
        session still open closes it next (ShareAcknowledge or ShareFetch with epoch -1, carrying its last
        acknowledgements), which releases what it holds; a member whose session timed out, or that has no share
        session here, has its records released now and its session dropped."""
        if not expired and self.sessions.get(group_id, member_id) is not None:
            return
        self.sessions.remove(group_id, member_id)
        asyncio.get_running_loop().create_task(self.release_member(group_id, member_id))

    def watch_session(self, group_id: str, member_id: str) -> tuple[asyncio.Future[None], Callable[[], None]] | None:
        """For the connection that opened the member's session: a future set when the session ends, and what to
        call if the connection closes first (Kafka's ShareSessionCache connection listener: the session goes and
        its member's records are released at once, not after their locks expire)."""
        session = self.sessions.get(group_id, member_id)
        if session is None:
            return None
        session.ended = asyncio.get_running_loop().create_future()

        def closed() -> None:
            if self.sessions.get(group_id, member_id) is session:
                self.sessions.remove(group_id, member_id)
                asyncio.get_running_loop().create_task(self.release_member(group_id, member_id))

        return session.ended, closed

    # ------------------------------------------------------------------------------- requests

    async def acknowledge(self, group_id: str, member_id: str, epoch: int,
                          acks: dict[TopicIdPartition, list[AcknowledgementBatch]]) -> FetchAnswer:
        """ShareAcknowledge."""
        answer = FetchAnswer(lock_timeout_ms=self.partition_config(group_id).record_lock_duration_ms)
        if epoch == INITIAL_EPOCH:
            answer.error_code = errors.INVALID_SHARE_SESSION_EPOCH
            return answer
        code, session = self.sessions.check(group_id, member_id, epoch)
        if session is None:
            answer.error_code = code
            return answer
        if epoch == FINAL_EPOCH:
            self.sessions.remove(group_id, member_id)
        else:
            session.epoch += 1
        await self._acknowledge(group_id, member_id, acks, answer)
        if epoch == FINAL_EPOCH:
            await self.release_member(group_id, member_id)
        return answer

    async def fetch(
        self,
        group_id: str,
        member_id: str,
        epoch: int,
        add: Iterable[TopicIdPartition],
        forget: Iterable[TopicIdPartition],
        acks: dict[TopicIdPartition, list[AcknowledgementBatch]],
        max_wait_ms: int,
        max_bytes: int,
        max_records: int,
        batch_size: int,
        *,
        strict: bool = False,
        renew_only: bool = False,
    ) -> FetchAnswer:
        """ShareFetch (Kafka's KafkaApis.handleShareFetchRequest with SharePartitionManager.fetchMessages).
        ``strict``: KIP-1206's record-limit acquire mode (``max_records`` is a hard limit); ``renew_only``:
        KIP-1222's IsRenewAck, the acknowledgements (renewals) are applied and nothing is fetched."""
        answer = FetchAnswer(lock_timeout_ms=self.partition_config(group_id).record_lock_duration_ms)
        if epoch == INITIAL_EPOCH:
            if acks:
                answer.error_code = errors.INVALID_REQUEST
                answer.error_message = "Acknowledge data present in initial share fetch request."
                return answer
            session = self.sessions.open(group_id, member_id)
            if session is None:
                answer.error_code = errors.SHARE_SESSION_LIMIT_REACHED
                return answer
        else:
            code, found = self.sessions.check(group_id, member_id, epoch)
            if found is None:
                answer.error_code = code
                return answer
            session = found
            if epoch == FINAL_EPOCH:
                self.sessions.remove(group_id, member_id)
            else:
                session.epoch += 1
        for tp in forget:
            session.partitions.pop(tp, None)
        for tp in add:
            session.partitions[tp] = None
        if acks:
            await self._acknowledge(group_id, member_id, acks, answer)
        if epoch == FINAL_EPOCH:
            await self.release_member(group_id, member_id)
            return answer
        if renew_only:
            return answer
        topics = {n for t, _p in session.partitions if (n := self.topic_name(t)) is not None}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0, max_wait_ms) / 1000.0
        try:
            while True:
                got = await self._acquire(group_id, member_id, list(session.partitions), max_bytes, max_records,
                                          batch_size, strict, answer)
                remaining = deadline - loop.time()
                if got or remaining <= 0.001 or (group_id, member_id) not in self.sessions.sessions:
                    return answer
                await self._wait(list(session.partitions), remaining)
        finally:  # Kafka's Total/FailedShareFetchRequestsPerSec: once per topic of the session's partitions
            failed = {n for tp, pa in answer.partitions.items()
                      if pa.error_code and (n := self.topic_name(tp[0])) is not None}
            self.stats.share_fetch(topics, failed)

    async def _wait(self, partitions: list[TopicIdPartition], seconds: float) -> None:
        keys = [(n, p) for t, p in partitions if (n := self.topic_name(t)) is not None]
        op = _Wakeup(max(1, int(seconds * 1000)))
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def done(_r: Any, _e: BaseException | None) -> None:
            if not fut.done():
                fut.set_result(None)

        op.then(done)
        self.replicas.fetch_purgatory.watch(op, keys)
        try:
            await fut
        finally:
            op.cancel()

    async def _acquire(self, group_id: str, member_id: str, partitions: list[TopicIdPartition], max_bytes: int,
                       max_records: int, batch_size: int, strict: bool, answer: FetchAnswer) -> int:
        """One pass over the session's partitions; how many records were acquired."""
        total = 0
        remaining_bytes = max_bytes
        isolation = self.isolation(group_id)
        committed = isolation is FetchIsolation.TXN_COMMITTED
        for tp in partitions:
            if total >= max_records:
                break
            t, p = tp
            name = self.topic_name(t)
            if name is None:
                answer.partitions.setdefault(tp, PartitionAnswer()).error_code = errors.UNKNOWN_TOPIC_ID
                continue
            code, sp = await self.share_partition(group_id, t, p)
            if sp is None:
                if code not in _STATE_NOT_READY:  # else nothing to give yet: the next fetch tries again
                    answer.partitions.setdefault(tp, PartitionAnswer()).error_code = code
                continue
            key = (group_id, t, p)
            offset = sp.next_fetch_offset()
            err, plog, fd = self.replicas.read(name, p, offset, max(1, remaining_bytes), isolation, total == 0)
            if err == errors.OFFSET_OUT_OF_RANGE and plog is not None and offset < plog.log_start_offset:
                sp.update_log_start_offset(plog.log_start_offset)
                offset = sp.next_fetch_offset()
                err, plog, fd = self.replicas.read(name, p, offset, max(1, remaining_bytes), isolation, total == 0)
            if err:
                if err != errors.OFFSET_OUT_OF_RANGE:
                    answer.partitions.setdefault(tp, PartitionAnswer()).error_code = err
                continue
            if fd is None or not fd.size:
                continue
            spans = scan_batches(fd)
            if not spans:
                continue
            bounds = [(b.base, b.last) for b in spans]
            aborted: list[tuple[int, int]] = []
            if committed and plog is not None:
                aborted = aborted_ranges(spans, plog.collect_aborted_transactions(spans[0].base, spans[-1].last + 1))
            result = sp.acquire(member_id, bounds, max_records - total, fetch_offset=offset, strict=strict,
                                batch_size=batch_size if batch_size > 0 else None, aborted=aborted)
            self._persist_later(key, result.write)
            if result.records:
                pa = answer.partitions.setdefault(tp, PartitionAnswer())
                pa.records, pa.records_size = regions_up_to(spans, result.records[-1].last_offset)
                pa.acquired = result.records
                pa.leader_epoch = self.replicas.leader_epoch(name, p)
                total += result.count
                remaining_bytes -= pa.records_size
                self._rearm(key, sp)
        return total

    def on_leadership(self, topic: str, partition: int, leader: bool) -> None:
        """A ReplicaManager leadership listener: a partition no longer led here, or led at a new leader epoch,
        loses its share-partitions (Kafka's SharePartitionListener: fenced and removed); the next fetch reads their
        state again. A role change that keeps the epoch (ISR changes) keeps them and the records they lock."""
        epoch = self.replicas.leader_epoch(topic, partition) if leader else -1
        for key in [k for k in self.partitions if k[2] == partition and self.topic_name(k[1]) == topic]:
            if leader and self.partitions[key].leader_epoch == epoch:
                continue
            sp = self.partitions.pop(key)
            sp.mark_fenced()
            armed = self._timers.pop(key, None)
            if armed is not None:
                armed[1].cancel()

    def shutdown(self) -> None:
        for _, handle in self._timers.values():
            handle.cancel()
        self._timers.clear()


def ack_batches(raw: Iterable[Any]) -> list[AcknowledgementBatch]:
    """kio AcknowledgementBatch entities as the share-partition's."""
    return [AcknowledgementBatch(int(b.first_offset), int(b.last_offset), tuple(int(x) for x in b.acknowledge_types))
            for b in raw]


__all__ = ["SharePartitionManager", "ShareSessionCache", "ShareSession", "FetchAnswer", "PartitionAnswer",
           "ack_batches", "batch_bounds", "StateBatch"]
