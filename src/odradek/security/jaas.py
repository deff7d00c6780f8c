"""Kafka's JAAS configuration syntax, as ``sasl.jaas.config`` carries it::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";

A login module class, a control flag, then ``key=value`` options (values quoted with ``"`` or
bare), ended by ``;``. Only the first entry is used, as Kafka's JaasContext does for a
listener's property.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from odradek.config import ConfigError

_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"]+)|(=)|(;))')
_FLAGS = frozenset({"required", "requisite", "sufficient", "optional"})


@dataclass(frozen=True)
class JaasEntry:
    login_module: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)


def parse_jaas(text: str) -> JaasEntry:
    tokens: list[tuple[str, str]] = []  # (kind, value): q quoted, w word, = , ;
    pos = 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            if text[pos:].strip() == "":
                break
            raise ConfigError(f"sasl.jaas.config: cannot parse at {text[pos:pos + 20]!r}")
        pos = m.end()
        if m.group(1) is not None:
            tokens.append(("q", re.sub(r"\\(.)", r"\1", m.group(1))))
        elif m.group(2) is not None:
            tokens.append(("w", m.group(2)))
        elif m.group(3):
            tokens.append(("=", "="))
        else:
            tokens.append((";", ";"))
    if len(tokens) < 3 or tokens[0][0] != "w" or tokens[1][0] != "w" or tokens[1][1].lower() not in _FLAGS:
        raise ConfigError("sasl.jaas.config must start with a login module class and a control flag "
                          "(e.g. org.apache.kafka.common.security.plain.PlainLoginModule required)")
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != ";":
        if i + 2 >= len(tokens) + 0 or tokens[i][0] != "w" or tokens[i + 1][0] != "=" or tokens[i + 2][0] not in "qw":
            raise ConfigError(f"sasl.jaas.config: expected key=value near {tokens[i][1]!r}")
        options[tokens[i][1]] = tokens[i + 2][1]
        i += 3
    if i >= len(tokens):
        raise ConfigError("sasl.jaas.config: a JAAS entry ends with ';'")
    return JaasEntry(tokens[0][1], tokens[1][1].lower(), options)


def plain_users(entry: JaasEntry) -> dict[str, str]:
    """PlainLoginModule's users: option ``user_<name>="<password>"`` (Kafka's PlainServerCallbackHandler)."""
    return {k[len("user_"):]: v for k, v in entry.options.items() if k.startswith("user_")}
