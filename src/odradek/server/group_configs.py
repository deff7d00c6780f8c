"""Per-group configs (KIP-848's GROUP config resource, type 32): what ``Admin.incrementalAlterConfigs``
and ``kafka-configs --entity-type groups`` set on one group, as Kafka's GroupConfig defines them.

=================================  ======================================  =====================================
config                             default (the broker's)                   allowed (the broker's bounds)
=================================  ======================================  =====================================
consumer.session.timeout.ms        group.consumer.session.timeout.ms       group.consumer.{min,max}.session.timeout.ms
consumer.heartbeat.interval.ms     group.consumer.heartbeat.interval.ms    group.consumer.{min,max}.heartbeat.interval.ms
share.session.timeout.ms           group.share.session.timeout.ms          group.share.{min,max}.session.timeout.ms
share.heartbeat.interval.ms        group.share.heartbeat.interval.ms       group.share.{min,max}.heartbeat.interval.ms
share.record.lock.duration.ms      group.share.record.lock.duration.ms     group.share.{min,max}.record.lock.duration.ms
share.delivery.count.limit         group.share.delivery.count.limit        group.share.{min,max}.delivery.count.limit
share.partition.max.record.locks   group.share.partition.max.record.locks  group.share.{min,max}.partition.max.record.locks
share.auto.offset.reset            latest                                  latest, earliest, by_duration:<ISO-8601>
share.isolation.level              read_uncommitted                        read_committed, read_uncommitted
=================================  ======================================  =====================================

and a session timeout must be greater than its heartbeat interval (Kafka's GroupConfig.validateValues, with
its messages). A group's overrides are kept in the metadata store at ``/config/groups/<name>``, the name the
group id in URL-safe base64 (a group id may hold any character, a znode name may not) as
``{"version":1,"config":{...}}``. The consumer-group coordinator reads them through
:class:`GroupConfigCache` (session timeout and heartbeat interval of KIP-848 groups), and share groups'
(server.share_services) read their ``share.*`` configs from it.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping
from typing import Any

from odradek.config import T_INT, T_STRING, ConfigDef, ConfigError
from odradek.coordinator.share.share_partition import AutoOffsetReset

RESOURCE_GROUP = 32
SRC_GROUP_CONFIG = 8  # DescribeConfigsResponse.ConfigSource.GROUP_CONFIG
MAX_GROUP_ID_BYTES = 700  # so that the store name stays a legal znode name
CACHE_ENTRIES = 10_000

# config -> (the broker config giving its default, the broker configs bounding it)
_DEFS: dict[str, tuple[str, str, str, str]] = {
    "consumer.session.timeout.ms": (
        "group.consumer.session.timeout.ms", "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms", "The timeout to detect client failures when using the consumer "
        "group protocol."),
    "consumer.heartbeat.interval.ms": (
        "group.consumer.heartbeat.interval.ms", "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms", "The heartbeat interval given to the members of a consumer "
        "group."),
    "share.session.timeout.ms": (
        "group.share.session.timeout.ms", "group.share.min.session.timeout.ms",
        "group.share.max.session.timeout.ms", "The timeout to detect client failures when using the share group "
        "protocol."),
    "share.heartbeat.interval.ms": (
        "group.share.heartbeat.interval.ms", "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms", "The heartbeat interval given to the members of a share group."),
    "share.record.lock.duration.ms": (
        "group.share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms", "The record acquisition lock duration in milliseconds for "
        "share groups."),
    "share.delivery.count.limit": (
        "group.share.delivery.count.limit", "group.share.min.delivery.count.limit",
        "group.share.max.delivery.count.limit", "The maximum number of delivery attempts for a record delivered "
        "to a share group."),
    "share.partition.max.record.locks": (
        "group.share.partition.max.record.locks", "group.share.min.partition.max.record.locks",
        "group.share.max.partition.max.record.locks", "Share-group record lock limit per share-partition."),
}
ISOLATION_LEVELS = ("read_committed", "read_uncommitted")


def _reset_problem(value: str) -> str | None:
    try:
        AutoOffsetReset.parse(value)
    except ValueError as e:
        return str(e)
    return None


def _isolation_problem(value: str) -> str | None:
    return None if value.strip().lower() in ISOLATION_LEVELS else f"String must be one of: {', '.join(ISOLATION_LEVELS)}"


# Kafka's GroupConfig string configs: name -> (default, why a value is refused (None: valid), valid values, doc)
_STRING_DEFS: dict[str, tuple[str, Callable[[str], str | None], str, str]] = {
    "share.auto.offset.reset": (
        "latest", _reset_problem, "[latest, earliest, by_duration:PnDTnHnMn.nS]",
        "The strategy to initialize the share-partition start offset: earliest, latest, or by_duration:<ISO-8601 "
        "duration> (that long before now)."),
    "share.isolation.level": (
        "read_uncommitted", _isolation_problem, "[read_committed, read_uncommitted]",
        "Controls how to read records written transactionally: read_committed delivers only committed "
        "transactional records (a share group reads up to the last stable offset), read_uncommitted all."),
}
NAMES = tuple(_DEFS) + tuple(_STRING_DEFS)
# the configs' types, for IncrementalAlterConfigs' APPEND / SUBTRACT check (none is a LIST)
GROUP_CONFIG_TYPES: dict[str, ConfigDef] = {
    **{name: ConfigDef(name, T_INT, None) for name in _DEFS},
    **{name: ConfigDef(name, T_STRING, None) for name in _STRING_DEFS},
}


def defs(broker_config: Any) -> dict[str, ConfigDef]:
    """The group configs with the broker's defaults."""
    out = {name: ConfigDef(name, T_INT, str(broker_config.get(default)), doc)
           for name, (default, _lo, _hi, doc) in _DEFS.items()}
    for name, (default_value, _check, valid_doc, doc) in _STRING_DEFS.items():
        out[name] = ConfigDef(name, T_STRING, default_value, doc, valid_doc=valid_doc)
    return out


