"""CreateTopics (19): validate_only, configs, explicit assignments.

In cluster mode the answer waits (up to the request's timeout, REQUEST_TIMED_OUT after)
until the controller has elected leaders for every new partition and this broker's
metadata cache shows them, as Kafka's DelayedCreatePartitions does.

Each created topic's partitions count against the principal's ``controller_mutation_rate``
(KIP-599, server.quota.controller_mutation): from v6 a topic met by an exhausted quota fails with
THROTTLING_QUOTA_EXCEEDED; older versions only get the throttle time.

Before anything is assigned or allocated, the partitions the request asks for are counted
(odradek.controller.partition_limits): more than one request may create fails every topic of it
with POLICY_VIOLATION, as Kafka's controller refuses an excessively large batch; the topic
registry then checks each topic against ``max.partitions``. Explicit assignments naming one
partition twice fail with INVALID_REPLICA_ASSIGNMENT (Kafka's "Found multiple manual partition
assignments")."""

from __future__ import annotations

from typing import Any, Protocol

from odradek.controller import partition_limits as limits
from odradek.controller.topics import TopicError
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.config_view import topic_entries
from odradek.server.handlers import HandlerResult
from odradek.server.quota.controller_mutation import ThrottlingQuotaExceeded
from odradek.server.request_context import HasAdmin, HasCluster, HasConfig, HasTopics, RequestContext
from odradek.server.turns import in_turns

API_KEY = ApiKey.CREATE_TOPICS
MIN_VERSION = 2
MAX_VERSION = 7


class Needs(HasConfig, HasTopics, HasCluster, HasAdmin, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    m = ctx.response_module
    results = []
    seen: dict[str, int] = {}
    for t in request.topics:
        seen[t.name] = seen.get(t.name, 0) + 1
    may_create_any = ctx.permits(ResourceType.CLUSTER)  # CREATE on the cluster, or on each topic
    quota = ctx.controller_mutation_quota()
    refused: dict[int, tuple[int, str | None]] = {}
    expected: dict[str, int] = {}  # partitions of each topic created
    for i, t in enumerate(request.topics):
        if seen[t.name] > 1:
            refused[i] = errors.INVALID_REQUEST, f"Create topics request from client contains duplicate topic {t.name}"
        elif not (may_create_any or ctx.permits(ResourceType.TOPIC, t.name)):
            refused[i] = errors.TOPIC_AUTHORIZATION_FAILED, "Authorization failed."
    default_partitions = int(svc.config.get("num.partitions"))
    asked = sum(limits.requested_partitions(t.num_partitions, t.assignments, default_partitions)
                for i, t in enumerate(request.topics) if i not in refused)
    too_many = limits.request_limit_error(asked)

    def create_one(i: int, t: Any) -> None:
        code = errors.NONE
        msg: str | None = None
        meta = None
        if i in refused:
            code, msg = refused[i]
        elif too_many is not None:
            code, msg = errors.POLICY_VIOLATION, too_many
        else:
            configs = {c.name: c.value for c in t.configs}
            try:
                assignment = _explicit_assignment(t.assignments)
                if quota.bounded and not request.validate_only:
                    # validated first: a refused topic takes nothing from the quota
                    planned = svc.admin.create_topic(t.name, t.num_partitions, t.replication_factor, assignment,
                                                     configs, validate_only=True)
                    quota.record(len(planned.partitions))
                meta = svc.admin.create_topic(
                    t.name,
                    t.num_partitions,
                    t.replication_factor,
                    assignment,
                    configs,
                    validate_only=request.validate_only,
                )
                expected[t.name] = len(meta.partitions)
            except TopicError as e:
                code, msg = e.error_code, e.message
            except ThrottlingQuotaExceeded as e:
                code, msg = errors.THROTTLING_QUOTA_EXCEEDED, str(e)
        cfgs: tuple[Any, ...] = ()
        num_partitions = -1
        rf = -1
        # the created topic's configs, partitions and replication factor only to who may DESCRIBE_CONFIGS
        # it (KafkaApis.handleCreateTopicsRequest: topicConfigErrorCode TOPIC_AUTHORIZATION_FAILED otherwise)
        configs_allowed = ctx.permits_also(ResourceType.TOPIC, t.name)
        if meta is not None and hasattr(m, "CreatableTopicConfigs") and configs_allowed:
            num_partitions = len(meta.partitions)
            rf = len(meta.partitions[0].replicas)
            cfgs = tuple(
                make(
                    m.CreatableTopicConfigs,
                    name=e.name,
                    value=e.value,
                    read_only=e.read_only,
                    config_source=e.source,
                    is_sensitive=e.sensitive,
                )
                for e in topic_entries(svc.config, meta.configs)
            )
        results.append(
            make(
                m.CreatableTopicResult,
                name=t.name,
                topic_id=meta.topic_id if meta is not None and not request.validate_only else None,
                error_code=code,
                error_message=msg,
                topic_config_error_code=errors.NONE if configs_allowed else errors.TOPIC_AUTHORIZATION_FAILED,
                num_partitions=num_partitions,
                replication_factor=rf,
                configs=cfgs if code == errors.NONE else (),
            )
        )

    def finish() -> Any:
        cluster = svc.cluster
        throttle_ms = ctx.controller_mutation_throttle(quota)
        created = [r.name for r in results if r.error_code == errors.NONE] if not request.validate_only else []
        if not created:
            return make(m.CreateTopicsResponse, throttle_time=throttle_ms, topics=tuple(results))

        def ready(name: str) -> bool:
            # a large topic reaches the metadata cache in batches (the controller's NEW_PARTITION_BATCH)
            meta = svc.topics.get(name)
            return (meta is not None and len(meta.partitions) >= expected[name]
                    and all(p.leader in cluster.live_brokers for p in meta.partitions))

        timeout_ms = int(request.timeout.total_seconds() * 1000)

        def respond() -> Any:
            final = []
            for r in results:
                if r.name in created and not ready(r.name):
                    r = make(m.CreatableTopicResult, name=r.name, error_code=errors.REQUEST_TIMED_OUT,
                             error_message="The controller did not elect leaders in time", topic_config_error_code=errors.NONE,
                             configs=(),  # fields of later versions, copied when the version has them
                             **{f: getattr(r, f) for f in ("topic_id", "num_partitions", "replication_factor")
                                if hasattr(r, f)})
                final.append(r)
            return make(m.CreateTopicsResponse, throttle_time=throttle_ms, topics=tuple(final))

        return cluster.wait_for_metadata(lambda: all(ready(n) for n in created), timeout_ms, respond)

    # each topic writes the metadata store: a request naming thousands of topics is worked through a few
    # per loop turn, other clients served in between
    return in_turns(request.topics, create_one, finish)


def _explicit_assignment(assignments: Any) -> dict[int, list[int]] | None:
    """The request's manual assignment by partition; a partition named twice is refused."""
    if not assignments:
        return None
    out: dict[int, list[int]] = {}
    for a in assignments:
        if a.partition_index in out:
            raise TopicError(errors.INVALID_REPLICA_ASSIGNMENT,
                             f"Found multiple manual partition assignments for partition {a.partition_index}")
        out[a.partition_index] = list(a.broker_ids)
    return out
