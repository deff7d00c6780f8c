"""Produce (0): validate batches, append, answer per partition (acks 0, 1, -1).

In cluster mode acks=-1 waits (without blocking the loop) until the high watermark of
each partition passes what was appended, up to the request's timeout
(replication.delayed_produce)."""

from __future__ import annotations

import datetime
from typing import Any

from odradek.protocol import errors
from odradek.protocol.codec import make
from odradek.server.handlers import NO_RESPONSE

API_KEY = 0
MIN_VERSION = 3
MAX_VERSION = 12  # v13 addresses topics by id

_UTC = datetime.UTC


def _append_time(ms: int) -> datetime.datetime | None:
    if ms < 0:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000.0, tz=_UTC)


def handle(ctx: Any, request: Any) -> Any:
    broker = ctx.broker
    acks = request.acks
    now_ms = broker.now_ms()
    m = ctx.response_module
    rm = broker.replica_manager
    wait = acks == -1
    required: dict[tuple[str, int], int] = {}
    topics_out = []
    for td in request.topic_data:
        name = td.name
        parts_out = []
        internal = name in ("__consumer_offsets", "__transaction_state")
        for pd in td.partition_data:
            if acks not in (0, 1, -1):
                res_code, base, lat, lso, msg = errors.INVALID_REQUIRED_ACKS, -1, -1, -1, None
            elif internal:
                res_code, base, lat, lso, msg = (
                    errors.INVALID_TOPIC_EXCEPTION, -1, -1, -1, f"Cannot append to internal topic {name}",
                )
            elif request.transactional_id is not None:
                res_code, base, lat, lso, msg = (
                    errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1, -1,
                    "transactions are not supported by this broker yet",
                )
            else:
                r = rm.append(name, pd.index, pd.records, now_ms, acks)
                res_code, base, lat, lso, msg = (
                    r.error_code, r.base_offset, r.log_append_time, r.log_start_offset, r.error_message,
                )
                if wait and res_code == errors.NONE:
                    required[(name, pd.index)] = r.last_offset + 1
            parts_out.append(
                make(
                    m.PartitionProduceResponse,
                    index=pd.index,
                    error_code=res_code,
                    base_offset=base,
                    log_append_time=_append_time(lat),
                    log_start_offset=lso,
                    record_errors=(),
                    error_message=msg,
                )
            )
        topics_out.append(make(m.TopicProduceResponse, name=name, partition_responses=tuple(parts_out)))
    if acks == 0:
        # Kafka closes the connection when an acks=0 produce fails, so the client notices
        if any(p.error_code for t in topics_out for p in t.partition_responses):
            ctx.connection.close("acks=0 produce failed")
        return NO_RESPONSE
    if not required:
        return make(m.ProduceResponse, responses=tuple(topics_out), throttle_time=0)

    def respond(results: dict[tuple[str, int], int]) -> Any:
        if not any(results.values()):
            return make(m.ProduceResponse, responses=tuple(topics_out), throttle_time=0)
        out = []
        for t in topics_out:
            parts = []
            for pr in t.partition_responses:
                code = results.get((t.name, pr.index))
                if code is None or code == errors.NONE:
                    parts.append(pr)
                else:
                    parts.append(make(
                        m.PartitionProduceResponse, index=pr.index, error_code=code, base_offset=-1,
                        log_append_time=None, log_start_offset=pr.log_start_offset, record_errors=(),
                        error_message=None,
                    ))
            out.append(make(m.TopicProduceResponse, name=t.name, partition_responses=tuple(parts)))
        return make(m.ProduceResponse, responses=tuple(out), throttle_time=0)

    done = rm.replicated_now(required)
    if done is not None:  # a lone leader, or followers already past it: no purgatory
        return respond(done)
    timeout_ms = int(request.timeout.total_seconds() * 1000)
    delayed = rm.wait_for_replication(required, timeout_ms, respond)
    ctx.connection.park(delayed.future, delayed.cancel)
    return delayed.future
