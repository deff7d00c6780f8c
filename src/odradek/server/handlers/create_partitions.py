"""CreatePartitions (37)."""

from __future__ import annotations

from typing import Any

from odradek.controller.topics import TopicError
from odradek.protocol import errors
from odradek.protocol.codec import make

API_KEY = 37
MIN_VERSION = 0
MAX_VERSION = 3


def handle(ctx: Any, request: Any) -> Any:
    broker = ctx.broker
    m = ctx.response_module
    out = []
    counts: dict[str, int] = {}
    for t in request.topics:
        counts[t.name] = counts.get(t.name, 0) + 1
    for t in request.topics:
        code = errors.NONE
        msg = None
        if counts[t.name] > 1:
            code, msg = errors.INVALID_REQUEST, "Duplicate topic in request."
        else:
            assignment = [list(a.broker_ids) for a in t.assignments] if t.assignments else None
            try:
                broker.create_partitions(t.name, t.count, assignment, validate_only=request.validate_only)
            except TopicError as e:
                code, msg = e.error_code, e.message
        out.append(make(m.CreatePartitionsTopicResult, name=t.name, error_code=code, error_message=msg))
    return make(m.CreatePartitionsResponse, throttle_time=0, results=tuple(out))
