"""Config entries as DescribeConfigs / CreateTopics show them, and the operations of
(Incremental)AlterConfigs applied to override maps."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from odradek.config import (
    BROKER_CONFIGS,
    DYNAMIC_BROKER_CONFIGS,
    SRC_DEFAULT,
    SRC_DYNAMIC_BROKER,
    SRC_DYNAMIC_DEFAULT_BROKER,
    SRC_DYNAMIC_TOPIC,
    T_LIST,
    TOPIC_CONFIGS,
    TOPIC_SYNONYMS,
    BrokerConfig,
)

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
RESOURCE_BROKER_LOGGER = 8

OP_SET, OP_DELETE, OP_APPEND, OP_SUBTRACT = 0, 1, 2, 3


@dataclass(slots=True)
class Entry:
    name: str
    value: str | None
    source: int
    sensitive: bool
    read_only: bool
    type: int
    doc: str
    synonyms: list[tuple[str, str | None, int]]


def topic_entries(config: BrokerConfig, overrides: Mapping[str, str]) -> list[Entry]:
    out = []
    for name, d in sorted(TOPIC_CONFIGS.items()):
        if d.internal:
            continue
        synonyms: list[tuple[str, str | None, int]] = []
        if name in overrides:
            synonyms.append((name, overrides[name], SRC_DYNAMIC_TOPIC))
        for syn in TOPIC_SYNONYMS[name]:
            raw, src = config.raw(syn)
            if raw is not None and src != SRC_DEFAULT:
                synonyms.append((syn, raw, src))
        raw_default, src_default, syn_name = config.topic_default(name)
        value: str | None
        if name in overrides:
            value, source = overrides[name], SRC_DYNAMIC_TOPIC
        else:
            value, source = raw_default, src_default
        if syn_name is not None and src_default == SRC_DEFAULT:
            # the synonym in its own unit (log.retention.hours=168), as Kafka lists it; the value is in the topic's
            synonyms.append((syn_name, config.raw(syn_name)[0], SRC_DEFAULT))
        out.append(Entry(name, value, source, d.sensitive, False, d.type, d.doc, synonyms))
    return out


def broker_entries(config: BrokerConfig) -> list[Entry]:
    """A broker's configs as Kafka's DescribeConfigs lists them: every config but Kafka's internal ones,
    its synonyms being each value it has (per broker, cluster default, static, default)."""
    out = []
    for name, d in sorted(BROKER_CONFIGS.items()):
        if d.internal:
            continue
        raw, src = config.raw(name)
        synonyms: list[tuple[str, str | None, int]] = [(name, v, s) for v, s in config.layers(name)]
        out.append(
            Entry(name, raw, src, d.sensitive, name not in DYNAMIC_BROKER_CONFIGS, d.type, d.doc, synonyms)
        )
    # names no Kafka broker knows, set dynamically (Kafka stores them): listed as Kafka lists them
    for layer, src in ((config.dynamic_broker, SRC_DYNAMIC_BROKER), (config.dynamic_default, SRC_DYNAMIC_DEFAULT_BROKER)):
        for name in sorted(set(layer) - set(BROKER_CONFIGS) - {e.name for e in out}):
            out.append(_unknown(name, src))
    return sorted(out, key=lambda e: e.name)


def _unknown(name: str, source: int) -> Entry:
    """A config name no Kafka broker knows: no value, sensitive (its type is unknown), read-only, type UNKNOWN."""
    return Entry(name, None, source, True, True, 0, "", [(name, None, source)])


def broker_default_entries(config: BrokerConfig) -> list[Entry]:
    """The cluster's default broker configs (the resource named ""): as Kafka 4.4 lists them, only those set
    as the cluster default, each with that value alone as its synonym. A name no Kafka broker knows is
    listed as Kafka lists it (``_unknown``)."""
    out = []
    for name, raw in sorted(config.dynamic_default.items()):
        d = BROKER_CONFIGS.get(name)
        if d is None:
            out.append(_unknown(name, SRC_DYNAMIC_DEFAULT_BROKER))
        else:
            out.append(Entry(name, raw, SRC_DYNAMIC_DEFAULT_BROKER, d.sensitive, name not in DYNAMIC_BROKER_CONFIGS,
                             d.type, d.doc, [(name, raw, SRC_DYNAMIC_DEFAULT_BROKER)]))
    return out


def apply_incremental(current: Mapping[str, str], ops: list[tuple[str, int, str | None]], kind: str) -> dict[str, str]:
    """Apply (name, operation, value) triples; raises ValueError on a bad operation."""
    result = dict(current)
    defs: Any = TOPIC_CONFIGS if kind == "topic" else BROKER_CONFIGS
    for name, op, value in ops:
        d = defs.get(name)
        if op == OP_SET:
            if value is None:
                raise ValueError(f"Null value not supported for : {name}")
            result[name] = value
        elif op == OP_DELETE:
            result.pop(name, None)
        elif op in (OP_APPEND, OP_SUBTRACT):
            if d is None or d.type != T_LIST:
                raise ValueError(f"Config value append is not allowed for config key: {name}")
            items = [x for x in (result.get(name) or (d.default or "")).split(",") if x]
            changes = [x.strip() for x in (value or "").split(",") if x.strip()]
            if op == OP_APPEND:
                items += [c for c in changes if c not in items]
            else:
                items = [x for x in items if x not in changes]
            result[name] = ",".join(items)
        else:
            raise ValueError(f"Unknown config operation {op}")
    return result
