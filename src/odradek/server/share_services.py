"""Share groups (KIP-932) wired on the broker: the share groups' membership (coordinator.share.share_group), the
share coordinator over ``__share_group_state`` with its persister (coordinator.share_runtime) and the
share-partition manager (server.share_manager), with the broker's ``group.share.*`` configs and each group's
overrides (server.group_configs: ``share.session.timeout.ms``, ``share.heartbeat.interval.ms``,
``share.record.lock.duration.ms``, ``share.auto.offset.reset``, ``share.isolation.level``). The share groups'
records go to ``__consumer_offsets`` through the group coordinator's runtime (:meth:`ShareServices.flush`), which
replays them when it loads a partition."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from odradek.coordinator.group.coordinator import WriteError
from odradek.coordinator.share.share_group import ShareGroups, ShareGroupSettings
from odradek.coordinator.share.share_partition import AutoOffsetReset, SharePartitionConfig
from odradek.coordinator.share_runtime import (
    SHARE_GROUP_STATE_TOPIC,
    ShareCoordinatorRuntime,
    ShareStatePersister,
)
from odradek.log.fetch_isolation import CONSUMER_REPLICA_ID, FetchIsolation, IsolationLevel
from odradek.metrics.share_stats import LoadTimes, ShareGroupStats
from odradek.protocol import errors
from odradek.server import group_configs
from odradek.server.replica_manager import ANY_TOPIC
from odradek.server.share_manager import SharePartitionManager

if TYPE_CHECKING:
    from odradek.config import BrokerConfig
    from odradek.controller.topics import TopicRegistry
    from odradek.coordinator.runtime import GroupCoordinatorRuntime

log = logging.getLogger("odradek.share")

EXPIRY_CHECK_MS = 1000  # how often members' sessions are checked


class ShareServices:
    """What the share handlers use: ``groups`` (ShareGroupHeartbeat, ShareGroupDescribe, ListGroups,
    DeleteGroups), ``manager`` (ShareFetch, ShareAcknowledge), ``coordinator`` (the share-state RPCs)."""

    def __init__(
        self,
        config: BrokerConfig,
        topics: TopicRegistry,
        admin: Any,
        replica_manager: Any,
        log_manager: Any,
        now_ms: Callable[[], int],
        group_overrides: Callable[[str], Mapping[str, str]],
        group_runtime: GroupCoordinatorRuntime | None = None,
    ) -> None:
        self.config = config
        self.topics = topics
        self.group_overrides = group_overrides
        self.stats = ShareGroupStats()  # the share-partition manager's metrics
        self.coordinator_load_times = LoadTimes()  # share-coordinator-metrics partition-load-time
        self.coordinator = ShareCoordinatorRuntime(
            config, topics, admin, replica_manager, log_manager, now_ms, replica_manager.leader_epoch,
            load_times=self.coordinator_load_times)
        replica_manager.add_leadership_listener(SHARE_GROUP_STATE_TOPIC, self.coordinator.on_leadership)
        self.persister = ShareStatePersister(self.coordinator)
        self.manager = SharePartitionManager(
            replica_manager, self._topic_name, self.persister, now_ms, self.partition_config,
            max_sessions=int(config.get("group.share.max.share.sessions")),
            reset=self.auto_offset_reset, isolation=self.fetch_isolation, stats=self.stats,
        )
        replica_manager.add_leadership_listener(ANY_TOPIC, self.manager.on_leadership)
        self.groups = ShareGroups(
            now_ms, self._topic_lookup, self.group_settings, int(config.get("group.share.max.size")),
            on_member_removed=self.manager.member_removed,
        )
        self.group_runtime = group_runtime
        if group_runtime is not None:
            group_runtime.attach_share_groups(self.groups)
        self._timer: asyncio.TimerHandle | None = None

    def group_states(self) -> list[str]:
        """The state of each share group this broker coordinates (Kafka's group-coordinator-metrics
        share-group-count per state)."""
        return [g.state for g in self.groups.groups.values()]

    def flush(self) -> tuple[int, set[int]]:
        """Append the share groups' queued records to their ``__consumer_offsets`` partitions: (the first error
        of an append, NONE when all went, the partitions appended to, for the caller to wait for their
        replication). Without a group coordinator (tests of the parts) they are dropped."""
        pending = self.groups.drain_records()
        if self.group_runtime is None or not pending:
            return errors.NONE, set()
        by_group: dict[str, list[tuple[bytes, bytes | None]]] = {}
        for gid, rec in pending:
            by_group.setdefault(gid, []).append(rec)
        code, partitions = errors.NONE, set()
        for gid, records in by_group.items():
            try:
                partitions.add(self.group_runtime.write_records(gid, records))
            except WriteError as e:
                log.warning("could not write %d record(s) of share group %s: error %d", len(records), gid,
                            e.error_code)
                code = code or e.error_code
        return code, partitions

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        meta = self.topics.by_id.get(topic_id)
        return None if meta is None else meta.name

    def _topic_lookup(self, name: str) -> tuple[uuid.UUID, int] | None:
        meta = self.topics.get(name)
        return None if meta is None else (meta.topic_id, len(meta.partitions))

    def _effective(self, group_id: str) -> dict[str, int]:
        return group_configs.effective(self.group_overrides(group_id), self.config)

    def group_settings(self, group_id: str) -> ShareGroupSettings:
        v = self._effective(group_id)
        return ShareGroupSettings(v["share.session.timeout.ms"], v["share.heartbeat.interval.ms"])

    def auto_offset_reset(self, group_id: str) -> AutoOffsetReset:
        """The group's ``share.auto.offset.reset`` (validated when set; latest if it no longer parses)."""
        try:
            return AutoOffsetReset.parse(group_configs.effective_strings(self.group_overrides(group_id))
                                         ["share.auto.offset.reset"])
        except ValueError:
            return AutoOffsetReset()

    def fetch_isolation(self, group_id: str) -> FetchIsolation:
        """How far the group's share fetches read, from its ``share.isolation.level`` (a consumer's
        FetchIsolation: the last stable offset at read_committed, else the high watermark)."""
        level = group_configs.effective_strings(self.group_overrides(group_id))["share.isolation.level"]
        committed = level.lower() == "read_committed"
        return FetchIsolation.of(
            CONSUMER_REPLICA_ID, IsolationLevel.READ_COMMITTED if committed else IsolationLevel.READ_UNCOMMITTED)

    def partition_config(self, group_id: str) -> SharePartitionConfig:
        """The group's share-partition settings (its overrides, else the broker's), taken when a share-partition
        is created here: Kafka's GroupConfig share.delivery.count.limit, share.partition.max.record.locks and
        share.record.lock.duration.ms (the last is also read again at every ShareFetch)."""
        v = self._effective(group_id)
        return SharePartitionConfig(
            max_in_flight_records=v["share.partition.max.record.locks"],
            delivery_count_limit=v["share.delivery.count.limit"],
            record_lock_duration_ms=v["share.record.lock.duration.ms"],
        )

    def delete_group(self, group_id: str) -> int:
        """DeleteGroups of a share group: refused unless empty (NON_EMPTY_GROUP); the state of the share-partitions
        of the topics it last subscribed to is deleted from ``__share_group_state`` (DeleteShareGroupState, sent
        without waiting: the group is gone either way) and their share-partitions here are dropped."""
        group = self.groups.groups.get(group_id)
        topics = dict(group.topics) if group is not None else {}
        code = self.groups.delete_group(group_id)
        if code:
            return code
        self.flush()  # the group's tombstones
        for topic_id, count in topics.values():
            for p in range(count):
                self.manager.partitions.pop((group_id, topic_id, p), None)
                self.persister.delete_state(group_id, topic_id, p, lambda _r: None)
        return code

    def start(self) -> None:
        loop = asyncio.get_running_loop()

        def tick() -> None:
            if self.groups.expire_members():
                self.flush()
            self._timer = loop.call_later(EXPIRY_CHECK_MS / 1000.0, tick)

        self._timer = loop.call_later(EXPIRY_CHECK_MS / 1000.0, tick)

    def shutdown(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.manager.shutdown()
