"""The broker's copy of the finalized features (Kafka's FinalizedFeatureCache, ZooKeeper mode):
read from the ``/feature`` znode (layout in controller.features) at start-up and again on every
change of it. The finalized epoch is the znode's version; -1 while there is no znode.

Gates read :meth:`FinalizedFeatureCache.level`; ApiVersions v3+ reports :meth:`snapshot`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from odradek.controller import features as ft
from odradek.controller.store import MetadataStore, NoNodeError, StoreError

log = logging.getLogger("odradek.features")


class FinalizedFeatureCache:
    def __init__(self, supported: dict[str, tuple[int, int]] | None = None) -> None:
        self.supported = dict(ft.SUPPORTED if supported is None else supported)
        self.finalized: dict[str, int] = {}
        self.epoch = -1
        self.listeners: list[Callable[[dict[str, int]], None]] = []

    def level(self, feature: str) -> int:
        """The finalized level of ``feature`` (0 when it is not finalized)."""
        return self.finalized.get(feature, 0)

    def snapshot(self) -> tuple[dict[str, int], int]:
        return dict(self.finalized), self.epoch

    def update(self, finalized: dict[str, int], epoch: int) -> None:
        if epoch < self.epoch:
            return  # a stale read
        bad = ft.incompatibilities(finalized, self.supported)
        if bad:
            # Kafka's broker shuts down here; a running broker keeps serving what it can and says why
            log.error("finalized features incompatible with this broker: %s", "; ".join(bad))
        changed = finalized != self.finalized
        self.finalized, self.epoch = dict(finalized), epoch
        if changed:
            log.info("finalized features (epoch %d): %s", epoch, finalized)
            for cb in list(self.listeners):
                cb(dict(finalized))

    @staticmethod
    def read(store: MetadataStore) -> tuple[dict[str, int], int] | None:
        """(finalized, epoch) from /feature (blocking on ZooKeeper in cluster mode); None when
        there is no znode yet or it cannot be read."""
        try:
            data, version = store.get(ft.FEATURE_ZNODE)
        except NoNodeError:
            return None
        except StoreError as e:
            log.warning("reading %s failed: %s", ft.FEATURE_ZNODE, e)
            return None
        try:
            return ft.decode_znode(data), version
        except ValueError as e:
            log.error("ignoring %s: %s", ft.FEATURE_ZNODE, e)
            return None
