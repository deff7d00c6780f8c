"""OffsetCommit (8)."""

from __future__ import annotations

from typing import Any

from odradek.protocol.codec import make

API_KEY = 8
MIN_VERSION = 2
MAX_VERSION = 9


def handle(ctx: Any, request: Any) -> Any:
    m = ctx.response_module
    offsets: dict[tuple[str, int], tuple[int, int, str]] = {}
    order: list[tuple[str, list[int]]] = []
    for t in request.topics:
        parts = []
        for p in t.partitions:
            offsets[(t.name, p.partition_index)] = (
                int(p.committed_offset),
                int(getattr(p, "committed_leader_epoch", -1)),
                p.committed_metadata or "",
            )
            parts.append(p.partition_index)
        order.append((t.name, parts))
    code, results = ctx.broker.groups.coordinator.commit_offsets(
        request.group_id,
        request.generation_id_or_member_epoch,
        request.member_id,
        getattr(request, "group_instance_id", None),
        offsets,
    )
    topics = tuple(
        make(
            m.OffsetCommitResponseTopic,
            name=name,
            partitions=tuple(
                make(m.OffsetCommitResponsePartition, partition_index=p, error_code=code or results.get((name, p), 0))
                for p in parts
            ),
        )
        for name, parts in order
    )
    return make(m.OffsetCommitResponse, throttle_time=0, topics=topics)
