"""SCRAM credentials in the metadata store, where Kafka's ZooKeeper mode keeps them::

    /config/users/<user>   {"version":1,"config":{"SCRAM-SHA-256":"salt=...,stored_key=...,server_key=...,iterations=4096"}}

Read at each authentication (a change made on any broker applies at once); written by
AlterUserScramCredentials (KIP-554) and ``odradek configs --entity-type users``.
"""

from __future__ import annotations

import json

from odradek.controller.store import MetadataStore
from odradek.security.scram import MECHANISMS, ScramCredential

USERS_PATH = "/config/users"


class ScramCredentialStore:
    def __init__(self, store: MetadataStore) -> None:
        self._store = store

    def _configs(self, user: str) -> dict[str, str]:
        if self._store.exists(f"{USERS_PATH}/{user}") is None:
            return {}
        data, _ = self._store.get(f"{USERS_PATH}/{user}")
        try:
            doc = json.loads(data or b"{}")
        except ValueError:
            return {}
        config = doc.get("config") if isinstance(doc, dict) else None
        return {str(k): str(v) for k, v in config.items()} if isinstance(config, dict) else {}

    def lookup(self, user: str, mechanism: str) -> ScramCredential | None:
        raw = self._configs(user).get(mechanism)
        if raw is None:
            return None
        try:
            return ScramCredential.parse(raw)
        except (KeyError, ValueError):
            return None

    def users(self) -> list[str]:
        if self._store.exists(USERS_PATH) is None:
            return []
        return sorted(self._store.children(USERS_PATH))

    def describe(self, user: str) -> dict[str, int]:
        """mechanism -> iterations of ``user``'s credentials."""
        out: dict[str, int] = {}
        for mech, raw in self._configs(user).items():
            if mech in MECHANISMS:
                try:
                    out[mech] = ScramCredential.parse(raw).iterations
                except (KeyError, ValueError):
                    continue
        return out

    def _write(self, user: str, configs: dict[str, str]) -> None:
        path = f"{USERS_PATH}/{user}"
        data = json.dumps({"version": 1, "config": configs}).encode()
        if self._store.exists(path) is None:
            self._store.create(path, data, makepath=True)
        else:
            self._store.set(path, data)

    def upsert(self, user: str, mechanism: str, credential: ScramCredential) -> None:
        configs = self._configs(user)
        configs[mechanism] = credential.format()
        self._write(user, configs)

    def delete(self, user: str, mechanism: str) -> bool:
        configs = self._configs(user)
        if mechanism not in configs:
            return False
        del configs[mechanism]
        self._write(user, configs)
        return True
