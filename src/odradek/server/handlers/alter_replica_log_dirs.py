"""AlterReplicaLogDirs (34): move replicas of this broker to another of its log dirs (KIP-113).

Per partition, as Kafka's ReplicaManager.alterReplicaLogDirs: LOG_DIR_NOT_FOUND when the path is not
one of ``log.dirs``; KAFKA_STORAGE_ERROR when that dir, or the partition's current one, is offline;
INVALID_TOPIC_EXCEPTION when the future log's directory name would be longer than 255 bytes;
UNKNOWN_TOPIC_OR_PARTITION for a partition the cluster does not have and REPLICA_NOT_AVAILABLE for one
this broker does not host. Otherwise NONE: the move (odradek.log.dir_move) runs in the background
and DescribeLogDirs shows the future replica (``is_future_key``) until it is done. Version 0 is left
out: Kafka 4.0 removed it and kio has versions 1 and 2 only (v2 is v1, flexible).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol

from odradek.log import dir_move
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.security.acl import ResourceType
from odradek.server.handlers import HandlerResult
from odradek.server.request_context import HasLogManager, HasTopics, RequestContext

API_KEY = ApiKey.ALTER_REPLICA_LOG_DIRS
MIN_VERSION = 1
MAX_VERSION = 2

log = logging.getLogger("odradek.server")


class Needs(HasTopics, HasLogManager, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def _log_dir(log_dirs: list[Path], path: str) -> Path | None:
    """The configured log dir ``path`` names (Kafka compares absolute paths)."""
    want = Path(path)
    if not want.is_absolute():
        return None
    for d in log_dirs:
        if d.absolute() == want or d.resolve() == want.resolve():
            return d
    return None


def alter(svc: Needs, topic: str, partition: int, path: str) -> int:
    lm = svc.log_manager
    name = f"{topic}-{partition}"
    if len(dir_move.suffixed_dir_name(name, "0" * 32, dir_move.FUTURE_DIR_SUFFIX).encode()) > 255:
        return errors.INVALID_TOPIC_EXCEPTION
    dest = _log_dir(lm.log_dirs, path)
    if dest is None:
        return errors.LOG_DIR_NOT_FOUND
    if dest in lm.offline_dirs:
        return errors.KAFKA_STORAGE_ERROR
    meta = svc.topics.get(topic)
    if meta is None or not 0 <= partition < len(meta.partitions):
        return errors.UNKNOWN_TOPIC_OR_PARTITION
    if (topic, partition) in lm.offline_partitions:
        return errors.KAFKA_STORAGE_ERROR
    if lm.get_log(topic, partition) is None:
        return errors.REPLICA_NOT_AVAILABLE
    try:
        lm.start_move(topic, partition, dest)
    except OSError as e:
        log.warning("Unable to alter log dirs for %s: %s", name, e)
        return errors.KAFKA_STORAGE_ERROR
    return errors.NONE


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    m = ctx.response_module
    by_topic: dict[str, list[Any]] = {}
    allowed = ctx.permits(ResourceType.CLUSTER)
    for d in request.dirs:
        for t in d.topics:
            for p in t.partitions:
                code = (alter(services(ctx), t.name, int(p), d.path) if allowed
                        else errors.CLUSTER_AUTHORIZATION_FAILED)
                by_topic.setdefault(t.name, []).append(
                    make(m.AlterReplicaLogDirPartitionResult, partition_index=p, error_code=code))
    results = tuple(make(m.AlterReplicaLogDirTopicResult, topic_name=n, partitions=tuple(ps))
                    for n, ps in by_topic.items())
    return make(m.AlterReplicaLogDirsResponse, throttle_time=0, results=results)
