"""How far a read may go in a partition's log (Kafka's FetchIsolation, org.apache.kafka.server.storage.log).

- ``LOG_END``: up to the log end offset: a follower's fetch (a replica id >= 0), and a ListOffsets that is not a
  client's (a replica's or a debugging tool's).
- ``HIGH_WATERMARK``: up to the high watermark: a consumer at ``read_uncommitted`` (isolation level 0).
- ``TXN_COMMITTED``: up to the last stable offset, with the aborted transactions the data overlaps: a consumer at
  ``read_committed`` (isolation level 1).

A request's replica id and isolation level (the wire's int8, Kafka's IsolationLevel) are turned into one of these
once, by the protocol handlers (:meth:`FetchIsolation.of` for Fetch and share groups,
:meth:`FetchIsolation.for_list_offsets` for ListOffsets); everything below them (the replica manager, the delayed
and remote fetches, :class:`odradek.log.Log`) takes the enum. :meth:`odradek.log.Log.latest_offset` is the offset
each one stops at (Kafka's UnifiedLog.read maxOffsetMetadata, Partition.fetchOffsetForTimestamp's
lastFetchableOffset).

One difference from Kafka's ``FetchIsolation.of``: Kafka reads the replica id -3 (FUTURE_LOCAL_REPLICA_ID, its own
log-dir mover, which never sends a Fetch over the wire) to the log end. Odradek moves logs between directories
without fetching (:mod:`odradek.log.dir_move`), so a Fetch naming -3 can only come from a client, and it gets a
consumer's isolation, as every other negative replica id does.
"""

from __future__ import annotations

import enum

CONSUMER_REPLICA_ID = -1  # Kafka's FetchRequest.CONSUMER_REPLICA_ID / ListOffsetsRequest.CONSUMER_REPLICA_ID


class IsolationLevel(enum.IntEnum):
    """A consumer's isolation level, the int8 of Fetch v4+ and ListOffsets v2+ (Kafka's IsolationLevel)."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1


class FetchIsolation(enum.Enum):
    """The offset a read stops before (Kafka's FetchIsolation); see the module docstring."""

    LOG_END = "log_end"
    HIGH_WATERMARK = "high_watermark"
    TXN_COMMITTED = "txn_committed"

    @staticmethod
    def of(replica_id: int, isolation_level: int) -> FetchIsolation:
        """A Fetch's isolation from its replica id and isolation level (Kafka's FetchIsolation.of): a replica
        (id >= 0) reads to the log end, a consumer to the last stable offset at read_committed (1), else to
        the high watermark. Any level but 1 is read_uncommitted, as the handlers always read it."""
        if replica_id >= 0:
            return _LOG_END
        return _TXN_COMMITTED if isolation_level == 1 else _HIGH_WATERMARK

    @staticmethod
    def for_list_offsets(replica_id: int, isolation_level: int) -> FetchIsolation:
        """A ListOffsets' isolation (Kafka's ReplicaManager.fetchOffset: a client's request, replica id -1, is
        bound by its isolation level; any other, a replica's or a debugging tool's (-2), sees up to the log
        end, Partition.fetchOffsetForTimestamp's lastFetchableOffset with no isolation level)."""
        if replica_id != CONSUMER_REPLICA_ID:
            return _LOG_END
        return _TXN_COMMITTED if isolation_level == 1 else _HIGH_WATERMARK


# the members as plain globals: compared with ``is`` on the read path, without the class attribute lookup
_LOG_END = FetchIsolation.LOG_END
_HIGH_WATERMARK = FetchIsolation.HIGH_WATERMARK
_TXN_COMMITTED = FetchIsolation.TXN_COMMITTED
