"""Heartbeat (12)."""

from __future__ import annotations

from typing import Any

from odradek.protocol.codec import make

API_KEY = 12
MIN_VERSION = 0
MAX_VERSION = 4


def handle(ctx: Any, request: Any) -> Any:
    code = ctx.broker.groups.coordinator_error(request.group_id) or ctx.broker.groups.coordinator.heartbeat(
        request.group_id, request.generation_id, request.member_id, getattr(request, "group_instance_id", None)
    )
    return make(ctx.response_module.HeartbeatResponse, throttle_time=0, error_code=code)
