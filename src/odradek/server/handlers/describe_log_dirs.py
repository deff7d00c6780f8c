"""DescribeLogDirs (35): size of each partition in each log dir; a partition being moved to another log dir
(AlterReplicaLogDirs, KIP-113) is also listed under its destination with ``is_future_key`` set, the size
copied so far and its offset lag behind the current log, as Kafka's ReplicaManager.describeLogDirs.

It names every topic, its size and the broker's directories, so it needs DESCRIBE on the cluster
(KafkaApis.handleDescribeLogDirsRequest): without it the answer is CLUSTER_AUTHORIZATION_FAILED and no
result (versions below 3 have no top-level error code: they get the empty list alone)."""

from __future__ import annotations

import os
from typing import Any, Protocol

from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasConfig, HasLogManager, RequestContext

API_KEY = ApiKey.DESCRIBE_LOG_DIRS
MIN_VERSION = 1
MAX_VERSION = 5  # v5: is_cordoned (KIP-1066), false: cordoned.log.dirs is accepted but not acted on


class Needs(HasConfig, HasLogManager, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    m = ctx.response_module
    if not ctx.permits(ResourceType.CLUSTER):
        return make(m.DescribeLogDirsResponse, throttle_time=0, error_code=errors.CLUSTER_AUTHORIZATION_FAILED,
                    results=())
    wanted: dict[str, set[int] | None] | None = None
    if request.topics is not None:
        wanted = {t.topic: set(t.partitions) for t in request.topics}
    results = []
    for d in svc.config.log_dirs:
        by_topic: dict[str, list[Any]] = {}
        for plog in svc.log_manager.logs():
            if plog.dir.parent.resolve() != d.resolve():
                continue
            if wanted is not None and (plog.topic not in wanted or plog.partition not in (wanted[plog.topic] or ())):
                continue
            by_topic.setdefault(plog.topic, []).append(
                make(
                    m.DescribeLogDirsPartition,
                    partition_index=plog.partition,
                    partition_size=plog.size_in_bytes,
                    offset_lag=0,
                    is_future_key=False,
                )
            )
        for fut in svc.log_manager.futures():
            if fut.dest.resolve() != d.resolve():
                continue
            if wanted is not None and (fut.topic not in wanted or fut.partition not in (wanted[fut.topic] or ())):
                continue
            current = svc.log_manager.get_log(fut.topic, fut.partition)
            lag = current.log_end_offset - svc.log_manager.future_end_offset(fut) if current is not None else 0
            by_topic.setdefault(fut.topic, []).append(
                make(
                    m.DescribeLogDirsPartition,
                    partition_index=fut.partition,
                    partition_size=fut.size,
                    offset_lag=max(lag, 0),
                    is_future_key=True,
                )
            )
        try:
            st = os.statvfs(d)
            total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
        except OSError:
            total = usable = -1
        results.append(
            make(
                m.DescribeLogDirsResult,
                error_code=errors.NONE,
                log_dir=str(d.resolve()),
                topics=tuple(make(m.DescribeLogDirsTopic, name=n, partitions=tuple(ps)) for n, ps in sorted(by_topic.items())),
                total_bytes=total,
                usable_bytes=usable,
                is_cordoned=False,
            )
        )
    return make(m.DescribeLogDirsResponse, throttle_time=0, error_code=errors.NONE, results=tuple(results))
