"""DelayedFetch: a fetch parked until fetch.min.bytes are readable or fetch.max.wait.ms
passes (Kafka's DelayedFetch, in the replica manager's fetch purgatory, odradek.purgatory),
and FetchParams, what ReplicaManager.fetch needs of a Fetch request (Kafka's FetchParams).

It is watched under every partition it reads; an append (consumers' data lands below the
high watermark, followers' at the log end) or a leadership change checks it again.
:meth:`DelayedFetch.try_complete` reads the partitions anew (the request's positions, no
follower bookkeeping: that counts on the first read only, as in Kafka's fetchMessages) and
completes with what it read once that is at least ``min_bytes`` or a partition has an error
(Kafka's DelayedFetch cases A-F collapse to those two here: a read that errors is an
error). Before reading, the partitions' offsets are compared as Kafka's tryComplete does
(:meth:`ReplicaManager.nothing_to_read`): when every fetch offset is at its read's upper bound
and nothing else changed, the read would find nothing and is not made (a consumer's fetch on
an acks=all leader is checked at every append, before the high watermark moves). On expiry
the partitions are read once more and answered whatever they hold.
"""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple, Protocol

from odradek.log.fetch_isolation import FetchIsolation
from odradek.protocol import errors
from odradek.purgatory import DelayedOperation

if TYPE_CHECKING:
    from odradek.protocol.fetch_response import PartitionResult
    from odradek.server.fetch_session import CachedPartition

TP = tuple[str, int]


@dataclass(slots=True)
class FetchParams:
    """A fetch's request-level parameters (Kafka's FetchParams). ``isolation`` is how far its reads go,
    made by the handler from the request's replica id and isolation level (``FetchIsolation.of``: LOG_END for a
    follower); ``replica_id`` says whose fetch it is (a follower's offsets move its state)."""

    replica_id: int = -1  # ≥ 0: a follower's fetch (moves its state, the ISR and the high watermark)
    max_wait_ms: int = 0
    min_bytes: int = 0
    max_bytes: int = 0x7FFFFFFF
    isolation: FetchIsolation = FetchIsolation.HIGH_WATERMARK
    topic_ids: bool = False  # v13+: a topic unknown here is UNKNOWN_TOPIC_ID

    @property
    def is_from_follower(self) -> bool:
        return self.replica_id >= 0


# the partitions a fetch reads, in order: ((topic, partition), position and limits)
FetchPartitions = list[tuple[TP, "CachedPartition"]]


class FetchReader(Protocol):
    """What a DelayedFetch reads its partitions through: server.replica_manager.ReplicaManager (a protocol
    here, so that replication/ does not import server/ back)."""

    def nothing_to_read(self, params: FetchParams, partitions: FetchPartitions) -> bool: ...

    def read_from_log(
        self, params: FetchParams, partitions: FetchPartitions, update_follower: bool
    ) -> LogReadResult: ...


@dataclass(slots=True)
class RemoteFetchInfo:
    """Kafka's RemoteStorageFetchInfo: what to read from the remote tier for one partition of a fetch."""

    topic: str
    partition: int
    fetch_offset: int
    max_bytes: int
    min_one_message: bool
    isolation: FetchIsolation  # TXN_COMMITTED: the aborted transactions the records overlap are read too
    result: PartitionResult | None = None  # the partition's entry in the fetch's response
    future: concurrent.futures.Future[RemoteReadResult] | None = field(default=None)


@dataclass(slots=True)
class RemoteReadResult:
    """The bytes of whole batches read from a remote segment, and the aborted transactions they overlap
    (producer id, first offset) for TXN_COMMITTED."""

    records: bytes
    aborted: list[tuple[int, int]] = field(default_factory=list)
    error_code: int = errors.NONE


class LogReadResult(NamedTuple):
    """One read of a fetch's partitions (Kafka's LogReadResult, for all of them)."""

    partitions: list[tuple[TP, CachedPartition, PartitionResult]]
    bytes: int  # record bytes read
    has_error: bool  # a partition answered an error
    # partitions to read from the remote tier (tiered storage: below the local log start), or None
    remote: list[RemoteFetchInfo] | None = None


class DelayedFetch(DelayedOperation[LogReadResult]):
    __slots__ = ("manager", "params", "fetch_partitions", "_read")

    def __init__(self, manager: FetchReader, params: FetchParams, partitions: FetchPartitions) -> None:
        super().__init__(params.max_wait_ms)
        self.manager = manager
        self.params = params
        self.fetch_partitions = partitions
        self._read: LogReadResult | None = None

    def try_complete(self, key: object = None) -> bool:
        if self.manager.nothing_to_read(self.params, self.fetch_partitions):
            return False
        read = self.manager.read_from_log(self.params, self.fetch_partitions, update_follower=False)
        if read.bytes < self.params.min_bytes and not read.has_error:
            return False
        self._read = read
        return self.force_complete()

    def on_complete(self) -> LogReadResult:
        read = self._read
        if read is None:  # expired (or forced): whatever is there now
            read = self.manager.read_from_log(self.params, self.fetch_partitions, update_follower=False)
        self._read = None
        return read
