"""Exactly-once writes of a Spark streaming sink into Kafka: one transaction per task of a micro-batch.

Spark's own Kafka sink is at-least-once: a micro-batch replayed after a failure (the driver died after
the tasks wrote but before the batch reached the query's commit log) writes its rows again. With the
sink option ``exactlyOnce=true`` each task of a micro-batch writes its rows in one Kafka transaction:

- transactional id ``<transactionalIdPrefix>-<query id>-<partition id>``: the Spark query id survives
  restarts (it lives in the checkpoint), the partition id is the task's place in the micro-batch. A
  retried or replayed task of the same partition calls ``InitProducerId`` with the same transactional id,
  which bumps the producer epoch: the transaction a zombie attempt left open is aborted and the zombie
  is fenced (PRODUCER_FENCED) if it tries to write or commit again;
- the batch id is recorded inside the same transaction, as a transactional offset commit
  (TxnOffsetCommit, KIP-447) of offset ``batch id + 1`` for partition 0 of the sink topic in the group
  named like the transactional id. It becomes visible exactly when the rows do. A replayed task reads
  that group's committed offset first (after ``init_transactions``, so no transaction of its id is
  still open) and writes nothing if the batch is already there: the replay is fenced instead of
  duplicated, for readers with ``isolation.level=read_committed``.

The replay must give a partition the same rows as the first run, which holds for the ``odradek``
source (a replayed micro-batch reads exactly the planned offset ranges) and deterministic transforms.
The batch id and query id reach the task as Spark's local properties ``streaming.sql.batchId`` and
``sql.streaming.queryId``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

BATCH_ID_PROPERTY = "streaming.sql.batchId"
QUERY_ID_PROPERTY = "sql.streaming.queryId"
DEFAULT_PREFIX = "odradek-sink"


class NotInStreamingTask(RuntimeError):
    """``exactlyOnce`` used where Spark gives no batch id (a batch write, or outside a task)."""


@dataclass(frozen=True)
class TaskIdentity:
    """Where a sink task sits: the query, the micro-batch and the task's partition of it."""

    query_id: str
    batch_id: int
    partition_id: int

    def transactional_id(self, prefix: str) -> str:
        return f"{prefix}-{self.query_id}-{self.partition_id}"

    def marker_offset(self) -> int:
        """The offset committed with the batch's transaction: ``batch id + 1`` (0 stays "nothing yet")."""
        return self.batch_id + 1


def task_identity(local_properties: Mapping[str, str | None], partition_id: int) -> TaskIdentity:
    """The task's identity from Spark's local properties (pure, so unit-testable)."""
    batch = local_properties.get(BATCH_ID_PROPERTY)
    query = local_properties.get(QUERY_ID_PROPERTY)
    if batch is None or query is None:
        raise NotInStreamingTask(
            "exactlyOnce=true needs a streaming query (Spark sets no batch id for this write); "
            "use writeStream, or leave exactlyOnce unset"
        )
    try:
        batch_id = int(batch)
    except ValueError:
        raise NotInStreamingTask(f"Spark's batch id {batch!r} is not a number") from None
    return TaskIdentity(query, batch_id, partition_id)


def current_task() -> TaskIdentity:
    """The identity of the running PySpark task."""
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        raise NotInStreamingTask("exactlyOnce=true: not running inside a Spark task")
    props = {k: ctx.getLocalProperty(k) for k in (BATCH_ID_PROPERTY, QUERY_ID_PROPERTY)}
    return task_identity(props, ctx.partitionId())


def already_written(kafka: Mapping[str, Any], ident: TaskIdentity, prefix: str, marker_topic: str,
                    timeout: float) -> bool:
    """Whether the batch's transaction for this task committed already (its marker offset is visible)."""
    from confluent_kafka import Consumer, TopicPartition

    conf: dict[str, Any] = {k: v for k, v in kafka.items() if k not in _PRODUCER_ONLY}
    conf.update({"group.id": ident.transactional_id(prefix), "enable.auto.commit": False,
                 "isolation.level": "read_committed"})
    consumer = Consumer(conf)
    try:
        got = consumer.committed([TopicPartition(marker_topic, 0)], timeout=timeout)
    finally:
        consumer.close()
    off = int(got[0].offset) if got and got[0].error is None else -1
    if got and got[0].error is not None:
        raise RuntimeError(f"cannot read the batch marker of {ident.transactional_id(prefix)}: {got[0].error}")
    return off >= ident.marker_offset()


def marker(ident: TaskIdentity, marker_topic: str) -> Any:
    """The offset to commit inside the task's transaction."""
    from confluent_kafka import TopicPartition

    return TopicPartition(marker_topic, 0, ident.marker_offset(), metadata=f"batch {ident.batch_id}")


def marker_group_metadata(kafka: Mapping[str, Any], ident: TaskIdentity, prefix: str) -> Any:
    """Group metadata for ``send_offsets_to_transaction``: the marker group, no member (a standalone
    group, as a consumer with ``assign`` has)."""
    from confluent_kafka import Consumer

    conf: dict[str, Any] = {k: v for k, v in kafka.items() if k not in _PRODUCER_ONLY}
    conf.update({"group.id": ident.transactional_id(prefix), "enable.auto.commit": False})
    consumer = Consumer(conf)
    try:
        return consumer.consumer_group_metadata()
    finally:
        consumer.close()


# Producer settings a consumer refuses or warns about.
_PRODUCER_ONLY = {"acks", "linger.ms", "enable.idempotence", "transactional.id", "transaction.timeout.ms",
                  "compression.type", "batch.size", "batch.num.messages", "queue.buffering.max.ms",
                  "queue.buffering.max.messages", "queue.buffering.max.kbytes", "retries",
                  "message.send.max.retries", "delivery.timeout.ms", "message.timeout.ms",
                  "max.in.flight.requests.per.connection", "max.in.flight", "partitioner", "isolation.level"}
