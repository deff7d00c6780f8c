"""IncrementalAlterConfigs (44): SET / DELETE / APPEND / SUBTRACT on topics and brokers."""

from __future__ import annotations

from typing import Any

from odradek.protocol import errors
from odradek.protocol.codec import make
from odradek.server.config_view import RESOURCE_BROKER, RESOURCE_TOPIC, apply_incremental
from odradek.server.handlers.alter_configs import apply

API_KEY = 44
MIN_VERSION = 0
MAX_VERSION = 1


def handle(ctx: Any, request: Any) -> Any:
    broker = ctx.broker
    m = ctx.response_module
    out = []
    for res in request.resources:
        code, msg = errors.NONE, None
        current: dict[str, str] | None = None
        if res.resource_type == RESOURCE_TOPIC:
            meta = broker.topics.get(res.resource_name)
            if meta is None:
                code, msg = errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist"
            else:
                current = dict(meta.configs)
        elif res.resource_type == RESOURCE_BROKER:
            current = broker.topics.broker_configs(res.resource_name)
        else:
            code, msg = errors.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}"
        if current is not None:
            names = [c.name for c in res.configs]
            if len(set(names)) != len(names):
                code, msg = errors.INVALID_REQUEST, "Duplicate config keys in request"
            else:
                try:
                    kind = "topic" if res.resource_type == RESOURCE_TOPIC else "broker"
                    new = apply_incremental(current, [(c.name, c.config_operation, c.value) for c in res.configs], kind)
                    code, msg = apply(broker, res.resource_type, res.resource_name, new, request.validate_only)
                except ValueError as e:
                    code, msg = errors.INVALID_CONFIG, str(e)
        out.append(
            make(
                m.AlterConfigsResourceResponse,
                error_code=code,
                error_message=msg,
                resource_type=res.resource_type,
                resource_name=res.resource_name,
            )
        )
    return make(m.IncrementalAlterConfigsResponse, throttle_time=0, responses=tuple(out))
