"""SCRAM credentials as Kafka stores them (ScramCredentialUtils) and the server side of the
exchange (RFC 5802 / RFC 7677), in odradek.security.sasl.

A user's credentials live in the metadata store at ``/config/users/<user>`` (Kafka's ZooKeeper
layout)::

    {"version":1,"config":{"SCRAM-SHA-256":"salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=4096"}}
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
from collections.abc import Callable
from dataclasses import dataclass

MECHANISMS = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}
# Kafka's ScramMechanism min/max iterations
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
# the mechanism numbers of Describe/AlterUserScramCredentials (KIP-554)
MECHANISM_TYPES = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}
MECHANISM_NUMBERS = {v: k for k, v in MECHANISM_TYPES.items()}


@dataclass(frozen=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    def format(self) -> str:
        b = base64.b64encode
        return (f"salt={b(self.salt).decode()},stored_key={b(self.stored_key).decode()},"
                f"server_key={b(self.server_key).decode()},iterations={self.iterations}")

    @classmethod
    def parse(cls, text: str) -> ScramCredential:
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        return cls(
            base64.b64decode(fields["salt"]),
            base64.b64decode(fields["stored_key"]),
            base64.b64decode(fields["server_key"]),
            int(fields["iterations"]),
        )


def salted_password(mechanism: str, password: bytes, salt: bytes, iterations: int) -> bytes:
    h = MECHANISMS[mechanism]
    return hashlib.pbkdf2_hmac(h().name, password, salt, iterations)


def credential_from_salted(mechanism: str, salted: bytes, salt: bytes, iterations: int) -> ScramCredential:
    """stored_key = H(HMAC(salted, "Client Key")), server_key = HMAC(salted, "Server Key") (RFC 5802)."""
    h = MECHANISMS[mechanism]
    client_key = hmac.new(salted, b"Client Key", h).digest()
    server_key = hmac.new(salted, b"Server Key", h).digest()
    return ScramCredential(salt, h(client_key).digest(), server_key, iterations)


def make_credential(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                    salt: bytes | None = None) -> ScramCredential:
    salt = salt if salt is not None else os.urandom(32)
    return credential_from_salted(mechanism, salted_password(mechanism, password.encode(), salt, iterations),
                                  salt, iterations)


CredentialLookup = Callable[[str, str], "ScramCredential | None"]  # (user, mechanism) -> credential


def decode_saslname(name: str) -> str:
    """RFC 5802's saslname: ``=2C`` is ``,`` and ``=3D`` is ``=``."""
    return name.replace("=2C", ",").replace("=3D", "=")
