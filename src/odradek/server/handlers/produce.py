"""Produce (0): validate batches, append, answer per partition (acks 0, 1, -1).

A refused batch is answered with Kafka's error code and message (v8+), and with the records
that failed validation in ``record_errors`` (KIP-467), so clients fail just those records.
Transactional batches (a transactional id in the request) are appended once the transaction
coordinator confirms the partition is in the producer's transaction (server.txn_verification,
KIP-890 part 1); from v12 with transaction.version 2 the leader adds the partition to the
transaction itself (KIP-890 part 2). Client produce to an internal topic (``__consumer_offsets``, ``__transaction_state``) is refused
with INVALID_TOPIC_EXCEPTION, as Kafka's ReplicaManager does.

Client quotas (``producer_byte_rate``): the request's record bytes are recorded against the
client's quota (Kafka's ClientQuotaManager for produce); a violation sets ``throttle_time_ms``
in the response and mutes the connection for that long (KIP-219).

In cluster mode acks=-1 waits (without blocking the loop) until the high watermark of
each partition passes what was appended, up to the request's timeout: a DelayedProduce
in the replica manager's produce purgatory (replication.delayed_produce)."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from odradek.metrics.error_counts import add_error
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.produce import (
    FIRST_FLEXIBLE,
    MAX_VERSION,
    MIN_VERSION,
    PartitionResult,
    encode_produce_response,
)
from odradek.protocol.produce import decode_produce_request as decode_request
from odradek.purgatory import DelayedResponse, future_of
from odradek.security.acl import ResourceType
from odradek.server.handlers import NO_RESPONSE, HandlerResult, RawResponse
from odradek.server.request_context import HasQuotas, RequestContext
from odradek.server.txn_verification import (
    NOT_REQUIRED,
    RemoteCheck,
    Verification,
    VerificationNeeds,
    produce_error,
    run_check,
    verify_transactional_append,
)

API_KEY = ApiKey.PRODUCE
__all__ = ["API_KEY", "FIRST_FLEXIBLE", "MAX_VERSION", "MIN_VERSION", "decode_request", "handle"]
# MAX_VERSION 12: v13 addresses topics by id


class Needs(VerificationNeeds, HasQuotas, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    acks = request.acks
    version = ctx.api_version
    now_ms = svc.now_ms()
    rm = svc.replica_manager
    txn_id = request.transactional_id
    wait = acks == -1
    required: dict[tuple[str, int], int] = {}
    topics_out: list[tuple[str, list[PartitionResult]]] = []
    size = sum(len(pd.records or b"") for td in request.topic_data for pd in td.partition_data)
    throttle_ms = svc.quotas.produce.record_and_get_throttle_time_ms(ctx.quota_user, ctx.client_id or "", size,
                                                                      now_ms)
    ctx.throttle(throttle_ms)
    # transactional partitions whose coordinator is on another broker: appended once it answers
    deferred: list[tuple[list[PartitionResult], int, str, int, bytearray, RemoteCheck, Verification]] = []

    def append(name: str, index: int, records: Any, verification: Verification = NOT_REQUIRED) -> PartitionResult:
        r = rm.append(name, index, records, now_ms, acks, transactional=txn_id is not None,
                      require_verification=verification.required, verification_guard=verification.guard)
        if wait and r.error_code == errors.NONE and not r.replicated:  # a lone leader's is at once
            required[(name, index)] = r.last_offset + 1
        return (index, r.error_code, r.base_offset, r.log_append_time, r.log_start_offset, r.error_message,
                r.record_errors)

    # a transactional produce needs WRITE on its transactional id (Kafka's KafkaApis.handleProduceRequest)
    txn_allowed = txn_id is None or ctx.permits(ResourceType.TRANSACTIONAL_ID, txn_id)
    for td in request.topic_data:
        name = td.name
        parts_out: list[PartitionResult] = []
        internal = name in ("__consumer_offsets", "__transaction_state")
        writable = ctx.permits(ResourceType.TOPIC, name)
        for pd in td.partition_data:
            if acks not in (0, 1, -1):
                parts_out.append((pd.index, errors.INVALID_REQUIRED_ACKS, -1, -1, -1, None, ()))
            elif not writable:
                parts_out.append((pd.index, errors.TOPIC_AUTHORIZATION_FAILED, -1, -1, -1, None, ()))
            elif not txn_allowed:
                parts_out.append((pd.index, errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1, -1, None, ()))
            elif internal:
                parts_out.append((pd.index, errors.INVALID_TOPIC_EXCEPTION, -1, -1, -1,
                                  f"Cannot append to internal topic {name}", ()))
            elif txn_id is not None:
                verified, verification = verify_transactional_append(svc, txn_id, name, pd.index, pd.records,
                                                                     version, now_ms)
                if isinstance(verified, RemoteCheck) and acks == 0:  # no answer to wait with: retriable failure
                    parts_out.append((pd.index, errors.NOT_ENOUGH_REPLICAS, -1, -1, -1,
                                      "a transactional produce with acks=0 cannot wait for its coordinator", ()))
                elif isinstance(verified, RemoteCheck):  # the records outlive the frame's buffer
                    deferred.append((parts_out, len(parts_out), name, pd.index, bytearray(pd.records or b""),
                                     verified, verification))
                    parts_out.append((pd.index, errors.NONE, -1, -1, -1, None, ()))
                elif verified[0] != errors.NONE:
                    parts_out.append((pd.index, verified[0], -1, -1, -1, verified[1], ()))
                else:
                    parts_out.append(append(name, pd.index, pd.records, verification))
            else:
                parts_out.append(append(name, pd.index, pd.records))
        topics_out.append((name, parts_out))
    if not deferred:
        return _answer(ctx, request, topics_out, required, throttle_ms, direct=True)
    loop_fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    left = [len(deferred)]

    def verified_one(entry: tuple[list[PartitionResult], int, str, int, bytearray, RemoteCheck, Verification],
                     codes: dict[tuple[str, int], int]) -> None:
        parts_out, slot, name, index, records, check, verification = entry
        code, msg = produce_error(codes.get((name, index), errors.NOT_COORDINATOR), txn_id or "", name, index,
                                  check.producer_id, check.producer_epoch, version)
        # the guard taken before asking: a marker written meanwhile has voided it (INVALID_TXN_STATE)
        parts_out[slot] = (append(name, index, records, verification) if code == errors.NONE
                           else (index, code, -1, -1, -1, msg, ()))
        left[0] -= 1
        if left[0] == 0 and not loop_fut.done():
            out = _answer(ctx, request, topics_out, required, throttle_ms)
            if isinstance(out, asyncio.Future):
                out.add_done_callback(relay)
            else:
                loop_fut.set_result(out)

    def relay(f: asyncio.Future[Any]) -> None:
        if loop_fut.done():
            return
        if f.cancelled():
            loop_fut.cancel()
        elif f.exception() is not None:
            loop_fut.set_exception(f.exception())  # type: ignore[arg-type]
        else:
            loop_fut.set_result(f.result())

    for entry in deferred:
        check = entry[5]
        run_check(svc, check, txn_id or "", [(entry[2], entry[3])],
                  lambda codes, e=entry: verified_one(e, codes))  # type: ignore[misc]
    return loop_fut


def _response(version: int, topics: list[tuple[str, list[PartitionResult]]], throttle_ms: int) -> RawResponse:
    body = encode_produce_response(version, topics, throttle_ms)
    counts: dict[int, int] = {}
    for _name, parts in topics:
        for pr in parts:
            add_error(counts, pr[1])
    return RawResponse([body], len(body), counts)


def _answer(ctx: RequestContext, request: Any, topics_out: list[tuple[str, list[PartitionResult]]],
            required: dict[tuple[str, int], int], throttle_ms: int = 0, direct: bool = False) -> Any:
    """The response, or what answers it once replicated: with ``direct`` a DelayedResponse the
    connection completes from the purgatory itself, else a Future (for a caller chaining it)."""
    acks = request.acks
    version = ctx.api_version
    rm = services(ctx).replica_manager
    failed = any(pr[1] for _, parts in topics_out for pr in parts)
    if acks == 0:
        # Kafka closes the connection when an acks=0 produce fails, so the client notices
        if failed:
            ctx.close_connection("acks=0 produce failed")
        return NO_RESPONSE
    if not required:
        return _response(version, topics_out, throttle_ms)

    def respond(results: dict[tuple[str, int], int]) -> Any:
        if not any(results.values()):
            return _response(version, topics_out, throttle_ms)
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
        return _response(version, out, throttle_ms)

    outcome = rm.wait_for_replication(required, request.timeout_ms)
    if isinstance(outcome, dict):  # a lone leader, or followers already past it: no purgatory
        return respond(outcome)
    if direct:
        return DelayedResponse(outcome, respond)
    fut = future_of(outcome, respond)
    ctx.park(fut, outcome.cancel)
    return fut
