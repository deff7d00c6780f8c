"""Purging change notifications, as Kafka's ZkNodeChangeNotificationListener does.

Kafka announces changes with sequential znodes under a notification path
(``/kafka-acl-changes/acl_changes_<seq>``, ``/kafka-acl-extended-changes/acl_changes_<seq>``,
``/config/changes/config_change_<seq>``). Every broker that reads them also deletes those older
than ``changeExpirationMs`` (15 minutes; by the znode's creation time, ``ctime``), so that the
paths do not grow forever: any broker may delete any notification, and a notification another
broker deleted meanwhile is simply gone.

The store gives a node's creation time through ``ctime_ms(path)`` (ZkStore: the znode's ctime;
LocalStore: the time it created the node); a store without it is never purged.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Mapping

from odradek.controller.store import MetadataStore, StoreError

log = logging.getLogger("odradek.controller")

CHANGE_EXPIRATION_MS = 15 * 60 * 1000  # ZkNodeChangeNotificationListener's changeExpirationMs


def obsolete(created_ms: Mapping[str, int], now_ms: int, expiration_ms: int = CHANGE_EXPIRATION_MS) -> list[str]:
    """The notifications (name → ctime) older than ``expiration_ms`` at ``now_ms``, in sequence order."""
    return sorted(name for name, ctime in created_ms.items() if now_ms - ctime > expiration_ms)


def purge_obsolete(store: MetadataStore, root: str, now_ms: int,
                   expiration_ms: int = CHANGE_EXPIRATION_MS) -> list[str]:
    """Delete the notifications under ``root`` older than ``expiration_ms``; returns the names deleted."""
    ctime_of: Callable[[str], int | None] | None = getattr(store, "ctime_ms", None)
    if ctime_of is None:
        return []
    try:
        names = store.children(root)
    except StoreError:
        return []
    created: dict[str, int] = {}
    for name in names:
        with contextlib.suppress(StoreError):  # deleted meanwhile by another broker
            ctime = ctime_of(f"{root}/{name}")
            if ctime is not None:
                created[name] = ctime
    deleted = []
    for name in obsolete(created, now_ms, expiration_ms):
        try:
            store.delete(f"{root}/{name}")
            deleted.append(name)
        except StoreError:  # another broker purged it first, or ZooKeeper is away: next time
            pass
    if deleted:
        log.debug("purged %d change notification(s) under %s", len(deleted), root)
    return deleted
