"""Broker and topic configuration: Kafka's names, types, defaults and synonyms.

A topic's effective value of a config is, in order: the topic's own override, the
dynamic per-broker value, the dynamic cluster-wide broker default, the static broker
value (server.properties / --override), the default. Topic configs name their broker
synonyms exactly as Kafka does (``retention.ms`` ← ``log.retention.ms`` ←
``log.retention.minutes`` ← ``log.retention.hours``).
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from odradek import config_kafka as _kafka

LONG_MAX = 2**63 - 1

_log = logging.getLogger("odradek.config")

# DescribeConfigs config_type numbers
T_BOOLEAN, T_STRING, T_INT, T_SHORT, T_LONG, T_DOUBLE, T_LIST, T_CLASS, T_PASSWORD = range(1, 10)

# DescribeConfigs config_source numbers
SRC_DYNAMIC_TOPIC = 1
SRC_DYNAMIC_BROKER = 2
SRC_DYNAMIC_DEFAULT_BROKER = 3
SRC_STATIC_BROKER = 4
SRC_DEFAULT = 5


class ConfigError(ValueError):
    pass


# Kafka's dynamic update modes of a broker config (the "Update Mode" column of Kafka's broker config
# reference): read-only needs a restart; per-broker may be changed for one broker at run time
# (/config/brokers/<id>); cluster-wide also as the cluster's default (/config/brokers/<default>).
READ_ONLY = "read-only"
PER_BROKER = "per-broker"
CLUSTER_WIDE = "cluster-wide"
# a topic config is always dynamic, per topic (/config/topics/<topic>)
PER_TOPIC = "per-topic"

_TYPE_NAMES = {T_BOOLEAN: "boolean", T_STRING: "string", T_INT: "int", T_SHORT: "short", T_LONG: "long",
               T_DOUBLE: "double", T_LIST: "list", T_CLASS: "class", T_PASSWORD: "password"}


@dataclass(frozen=True)
class ConfigDef:
    """One config: Kafka's name, type, default (raw text, None: no default), what it means
    (``doc``, Kafka's meaning in a sentence or two), a validator with its description
    (``valid_doc``, Kafka's "Valid Values" text), whether its value is hidden, and its dynamic
    update mode (``dynamic``: READ_ONLY, PER_BROKER or CLUSTER_WIDE for broker configs).

    ``implemented`` is False for a Kafka config odradek accepts, validates, stores and describes but
    does not act on (warned about at start-up and when altered); ``internal`` marks one Kafka accepts
    but leaves out of DescribeConfigs; ``check``, when given, is the validator that returns Kafka's
    reason for refusing a value (None when valid) instead of ``valid``'s yes or no."""

    name: str
    type: int
    default: str | None
    doc: str = ""
    valid: Callable[[Any], bool] | None = None
    valid_doc: str = ""
    sensitive: bool = False
    dynamic: str = READ_ONLY
    implemented: bool = True
    internal: bool = False
    check: Callable[[Any], str | None] | None = None

    def __post_init__(self) -> None:
        if not self.valid_doc and isinstance(self.valid, AtLeast):
            object.__setattr__(self, "valid_doc", f"[{self.valid.n},...]")

    @property
    def type_name(self) -> str:
        return _TYPE_NAMES[self.type]


def _parse(d: ConfigDef, raw: str | None) -> Any:
    if raw is None:
        return None
    raw = raw.strip()
    t = d.type
    reason = ""
    try:
        if t == T_BOOLEAN:
            low = raw.lower()
            if low not in ("true", "false"):
                reason = ": Expected value to be either true or false"
                raise ValueError(raw)
            value: Any = low == "true"
        elif t in (T_INT, T_SHORT, T_LONG):
            reason = f": Not a number of type {_TYPE_NAMES[t].upper()}"
            value = int(raw)
            limit = {T_INT: 2**31, T_SHORT: 2**15, T_LONG: 2**63}[t]
            if not -limit <= value < limit:
                raise ValueError(raw)
        elif t == T_DOUBLE:
            reason = ": Not a number of type DOUBLE"
            value = float(raw)
        elif t == T_LIST:
            value = [x.strip() for x in raw.split(",") if x.strip()]
        else:
            value = raw
    except ValueError:
        raise ConfigError(f"Invalid value {raw} for configuration {d.name}{reason}") from None
    if d.check is not None:
        why = d.check(value)
        if why is not None:
            raise ConfigError(f"Invalid value {raw} for configuration {d.name}: {why}")
    if d.valid is not None and not d.valid(value):
        why = f"Value must be at least {d.valid.n}" if isinstance(d.valid, AtLeast) else d.valid_doc
        raise ConfigError(f"Invalid value {raw} for configuration {d.name}: {why or 'not in the valid range'}")
    return value


# (id of the ConfigDef, raw text) -> (the ConfigDef, its value): the values of scalar configs read on hot
# paths (a follower reads two per fetch) are parsed once per raw text, not on every read. Lists are
# parsed each time (a caller may change the list it gets). Only values that parsed and passed
# validation are kept; the ConfigDef is held so its id cannot be reused while the entry lives.
_PARSED: dict[tuple[int, str], tuple[ConfigDef, Any]] = {}
_PARSED_MAX = 4096


def parse_value(d: ConfigDef, raw: str | None) -> Any:
    """``raw``'s value for ``d`` (None for None); raises :class:`ConfigError` when invalid."""
    if raw is None:
        return None
    hit = _PARSED.get((id(d), raw))
    if hit is not None and hit[0] is d:
        return hit[1]
    value = _parse(d, raw)
    if d.type != T_LIST:
        if len(_PARSED) >= _PARSED_MAX:
            _PARSED.clear()
        _PARSED[(id(d), raw)] = (d, value)
    return value


@dataclass(frozen=True)
class AtLeast:
    """Kafka's ConfigDef.Range.atLeast."""

    n: int

    def __call__(self, v: Any) -> bool:
        return bool(v >= self.n)


def _ge(n: int) -> AtLeast:
    return AtLeast(n)


def _principal_ok(v: Any) -> bool:
    """A Kafka principal as KafkaPrincipal.fromString reads it: ``Type:name``, neither empty."""
    kind, sep, name = str(v).partition(":")
    return bool(sep and kind.strip() and name.strip())


def _one_of(*options: str) -> Callable[[Any], bool]:
    return lambda v: v in options


def _policy(v: Any) -> bool:
    # an empty list is valid, as in Kafka 3.9 (ConfigDef.ValidList checks each item only): neither
    # retention nor compaction then applies
    return all(p in ("delete", "compact") for p in v)


_THROTTLED = re.compile(r"^\d+:\d+$")


def _throttled_replicas(v: Any) -> bool:
    """Kafka's ThrottledReplicaListValidator: ``*`` alone, or partition:broker pairs."""
    return v == ["*"] or all(_THROTTLED.match(x) for x in v)


# ---------------------------------------------------------------------------
# topic configs: name -> (definition, broker synonyms in priority order)

_TOPIC_DEFS: list[tuple[ConfigDef, tuple[str, ...]]] = [
    (ConfigDef("cleanup.policy", T_LIST, "delete",
               "What happens to old segments: delete removes them by retention time or size, compact keeps "
               "the latest record of each key (the log cleaner); both may be given.",
               _policy, "[delete, compact]"),
     ("log.cleanup.policy",)),
    (ConfigDef("compression.type", T_STRING, "producer",
               "The compression of the topic's stored batches; producer keeps the codec the producer chose, "
               "any other value is what batches are stored with.",
               _one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
               "[uncompressed, zstd, lz4, snappy, gzip, producer]"), ("compression.type",)),
    (ConfigDef("delete.retention.ms", T_LONG, "86400000",
               "How long a tombstone (a record with a null value) is kept in a compacted topic after the "
               "cleaner reached it, so consumers reading from the start still see the delete.", _ge(0)),
     ("log.cleaner.delete.retention.ms",)),
    (ConfigDef("file.delete.delay.ms", T_LONG, "60000",
               "How long a segment removed from the log waits, renamed to .deleted, before its files are "
               "deleted from disk.", _ge(0)),
     ("log.segment.delete.delay.ms",)),
    (ConfigDef("flush.messages", T_LONG, str(LONG_MAX),
               "Force an fsync of the log after this many records; the default leaves flushing to the "
               "operating system and relies on replication for durability.", _ge(1)),
     ("log.flush.interval.messages",)),
    (ConfigDef("flush.ms", T_LONG, str(LONG_MAX),
               "Force an fsync of the log when this much time passed since the last one; the default leaves "
               "flushing to the operating system.", _ge(0)),
     ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")),
    (ConfigDef("index.interval.bytes", T_INT, "4096",
               "How many bytes of records lie between two entries of the sparse offset and time indexes; "
               "smaller makes lookups read less, larger keeps the indexes smaller.", _ge(0)),
     ("log.index.interval.bytes",)),
    (ConfigDef("max.compaction.lag.ms", T_LONG, str(LONG_MAX),
               "The longest a record may stay uncompacted in a compacted topic: a segment older than this "
               "becomes eligible for cleaning whatever the dirty ratio.", _ge(1)),
     ("log.cleaner.max.compaction.lag.ms",)),
    (ConfigDef("max.message.bytes", T_INT, "1048588",
               "The largest record batch (after compression) the topic accepts; a larger batch is refused "
               "with MESSAGE_TOO_LARGE.", _ge(0)),
     ("message.max.bytes",)),
    (ConfigDef("message.timestamp.after.max.ms", T_LONG, "3600000",
               "How far in the future a CreateTime timestamp may lie compared to the broker's clock before "
               "the batch is refused (KIP-937).", _ge(0)),
     ("log.message.timestamp.after.max.ms",)),
    (ConfigDef("message.timestamp.before.max.ms", T_LONG, str(LONG_MAX),
               "How far in the past a CreateTime timestamp may lie compared to the broker's clock before the "
               "batch is refused (KIP-937).", _ge(0)),
     ("log.message.timestamp.before.max.ms",)),
    (ConfigDef("message.timestamp.type", T_STRING, "CreateTime",
               "Which timestamp records keep: CreateTime, the producer's, or LogAppendTime, the broker's "
               "clock when it appends the batch.",
               _one_of("CreateTime", "LogAppendTime"), "[CreateTime, LogAppendTime]"),
     ("log.message.timestamp.type",)),
    (ConfigDef("min.cleanable.dirty.ratio", T_DOUBLE, "0.5",
               "The share of a compacted log's bytes not yet cleaned above which the cleaner compacts it.",
               lambda v: 0 <= v <= 1, "[0,...,1]"), ("log.cleaner.min.cleanable.ratio",)),
    (ConfigDef("min.compaction.lag.ms", T_LONG, "0",
               "The shortest time a record stays uncompacted, so consumers may see every update written "
               "within this time.", _ge(0)),
     ("log.cleaner.min.compaction.lag.ms",)),
    (ConfigDef("min.insync.replicas", T_INT, "1",
               "The fewest in-sync replicas that must hold a batch for a produce with acks=all to succeed; "
               "with fewer in the ISR such produces fail with NOT_ENOUGH_REPLICAS.", _ge(1)),
     ("min.insync.replicas",)),
    (ConfigDef("preallocate", T_BOOLEAN, "false",
               "Create new segment files at their full size up front."), ("log.preallocate",)),
    (ConfigDef("retention.bytes", T_LONG, "-1",
               "The largest a partition's log may grow before its oldest segments are deleted (with the "
               "delete policy); -1 means no size limit."),
     ("log.retention.bytes",)),
    (ConfigDef("retention.ms", T_LONG, "604800000",
               "How long records are kept before their segment is deleted (with the delete policy); -1 means "
               "no time limit.", _ge(-1)),
     ("log.retention.ms", "log.retention.minutes", "log.retention.hours")),
    (ConfigDef("segment.bytes", T_INT, "1073741824",
               "The size at which the active segment is closed and a new one started; retention and "
               "compaction work a whole segment at a time.", _ge(14)),
     ("log.segment.bytes",)),
    (ConfigDef("segment.index.bytes", T_INT, "10485760",
               "The size of a segment's offset index (and time index) files; a full index also rolls the "
               "segment.", _ge(4)),
     ("log.index.size.max.bytes",)),
    (ConfigDef("segment.jitter.ms", T_LONG, "0",
               "A random amount of up to this many ms taken off segment.ms for each segment, so that logs "
               "do not all roll at once.", _ge(0)),
     ("log.roll.jitter.ms", "log.roll.jitter.hours")),
    (ConfigDef("segment.ms", T_LONG, "604800000",
               "The age at which the active segment is rolled even when not full, so old data can be "
               "deleted or compacted.", _ge(1)),
     ("log.roll.ms", "log.roll.hours")),
    (ConfigDef("unclean.leader.election.enable", T_BOOLEAN, "false",
               "Allow a replica outside the ISR to become leader when no in-sync replica is left, trading "
               "possible data loss for availability."),
     ("unclean.leader.election.enable",)),
    # replication quotas (KIP-73): "partition:broker,..." or "*" (all replicas of the topic)
    (ConfigDef("leader.replication.throttled.replicas", T_LIST, "",
               "The replicas (partition:broker pairs, or * for all) whose leader side is throttled to the "
               "leader's leader.replication.throttled.rate when it serves their followers.",
               _throttled_replicas, "[partitionId]:[brokerId],[partitionId]:[brokerId],... or *"), ()),
    (ConfigDef("follower.replication.throttled.replicas", T_LIST, "",
               "The replicas (partition:broker pairs, or * for all) whose follower side is throttled to the "
               "follower's follower.replication.throttled.rate when fetching from their leader.",
               _throttled_replicas, "[partitionId]:[brokerId],[partitionId]:[brokerId],... or *"), ()),
]
# Kafka 4.4's topic configs odradek accepts, validates, stores and describes but does not act on (KIP-405
# tiered storage, KIP-390 compression levels, the share groups' dead letter queue, ...): a topic given one
# is logged about (``validate_topic_configs``). ``internal.segment.bytes`` is Kafka's internal one (left
# out of DescribeConfigs, as Kafka does).
_NOT_ACTED_ON = "Kafka 4.4's topic setting; odradek accepts, validates, stores and describes it but does not act on it."
_TOPIC_DEFS += [
    (ConfigDef(name, typ, default, _NOT_ACTED_ON, check=_kafka.validator(valid), valid_doc=valid,
               implemented=False, internal=name == "internal.segment.bytes"), syns)
    for name, typ, default, valid, syns in (
        ("compression.gzip.level", T_INT, "-1", "[1,...,9] or -1", ("compression.gzip.level",)),
        ("compression.lz4.level", T_INT, "9", "[1,...,17]", ("compression.lz4.level",)),
        ("compression.zstd.level", T_INT, "3", "[-131072,...,22]", ("compression.zstd.level",)),
        ("errors.deadletterqueue.group.enable", T_BOOLEAN, "false", "", ()),
        ("internal.segment.bytes", T_INT, None, "", ()),
        ("max.decompressed.message.bytes", T_INT, "2147483639", "[1,...,2147483639]",
         ("max.decompressed.message.bytes",)),
        ("remote.copy.lag.bytes", T_LONG, "-1", "[-1,...]", ("log.remote.copy.lag.bytes",)),
        ("remote.copy.lag.ms", T_LONG, "0", "[-1,...]", ("log.remote.copy.lag.ms",)),
    )
]
# tiered storage (KIP-405; odradek.server.remote_log_manager), with Kafka's names, defaults and checks
# (check_remote_storage_configs: Kafka's LogConfig.validateTopicLogConfigValues)
_TOPIC_DEFS += [
    (ConfigDef("remote.storage.enable", T_BOOLEAN, "false",
               "Tier the topic (KIP-405): closed segments are copied to the remote store of "
               "remote.log.storage.manager.class.name and deleted locally past local.retention.*; reads below "
               "the local log start are served from the store. Needs remote.log.storage.system.enable on the "
               "broker; refused unless cleanup.policy is delete (or empty). Turning it off needs "
               "remote.log.delete.on.disable (KIP-950)."), ()),
    (ConfigDef("local.retention.ms", T_LONG, "-2",
               "With remote.storage.enable, how long a segment already copied to the remote store stays on "
               "the local disk; -2 means retention.ms, -1 no time limit. At most retention.ms.", _ge(-2)),
     ("log.local.retention.ms",)),
    (ConfigDef("remote.log.copy.disable", T_BOOLEAN, "false",
               "KIP-950: the topic's remote tier becomes read-only: nothing more is copied, remote reads and "
               "remote retention go on, and local segments are deleted by retention.* again (local.retention.* "
               "must then equal retention.* or be -2)."), ()),
    (ConfigDef("remote.log.delete.on.disable", T_BOOLEAN, "false",
               "KIP-950: needed to turn remote.storage.enable from true to false; the partitions' leaders then "
               "delete their remote segments and their log starts at the local log start offset."), ()),
    (ConfigDef("local.retention.bytes", T_LONG, "-2",
               "With remote.storage.enable, the most a partition's local log may hold of segments already "
               "copied to the remote store before the oldest are deleted locally; -2 means retention.bytes, "
               "-1 no size limit. At most retention.bytes.", _ge(-2)),
     ("log.local.retention.bytes",)),
]

# Deprecated topic configs that Kafka 3.9 still accepts and 4.0 removes (Kafka 4.4 refuses them with
# INVALID_CONFIG "Unknown topic config name"): accepted, validated, stored and described as Kafka 3.9 does,
# otherwise ignored with a warning (``validate_topic_configs``), because clients and tools written for 3.x
# still set them (librdkafka's test suite sets message.format.version=0.10.0.0 on brokers before 4.0) and
# odradek writes the v2 format whatever they say. message.format.version and message.downconversion.enable:
# KIP-724 (the format is v2 from inter.broker.protocol.version 3.0 on; down-conversion for old fetchers is
# not done here); message.timestamp.difference.max.ms: KIP-937 (message.timestamp.before.max.ms /
# message.timestamp.after.max.ms replace it).
DEPRECATED_TOPIC_CONFIGS = ("message.format.version", "message.downconversion.enable",
                            "message.timestamp.difference.max.ms")
# the releases whose version Kafka 3.9's MetadataVersion knows (each also as <release>-IV<n>)
_RELEASES = frozenset(["0.8.0", "0.8.1", "0.8.2", "0.9.0", "0.10.0", "0.10.1", "0.10.2", "0.11.0", "1.0", "1.1"]
                      + [f"2.{n}" for n in range(9)] + [f"3.{n}" for n in range(10)])
_INTERNAL_VERSION = re.compile(r"^(.+)-IV\d$")


def _message_format_version(v: Any) -> bool:
    """Kafka 3.9's MetadataVersion.fromVersionString: a release (``2.8``, ``0.10.0``) or one of its internal
    versions (``3.0-IV1``); further dotted parts are ignored, so ``0.10.0.0`` is 0.10.0 and ``2.8.1`` is 2.8."""
    text = str(v)
    m = _INTERNAL_VERSION.match(text)
    if m:
        return m.group(1) in _RELEASES
    parts = text.split(".")
    keep = 3 if text.startswith("0.") else 2
    return ".".join(parts[:keep]) in _RELEASES


_TOPIC_DEFS += [
    (ConfigDef("message.format.version", T_STRING, "3.0-IV1",
               "[DEPRECATED, ignored] The record format version the topic was written in (KIP-724: always "
               "v2 here).",
               valid_doc="a Kafka version such as 0.10.0, 2.8 or 3.0-IV1",
               check=lambda v: None if _message_format_version(v) else f"Version `{v}` is not a valid version"),
     ("log.message.format.version",)),
    (ConfigDef("message.downconversion.enable", T_BOOLEAN, "true",
               "[DEPRECATED, ignored] Whether fetches by clients too old for the v2 format get down-converted "
               "records."),
     ("log.message.downconversion.enable",)),
    (ConfigDef("message.timestamp.difference.max.ms", T_LONG, str(LONG_MAX),
               "[DEPRECATED, ignored] The largest difference allowed between a record's timestamp and the "
               "broker's clock (replaced by message.timestamp.before/after.max.ms).", _ge(0)),
     ("log.message.timestamp.difference.max.ms",)),
]
TOPIC_CONFIGS: dict[str, ConfigDef] = {d.name: d for d, _ in _TOPIC_DEFS}
TOPIC_SYNONYMS: dict[str, tuple[str, ...]] = {d.name: s for d, s in _TOPIC_DEFS}

# unit multipliers for broker synonyms given in coarser units
_UNIT = {
    "log.retention.minutes": 60_000,
    "log.retention.hours": 3_600_000,
    "log.roll.hours": 3_600_000,
    "log.roll.jitter.hours": 3_600_000,
}

# ---------------------------------------------------------------------------
# broker configs

_BROKER_DEFS: list[ConfigDef] = [
    ConfigDef("listeners", T_STRING, "PLAINTEXT://127.0.0.1:9092",
              "The addresses the broker listens on, as NAME://host:port separated by commas; an empty host "
              "listens on every interface, and the name picks the security protocol through "
              "listener.security.protocol.map."),
    ConfigDef("advertised.listeners", T_STRING, None,
              "The addresses published to clients and other brokers in metadata, when they differ from "
              "listeners (behind NAT, in containers); unset means listeners."),
    ConfigDef("http.listeners", T_STRING, "http://127.0.0.1:9644",
              "The HTTP endpoint serving /metrics in Prometheus' text format, as one http://host:port; a port "
              "of 0 binds a free one (logged), empty disables the endpoint and the request-latency metrics."),
    ConfigDef("http.allowed.hosts", T_LIST, "",
              "Host names, besides the host names of listeners, advertised.listeners and http.listeners, "
              "localhost, the machine's host name and literal IP addresses, that the HTTP endpoint (the console"
              " and /metrics) answers to, separated by commas; a request naming another Host is refused with "
              "421, so a web page cannot reach the endpoint by re-pointing its own DNS name at it (DNS "
              "rebinding). * accepts any Host (behind a proxy that checks it). Odradek's own setting."),
    ConfigDef("http.max.connections.per.ip", T_INT, "16",
              "The most connections one IP address may have open to the HTTP endpoint (the console and "
              "/metrics) out of its 64, as max.connections.per.ip does for the Kafka listeners: a further one "
              "from that address takes the place of the address's connection that has waited longest for its "
              "client, or is closed at once when all of them are being answered, so one address cannot take "
              "every slot. Behind a proxy every client has the proxy's address: raise it or list the proxy in "
              "http.max.connections.per.ip.overrides. Odradek's own setting.", _ge(0)),
    ConfigDef("http.max.connections.per.ip.overrides", T_STRING, "",
              "Per-address exceptions to http.max.connections.per.ip, as host:count pairs separated by commas "
              "(a host name stands for the addresses it resolves to at start-up). Odradek's own setting."),
    ConfigDef("http.auth.token", T_PASSWORD, None,
              "A secret that logs in to the console: sent as Authorization: Bearer <token>, or typed into the "
              "console's login form, which then keeps a session cookie (HttpOnly, SameSite=Strict). When set, "
              "the console serves nobody who has not logged in (with it, or with a SASL user's HTTP Basic), "
              "even on a broker without security. Compared in constant time; an address that fails 10 logins "
              "within a minute is refused (429) for the rest of that minute. Use a long random value. "
              "Odradek's own setting.", sensitive=True),
    ConfigDef("http.auth.token.principal", T_STRING, "User:ANONYMOUS",
              "The principal a console user logged in with http.auth.token acts as: the authorizer decides "
              "what the console shows and does for that user as for a Kafka client of this principal. "
              "Odradek's own setting.",
              check=lambda v: None if _principal_ok(v) else "a principal is Type:name, as User:console"),
    ConfigDef("http.metrics.auth.required", T_BOOLEAN, "false",
              "Whether /metrics needs a login (http.auth.token as a Bearer token, a console session, or a SASL "
              "user's HTTP Basic); false serves it to anyone who reaches http.listeners, as Prometheus "
              "scrapers expect by default. Odradek's own setting."),
    ConfigDef("log.dirs", T_STRING, None,
              "The directories the broker keeps partition logs in, separated by commas; a new partition goes to"
              " the directory holding the fewest."),
    ConfigDef("log.dir", T_STRING, "./odradek-data",
              "The log directory used when log.dirs is not set."),
    ConfigDef("node.id", T_INT, "-1",
              "This broker's id in the cluster; -1 falls back to broker.id."),
    ConfigDef("broker.id", T_INT, "-1",
              "This broker's id in the cluster (the ZooKeeper-era name of node.id)."),
    ConfigDef("broker.rack", T_STRING, None,
              "The rack (or availability zone) of this broker; replica assignment spreads a partition's "
              "replicas over racks."),
    ConfigDef("num.partitions", T_INT, "1",
              "The partition count of topics created without one (automatic creation, CreateTopics asking for "
              "-1).", _ge(1)),
    ConfigDef("default.replication.factor", T_INT, "1",
              "The replication factor of topics created without one.", _ge(1)),
    ConfigDef("max.partitions", T_INT, "200000",
              "The most partitions all topics of the cluster may have together (KIP-578); CreateTopics, "
              "CreatePartitions and automatic creation that would pass it fail with POLICY_VIOLATION. One "
              "request creates at most 10,000 partitions whatever this says (Kafka's bound on one "
              "controller operation).", _ge(1), dynamic=CLUSTER_WIDE),
    ConfigDef("auto.create.topics.enable", T_BOOLEAN, "true",
              "Create a topic when a client asks for its metadata (or produces to it) and it does not exist."),
    ConfigDef("delete.topic.enable", T_BOOLEAN, "true",
              "Allow topics to be deleted; when false, DeleteTopics fails with TOPIC_DELETION_DISABLED."),
    ConfigDef("log.retention.check.interval.ms", T_LONG, "300000",
              "How often the broker checks whether any log segment is due for deletion by retention.",
              _ge(1)),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", T_INT, "60000",
              "How often the recovery point of each log (the offset up to which it is known flushed) is written"
              " to recovery-point-offset-checkpoint.", _ge(0)),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", T_INT, "60000",
              "How often each log's start offset is written to log-start-offset-checkpoint.", _ge(0)),
    ConfigDef("socket.request.max.bytes", T_INT, "104857600",
              "The largest request the broker reads from a socket; a larger size prefix closes the connection.", _ge(1)),
    # connection limits and request memory (Kafka's ConnectionQuotas, Selector idle expiry, MemoryPool)
    ConfigDef("max.connections", T_INT, str(2**31 - 1),
              "The most connections the broker keeps open at once over all listeners; further ones wait until a"
              " slot frees.", _ge(0)),
    ConfigDef("max.connections.per.ip", T_INT, str(2**31 - 1),
              "The most connections one IP address may have open; further ones are closed at once.", _ge(0)),
    ConfigDef("max.connections.per.ip.overrides", T_STRING, "",
              "Per-address exceptions to max.connections.per.ip, as host:count pairs separated by commas."),
    ConfigDef("max.connection.creation.rate", T_INT, str(2**31 - 1),
              "The most new connections per second the broker accepts over all listeners (KIP-612); past it a "
              "new connection waits before it is served. The inter-broker listener is exempt when there are "
              "others; listener.name.<listener>.max.connection.creation.rate bounds one listener.", _ge(0),
              dynamic=CLUSTER_WIDE),
    ConfigDef("connections.max.idle.ms", T_LONG, "600000",
              "Close a connection that sent nothing for this long (a negative value never closes idle "
              "connections)."),
    ConfigDef("queued.max.request.bytes", T_LONG, "-1",
              "The most bytes of requests read but not yet answered; once reached the broker stops reading "
              "sockets until memory frees (-1: no limit)."),
    # client quotas (Kafka's ClientQuotaManagerConfig): the sampled windows rates are measured over
    ConfigDef("quota.window.num", T_INT, "11",
              "The number of samples a client quota's rate is measured over.", _ge(1)),
    ConfigDef("quota.window.size.seconds", T_INT, "1",
              "The length of one sample of a client quota's rate.", _ge(1)),
    ConfigDef("max.incremental.fetch.session.cache.slots", T_INT, "1000",
              "The most incremental fetch sessions (KIP-227) the broker keeps.", _ge(0)),
    ConfigDef("min.incremental.fetch.session.eviction.ms", T_INT, "120000",
              "How long an incremental fetch session is safe from eviction by a newer one: after this long "
              "unused any newcomer may replace it, after this long since its creation one with more partitions "
              "may (KIP-227).", _ge(0)),
    ConfigDef("fetch.max.bytes", T_INT, "57671680",
              "The most record bytes one Fetch response carries, whatever the request's max_bytes; the first "
              "partition with data may exceed it by one whole batch so consumers progress.", _ge(1024)),
    ConfigDef("replica.fetch.max.bytes", T_INT, "1048576",
              "The bytes a follower asks for per partition in each fetch; a larger first batch is still "
              "returned so replication progresses.", _ge(0)),
    ConfigDef("offsets.topic.num.partitions", T_INT, "50",
              "The partition count of __consumer_offsets; must not change once the topic exists.", _ge(1)),
    ConfigDef("offsets.topic.replication.factor", T_SHORT, "3",
              "The replication factor of __consumer_offsets (capped at the live brokers when it is created).", _ge(1)),
    ConfigDef("transaction.state.log.num.partitions", T_INT, "50",
              "The partition count of __transaction_state; must not change once the topic exists.", _ge(1)),
    ConfigDef("transaction.state.log.replication.factor", T_SHORT, "3",
              "The replication factor of __transaction_state (capped at the live brokers when it is created).", _ge(1)),
    ConfigDef("transaction.state.log.min.isr", T_INT, "2",
              "The min.insync.replicas of __transaction_state.", _ge(1)),
    ConfigDef("transaction.state.log.segment.bytes", T_INT, "104857600",
              "The segment size of __transaction_state, kept small for fast loading and compaction.",
              _ge(1)),
    ConfigDef("transaction.max.timeout.ms", T_INT, "900000",
              "The longest transaction timeout a producer may ask for; InitProducerId with more fails with "
              "INVALID_TRANSACTION_TIMEOUT.",
              _ge(1)),
    ConfigDef("transactional.id.expiration.ms", T_INT, "604800000",
              "a transactional id idle this long (no transaction open) is forgotten", _ge(1)),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", T_INT, "10000",
              "period of the check that aborts transactions open past their timeout", _ge(1)),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", T_INT, "3600000",
              "period of the transactional id expiration check", _ge(1)),
    ConfigDef("transaction.partition.verification.enable", T_BOOLEAN, "true",
              "a leader asks the coordinator before a transaction's first append to a partition (KIP-890)"),
    ConfigDef("group.initial.rebalance.delay.ms", T_INT, "3000",
              "How long the coordinator waits for more members before the first rebalance of an empty classic "
              "group.", _ge(0)),
    ConfigDef("group.min.session.timeout.ms", T_INT, "6000",
              "The shortest session timeout a classic group member may ask for.", _ge(0)),
    ConfigDef("group.max.session.timeout.ms", T_INT, "1800000",
              "The longest session timeout a classic group member may ask for.", _ge(0)),
    ConfigDef("group.max.size", T_INT, str(2**31 - 1),
              "The most members a classic consumer group may have; further joiners are refused with "
              "GROUP_MAX_SIZE_REACHED. While a rebalance is prepared the members already rejoined count, so a "
              "group over the limit (the setting was lowered) keeps the first to rejoin and removes the rest.",
              _ge(1)),
    ConfigDef("offset.metadata.max.bytes", T_INT, "4096",
              "The largest metadata string an offset commit may carry.", _ge(0)),
    ConfigDef("offsets.commit.timeout.ms", T_INT, "5000",
              "How long an offset commit waits for __consumer_offsets to replicate it before failing.",
              _ge(1)),
    # consumer group protocol (KIP-848)
    ConfigDef("group.consumer.heartbeat.interval.ms", T_INT, "5000",
              "The heartbeat interval the coordinator gives members of KIP-848 consumer groups.", _ge(1)),
    ConfigDef("group.consumer.session.timeout.ms", T_INT, "45000",
              "A KIP-848 consumer group member that sends no heartbeat for this long is fenced.", _ge(1)),
    ConfigDef("group.consumer.assignors", T_LIST, "uniform,range",
              "The server-side assignors of KIP-848 consumer groups; the first is used when a member names "
              "none.",
              lambda v: bool(v) and all(a in ("uniform", "range") for a in v), "[uniform, range]"),
    ConfigDef("group.consumer.max.size", T_INT, str(2**31 - 1),
              "The most members a KIP-848 consumer group may have.", _ge(1)),
    ConfigDef("group.consumer.migration.policy", T_STRING, "bidirectional",
              "KIP-848's online migration between classic and consumer groups: `upgrade` turns a classic group "
              "into a consumer group when a member of the new protocol joins it, `downgrade` turns a consumer "
              "group whose remaining members all speak the classic protocol back into a classic group, "
              "`bidirectional` allows both, `disabled` neither (case insensitive).",
              lambda v: str(v).strip().lower() in ("disabled", "downgrade", "upgrade", "bidirectional"),
              "(case insensitive) [DISABLED, DOWNGRADE, UPGRADE, BIDIRECTIONAL]"),
    # share groups (KIP-932)
    ConfigDef("group.share.heartbeat.interval.ms", T_INT, "5000",
              "The heartbeat interval the coordinator gives members of share groups.",
              check=_kafka.validator("[1,...]"), valid_doc="[1,...]"),
    ConfigDef("group.share.session.timeout.ms", T_INT, "45000",
              "A share group member that sends no heartbeat for this long is removed from its group and the "
              "records it holds are released.", check=_kafka.validator("[1,...]"), valid_doc="[1,...]"),
    ConfigDef("group.share.max.size", T_INT, "200",
              "The most members a share group may have; further joiners are refused with GROUP_MAX_SIZE_REACHED.",
              check=_kafka.validator("[1,...,1000]"), valid_doc="[1,...,1000]"),
    ConfigDef("group.share.record.lock.duration.ms", T_INT, "30000",
              "How long a record acquired by a share consumer stays locked to it before it is released for "
              "redelivery (a group's share.record.lock.duration.ms overrides it).",
              check=_kafka.validator("[1000,...,3600000]"), valid_doc="[1000,...,3600000]"),
    ConfigDef("group.share.delivery.count.limit", T_INT, "5",
              "How many times a share group delivers a record before it archives it instead (a group's "
              "share.delivery.count.limit overrides it).",
              check=_kafka.validator("[2,...,10]"), valid_doc="[2,...,10]"),
    ConfigDef("group.share.partition.max.record.locks", T_INT, "2000",
              "The most records a share group may have in flight (acquired or awaiting the share-partition "
              "start offset) on one partition (a group's share.partition.max.record.locks overrides it).",
              check=_kafka.validator("[100,...,10000]"), valid_doc="[100,...,10000]"),
    ConfigDef("group.share.min.session.timeout.ms", T_INT, "45000",
              "The least share.session.timeout.ms a share group may set.",
              check=_kafka.validator("[1,...]"), valid_doc="[1,...]"),
    ConfigDef("group.share.max.session.timeout.ms", T_INT, "60000",
              "The most share.session.timeout.ms a share group may set.",
              check=_kafka.validator("[1,...]"), valid_doc="[1,...]"),
    ConfigDef("group.share.min.heartbeat.interval.ms", T_INT, "5000",
              "The least share.heartbeat.interval.ms a share group may set.",
              check=_kafka.validator("[1,...]"), valid_doc="[1,...]"),
    ConfigDef("group.share.max.heartbeat.interval.ms", T_INT, "15000",
              "The most share.heartbeat.interval.ms a share group may set.",
              check=_kafka.validator("[1,...]"), valid_doc="[1,...]"),
    ConfigDef("group.share.min.record.lock.duration.ms", T_INT, "15000",
              "The least share.record.lock.duration.ms a share group may set "
              "(group.share.record.lock.duration.ms below it and the broker does not start).",
              check=_kafka.validator("[1000,...,30000]"), valid_doc="[1000,...,30000]"),
    ConfigDef("group.share.max.record.lock.duration.ms", T_INT, "60000",
              "The most share.record.lock.duration.ms a share group may set "
              "(group.share.record.lock.duration.ms above it and the broker does not start).",
              check=_kafka.validator("[30000,...,3600000]"), valid_doc="[30000,...,3600000]"),
    ConfigDef("group.share.min.delivery.count.limit", T_INT, "2",
              "The least share.delivery.count.limit a share group may set "
              "(group.share.delivery.count.limit below it and the broker does not start).",
              check=_kafka.validator("[2,...,5]"), valid_doc="[2,...,5]"),
    ConfigDef("group.share.max.delivery.count.limit", T_INT, "10",
              "The most share.delivery.count.limit a share group may set "
              "(group.share.delivery.count.limit above it and the broker does not start).",
              check=_kafka.validator("[5,...,25]"), valid_doc="[5,...,25]"),
    ConfigDef("group.share.min.partition.max.record.locks", T_INT, "100",
              "The least share.partition.max.record.locks a share group may set "
              "(group.share.partition.max.record.locks below it and the broker does not start).",
              check=_kafka.validator("[100,...,2000]"), valid_doc="[100,...,2000]"),
    ConfigDef("group.share.max.partition.max.record.locks", T_INT, "4000",
              "The most share.partition.max.record.locks a share group may set "
              "(group.share.partition.max.record.locks above it and the broker does not start).",
              check=_kafka.validator("[2000,...,10000]"), valid_doc="[2000,...,10000]"),
    ConfigDef("group.share.max.share.sessions", T_INT, "2000",
              "The most share sessions (KIP-932: one per share consumer and broker) this broker keeps; a "
              "further one is refused with SHARE_SESSION_LIMIT_REACHED.", check=_kafka.validator("[1,...]"), valid_doc="[1,...]"),
    ConfigDef("share.coordinator.state.topic.num.partitions", T_INT, "50",
              "The partitions of __share_group_state, where share groups' delivery state is kept (not changeable "
              "once the topic exists).", check=_kafka.validator("[1,...]"), valid_doc="[1,...]"),
    ConfigDef("share.coordinator.state.topic.replication.factor", T_SHORT, "3",
              "The replication factor of __share_group_state (capped at the live brokers when it is created).",
              check=_kafka.validator("[1,...]"), valid_doc="[1,...]"),
    ConfigDef("share.coordinator.state.topic.min.isr", T_SHORT, "2",
              "min.insync.replicas of __share_group_state (capped at its replication factor).",
              check=_kafka.validator("[1,...]"), valid_doc="[1,...]"),
    ConfigDef("share.coordinator.state.topic.segment.bytes", T_INT, "104857600",
              "The segment size of __share_group_state.", check=_kafka.validator("[1,...]"), valid_doc="[1,...]"),
    ConfigDef("share.coordinator.snapshot.update.records.per.snapshot", T_INT, "500",
              "After this many ShareUpdate records of a share-partition the share coordinator writes a "
              "ShareSnapshot instead.", check=_kafka.validator("[0,...,500]"), valid_doc="[0,...,500]"),
    ConfigDef("offsets.retention.minutes", T_INT, "10080",
              "How long the committed offsets of a group are kept once the group is empty (or, for standalone "
              "commits, since the last commit).", _ge(1)),
    ConfigDef("offsets.retention.check.interval.ms", T_LONG, "600000",
              "How often expired committed offsets are looked for.", _ge(1)),
    ConfigDef("offsets.topic.segment.bytes", T_INT, "104857600",
              "The segment size of __consumer_offsets, kept small for fast loading and compaction.", _ge(1)),
    ConfigDef("log.retention.minutes", T_INT, None,
              "log.retention.ms in minutes, used when log.retention.ms is unset."),
    ConfigDef("log.retention.hours", T_INT, "168",
              "log.retention.ms in hours, used when log.retention.ms and log.retention.minutes are unset."),
    ConfigDef("log.roll.hours", T_INT, "168",
              "log.roll.ms in hours, used when log.roll.ms is unset.", _ge(1)),
    ConfigDef("log.roll.jitter.hours", T_INT, "0",
              "log.roll.jitter.ms in hours, used when log.roll.jitter.ms is unset.",
              _ge(0)),
    ConfigDef("log.flush.scheduler.interval.ms", T_LONG, str(LONG_MAX),
              "How often the flusher checks whether a log is due for an fsync by flush.ms."),
    ConfigDef("cluster.id", T_STRING, None,
              "The cluster's id; generated and stored in the metadata store (and meta.properties) when unset."),
    ConfigDef("zookeeper.connect", T_STRING, None,
              "The ZooKeeper ensemble (host:port,...[/chroot]) that holds the cluster's metadata (a missing "
              "chroot is created at start-up); unset runs the embedded single-broker controller."),
    ConfigDef("zookeeper.session.timeout.ms", T_INT, "18000",
              "The ZooKeeper session timeout; a broker silent for longer loses its registration."),
    ConfigDef("zookeeper.connection.timeout.ms", T_INT, None,
              "How long the broker waits to connect to ZooKeeper; unset means zookeeper.session.timeout.ms."),
    # ZooKeeper SASL and znode ACLs (odradek.security.zk_client); the last three are the JVM system
    # properties Kafka's ZooKeeper client reads, also taken as -D words of KAFKA_OPTS
    ConfigDef("zookeeper.set.acl", T_BOOLEAN, "false",
              "Whether the znodes the broker creates get Kafka's secure ACLs: the creator has ALL, the world READ except on the "
              "sensitive paths (/config/users, /config/brokers, /delegation_token)."),
    ConfigDef("java.security.auth.login.config", T_STRING, None,
              "The JAAS file whose Client section logs the broker in to ZooKeeper with SASL (DigestLoginModule)."),
    ConfigDef("zookeeper.sasl.client", T_BOOLEAN, "true", "Whether the broker logs in to ZooKeeper with SASL when a JAAS file is given."),
    ConfigDef("odradek.change.notification.expiration.ms", T_LONG, "900000",
              "Change notifications (/kafka-acl-changes, /config/changes) older than this are deleted by the "
              "brokers that read them (Kafka's ZkNodeChangeNotificationListener: 15 minutes).", _ge(1)),
    ConfigDef("zookeeper.sasl.clientconfig", T_STRING, "Client", "The section of the JAAS file that holds the ZooKeeper login."),
    # cluster mode (replication, controller)
    ConfigDef("inter.broker.listener.name", T_STRING, None,
              "The listener brokers use to talk to each other; exclusive with security.inter.broker.protocol."),
    ConfigDef("replica.lag.time.max.ms", T_LONG, "30000",
              "A follower that has not caught up with the leader's log end for this long is removed from the "
              "ISR.",
              _ge(1)),
    ConfigDef("replica.fetch.wait.max.ms", T_INT, "500",
              "How long a follower's fetch waits on the leader for new data; keep it below "
              "replica.lag.time.max.ms.", _ge(0)),
    ConfigDef("replica.fetch.min.bytes", T_INT, "1",
              "The bytes a follower's fetch waits for before the leader answers.", _ge(1)),
    ConfigDef("replica.fetch.response.max.bytes", T_INT, "10485760",
              "The most bytes a follower asks for in a whole fetch response.", _ge(0)),
    ConfigDef("replica.fetch.backoff.ms", T_INT, "1000",
              "How long a follower waits after a failed fetch before trying again.", _ge(0)),
    ConfigDef("replica.socket.timeout.ms", T_INT, "30000",
              "The network timeout of a follower's fetch requests.", _ge(1)),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", T_LONG, "5000",
              "How often the high watermarks are written to replication-offset-checkpoint.",
              _ge(1)),
    ConfigDef("controller.socket.timeout.ms", T_INT, "30000",
              "The timeout of the controller's requests to brokers.", _ge(1)),
    ConfigDef("leader.replication.throttled.rate", T_LONG, str(LONG_MAX),
              "The bytes per second a leader sends to the followers of replicas listed in "
              "leader.replication.throttled.replicas (KIP-73); meant for reassignments and set by the "
              "reassignment tool.", _ge(1), dynamic=CLUSTER_WIDE),
    ConfigDef("follower.replication.throttled.rate", T_LONG, str(LONG_MAX),
              "The bytes per second a follower fetches for replicas listed in "
              "follower.replication.throttled.replicas (KIP-73).", _ge(1), dynamic=CLUSTER_WIDE),
    # replication quotas' sampled rate (Kafka's ReplicationQuotaManagerConfig)
    ConfigDef("replication.quota.window.num", T_INT, "11",
              "The number of samples the replication quotas' byte rates are measured over.", _ge(1)),
    ConfigDef("replication.quota.window.size.seconds", T_INT, "1",
              "The length of one sample of the replication quotas' byte rates.", _ge(1)),
    ConfigDef("auto.leader.rebalance.enable", T_BOOLEAN, "true",
              "Move partition leadership back to the preferred replica (the first of the assignment) when the "
              "imbalance is too large."),
    ConfigDef("leader.imbalance.per.broker.percentage", T_INT, "10",
              "The share of a broker's partitions led elsewhere above which a preferred leader election is "
              "triggered.", _ge(0)),
    ConfigDef("leader.imbalance.check.interval.seconds", T_LONG, "300",
              "How often the controller checks the leader imbalance.", _ge(1)),
    ConfigDef("controlled.shutdown.enable", T_BOOLEAN, "true",
              "A stopping broker asks the controller to move its leaderships away first."),
    ConfigDef("controlled.shutdown.max.retries", T_INT, "3",
              "How many times a controlled shutdown is tried before the broker stops anyway.", _ge(1)),
    ConfigDef("controlled.shutdown.retry.backoff.ms", T_LONG, "5000",
              "The pause between controlled shutdown attempts.", _ge(0)),
    ConfigDef("odradek.replica.fetch.splice", T_BOOLEAN, "true",
              "Odradek's own setting: a follower fetching over a PLAINTEXT inter-broker listener moves the records of "
              "fetch responses (64 KB or more per partition) from its socket into the segment file with splice(2), "
              "then checks them from the page cache, instead of reading them into memory and writing them out "
              "(zero-copy replication). TLS and SASL listeners always read into memory."),
    ConfigDef("odradek.validate.records", T_BOOLEAN, "true",
              "Odradek's own setting: walk the records of uncompressed produced batches to check the counts "
              "their headers claim."),
    # idempotent producer state (KIP-854; Kafka's ProducerStateManagerConfig), odradek.log.producer_state
    ConfigDef("producer.id.expiration.ms", T_INT, "86400000",
              "a producer id idle this long with no open transaction is forgotten by each partition",
              _ge(1), dynamic=CLUSTER_WIDE),
    ConfigDef("producer.id.expiration.check.interval.ms", T_INT, "600000",
              "period of the producer id expiration check", _ge(1)),
    # security protocols (odradek.security.listeners) and the listeners of
    # cluster mode: which one brokers talk to each other on (KafkaConfig's interBrokerListenerName),
    # and the controller's own listener (KIP-291)
    ConfigDef("listener.security.protocol.map", T_STRING,
              "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
              "The security protocol of each listener name, as NAME:PROTOCOL pairs separated by commas."),
    ConfigDef("security.inter.broker.protocol", T_STRING, "PLAINTEXT",
              "security protocol between brokers; names the inter-broker "
              "listener when inter.broker.listener.name is unset",
              lambda v: v.upper() in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
              "[PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL]"),
    ConfigDef("control.plane.listener.name", T_STRING, None,
              "A listener for the controller's requests only, so they do not queue behind clients' (KIP-291)."),
    # TLS of SSL / SASL_SSL listeners (odradek.security.tls; each also as listener.name.<l>.<name>)
    ConfigDef("ssl.keystore.type", T_STRING, "PEM",
              "The format of the key store; odradek reads PEM only."),
    ConfigDef("ssl.keystore.location", T_STRING, None,
              "The PEM file holding the broker's private key and certificate chain."),
    ConfigDef("ssl.keystore.certificate.chain", T_PASSWORD, None,
              "The broker's certificate chain as PEM text, instead of a key store file.", sensitive=True),
    ConfigDef("ssl.keystore.key", T_PASSWORD, None,
              "The broker's private key as PEM text, instead of a key store file.", sensitive=True),
    ConfigDef("ssl.keystore.password", T_PASSWORD, None,
              "The password of the key store (of its private key for PEM).", sensitive=True),
    ConfigDef("ssl.key.password", T_PASSWORD, None,
              "The password of the private key.", sensitive=True),
    ConfigDef("ssl.truststore.type", T_STRING, "PEM",
              "The format of the trust store; odradek reads PEM only."),
    ConfigDef("ssl.truststore.location", T_STRING, None,
              "The PEM file of the CA certificates peers' certificates are checked against."),
    ConfigDef("ssl.truststore.certificates", T_PASSWORD, None,
              "The trusted CA certificates as PEM text, instead of a trust store file.", sensitive=True),
    ConfigDef("ssl.truststore.password", T_PASSWORD, None,
              "The trust store's password (not used with PEM trust stores).", sensitive=True),
    ConfigDef("ssl.client.auth", T_STRING, "none",
              "Whether clients of SSL listeners must (required), may (requested) or do not (none) present a "
              "certificate.",
              lambda v: v.lower() in ("none", "requested", "required"), "[none, requested, required]"),
    ConfigDef("ssl.enabled.protocols", T_LIST, "TLSv1.2,TLSv1.3",
              "The TLS versions the broker accepts."),
    ConfigDef("ssl.cipher.suites", T_LIST, None,
              "The TLS 1.2 cipher suites allowed (OpenSSL names); unset allows the defaults."),
    ConfigDef("ssl.endpoint.identification.algorithm", T_STRING, "https",
              "a broker's clients check the peer's host name against its certificate (empty: no check)"),
    ConfigDef("ssl.principal.mapping.rules", T_STRING, "DEFAULT",
              "rules mapping a certificate's distinguished name to a user name (KIP-371)"),
    # SASL of SASL_PLAINTEXT / SASL_SSL listeners (odradek.security.sasl)
    ConfigDef("sasl.enabled.mechanisms", T_LIST, "GSSAPI",
              "The SASL mechanisms SASL listeners offer (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are "
              "implemented)."),
    ConfigDef("sasl.mechanism.inter.broker.protocol", T_STRING, "GSSAPI",
              "SASL mechanism brokers authenticate to each other with (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"),
    ConfigDef("sasl.jaas.config", T_PASSWORD, None,
              "The JAAS login context of SASL listeners (PlainLoginModule's user_<name>=\"<password>\" entries, "
              "the broker's own credentials).", sensitive=True),
    ConfigDef("connection.failed.authentication.delay.ms", T_INT, "100",
              "delay before a connection that failed authentication is closed", _ge(0)),
    ConfigDef("sasl.server.max.receive.size", T_INT, "524288",
              "the largest request a SASL listener reads before the client is authenticated", _ge(1)),
    ConfigDef("connections.max.reauth.ms", T_LONG, "0",
              "SASL sessions last this long; the client re-authenticates or is disconnected (KIP-368; 0: forever)",
              _ge(0)),
    ConfigDef("odradek.authentication.timeout.ms", T_INT, "10000",
              "a connection's TLS handshake and SASL authentication must finish within this time", _ge(1)),
    # the authorizer (odradek.security.acl)
    ConfigDef("authorizer.class.name", T_STRING, "", "Kafka's AclAuthorizer or StandardAuthorizer enables ACLs"),
    ConfigDef("super.users", T_STRING, "", "principals every operation is allowed to (User:a;User:b)"),
    ConfigDef("allow.everyone.if.no.acl.found", T_BOOLEAN, "false",
              "a resource without ACLs is open to every principal"),
    # tiered storage (KIP-405; odradek.server.remote_log_manager): Kafka's names and defaults. Kafka names the
    # stores by Java class; odradek by a short name (remote.log.storage.manager.class.name), with the store's
    # own settings under remote.log.storage.manager.impl.prefix (rsm.config. by default) as Kafka passes them
    ConfigDef("remote.log.storage.system.enable", T_BOOLEAN, "false",
              "Turn on tiered storage on this broker (KIP-405): the remote log manager runs and topics may set "
              "remote.storage.enable."),
    ConfigDef("remote.log.manager.task.interval.ms", T_LONG, "30000",
              "How often the remote log manager copies each tiered partition's closed segments to the remote "
              "store and applies remote retention (Kafka's RLMCopyTask and RLMExpirationTask).", _ge(1)),
    ConfigDef("remote.log.manager.thread.pool.size", T_INT, "2",
              "The worker threads that copy segments to, delete them from and read them from the remote store "
              "(never the event loop). Kafka splits them into copier, expiration and reader pools; odradek uses "
              "one pool of this size for copies and deletions and another for reads.", _ge(1)),
    ConfigDef("remote.log.storage.manager.class.name", T_STRING, None,
              "The remote store: filesystem (a directory, rsm.config.dir) or s3 (a bucket, rsm.config.bucket; "
              "boto3). Kafka takes a RemoteStorageManager's Java class name here; odradek a short name, and "
              "unset means filesystem.",
              check=lambda v: None if str(v).strip().lower() in ("filesystem", "s3")
              else "odradek's remote stores are filesystem and s3"),
    ConfigDef("remote.log.storage.manager.impl.prefix", T_STRING, "rsm.config.",
              "The prefix of the remote store's own settings (rsm.config.dir, rsm.config.bucket, ...).",
              check=lambda v: None if str(v) else "String must be non-empty"),
    ConfigDef("remote.log.metadata.manager.impl.prefix", T_STRING, "rlmm.config.",
              "The prefix of the remote log metadata manager's settings (rlmm.config.remote.log.metadata.topic.*).",
              check=lambda v: None if str(v) else "String must be non-empty"),
    ConfigDef("remote.fetch.max.wait.ms", T_INT, "500",
              "How long a fetch that reads from the remote store waits for that read before it is answered "
              "without those records (Kafka's DelayedRemoteFetch).", _ge(1), dynamic=CLUSTER_WIDE),
    ConfigDef("remote.list.offsets.request.timeout.ms", T_LONG, "30000",
              "How long a ListOffsets request whose timestamp lookup reads the remote tier waits for it before "
              "that partition is answered REQUEST_TIMED_OUT, when the request (v10+) sets no timeout of its own "
              "(Kafka's DelayedRemoteListOffsets, KIP-1075).", _ge(1), dynamic=CLUSTER_WIDE),
    # KIP-956: the remote log manager's copy and fetch quotas (odradek.server.quota.remote_log)
    ConfigDef("remote.log.manager.copy.max.bytes.per.second", T_LONG, str(LONG_MAX),
              "The bytes per second this broker copies to the remote store, over all partitions (KIP-956): the "
              "copy task waits before a segment while the measured rate is above it. The default is no limit.",
              _ge(1), dynamic=CLUSTER_WIDE),
    ConfigDef("remote.log.manager.copy.quota.window.num", T_INT, "11",
              "The number of samples the remote copy quota's byte rate is measured over.", _ge(1)),
    ConfigDef("remote.log.manager.copy.quota.window.size.seconds", T_INT, "1",
              "The length of one sample of the remote copy quota's byte rate.", _ge(1)),
    ConfigDef("remote.log.manager.fetch.max.bytes.per.second", T_LONG, str(LONG_MAX),
              "The bytes per second this broker reads from the remote store for consumers, over all partitions "
              "(KIP-956): while the measured rate is above it, a fetch below a tiered partition's local log start "
              "is answered with no records for that partition (no error: the client fetches again). The default "
              "is no limit.", _ge(1), dynamic=CLUSTER_WIDE),
    ConfigDef("remote.log.manager.fetch.quota.window.num", T_INT, "11",
              "The number of samples the remote fetch quota's byte rate is measured over.", _ge(1)),
    ConfigDef("remote.log.manager.fetch.quota.window.size.seconds", T_INT, "1",
              "The length of one sample of the remote fetch quota's byte rate.", _ge(1)),
    ConfigDef("rsm.config.dir", T_STRING, None,
              "The filesystem remote store's directory (a mounted network file system in production); unset: "
              "remote-storage under the first log directory. Odradek's own setting.", internal=True),
    ConfigDef("rsm.config.bucket", T_STRING, None,
              "The s3 remote store's bucket. Odradek's own setting.", internal=True),
    ConfigDef("rsm.config.prefix", T_STRING, "",
              "The s3 remote store's key prefix (e.g. kafka/cluster-1/). Odradek's own setting.", internal=True),
    ConfigDef("rsm.config.endpoint.url", T_STRING, None,
              "The s3 remote store's endpoint (an S3-compatible server; path-style addressing); unset: AWS. "
              "Odradek's own setting.", internal=True),
    ConfigDef("rsm.config.region", T_STRING, None,
              "The s3 remote store's region. Credentials come from boto3's chain (environment, profile, "
              "instance role). Odradek's own setting.", internal=True),
    ConfigDef("rlmm.config.remote.log.metadata.topic.num.partitions", T_INT, "50",
              "The partitions of __remote_log_metadata when the broker creates it (Kafka's "
              "TopicBasedRemoteLogMetadataManagerConfig).", _ge(1), internal=True),
    ConfigDef("rlmm.config.remote.log.metadata.topic.replication.factor", T_SHORT, "3",
              "The replication factor of __remote_log_metadata when the broker creates it (capped at the live "
              "brokers, with a warning).", _ge(1), internal=True),
    ConfigDef("rlmm.config.remote.log.metadata.topic.retention.ms", T_LONG, "-1",
              "retention.ms of __remote_log_metadata when the broker creates it (-1: kept forever).", internal=True),
    # log cleaner (compaction, odradek.log.cleaner)
    ConfigDef("log.cleaner.enable", T_BOOLEAN, "true",
              "Run the log cleaner, which compacts topics with cleanup.policy=compact."),
    # dynamic cluster-wide, as Kafka's (LogCleaner.ReconfigurableConfigs): a change applies at once
    ConfigDef("log.cleaner.backoff.ms", T_LONG, "15000",
              "How long the cleaner sleeps when no log needs cleaning.", _ge(0), dynamic=CLUSTER_WIDE),
    ConfigDef("log.cleaner.dedupe.buffer.size", T_LONG, "134217728",
              "The memory the cleaner's offset map (latest offset of each key) may use over all cleaner "
              "threads.",
              _ge(24), dynamic=CLUSTER_WIDE),
    ConfigDef("log.cleaner.threads", T_INT, "1",
              "The number of cleaner threads (odradek runs one, whatever the value).", _ge(0),
              dynamic=CLUSTER_WIDE),
]
for _d, _syns in _TOPIC_DEFS:
    for _s in _syns:
        if _d.implemented and _s not in {b.name for b in _BROKER_DEFS}:
            default = _d.default if _s == _syns[0] else None
            if _s in _UNIT or _s == "log.flush.scheduler.interval.ms":
                continue
            # Kafka's log.* defaults of topic configs are all dynamic, cluster-wide (DynamicLogConfig)
            _BROKER_DEFS.append(ConfigDef(_s, _d.type, default, _d.doc, _d.valid, _d.valid_doc,
                                          dynamic=CLUSTER_WIDE))
