"""IncrementalAlterConfigs (44): SET / DELETE / APPEND / SUBTRACT on topics, brokers, client metrics
subscriptions and groups (KIP-339, KIP-714, KIP-848's GROUP resource).

APPEND and SUBTRACT work on LIST configs only, as Kafka's ConfigurationControlManager
(``incrementalAlterConfigResource``) and ConfigAdminManager (``prepareIncrementalConfigs``) do: the old
list is the resource's current value of the config, else the config's own default; APPEND adds the
values not already in it, SUBTRACT removes them (an empty list may result, and is then validated like
any value: an empty ``cleanup.policy`` is valid in Kafka 3.9). On any other config they answer
INVALID_CONFIG "Can't APPEND to key X because its type is not LIST." and nothing of the resource is
applied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from odradek.config import BROKER_CONFIGS, T_LIST, TOPIC_CONFIGS, ConfigError
from odradek.protocol import errors
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.codec import make
from odradek.server.client_metrics import CLIENT_METRICS_CONFIGS, RESOURCE_CLIENT_METRICS, name_error
from odradek.server.config_view import (
    OP_APPEND,
    OP_DELETE,
    OP_SET,
    OP_SUBTRACT,
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
)
from odradek.server.group_configs import GROUP_CONFIG_TYPES, RESOURCE_GROUP, store_name
from odradek.server.handlers import HandlerResult
from odradek.server.handlers.alter_configs import Needs as AlterConfigsNeeds
from odradek.server.handlers.alter_configs import alter_configs_denied, apply
from odradek.server.request_context import HasTopics, RequestContext

API_KEY = ApiKey.INCREMENTAL_ALTER_CONFIGS
MIN_VERSION = 0
MAX_VERSION = 1


_OP_NAMES = {OP_APPEND: "APPEND", OP_SUBTRACT: "SUBTRACT"}


class Needs(HasTopics, AlterConfigsNeeds, Protocol):
    """What this handler uses of the broker's services."""


def services(ctx: RequestContext) -> Needs:
    """The broker's services, as this handler may use them."""
    return ctx.services


def _items(raw: str | None) -> list[str]:
    """A LIST config's value as its items (ConfigDef parses a list trimming whitespace around commas)."""
    return [x.strip() for x in (raw or "").split(",") if x.strip()]


def apply_ops(current: Mapping[str, str], ops: list[tuple[str, int, str | None]], kind: str) -> dict[str, str]:
    """The resource's new overrides after (name, operation, value) triples; ValueError (INVALID_CONFIG)
    on an operation Kafka refuses."""
    result = dict(current)
    defs: Mapping[str, Any] = {"topic": TOPIC_CONFIGS, "client metrics": CLIENT_METRICS_CONFIGS,
                               "group": GROUP_CONFIG_TYPES}.get(kind, BROKER_CONFIGS)
    for name, op, value in ops:
        if op == OP_SET:
            if value is None:
                raise ValueError(f"Null value not supported for : {name}")
            result[name] = value
        elif op == OP_DELETE:
            result.pop(name, None)
        elif op in (OP_APPEND, OP_SUBTRACT):
            d = defs.get(name)
            if d is None:
                raise ValueError(f"Unknown {kind} config name: {name}")
            if d.type != T_LIST:
                raise ValueError(f"Can't {_OP_NAMES[op]} to key {name} because its type is not LIST.")
            items = _items(result.get(name, d.default))
            if op == OP_APPEND:
                for v in _items(value):
                    if v not in items:
                        items.append(v)
            else:
                for v in _items(value):
                    if v in items:
                        items.remove(v)
            result[name] = ",".join(items)
        else:
            raise ValueError(f"Unknown config operation {op} for {name}")
    return result


def handle(ctx: RequestContext, request: Any) -> HandlerResult:
    svc = services(ctx)
    m = ctx.response_module
    out = []
    for res in request.resources:
        code, msg = errors.NONE, None
        current: dict[str, str] | None = None
        code, msg = alter_configs_denied(ctx, res.resource_type, res.resource_name)
        if code:
            pass
        elif res.resource_type == RESOURCE_TOPIC:
            meta = svc.topics.get(res.resource_name)
            if meta is None:
                code, msg = errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {res.resource_name} does not exist"
            else:
                current = dict(meta.configs)
        elif res.resource_type == RESOURCE_BROKER:
            current = svc.topics.broker_configs(res.resource_name)
        elif res.resource_type == RESOURCE_CLIENT_METRICS:
            why = name_error(res.resource_name)
            if why is not None:
                code, msg = errors.INVALID_REQUEST, why
            else:
                current = svc.topics.client_metrics_configs(res.resource_name)
        elif res.resource_type == RESOURCE_GROUP:
            try:
                current = svc.topics.group_configs(store_name(res.resource_name))
            except ConfigError as e:
                code, msg = errors.INVALID_REQUEST, str(e)
        else:
            code, msg = errors.INVALID_REQUEST, f"Unsupported resource type {res.resource_type}"
        if current is not None:
            names = [c.name for c in res.configs]
            if len(set(names)) != len(names):
                code, msg = errors.INVALID_REQUEST, "Duplicate config keys in request"
            else:
                try:
                    kind = {RESOURCE_TOPIC: "topic", RESOURCE_CLIENT_METRICS: "client metrics",
                            RESOURCE_GROUP: "group"}.get(res.resource_type, "broker")
                    new = apply_ops(current, [(c.name, c.config_operation, c.value) for c in res.configs], kind)
                    code, msg = apply(svc, res.resource_type, res.resource_name, new, request.validate_only)
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
