"""Kafka 4.4's broker configs: every name Kafka's broker knows, with its type, default, dynamic update
mode and valid values, as facts the broker's registry (:mod:`odradek.config`) is completed with.

A Kafka broker accepts, validates and describes each of these; :mod:`odradek.config` gives every one of
them a :class:`~odradek.config.ConfigDef`, so DescribeConfigs lists them as Kafka 4.4 does and
(Incremental)AlterConfigs accepts the dynamic ones (Kafka's ``DynamicBrokerConfig`` update modes) and
refuses the others with Kafka's errors. The ones odradek has no ConfigDef of its own for are marked not
implemented there: a broker given one warns at start-up, and logs when one is altered.

The table was read from Kafka 4.4's jars (``AbstractKafkaConfig.CONFIG_DEF``, the config keys of its
ConfigDef, and ``DynamicBrokerConfig.dynamicConfigUpdateModes``); tests/judges/test_config_names.py
reads the same jars and fails when a name, type, default or mode here differs.

One line per config: ``name|type|default|mode|valid values|flags``. ``default`` is ``!`` where Kafka has
none (the setting is required), ``~`` for null and ``""`` for the empty string; ``mode`` is ``read-only``,
``per-broker`` or ``cluster-wide``; ``valid values`` is Kafka's text of the validator (``[1,...]`` at least
1, ``[0,...,1]`` a closed range, ``[a, b]`` one of, ``(case insensitive) [A, B]``, ``non-empty string``,
``non-null string``, ``non-empty list``, ``[1,...,9] or -1``), empty when any value of the type is valid;
``internal`` in ``flags`` marks a config Kafka accepts but leaves out of DescribeConfigs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

KAFKA_VERSION = "4.4"

NO_DEFAULT = "!"
NULL = "~"


@dataclass(frozen=True)
class KafkaBrokerConfig:
    """One row of the table."""

    name: str
    type: str  # boolean, string, int, short, long, double, list, class, password
    default: str | None  # None: null (or no default)
    required: bool  # Kafka has no default: a broker must be given it
    mode: str  # read-only | per-broker | cluster-wide
    valid_doc: str
    internal: bool


_RANGE = re.compile(r"^\[(-?[\d.]+),\.\.\.(?:,(-?[\d.]+))?\](?: or (-?\d+))?$")


def _num(text: str) -> float | int:
    return float(text) if "." in text else int(text)


def validator(valid_doc: str) -> Callable[[Any], str | None] | None:
    """The check of Kafka's validator text: a function of the parsed value returning None when it is
    valid, else the reason Kafka gives (``Value must be at least 1``)."""
    doc = valid_doc.strip()
    if not doc:
        return None
    m = _RANGE.match(doc)
    if m:
        low, high = _num(m.group(1)), (_num(m.group(2)) if m.group(2) else None)
        extra = int(m.group(3)) if m.group(3) else None

        def in_range(v: Any) -> str | None:
            if v is None or v == extra:
                return None
            if v < low:
                return f"Value must be at least {m.group(1)}"
            if high is not None and v > high:
                return f"Value must be no more than {m.group(2)}"
            return None
        return in_range
    if doc == "non-empty string":
        return lambda v: "String may not be empty" if v is not None and not str(v).strip() else None
    if doc == "non-null string":
        return lambda v: "entry must be non null" if v is None else None
    if doc == "non-empty list":
        return lambda v: "Empty list not allowed" if v is not None and not v else None
    fold = doc.startswith("(case insensitive) ")
    if fold:
        doc = doc[len("(case insensitive) "):]
    if doc.startswith("[") and doc.endswith("]"):
        options = [o.strip() for o in doc[1:-1].split(",")]
        allowed = {o.lower() for o in options} if fold else set(options)

        def one_of(v: Any) -> str | None:
            items = v if isinstance(v, list) else [v]
            for item in items:
                if item is None:
                    continue
                if (str(item).lower() if fold else str(item)) not in allowed:
                    return f"String must be one of{' (case insensitive)' if fold else ''}: {', '.join(options)}"
            return None
        return one_of
    raise ValueError(f"unknown validator text {valid_doc!r}")


def _rows(table: str) -> dict[str, KafkaBrokerConfig]:
    out: dict[str, KafkaBrokerConfig] = {}
    for line in table.strip().splitlines():
        cells = (line.split("|") + ["", ""])[:6]
        name, typ, default, mode, valid, flags = cells
        raw: str | None = default
        if default in (NO_DEFAULT, NULL):
            raw = None
        elif default == '""':
            raw = ""
        out[name] = KafkaBrokerConfig(name, typ, raw, default == NO_DEFAULT, mode, valid, flags == "internal")
    return out


_KAFKA_44_BROKER_CONFIGS = """
add.partitions.to.txn.retry.backoff.max.ms|int|100|read-only|[0,...]
add.partitions.to.txn.retry.backoff.ms|int|20|read-only|[1,...]
advertised.listeners|list|~|read-only
alter.config.policy.class.name|class|~|read-only
alter.log.dirs.replication.quota.window.num|int|11|read-only|[1,...]
alter.log.dirs.replication.quota.window.size.seconds|int|1|read-only|[1,...]
authorizer.class.name|string|""|read-only|non-null string
auto.create.topics.enable|boolean|true|read-only
auto.leader.rebalance.enable|boolean|true|read-only
background.threads|int|10|cluster-wide|[1,...]
broker.heartbeat.interval.ms|int|2000|read-only
broker.id|int|-1|read-only
broker.rack|string|~|read-only
broker.session.timeout.ms|int|9000|read-only
client.quota.callback.class|class|~|read-only
compression.gzip.level|int|-1|cluster-wide|[1,...,9] or -1
compression.lz4.level|int|9|cluster-wide|[1,...,17]
compression.type|string|producer|cluster-wide|[uncompressed, zstd, lz4, snappy, gzip, producer]
compression.zstd.level|int|3|cluster-wide|[-131072,...,22]
config.providers|list|""|cluster-wide
connection.failed.authentication.delay.ms|int|100|read-only|[0,...]
connections.max.idle.ms|long|600000|read-only
connections.max.reauth.ms|long|0|read-only
controlled.shutdown.enable|boolean|true|read-only
controller.listener.names|list|!|read-only
controller.performance.always.log.threshold.ms|long|2000|read-only|[0,...]|internal
controller.performance.sample.period.ms|long|60000|read-only|[100,...]|internal
controller.quorum.append.linger.ms|int|25|read-only|[0,...]
controller.quorum.auto.join.enable|boolean|false|read-only
controller.quorum.bootstrap.servers|list|""|read-only|non-empty list
controller.quorum.election.backoff.max.ms|int|1000|read-only|[0,...]
controller.quorum.election.timeout.ms|int|1000|read-only|[0,...]
controller.quorum.fetch.max.bytes|int|1048576|read-only|[1,...]
controller.quorum.fetch.snapshot.max.bytes|int|1048576|read-only|[1,...]
controller.quorum.fetch.timeout.ms|int|2000|read-only|[0,...]
controller.quorum.request.timeout.ms|int|2000|read-only|[0,...]
controller.quorum.retry.backoff.ms|int|20|read-only|[0,...]
controller.quorum.voters|list|""|read-only|non-empty list
controller.quota.window.num|int|11|read-only|[1,...]
controller.quota.window.size.seconds|int|1|read-only|[1,...]
controller.socket.timeout.ms|int|30000|read-only
cordoned.log.dirs|list|""|per-broker
create.topic.policy.class.name|class|~|read-only
default.replication.factor|int|1|read-only
delegation.token.expiry.check.interval.ms|long|3600000|read-only|[1,...]
delegation.token.expiry.time.ms|long|86400000|read-only|[1,...]
delegation.token.max.lifetime.ms|long|604800000|read-only|[1,...]
delegation.token.secret.key|password|~|read-only
delete.records.purgatory.purge.interval.requests|int|1|read-only
delete.topic.enable|boolean|true|read-only
early.start.listeners|list|~|read-only
errors.deadletterqueue.auto.create.topics.enable|boolean|false|cluster-wide
errors.deadletterqueue.topic.name.prefix|string|dlq.|cluster-wide
fetch.max.bytes|int|57671680|read-only|[1024,...]
fetch.purgatory.purge.interval.requests|int|1000|read-only
follower.fetch.last.tiered.offset.enable|boolean|false|cluster-wide
group.consumer.assignment.interval.ms|int|1000|cluster-wide|[0,...]
group.consumer.assignor.offload.enable|boolean|true|cluster-wide||internal
group.consumer.assignors|list|uniform,range|read-only
group.consumer.heartbeat.interval.ms|int|5000|read-only|[1,...]
group.consumer.max.assignment.interval.ms|int|15000|read-only|[0,...]
group.consumer.max.heartbeat.interval.ms|int|15000|read-only|[1,...]
group.consumer.max.session.timeout.ms|int|60000|read-only|[1,...]
group.consumer.max.size|int|2147483647|read-only|[1,...]
group.consumer.migration.policy|string|bidirectional|read-only|(case insensitive) [DISABLED, DOWNGRADE, UPGRADE, BIDIRECTIONAL]
group.consumer.min.assignment.interval.ms|int|0|read-only|[0,...]
group.consumer.min.heartbeat.interval.ms|int|5000|read-only|[1,...]
group.consumer.min.session.timeout.ms|int|45000|read-only|[1,...]
group.consumer.regex.refresh.interval.ms|int|600000|read-only|[10000,...]|internal
group.consumer.session.timeout.ms|int|45000|read-only|[1,...]
group.coordinator.append.linger.ms|int|-1|read-only|[-1,...]
group.coordinator.background.threads|int|2|read-only|[1,...]
group.coordinator.cached.buffer.max.bytes|int|1048588|cluster-wide|[524288,...]
group.coordinator.rebalance.protocols|list|classic,consumer,streams|read-only|[consumer, classic, share, streams]
group.coordinator.threads|int|4|read-only|[1,...]
group.initial.rebalance.delay.ms|int|3000|read-only
group.max.session.timeout.ms|int|1800000|read-only
group.max.size|int|2147483647|read-only|[1,...]
group.min.session.timeout.ms|int|6000|read-only
group.share.assignment.interval.ms|int|1000|cluster-wide|[0,...]
group.share.assignor.offload.enable|boolean|true|cluster-wide||internal
group.share.assignors|list|simple|read-only
group.share.delivery.count.limit|int|5|read-only|[2,...,10]
group.share.dlq.manager.class.name|string|org.apache.kafka.server.share.dlq.DefaultShareGroupDLQManager|read-only||internal
group.share.heartbeat.interval.ms|int|5000|read-only|[1,...]
group.share.initialize.retry.interval.ms|int|30000|read-only|[1,...]|internal
group.share.max.assignment.interval.ms|int|15000|read-only|[0,...]
group.share.max.delivery.count.limit|int|10|read-only|[5,...,25]
group.share.max.heartbeat.interval.ms|int|15000|read-only|[1,...]
group.share.max.partition.max.record.locks|int|4000|read-only|[2000,...,10000]
group.share.max.record.lock.duration.ms|int|60000|read-only|[30000,...,3600000]
group.share.max.session.timeout.ms|int|60000|read-only|[1,...]
group.share.max.share.sessions|int|2000|read-only|[1,...]
group.share.max.size|int|200|read-only|[1,...,1000]
group.share.min.assignment.interval.ms|int|0|read-only|[0,...]
group.share.min.delivery.count.limit|int|2|read-only|[2,...,5]
group.share.min.heartbeat.interval.ms|int|5000|read-only|[1,...]
group.share.min.partition.max.record.locks|int|100|read-only|[100,...,2000]
group.share.min.record.lock.duration.ms|int|15000|read-only|[1000,...,30000]
group.share.min.session.timeout.ms|int|45000|read-only|[1,...]
group.share.partition.max.record.locks|int|2000|read-only|[100,...,10000]
group.share.persister.class.name|string|org.apache.kafka.server.share.persister.DefaultStatePersister|read-only||internal
group.share.record.lock.duration.ms|int|30000|read-only|[1000,...,3600000]
group.share.session.timeout.ms|int|45000|read-only|[1,...]
group.streams.acceptable.recovery.lag|long|10000|read-only|[0,...]|internal
group.streams.assignment.interval.ms|int|1000|cluster-wide|[0,...]
group.streams.assignor.offload.enable|boolean|true|cluster-wide||internal
group.streams.assignors|list|sticky|read-only
group.streams.heartbeat.interval.ms|int|5000|read-only|[1,...]
group.streams.initial.rebalance.delay.ms|int|3000|read-only|[0,...]
group.streams.max.assignment.interval.ms|int|15000|read-only|[0,...]
group.streams.max.heartbeat.interval.ms|int|15000|read-only|[1,...]
group.streams.max.session.timeout.ms|int|60000|read-only|[1,...]
group.streams.max.size|int|2147483647|read-only|[1,...]
group.streams.max.standby.replicas|int|2|read-only|[0,...]
group.streams.max.warmup.replicas|int|20|read-only|[0,...]|internal
group.streams.min.assignment.interval.ms|int|0|read-only|[0,...]
group.streams.min.heartbeat.interval.ms|int|5000|read-only|[1,...]
group.streams.min.session.timeout.ms|int|45000|read-only|[1,...]
group.streams.min.task.offset.interval.ms|int|15000|read-only|[1,...]|internal
group.streams.num.standby.replicas|int|0|read-only|[0,...]
group.streams.num.warmup.replicas|int|2|read-only|[0,...]|internal
group.streams.rack.aware.assignment.tags|list|""|read-only
group.streams.session.timeout.ms|int|45000|read-only|[1,...]
group.streams.task.offset.interval.ms|int|60000|read-only|[1,...]|internal
group.streams.topology.description.plugin.class|class|~|read-only
initial.broker.registration.timeout.ms|int|60000|read-only
inter.broker.listener.name|string|~|read-only
internal.metadata.delete.delay.millis|long|60000|read-only||internal
internal.metadata.log.segment.bytes|int|~|read-only||internal
internal.metadata.max.batch.size.in.bytes|int|8388608|read-only||internal
kafka.metrics.polling.interval.secs|int|10|read-only|[1,...]
kafka.metrics.reporters|list|""|read-only
leader.imbalance.check.interval.seconds|long|300|read-only|[1,...]
listener.security.protocol.map|string|SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT|per-broker
listeners|list|PLAINTEXT://:9092|per-broker
log.cleaner.backoff.ms|long|15000|cluster-wide|[0,...]
log.cleaner.dedupe.buffer.size|long|134217728|cluster-wide
log.cleaner.delete.retention.ms|long|86400000|cluster-wide|[0,...]
log.cleaner.enable|boolean|true|read-only
log.cleaner.io.buffer.load.factor|double|0.9|cluster-wide
log.cleaner.io.buffer.size|int|524288|cluster-wide|[0,...]
log.cleaner.io.max.bytes.per.second|double|1.7976931348623157E308|cluster-wide
log.cleaner.max.compaction.lag.ms|long|9223372036854775807|cluster-wide|[1,...]
log.cleaner.min.cleanable.ratio|double|0.5|cluster-wide|[0,...,1]
log.cleaner.min.compaction.lag.ms|long|0|cluster-wide|[0,...]
log.cleaner.threads|int|1|cluster-wide|[0,...]
log.cleanup.policy|list|delete|cluster-wide|[compact, delete]
log.dir|list|/tmp/kafka-logs|read-only
log.dir.failure.timeout.ms|long|30000|read-only|[1,...]
log.dirs|list|~|read-only
log.flush.interval.messages|long|9223372036854775807|cluster-wide|[1,...]
log.flush.interval.ms|long|~|cluster-wide
log.flush.offset.checkpoint.interval.ms|int|60000|read-only|[0,...]
log.flush.scheduler.interval.ms|long|9223372036854775807|read-only
log.flush.start.offset.checkpoint.interval.ms|int|60000|read-only|[0,...]
log.index.interval.bytes|int|4096|cluster-wide|[0,...]
log.index.size.max.bytes|int|10485760|cluster-wide|[4,...]
log.initial.task.delay.ms|long|30000|read-only|[0,...]|internal
log.local.retention.bytes|long|-2|cluster-wide|[-2,...]
log.local.retention.ms|long|-2|cluster-wide|[-2,...]
log.message.timestamp.after.max.ms|long|3600000|cluster-wide|[0,...]
log.message.timestamp.before.max.ms|long|9223372036854775807|cluster-wide|[0,...]
log.message.timestamp.type|string|CreateTime|cluster-wide|[CreateTime, LogAppendTime]
log.preallocate|boolean|false|cluster-wide
log.remote.copy.lag.bytes|long|-1|cluster-wide|[-1,...]
log.remote.copy.lag.ms|long|0|cluster-wide|[-1,...]
log.retention.bytes|long|-1|cluster-wide
log.retention.check.interval.ms|long|300000|read-only|[1,...]
log.retention.hours|int|168|read-only
log.retention.minutes|int|~|read-only
log.retention.ms|long|~|cluster-wide
log.roll.hours|int|168|read-only|[1,...]
log.roll.jitter.hours|int|0|read-only|[0,...]
log.roll.jitter.ms|long|~|cluster-wide
log.roll.ms|long|~|cluster-wide
log.segment.bytes|int|1073741824|cluster-wide|[1048576,...]
log.segment.delete.delay.ms|long|60000|cluster-wide|[0,...]
max.connection.creation.rate|int|2147483647|cluster-wide|[0,...]
max.connections|int|2147483647|cluster-wide|[0,...]
max.connections.per.ip|int|2147483647|cluster-wide|[0,...]
max.connections.per.ip.overrides|string|""|cluster-wide
max.decompressed.message.bytes|int|2147483639|cluster-wide|[1,...,2147483639]
max.incremental.fetch.session.cache.slots|int|1000|read-only|[0,...]
max.request.partition.size.limit|int|2000|read-only|[1,...]
message.max.bytes|int|1048588|cluster-wide|[0,...]
metadata.log.dir|string|~|read-only
metadata.log.max.record.bytes.between.snapshots|long|20971520|read-only|[1,...]
metadata.log.max.snapshot.interval.ms|long|3600000|read-only|[0,...]
metadata.log.segment.bytes|int|1073741824|read-only|[8388608,...]
metadata.log.segment.ms|long|604800000|read-only
metadata.max.idle.interval.ms|int|500|read-only|[0,...]
metadata.max.retention.bytes|long|104857600|read-only
metadata.max.retention.ms|long|604800000|read-only
metric.reporters|list|org.apache.kafka.common.metrics.JmxReporter|cluster-wide
metrics.num.samples|int|2|read-only|[1,...]
metrics.recording.level|string|INFO|read-only
metrics.sample.window.ms|long|30000|read-only|[1,...]
min.insync.replicas|int|1|cluster-wide|[1,...]
node.id|int|!|read-only|[0,...]
num.io.threads|int|8|cluster-wide|[1,...]
num.network.threads|int|3|cluster-wide|[1,...]
num.partitions|int|1|read-only|[1,...]
num.recovery.threads.per.data.dir|int|2|cluster-wide|[1,...]
num.replica.alter.log.dirs.threads|int|~|read-only
num.replica.fetchers|int|1|cluster-wide|[1,...]
offset.metadata.max.bytes|int|4096|read-only
offsets.commit.timeout.ms|int|5000|read-only|[1,...]
offsets.load.buffer.size|int|5242880|read-only|[1,...]
offsets.retention.check.interval.ms|long|600000|read-only|[1,...]
offsets.retention.minutes|int|10080|read-only|[1,...]
offsets.topic.compression.codec|int|0|read-only
offsets.topic.num.partitions|int|50|read-only|[1,...]
offsets.topic.replication.factor|short|3|read-only|[1,...]
offsets.topic.segment.bytes|int|104857600|read-only|[1,...]
principal.builder.class|class|org.apache.kafka.common.security.authenticator.DefaultKafkaPrincipalBuilder|per-broker
process.roles|list|!|read-only|[broker, controller]
producer.id.expiration.check.interval.ms|int|600000|read-only|[1,...]|internal
producer.id.expiration.ms|int|86400000|cluster-wide|[1,...]
producer.purgatory.purge.interval.requests|int|1000|read-only
queued.max.request.bytes|long|-1|read-only
queued.max.requests|int|500|read-only|[1,...]
quota.window.num|int|11|read-only|[1,...]
quota.window.size.seconds|int|1|read-only|[1,...]
remote.fetch.max.wait.ms|int|500|cluster-wide|[1,...]
remote.list.offsets.request.timeout.ms|long|30000|cluster-wide|[1,...]
remote.log.index.file.cache.total.size.bytes|long|1073741824|cluster-wide|[1,...]
remote.log.index.file.cache.ttl.ms|long|900000|read-only|[-1,...]|internal
remote.log.manager.copier.thread.pool.size|int|10|cluster-wide|[1,...]
remote.log.manager.copy.max.bytes.per.second|long|9223372036854775807|cluster-wide|[1,...]
remote.log.manager.copy.quota.window.num|int|11|read-only|[1,...]
remote.log.manager.copy.quota.window.size.seconds|int|1|read-only|[1,...]
remote.log.manager.expiration.thread.pool.size|int|10|cluster-wide|[1,...]
remote.log.manager.fetch.max.bytes.per.second|long|9223372036854775807|cluster-wide|[1,...]
remote.log.manager.fetch.quota.window.num|int|11|read-only|[1,...]
remote.log.manager.fetch.quota.window.size.seconds|int|1|read-only|[1,...]
remote.log.manager.follower.thread.pool.size|int|2|cluster-wide|[1,...]
remote.log.manager.task.interval.ms|long|30000|read-only|[1,...]
remote.log.manager.task.retry.backoff.max.ms|long|30000|read-only|[1,...]|internal
remote.log.manager.task.retry.backoff.ms|long|500|read-only|[1,...]|internal
remote.log.manager.task.retry.jitter|double|0.2|read-only|[0,...,0.5]|internal
remote.log.manager.thread.pool.size|int|2|read-only|[1,...]
remote.log.metadata.custom.metadata.max.bytes|int|128|read-only|[0,...]
remote.log.metadata.manager.class.name|string|org.apache.kafka.server.log.remote.metadata.storage.TopicBasedRemoteLogMetadataManager|read-only|non-empty string
remote.log.metadata.manager.class.path|string|~|read-only
remote.log.metadata.manager.impl.prefix|string|rlmm.config.|read-only|non-empty string
remote.log.metadata.manager.listener.name|string|~|read-only|non-empty string
remote.log.reader.max.pending.tasks|int|100|read-only|[1,...]
remote.log.reader.threads|int|10|cluster-wide|[1,...]
remote.log.storage.manager.class.name|string|~|read-only|non-empty string
remote.log.storage.manager.class.path|string|~|read-only
remote.log.storage.manager.impl.prefix|string|rsm.config.|read-only|non-empty string
remote.log.storage.system.enable|boolean|false|read-only
replica.fetch.backoff.ms|int|1000|read-only|[0,...]
replica.fetch.max.bytes|int|1048576|read-only|[0,...]
replica.fetch.min.bytes|int|1|read-only
replica.fetch.response.max.bytes|int|10485760|read-only|[0,...]
replica.fetch.wait.max.ms|int|500|read-only
replica.high.watermark.checkpoint.interval.ms|long|5000|read-only
replica.lag.time.max.ms|long|30000|read-only
replica.selector.class|string|~|read-only
replica.socket.receive.buffer.bytes|int|65536|read-only
replica.socket.timeout.ms|int|30000|read-only
replication.quota.window.num|int|11|read-only|[1,...]
replication.quota.window.size.seconds|int|1|read-only|[1,...]
request.timeout.ms|int|30000|read-only
sasl.client.callback.handler.class|class|~|read-only
sasl.enabled.mechanisms|list|GSSAPI|per-broker
sasl.jaas.config|password|~|per-broker
sasl.kerberos.kinit.cmd|string|/usr/bin/kinit|per-broker
sasl.kerberos.min.time.before.relogin|long|60000|per-broker
sasl.kerberos.principal.to.local.rules|list|DEFAULT|per-broker
sasl.kerberos.service.name|string|~|per-broker
sasl.kerberos.ticket.renew.jitter|double|0.05|per-broker
sasl.kerberos.ticket.renew.window.factor|double|0.8|per-broker
sasl.login.callback.handler.class|class|~|read-only
sasl.login.class|class|~|read-only
sasl.login.connect.timeout.ms|int|~|read-only
sasl.login.read.timeout.ms|int|~|read-only
sasl.login.refresh.buffer.seconds|short|300|per-broker
sasl.login.refresh.min.period.seconds|short|60|per-broker
sasl.login.refresh.window.factor|double|0.8|per-broker
sasl.login.refresh.window.jitter|double|0.05|per-broker
sasl.login.retry.backoff.max.ms|long|10000|read-only
sasl.login.retry.backoff.ms|long|100|read-only
sasl.mechanism.controller.protocol|string|GSSAPI|read-only
sasl.mechanism.inter.broker.protocol|string|GSSAPI|per-broker
sasl.oauthbearer.allow.unverified.audience|boolean|false|read-only
sasl.oauthbearer.allow.unverified.issuer|boolean|false|read-only
sasl.oauthbearer.assertion.algorithm|string|RS256|read-only|(case insensitive) [ES256, RS256]
sasl.oauthbearer.assertion.claim.aud|string|~|read-only
sasl.oauthbearer.assertion.claim.exp.seconds|int|300|read-only|[0,...,86400]
sasl.oauthbearer.assertion.claim.iss|string|~|read-only
sasl.oauthbearer.assertion.claim.jti.include|boolean|false|read-only
sasl.oauthbearer.assertion.claim.nbf.seconds|int|60|read-only|[0,...,3600]
sasl.oauthbearer.assertion.claim.sub|string|~|read-only
sasl.oauthbearer.assertion.file|string|~|read-only
sasl.oauthbearer.assertion.private.key.file|string|~|read-only
sasl.oauthbearer.assertion.private.key.passphrase|password|~|read-only
sasl.oauthbearer.assertion.template.file|string|~|read-only
sasl.oauthbearer.client.credentials.client.id|string|~|read-only
sasl.oauthbearer.client.credentials.client.secret|password|~|read-only
sasl.oauthbearer.clock.skew.seconds|int|30|read-only
sasl.oauthbearer.expected.audience|list|""|read-only
sasl.oauthbearer.expected.issuer|string|~|read-only
sasl.oauthbearer.jwks.endpoint.refresh.ms|long|3600000|read-only
sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms|long|10000|read-only
sasl.oauthbearer.jwks.endpoint.retry.backoff.ms|long|100|read-only
sasl.oauthbearer.jwks.endpoint.url|string|~|read-only
sasl.oauthbearer.jwt.retriever.class|class|org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever|read-only
sasl.oauthbearer.jwt.validator.class|class|org.apache.kafka.common.security.oauthbearer.DefaultJwtValidator|read-only
sasl.oauthbearer.scope|string|~|read-only
sasl.oauthbearer.scope.claim.name|string|scope|read-only
sasl.oauthbearer.sub.claim.name|string|sub|read-only
sasl.oauthbearer.token.endpoint.url|string|~|read-only
sasl.server.callback.handler.class|class|~|read-only
sasl.server.max.receive.size|int|524288|read-only
security.inter.broker.protocol|string|PLAINTEXT|read-only|[PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL]
security.providers|string|~|read-only
server.max.startup.time.ms|long|9223372036854775807|read-only|[0,...]|internal
share.coordinator.append.linger.ms|int|-1|read-only|[-1,...]
share.coordinator.cached.buffer.max.bytes|int|1048588|cluster-wide|[524288,...]
share.coordinator.cold.partition.snapshot.interval.ms|int|300000|read-only|[1,...]|internal
share.coordinator.load.buffer.size|int|5242880|read-only|[1,...]
share.coordinator.snapshot.update.records.per.snapshot|int|500|read-only|[0,...,500]
share.coordinator.state.topic.compression.codec|int|0|read-only
share.coordinator.state.topic.min.isr|short|2|read-only|[1,...]
share.coordinator.state.topic.num.partitions|int|50|read-only|[1,...]
share.coordinator.state.topic.prune.interval.ms|int|300000|read-only|[1,...]|internal
share.coordinator.state.topic.replication.factor|short|3|read-only|[1,...]
share.coordinator.state.topic.segment.bytes|int|104857600|read-only|[1,...]
share.coordinator.threads|int|1|read-only|[1,...]
share.coordinator.write.timeout.ms|int|5000|read-only|[1,...]
share.fetch.purgatory.purge.interval.requests|int|1000|read-only
socket.connection.setup.timeout.max.ms|long|30000|read-only
socket.connection.setup.timeout.ms|long|10000|read-only
socket.listen.backlog.size|int|50|read-only|[1,...]
socket.receive.buffer.bytes|int|102400|read-only
socket.request.max.bytes|int|104857600|read-only|[1,...]
socket.send.buffer.bytes|int|102400|read-only
ssl.allow.dn.changes|boolean|false|read-only
ssl.allow.san.changes|boolean|false|read-only
ssl.cipher.suites|list|""|per-broker
ssl.client.auth|string|none|per-broker|[required, requested, none]
ssl.enabled.protocols|list|TLSv1.2,TLSv1.3|per-broker
ssl.endpoint.identification.algorithm|string|https|per-broker
ssl.engine.factory.class|class|~|per-broker
ssl.key.password|password|~|per-broker
ssl.keymanager.algorithm|string|SunX509|per-broker
ssl.keystore.certificate.chain|password|~|per-broker
ssl.keystore.key|password|~|per-broker
ssl.keystore.location|string|~|per-broker
ssl.keystore.password|password|~|per-broker
ssl.keystore.type|string|JKS|per-broker
ssl.principal.mapping.rules|string|DEFAULT|read-only
ssl.protocol|string|TLSv1.3|per-broker
ssl.provider|string|~|per-broker
ssl.secure.random.implementation|string|~|per-broker
ssl.trustmanager.algorithm|string|PKIX|per-broker
ssl.truststore.certificates|password|~|per-broker
ssl.truststore.location|string|~|per-broker
ssl.truststore.password|password|~|per-broker
ssl.truststore.type|string|JKS|per-broker
telemetry.max.bytes|int|1048576|read-only|[1,...]
transaction.abort.timed.out.transaction.cleanup.interval.ms|int|10000|read-only|[1,...]
transaction.max.timeout.ms|int|900000|read-only|[1,...]
transaction.partition.verification.enable|boolean|true|cluster-wide
transaction.remove.expired.transaction.cleanup.interval.ms|int|3600000|read-only|[1,...]
transaction.state.log.load.buffer.size|int|5242880|read-only|[1,...]
transaction.state.log.min.isr|int|2|read-only|[1,...]
transaction.state.log.num.partitions|int|50|read-only|[1,...]
transaction.state.log.replication.factor|short|3|read-only|[1,...]
transaction.state.log.segment.bytes|int|104857600|read-only|[1,...]
transaction.two.phase.commit.enable|boolean|false|read-only
transactional.id.expiration.ms|int|604800000|read-only|[1,...]
unclean.leader.election.enable|boolean|false|cluster-wide
unclean.leader.election.interval.ms|long|300000|read-only|[1,...]|internal
unstable.api.versions.enable|boolean|false|read-only||internal
unstable.feature.versions.enable|boolean|false|read-only||internal
"""
KAFKA_BROKER_CONFIGS: dict[str, KafkaBrokerConfig] = _rows(_KAFKA_44_BROKER_CONFIGS)
