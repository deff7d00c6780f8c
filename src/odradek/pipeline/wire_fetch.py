"""Reading one partition range with Fetch requests on a plain socket, the records turned into Arrow
batches by :mod:`odradek.pipeline.arrow_records` (no Python object per record), for the source's
executor side. librdkafka's consumer (the other reader, ``kafka_client.read_range``) hands Python
one message object per record, which caps a task near 0.2 M rows/s; this reader decodes whole
fetch responses.

Requests are Kafka's: Metadata v1 for the partition's leader, Fetch v5 (``isolation_level`` from
``isolation.level``; the response's ``log_start_offset`` and ``aborted_transactions``), one
partition per request, ``partition_max_bytes`` from ``max.partition.fetch.bytes`` (default 8 MiB).
Connections are kept per leader in this worker process and reused by the next task. While Spark
consumes one response's Arrow batches, the Fetch for the next offsets is already on its way (one
request in flight; a connection left with an unread response is closed, not pooled).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
from kio.index import load_request_schema
from kio.schema.metadata.v1.request import MetadataRequestTopic
from kio.schema.types import TopicName

from odradek.client.async_wire import build
from odradek.client.wire import WireClient
from odradek.pipeline import arrow_records
from odradek.pipeline.options import SourceOptions
from odradek.protocol import errors

log = logging.getLogger("odradek.pipeline.source")

FETCH_VERSION = 5
METADATA_VERSION = 1
DEFAULT_PARTITION_MAX_BYTES = 8 << 20
_RETRY = {errors.NOT_LEADER_OR_FOLLOWER, errors.LEADER_NOT_AVAILABLE, errors.UNKNOWN_TOPIC_OR_PARTITION,
          errors.REPLICA_NOT_AVAILABLE, errors.FENCED_LEADER_EPOCH, errors.UNKNOWN_LEADER_EPOCH,
          errors.KAFKA_STORAGE_ERROR, errors.OFFSET_NOT_AVAILABLE}


def usable(opts: SourceOptions, with_headers: bool) -> bool:
    """Whether this reader can serve the options: the C decoder is built, the listener is PLAINTEXT
    and no headers column is asked for; the source option ``reader=librdkafka`` picks the other one."""
    if not arrow_records.AVAILABLE or with_headers:
        return False
    if str(opts.reader) != "wire":
        return False
    proto = str(opts.kafka.get("security.protocol", "plaintext")).lower()
    return proto == "plaintext"


def _fields(api_key: int, version: int, fields: dict[str, Any]) -> dict[str, Any]:
    entity = build(load_request_schema(api_key, version), fields)
    return {f.name: getattr(entity, f.name) for f in dataclasses.fields(entity)}


def _call(client: WireClient, api_key: int, version: int, fields: dict[str, Any]) -> Any:
    return client.request(api_key, version, **_fields(api_key, version, fields))


_lock = threading.Lock()
_idle: dict[tuple[str, int], list[WireClient]] = {}


def _borrow(address: tuple[str, int], timeout: float) -> WireClient:
    with _lock:
        idle = _idle.get(address)
        if idle:
            return idle.pop()
    return WireClient(f"{address[0]}:{address[1]}", timeout=timeout, client_id="odradek-spark-source")


def _give_back(address: tuple[str, int], client: WireClient) -> None:
    with _lock:
        idle = _idle.setdefault(address, [])
        if len(idle) < 4:
            idle.append(client)
            return
    client.close()


def leader(bootstrap: str, topic: str, partition: int, timeout: float) -> tuple[str, int] | None:
    """The leader's address from the first bootstrap server that answers; None when it has none."""
    last: Exception | None = None
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        address = (host, int(port))
        try:
            client = _borrow(address, timeout)
        except OSError as e:
            last = e
            continue
        try:
            md = client.request(3, METADATA_VERSION, topics=(MetadataRequestTopic(name=TopicName(topic)),))
        except Exception as e:  # a broken connection: try the next server
            client.close()
            last = e
            continue
        _give_back(address, client)
        brokers = {int(b.node_id): (str(b.host), int(b.port)) for b in md.brokers}
        for t in md.topics:
            if str(t.name) != topic:
                continue
            for p in t.partitions:
                if int(p.partition_index) == partition and int(p.leader_id) in brokers:
                    return brokers[int(p.leader_id)]
        return None
    raise ConnectionError(f"no bootstrap server of {bootstrap!r} answered: {last}")