_TYPES = {"boolean": T_BOOLEAN, "string": T_STRING, "int": T_INT, "short": T_SHORT, "long": T_LONG,
          "double": T_DOUBLE, "list": T_LIST, "class": T_CLASS, "password": T_PASSWORD}
_NOT_ACTED_ON_BROKER = ("Kafka 4.4's broker setting; odradek accepts, validates, stores and describes it but does "
                        "not act on it.")
# every other name a Kafka 4.4 broker knows (odradek.config_kafka), with Kafka's type, default, validation and
# update mode, marked not implemented
_BROKER_DEFS += [
    ConfigDef(k.name, _TYPES[k.type], k.default, _NOT_ACTED_ON_BROKER, valid_doc=k.valid_doc,
              check=_kafka.validator(k.valid_doc), sensitive=k.type == "password", dynamic=k.mode,
              implemented=False, internal=k.internal)
    for k in _kafka.KAFKA_BROKER_CONFIGS.values()
    if k.name not in {b.name for b in _BROKER_DEFS}
]
# Kafka's internal configs are left out of DescribeConfigs, odradek's implementations of them too
_BROKER_DEFS = [dataclasses.replace(d, internal=True) if (k := _kafka.KAFKA_BROKER_CONFIGS.get(d.name)) and k.internal
                else d for d in _BROKER_DEFS]
BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _BROKER_DEFS}
# flush.ms falls back to the scheduler interval, retention.ms to minutes/hours: the
# first synonym has no default of its own in those cases (as in Kafka).
for _name in ("log.flush.interval.ms", "log.retention.ms", "log.roll.ms", "log.roll.jitter.ms"):
    _old = BROKER_CONFIGS[_name]
    BROKER_CONFIGS[_name] = dataclasses.replace(_old, default=None)

# broker configs that IncrementalAlterConfigs may change at run time (cluster default or per broker)
DYNAMIC_BROKER_CONFIGS = frozenset(n for n, d in BROKER_CONFIGS.items() if d.dynamic != READ_ONLY)
# Kafka's DynamicBrokerConfig.DYNAMIC_SECURITY_CONFIGS: dynamic only per listener (listener.name.<l>.<name>)
DYNAMIC_SECURITY_CONFIGS = frozenset({
    "ssl.key.password", "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.keystore.location",
    "ssl.keystore.password", "ssl.keystore.type", "ssl.truststore.certificates", "ssl.truststore.location",
    "ssl.truststore.password", "ssl.truststore.type",
})


def read_properties(path: str | Path) -> dict[str, str]:
    """Parse a Java .properties file (key=value or key: value, # and ! comments)."""
    props: dict[str, str] = {}
    text = Path(path).read_text(encoding="utf-8")
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line[0] in "#!":
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        for i, ch in enumerate(line):
            if ch in "=:":
                props[line[:i].strip()] = line[i + 1 :].strip()
                break
        else:
            props[line] = ""
    return props


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, Any]:
    """Check topic config overrides; raise ConfigError naming the bad one."""
    out: dict[str, Any] = {}
    for name, raw in configs.items():
        d = TOPIC_CONFIGS.get(name)
        if d is None:
            raise ConfigError(f"Unknown topic config name: {name}")
        if raw is None:
            raise ConfigError(f"Null value not supported for topic config: {name}")
        out[name] = _parse(d, raw)
        if name in DEPRECATED_TOPIC_CONFIGS:
            _log.warning("Topic configuration %s=%s is deprecated and ignored (Kafka 4.0 removes it)", name, raw)
        elif not d.implemented:
            _log.warning("Topic configuration %s=%s is a Kafka setting odradek does not implement: stored and "
                         "described, otherwise ignored", name, raw)
    return out


