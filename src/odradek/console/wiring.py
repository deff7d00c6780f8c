"""Building the console from the broker's parts (called by the Broker when it binds http.listeners).
Each part the console gets is narrow: a Kafka request dispatcher, a record reader, a password
check and a counter snapshot."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from odradek.config import BrokerConfig, ConfigError
from odradek.config_check import security_protocol_map
from odradek.console.app import ConsoleApp
from odradek.console.auth import CredentialCheck
from odradek.console.dispatch import InProcessDispatch
from odradek.console.records import LogRecordSource
from odradek.log.manager import LogManager
from odradek.metrics.stats import FETCH_CONSUMER, BrokerTopicStats, RequestStats
from odradek.security.jaas import parse_jaas, plain_users
from odradek.security.listeners import listener_lookup
from odradek.security.services import SecurityServices
from odradek.server.request_context import BrokerServices

PRODUCE = 0
MIN_TOKEN_CHARS = 16

log = logging.getLogger("odradek.console")


def plain_users_of(config: BrokerConfig) -> dict[str, str]:
    """The SASL/PLAIN users of every listener that enables PLAIN (their JAAS configs)."""
    out: dict[str, str] = {}
    for name, _host, _port in config.listeners:
        lookup = listener_lookup(config, name)
        mechs = [m.strip().upper() for m in (lookup("sasl.enabled.mechanisms") or "").split(",")]
        jaas = lookup("plain.sasl.jaas.config") or lookup("sasl.jaas.config")
        if "PLAIN" in mechs and jaas:
            try:
                out.update(plain_users(parse_jaas(jaas)))
            except ConfigError:
                continue
    return out


def stats_snapshot(topics: BrokerTopicStats, requests: RequestStats | None) -> Callable[[], dict[str, Any]]:
    """The counters the charts poll: all-topics BrokerTopicMetrics and RequestMetrics' TotalTimeMs."""

    def snapshot() -> dict[str, Any]:
        t = topics.all_topics()
        reqs: dict[str, int] = {}
        latency: dict[str, dict[str, float]] = {}
        if requests is not None:
            for rv, n in list(requests.requests.items()):
                key = rv >> 8
                name = "Produce" if key == PRODUCE else "Fetch" if key == FETCH_CONSUMER else None
                if name:
                    reqs[name] = reqs.get(name, 0) + n
            for key, name in ((PRODUCE, "Produce"), (FETCH_CONSUMER, "Fetch")):
                hs = requests.latency.get(key)
                if hs is not None:
                    latency[name] = dict(hs[-1].percentiles_ms())
        return {"time_ms": int(time.time() * 1000), "bytes_in": t.bytes_in, "bytes_out": t.bytes_out,
                "messages_in": t.messages_in, "requests": reqs, "latency_ms": latency}

    return snapshot


def remote_sizes(topics: BrokerTopicStats) -> Callable[[], dict[tuple[str, int], int]]:
    """(topic, partition) -> bytes in the remote tier (RemoteLogSizeBytes) of the tiered partitions this broker
    leads, as the remote log manager last recorded them (empty on a broker that does not tier)."""

    def sizes() -> dict[tuple[str, int], int]:
        return {(name, p): g.log_size_bytes for name, parts in list(topics.remote.items())
                for p, g in list(parts.items())}

    return sizes


def build_console(config: BrokerConfig, services: Callable[[], BrokerServices | None], listener: str,
                  logs: LogManager, security: SecurityServices, topics: BrokerTopicStats,
                  requests: RequestStats | None) -> ConsoleApp:
    creds = security.credentials
    token = login_token(config)
    return ConsoleApp(
        InProcessDispatch(services, listener),
        LogRecordSource(logs, security.authorize),
        CredentialCheck(plain_users_of(config), creds.lookup if creds is not None else None),
        stats_snapshot(topics, requests),
        anonymous_allowed=not has_security(config),
        token=token,
        token_principal=str(config.get("http.auth.token.principal")).strip(),
        failure_delay_s=int(config.get("connection.failed.authentication.delay.ms")) / 1000,
        remote_sizes=remote_sizes(topics),
    )


def login_token(config: BrokerConfig) -> str | None:
    """``http.auth.token`` (None when unset or empty); a short one is warned about, never logged."""
    token = (config.raw("http.auth.token")[0] or "").strip()
    if not token:
        return None
    if len(token) < MIN_TOKEN_CHARS:
        log.warning("http.auth.token is shorter than %d characters: a guessable token opens the console to "
                    "anyone who reaches http.listeners; use a long random one", MIN_TOKEN_CHARS)
    return token


def metrics_need_login(config: BrokerConfig) -> bool:
    """``http.metrics.auth.required``; a ConfigError when nothing could log in to /metrics."""
    if not config.get("http.metrics.auth.required"):
        return False
    if not (config.raw("http.auth.token")[0] or "").strip() and not has_security(config):
        raise ConfigError("http.metrics.auth.required needs a way to log in: set http.auth.token (or give the "
                          "broker SASL users)")
    return True


def has_security(config: BrokerConfig) -> bool:
    """Whether the broker authenticates or authorizes anyone: a listener that is not PLAINTEXT, or
    ``authorizer.class.name``. The console then serves only users who log in."""
    if (config.raw("authorizer.class.name")[0] or "").strip():
        return True
    protocols = security_protocol_map(config.raw("listener.security.protocol.map")[0])
    return any(protocols.get(name.upper(), "PLAINTEXT") != "PLAINTEXT" for name, _h, _p in config.listeners)