def read_range(opts: SourceOptions, schema: pa.Schema, topic: str, partition: int, start: int, end: int,
               data_loss: Callable[[str, bool], None]) -> Iterator[pa.RecordBatch]:
    """Records of ``topic:partition`` with ``start <= offset < end`` as Arrow batches; the same
    contract as ``kafka_client.read_range`` (data loss below the log start or when the range
    cannot be completed within ``kafkaConsumer.pollTimeoutMs``)."""
    if end <= start:
        return
    timeout = opts.poll_timeout_ms / 1000.0
    fail = opts.fail_on_data_loss
    committed = opts.kafka.get("isolation.level") == "read_committed"
    part_max = int(opts.kafka.get("max.partition.fetch.bytes", DEFAULT_PARTITION_MAX_BYTES))
    bootstrap = str(opts.kafka["bootstrap.servers"])
    filt = arrow_records.AbortFilter() if committed else None
    nxt = start
    last_progress = time.monotonic()
    address: tuple[str, int] | None = None
    client: WireClient | None = None
    pending: int | None = None  # correlation id of the Fetch in flight

    def send_fetch(c: WireClient, offset: int) -> int:
        return c.send(1, FETCH_VERSION, **_fields(1, FETCH_VERSION, {
            "replica_id": -1, "max_wait": datetime.timedelta(milliseconds=100), "min_bytes": 1,
            "max_bytes": max(part_max, 1 << 20), "isolation_level": 1 if committed else 0,
            "topics": ({"topic": topic, "partitions": ({
                "partition": partition, "fetch_offset": offset, "log_start_offset": -1,
                "partition_max_bytes": part_max},)},),
        }))

    try:
        while nxt < end:
            if time.monotonic() - last_progress > timeout:
                data_loss(f"{topic}:{partition}: offsets {nxt}..{end - 1} could not be fetched within "
                          f"{timeout:.0f}s (kafkaConsumer.pollTimeoutMs)", fail)
                return
            if client is None:
                address = leader(bootstrap, topic, partition, timeout)
                if address is None:
                    time.sleep(0.1)
                    continue
                client = _borrow(address, timeout)
            try:
                if pending is None:
                    pending = send_fetch(client, nxt)
                resp = client.receive(1, FETCH_VERSION, pending)
                pending = None
            except (OSError, ConnectionError) as e:
                log.info("fetching %s:%d from %s: %s; reconnecting", topic, partition, address, e)
                with contextlib.suppress(Exception):
                    client.close()
                client = None
                pending = None
                time.sleep(0.1)
                continue
            p = resp.responses[0].partitions[0]
            code = int(p.error_code)
            if code == errors.OFFSET_OUT_OF_RANGE:
                low = int(p.log_start_offset)
                if nxt >= low:  # past the end: the records are not there (yet)
                    time.sleep(0.05)
                    continue
                data_loss(f"{topic}:{partition}: offsets {nxt}..{min(end, low) - 1} are below the log start "
                          f"offset {low}", fail)
                nxt = low
                last_progress = time.monotonic()
                continue
            if code in _RETRY:
                assert address is not None
                _give_back(address, client)
                client = None
                time.sleep(0.1)
                continue
            if code != errors.NONE:
                raise RuntimeError(f"reading {topic}:{partition}: Fetch error {code}")
            if filt is not None:
                filt.add(p.aborted_transactions)
            data = p.records or b""
            if not data:
                continue  # nothing yet (or an open transaction below the last stable offset)
            out = arrow_records.decode(schema, topic, partition, data, nxt, end, filt)
            if out.next_offset > nxt:
                nxt = out.next_offset
                last_progress = time.monotonic()
            if nxt < end and out.batches:
                try:
                    pending = send_fetch(client, nxt)  # the broker prepares the next response while Spark works
                except OSError:
                    with contextlib.suppress(Exception):
                        client.close()
                    client = None
                    pending = None
            yield from out.batches
        if client is not None and address is not None and pending is None:
            _give_back(address, client)
            client = None
    finally:
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()
