"""``--command-config FILE`` of the admin commands: a Kafka client's properties file (Java client
names) turned into librdkafka settings for confluent-kafka's AdminClient.

Carried over: ``security.protocol``; ``sasl.mechanism`` with the user name and password of
``sasl.jaas.config`` (PlainLoginModule / ScramLoginModule); PEM stores: ``ssl.truststore.location``
→ ``ssl.ca.location``, ``ssl.keystore.location`` (key and certificate in one PEM) →
``ssl.certificate.location`` + ``ssl.key.location``, ``ssl.key.password``;
``ssl.endpoint.identification.algorithm`` (empty turns host name checking off). Other names are
passed through as they are (librdkafka names work too).

The same file gives Odradek's own blocking client (:class:`~odradek.client.wire.WireClient`, for the
requests confluent-kafka cannot send) its :class:`~odradek.security.inter_broker.ClientSecurity`
(:func:`client_security`): TLS with the trust store (else the system's CAs) and the key store as
client certificate, SASL PLAIN / SCRAM with the JAAS username and password.
"""

from __future__ import annotations

import ssl
from pathlib import Path

from odradek.config import ConfigError
from odradek.security.inter_broker import ClientSecurity
from odradek.security.jaas import parse_jaas


def read_properties(path: str | Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for raw in Path(path).read_text().splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        key, sep, value = line.partition("=")
        if not sep:
            key, _, value = line.partition(":")
        out[key.strip()] = value.strip()
    return out


def librdkafka_settings(props: dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in props.items():
        if key == "sasl.jaas.config":
            options = parse_jaas(value).options
            if "username" in options:
                out["sasl.username"] = options["username"]
            if "password" in options:
                out["sasl.password"] = options["password"]
        elif key == "ssl.truststore.location":
            out["ssl.ca.location"] = value
        elif key == "ssl.keystore.location":
            out["ssl.certificate.location"] = value
            out["ssl.key.location"] = value
        elif key == "ssl.endpoint.identification.algorithm":
            out["ssl.endpoint.identification.algorithm"] = value or "none"
        elif key in ("ssl.truststore.type", "ssl.keystore.type", "ssl.truststore.password", "ssl.keystore.password"):
            continue  # PEM stores need no type or store password in librdkafka
        else:
            out[key] = value
    return out


def admin_config(bootstrap: str, command_config: str | None) -> dict[str, str]:
    # librdkafka logs at level 6 (info) by default; a command-line tool, like Kafka's (log4j WARN),
    # prints warnings and errors only, so its own output on stderr is not interleaved with
    # messages such as "Purging 1 unserved events from background queue"
    conf = {"bootstrap.servers": bootstrap, "log_level": "4"}
    if command_config:
        conf.update(librdkafka_settings(read_properties(command_config)))
    return conf


def client_security(command_config: str | None) -> ClientSecurity | None:
    """The security of ``--command-config FILE`` for :class:`~odradek.client.wire.WireClient`
    (None: PLAINTEXT)."""
    if not command_config:
        return None
    props = read_properties(command_config)
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    ctx: ssl.SSLContext | None = None
    if protocol in ("SSL", "SASL_SSL"):
        ctx = ssl.create_default_context(cafile=props.get("ssl.truststore.location") or None)
        if props.get("ssl.endpoint.identification.algorithm", "https").strip() == "":
            ctx.check_hostname = False
        keystore = props.get("ssl.keystore.location")
        if keystore:
            ctx.load_cert_chain(keystore, password=props.get("ssl.key.password") or None)
    if not protocol.startswith("SASL_"):
        return ClientSecurity(protocol, ctx)
    options = parse_jaas(props["sasl.jaas.config"]).options if props.get("sasl.jaas.config") else {}
    user = options.get("username") or props.get("sasl.username")
    password = options.get("password") or props.get("sasl.password")
    if not user or password is None:
        raise ConfigError(f"{command_config}: SASL needs sasl.jaas.config with username and password")
    return ClientSecurity(protocol, ctx, props.get("sasl.mechanism", "GSSAPI").strip().upper(), user, password)
