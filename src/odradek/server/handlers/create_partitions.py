"""CreatePartitions (37): grows topics, answered once the new partitions have leaders.

The partitions added count against the principal's ``controller_mutation_rate`` (KIP-599): from
v3 a topic met by an exhausted quota fails with THROTTLING_QUOTA_EXCEEDED; older versions only
get the throttle time.

Before anything is assigned, the partitions the whole request adds are counted
(odradek.controller.partition_limits): more than one request may create fails every topic of it
with POLICY_VIOLATION; the topic registry checks each topic against ``max.partitions``."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.controller import partition_limits as limits
from odradek.controller.topics import TopicError
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.quota.controller_mutation import ThrottlingQuotaExceeded
from odradek.server.request_context import HasAdmin, HasCluster, HasTopics, RequestContext
from odradek.server.turns import in_turns

API_KEY = ApiKey.CREATE_PARTITIONS
MIN_VERSION = 0
MAX_VERSION = 3


class Needs(HasTopics, HasCluster, HasAdmin, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    m = ctx.response_module
    out = []
    quota = ctx.controller_mutation_quota()
    counts: dict[str, int] = {}
    for t in request.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    refused: dict[int, tuple[int, str | None]] = {}
    for i, t in enumerate(request.topics):
        if counts[t.name] > 1:
            refused[i] = errors.INVALID_REQUEST, "Duplicate topic in request."
        elif not ctx.permits(ResourceType.TOPIC, t.name):
            refused[i] = errors.TOPIC_AUTHORIZATION_FAILED, None
    asked = 0
    for i, t in enumerate(request.topics):
        current = svc.topics.get(t.name)
        if i not in refused and current is not None:
            # explicit assignments that do not match the count are refused on their own
            asked += len(t.assignments) if t.assignments else max(t.count - len(current.partitions), 0)
    too_many = limits.request_limit_error(asked)

    def grow_one(i: int, t: Any) -> None:
        code = errors.NONE
        msg = None
        if i in refused:
            code, msg = refused[i]
        elif too_many is not None:
            code, msg = errors.POLICY_VIOLATION, too_many
        else:
            assignment = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
            try:
                if quota.bounded and not request.validate_only:
                    # validated first: a refused request takes nothing from the quota
                    svc.admin.create_partitions(t.name, t.count, assignment, validate_only=True)
                    meta = svc.topics.get(t.name)
                    quota.record(t.count - (len(meta.partitions) if meta is not None else 0))
                svc.admin.create_partitions(t.name, t.count, assignment, validate_only=request.validate_only)
            except TopicError as e:
                code, msg = e.error_code, e.message
            except ThrottlingQuotaExceeded as e:
                code, msg = errors.THROTTLING_QUOTA_EXCEEDED, str(e)
        out.append(make(m.CreatePartitionsTopicResult, name=t.name, error_code=code, error_message=msg))

    def finish() -> Any:
        grown = {t.name: t.count for t in request.topics if counts[t.name] == 1} if not request.validate_only else {}
        done = {r.name for r in out if r.error_code == errors.NONE}
        grown = {n: c for n, c in grown.items() if n in done}
        throttle_ms = ctx.controller_mutation_throttle(quota)
        if not grown:
            return make(m.CreatePartitionsResponse, throttle_time=throttle_ms, results=tuple(out))
        cluster = svc.cluster

        def ready(name: str, count: int) -> bool:
            meta = svc.topics.get(name)
            return (meta is not None and len(meta.partitions) >= count
                    and all(p.leader in cluster.live_brokers for p in meta.partitions))

        def respond() -> Any:
            final = []
            for r in out:
                if r.name in grown and not ready(r.name, grown[r.name]):
                    r = make(m.CreatePartitionsTopicResult, name=r.name, error_code=errors.REQUEST_TIMED_OUT,
                             error_message="The controller did not elect leaders for the new partitions in time")
                final.append(r)
            return make(m.CreatePartitionsResponse, throttle_time=throttle_ms, results=tuple(final))

        # as Kafka's DelayedCreatePartitions: answered once the new partitions have leaders
        timeout_ms = int(request.timeout.total_seconds() * 1000)
        return cluster.wait_for_metadata(lambda: all(ready(n, c) for n, c in grown.items()), timeout_ms, respond)

    return in_turns(request.topics, grow_one, finish)  # each topic grown is a metadata store write
