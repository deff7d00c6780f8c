"""ReplicaManager: appends to and reads from the partitions this broker leads, and owns
the purgatories of the requests that wait on them (Kafka's ReplicaManager with its
delayedProducePurgatory and delayedFetchPurgatory; odradek.purgatory).

:meth:`ReplicaManager.fetch` (Kafka's fetchMessages) reads a fetch's partitions and answers
the read at once, or a DelayedFetch (replication.delayed_fetch) watched under each
partition until fetch.min.bytes are readable or fetch.max.wait.ms passes.
:meth:`ReplicaManager.wait_for_replication` answers an acks=all produce's (or the group
coordinator's) outcome at once, or a DelayedProduce (replication.delayed_produce) watched
under each partition until its high watermark passes the append. Operations are checked
again when a partition's log end offset moves (fetches, after the current request batch),
its high watermark moves (produces, at once) or its leadership moves (both).

Single-node (embedded): this broker is the only replica, so the high watermark follows
the log end offset on every append. Waiting fetches are woken the moment data lands on
any partition they read (a late wake-up would spread end-to-end latency over the
whole max_wait).

Cluster mode: the controller's LeaderAndIsr (:meth:`ReplicaManager.become_leader_or_follower`)
makes this broker leader or follower of each replica it hosts, StopReplica
(:meth:`ReplicaManager.stop_replicas`) takes replicas away. As leader it appends (with its
leader epoch), tracks followers' fetch offsets, moves the high watermark to the
smallest log end offset in the ISR, shrinks/expands the ISR through the metadata store
(replication.alter_partition, Kafka's AlterPartitionManager) and answers acks=all produces
from the DelayedProduce purgatory; as follower its replica fetchers (replication.fetcher)
copy the leader's log. Requests for partitions it does not lead get NOT_LEADER_OR_FOLLOWER.
An I/O error in a log (:meth:`ReplicaManager.handle_log_dir_failure`) takes that log dir's
replicas offline and tells the controller; with no log dir left the broker halts.
Leadership listeners (the group coordinator for ``__consumer_offsets``) subscribe per topic
and hear of every role change of its partitions.

Edges, given at construction: the logs (:class:`LogSource`, the LogManager), the metadata
cache (:class:`TopicLookup`), a clock, the ISR writer (:class:`IsrWriter`), where a leader
listens, and what to do when a log dir fails; never the broker.

One concept in one file (over 600 lines): the replicas this broker hosts, their roles, and the reads, appends and delayed operations on them (Kafka's ReplicaManager).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from odradek.controller.topics import topic_id_from_str
from odradek.log import AppendOrigin, FetchIsolation
from odradek.log.errors import InconsistentTopicIdError, OffsetOutOfRangeError, ProducerStateError
from odradek.log.file_records import FetchData
from odradek.log.verification_state import VerificationGuard
from odradek.metrics.stats import BrokerTopicStats
from odradek.protocol import errors
from odradek.protocol.fetch_response import PartitionResult
from odradek.protocol.records import InvalidRecordError, build_batch, decode_records, validate_batches
from odradek.purgatory import DelayedOperationPurgatory, Scheduler
from odradek.replication.delayed_fetch import (
    DelayedFetch,
    FetchParams,
    FetchPartitions,
    LogReadResult,
    RemoteFetchInfo,
    RemoteReadResult,
)
from odradek.replication.delayed_produce import DelayedProduce
from odradek.replication.delayed_remote_fetch import DelayedRemoteFetch
from odradek.replication.delayed_remote_list_offsets import DelayedRemoteListOffsets
from odradek.replication.isr import LeaderState
from odradek.replication.partition import Partition
from odradek.server import fault_injection

if TYPE_CHECKING:
    from odradek.controller.topics import TopicMeta
    from odradek.log.log import AppendInfo, Log
    from odradek.replication.alter_partition import Done
    from odradek.replication.fetcher import ReplicaFetcherManager
    from odradek.tiered.plan import TimestampAndOffset

ANY_TOPIC = "*"  # not a legal topic name: add_leadership_listener for every topic

log = logging.getLogger("odradek.replica")

TopicPartition = tuple[str, int]
_new_read_result = tuple.__new__
_LOG_END = FetchIsolation.LOG_END
_TXN_COMMITTED = FetchIsolation.TXN_COMMITTED
# produce errors Kafka's ReplicaManager.appendToLocalLog does not count as FailedProduceRequests
_NOT_FAILED_PRODUCE = frozenset({
    errors.UNKNOWN_TOPIC_OR_PARTITION, errors.NOT_LEADER_OR_FOLLOWER, errors.MESSAGE_TOO_LARGE,
    errors.RECORD_LIST_TOO_LARGE, errors.CORRUPT_MESSAGE, errors.KAFKA_STORAGE_ERROR,
})


@dataclass(slots=True)
class AppendResult:
    error_code: int = errors.NONE
    base_offset: int = -1
    log_append_time: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    last_offset: int = -1
    record_errors: tuple[tuple[int, str], ...] = ()  # KIP-467: (batch_index, message)
    # acks=all is met already (the high watermark passed last_offset with ISR >= min.insync.replicas):
    # what wait_for_replication would answer at once, so the handler need not ask it per partition
    replicated: bool = False


class LogSource(Protocol):
    """What the replica manager needs of the LogManager."""

    log_dirs: list[Path]
    offline_dirs: set[Path]
    offline_partitions: set[TopicPartition]

    def get_log(self, topic: str, partition: int) -> Log | None: ...

    def get_or_create_log(self, topic: str, partition: int, topic_id: uuid.UUID | None = None) -> Log: ...

    def log_dir_of(self, topic: str, partition: int) -> Path | None: ...

    def delete_log(self, topic: str, partition: int) -> object: ...

    def dir_containing(self, path: Path) -> Path | None: ...

    def mark_dir_offline(self, d: Path) -> list[TopicPartition]: ...

    def checkpoint(self, on_error: Callable[[Path, OSError], None] | None = None) -> None: ...

    def flush_dirty(self, now_ms: int | None = None,
                    on_error: Callable[[Path, OSError], None] | None = None) -> int: ...


class TopicLookup(Protocol):
    """What the replica manager needs of the metadata cache (TopicRegistry)."""

    def get(self, name: str) -> TopicMeta | None: ...

    def topic_id_from_store(self, name: str) -> uuid.UUID | None: ...


class IsrWriter(Protocol):
    """Where ISR changes go (replication.alter_partition.AlterPartitionManager)."""

    def submit(self, part: Partition, new_isr: list[int], done: Done) -> None: ...


class RemoteReader(Protocol):
    """Where reads below a tiered partition's local log start go (server.remote_log_manager.RemoteLogManager)."""

    def read_async(self, info: RemoteFetchInfo, plog: Log) -> concurrent.futures.Future[RemoteReadResult]: ...

    def fetch_max_wait_ms(self) -> int: ...

    def fetch_throttle_time_ms(self) -> int:
        """KIP-956: > 0 while the remote fetch quota is exceeded (Kafka's getFetchThrottleTimeMs; recorded in
        remote-fetch-throttle-time by the reader)."""
        ...

    def find_offset_by_timestamp(
        self, plog: Log, timestamp: int, starting_offset: int,
    ) -> concurrent.futures.Future[TimestampAndOffset | None]:
        """ListOffsets by timestamp on a tiered log (Kafka's RemoteLogManager.asyncOffsetRead)."""
        ...

    def delete_remote_log_partition(self, plog: Log) -> None:
        """The partition's topic is deleted and this broker led it: its remote segments go too."""
        ...


