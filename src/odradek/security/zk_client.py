"""How a broker authenticates to ZooKeeper, and the ACLs its znodes get (Kafka's ZooKeeper mode).

SASL: Kafka's ZooKeeper client reads the JAAS file named by the JVM system property
``java.security.auth.login.config`` and logs in with its ``Client`` section (another section with
``zookeeper.sasl.clientconfig``; none at all with ``zookeeper.sasl.client=false``). With no JVM, the
same names are read from the broker's settings, or as ``-D<name>=<value>`` words of the
``KAFKA_OPTS`` environment variable (where kafka-server-start.sh users put them); a broker setting
wins. The section's login module is ZooKeeper's ``DigestLoginModule`` (SASL DIGEST-MD5, what
ZooKeeper's SASLAuthenticationProvider checks against its own ``Server`` section)::

    Client {
        org.apache.zookeeper.server.auth.DigestLoginModule required
        username="kafka"
        password="kafka-secret";
    };

Kerberos (``Krb5LoginModule``, SASL GSSAPI) is not built: such a section is refused at start-up.

ACLs: with ``zookeeper.set.acl=true`` every znode the broker creates gets Kafka's
``ZkData.defaultAcls`` (odradek.controller.zk_data.default_acls). Kafka refuses
``zookeeper.set.acl=true`` without a secure ZooKeeper client (KafkaServer.initZkClient): so does
this module.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from odradek.config import ConfigError
from odradek.security.jaas import JaasEntry, parse_jaas

LOGIN_CONFIG = "java.security.auth.login.config"
SASL_CLIENT = "zookeeper.sasl.client"
SASL_CLIENT_CONFIG = "zookeeper.sasl.clientconfig"
DEFAULT_CLIENT_SECTION = "Client"
DIGEST_LOGIN_MODULE = "org.apache.zookeeper.server.auth.DigestLoginModule"

# -- JAAS files

_COMMENTS = re.compile(r'("(?:[^"\\]|\\.)*")|//[^\n]*|/\*.*?\*/', re.S)
_SECTION = re.compile(r'\s*([A-Za-z0-9_.\-]+)\s*\{((?:[^"}]|"(?:[^"\\]|\\.)*")*)\}\s*;?', re.S)
_ENTRY_END = re.compile(r'((?:[^";]|"(?:[^"\\]|\\.)*")*;)', re.S)


def parse_jaas_file(text: str) -> dict[str, list[JaasEntry]]:
    """A JAAS login configuration file: ``Name { module flag key=value ...; ... };`` sections."""
    text = _COMMENTS.sub(lambda m: m.group(1) or " ", text)
    sections: dict[str, list[JaasEntry]] = {}
    pos = 0
    while text[pos:].strip():
        m = _SECTION.match(text, pos)
        if m is None:
            raise ConfigError(f"JAAS file: cannot parse at {text[pos:].strip()[:30]!r}")
        entries = [parse_jaas(e) for e in _ENTRY_END.findall(m.group(2)) if e.strip(" \t\r\n;")]
        if not entries:
            raise ConfigError(f"JAAS file: section {m.group(1)} has no login module")
        sections[m.group(1)] = entries
        pos = m.end()
    return sections


def system_properties(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``-Dname=value`` words of ``KAFKA_OPTS`` (as the JVM would get them from kafka-run-class.sh)."""
    out: dict[str, str] = {}
    try:
        words = shlex.split(environ.get("KAFKA_OPTS", ""))
    except ValueError as e:
        raise ConfigError(f"KAFKA_OPTS cannot be split into words: {e}") from None
    for w in words:
        if w.startswith("-D") and "=" in w:
            name, value = w[2:].split("=", 1)
            out[name] = value
    return out


# -- what the broker's ZooKeeper client does

@dataclass(frozen=True)
class ZkClientSecurity:
    """The broker's ZooKeeper client: its SASL login (None: unauthenticated) and whether its
    znodes get Kafka's secure ACLs."""

    username: str | None = None
    password: str | None = None
    jaas_file: str | None = None
    section: str = DEFAULT_CLIENT_SECTION
    set_acl: bool = False

    @property
    def sasl(self) -> bool:
        return self.username is not None

    def sasl_options(self) -> dict[str, str] | None:
        """kazoo's ``sasl_options`` (pure-sasl's DIGEST-MD5 client)."""
        if self.username is None:
            return None
        return {"mechanism": "DIGEST-MD5", "username": self.username, "password": self.password or ""}

    def describe(self) -> str:
        return f"user {self.username!r} (DIGEST-MD5, section {self.section} of {self.jaas_file})"


def _truthy(v: str | None, default: bool) -> bool:
    if v is None or v == "":
        return default
    return v.strip().lower() == "true"


def zk_client_security(settings: Mapping[str, str | None], environ: Mapping[str, str] | None = None,
                       *, set_acl: bool = False) -> ZkClientSecurity:
    """Read the login from the broker's settings and ``KAFKA_OPTS`` (ConfigError when it cannot be used)."""
    props = system_properties(os.environ if environ is None else environ)

    def prop(name: str) -> str | None:
        v = settings.get(name)
        return v if v not in (None, "") else props.get(name)

    jaas_file = prop(LOGIN_CONFIG)
    section = prop(SASL_CLIENT_CONFIG) or DEFAULT_CLIENT_SECTION
    entry: JaasEntry | None = None
    if jaas_file and _truthy(prop(SASL_CLIENT), True):
        try:
            text = Path(jaas_file).read_text(encoding="utf-8")
        except OSError as e:
            raise ConfigError(f"{LOGIN_CONFIG}: cannot read {jaas_file}: {e}") from None
        entries = parse_jaas_file(text).get(section)
        if entries:
            entry = entries[0]
    if entry is None:
        if set_acl:
            # KafkaServer.initZkClient's SecurityException
            raise ConfigError(
                f"zookeeper.set.acl is true, but the ZooKeeper client has no SASL login: {LOGIN_CONFIG} "
                f"must name a JAAS file with a {section} section")
        return ZkClientSecurity(section=section)
    if entry.login_module != DIGEST_LOGIN_MODULE:
        raise ConfigError(f"{jaas_file}, section {section}: login module {entry.login_module} is not implemented "
                          f"(ZooKeeper SASL uses {DIGEST_LOGIN_MODULE}, DIGEST-MD5)")
    username = entry.options.get("username")
    if not username or "password" not in entry.options:
        raise ConfigError(f"{jaas_file}, section {section}: DigestLoginModule needs username and password")
    return ZkClientSecurity(username, entry.options["password"], jaas_file, section, set_acl)
