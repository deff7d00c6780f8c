"""Who an HTTP request of the console is: HTTP Basic checked against the broker's SASL credentials.

* no ``Authorization`` header: ``User:ANONYMOUS`` (as a Kafka client on a PLAINTEXT listener);
* ``Basic user:password``: ``User:<user>`` when the password matches the SASL/PLAIN users of a
  listener's JAAS config (``user_<name>="<password>"``) or the user's SCRAM-SHA-256/512 credential
  (salted with its salt and iterations and compared with its stored key, RFC 5802); refused (401)
  otherwise — a wrong password never falls back to anonymous.
"""

from __future__ import annotations

import base64
import binascii
import hmac
from collections.abc import Callable, Mapping

from odradek.security.scram import MECHANISMS, ScramCredential, salted_password

ANONYMOUS = "User:ANONYMOUS"

ScramLookup = Callable[[str, str], "ScramCredential | None"]


def parse_basic(header: str | None) -> tuple[str, str] | None:
    """``Basic base64(user:password)`` -> (user, password); None when absent or malformed."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic" or not token:
        return None
    try:
        raw = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    user, sep, password = raw.partition(":")
    if not sep or not user:
        return None
    return user, password


def scram_matches(credential: ScramCredential, mechanism: str, password: str) -> bool:
    h = MECHANISMS[mechanism]
    salted = salted_password(mechanism, password.encode(), credential.salt, credential.iterations)
    client_key = hmac.new(salted, b"Client Key", h).digest()
    return hmac.compare_digest(h(client_key).digest(), credential.stored_key)


class CredentialCheck:
    """Checks a user's password against PLAIN users and SCRAM credentials (may block on the
    metadata store: call it off the event loop)."""

    def __init__(self, plain_users: Mapping[str, str], scram: ScramLookup | None) -> None:
        self.plain_users = dict(plain_users)
        self.scram = scram

    def verify(self, user: str, password: str) -> bool:
        expected = self.plain_users.get(user)
        if expected is not None and hmac.compare_digest(expected.encode(), password.encode()):
            return True
        if self.scram is not None:
            for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                cred = self.scram(user, mechanism)
                if cred is not None and scram_matches(cred, mechanism, password):
                    return True
        return False


