"""Reading one partition range with Fetch requests on a plain socket, the records turned into Arrow
batches by :mod:`odradek.pipeline.arrow_records` (no Python object per record), for the source's
executor side. librdkafka's consumer (the other reader, ``kafka_client.read_range``) hands Python
one message object per record, which caps a task near 0.2 M rows/s; this reader decodes whole
fetch responses.

Requests are Kafka's: Metadata v1 for the partition's leader (:mod:`odradek.protocol.metadata_v1`),
Fetch v12 (:mod:`odradek.protocol.fetch_request_writer`; ``isolation_level`` from
``isolation.level``, the response's ``log_start_offset`` and ``aborted_transactions`` read without
copying the records by :mod:`odradek.protocol.fetch_response_reader`), one partition per request,
``partition_max_bytes`` from ``max.partition.fetch.bytes`` (default 8 MiB). Both are written and read
by hand, so a Spark Python worker that reads records never imports kio (whose schema modules cost a
new worker 1-2 s, paid by the micro-batches it serves first).

Connections are kept per leader in this worker process and reused by the next task, and so are the
partitions' leaders (forgotten on a connection error or a leadership error code). While Spark
consumes one response's Arrow batches, the Fetch for the next offsets is already on its way (one
request in flight; a connection left with an unread response is closed, not pooled). A Fetch waits
at most ``fetch.max.wait.ms`` (default 100) for records that are not there yet: the range's end is
known, so a task only waits when the end is above what the broker can serve.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pyarrow as pa

from odradek.client import framer
from odradek.pipeline import arrow_records
from odradek.pipeline.options import SourceOptions
from odradek.protocol import errors, metadata_v1
from odradek.protocol.fetch_request_writer import VERSION as FETCH_VERSION
from odradek.protocol.fetch_request_writer import encode_fetch_request
from odradek.protocol.fetch_response_reader import FetchResponseError, read_fetch_response
from odradek.protocol.framing import FrameError

log = logging.getLogger("odradek.pipeline.source")

FETCH_KEY = 1
DEFAULT_PARTITION_MAX_BYTES = 8 << 20
DEFAULT_FETCH_MAX_WAIT_MS = 100
CLIENT_ID = "odradek-spark-source"
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


class Connection:
    """One blocking connection to a broker: request frames out, response frames in, in order."""

    def __init__(self, address: tuple[str, int], timeout: float) -> None:
        self.sock = socket.create_connection(address, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.correlation_id = 0

    def send(self, api_key: int, version: int, body: bytes, flexible: bool) -> int:
        self.correlation_id += 1
        self.sock.sendall(framer.encode_request(api_key, version, self.correlation_id, CLIENT_ID, body,
                                                flexible_header=flexible))
        return self.correlation_id

    def receive(self, correlation_id: int, flexible: bool) -> tuple[bytes, int]:
        try:
            return framer.recv_response(self.sock, correlation_id, flexible)
        except FrameError as e:
            raise ConnectionError(f"bad response frame: {e}") from None

    def close(self) -> None:
        self.sock.close()


_lock = threading.Lock()
_idle: dict[tuple[str, int], list[Connection]] = {}
_leaders: dict[tuple[str, str, int], tuple[str, int]] = {}  # (bootstrap, topic, partition) -> leader


def _borrow(address: tuple[str, int], timeout: float) -> Connection:
    with _lock:
        idle = _idle.get(address)
        if idle:
            return idle.pop()
    return Connection(address, timeout)


def _give_back(address: tuple[str, int], conn: Connection) -> None:
    with _lock:
        idle = _idle.setdefault(address, [])
        if len(idle) < 4:
            idle.append(conn)
            return
    conn.close()


def forget_leader(bootstrap: str, topic: str, partition: int) -> None:
    with _lock:
        _leaders.pop((bootstrap, topic, partition), None)


def leader(bootstrap: str, topic: str, partition: int, timeout: float) -> tuple[str, int] | None:
    """The leader's address (remembered from an earlier call in this process, else asked of the
    first bootstrap server that answers); None when the partition has none."""
    key = (bootstrap, topic, partition)
    with _lock:
        known = _leaders.get(key)
    if known is not None:
        return known
    last: Exception | None = None
    for server in bootstrap.split(","):
        host, _, port = server.strip().rpartition(":")
        address = (host, int(port))
        try:
            conn = _borrow(address, timeout)
        except OSError as e:
            last = e
            continue
        try:
            cid = conn.send(metadata_v1.API_KEY, metadata_v1.VERSION, metadata_v1.encode_metadata_request([topic]),
                            flexible=False)
            frame, offset = conn.receive(cid, flexible=False)
            md = metadata_v1.read_metadata_response(frame, offset)
        except (OSError, metadata_v1.MetadataResponseError) as e:  # a broken connection: try the next server
            conn.close()
            last = e
            continue
        _give_back(address, conn)
        found = md.leader(topic, partition)
        if found is not None:
            with _lock:
                _leaders[key] = found
        return found
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
    max_wait = int(opts.kafka.get("fetch.max.wait.ms", DEFAULT_FETCH_MAX_WAIT_MS))
    bootstrap = str(opts.kafka["bootstrap.servers"])
    filt = arrow_records.AbortFilter() if committed else None
    check_crcs = opts.check_crcs
    nxt = start
    last_progress = time.monotonic()
    address: tuple[str, int] | None = None
    conn: Connection | None = None
    pending: int | None = None  # correlation id of the Fetch in flight

    def send_fetch(c: Connection, offset: int) -> int:
        body = encode_fetch_request(-1, max_wait, 1, max(part_max, 1 << 20),
                                    [(topic, [(partition, -1, offset, -1, -1, part_max)])],
                                    isolation_level=1 if committed else 0)
        return c.send(FETCH_KEY, FETCH_VERSION, body, flexible=True)

    def drop(c: Connection) -> None:
        with contextlib.suppress(Exception):
            c.close()

    try:
        while nxt < end:
            if time.monotonic() - last_progress > timeout:
                data_loss(f"{topic}:{partition}: offsets {nxt}..{end - 1} could not be fetched within "
                          f"{timeout:.0f}s (kafkaConsumer.pollTimeoutMs)", fail)
                return
            if conn is None:
                address = leader(bootstrap, topic, partition, timeout)
                if address is None:
                    time.sleep(0.1)
                    continue
                try:
                    conn = _borrow(address, timeout)
                except OSError as e:
                    log.info("connecting to %s for %s:%d: %s", address, topic, partition, e)
                    forget_leader(bootstrap, topic, partition)
                    time.sleep(0.1)
                    continue
            try:
                if pending is None:
                    pending = send_fetch(conn, nxt)
                frame, offset = conn.receive(pending, flexible=True)
                pending = None
                resp = read_fetch_response(frame, offset)
                p = resp.responses[0].partitions[0]
            except (OSError, ConnectionError, FetchResponseError, IndexError) as e:
                log.info("fetching %s:%d from %s: %s; reconnecting", topic, partition, address, e)
                drop(conn)
                conn = None
                pending = None
                forget_leader(bootstrap, topic, partition)
                time.sleep(0.1)
                continue
            code = p.error_code
            if code == errors.OFFSET_OUT_OF_RANGE:
                low = p.log_start_offset
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
                _give_back(address, conn)
                conn = None
                forget_leader(bootstrap, topic, partition)
                time.sleep(0.1)
                continue
            if code != errors.NONE:
                raise RuntimeError(f"reading {topic}:{partition}: Fetch error {code}")
            if filt is not None:
                filt.add(p.aborted_transactions)
            data = p.records
            if data is None or not len(data):
                continue  # nothing yet (or an open transaction below the last stable offset)
            out = arrow_records.decode(schema, topic, partition, data, nxt, end, filt, check_crcs=check_crcs)
            if out.next_offset > nxt:
                nxt = out.next_offset
                last_progress = time.monotonic()
            if nxt < end and out.batches:
                try:
                    pending = send_fetch(conn, nxt)  # the broker prepares the next response while Spark works
                except OSError:
                    drop(conn)
                    conn = None
                    pending = None
            yield from out.batches
        if conn is not None and address is not None and pending is None:
            _give_back(address, conn)
            conn = None
    finally:
        if conn is not None:
            drop(conn)
