"""ACLs in the metadata store, in Kafka's ZooKeeper layout (ZkAclStore / ZkAclChangeStore)::

    /kafka-acl/<ResourceType>/<name>                      LITERAL patterns
    /kafka-acl-extended/prefixed/<ResourceType>/<name>    PREFIXED patterns
        {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}
    /kafka-acl-changes/acl_changes_<seq>                  "<ResourceType>:<name>" (a LITERAL pattern changed)
    /kafka-acl-extended-changes/acl_changes_<seq>         {"version":1,"resourceType":"Topic","name":"x",
                                                           "patternType":"Prefixed"}

Every broker loads them at start-up and again when a change notification appears (a watch on
the change paths), so an ACL created through any broker applies on all of them. Having read
them, it deletes the notifications older than 15 minutes (Kafka's ZkNodeChangeNotificationListener:
odradek.controller.change_notifications), so the change paths do not grow forever.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterable

from odradek.controller.change_notifications import CHANGE_EXPIRATION_MS, purge_obsolete
from odradek.controller.store import MetadataStore
from odradek.security.acl import (
    OPERATION_NAMES,
    PERMISSION_NAMES,
    RESOURCE_NAMES,
    AccessControlEntry,
    AclAuthorizer,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)

log = logging.getLogger("odradek.security")

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"

_TYPES = {v: k for k, v in RESOURCE_NAMES.items()}
_OPS = {v: k for k, v in OPERATION_NAMES.items()}
_PERMS = {v: k for k, v in PERMISSION_NAMES.items()}


def _path(p: ResourcePattern) -> str:
    root = PREFIXED_ROOT if p.pattern_type is PatternType.PREFIXED else LITERAL_ROOT
    return f"{root}/{RESOURCE_NAMES[p.resource_type]}/{p.name}"


def encode_entries(entries: Iterable[AccessControlEntry]) -> bytes:
    acls = [{"principal": e.principal, "permissionType": PERMISSION_NAMES[e.permission],
             "operation": OPERATION_NAMES[e.operation], "host": e.host}
            for e in sorted(entries, key=lambda e: (e.principal, e.host, e.operation, e.permission))]
    return json.dumps({"version": 1, "acls": acls}).encode()


def decode_entries(data: bytes) -> set[AccessControlEntry]:
    doc = json.loads(data or b"{}")
    out: set[AccessControlEntry] = set()
    for a in doc.get("acls", []) if isinstance(doc, dict) else []:
        try:
            out.add(AccessControlEntry(str(a["principal"]), str(a["host"]), AclOperation(_OPS[a["operation"]]),
                                       AclPermissionType(_PERMS[a["permissionType"]])))
        except (KeyError, TypeError, ValueError):
            log.warning("ignoring an ACL entry that cannot be read: %r", a)
    return out


class AclStore:
    """Reads and writes the authorizer's ACLs in the metadata store."""

    def __init__(self, store: MetadataStore, authorizer: AclAuthorizer, *,
                 change_expiration_ms: int = CHANGE_EXPIRATION_MS, clock: Callable[[], float] = time.time) -> None:
        self._store = store
        self.authorizer = authorizer
        self.change_expiration_ms = change_expiration_ms
        self._clock = clock

    def load(self) -> None:
        """Replace the authorizer's ACLs with the store's."""
        loaded: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for root, pattern_type in ((LITERAL_ROOT, PatternType.LITERAL), (PREFIXED_ROOT, PatternType.PREFIXED)):
            if self._store.exists(root) is None:
                continue
            for type_name in self._store.children(root):
                rtype = _TYPES.get(type_name)
                if rtype is None:
                    continue
                for name in self._store.children(f"{root}/{type_name}"):
                    pattern = ResourcePattern(ResourceType(rtype), name, pattern_type)
                    try:
                        data, _ = self._store.get(_path(pattern))
                        loaded[pattern] = decode_entries(data)
                    except Exception:  # a node deleted meanwhile, or unreadable: skip it
                        log.warning("could not read the ACLs of %s", _path(pattern), exc_info=True)
        for p in {b.pattern for b in self.authorizer.bindings()} - set(loaded):
            self.authorizer.set_entries(p, ())
        for p, entries in loaded.items():
            self.authorizer.set_entries(p, entries)

    def write(self, pattern: ResourcePattern, entries: set[AccessControlEntry]) -> None:
        """Store ``pattern``'s entries (deleting its node when none is left) and notify the brokers."""
        path = _path(pattern)
        if entries:
            data = encode_entries(entries)
            if self._store.exists(path) is None:
                self._store.create(path, data, makepath=True)
            else:
                self._store.set(path, data)
        elif self._store.exists(path) is not None:
            self._store.delete(path)
        self.authorizer.set_entries(pattern, entries)
        if pattern.pattern_type is PatternType.LITERAL:
            note = f"{RESOURCE_NAMES[pattern.resource_type]}:{pattern.name}".encode()
            self._store.create(f"{LITERAL_CHANGES}/acl_changes_", note, sequential=True, makepath=True)
        else:
            note = json.dumps({"version": 1, "resourceType": RESOURCE_NAMES[pattern.resource_type],
                               "name": pattern.name, "patternType": "Prefixed"}).encode()
            self._store.create(f"{EXTENDED_CHANGES}/acl_changes_", note, sequential=True, makepath=True)

    def watch(self, run_on_loop: Callable[[Callable[[], None]], object]) -> None:
        """Reload on every change notification (``run_on_loop`` moves the reload to the broker's loop)."""
        def changed(_path: str) -> None:
            run_on_loop(self._reload)

        for path in (LITERAL_CHANGES, EXTENDED_CHANGES):
            if self._store.exists(path) is None:
                with contextlib.suppress(Exception):  # created by another broker meanwhile
                    self._store.create(path, b"", makepath=True)
            self._store.watch(path, changed)

    def purge_notifications(self) -> list[str]:
        """Delete the change notifications older than ``change_expiration_ms``; returns their paths."""
        now = int(self._clock() * 1000)
        return [f"{root}/{name}" for root in (LITERAL_CHANGES, EXTENDED_CHANGES)
                for name in purge_obsolete(self._store, root, now, self.change_expiration_ms)]

    def _reload(self) -> None:
        try:
            self.load()
        except Exception:
            log.exception("reloading ACLs from the metadata store failed")
            return
        try:
            self.purge_notifications()
        except Exception:
            log.exception("purging ACL change notifications failed")
