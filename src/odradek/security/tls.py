"""TLS settings of a listener (Kafka's SslFactory / DefaultSslEngineFactory, PEM stores only)
and the principal of a client certificate (Kafka's DefaultKafkaPrincipalBuilder with
``ssl.principal.mapping.rules``, KIP-371).

Settings, each looked up first as ``listener.name.<listener>.<name>`` then as ``<name>``:

- ``ssl.keystore.type`` = PEM; ``ssl.keystore.location`` (private key and certificate chain in
  one PEM file) or ``ssl.keystore.certificate.chain`` + ``ssl.keystore.key`` (PEM text);
  ``ssl.key.password`` for an encrypted key.
- ``ssl.truststore.type`` = PEM; ``ssl.truststore.location`` (CA certificates, PEM file) or
  ``ssl.truststore.certificates`` (PEM text).
- ``ssl.client.auth``: ``none`` | ``requested`` | ``required``.
- ``ssl.enabled.protocols`` (``TLSv1.2,TLSv1.3``), ``ssl.cipher.suites`` (OpenSSL names for
  TLS 1.2 suites; TLS 1.3 suites are OpenSSL's defaults).

A key store whose certificate is expired (or not yet valid) is refused when the context is built
(:class:`ConfigError` naming the setting, the file and the date), so a broker does not start to
serve a certificate every client will refuse. Client-initiated renegotiation is refused by
OpenSSL 3's default (SSL_OP_ALLOW_CLIENT_RENEGOTIATION unset), as Kafka's SslTransportLayer
refuses it.

:class:`ReloadingServerContext` rebuilds the context when the key store or trust store file
changes (checked at most once a second, when a connection arrives): renewed certificates are
served to new connections without a restart; a file that cannot be loaded keeps the old context.
"""

from __future__ import annotations

import _ssl
import logging
import os
import re
import ssl
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass

from odradek.config import ConfigError

Lookup = Callable[[str], "str | None"]

ANONYMOUS = "User:ANONYMOUS"
log = logging.getLogger("odradek.security")

_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}

# attribute names X500Principal.getName(RFC2253) uses, by the names Python's getpeercert gives
_RDN_KEYS = {
    "commonName": "CN",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}


def _store_type(lookup: Lookup, name: str) -> None:
    t = (lookup(name) or "PEM").strip().upper()
    if t != "PEM":
        raise ConfigError(f"{name}={t}: odradek reads PEM key and trust stores only (ssl.keystore.type=PEM)")


def check_certificate_dates(path: str, setting: str, now_s: float) -> None:
    """ConfigError when the first certificate of the PEM file at ``path`` (a key store's own
    certificate comes first in its chain) is expired or not yet valid at ``now_s`` (epoch seconds).
    A file with no readable certificate is left to ``load_cert_chain`` to report."""
    decode = getattr(_ssl, "_test_decode_cert", None)  # CPython's PEM certificate decoder
    if decode is None:  # pragma: no cover - every CPython has it
        return
    try:
        cert = decode(path)
        not_before = ssl.cert_time_to_seconds(cert["notBefore"])
        not_after = ssl.cert_time_to_seconds(cert["notAfter"])
    except (OSError, ssl.SSLError, ValueError, KeyError):
        return
    subject = distinguished_name(cert)
    if now_s > not_after:
        raise ConfigError(f"{setting} {path}: the certificate {subject} expired on {cert['notAfter']}")
    if now_s < not_before:
        raise ConfigError(f"{setting} {path}: the certificate {subject} is not valid before {cert['notBefore']}")


