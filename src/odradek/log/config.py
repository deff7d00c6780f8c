"""Per-topic log configuration (Kafka's topic-level log configs, Kafka's defaults).

Field names are Kafka's config names with dots turned into underscores
(``segment.bytes`` -> ``segment_bytes``). The class is frozen: derive a changed
config with :func:`dataclasses.replace` and hand it to ``Log.update_config``.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

MAX_LONG = 2**63 - 1

#: Kafka's config name -> LogConfig field name, for the config layer.
KAFKA_NAMES: dict[str, str] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.jitter.ms": "segment_jitter_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "cleanup.policy": "cleanup_policy",
    "file.delete.delay.ms": "file_delete_delay_ms",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "message.timestamp.type": "message_timestamp_type",
    "max.message.bytes": "max_message_bytes",
    "message.timestamp.before.max.ms": "message_timestamp_before_max_ms",
    "message.timestamp.after.max.ms": "message_timestamp_after_max_ms",
    "min.insync.replicas": "min_insync_replicas",
    "preallocate": "preallocate",
    "min.cleanable.dirty.ratio": "min_cleanable_dirty_ratio",
    "min.compaction.lag.ms": "min_compaction_lag_ms",
    "max.compaction.lag.ms": "max_compaction_lag_ms",
    "delete.retention.ms": "delete_retention_ms",
    "remote.storage.enable": "remote_storage_enable",
    "local.retention.ms": "local_retention_ms",
    "local.retention.bytes": "local_retention_bytes",
    "remote.log.copy.disable": "remote_log_copy_disable",
    "remote.log.delete.on.disable": "remote_log_delete_on_disable",
}


@dataclass(frozen=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000  # -1 = infinite
    retention_bytes: int = -1  # -1 = infinite
    cleanup_policy: str = "delete"  # "delete", "compact" or "compact,delete"
    file_delete_delay_ms: int = 60000
    flush_messages: int = MAX_LONG
    flush_ms: int = MAX_LONG
    message_timestamp_type: str = "CreateTime"  # or "LogAppendTime"
    max_message_bytes: int = 1048588
    message_timestamp_before_max_ms: int = MAX_LONG
    message_timestamp_after_max_ms: int = 3600000  # KIP-937 (Kafka 4.0)
    min_insync_replicas: int = 1
    preallocate: bool = False
    # compaction (odradek.log.cleaner)
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = MAX_LONG
    delete_retention_ms: int = 86400000
    # tiered storage (KIP-405): true only when the broker's remote.log.storage.system.enable is on too and the
    # topic is not internal (Kafka's UnifiedLog.remoteLogEnabled); -2: retention.ms / retention.bytes
    remote_storage_enable: bool = False
    local_retention_ms: int = -2
    local_retention_bytes: int = -2
    # KIP-950: the remote tier read-only, nothing more copied; local segments go by retention.* again
    remote_log_copy_disable: bool = False
    # KIP-950: turning remote.storage.enable off deletes the remote tier (the broker refuses it without this)
    remote_log_delete_on_disable: bool = False

    @property
    def remote_copy_enabled(self) -> bool:
        """Kafka's UnifiedLog.remoteLogEnabledAndRemoteCopyEnabled."""
        return self.remote_storage_enable and not self.remote_log_copy_disable

    @property
    def delete_enabled(self) -> bool:
        """True when cleanup.policy contains ``delete`` (time/size retention applies)."""
        return "delete" in _policies(self.cleanup_policy)

    @property
    def compact_enabled(self) -> bool:
        return "compact" in _policies(self.cleanup_policy)

    @property
    def local_retention_ms_effective(self) -> int:
        """Kafka's LogConfig.localRetentionMs: local.retention.ms, or retention.ms when it is -2."""
        return self.retention_ms if self.local_retention_ms == -2 else self.local_retention_ms

    @property
    def local_retention_bytes_effective(self) -> int:
        """Kafka's LogConfig.localRetentionBytes: local.retention.bytes, or retention.bytes when it is -2."""
        return self.retention_bytes if self.local_retention_bytes == -2 else self.local_retention_bytes

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def max_index_size(self) -> int:
        """segment.index.bytes; each index rounds it down to its own entry size."""
        return self.segment_index_bytes

    def replace(self, **changes: object) -> LogConfig:
        """``dataclasses.replace`` spelled as a method."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


@functools.cache
def _policies(policy: str) -> frozenset[str]:
    return frozenset(p.strip().lower() for p in policy.split(",") if p.strip())