def check_remote_storage_configs(value: Callable[[str], Any], *, system_enabled: bool, was_enabled: bool) -> None:
    """Kafka 4.4's LogConfig.validateTopicLogConfigValues for tiered storage: ``value(name)`` is a topic config's
    effective value (its override, else the broker's default); raises :class:`ConfigError` with Kafka's
    message. ``was_enabled``: the topic had remote.storage.enable=true before this change."""
    if not value("remote.storage.enable"):
        # validateTurningOffRemoteStorageWithDelete (KIP-950)
        if was_enabled and not value("remote.log.delete.on.disable"):
            raise ConfigError(
                "It is invalid to disable remote storage without deleting remote data. If you want to keep the "
                "remote data and turn to read only, please set `remote.storage.enable=true,"
                "remote.log.copy.disable=true`. If you want to disable remote storage and delete all remote "
                "data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`.")
        return
    if not system_enabled:  # validateRemoteStorageOnlyIfSystemEnabled
        raise ConfigError("Tiered Storage functionality is disabled in the broker. Topic cannot be configured "
                          "with remote log storage.")
    policy = value("cleanup.policy")  # validateRemoteStorageRequiresDeleteCleanupPolicy
    policies = [str(p).strip() for p in (policy if isinstance(policy, list) else str(policy).split(","))]
    policies = [p for p in policies if p]
    if policies and policies != ["delete"]:
        raise ConfigError("Remote log storage only supports topics with cleanup.policy=delete or cleanup.policy "
                          "being an empty list.")
    limits: dict[str, tuple[int, int]] = {}
    for kind, total_name, local_name in (("bytes", "retention.bytes", "local.retention.bytes"),
                                         ("ms", "retention.ms", "local.retention.ms")):
        total, local = int(value(total_name)), int(value(local_name))
        limits[kind] = total, local
        if (total > -1 if kind == "bytes" else total != -1) and local != -2:
            if local == -1:
                raise ConfigError(f"Invalid value {local} for configuration {local_name}: Value must not be -1 "
                                  f"as {total_name} value is set as {total}.")
            if local > total:
                raise ConfigError(f"Invalid value {local} for configuration {local_name}: Value must not be "
                                  f"more than {total_name} property value: {total}")
    for kind, lag_name, local_name in (("bytes", "remote.copy.lag.bytes", "local.retention.bytes"),
                                       ("ms", "remote.copy.lag.ms", "local.retention.ms")):
        # validateRemoteCopyLagSize / validateRemoteCopyLagTime: at most the effective local retention
        total, local = limits[kind]
        effective = total if local == -2 else local
        lag = int(value(lag_name))
        if lag > 0 and effective >= 0 and lag > effective:
            raise ConfigError(f"Invalid value {lag} for configuration {lag_name}: Value must not exceed "
                              f"{local_name} (effective value: {effective})")
    if value("remote.log.copy.disable"):  # validateRetentionConfigsWhenRemoteCopyDisabled (KIP-950)
        for kind, total_name, local_name in (("bytes", "retention.bytes", "local.retention.bytes"),
                                             ("ms", "retention.ms", "local.retention.ms")):
            total, local = limits[kind]
            if local != -2 and local != total:
                raise ConfigError(f"When `remote.log.copy.disable` is set to true, the `{local_name}` and "
                                  f"`{total_name}` must be set to the identical value because there will be no "
                                  "more logs copied to the remote storage.")


