"""What each listener asks of its connections (Kafka's ChannelBuilders): its security protocol
from ``listener.security.protocol.map``, the TLS context (SSL, SASL_SSL), the SASL mechanisms
(SASL_PLAINTEXT, SASL_SSL) and the timing of authentication.

Per-listener settings are Kafka's ``listener.name.<listener>.<setting>`` (the listener name in
lower case), mechanism-specific ones ``listener.name.<listener>.<mechanism>.sasl.jaas.config``;
each falls back to the unprefixed setting.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import partial

from odradek.config import BrokerConfig, ConfigError
from odradek.config_check import security_protocol_map
from odradek.security import tls
from odradek.security.jaas import parse_jaas, plain_users
from odradek.security.sasl import MechanismFactory, PlainMechanism, SaslServer, ScramServerMechanism
from odradek.security.scram import MECHANISMS, CredentialLookup
from odradek.security.tls import ReloadingServerContext

log = logging.getLogger("odradek.security")

SUPPORTED_MECHANISMS = ("PLAIN", *MECHANISMS)


@dataclass(frozen=True)
class ListenerSecurity:
    name: str
    protocol: str  # PLAINTEXT | SSL | SASL_PLAINTEXT | SASL_SSL
    tls_context: ReloadingServerContext | None = None
    principal_rules: list[object] = field(default_factory=list)
    mechanisms: Mapping[str, MechanismFactory] = field(default_factory=dict)
    auth_timeout_s: float = 10.0  # TLS handshake and SASL authentication must be done within it
    failed_auth_delay_s: float = 0.1  # connection.failed.authentication.delay.ms
    max_reauth_ms: int = 0  # connections.max.reauth.ms: a SASL session's lifetime (KIP-368), 0 for none
    max_unauthenticated_bytes: int = 524288  # sasl.server.max.receive.size: request size before SASL completes

    @property
    def ssl_context(self) -> ssl.SSLContext | None:
        """The context new connections get (rebuilt when the key or trust store file changed)."""
        return self.tls_context.current() if self.tls_context is not None else None

    @property
    def uses_tls(self) -> bool:
        return self.tls_context is not None

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    def sasl_server(self) -> SaslServer | None:
        return SaslServer(self.mechanisms, self.max_reauth_ms > 0) if self.uses_sasl else None

    def certificate_principal(self, peercert: dict[str, object] | None) -> str:
        return tls.certificate_principal(peercert, self.principal_rules)  # type: ignore[arg-type]


def listener_lookup(config: BrokerConfig, listener: str) -> Callable[[str], str | None]:
    prefix = f"listener.name.{listener.lower()}."

    def lookup(name: str) -> str | None:
        v = config.static.get(prefix + name)
        return v if v is not None else config.raw(name)[0]

    return lookup


def _mechanisms(config: BrokerConfig, listener: str, credentials: CredentialLookup) -> dict[str, MechanismFactory]:
    lookup = listener_lookup(config, listener)
    enabled = [m.strip().upper() for m in (lookup("sasl.enabled.mechanisms") or "").split(",") if m.strip()]
    out: dict[str, MechanismFactory] = {}
    for mech in enabled:
        if mech not in SUPPORTED_MECHANISMS:
            log.warning("listener %s: SASL mechanism %s is not implemented (only %s); not offered",
                        listener, mech, ", ".join(SUPPORTED_MECHANISMS))
            continue
        if mech == "PLAIN":
            jaas = lookup("plain.sasl.jaas.config") or lookup("sasl.jaas.config")
            if not jaas:
                raise ConfigError(f"listener {listener}: SASL/PLAIN needs listener.name.{listener.lower()}."
                                  "plain.sasl.jaas.config (PlainLoginModule with user_<name>=\"<password>\")")
            users = plain_users(parse_jaas(jaas))
            out[mech] = partial(PlainMechanism, users)
        else:
            out[mech] = partial(ScramServerMechanism, mech, credentials)
    if not out:
        raise ConfigError(f"listener {listener} uses SASL but sasl.enabled.mechanisms names none of "
                          f"{', '.join(SUPPORTED_MECHANISMS)}")
    return out


def build_listener_security(config: BrokerConfig, credentials: CredentialLookup) -> dict[str, ListenerSecurity]:
    """Each configured listener's security; ConfigError for a listener that cannot be served as asked."""
    protocols = security_protocol_map(config.raw("listener.security.protocol.map")[0])
    rules = tls.parse_mapping_rules(config.raw("ssl.principal.mapping.rules")[0])
    timeout_s = int(config.get("odradek.authentication.timeout.ms")) / 1000.0
    delay_s = int(config.get("connection.failed.authentication.delay.ms")) / 1000.0
    out: dict[str, ListenerSecurity] = {}
    for name, _host, _port in config.listeners:
        protocol = protocols.get(name.upper())
        if protocol is None:
            raise ConfigError(f"No security protocol defined for listener {name}")
        ctx = ReloadingServerContext(listener_lookup(config, name)) if protocol in ("SSL", "SASL_SSL") else None
        mechs = _mechanisms(config, name, credentials) if protocol.startswith("SASL_") else {}
        lookup = listener_lookup(config, name)
        reauth_ms = int(lookup("connections.max.reauth.ms") or 0)
        if reauth_ms < 0:
            raise ConfigError(f"Invalid value {reauth_ms} for configuration connections.max.reauth.ms")
        max_receive = int(config.get("sasl.server.max.receive.size"))
        out[name] = ListenerSecurity(name, protocol, ctx, list(rules), mechs, timeout_s, delay_s, reauth_ms,
                                     max_receive)
    return out
