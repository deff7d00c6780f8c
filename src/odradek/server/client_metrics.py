"""Client metrics subscriptions (KIP-714): the CLIENT_METRICS config resource (type 16) that
``kafka-client-metrics`` and ``Admin.incrementalAlterConfigs`` manage, as Kafka's ClientMetricsConfigs
defines it.

A subscription is a named set of three configs, kept in the metadata store at
``/config/client-metrics/<name>`` as ``{"version":1,"config":{...}}`` (the layout of Kafka's other entity
configs; Kafka 4 keeps them as ConfigRecords of resource type 16):

* ``metrics``: LIST of metric name prefixes the matching clients push ("" or ``*``: all of them);
* ``interval.ms``: INT, how often they push, in [100, 3600000] (default 300000);
* ``match``: LIST of ``selector=regex`` pairs choosing the clients, selectors ``client_instance_id``,
  ``client_id``, ``client_software_name``, ``client_software_version``, ``client_source_address`` and
  ``client_source_port`` (empty: every client).

Only the resource is implemented: the broker keeps and describes subscriptions, but it does not offer
GetTelemetrySubscriptions / PushTelemetry (APIs 71 and 72), which Kafka too offers only with a
ClientTelemetry metrics reporter plugged in.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from odradek.config import T_INT, T_LIST, ConfigDef, ConfigError

RESOURCE_CLIENT_METRICS = 16
SRC_CLIENT_METRICS_CONFIG = 7  # DescribeConfigsResponse.ConfigSource.CLIENT_METRICS_CONFIG

INTERVAL_MIN_MS, INTERVAL_MAX_MS = 100, 3_600_000
MATCH_SELECTORS = ("client_instance_id", "client_id", "client_software_name", "client_software_version",
                   "client_source_address", "client_source_port")

CLIENT_METRICS_CONFIGS: dict[str, ConfigDef] = {
    d.name: d
    for d in (
        ConfigDef("metrics", T_LIST, "", "The metric name prefixes the matching clients push; empty or * for all."),
        ConfigDef("interval.ms", T_INT, "300000", "How often the matching clients push their metrics.",
                  valid_doc=f"[{INTERVAL_MIN_MS},...,{INTERVAL_MAX_MS}]"),
        ConfigDef("match", T_LIST, "", "selector=regex pairs choosing the clients (client_instance_id, client_id, "
                                       "client_software_name, client_software_version, client_source_address, "
                                       "client_source_port); empty for every client."),
    )
}


_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def name_error(name: str | None) -> str | None:
    """Why ``name`` cannot name a subscription, or None. Names are kept as znode names, so they take Kafka's
    legal topic characters only (a ``/`` or ``..`` would name another path); kafka-client-metrics'
    --generate-name gives such names."""
    if not name or not name.strip():
        return "Client metrics subscription name must not be empty"
    if not _NAME.fullmatch(name) or name in (".", ".."):
        return f"Invalid client metrics subscription name {name[:260]!r}: use up to 249 of a-z, A-Z, 0-9, '.', '_', '-'"
    return None


def validate_name(name: str) -> None:
    why = name_error(name)
    if why is not None:
        raise ConfigError(why)


def validate(configs: Mapping[str, str]) -> None:
    """ConfigError (INVALID_CONFIG) naming the first config Kafka's ClientMetricsConfigs.validate refuses."""
    for name, raw in configs.items():
        if name not in CLIENT_METRICS_CONFIGS:
            raise ConfigError(f"Unknown client metrics configuration: {name}")
        if name == "interval.ms":
            try:
                value = int(raw.strip())
            except ValueError:
                raise ConfigError(f"Invalid value {raw} for configuration interval.ms: Not a number of type INT") from None
            if not INTERVAL_MIN_MS <= value <= INTERVAL_MAX_MS:
                raise ConfigError(f"Invalid value {value} for interval.ms, interval must be between "
                                  f"{INTERVAL_MIN_MS} and {INTERVAL_MAX_MS}")
        elif name == "match":
            for pattern in (p.strip() for p in raw.split(",") if p.strip()):
                selector, sep, regex = pattern.partition("=")
                if not sep or selector.strip() not in MATCH_SELECTORS or not regex.strip():
                    raise ConfigError(f"Illegal client matching pattern: {pattern}")
                try:
                    re.compile(regex.strip())
                except re.error:
                    raise ConfigError(f"Illegal regex pattern: {regex.strip()}") from None
