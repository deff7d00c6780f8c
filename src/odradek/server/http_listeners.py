"""The broker's side of ``http.listeners``: the HTTP server with its ``/metrics`` route, wired from
the broker's components by :func:`start_http`, which the Broker calls once its Kafka listeners are
bound. A console or another route is added with ``server.register(prefix, handler)``."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from odradek.config import SRC_DEFAULT, BrokerConfig, ConfigError
from odradek.connection_quotas import INT_MAX, ConnectionQuotas, parse_ip_overrides
from odradek.http.host_check import HostPolicy, host_policy
from odradek.http.server import Handler, HttpServer, parse_listener
from odradek.metrics.collector import KafkaCollector, MetricsSources
from odradek.metrics.endpoint import MetricsRoute
from odradek.protocol.api_keys import api_name
from odradek.server.handlers import registry

__all__ = ["HttpServer", "api_names", "committed_offsets", "http_listener", "start_http"]

log = logging.getLogger("odradek.http")


def http_listener(config: BrokerConfig) -> tuple[str, int] | None:
    """(host, port) of ``http.listeners``, None when it is empty (no HTTP endpoint, no request metrics)."""
    raw = (config.raw("http.listeners")[0] or "").strip()
    if not raw:
        return None
    urls = [u for u in raw.split(",") if u.strip()]
    if len(urls) != 1:
        raise ConfigError(f"http.listeners takes one http://host:port, got {raw!r}")
    try:
        return parse_listener(urls[0])
    except ValueError as e:
        raise ConfigError(str(e)) from None


def api_names() -> dict[int, str]:
    """Kafka's request names (ApiKeys' JSON names: ListOffsets, OffsetForLeaderEpoch...) of the APIs served."""
    return {key: api_name(key) for key in registry}


def committed_offsets(groups: Any) -> Iterable[tuple[str, str, int, int]]:
    """(group, topic, partition, committed offset) of the groups this broker coordinates."""
    coordinator = getattr(groups, "coordinator", None)
    if coordinator is None:
        return
    for group_id, g in list(coordinator.groups.items()):
        for (topic, partition), om in list(g.offsets.items()):
            yield group_id, topic, partition, om.offset


def http_host_policy(config: BrokerConfig, http_host: str) -> HostPolicy:
    """The Host names the HTTP endpoint answers (odradek.http.host_check): the broker's listener
    names, ``http.allowed.hosts``, localhost and literal IPs."""
    hosts = [h for _n, h, _p in config.listeners + config.advertised_listeners] + [http_host]
    allowed = (config.raw("http.allowed.hosts")[0] or "").split(",")
    return host_policy(hosts, allowed)


def http_connection_quotas(config: BrokerConfig) -> ConnectionQuotas:
    """``http.max.connections.per.ip`` and its overrides, counted by Kafka's ConnectionQuotas (the
    class the Kafka listeners count ``max.connections.per.ip`` with; the HTTP server bounds the total)."""
    name = "http.max.connections.per.ip"
    overrides = parse_ip_overrides(config.get(f"{name}.overrides") or "", name=f"{name}.overrides")
    return ConnectionQuotas(INT_MAX, int(config.get(name)), overrides, per_ip_name=name)


async def start_http(config: BrokerConfig, sources: MetricsSources,
                     extra_routes: Mapping[str, Callable[..., Any]] | None = None,
                     metrics_guard: Callable[[Handler], Handler] | None = None) -> HttpServer | None:
    """Bind ``http.listeners`` and serve ``/metrics`` (through ``metrics_guard`` when given: the
    console's login, for ``http.metrics.auth.required``). When the default address is taken (another
    broker on this host) the broker runs without it and says so; an address set explicitly that
    cannot be bound fails the start, as a Kafka listener does."""
    where = http_listener(config)
    if where is None:
        return None
    server = HttpServer(*where, host_policy=http_host_policy(config, where[0]), per_ip=http_connection_quotas(config))
    metrics: Handler = MetricsRoute(KafkaCollector(sources))
    server.register("/metrics", metrics_guard(metrics) if metrics_guard is not None else metrics)
    for prefix, handler in (extra_routes or {}).items():
        server.register(prefix, handler)
    try:
        bound = await server.start()
    except OSError as e:
        if config.raw("http.listeners")[1] == SRC_DEFAULT:
            log.warning("http.listeners: cannot bind the default http://%s:%d (%s); no /metrics endpoint. "
                        "Set http.listeners (port 0 for any free port, empty to disable)", where[0], where[1], e)
            return None
        raise
    log.info("serving /metrics on http://%s:%d", *bound)
    return server
