"""Which ``Host`` headers the HTTP endpoint answers: its defence against DNS rebinding.

A page on ``http://evil.example`` that re-points its own name at 127.0.0.1 makes the browser send
requests to the broker's HTTP listener with ``Host: evil.example:<port>``; to the browser they are
same-origin, so the page reads the answers (and any token in them). Refusing every request whose
Host names something else than this broker closes that door, as Django's ALLOWED_HOSTS or Jupyter's
``allow_remote_access`` do:

* a literal IP address (v4, or v6 in brackets) is accepted: no DNS answer can stand behind it;
* ``localhost``, the machine's own host name, and the host names of ``listeners``,
  ``advertised.listeners`` and ``http.listeners`` are accepted;
* the names listed in ``http.allowed.hosts`` are accepted (a name the broker is reached by through a
  proxy or a DNS alias); ``*`` accepts any (turns the check off, for a broker behind a proxy that
  checks Host itself);
* anything else, or no Host header, is refused (421 Misdirected Request).

Names compare case-insensitively, without a trailing dot and without the port.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass


def host_name(header: str | None) -> str | None:
    """The host of a ``Host`` header value without its port (brackets kept off an IPv6 literal);
    None when absent or malformed."""
    if header is None:
        return None
    h = header.strip()
    if not h or any(c in h for c in " \t/\\@?#"):
        return None
    if h.startswith("["):
        end = h.find("]")
        if end < 0 or (end + 1 < len(h) and not h[end + 1:].startswith(":")):
            return None
        return h[1:end].lower()
    name, _, port = h.partition(":")
    if port and not port.isdigit():
        return None
    return name.rstrip(".").lower() or None


def is_ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class HostPolicy:
    names: frozenset[str]
    any_host: bool = False

    def allows(self, header: str | None) -> bool:
        name = host_name(header)
        if name is None:
            return False
        return self.any_host or is_ip_literal(name) or name in self.names


def host_policy(listener_hosts: Iterable[str], allowed: Iterable[str]) -> HostPolicy:
    """The policy for a broker whose listeners are on ``listener_hosts`` and whose
    ``http.allowed.hosts`` lists ``allowed``."""
    extra = [a.strip().rstrip(".").lower() for a in allowed if a.strip()]
    names = {"localhost", socket.gethostname().lower()}
    names.update(h.strip().rstrip(".").lower() for h in listener_hosts if h.strip())
    names.update(e for e in extra if e != "*")
    return HostPolicy(frozenset(n for n in names if n), any_host="*" in extra)