def effective_strings(overrides: Mapping[str, str]) -> dict[str, str]:
    """The string configs' values: the override, else Kafka's default."""
    return {name: overrides.get(name, default).strip() for name, (default, *_rest) in _STRING_DEFS.items()}


def store_name(group_id: str) -> str:
    """The znode name of a group's configs; ConfigError when the group id is too long for one."""
    raw = group_id.encode()
    if not raw:
        raise ConfigError("Group id must not be empty")
    if len(raw) > MAX_GROUP_ID_BYTES:
        raise ConfigError(f"Group id of {len(raw)} bytes: configs are kept for group ids up to "
                          f"{MAX_GROUP_ID_BYTES} bytes")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def effective(overrides: Mapping[str, str], broker_config: Any) -> dict[str, int]:
    """Every group config's value: the override, else the broker's default."""
    out: dict[str, int] = {}
    for name, (default, _lo, _hi, _doc) in _DEFS.items():
        raw = overrides.get(name)
        out[name] = int(raw) if raw is not None else int(broker_config.get(default))
    return out


def validate(configs: Mapping[str, str], broker_config: Any) -> None:
    """ConfigError, with Kafka's message, unless ``configs`` (a group's whole set of overrides) is valid."""
    for name, value in configs.items():
        if name in _STRING_DEFS:
            problem = _STRING_DEFS[name][1](value)
            if problem is not None:
                raise ConfigError(f"Invalid value {value} for configuration {name}: {problem}")
            continue
        if name not in _DEFS:
            raise ConfigError(f"Unknown group config name: {name}")
        try:
            int(value.strip())
        except (ValueError, AttributeError):
            raise ConfigError(f"Invalid value {value} for configuration {name}: Not a number of type INT") from None
    values = effective({k: v.strip() for k, v in configs.items() if k in _DEFS}, broker_config)
    for name, (_default, lo, hi, _doc) in _DEFS.items():
        v = values[name]
        if v < int(broker_config.get(lo)):
            raise ConfigError(f"{name} must be greater than or equal to {lo}")
        if v > int(broker_config.get(hi)):
            raise ConfigError(f"{name} must be less than or equal to {hi}")
    for kind in ("consumer", "share"):
        if values[f"{kind}.session.timeout.ms"] <= values[f"{kind}.heartbeat.interval.ms"]:
            raise ConfigError(f"{kind}.session.timeout.ms must be greater than {kind}.heartbeat.interval.ms")


class GroupConfigCache:
    """A group's overrides read from the store once, until :meth:`invalidate` (a change made here, or a
    config change notification from another broker)."""

    def __init__(self, read: Callable[[str], dict[str, str]]) -> None:
        self._read = read
        self._cache: dict[str, dict[str, str]] = {}

    def get(self, group_id: str) -> dict[str, str]:
        found = self._cache.get(group_id)
        if found is None:
            try:
                found = self._read(group_id)
            except ConfigError:
                found = {}
            if len(self._cache) >= CACHE_ENTRIES:
                del self._cache[next(iter(self._cache))]  # the oldest read
            self._cache[group_id] = found
        return found

    def invalidate(self, group_id: str | None = None) -> None:
        if group_id is None:
            self._cache.clear()
        else:
            self._cache.pop(group_id, None)
