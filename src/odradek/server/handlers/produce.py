"""Produce (0): validate batches, append, answer per partition (acks 0, 1, -1).

A refused batch is answered with Kafka's error code and message (v8+), and with the records
that failed validation in ``record_errors`` (KIP-467), so clients fail just those records.
Client produce to an internal topic (``__consumer_offsets``, ``__transaction_state``) is refused
with INVALID_TOPIC_EXCEPTION, as Kafka's ReplicaManager does.

In cluster mode acks=-1 waits (without blocking the loop) until the high watermark of
each partition passes what was appended, up to the request's timeout: a DelayedProduce
in the replica manager's produce purgatory (replication.delayed_produce)."""

from __future__ import annotations

from typing import Any

from odradek.protocol import errors
from odradek.protocol.produce import (
    FIRST_FLEXIBLE,
    MAX_VERSION,
    MIN_VERSION,
    PartitionResult,
    encode_produce_response,
)
from odradek.protocol.produce import decode_produce_request as decode_request
from odradek.security.acl import AclOperation, ResourceType
from odradek.server.handlers import NO_RESPONSE
from odradek.server.purgatory import future_of
from odradek.server.request_context import RequestContext

API_KEY = 0
__all__ = ["API_KEY", "FIRST_FLEXIBLE", "MAX_VERSION", "MIN_VERSION", "decode_request", "handle"]
# MAX_VERSION 12: v13 addresses topics by id


def handle(ctx: RequestContext, request: Any) -> Any:
    svc = ctx.services
    acks = request.acks
    version = ctx.api_version
    now_ms = svc.now_ms()
    rm = svc.replica_manager
    wait = acks == -1
    required: dict[tuple[str, int], int] = {}
    topics_out: list[tuple[str, list[PartitionResult]]] = []
    failed = False
    for td in request.topic_data:
        name = td.name
        parts_out: list[PartitionResult] = []
        internal = name in ("__consumer_offsets", "__transaction_state")
        writable = ctx.authorize(AclOperation.WRITE, ResourceType.TOPIC, name)
        for pd in td.partition_data:
            rec_errors: tuple[tuple[int, str | None], ...] = ()
            if acks not in (0, 1, -1):
                res_code, base, lat, lso, msg = errors.INVALID_REQUIRED_ACKS, -1, -1, -1, None
            elif not writable:
                res_code, base, lat, lso, msg = errors.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1, None
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
                rec_errors = r.record_errors
                if wait and res_code == errors.NONE:
                    required[(name, pd.index)] = r.last_offset + 1
            if res_code:
                failed = True
            parts_out.append((pd.index, res_code, base, lat, lso, msg, rec_errors))
        topics_out.append((name, parts_out))
    if acks == 0:
        # Kafka closes the connection when an acks=0 produce fails, so the client notices
        if failed:
            ctx.close_connection("acks=0 produce failed")
        return NO_RESPONSE
    if not required:
        return encode_produce_response(version, topics_out)

    def respond(results: dict[tuple[str, int], int]) -> Any:
        if not any(results.values()):
            return encode_produce_response(version, topics_out)
        out: list[tuple[str, list[PartitionResult]]] = []
        for name, parts in topics_out:
            fixed: list[PartitionResult] = []
            for pr in parts:
                code = results.get((name, pr[0]))
                if code is None or code == errors.NONE:
                    fixed.append(pr)
                else:
                    fixed.append((pr[0], code, -1, -1, pr[4], None))
            out.append((name, fixed))
        return encode_produce_response(version, out)

    outcome = rm.wait_for_replication(required, request.timeout_ms)
    if isinstance(outcome, dict):  # a lone leader, or followers already past it: no purgatory
        return respond(outcome)
    fut = future_of(outcome, respond)
    ctx.park(fut, outcome.cancel)
    return fut