def server_context(lookup: Lookup, wall_clock: Callable[[], float] = time.time) -> ssl.SSLContext:
    """The server-side SSLContext of a listener from its settings; ConfigError when unusable
    (``wall_clock`` dates the key store's certificate)."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _store_type(lookup, "ssl.keystore.type")
    _store_type(lookup, "ssl.truststore.type")
    password = lookup("ssl.key.password") or lookup("ssl.keystore.password") or None
    location = lookup("ssl.keystore.location")
    chain = lookup("ssl.keystore.certificate.chain")
    key = lookup("ssl.keystore.key")
    try:
        if location:
            ctx.load_cert_chain(location, password=password)
            check_certificate_dates(location, "ssl.keystore.location", wall_clock())
        elif chain and key:
            _load_inline_chain(ctx, chain, key, password, wall_clock())
        else:
            raise ConfigError("an SSL listener needs ssl.keystore.location (PEM key and certificate chain) or "
                              "ssl.keystore.certificate.chain and ssl.keystore.key")
        trust = lookup("ssl.truststore.location")
        trust_text = lookup("ssl.truststore.certificates")
        if trust:
            ctx.load_verify_locations(cafile=trust)
        elif trust_text:
            ctx.load_verify_locations(cadata=trust_text)
    except (OSError, ssl.SSLError) as e:
        raise ConfigError(f"cannot load the listener's key or trust store: {e}") from None
    auth = (lookup("ssl.client.auth") or "none").strip().lower()
    modes = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}
    if auth not in modes:
        raise ConfigError(f"Invalid value {auth} for configuration ssl.client.auth: one of none, requested, required")
    if auth != "none" and not (trust or trust_text):
        raise ConfigError(f"ssl.client.auth={auth} needs a truststore (ssl.truststore.location)")
    ctx.verify_mode = modes[auth]
    enabled = [p.strip() for p in (lookup("ssl.enabled.protocols") or "TLSv1.2,TLSv1.3").split(",") if p.strip()]
    versions = [_PROTOCOLS[p] for p in enabled if p in _PROTOCOLS]
    if not versions:
        raise ConfigError(f"ssl.enabled.protocols={','.join(enabled)}: none of TLSv1.2, TLSv1.3")
    ctx.minimum_version = min(versions)
    ctx.maximum_version = max(versions)
    ciphers = lookup("ssl.cipher.suites")
    if ciphers:
        try:
            ctx.set_ciphers(":".join(c.strip() for c in ciphers.split(",") if c.strip()))
        except ssl.SSLError:
            raise ConfigError(f"ssl.cipher.suites={ciphers}: no cipher suite OpenSSL knows") from None
    ctx.options |= ssl.OP_NO_COMPRESSION
    return ctx


class ReloadingContext:
    """An SSLContext rebuilt by ``build`` when the PEM files at ``paths`` change on disk (checked at
    most once every CHECK_INTERVAL_S, when the context is asked for). A change that cannot be
    loaded keeps the previous context, with an error in the log."""

    CHECK_INTERVAL_S = 1.0

    def __init__(self, build: Callable[[], ssl.SSLContext], paths: list[str], what: str,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._build = build
        self._clock = clock
        self._what = what
        self._paths = paths
        self._stamp = self._stat()
        self._context = build()
        self._next_check = clock() + self.CHECK_INTERVAL_S

    def _stat(self) -> tuple[tuple[str, int, int], ...]:
        out = []
        for p in self._paths:
            try:
                st = os.stat(p)
                out.append((p, st.st_mtime_ns, st.st_size))
            except OSError:
                out.append((p, -1, -1))
        return tuple(out)

    def current(self) -> ssl.SSLContext:
        now = self._clock()
        if self._paths and now >= self._next_check:
            self._next_check = now + self.CHECK_INTERVAL_S
            stamp = self._stat()
            if stamp != self._stamp:
                self._stamp = stamp
                try:
                    self._context = self._build()
                    log.info("reloaded the %s key and trust stores (%s)", self._what, ", ".join(self._paths))
                except ConfigError as e:
                    log.error("the changed %s key or trust store cannot be loaded; using the previous ones: %s",
                              self._what, e)
        return self._context


class ReloadingServerContext(ReloadingContext):
    """A listener's server context, rebuilt when its PEM files change on disk."""

    def __init__(self, lookup: Lookup, clock: Callable[[], float] = time.monotonic) -> None:
        paths = [p for p in (lookup("ssl.keystore.location"), lookup("ssl.truststore.location")) if p]
        super().__init__(lambda: server_context(lookup), paths, "TLS", clock)


