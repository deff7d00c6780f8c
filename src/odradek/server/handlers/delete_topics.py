"""DeleteTopics (20): by name, or by topic id (v6). In cluster mode the answer waits until
the controller has deleted the topics (REQUEST_TIMED_OUT after the request's timeout).

Each deleted topic's partitions count against the principal's ``controller_mutation_rate``
(KIP-599): from v5 a topic met by an exhausted quota fails with THROTTLING_QUOTA_EXCEEDED; older
versions only get the throttle time."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.controller.topics import TopicError
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.quota.controller_mutation import ThrottlingQuotaExceeded
from odradek.server.request_context import HasAdmin, HasCluster, HasConfig, HasTopics, RequestContext

API_KEY = ApiKey.DELETE_TOPICS
MIN_VERSION = 1
MAX_VERSION = 6


class Needs(HasConfig, HasTopics, HasCluster, HasAdmin, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    m = ctx.response_module
    reg = svc.topics
    targets: list[tuple[str | None, Any]] = []
    if ctx.api_version >= 6:
        for t in request.topics:
            targets.append((t.name, t.topic_id))
    else:
        targets = [(name, None) for name in request.topic_names]
    out = []
    quota = ctx.controller_mutation_quota()
    for name, tid in targets:
        code = errors.NONE
        msg = None
        meta = reg.get(name) if name else (reg.by_id.get(tid) if tid is not None else None)
        if not ctx.permits(ResourceType.TOPIC, meta.name if meta is not None else name or ""):
            code = errors.TOPIC_AUTHORIZATION_FAILED  # whether it exists is not told
        elif meta is None:
            code = errors.UNKNOWN_TOPIC_ID if (not name and tid is not None) else errors.UNKNOWN_TOPIC_OR_PARTITION
        elif not svc.config.get("delete.topic.enable"):
            code, msg = errors.TOPIC_DELETION_DISABLED, "Topic deletion is disabled."
        elif meta.is_internal:
            code, msg = errors.TOPIC_AUTHORIZATION_FAILED, f"Cannot delete internal topic {meta.name}"
        else:
            try:
                quota.record(len(meta.partitions))
                svc.admin.delete_topic(meta.name)
            except TopicError as e:
                code, msg = e.error_code, e.message
            except ThrottlingQuotaExceeded as e:
                code, msg = errors.THROTTLING_QUOTA_EXCEEDED, str(e)
        out.append(
            make(
                m.DeletableTopicResult,
                name=meta.name if meta is not None else name,
                topic_id=meta.topic_id if meta is not None else tid,
                error_code=code,
                error_message=msg,
            )
        )
    cluster = svc.cluster
    throttle_ms = ctx.controller_mutation_throttle(quota)
    deleted = [r.name for r in out if r.error_code == errors.NONE]
    if not deleted:
        return make(m.DeleteTopicsResponse, throttle_time=throttle_ms, responses=tuple(out))
    timeout_ms = int(request.timeout.total_seconds() * 1000)

    def respond() -> Any:
        final = [
            r if r.name not in deleted or reg.get(r.name) is None else make(
                m.DeletableTopicResult, name=r.name, topic_id=getattr(r, "topic_id", None),  # v6+
                error_code=errors.REQUEST_TIMED_OUT,
                error_message="The controller did not delete the topic in time",
            )
            for r in out
        ]
        return make(m.DeleteTopicsResponse, throttle_time=throttle_ms, responses=tuple(final))

    return cluster.wait_for_metadata(lambda: all(reg.get(n) is None for n in deleted), timeout_ms, respond)