# the leader epoch of a StopReplica deleting a topic (Kafka's LeaderAndIsr.EpochDuringDelete)
EPOCH_DURING_DELETE = -2


# a leadership listener: (topic, partition, leader) after this broker became leader (True) or
# stopped leading (False) a partition of the topic it subscribed to
LeadershipListener = Callable[[str, int, bool], None]


class ReplicationQuota(Protocol):
    """The leader side of replication quotas (server.quota.replication.ReplicationQuotaManager)."""

    def is_throttled(self, tp: TopicPartition) -> bool: ...

    def is_quota_exceeded(self) -> bool: ...

    def record(self, value: int) -> None: ...


class ReplicaManager:
    def __init__(
        self,
        node_id: int,
        logs: LogSource,
        topics: TopicLookup,
        now_ms: Callable[[], int],
        *,
        validate_records: bool = True,
        scheduler: Scheduler | None = None,
        isr_writer: IsrWriter | None = None,
        live_broker: Callable[[int], Mapping[str, Any] | None] = lambda broker_id: None,
        on_dir_offline: Callable[[], None] = lambda: None,
        halt: Callable[[int], None] = os._exit,
        topic_stats: BrokerTopicStats | None = None,
        leader_quota: ReplicationQuota | None = None,
        lag_clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.node_id = node_id
        # the clock of ISR expiry (followers' caught-up times, replica.lag.time.max.ms); the broker gives
        # the monotonic clock: Kafka stamps these with the wall clock, and as the caught-up time only
        # grows, a wall clock set back (or set forward, then back) kept a follower that had stopped
        # fetching in the ISR for the jump's length, holding back acks=all writes (odradek.verify's
        # clock nemesis). None: ``now_ms``.
        self.lag_clock_ms: Callable[[], int] = lag_clock_ms or now_ms
        self.leader_quota = leader_quota  # KIP-73: what leaders send to throttled followers
        self.remote_reader: RemoteReader | None = None  # tiered storage: set by the broker when it is on
        self.log_manager = logs
        self.topics = topics
        self.now_ms = now_ms
        self.validate_records = validate_records
        # the clock of delayed operations and wake-ups; None: the running asyncio loop
        self.scheduler = scheduler
        self.isr_writer = isr_writer
        # where a partition's leader listens (the controller's live leaders first, then this)
        self.live_broker = live_broker
        self.on_dir_offline = on_dir_offline  # tell the controller a log dir failed (LogDirChange)
        self.halt = halt  # no log dir left (Kafka halts the broker)
        self.fetch_purgatory: DelayedOperationPurgatory[TopicPartition] = DelayedOperationPurgatory("Fetch", scheduler)
        self.produce_purgatory: DelayedOperationPurgatory[TopicPartition] = DelayedOperationPurgatory(
            "Produce", scheduler
        )
        # ListOffsets waiting for timestamp lookups in the remote tier (Kafka's delayedRemoteListOffsetsPurgatory)
        self.remote_list_offsets_purgatory: DelayedOperationPurgatory[Any] = DelayedOperationPurgatory(
            "RemoteListOffsets", scheduler
        )
        self._wake_scheduled: set[TopicPartition] = set()
        # the replicas this broker hosts, with the roles the controller gave them
        self.partitions: dict[TopicPartition, Partition] = {}
        # the follower side (replica fetchers); None before start-up and once shut down
        self.fetchers: ReplicaFetcherManager | None = None
        self._leadership_listeners: dict[str, list[LeadershipListener]] = {}
        # Kafka's BrokerTopicMetrics (odradek.metrics) and ReplicaManager's IsrShrinks/IsrExpands
        self.topic_stats = topic_stats if topic_stats is not None else BrokerTopicStats()
        self.isr_shrinks = 0
        self.isr_expands = 0

    # -- lookup
    def get_log(self, topic: str, partition: int) -> Log | None:
        return self.log_manager.get_log(topic, partition)

    def leader_epoch(self, topic: str, partition: int) -> int:
        part = self.partitions.get((topic, partition))
        return part.leader_epoch if part is not None else -1

    def leading(self, topic: str, partition: int) -> Partition | None:
        """The partition when this broker is its leader, else None (NOT_LEADER_OR_FOLLOWER)."""
        part = self.partitions.get((topic, partition))
        return part if part is not None and part.is_leader(self.node_id) else None

    # -- produce
    def append(
        self, topic: str, partition: int, records: bytes | None, now_ms: int, acks: int = 1,
        transactional: bool = False, require_verification: bool = False,
        verification_guard: VerificationGuard | None = None,
    ) -> AppendResult:
        meta = self.topics.get(topic)
        if meta is None or not 0 <= partition < len(meta.partitions):
            return AppendResult(errors.UNKNOWN_TOPIC_OR_PARTITION)
        stats = self.topic_stats.topic(topic)
        stats.total_produce += 1
        result = self._append(topic, partition, records, now_ms, acks, transactional, require_verification,
                              verification_guard)
        code = result.error_code
        if code == errors.NONE:
            if result.last_offset >= 0 and records is not None:
                stats.messages_in += result.last_offset - result.base_offset + 1
                stats.bytes_in += len(records)
        elif code not in _NOT_FAILED_PRODUCE:
            stats.failed_produce += 1
        return result

    def _append(
        self, topic: str, partition: int, records: bytes | None, now_ms: int, acks: int, transactional: bool,
        require_verification: bool = False, verification_guard: VerificationGuard | None = None,
    ) -> AppendResult:
        plog = self.log_manager.get_log(topic, partition)
        if plog is None:
            return AppendResult(errors.NOT_LEADER_OR_FOLLOWER)
        part = self.partitions.get((topic, partition))  # self.leading, inline (per partition of a produce)
        if part is None or not part.is_leader(self.node_id):
            return AppendResult(errors.NOT_LEADER_OR_FOLLOWER)
        if acks == -1 and len(part.isr) < plog.config.min_insync_replicas:
            return AppendResult(
                errors.NOT_ENOUGH_REPLICAS,
                error_message=f"The size of the current ISR {part.isr} is insufficient to satisfy the min.isr "
                f"requirement of {plog.config.min_insync_replicas} for partition {topic}-{partition}",
                log_start_offset=plog.log_start_offset,
            )
        if not records:
            return AppendResult(errors.CORRUPT_MESSAGE, error_message="empty records")
        try:
            # framing, CRC, batch size: header work; the records are walked by the log's validator
            headers = validate_batches(records, max_batch_bytes=plog.config.max_message_bytes, check_records=False)
            for h in headers:  # transactional batches come with a transactional id (server.txn_verification)
                if h.is_control or (h.is_transactional and not transactional):
                    return AppendResult(
                        errors.INVALID_TXN_STATE,
                        error_message="a control batch, or a transactional batch without a transactional id",
                    )
            info = plog.append_as_leader(
                records, headers, part.leader_epoch, now_ms, check_records=self.validate_records,
                require_verification=require_verification, verification_guard=verification_guard,
            )
        except InvalidRecordError as e:
            log.info("rejected produce to %s-%d: %s", topic, partition, e.message)
            return AppendResult(
                e.error_code, error_message=e.message, log_start_offset=plog.log_start_offset,
                record_errors=e.record_errors,
            )
        except ProducerStateError as e:
            return AppendResult(e.error_code, error_message=str(e), log_start_offset=plog.log_start_offset)
        except OSError as e:
            self.handle_log_dir_failure(plog.dir, e)
            return AppendResult(errors.KAFKA_STORAGE_ERROR, error_message=f"log dir failure: {e}")
        if not info.duplicate:
            if fault_injection.FAULTS and fault_injection.duplicates(info.first_offset, headers):
                self._append_copy(plog, part, records, now_ms)  # broken on purpose (odradek.verify)
            self._maybe_advance_high_watermark(part, plog)
            self.notify(topic, partition)  # consumers, and followers waiting at the log end
        first, last = info.first_offset, info.last_offset
        if fault_injection.FAULTS and fault_injection.misreports(first, headers):
            first, last = first + 1, last + 1  # broken on purpose (odradek.verify)
        return AppendResult(
            errors.NONE, first, info.log_append_time, plog.log_start_offset, last_offset=last,
            replicated=plog.high_watermark > info.last_offset and len(part.isr) >= plog.config.min_insync_replicas,
        )

    def _append_copy(self, plog: Log, part: Partition, records: bytes, now_ms: int) -> None:
        """``duplicate-append`` (odradek.server.fault_injection): the records appended once more, as a
        batch of no producer, so that idempotence is broken on purpose."""
        copy = [(r.key, r.value, r.headers) for r in decode_records(records)]
        batch = build_batch(copy, timestamp=now_ms)
        plog.append_as_leader(batch, validate_batches(batch), part.leader_epoch, now_ms)

    def notify(self, topic: str, partition: int) -> None:
        """Check fetches waiting on this partition again (after the current request batch)."""
        tp = (topic, partition)
        if tp in self.fetch_purgatory.watchers and tp not in self._wake_scheduled:  # per append: no call
            self._wake_scheduled.add(tp)
            (self.scheduler or asyncio.get_running_loop()).call_soon(self._wake, tp)

    def _wake(self, tp: TopicPartition) -> None:
        self._wake_scheduled.discard(tp)
        self.fetch_purgatory.check_and_complete(tp)

    # -- fetch
    def fetch(
        self, params: FetchParams, partitions: FetchPartitions
    ) -> LogReadResult | DelayedFetch | DelayedRemoteFetch:
        """Read ``partitions`` (Kafka's fetchMessages): the read when it can be answered now (no
        wait asked, ``min_bytes`` read, or an error), else a DelayedFetch in the fetch purgatory.
        A follower's fetch offsets move its state (ISR, high watermark) on this first read only.
        A fetch that will wait and finds nothing to read by its offsets (``nothing_to_read``: a
        follower or a consumer at the end of what it may read) is parked without reading."""
        if params.max_wait_ms > 0 and params.min_bytes > 0 and self.nothing_to_read(params, partitions):
            if params.replica_id >= 0:  # what the read would have done: every partition read without error
                now = self.lag_clock_ms()
                for (name, p), cp in partitions:
                    self.on_follower_fetch(name, p, params.replica_id, cp.fetch_offset, now)
        else:
            read = self.read_from_log(params, partitions, update_follower=params.replica_id >= 0)
            if read.remote:
                return self._remote_fetch(read, read.remote)
            if params.max_wait_ms <= 0 or read.bytes >= params.min_bytes or read.has_error:
                return read
        op = DelayedFetch(self, params, partitions)
        topics = self.topics
        self.fetch_purgatory.watch(op, [tp for tp, _ in partitions if topics.get(tp[0]) is not None])
        return op

    def _remote_fetch(self, read: LogReadResult, remote: list[RemoteFetchInfo]) -> DelayedRemoteFetch:
        """Kafka's DelayedRemoteFetch: the partitions read below their local log start are read from the
        remote store on the remote log manager's reader threads; the fetch waits in the purgatory for them
        (up to remote.fetch.max.wait.ms), woken from those threads through the loop."""
        reader = self.remote_reader
        assert reader is not None
        op = DelayedRemoteFetch(reader.fetch_max_wait_ms(), read, remote)
        key = ("", id(op))  # no topic has an empty name: a key of its own in the fetch purgatory
        # the reads complete on the reader threads: the check runs on the loop (a test's scheduler: its thread)
        wake = self.scheduler.call_soon if self.scheduler is not None else asyncio.get_running_loop().call_soon_threadsafe
        purgatory = self.fetch_purgatory
        for info in remote:
            plog = self.get_log(info.topic, info.partition)
            if plog is None:
                continue
            fut = info.future = reader.read_async(info, plog)
            fut.add_done_callback(lambda _f: wake(purgatory.check_and_complete, key))
        purgatory.watch(op, [key])
        return op

    def delay_remote_list_offsets(self, op: DelayedRemoteListOffsets) -> None:
        """Kafka's DelayedRemoteListOffsets in its purgatory: a ListOffsets whose timestamp lookups read the
        remote tier waits for them (up to its timeout), woken from the reader threads through the loop."""
        key = ("", id(op))  # a key of its own
        wake = self.scheduler.call_soon if self.scheduler is not None else asyncio.get_running_loop().call_soon_threadsafe
        purgatory = self.remote_list_offsets_purgatory
        if purgatory.try_complete_else_watch(op, [key]):
            return
        for fut in op.lookups:
            fut.add_done_callback(lambda _f: wake(purgatory.check_and_complete, key))

    def read_from_log(self, params: FetchParams, partitions: FetchPartitions, update_follower: bool) -> LogReadResult:
        """Read every partition of a fetch, within its own and the request's byte limits (Kafka's
        readFromLog). ``update_follower``: a follower's fetch offset counts as its log end offset
        for each partition whose epoch check and read succeed (Kafka's updateFollowerFetchState)."""
        reg = self.topics
        follower = params.replica_id >= 0
        replica_id = params.replica_id if follower else -1
        isolation = params.isolation
        read_committed = isolation is _TXN_COMMITTED
        faults = fault_injection.FAULTS  # empty unless started to be broken on purpose (odradek.verify)
        remaining = params.max_bytes
        total = 0
        has_error = False
        out: list[tuple[TopicPartition, Any, PartitionResult]] = []
        remote: list[RemoteFetchInfo] | None = None
        for key, cp in partitions:
            name, p = key
            pr = PartitionResult(p)
            out.append((key, cp, pr))
            meta = reg.get(name)
            if meta is None:
                pr.error_code = errors.UNKNOWN_TOPIC_ID if params.topic_ids else errors.UNKNOWN_TOPIC_OR_PARTITION
                has_error = True
                continue
            if not 0 <= p < len(meta.partitions):
                pr.error_code = errors.UNKNOWN_TOPIC_OR_PARTITION
                has_error = True
                continue
            leader_epoch = self.leader_epoch(name, p)
            if cp.current_leader_epoch >= 0 and cp.current_leader_epoch != leader_epoch:
                pr.error_code = (
                    errors.FENCED_LEADER_EPOCH if cp.current_leader_epoch < leader_epoch else errors.UNKNOWN_LEADER_EPOCH
                )
                has_error = True
                continue
            if follower:
                code = self.follower_error(name, p, replica_id, cp.current_leader_epoch)
                if code is not None:
                    pr.error_code = code
                    has_error = True
                    continue
            limit = max(min(cp.max_bytes, remaining), 0)
            held = follower and self._leader_throttles(key, replica_id)
            if held:  # read (the follower's state moves) but send nothing: Kafka's shouldLeaderThrottle
                limit = 0
            fetch_offset = cp.fetch_offset
            if faults and "consumer-skip" in faults and not follower:
                fetch_offset = fault_injection.skipped_fetch_offset(fetch_offset)
            code, plog, data = self.read(name, p, fetch_offset, limit, isolation, total == 0 and not held)
            pr.error_code = code
            if update_follower and code == errors.NONE:
                self.on_follower_fetch(name, p, replica_id, cp.fetch_offset, self.lag_clock_ms())
            if plog is not None:
                pr.high_watermark = plog.high_watermark
                pr.last_stable_offset = plog.last_stable_offset
                pr.log_start_offset = plog.log_start_offset
            if read_committed:
                pr.aborted_transactions = ()
            if code != errors.NONE:
                has_error = True
                continue
            if type(data) is RemoteFetchInfo:  # below a tiered partition's local log start
                data.result = pr
                if remote is None:
                    remote = []
                remote.append(data)
                continue
            if data is not None and data.size:
                if read_committed and plog is not None and not (faults and "expose-aborted" in faults):
                    # the aborted transactions the data overlaps
                    pr.aborted_transactions = [
                        (a.producer_id, a.first_offset)
                        for a in plog.collect_aborted_transactions(cp.fetch_offset, plog.fetch_upper_bound(data))
                    ]
                pr.records = data.regions
                pr.records_size = data.size
                total += data.size
                remaining -= data.size
        return _new_read_result(LogReadResult, (out, total, has_error, remote))  # LogReadResult(...) at a quarter of the cost

    def nothing_to_read(self, params: FetchParams, partitions: FetchPartitions) -> bool:
        """Whether ``read_from_log`` would now read no byte and meet no error, decided from offsets
        alone (Kafka's DelayedFetch.tryComplete compares fetch offsets with end offsets rather
        than reading): True only when every partition's topic is known, this broker leads it at the
        fetch's leader epoch (and the fetching follower is one of its replicas), its log is here and
        the fetch offset is exactly the read's upper bound (``Log.latest_offset`` of the fetch's isolation:
        the log end offset for a follower, the last stable offset for read_committed, else the high
        watermark), at or above the log start.
        Any other case is left to the read."""
        reg = self.topics
        parts = self.partitions
        get_log = self.log_manager.get_log
        replica_id = params.replica_id
        follower = replica_id >= 0
        isolation = params.isolation
        node = self.node_id
        for key, cp in partitions:
            part = parts.get(key)
            if part is None or not part.is_leader(node):
                return False
            if 0 <= cp.current_leader_epoch != part.leader_epoch:
                return False
            if follower and not part.is_follower(replica_id):
                return False
            meta = reg.get(key[0])
            if meta is None or not 0 <= key[1] < len(meta.partitions):
                return False
            plog = get_log(*key)
            if plog is None:
                return False
            bound = plog.latest_offset(isolation)
            if cp.fetch_offset != bound or bound < plog.log_start_offset:
                return False
        return True

    def _leader_throttles(self, tp: TopicPartition, replica_id: int) -> bool:
        """A throttled partition's follower outside the ISR while the leader quota is exceeded."""
        quota = self.leader_quota
        if quota is None or not quota.is_throttled(tp):
            return False
        part = self.partitions.get(tp)
        return (part is None or replica_id not in part.isr) and quota.is_quota_exceeded()

    def record_leader_replication(self, read: LogReadResult) -> None:
        """Count a follower fetch response's bytes of throttled partitions against the leader
        quota (KafkaApis.sizeOfThrottledPartitions), once per response."""
        quota = self.leader_quota
        if quota is None:
            return
        size = sum(pr.records_size for tp, _cp, pr in read.partitions if pr.records_size and quota.is_throttled(tp))
        quota.record(size)

    def read(
        self,
        topic: str,
        partition: int,
        fetch_offset: int,
        max_bytes: int,
        isolation: FetchIsolation,
        min_one_message: bool,
    ) -> tuple[int, Log | None, Any]:
        """(error code, log, FetchData | None), read up to ``Log.latest_offset`` of ``isolation``: a
        consumer below the high watermark (``HIGH_WATERMARK``) or the last stable offset
        (``TXN_COMMITTED``), a follower (``LOG_END``, the isolation Fetch gives only replicas) up to the log
        end offset."""
        plog = self.get_log(topic, partition)
        if plog is None:
            return errors.UNKNOWN_TOPIC_OR_PARTITION, None, None
        if self.leading(topic, partition) is None:
            return errors.NOT_LEADER_OR_FOLLOWER, None, None
        if plog.config.remote_storage_enable and fetch_offset < plog.local_log_start_offset:
            if isolation is _LOG_END:
                # a follower below the local log start of a tiered log builds its state from the remote tier
                # and fetches from the local log start (Kafka's OffsetMovedToTieredStorageException, KIP-405)
                return errors.OFFSET_MOVED_TO_TIERED_STORAGE, plog, None
            if self.remote_reader is not None and plog.log_start_offset <= fetch_offset:
                # tiered storage (KIP-405): the records are in the remote tier only
                if self.remote_reader.fetch_throttle_time_ms() > 0:
                    # the remote fetch quota is exceeded (KIP-956): no remote read, no records, no error, so
                    # the client fetches again, and the fetch may wait for the other partitions
                    # (Kafka's ReplicaManager.handleOffsetOutOfRangeError)
                    return errors.NONE, plog, FetchData.empty(fetch_offset)
                return errors.NONE, plog, RemoteFetchInfo(
                    topic, partition, fetch_offset, max_bytes, min_one_message, isolation)
        try:
            data = plog.read(fetch_offset, max_bytes, plog.latest_offset(isolation), min_one_message)
        except OffsetOutOfRangeError:
            return errors.OFFSET_OUT_OF_RANGE, plog, None
        return errors.NONE, plog, data

    def cancel_waiters(self) -> None:
        """Drop every delayed operation unanswered (broker shutdown)."""
        self.fetch_purgatory.cancel_all()
        self.produce_purgatory.cancel_all()
        self.remote_list_offsets_purgatory.cancel_all()

    # ------------------------------------------------------------------ acks=all
    def wait_for_replication(
        self, required: dict[TopicPartition, int], timeout_ms: int
    ) -> dict[TopicPartition, int] | DelayedProduce:
        """The outcome per partition of an acks=all append when every partition's is decided
        already (the high watermark reached its offset, or leadership moved), else a
        DelayedProduce in the produce purgatory, watched under the partitions still waiting,
        that completes when they are decided or ``timeout_ms`` passes (Kafka's appendRecords
        with delayedProduceRequestRequired)."""
        results: dict[TopicPartition, int] = {}
        check = self._replication_check
        for tp, off in required.items():
            code = check(tp, off)
            if code is None:
                break
            results[tp] = code
        else:  # a lone leader, or followers already past it: no purgatory
            return results
        pending = {tp: off for tp, off in required.items() if tp not in results} if results else required
        op = DelayedProduce(pending, check, timeout_ms, results)
        # watched under the partitions its first full check leaves pending
        if self.produce_purgatory.try_complete_else_watch(op, op.pending):
            assert op.response is not None
            return op.response
        return op

    def _replication_check(self, tp: TopicPartition, required_offset: int) -> int | None:
        part = self.partitions.get(tp)
        plog = self.log_manager.get_log(*tp)
        if part is None or not part.is_leader(self.node_id) or plog is None:
            return errors.NOT_LEADER_OR_FOLLOWER
        if plog.high_watermark >= required_offset:
            if len(part.isr) < plog.config.min_insync_replicas:
                return errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND
            return errors.NONE
        return None

    def _complete_produces(self, tp: TopicPartition) -> None:
        self.produce_purgatory.check_and_complete(tp)

    # ------------------------------------------------------------------ cluster mode: leader side
    def append_internal(
        self, part: Partition, plog: Log, batch: bytes | bytearray, now_ms: int, *,
        require_verification: bool = False, verification_guard: VerificationGuard | None = None,
    ) -> AppendInfo:
        """A coordinator's own batch (control batches allowed) on a partition this broker leads:
        the leader's epoch, the high watermark and waiting fetches as for a produce."""
        try:
            info = plog.append_as_leader(batch, validate_batches(batch), part.leader_epoch, now_ms,
                                         origin=AppendOrigin.COORDINATOR, require_verification=require_verification,
                                         verification_guard=verification_guard)
        except OSError as e:
            self.handle_log_dir_failure(plog.dir, e)
            raise
        self._maybe_advance_high_watermark(part, plog)
        self.notify(part.topic, part.index)
        return info

    def _maybe_advance_high_watermark(self, part: Partition, plog: Log) -> None:
        ls = part.leader_state
        if ls is None:
            return
        if ls.maybe_advance_high_watermark(plog.log_end_offset):
            plog.update_high_watermark(ls.high_watermark)
            self.notify(part.topic, part.index)
            self._complete_produces(part.tp)

    def follower_error(self, topic: str, partition: int, replica_id: int, current_leader_epoch: int) -> int | None:
        """None when ``replica_id`` is a follower of a partition this broker leads; else the error
        Kafka's Partition.followerReplicaOrThrow answers a fetch from a replica the assignment
        does not name (UNKNOWN_LEADER_EPOCH when the fetch carries a leader epoch, which matched
        ours already; NOT_LEADER_OR_FOLLOWER otherwise). Not leading is left to ``read``."""
        part = self.partitions.get((topic, partition))
        if part is None or part.leader_state is None:
            return None
        if part.is_follower(replica_id):
            return None
        log.warning("fetch from replica %d of %s-%d refused: not one of its replicas %s",
                    replica_id, topic, partition, part.replicas)
        return errors.UNKNOWN_LEADER_EPOCH if current_leader_epoch >= 0 else errors.NOT_LEADER_OR_FOLLOWER

    def on_follower_fetch(self, topic: str, partition: int, replica_id: int, fetch_offset: int, now_ms: int) -> None:
        """A follower fetched from ``fetch_offset``: that is its log end offset now (``now_ms`` by
        :attr:`lag_clock_ms`)."""
        part = self.partitions.get((topic, partition))
        plog = self.get_log(topic, partition)
        if part is None or plog is None or part.leader_state is None:
            return
        ls = part.leader_state
        ls.on_follower_fetch(replica_id, fetch_offset, plog.log_end_offset, now_ms)
        if not part.isr_write_in_flight and replica_id not in part.isr and ls.joins_isr(replica_id):
            new_isr = part.isr + [replica_id]
            ls.isr = list(new_isr)  # maximal ISR: counts for the high watermark at once
            self._write_isr(part, new_isr)
        self._maybe_advance_high_watermark(part, plog)

    def check_isr(self, now_ms: int, lag_time_max_ms: int) -> None:
        """Followers that fell behind for replica.lag.time.max.ms leave the ISR (``now_ms`` by
        :attr:`lag_clock_ms`)."""
        for part in list(self.partitions.values()):
            ls = part.leader_state
            if ls is None or part.isr_write_in_flight:
                continue
            out = ls.isr_to_shrink(now_ms, lag_time_max_ms)
            if out:
                log.info(
                    "shrinking ISR of %s-%d from %s: %s not caught up within %d ms",
                    part.topic, part.index, part.isr, out, lag_time_max_ms,
                )
                self._write_isr(part, [b for b in part.isr if b not in out])

    def _write_isr(self, part: Partition, new_isr: list[int]) -> None:
        if self.isr_writer is None:  # none given (a lone replica): nothing to write
            return
        part.isr_write_in_flight = True
        epoch = part.leader_epoch

        def done(result: tuple[list[int], int, int] | None) -> None:
            part.isr_write_in_flight = False
            current = self.partitions.get(part.tp)
            if current is not part or part.leader_epoch != epoch or part.leader_state is None:
                return  # leadership moved on meanwhile; the controller has the last word
            ls = part.leader_state
            if result is None:
                ls.isr = list(part.isr)  # failed: back to the committed ISR
                return
            isr, zk_version, leader_epoch = result
            if leader_epoch != part.leader_epoch:
                return
            if len(isr) < len(part.isr):
                self.isr_shrinks += 1
            elif len(isr) > len(part.isr):
                self.isr_expands += 1
            part.isr, part.zk_version = list(isr), zk_version
            ls.isr = list(isr)
            log.info("ISR of %s-%d is now %s", part.topic, part.index, isr)
            plog = self.get_log(*part.tp)
            if plog is not None:
                self._maybe_advance_high_watermark(part, plog)
            self._complete_produces(part.tp)

        self.isr_writer.submit(part, new_isr, done)

    # ------------------------------------------------------------------ cluster mode: roles
    def make_leader(self, part: Partition, plog: Log, now_ms: int) -> None:
        plog.leader_epoch_cache.assign(part.leader_epoch, plog.log_end_offset)
        ls = LeaderState(
            self.node_id, part.leader_epoch, list(part.replicas), list(part.isr),
            plog.log_end_offset, plog.high_watermark,
        )
        ls.start(self.lag_clock_ms())  # (now_ms: the wall clock)
        part.leader_state = ls
        self._maybe_advance_high_watermark(part, plog)

    def make_follower(self, part: Partition) -> None:
        part.leader_state = None
        self._complete_produces(part.tp)  # NOT_LEADER_OR_FOLLOWER for whoever waited here
        self.notify(part.topic, part.index)  # waiting fetches learn it too

    # ------------------------------------------------------------------ cluster mode: the controller's requests
    def add_leadership_listener(self, topic: str, listener: LeadershipListener) -> None:
        """``listener`` hears of every change of this broker's role for ``topic``'s partitions
        (Kafka's onLeadershipChange: the coordinators load and unload their internal topics);
        ``topic`` :data:`ANY_TOPIC` for every partition's (the share-partition manager's, Kafka's
        PartitionListener)."""
        self._leadership_listeners.setdefault(topic, []).append(listener)

    def _leadership_changed(self, topic: str, partition: int, leader: bool) -> None:
        listeners = self._leadership_listeners
        for listener in (*listeners.get(topic, ()), *listeners.get(ANY_TOPIC, ())):
            try:
                listener(topic, partition, leader)
            except Exception:
                log.exception("leadership listener failed for %s-%d (leader=%s)", topic, partition, leader)

    def start_fetchers(self, fetchers: ReplicaFetcherManager) -> None:
        """Start-up: the follower side; a fetcher's storage error takes its log dir offline."""
        fetchers.on_storage_error = self.handle_log_dir_failure
        fetchers.on_appended = self._count_replication_bytes_in
        self.fetchers = fetchers

    def _count_replication_bytes_in(self, topic: str, size: int) -> None:
        self.topic_stats.topic(topic).replication_bytes_in += size

    async def shutdown_fetchers(self) -> None:
        """Stop replicating; LeaderAndIsr and StopReplica are ignored from now on."""
        if self.fetchers is not None:
            fetchers, self.fetchers = self.fetchers, None
            await fetchers.shutdown()

    def become_leader_or_follower(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """Apply a (fenced) LeaderAndIsr request; the per-partition answers (Kafka's
        ReplicaManager.becomeLeaderOrFollower). An older leader epoch than the one known is
        STALE_CONTROLLER_EPOCH, a partition in an offline log dir KAFKA_STORAGE_ERROR, the same
        leader and epoch again only refreshes the ISR and assignment."""
        if self.fetchers is None:  # shutting down
            return []
        leaders = {int(n["id"]): n for n in body["live_leaders"]}
        topic_ids: dict[str, str] = body.get("topic_ids") or {}
        out = []
        now_ms = self.now_ms()
        for ps in body["partitions"]:
            topic, index = str(ps["topic"]), int(ps["partition"])
            tp = (topic, index)
            code = errors.NONE
            current = self.partitions.get(tp)
            epoch = int(ps["leader_epoch"])
            if tp in self.log_manager.offline_partitions:
                code = errors.KAFKA_STORAGE_ERROR  # its log dir failed: the controller moves it elsewhere
            elif self._inconsistent_topic_id(tp, topic_ids):
                code = errors.INCONSISTENT_TOPIC_ID
            elif current is not None and epoch < current.leader_epoch:
                code = errors.STALE_CONTROLLER_EPOCH
            elif current is not None and epoch == current.leader_epoch and current.leader == int(ps["leader"]):
                # the same state again (a new controller resends everything): keep going as we are
                current.isr, current.zk_version = list(ps["isr"]), int(ps["zk_version"])
                current.replicas = list(ps["replicas"])
            elif self.node_id not in ps["replicas"]:
                code = errors.NONE  # not ours (reassignment leftovers); StopReplica removes it
            else:
                code = self._become(ps, leaders, now_ms, topic_ids)
            out.append({"topic": topic, "partition": index, "error_code": code})
        return out

    def _inconsistent_topic_id(self, tp: tuple[str, int], topic_ids: dict[str, str]) -> bool:
        """The log here belongs to another topic of the same name than the one the controller names
        (Kafka's ReplicaManager.becomeLeaderOrFollower: INCONSISTENT_TOPIC_ID, the partition's role
        unchanged, so one topic's records are never served as another's)."""
        named = topic_ids.get(tp[0])
        plog = self.log_manager.get_log(*tp)
        if not named or plog is None or plog.topic_id is None:
            return False
        wanted = topic_id_from_str(named)
        if plog.topic_id == wanted:
            return False
        log.error("Topic id in the log of %s-%d (%s, %s) does not match the topic id %s in the controller's "
                  "request; the partition is not served here (INCONSISTENT_TOPIC_ID)",
                  tp[0], tp[1], plog.topic_id, plog.dir, wanted)
        return True

    def _topic_id(self, topic: str, topic_ids: dict[str, str]) -> uuid.UUID | None:
        named = topic_ids.get(topic)
        if named:  # the controller's word (the metadata cache may not know a new topic yet)
            return topic_id_from_str(named)
        meta = self.topics.get(topic)
        return meta.topic_id if meta is not None else self.topics.topic_id_from_store(topic)

    def _become(
        self, ps: dict[str, Any], leaders: dict[int, dict[str, Any]], now_ms: int, topic_ids: dict[str, str]
    ) -> int:
        assert self.fetchers is not None
        topic, index = str(ps["topic"]), int(ps["partition"])
        tp = (topic, index)
        lm = self.log_manager
        try:
            plog = lm.get_or_create_log(topic, index, self._topic_id(topic, topic_ids))
        except InconsistentTopicIdError as e:  # an unloaded folder of another topic of this name
            log.error("%s; the partition is not served here (INCONSISTENT_TOPIC_ID)", e.message)
            return errors.INCONSISTENT_TOPIC_ID
        except OSError as e:
            self.handle_log_dir_failure(lm.log_dir_of(topic, index) or lm.log_dirs[0], e)
            return errors.KAFKA_STORAGE_ERROR
        part = Partition(
            topic, index, list(ps["replicas"]), int(ps["leader"]), int(ps["leader_epoch"]), list(ps["isr"]),
            int(ps["zk_version"]), int(ps["controller_epoch"]),
        )
        old = self.partitions.get(tp)
        self.partitions[tp] = part
        if part.leader == self.node_id:
            self.fetchers.remove(tp)
            self.make_leader(part, plog, now_ms)
            log.info("became leader of %s-%d at epoch %d (isr %s, log end %d, high watermark %d)",
                     topic, index, part.leader_epoch, part.isr, plog.log_end_offset, plog.high_watermark)
            if old is not None:
                self.make_follower(old)  # wake whoever waited on the old role
            self._leadership_changed(topic, index, True)
            return errors.NONE
        if old is not None:
            self.make_follower(old)
        self.make_follower(part)
        node = leaders.get(part.leader) or self.live_broker(part.leader)
        if node is None:
            log.warning("leader %d of %s-%d is not live; not fetching", part.leader, topic, index)
            self.fetchers.remove(tp)
        else:
            self.fetchers.add(tp, part.leader, str(node["host"]), int(node["port"]), part.leader_epoch)
        log.info("became follower of %s-%d at epoch %d, leader %d", topic, index, part.leader_epoch, part.leader)
        self._leadership_changed(topic, index, False)
        return errors.NONE

    def start_missing_fetchers(self) -> None:
        """After a metadata update: a follower told of its leader while that leader was down
        has no fetcher; start it once the leader is live again."""
        if self.fetchers is None:
            return
        for tp, part in self.partitions.items():
            if part.leader == self.node_id or tp in self.fetchers.leader_of:
                continue
            node = self.live_broker(part.leader)
            if node is not None:
                self.fetchers.add(tp, part.leader, str(node["host"]), int(node["port"]), part.leader_epoch)

    def stop_replicas(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        """Apply a (fenced) StopReplica request (Kafka's ReplicaManager.stopReplicas): stop
        fetching and serving each partition, deleting its log when ``delete`` is set."""
        if self.fetchers is None:  # shutting down
            return []
        out = []
        for ps in body["partitions"]:
            tp = (str(ps["topic"]), int(ps["partition"]))
            self.fetchers.remove(tp)
            part = self.partitions.pop(tp, None)
            plog = self.log_manager.get_log(*tp)
            if (ps["delete"] and int(ps.get("leader_epoch", -1)) == EPOCH_DURING_DELETE and part is not None
                    and part.leader == self.node_id and plog is not None and plog.config.remote_storage_enable
                    and self.remote_reader is not None):
                # Kafka's RemoteLogManager.stopPartitions with deleteRemoteLog: the topic is deleted and this
                # broker was its leader
                self.remote_reader.delete_remote_log_partition(plog)
            if part is not None:
                self.make_follower(part)
                self._leadership_changed(tp[0], tp[1], False)
            if ps["delete"] and self.log_manager.get_log(*tp) is not None:
                self.log_manager.delete_log(*tp)
                log.info("deleted replica %s-%d", *tp)
            out.append({"topic": tp[0], "partition": tp[1], "error_code": errors.NONE})
        return out

    def flush_dirty(self, now_ms: int) -> None:
        """The log flusher's tick: a log that cannot be flushed takes its log dir offline."""
        self.log_manager.flush_dirty(now_ms, on_error=self.handle_log_dir_failure)

    def checkpoint(self) -> None:
        """The periodic checkpoints (recovery points, log start offsets, high watermarks): a log dir
        whose checkpoint cannot be written goes offline, as an append's I/O error takes it (Kafka's
        CheckpointFileWithFailureHandler); before, a full disk only logged a traceback each time and
        left the dir serving."""
        self.log_manager.checkpoint(on_error=self.handle_log_dir_failure)

    def handle_log_dir_failure(self, path: Any, error: OSError) -> None:
        """An I/O error in a log: its log dir goes offline (Kafka's LogDirFailureChannel and
        ReplicaManager.handleLogDirFailure). The partitions in it stop being served and fetched
        here, their leadership listeners hear of it and the controller is told (LogDirChange);
        with no log dir left the broker halts, as Kafka does."""
        lm = self.log_manager
        d = lm.dir_containing(Path(path))
        if d is None or d in lm.offline_dirs:
            return
        log.error("I/O error in %s (%s)", path, error)
        gone = lm.mark_dir_offline(d)
        for tp in gone:
            part = self.partitions.pop(tp, None)
            if part is not None:
                self.make_follower(part)
            if self.fetchers is not None:
                self.fetchers.remove(tp)
            self._leadership_changed(tp[0], tp[1], False)
        if lm.offline_dirs >= set(lm.log_dirs):
            log.error("every log dir has failed; halting broker %d", self.node_id)
            self.halt(1)
            return
        self.on_dir_offline()
