"""How a broker's own clients reach other brokers (Kafka's inter-broker ChannelBuilder on the
client side): the inter-broker listener's security protocol, with the same settings names as
Kafka's brokers use for it.

- Protocol: the protocol ``listener.security.protocol.map`` gives the inter-broker listener
  (``inter.broker.listener.name``, else ``security.inter.broker.protocol``).
- TLS (SSL, SASL_SSL): the listener's ``ssl.*`` settings (``listener.name.<l>.ssl.*`` first):
  its trust store (else the system's CA certificates) verifies the peer broker's certificate, its key store is presented as the
  client certificate (mTLS); ``ssl.endpoint.identification.algorithm`` (default ``https``)
  checks the peer's host name, empty turns that off; ``ssl.enabled.protocols`` bound the version.
- SASL (SASL_PLAINTEXT, SASL_SSL): ``sasl.mechanism.inter.broker.protocol`` (PLAIN,
  SCRAM-SHA-256, SCRAM-SHA-512), the ``username`` / ``password`` options of the listener's
  ``listener.name.<l>.<mechanism>.sasl.jaas.config`` (else ``sasl.jaas.config``).

The client context is rebuilt when its key store or trust store file changes on disk (as the
listeners' server contexts are, odradek.security.tls.ReloadingContext): a renewed broker
certificate or CA is used by the next inter-broker connection, without a restart.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

from odradek.config import BrokerConfig, ConfigError
from odradek.config_check import security_protocol_map
from odradek.security.jaas import parse_jaas
from odradek.security.listeners import listener_lookup
from odradek.security.sasl_client import CLIENT_MECHANISMS
from odradek.security.tls import ReloadingContext

Lookup = Callable[[str], "str | None"]

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


@dataclass(frozen=True)
class ClientSecurity:
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    username: str = ""
    password: str = ""
    # rebuilds the context when the PEM files change (None: ssl_context as given)
    reloading: ReloadingContext | None = field(default=None, compare=False, repr=False)

    @property
    def uses_sasl(self) -> bool:
        return self.sasl_mechanism is not None

    def current_ssl_context(self) -> ssl.SSLContext | None:
        """The context a new connection uses: the reloaded one when the stores changed."""
        if self.reloading is not None:
            return self.reloading.current()
        return self.ssl_context


PLAINTEXT = ClientSecurity()


def client_context(lookup: Lookup) -> ssl.SSLContext:
    """The client-side SSLContext a broker opens inter-broker connections with."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    try:
        trust = lookup("ssl.truststore.location")
        trust_text = lookup("ssl.truststore.certificates")
        if trust:
            ctx.load_verify_locations(cafile=trust)
        elif trust_text:
            ctx.load_verify_locations(cadata=trust_text)
        else:
            ctx.load_default_certs()  # as Kafka falls back to the JVM's default trust store
        location = lookup("ssl.keystore.location")
        password = lookup("ssl.key.password") or lookup("ssl.keystore.password") or None
        if location:
            ctx.load_cert_chain(location, password=password)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"cannot load the inter-broker key or trust store: {e}") from None
    ctx.check_hostname = bool((lookup("ssl.endpoint.identification.algorithm") or "").strip())
    ctx.verify_mode = ssl.CERT_REQUIRED
    enabled = [p.strip() for p in (lookup("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",") if p.strip()]
    versions = [_PROTOCOLS[p] for p in enabled if p in _PROTOCOLS]
    if versions:
        ctx.minimum_version = min(versions)
        ctx.maximum_version = max(versions)
    return ctx


def inter_broker_security(config: BrokerConfig, listener: str) -> ClientSecurity:
    """The client security of connections to ``listener`` (the inter-broker listener)."""
    protocols = security_protocol_map(config.raw("listener.security.protocol.map")[0])
    protocol = protocols.get(listener.upper(), listener.upper())
    lookup = listener_lookup(config, listener)
    reloading: ReloadingContext | None = None
    ctx: ssl.SSLContext | None = None
    if protocol in ("SSL", "SASL_SSL"):
        paths = [p for p in (lookup("ssl.keystore.location"), lookup("ssl.truststore.location")) if p]
        reloading = ReloadingContext(lambda: client_context(lookup), paths, "inter-broker TLS")
        ctx = reloading.current()
    if not protocol.startswith("SASL_"):
        return ClientSecurity(protocol, ctx, reloading=reloading)
    mech = (config.raw("sasl.mechanism.inter.broker.protocol")[0] or "GSSAPI").strip().upper()
    if mech not in CLIENT_MECHANISMS:
        raise ConfigError(f"sasl.mechanism.inter.broker.protocol={mech}: brokers authenticate to each other with "
                          f"{', '.join(CLIENT_MECHANISMS)} only")
    jaas = lookup(f"{mech.lower()}.sasl.jaas.config") or lookup("sasl.jaas.config")
    if not jaas:
        raise ConfigError(f"the inter-broker listener {listener} uses {mech}: set listener.name.{listener.lower()}."
                          f"{mech.lower()}.sasl.jaas.config with username and password")
    options = parse_jaas(jaas).options
    if not options.get("username") or "password" not in options:
        raise ConfigError(f"listener.name.{listener.lower()}.{mech.lower()}.sasl.jaas.config needs username and "
                          "password options for the broker's own inter-broker connections")
    return ClientSecurity(protocol, ctx, mech, options["username"], options["password"], reloading)
