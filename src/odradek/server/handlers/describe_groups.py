"""DescribeGroups (15): a missing group is reported as Dead (Kafka's behaviour up to v5)."""

from __future__ import annotations

from typing import Any

from odradek.coordinator.group.classic import GroupState
from odradek.protocol import errors
from odradek.protocol.codec import make

API_KEY = 15
MIN_VERSION = 0
MAX_VERSION = 5


def handle(ctx: Any, request: Any) -> Any:
    m = ctx.response_module
    coord = ctx.broker.groups.coordinator
    out = []
    for gid in request.groups:
        g = coord.describe(gid)
        if g is None:
            out.append(
                make(m.DescribedGroup, error_code=errors.NONE, group_id=gid, group_state="Dead", protocol_type="",
                     protocol_data="", members=(), authorized_operations=-(2**31))
            )
            continue
        stable = g.state == GroupState.STABLE
        members = tuple(
            make(
                m.DescribedGroupMember,
                member_id=mm.member_id,
                group_instance_id=mm.group_instance_id,
                client_id=mm.client_id,
                client_host=mm.client_host,
                member_metadata=mm.metadata(g.protocol_name) if stable and g.protocol_name else b"",
                member_assignment=mm.assignment if stable else b"",
            )
            for mm in g.members.values()
        )
        out.append(
            make(
                m.DescribedGroup,
                error_code=errors.NONE,
                group_id=gid,
                group_state=g.state.value,
                protocol_type=g.protocol_type or "",
                protocol_data=(g.protocol_name or "") if stable else "",
                members=members,
                authorized_operations=-(2**31),
            )
        )
    return make(m.DescribeGroupsResponse, throttle_time=0, groups=tuple(out))