def _load_inline_chain(ctx: ssl.SSLContext, chain: str, key: str, password: str | None, now_s: float) -> None:
    """load_cert_chain reads files only: the PEM text goes through a private temporary file."""
    fd, path = tempfile.mkstemp(prefix="odradek-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        ctx.load_cert_chain(path, password=password)
        try:
            check_certificate_dates(path, "ssl.keystore.certificate.chain", now_s)
        except ConfigError as e:  # name the setting, not the temporary file
            raise ConfigError(str(e).replace(f" {path}:", ":")) from None
    finally:
        os.unlink(path)


def _escape(value: str) -> str:
    out = re.sub(r'([,+"\\<>;=])', r"\\\1", value)
    if out.startswith((" ", "#")):
        out = "\\" + out
    if out.endswith(" ") and not out.endswith("\\ "):
        out = out[:-1] + "\\ "
    return out


def distinguished_name(peercert: dict[str, object]) -> str:
    """The subject of ``ssl.SSLObject.getpeercert()`` as X500Principal.getName() gives it
    (RFC 2253: most specific attribute first, ``CN=client,OU=eng,O=example,C=US``)."""
    subject = peercert.get("subject") or ()
    rdns: list[str] = []
    for rdn in subject:  # type: ignore[attr-defined]
        parts = []
        for name, value in rdn:
            key = _RDN_KEYS.get(name, name)
            parts.append(f"{key}={_escape(str(value))}")
        rdns.append("+".join(parts))
    return ",".join(reversed(rdns))


@dataclass(frozen=True)
class _Rule:
    pattern: re.Pattern[str] | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""  # "L" lower, "U" upper, "" as is


_RULE_RE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU]?))\s*(?:,|$)")


def parse_mapping_rules(raw: str | None) -> list[_Rule]:
    """``ssl.principal.mapping.rules`` (KIP-371): ``RULE:pattern/replacement/[LU]`` and ``DEFAULT``, in order."""
    text = (raw or "DEFAULT").strip()
    rules: list[_Rule] = []
    pos = 0
    while pos < len(text):
        m = _RULE_RE.match(text, pos)
        if m is None or m.end() == pos:
            raise ConfigError(f"Invalid rule in ssl.principal.mapping.rules at {text[pos:]!r}")
        if m.group(1):
            rules.append(_Rule(None))
        else:
            try:
                pattern = re.compile(m.group(2).replace("\\/", "/"))
            except re.error as e:
                raise ConfigError(f"Invalid pattern in ssl.principal.mapping.rules: {e}") from None
            replacement = re.sub(r"\$(\d)", r"\\\1", m.group(3).replace("\\/", "/"))
            rules.append(_Rule(pattern, replacement, m.group(4)))
        pos = m.end()
    return rules


def map_principal(dn: str, rules: list[_Rule]) -> str:
    """The user name a certificate's DN maps to (Kafka's SslPrincipalMapper): the first rule
    whose pattern matches the whole DN; DEFAULT keeps the DN; no match keeps the DN too."""
    for rule in rules:
        if rule.pattern is None:
            return dn
        m = rule.pattern.fullmatch(dn)
        if m is None:
            continue
        name = m.expand(rule.replacement)
        if rule.case == "L":
            name = name.lower()
        elif rule.case == "U":
            name = name.upper()
        return name
    return dn


def certificate_principal(peercert: dict[str, object] | None, rules: list[_Rule]) -> str:
    """``User:<mapped DN>`` for a verified client certificate, ``User:ANONYMOUS`` without one."""
    if not peercert:
        return ANONYMOUS
    return "User:" + map_principal(distinguished_name(peercert), rules)
