"""Fetch (1): zero-copy reads, long-poll until min_bytes or max_wait, sessionless.

The response is encoded by hand (protocol.fetch_response) so record data goes from
the segment files to the socket with sendfile. Fetch sessions (KIP-227) are not
created: every response carries session_id 0, which tells clients to keep sending
full fetch requests.
"""

from __future__ import annotations

from typing import Any

from odradek.protocol import errors
from odradek.protocol.fetch_response import (
    MAX_VERSION as _ENC_MAX,
)
from odradek.protocol.fetch_response import (
    PartitionResult,
    TopicResult,
    encode_fetch_response,
)
from odradek.server.handlers import RawResponse

API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = _ENC_MAX


def handle(ctx: Any, request: Any) -> Any:
    version = ctx.api_version
    broker = ctx.broker
    rm = broker.replica_manager
    topics_reg = broker.topics
    replica_id = getattr(request, "replica_id", -1)
    if replica_id is None:
        replica_id = -1
    max_wait_ms = int(request.max_wait.total_seconds() * 1000)
    min_bytes = max(int(request.min_bytes), 0)
    max_bytes = int(getattr(request, "max_bytes", 0x7FFFFFFF))
    read_committed = getattr(request, "isolation_level", 0) == 1

    # resolve topics once: (name, topic_id, [(partition, fetch_offset, partition_max_bytes, leader_epoch)])
    wanted: list[tuple[str, Any, list[Any]]] = []
    for ft in request.topics:
        if version >= 13:
            meta = topics_reg.by_id.get(ft.topic_id) if ft.topic_id is not None else None
            name = meta.name if meta is not None else ""
            wanted.append((name, ft.topic_id, list(ft.partitions)))
        else:
            meta = topics_reg.get(ft.topic)
            wanted.append((ft.topic, meta.topic_id if meta else None, list(ft.partitions)))

    def attempt(force: bool) -> RawResponse | None:
        remaining = max_bytes
        total = 0
        has_error = False
        out: list[TopicResult] = []
        for name, topic_id, parts in wanted:
            tr = TopicResult(name, topic_id)
            out.append(tr)
            meta = topics_reg.get(name) if name else None
            for fp in parts:
                pr = PartitionResult(fp.partition)
                tr.partitions.append(pr)
                if meta is None:
                    pr.error_code = errors.UNKNOWN_TOPIC_ID if version >= 13 else errors.UNKNOWN_TOPIC_OR_PARTITION
                    has_error = True
                    continue
                if not 0 <= fp.partition < len(meta.partitions):
                    pr.error_code = errors.UNKNOWN_TOPIC_OR_PARTITION
                    has_error = True
                    continue
                leader_epoch = meta.partitions[fp.partition].leader_epoch
                requested_epoch = getattr(fp, "current_leader_epoch", -1)
                if requested_epoch is not None and requested_epoch >= 0 and requested_epoch != leader_epoch:
                    pr.error_code = (
                        errors.FENCED_LEADER_EPOCH if requested_epoch < leader_epoch else errors.UNKNOWN_LEADER_EPOCH
                    )
                    has_error = True
                    continue
                limit = min(int(fp.partition_max_bytes), remaining)
                code, plog, data = rm.read(
                    name,
                    fp.partition,
                    int(fp.fetch_offset),
                    max(limit, 0),
                    read_committed,
                    min_one_message=(total == 0),
                )
                pr.error_code = code
                if plog is not None:
                    pr.high_watermark = plog.high_watermark
                    pr.last_stable_offset = plog.high_watermark
                    pr.log_start_offset = plog.log_start_offset
                if read_committed:
                    pr.aborted_transactions = ()
                if code != errors.NONE:
                    has_error = True
                    continue
                if data is not None and data.size:
                    pr.records = data.regions
                    pr.records_size = data.size
                    total += data.size
                    remaining -= data.size
        if not force and total < min_bytes and not has_error:
            return None
        parts_out, size = encode_fetch_response(version, out)
        return RawResponse(parts_out, size)

    response = attempt(max_wait_ms <= 0)
    if response is not None:
        return response
    from odradek.server.replica_manager import DelayedFetch

    tps = [(name, fp.partition) for name, _, parts in wanted for fp in parts if name]
    delayed = DelayedFetch(rm, tps, attempt, max_wait_ms)
    ctx.connection.on_close.append(delayed.cancel)
    return delayed.future
