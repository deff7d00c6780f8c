"""The ``odradek`` streaming source's share-group read mode (KIP-932): ``option("shareGroup", "g")``.

    sdf = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", "127.0.0.1:9092")
           .option("subscribe", "orders").option("shareGroup", "orders-etl").option("shareTasks", 8).load())

Tasks do not own offset ranges: each of the ``shareTasks`` tasks of a micro-batch (default: the application's
parallelism, independent of the partition count) takes records from the share group, so a query scales past the
number of partitions. The rows have the usual schema (``key, value, topic, partition, offset, timestamp,
timestampType[, headers]``).

Delivery guarantee: **at-least-once**. No record is lost (while it stays under the group's
``share.delivery.count.limit``, see below); duplicates are possible after a failure. Exactly: a record is
acknowledged (ACCEPT) only after the micro-batch it was read in has committed (its sink commit and Spark's
commit log entry written), so a record whose batch failed, or whose Python worker died before acknowledging it, is
redelivered — to this query or to another member of the group — and reaches the sink again if the failed batch had
written it.

How, and why this way. An acquisition lock belongs to the share-group member (the consumer) that fetched the
record: only that consumer can acknowledge it. Spark's driver learns that a batch committed, but the consumers live
in the executors' Python workers. librdkafka's share consumer (confluent-kafka's ``ShareConsumer``, explicit
acknowledgement mode) refuses a ``poll`` while records of its previous non-empty poll are unacknowledged, and cannot
renew a lock (KIP-1222's RENEW is not in librdkafka 2.16). So:

- each Python worker process keeps a pool of share consumers (module level, keyed by group, bootstrap and
  settings); Spark reuses Python workers (``spark.python.worker.reuse``, the default; a task refuses to run
  without it, since a worker that exits after each task would give back every record it read, unacknowledged);
- stream offsets are ``{"batch": n}``, a batch counter kept in the checkpoint (``latestOffset`` gives ``n + 1``:
  every trigger makes a batch, possibly empty, since the acknowledgements of a batch travel with the next one's
  tasks; so run it with a processing-time trigger: Trigger.AvailableNow or Once would read one batch and leave
  its records unacknowledged until the next run, which releases them);
- ``partitions(start, end)`` plans ``shareTasks`` tasks, each carrying the batch ``end`` (being run), the batch
  ``start`` (the last committed one: Spark runs micro-batches one at a time and plans one only once the previous
  one committed, also after a restart) and the id of this run of the query (a reader made per query start);
- a task first settles every idle consumer of its worker's pool: what a consumer holds from a committed batch of
  this run is ACCEPTed; what it holds from an earlier run (whose last batches may have failed, or been replayed
  with other records after the restart: which, a worker cannot tell) is RELEASEd (redelivered); then it takes a
  consumer holding nothing (the least recently used, or a new one), polls once for up to
  ``shareMaxRecordsPerTask`` records (waiting at most ``shareFetchWaitMs``), and yields them as rows, keeping them
  unacknowledged (the consumer's "held" records, tagged with the batch);
- a task whose generator fails or is closed early RELEASEs what it polled; a task attempt > 0 (Spark retried a
  task inside a batch) fails, since the failed attempt's records may sit unacknowledged in another worker and
  would later be accepted as if committed: the query fails instead, and on restart those records are released
  (so ``spark.speculation`` must stay off, its default);
- a worker killed (kill -9, a lost executor) drops its connections: the broker releases its members' records at
  once. That includes records of its last committed batch not yet acknowledged (acknowledgements lag one task of
  that worker): they are redelivered, i.e. duplicates.

So duplicates come from: a failed batch whose sink had written some rows; a restart (records of the last
committed batches not yet acknowledged are released, not accepted); a Python worker that died (or that Spark
stopped, e.g. after a minute idle) holding records of committed batches; a record whose lock
(``share.record.lock.duration.ms``, a group config, 30 s by default) expired before the next task of its worker
acknowledged it — keep the trigger interval plus a batch's duration well under the lock duration, and
``shareTasks`` at least the number of Python workers so each worker gets a task in each batch; records that a
consumer's fetch brought after its poll returned wait in the client for its next poll, with their locks running
(a consumer unused for more than ``IDLE_BATCHES`` batches is closed, which releases them). When the query
stops, the records of its last batch are released (redelivered) when the restarted query's tasks settle them, or
when their lock expires. A record delivered ``share.delivery.count.limit`` times (5 by default) is archived by the
broker: a crash loop could lose records that way, as with any share consumer.

Where the share group starts (``share.auto.offset.reset``, a group config: ``latest`` by default) is set on the
group (``kafka-configs --entity-type groups``), not by ``startingOffsets``, which share mode refuses.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from odradek.pipeline.options import OptionError, kafka_params

log = logging.getLogger("odradek.pipeline.share_source")

DEFAULT_FETCH_WAIT_MS = 1000
DEFAULT_MAX_RECORDS_PER_TASK = 10_000
IDLE_BATCHES = 3  # a worker's share consumer unused for more batches than this is closed
_REFUSED = ("subscribePattern", "assign", "startingOffsets", "startingTimestamp", "startingOffsetsByTimestamp",
            "endingOffsets", "maxOffsetsPerTrigger", "minPartitions")


def is_share_mode(options: Mapping[str, str]) -> bool:
    return any(k.lower() == "sharegroup" for k in options)


@dataclass(frozen=True)
class ShareOptions:
    kafka: dict[str, str]
    topics: tuple[str, ...]
    group: str
    tasks: int
    fetch_wait_ms: int
    max_records: int

    @classmethod
    def parse(cls, options: Mapping[str, str], default_tasks: int) -> ShareOptions:
        norm = {k.lower(): str(v) for k, v in options.items()}
        refused = [name for name in _REFUSED if name.lower() in norm]
        if refused:
            raise OptionError(f"option(s) {', '.join(refused)} cannot be used with 'shareGroup': a share group "
                              "subscribes to topics by name and its start is its share.auto.offset.reset group config")
        group = norm.get("sharegroup", "").strip()
        if not group:
            raise OptionError("option 'shareGroup' must name the share group")
        topics = tuple(t.strip() for t in norm.get("subscribe", "").split(",") if t.strip())
        if not topics:
            raise OptionError("option 'subscribe' must name the topics the share group reads")
        kafka = kafka_params({k: v for k, v in options.items()})
        if "group.id" in kafka:
            raise OptionError("Kafka option 'group.id' is not supported with 'shareGroup' (which names the group)")
        return cls(kafka=kafka, topics=topics, group=group,
                   tasks=_positive(norm, "shareTasks", default_tasks),
                   fetch_wait_ms=_positive(norm, "shareFetchWaitMs", DEFAULT_FETCH_WAIT_MS),
                   max_records=_positive(norm, "shareMaxRecordsPerTask", DEFAULT_MAX_RECORDS_PER_TASK))


def _positive(norm: Mapping[str, str], name: str, default: int) -> int:
    raw = norm.get(name.lower())
    if raw is None:
        return default
    try:
        val = int(raw.strip())
    except ValueError:
        raise OptionError(f"option {name!r} must be an integer, got {raw!r}") from None
    if val < 1:
        raise OptionError(f"option {name!r} must be at least 1, got {val}")
    return val


@dataclass
class ShareInputPartition(InputPartition):
    """One share task of batch ``batch``; ``committed``: the last committed batch; ``run``: this run of the query
    (a restart is a new run)."""

    index: int
    batch: int
    committed: int
    run: str


def batch_of(offset: Mapping[str, Any]) -> int:
    batch = offset.get("batch")
    if not isinstance(batch, int) or isinstance(batch, bool):
        raise OptionError(f"offset {dict(offset)!r} is not a share-group offset ({{\"batch\": n}}): this checkpoint "
                          "was written by a query reading offset ranges, not a share group")
    return batch


class OdradekShareStreamReader(DataSourceStreamReader):
    """Driver side: batch-counter offsets and ``shareTasks`` tasks per batch (see the module docstring)."""

    def __init__(self, options: dict[str, str], schema: StructType, default_tasks: int) -> None:
        self.opts = ShareOptions.parse(options, default_tasks)
        self.schema = schema
        self.run = uuid.uuid4().hex

    def initialOffset(self) -> dict[str, int]:
        return {"batch": 0}

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, int]:
        return {"batch": batch_of(start) + 1}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return [ShareInputPartition(i, batch_of(end), batch_of(start), self.run) for i in range(self.opts.tasks)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, ShareInputPartition):
            return iter(())
        from pyspark.sql.pandas.types import to_arrow_schema

        return read_share(self.opts, to_arrow_schema(self.schema, timezone="UTC"), partition)

    def commit(self, end: dict[str, Any]) -> None:
        # the acknowledgements of batch ``end`` go with the next batch's tasks (only the consumers that read its
        # records can send them)
        log.debug("share batch %s committed", end)


# ----------------------------------------------------------------------------- executor side


@dataclass
class _Member:
    """A share consumer of this Python worker and the records of its last non-empty poll, unacknowledged."""

    consumer: Any
    held: list[Any] = field(default_factory=list)
    tag: tuple[str, int] = ("", -1)  # (run, batch) the held records were read in
    busy: bool = False


_lock = threading.Lock()
_members: dict[tuple[Any, ...], list[_Member]] = {}


def _key(opts: ShareOptions) -> tuple[Any, ...]:
    return (opts.group, opts.topics, opts.max_records, tuple(sorted(opts.kafka.items())))


def _new_member(opts: ShareOptions) -> _Member:
    from confluent_kafka import ShareConsumer

    conf: dict[str, Any] = {"group.id": opts.group, "share.acknowledgement.mode": "explicit",
                            "max.poll.records": opts.max_records}
    conf.update(opts.kafka)
    consumer = ShareConsumer(conf)
    consumer.subscribe(list(opts.topics))
    return _Member(consumer)


def _acknowledge(member: _Member, accept: bool) -> None:
    """ACCEPT or RELEASE everything ``member`` holds and send it (a lock that expired meanwhile makes that
    record's acknowledgement fail: it was redelivered, a duplicate)."""
    if not member.held:
        return
    from confluent_kafka import AcknowledgeType

    kind = AcknowledgeType.ACCEPT if accept else AcknowledgeType.RELEASE
    n = len(member.held)
    failed: dict[str, str] = {}
    for m in member.held:
        try:
            member.consumer.acknowledge(m, kind)
        except Exception as e:  # no longer in flight for the client: its lock goes, it is redelivered
            failed[f"{m.topic()}:{m.partition()}@{m.offset()}"] = str(e)
    member.held = []
    try:
        results = member.consumer.commit_sync(30.0)
    except Exception as e:
        results = {}
        failed["commit"] = str(e)
    failed.update({f"{tp.topic}:{tp.partition}": str(e) for tp, e in (results or {}).items() if e is not None})
    if failed:
        log.warning("share group: %s of %d record(s) failed (redelivered after their lock): %s",
                    "ACCEPT" if accept else "RELEASE", n, failed)


def _settle(members: list[_Member], part: ShareInputPartition) -> None:
    """Acknowledge what idle members hold: ACCEPT a committed batch's records, RELEASE those of an earlier run;
    leave a sibling task's records (this batch, this run) alone. Close a member unused for more than
    ``IDLE_BATCHES`` batches: records its last fetch brought after its poll returned wait in the client for
    its next poll, with their locks running (closing releases them)."""
    for m in list(members):
        if m.busy:
            continue
        run, batch = m.tag
        if m.held:
            if run == part.run and batch <= part.committed:
                _acknowledge(m, True)
            elif run == part.run and batch == part.batch:
                continue
            else:
                _acknowledge(m, False)
        if run == part.run and part.batch - batch > IDLE_BATCHES:
            members.remove(m)
            with contextlib.suppress(Exception):
                m.consumer.close()


def _pick(members: list[_Member], part: ShareInputPartition) -> _Member | None:
    """An idle member holding nothing, the least recently used (one of an earlier run first)."""
    free = [m for m in members if not m.busy and not m.held]
    return min(free, key=lambda m: (m.tag[0] == part.run, m.tag[1]), default=None)


def _check_task() -> None:
    if os.environ.get("SPARK_REUSE_WORKER", "") != "1":
        raise OptionError("'shareGroup' needs spark.python.worker.reuse=true: a Python worker that exits after "
                          "each task would give back every record it read before its batch committed")
    from pyspark import TaskContext

    tc = TaskContext.get()
    if tc is not None and tc.attemptNumber() > 0:
        raise RuntimeError("a share-group task is not retried inside a micro-batch (the failed attempt's records "
                           "may be held unacknowledged by another worker): restart the query, which releases them")


def read_share(opts: ShareOptions, schema: pa.Schema, part: ShareInputPartition) -> Iterator[pa.RecordBatch]:
    """One share task (see the module docstring): settle, poll once, yield the records unacknowledged."""
    _check_task()
    key = _key(opts)
    with _lock:
        members = _members.setdefault(key, [])
        _settle(members, part)
        member = _pick(members, part)
        if member is None:
            member = _new_member(opts)
            members.append(member)
        member.busy = True
    done = False
    try:
        msgs = _poll(member.consumer, opts.fetch_wait_ms / 1000.0)
        member.held = [m for m in msgs if m.error() is None]
        member.tag = (part.run, part.batch)
        yield from _batches(schema, member.held)
        done = True
    finally:
        with _lock:
            member.busy = False
            if not done:  # failed or closed early: give the records back and drop the consumer (it may be broken)
                with contextlib.suppress(Exception):
                    _acknowledge(member, False)
                with contextlib.suppress(ValueError):
                    members.remove(member)
                with contextlib.suppress(Exception):
                    member.consumer.close()


def _poll(consumer: Any, wait: float) -> list[Any]:
    """The first non-empty poll within ``wait`` seconds (records with an error are acknowledged by librdkafka
    itself and skipped)."""
    deadline = time.monotonic() + wait
    while True:
        left = deadline - time.monotonic()
        msgs = list(consumer.poll(max(0.05, min(left, 0.5))) or [])
        for m in msgs:
            if m.error() is not None:
                log.warning("share group: %s", m.error())
        if msgs or left <= 0:
            return msgs


def _batches(schema: pa.Schema, msgs: list[Any]) -> Iterator[pa.RecordBatch]:
    from odradek.pipeline.kafka_client import _Columns

    by_tp: dict[tuple[str, int], list[Any]] = {}
    for m in msgs:
        by_tp.setdefault((m.topic(), m.partition()), []).append(m)
    for (topic, partition), group in sorted(by_tp.items()):
        cols = _Columns(schema, topic, partition)
        for m in group:
            cols.add(m)
        yield cols.batch()
