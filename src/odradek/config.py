"""Broker and topic configuration: Kafka's names, types, defaults and synonyms.

A topic's effective value of a config is, in order: the topic's own override, the
dynamic per-broker value, the dynamic cluster-wide broker default, the static broker
value (server.properties / --override), the default. Topic configs name their broker
synonyms exactly as Kafka does (``retention.ms`` ← ``log.retention.ms`` ←
``log.retention.minutes`` ← ``log.retention.hours``).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


@dataclass(frozen=True)
class ConfigDef:
    name: str
    type: int
    default: str | None
    doc: str = ""
    valid: Callable[[Any], bool] | None = None
    valid_doc: str = ""
    sensitive: bool = False


def _parse(d: ConfigDef, raw: str | None) -> Any:
    if raw is None:
        return None
    raw = raw.strip()
    t = d.type
    try:
        if t == T_BOOLEAN:
            low = raw.lower()
            if low not in ("true", "false"):
                raise ValueError(raw)
            value: Any = low == "true"
        elif t in (T_INT, T_SHORT, T_LONG):
            value = int(raw)
            limit = {T_INT: 2**31, T_SHORT: 2**15, T_LONG: 2**63}[t]
            if not -limit <= value < limit:
                raise ValueError(raw)
        elif t == T_DOUBLE:
            value = float(raw)
        elif t == T_LIST:
            value = [x.strip() for x in raw.split(",") if x.strip()]
        else:
            value = raw
    except ValueError:
        raise ConfigError(f"Invalid value {raw} for configuration {d.name}") from None
    if d.valid is not None and not d.valid(value):
        raise ConfigError(
            f"Invalid value {raw} for configuration {d.name}: {d.valid_doc or 'not in the valid range'}"
        )
    return value


def _ge(n: int) -> Callable[[Any], bool]:
    return lambda v: v >= n


def _one_of(*options: str) -> Callable[[Any], bool]:
    return lambda v: v in options


def _policy(v: Any) -> bool:
    # an empty list is valid, as in Kafka 3.9 (ConfigDef.ValidList checks each item only): neither
    # retention nor compaction then applies
    return all(p in ("delete", "compact") for p in v)


# ---------------------------------------------------------------------------
# topic configs: name -> (definition, broker synonyms in priority order)

_TOPIC_DEFS: list[tuple[ConfigDef, tuple[str, ...]]] = [
    (ConfigDef("cleanup.policy", T_LIST, "delete", "delete and/or compact", _policy, "[delete, compact]"),
     ("log.cleanup.policy",)),
    (ConfigDef("compression.type", T_STRING, "producer", "final compression type",
               _one_of("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
               "[uncompressed, zstd, lz4, snappy, gzip, producer]"), ("compression.type",)),
    (ConfigDef("delete.retention.ms", T_LONG, "86400000", "tombstone retention", _ge(0)),
     ("log.cleaner.delete.retention.ms",)),
    (ConfigDef("file.delete.delay.ms", T_LONG, "60000", "delay before deleting a file", _ge(0)),
     ("log.segment.delete.delay.ms",)),
    (ConfigDef("flush.messages", T_LONG, str(LONG_MAX), "messages between fsyncs", _ge(1)),
     ("log.flush.interval.messages",)),
    (ConfigDef("flush.ms", T_LONG, str(LONG_MAX), "ms between fsyncs", _ge(0)),
     ("log.flush.interval.ms", "log.flush.scheduler.interval.ms")),
    (ConfigDef("index.interval.bytes", T_INT, "4096", "bytes between offset index entries", _ge(0)),
     ("log.index.interval.bytes",)),
    (ConfigDef("max.compaction.lag.ms", T_LONG, str(LONG_MAX), "max time a message stays uncompacted", _ge(1)),
     ("log.cleaner.max.compaction.lag.ms",)),
    (ConfigDef("max.message.bytes", T_INT, "1048588", "largest record batch size", _ge(0)),
     ("message.max.bytes",)),
    (ConfigDef("message.timestamp.after.max.ms", T_LONG, "3600000", "max future timestamp skew (KIP-937)", _ge(0)),
     ("log.message.timestamp.after.max.ms",)),
    (ConfigDef("message.timestamp.before.max.ms", T_LONG, str(LONG_MAX), "max past timestamp skew", _ge(0)),
     ("log.message.timestamp.before.max.ms",)),
    (ConfigDef("message.timestamp.type", T_STRING, "CreateTime", "CreateTime or LogAppendTime",
               _one_of("CreateTime", "LogAppendTime"), "[CreateTime, LogAppendTime]"),
     ("log.message.timestamp.type",)),
    (ConfigDef("min.cleanable.dirty.ratio", T_DOUBLE, "0.5", "dirty ratio that triggers compaction",
               lambda v: 0 <= v <= 1, "[0,...,1]"), ("log.cleaner.min.cleanable.ratio",)),
    (ConfigDef("min.compaction.lag.ms", T_LONG, "0", "min time a message stays uncompacted", _ge(0)),
     ("log.cleaner.min.compaction.lag.ms",)),
    (ConfigDef("min.insync.replicas", T_INT, "1", "replicas that must acknowledge acks=all", _ge(1)),
     ("min.insync.replicas",)),
    (ConfigDef("preallocate", T_BOOLEAN, "false", "preallocate segment files"), ("log.preallocate",)),
    (ConfigDef("retention.bytes", T_LONG, "-1", "max partition size before deleting old segments"),
     ("log.retention.bytes",)),
    (ConfigDef("retention.ms", T_LONG, "604800000", "max age before deleting old segments", _ge(-1)),
     ("log.retention.ms", "log.retention.minutes", "log.retention.hours")),
    (ConfigDef("segment.bytes", T_INT, "1073741824", "segment file size", _ge(14)),
     ("log.segment.bytes",)),
    (ConfigDef("segment.index.bytes", T_INT, "10485760", "offset index size", _ge(4)),
     ("log.index.size.max.bytes",)),
    (ConfigDef("segment.jitter.ms", T_LONG, "0", "random jitter on segment.ms", _ge(0)),
     ("log.roll.jitter.ms", "log.roll.jitter.hours")),
    (ConfigDef("segment.ms", T_LONG, "604800000", "time before rolling a segment", _ge(1)),
     ("log.roll.ms", "log.roll.hours")),
    (ConfigDef("unclean.leader.election.enable", T_BOOLEAN, "false", "allow out-of-ISR leaders"),
     ("unclean.leader.election.enable",)),
    # replication quotas (KIP-73): "partition:broker,..." or "*" (all replicas of the topic)
    (ConfigDef("leader.replication.throttled.replicas", T_LIST, "",
               "replicas whose leader-side replication is throttled"), ()),
    (ConfigDef("follower.replication.throttled.replicas", T_LIST, "",
               "replicas whose follower-side replication is throttled"), ()),
]
# Deprecated topic configs that Kafka 3.9 still accepts (and 4.0 removes): validated, stored and described
# as Kafka 3.9 does, otherwise ignored with a warning (``validate_topic_configs``). message.format.version
# and message.downconversion.enable: KIP-724 (the format is v2 from inter.broker.protocol.version 3.0 on;
# down-conversion for old fetchers is not done here); message.timestamp.difference.max.ms: KIP-937
# (message.timestamp.before.max.ms / message.timestamp.after.max.ms replace it).
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?(-IV\d+)?$")
DEPRECATED_TOPIC_CONFIGS = ("message.format.version", "message.downconversion.enable",
                            "message.timestamp.difference.max.ms")
_TOPIC_DEFS += [
    (ConfigDef("message.format.version", T_STRING, "3.0-IV1", "[DEPRECATED] message format version",
               lambda v: bool(_VERSION.match(v)), "a version such as 2.8 or 3.0-IV1"),
     ("log.message.format.version",)),
    (ConfigDef("message.downconversion.enable", T_BOOLEAN, "true", "[DEPRECATED] down-convert for old fetchers"),
     ("log.message.downconversion.enable",)),
    (ConfigDef("message.timestamp.difference.max.ms", T_LONG, str(LONG_MAX),
               "[DEPRECATED] max timestamp skew", _ge(0)), ("log.message.timestamp.difference.max.ms",)),
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
    ConfigDef("listeners", T_STRING, "PLAINTEXT://127.0.0.1:9092", "listener URIs"),
    ConfigDef("advertised.listeners", T_STRING, None, "listeners published to clients"),
    ConfigDef("http.listeners", T_STRING, "http://127.0.0.1:9644",
              "HTTP endpoint serving /metrics (Prometheus); empty disables it, port 0 binds a free port"),
    ConfigDef("log.dirs", T_STRING, None, "log directories (comma separated)"),
    ConfigDef("log.dir", T_STRING, "./odradek-data", "log directory when log.dirs is unset"),
    ConfigDef("node.id", T_INT, "-1", "this broker's id"),
    ConfigDef("broker.id", T_INT, "-1", "this broker's id (ZooKeeper-era name)"),
    ConfigDef("broker.rack", T_STRING, None, "rack of this broker"),
    ConfigDef("num.partitions", T_INT, "1", "default partition count", _ge(1)),
    ConfigDef("default.replication.factor", T_INT, "1", "default replication factor", _ge(1)),
    ConfigDef("auto.create.topics.enable", T_BOOLEAN, "true", "create topics on metadata requests"),
    ConfigDef("delete.topic.enable", T_BOOLEAN, "true", "allow topic deletion"),
    ConfigDef("log.retention.check.interval.ms", T_LONG, "300000", "retention check period", _ge(1)),
    ConfigDef("log.flush.offset.checkpoint.interval.ms", T_INT, "60000", "recovery point checkpoint period", _ge(0)),
    ConfigDef("log.flush.start.offset.checkpoint.interval.ms", T_INT, "60000", "log start checkpoint period", _ge(0)),
    ConfigDef("socket.request.max.bytes", T_INT, "104857600", "largest request", _ge(1)),
    # connection limits and request memory (Kafka's ConnectionQuotas, Selector idle expiry, MemoryPool)
    ConfigDef("max.connections", T_INT, str(2**31 - 1), "connections the broker keeps open at once", _ge(0)),
    ConfigDef("max.connections.per.ip", T_INT, str(2**31 - 1), "connections allowed from one address", _ge(0)),
    ConfigDef("max.connections.per.ip.overrides", T_STRING, "", "per-address limits: host:n,host:n"),
    ConfigDef("connections.max.idle.ms", T_LONG, "600000", "close a connection idle this long (negative: never)"),
    ConfigDef("queued.max.request.bytes", T_LONG, "-1", "bytes of requests read but not answered (-1: unbounded)"),
    # client quotas (Kafka's ClientQuotaManagerConfig): the sampled windows rates are measured over
    ConfigDef("quota.window.num", T_INT, "11", "samples a client quota's rate is measured over", _ge(1)),
    ConfigDef("quota.window.size.seconds", T_INT, "1", "length of one client quota sample", _ge(1)),
    ConfigDef("max.incremental.fetch.session.cache.slots", T_INT, "1000", "fetch sessions kept", _ge(0)),
    ConfigDef("min.incremental.fetch.session.eviction.ms", T_INT, "120000", "age before a session may be evicted", _ge(0)),
    ConfigDef("replica.fetch.max.bytes", T_INT, "1048576", "replica fetch size", _ge(0)),
    ConfigDef("offsets.topic.num.partitions", T_INT, "50", "partitions of __consumer_offsets", _ge(1)),
    ConfigDef("offsets.topic.replication.factor", T_SHORT, "3", "replication of __consumer_offsets", _ge(1)),
    ConfigDef("transaction.state.log.num.partitions", T_INT, "50", "partitions of __transaction_state", _ge(1)),
    ConfigDef("transaction.state.log.replication.factor", T_SHORT, "3", "replication of __transaction_state", _ge(1)),
    ConfigDef("transaction.state.log.min.isr", T_INT, "2", "min.insync.replicas of __transaction_state", _ge(1)),
    ConfigDef("transaction.state.log.segment.bytes", T_INT, "104857600", "segment size of __transaction_state",
              _ge(1)),
    ConfigDef("transaction.max.timeout.ms", T_INT, "900000", "largest transaction timeout a producer may ask",
              _ge(1)),
    ConfigDef("transactional.id.expiration.ms", T_INT, "604800000",
              "a transactional id idle this long (no transaction open) is forgotten", _ge(1)),
    ConfigDef("transaction.abort.timed.out.transaction.cleanup.interval.ms", T_INT, "10000",
              "period of the check that aborts transactions open past their timeout", _ge(1)),
    ConfigDef("transaction.remove.expired.transaction.cleanup.interval.ms", T_INT, "3600000",
              "period of the transactional id expiration check", _ge(1)),
    ConfigDef("transaction.partition.verification.enable", T_BOOLEAN, "true",
              "a leader asks the coordinator before a transaction's first append to a partition (KIP-890)"),
    ConfigDef("group.initial.rebalance.delay.ms", T_INT, "3000", "delay of the first rebalance", _ge(0)),
    ConfigDef("group.min.session.timeout.ms", T_INT, "6000", "smallest session timeout a member may ask", _ge(0)),
    ConfigDef("group.max.session.timeout.ms", T_INT, "1800000", "largest session timeout a member may ask", _ge(0)),
    ConfigDef("group.max.size", T_INT, str(2**31 - 1), "most members in one group", _ge(1)),
    ConfigDef("offset.metadata.max.bytes", T_INT, "4096", "largest commit metadata", _ge(0)),
    ConfigDef("offsets.commit.timeout.ms", T_INT, "5000", "an offset commit waits this long for replication",
              _ge(1)),
    # consumer group protocol (KIP-848)
    ConfigDef("group.consumer.heartbeat.interval.ms", T_INT, "5000", "heartbeat interval given to members", _ge(1)),
    ConfigDef("group.consumer.session.timeout.ms", T_INT, "45000", "a silent member is fenced after this", _ge(1)),
    ConfigDef("group.consumer.assignors", T_LIST, "uniform,range", "server-side assignors, the first is the default",
              lambda v: bool(v) and all(a in ("uniform", "range") for a in v), "[uniform, range]"),
    ConfigDef("group.consumer.max.size", T_INT, str(2**31 - 1), "most members in one consumer group", _ge(1)),
    ConfigDef("offsets.retention.minutes", T_INT, "10080", "how long offsets of empty groups are kept", _ge(1)),
    ConfigDef("offsets.retention.check.interval.ms", T_LONG, "600000", "offset expiry check period", _ge(1)),
    ConfigDef("offsets.topic.segment.bytes", T_INT, "104857600", "segment size of __consumer_offsets", _ge(1)),
    ConfigDef("log.retention.minutes", T_INT, None, "retention in minutes"),
    ConfigDef("log.retention.hours", T_INT, "168", "retention in hours"),
    ConfigDef("log.roll.hours", T_INT, "168", "roll period in hours", _ge(1)),
    ConfigDef("log.roll.jitter.hours", T_INT, "0", "roll jitter in hours", _ge(0)),
    ConfigDef("log.flush.scheduler.interval.ms", T_LONG, str(LONG_MAX), "flusher period"),
    ConfigDef("cluster.id", T_STRING, None, "cluster id (generated when unset)"),
    ConfigDef("zookeeper.connect", T_STRING, None, "ZooKeeper connection string (cluster mode)"),
    ConfigDef("zookeeper.session.timeout.ms", T_INT, "18000", "ZooKeeper session timeout"),
    ConfigDef("zookeeper.connection.timeout.ms", T_INT, None, "ZooKeeper connection timeout"),
    # cluster mode (replication, controller)
    ConfigDef("inter.broker.listener.name", T_STRING, None, "listener brokers use between themselves"),
    ConfigDef("replica.lag.time.max.ms", T_LONG, "30000", "a follower not caught up for this long leaves the ISR",
              _ge(1)),
    ConfigDef("replica.fetch.wait.max.ms", T_INT, "500", "follower fetch long-poll time", _ge(0)),
    ConfigDef("replica.fetch.min.bytes", T_INT, "1", "follower fetch minimum bytes", _ge(1)),
    ConfigDef("replica.fetch.response.max.bytes", T_INT, "10485760", "follower fetch response size", _ge(0)),
    ConfigDef("replica.fetch.backoff.ms", T_INT, "1000", "follower back-off after a fetch error", _ge(0)),
    ConfigDef("replica.socket.timeout.ms", T_INT, "30000", "follower socket timeout", _ge(1)),
    ConfigDef("replica.high.watermark.checkpoint.interval.ms", T_LONG, "5000", "high watermark checkpoint period",
              _ge(1)),
    ConfigDef("controller.socket.timeout.ms", T_INT, "30000", "controller-to-broker request timeout", _ge(1)),
    ConfigDef("leader.replication.throttled.rate", T_LONG, str(LONG_MAX),
              "bytes/s a leader sends to throttled followers", _ge(1)),
    ConfigDef("follower.replication.throttled.rate", T_LONG, str(LONG_MAX),
              "bytes/s a follower fetches for throttled replicas", _ge(1)),
    ConfigDef("auto.leader.rebalance.enable", T_BOOLEAN, "true", "move leadership back to preferred replicas"),
    ConfigDef("leader.imbalance.per.broker.percentage", T_INT, "10", "imbalance that triggers a rebalance", _ge(0)),
    ConfigDef("leader.imbalance.check.interval.seconds", T_LONG, "300", "leader balance check period", _ge(1)),
    ConfigDef("controlled.shutdown.enable", T_BOOLEAN, "true", "move leadership away before stopping"),
    ConfigDef("controlled.shutdown.max.retries", T_INT, "3", "controlled shutdown attempts", _ge(1)),
    ConfigDef("controlled.shutdown.retry.backoff.ms", T_LONG, "5000", "pause between attempts", _ge(0)),
    ConfigDef("odradek.validate.records", T_BOOLEAN, "true",
              "walk uncompressed records on produce to check the record count"),
    # idempotent producer state (KIP-854; Kafka's ProducerStateManagerConfig), odradek.log.producer_state
    ConfigDef("producer.id.expiration.ms", T_INT, "86400000",
              "a producer id idle this long with no open transaction is forgotten by each partition", _ge(1)),
    ConfigDef("producer.id.expiration.check.interval.ms", T_INT, "600000",
              "period of the producer id expiration check", _ge(1)),
    # security protocols (odradek.security.listeners) and the listeners of
    # cluster mode: which one brokers talk to each other on (KafkaConfig's interBrokerListenerName),
    # and the controller's own listener (KIP-291)
    ConfigDef("listener.security.protocol.map", T_STRING,
              "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
              "security protocol of each listener name"),
    ConfigDef("security.inter.broker.protocol", T_STRING, "PLAINTEXT",
              "security protocol between brokers; names the inter-broker "
              "listener when inter.broker.listener.name is unset",
              lambda v: v.upper() in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
              "[PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL]"),
    ConfigDef("control.plane.listener.name", T_STRING, None, "listener the controller's requests come in on"),
    # TLS of SSL / SASL_SSL listeners (odradek.security.tls; each also as listener.name.<l>.<name>)
    ConfigDef("ssl.keystore.type", T_STRING, "PEM", "key store format (PEM only)"),
    ConfigDef("ssl.keystore.location", T_STRING, None, "PEM file with the private key and certificate chain"),
    ConfigDef("ssl.keystore.certificate.chain", T_PASSWORD, None, "certificate chain, PEM text", sensitive=True),
    ConfigDef("ssl.keystore.key", T_PASSWORD, None, "private key, PEM text", sensitive=True),
    ConfigDef("ssl.keystore.password", T_PASSWORD, None, "password of the key store's key", sensitive=True),
    ConfigDef("ssl.key.password", T_PASSWORD, None, "password of the private key", sensitive=True),
    ConfigDef("ssl.truststore.type", T_STRING, "PEM", "trust store format (PEM only)"),
    ConfigDef("ssl.truststore.location", T_STRING, None, "PEM file of trusted CA certificates"),
    ConfigDef("ssl.truststore.certificates", T_PASSWORD, None, "trusted CA certificates, PEM text", sensitive=True),
    ConfigDef("ssl.truststore.password", T_PASSWORD, None, "unused for PEM trust stores", sensitive=True),
    ConfigDef("ssl.client.auth", T_STRING, "none", "client certificates: none, requested or required",
              lambda v: v.lower() in ("none", "requested", "required"), "[none, requested, required]"),
    ConfigDef("ssl.enabled.protocols", T_LIST, "TLSv1.2,TLSv1.3", "TLS versions offered"),
    ConfigDef("ssl.cipher.suites", T_LIST, None, "TLS 1.2 cipher suites (OpenSSL names)"),
    ConfigDef("ssl.endpoint.identification.algorithm", T_STRING, "https",
              "a broker's clients check the peer's host name against its certificate (empty: no check)"),
    ConfigDef("ssl.principal.mapping.rules", T_STRING, "DEFAULT",
              "rules mapping a certificate's distinguished name to a user name (KIP-371)"),
    # SASL of SASL_PLAINTEXT / SASL_SSL listeners (odradek.security.sasl)
    ConfigDef("sasl.enabled.mechanisms", T_LIST, "GSSAPI",
              "SASL mechanisms offered (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are implemented)"),
    ConfigDef("sasl.mechanism.inter.broker.protocol", T_STRING, "GSSAPI",
              "SASL mechanism brokers authenticate to each other with (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"),
    ConfigDef("sasl.jaas.config", T_PASSWORD, None, "JAAS login context (PlainLoginModule users)", sensitive=True),
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
    # log cleaner (compaction, odradek.log.cleaner)
    ConfigDef("log.cleaner.enable", T_BOOLEAN, "true", "run the log cleaner on compacted topics"),
    ConfigDef("log.cleaner.backoff.ms", T_LONG, "15000", "sleep when there is no log to clean", _ge(0)),
    ConfigDef("log.cleaner.dedupe.buffer.size", T_LONG, "134217728", "memory for the cleaner's offset map",
              _ge(24)),
    ConfigDef("log.cleaner.threads", T_INT, "1", "cleaner threads (one is used)", _ge(0)),
]
for _d, _syns in _TOPIC_DEFS:
    for _s in _syns:
        if _s not in {b.name for b in _BROKER_DEFS}:
            default = _d.default if _s == _syns[0] else None
            if _s in _UNIT or _s == "log.flush.scheduler.interval.ms":
                continue
            _BROKER_DEFS.append(ConfigDef(_s, _d.type, default, _d.doc, _d.valid, _d.valid_doc))
BROKER_CONFIGS: dict[str, ConfigDef] = {d.name: d for d in _BROKER_DEFS}
# flush.ms falls back to the scheduler interval, retention.ms to minutes/hours: the
# first synonym has no default of its own in those cases (as in Kafka).
for _name in ("log.flush.interval.ms", "log.retention.ms", "log.roll.ms", "log.roll.jitter.ms"):
    _old = BROKER_CONFIGS[_name]
    BROKER_CONFIGS[_name] = ConfigDef(_old.name, _old.type, None, _old.doc, _old.valid, _old.valid_doc)

# broker configs that IncrementalAlterConfigs may change at run time (cluster default or per broker)
DYNAMIC_BROKER_CONFIGS = frozenset(
    s for syns in TOPIC_SYNONYMS.values() for s in syns
) | {"log.retention.check.interval.ms", "num.partitions", "auto.create.topics.enable",
     "leader.replication.throttled.rate", "follower.replication.throttled.rate"}
DYNAMIC_BROKER_CONFIGS |= {"producer.id.expiration.ms"}  # dynamic in Kafka too (cluster default or per broker)


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
    return out


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
        return _parse(d, self.raw(name)[0])

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
            return _parse(TOPIC_CONFIGS[name], overrides[name]), SRC_DYNAMIC_TOPIC
        raw, src, _ = self.topic_default(name)
        return _parse(TOPIC_CONFIGS[name], raw), src

    def set_dynamic(self, per_broker: bool, values: Mapping[str, str]) -> None:
        layer = self.dynamic_broker if per_broker else self.dynamic_default
        layer.clear()
        layer.update(values)

    @staticmethod
    def validate_dynamic(name: str, raw: str) -> None:
        d = BROKER_CONFIGS.get(name)
        if d is None:
            raise ConfigError(f"Unknown broker config name: {name}")
        if name not in DYNAMIC_BROKER_CONFIGS:
            raise ConfigError(f"Cannot update these configs dynamically: {name}")
        _parse(d, raw)


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
