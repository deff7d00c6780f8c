"""TxnOffsetCommit (28): a transactional producer commits a consumer group's offsets inside its
transaction (send_offsets_to_transaction). They are written to the group's __consumer_offsets
partition in a transactional batch and become visible only when the transaction commits
(coordinator.group.txn_offsets); v3+ carry the consumer's member id, generation and group
instance id, and a consumer fenced by a rebalance cannot commit (KIP-447). Before the first
commit of a transaction, the transaction coordinator confirms the group's __consumer_offsets
partition is in the transaction (KIP-890 part 1, as for Produce): a commit without
AddOffsetsToTxn cannot leave offsets pending for ever. v5 (transaction.version 2, KIP-890 part
2) comes without AddOffsetsToTxn: the group's partition is added to the transaction here; it is
UNSUPPORTED_VERSION while the finalized transaction.version is below 2. It needs WRITE on the
transactional id, READ on the group and READ on each topic (a partition of a topic the principal may
not read is answered TOPIC_AUTHORIZATION_FAILED and not committed, KafkaApis.handleTxnOffsetCommitRequest)."""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasGroups, RequestContext
from odradek.server.txn_verification import (
    RemoteCheck,
    VerificationNeeds,
    coordinator_verdict,
    run_check,
    start_verification,
)
from odradek.server.txn_version import TV_2, is_tv2_request, transaction_version

API_KEY = ApiKey.TXN_OFFSET_COMMIT
MIN_VERSION = 0
MAX_VERSION = 5  # v5 is transaction.version 2 (KIP-890 part 2)


class Needs(VerificationNeeds, HasGroups, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    groups = services(ctx).groups
    offsets: dict[tuple[str, int], tuple[int, int, str]] = {}
    order: list[tuple[str, list[int]]] = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            offsets[(t.name, p.partition_index)] = (
                int(p.committed_offset), int(getattr(p, "committed_leader_epoch", -1)), p.committed_metadata or "",
            )
            parts.append(p.partition_index)
        order.append((t.name, parts))
    results: dict[tuple[str, int], int] = {}
    state = {"code": errors.NONE}

    def respond(replicated: int = errors.NONE) -> Any:
        code = state["code"]
        topics = tuple(
            make(m.TxnOffsetCommitResponseTopic, name=name, partitions=tuple(
                make(m.TxnOffsetCommitResponsePartition, partition_index=p,
                     error_code=results.get((name, p)) or code or replicated)
                for p in parts))
            for name, parts in order
        )
        return make(m.TxnOffsetCommitResponse, throttle_time=0, topics=topics)

    def commit(verdict: int) -> Any:
        """After the coordinator's verdict: write the offsets, answer once replicated."""
        if verdict != errors.NONE:
            state["code"] = _verification_error(verdict, ctx.api_version)
            return respond()
        code, found = groups.commit_txn_offsets(
            request.group_id, int(request.producer_id), int(request.producer_epoch),
            getattr(request, "member_id", "") or "", int(getattr(request, "generation_id", -1)),
            getattr(request, "group_instance_id", None), offsets,
            require_verification=verification.required, verification_guard=verification.guard,
        )
        state["code"] = code
        results.update(found)
        if code:
            return respond()
        return groups.answer_after_write(ctx, [partition], respond)

    code = groups.coordinator_error(request.group_id)
    if not request.group_id:
        code = errors.INVALID_GROUP_ID
    elif not ctx.permits(ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        code = errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not ctx.permits(ResourceType.GROUP, request.group_id):
        code = errors.GROUP_AUTHORIZATION_FAILED
    else:  # partitions of topics the principal may not READ: TOPIC_AUTHORIZATION_FAILED, not committed
        unreadable = {t for t, _ in offsets if not ctx.permits(ResourceType.TOPIC, t)}
        for tp in [tp for tp in offsets if tp[0] in unreadable]:
            results[tp] = errors.TOPIC_AUTHORIZATION_FAILED
            del offsets[tp]
        if unreadable and not offsets:
            return respond()
    add = is_tv2_request(API_KEY, ctx.api_version)
    if not code and add and transaction_version(services(ctx).features) < TV_2:
        code = errors.UNSUPPORTED_VERSION
    if not code and (int(request.producer_id) < 0 or int(request.producer_epoch) < 0):
        code = errors.INVALID_REQUEST  # no transactional batch can be written without them
    if code:
        state["code"] = code
        return respond()
    # KIP-890: the group's __consumer_offsets partition must be in the transaction (AddOffsetsToTxn)
    partition = groups.coordinator.partition_for(request.group_id)
    verification = start_verification(services(ctx), "__consumer_offsets", partition, int(request.producer_id),
                                      int(request.producer_epoch), add)
    verdict = coordinator_verdict(services(ctx), request.transactional_id, "__consumer_offsets", partition,
                                  int(request.producer_id), int(request.producer_epoch), add)
    if not isinstance(verdict, RemoteCheck):
        return commit(verdict)
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()

    def relay(f: asyncio.Future[Any]) -> None:
        if not fut.done():
            fut.set_result(f.result() if not f.cancelled() and f.exception() is None else respond(errors.REQUEST_TIMED_OUT))

    def verified(codes: dict[tuple[str, int], int]) -> None:
        if fut.done():
            return
        out = commit(codes.get(("__consumer_offsets", partition), errors.NOT_COORDINATOR))
        if isinstance(out, asyncio.Future):
            out.add_done_callback(relay)
        else:
            fut.set_result(out)

    run_check(services(ctx), verdict, request.transactional_id, [("__consumer_offsets", partition)], verified)
    return fut


def _verification_error(code: int, version: int) -> int:
    """The coordinator's verdict as TxnOffsetCommit answers it: retriable while the coordinator
    is busy or moving; a fenced producer gets PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v3);
    INVALID_TXN_STATE when the group's partition is not in the transaction."""
    if code in (errors.NOT_COORDINATOR, errors.COORDINATOR_NOT_AVAILABLE, errors.COORDINATOR_LOAD_IN_PROGRESS,
                errors.CONCURRENT_TRANSACTIONS):
        return errors.COORDINATOR_LOAD_IN_PROGRESS
    if code == errors.PRODUCER_FENCED:
        return errors.INVALID_PRODUCER_EPOCH if version < 3 else errors.PRODUCER_FENCED
    if code == errors.INVALID_PRODUCER_ID_MAPPING:
        return code
    return errors.INVALID_TXN_STATE