class BrokerConfig:
    """Static broker configuration plus dynamic layers set at run time."""

    def __init__(self, props: Mapping[str, str] | None = None) -> None:
        self.static: dict[str, str] = dict(props or {})
        self.dynamic_default: dict[str, str] = {}  # /config/brokers/<default>
        self.dynamic_broker: dict[str, str] = {}  # /config/brokers/<id>
        for name, raw in self.static.items():
            d = BROKER_CONFIGS.get(name)
            if d is not None:
                _parse(d, raw)  # validates

    # -- raw lookup through the layers
    def raw(self, name: str) -> tuple[str | None, int]:
        for layer, src in (
            (self.dynamic_broker, SRC_DYNAMIC_BROKER),
            (self.dynamic_default, SRC_DYNAMIC_DEFAULT_BROKER),
            (self.static, SRC_STATIC_BROKER),
        ):
            if name in layer:
                return layer[name], src
        d = BROKER_CONFIGS.get(name)
        return (d.default if d else None), SRC_DEFAULT

    def get(self, name: str) -> Any:
        d = BROKER_CONFIGS[name]
        return parse_value(d, self.raw(name)[0])

    # -- convenient typed accessors
    @property
    def node_id(self) -> int:
        nid: int = self.get("node.id")
        if nid < 0:
            nid = self.get("broker.id")
        return max(nid, 0)

    @property
    def log_dirs(self) -> list[Path]:
        raw = self.raw("log.dirs")[0] or self.raw("log.dir")[0] or "./odradek-data"
        return [Path(p.strip()) for p in raw.split(",") if p.strip()]

    @property
    def listeners(self) -> list[tuple[str, str, int]]:
        return parse_listeners(self.raw("listeners")[0] or "PLAINTEXT://127.0.0.1:9092")

    @property
    def advertised_listeners(self) -> list[tuple[str, str, int]]:
        raw = self.raw("advertised.listeners")[0]
        if not raw:
            return self.listeners
        return parse_listeners(raw)

    # -- topic config resolution
    def topic_default(self, name: str) -> tuple[str | None, int, str | None]:
        """(raw value, source, synonym name) a topic inherits for ``name``."""
        for syn in TOPIC_SYNONYMS[name]:
            raw, src = self.raw(syn)
            if raw is not None and src != SRC_DEFAULT:
                return _scaled(syn, raw), src, syn
        for syn in TOPIC_SYNONYMS[name]:
            raw, src = self.raw(syn)
            if raw is not None:
                return _scaled(syn, raw), src, syn
        return TOPIC_CONFIGS[name].default, SRC_DEFAULT, None

    def topic_value(self, name: str, overrides: Mapping[str, str]) -> tuple[Any, int]:
        if name in overrides:
            return parse_value(TOPIC_CONFIGS[name], overrides[name]), SRC_DYNAMIC_TOPIC
        raw, src, _ = self.topic_default(name)
        return parse_value(TOPIC_CONFIGS[name], raw), src

    def set_dynamic(self, per_broker: bool, values: Mapping[str, str]) -> None:
        layer = self.dynamic_broker if per_broker else self.dynamic_default
        layer.clear()
        layer.update(values)

    def layers(self, name: str) -> list[tuple[str, int]]:
        """Every value ``name`` has, highest priority first, with its source (dynamic per broker, dynamic
        cluster default, static, default): the synonyms DescribeConfigs lists for a broker config."""
        out = [(layer[name], src) for layer, src in (
            (self.dynamic_broker, SRC_DYNAMIC_BROKER),
            (self.dynamic_default, SRC_DYNAMIC_DEFAULT_BROKER),
            (self.static, SRC_STATIC_BROKER),
        ) if name in layer]
        d = BROKER_CONFIGS.get(name)
        if d is not None and d.default is not None:
            out.append((d.default, SRC_DEFAULT))
        return out

    @staticmethod
    def validate_dynamic(configs: Mapping[str, str], *, per_broker: bool) -> list[str]:
        """Kafka's DynamicBrokerConfig.validateConfigs for a change of a broker's (``per_broker``) or the
        cluster's default dynamic configs; raises :class:`ConfigError` with Kafka's message (answered
        INVALID_REQUEST), else returns the names given that odradek does not act on (Kafka 4.4 configs
        odradek does not implement, and names no Kafka broker knows, which Kafka stores all the same)."""
        names = sorted(configs)
        security = [n for n in names if n in DYNAMIC_SECURITY_CONFIGS]
        if security:
            raise ConfigError("These security configs can be dynamically updated only per-listener using the "
                              f"listener prefix: [{', '.join(security)}]")
        read_only = [n for n in names if n in BROKER_CONFIGS and n not in DYNAMIC_BROKER_CONFIGS]
        if read_only:
            raise ConfigError(f"Cannot update these configs dynamically: [{', '.join(read_only)}]")
        if not per_broker:
            only_per_broker = [n for n in names if n.startswith("listener.name.")
                               or (n in BROKER_CONFIGS and BROKER_CONFIGS[n].dynamic == PER_BROKER)]
            if only_per_broker:
                raise ConfigError("Cannot update these configs at default cluster level, broker id must be "
                                  f"specified: [{', '.join(only_per_broker)}]")
        for n in names:
            d = BROKER_CONFIGS.get(n)
            if d is not None:
                _parse(d, configs[n])
        return [n for n in names if n not in BROKER_CONFIGS or not BROKER_CONFIGS[n].implemented]


def _scaled(syn: str, raw: str) -> str:
    unit = _UNIT.get(syn)
    if unit is None:
        return raw
    try:
        n = int(raw)
    except ValueError:
        return raw
    return str(n * unit) if n >= 0 else str(n)


def parse_listeners(raw: str) -> list[tuple[str, str, int]]:
    """``NAME://host:port,...`` → [(name, host, port)]. Empty host means all interfaces."""
    out: list[tuple[str, str, int]] = []
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" not in item:
            raise ConfigError(f"listener {item!r} is not of the form NAME://host:port")
        name, rest = item.split("://", 1)
        host, _, port = rest.rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        try:
            port_n = int(port)
        except ValueError:
            raise ConfigError(f"listener {item!r} has no valid port") from None
        out.append((name, host, port_n))
    if not out:
        raise ConfigError("no listeners configured")
    return out
