"""Start-up checks of the settings a broker is given (server.properties and ``--override``).

Two things a broker must not do silently (issue 12, item 5):

- ignore a setting. Every name given that has no implemented :class:`odradek.config.ConfigDef` in
  ``BROKER_CONFIGS`` is named in a warning: "not implemented, ignored" for a Kafka broker
  setting odradek does not implement (Kafka 4.4's, which ``BROKER_CONFIGS`` holds as not implemented,
  the older ones of ``KAFKA_BROKER_CONFIG_NAMES`` below, and Kafka's
  per-listener ``listener.name.<listener>.<config>`` overrides), "unknown" for a name that
  is not a Kafka broker setting at all (as Kafka's AbstractConfig.logUnused names every
  supplied config nothing used). The registry is read at each call: a setting becomes
  "implemented" the moment its ConfigDef is marked so.
- run with less security than it was asked for. Every listener (``listeners`` /
  ``advertised.listeners``) needs a protocol in ``listener.security.protocol.map`` (Kafka's
  KafkaConfig.effectiveListenerSecurityProtocolMap); PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL
  are built (odradek.security), for clients and for brokers' own connections to each other
  (odradek.security.inter_broker). An
  ``authorizer.class.name`` odradek does not implement (:class:`ConfigError`), rather than run
  without the protection asked for.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from odradek import config as _config
from odradek.config import ConfigError, parse_listeners
from odradek.config_kafka import KAFKA_BROKER_CONFIGS

# Kafka's SecurityProtocol names, and the ones odradek has
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
BUILT_SECURITY_PROTOCOLS = frozenset(SECURITY_PROTOCOLS)
# what brokers use between themselves (controller channel, replica fetchers)
# authorizer.class.name values odradek.security.acl implements (Kafka's ZooKeeper-mode and KRaft ones)
KAFKA_AUTHORIZERS = frozenset({
    "kafka.security.authorizer.AclAuthorizer",
    "kafka.security.auth.SimpleAclAuthorizer",
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
})
# Kafka's default listener.security.protocol.map (ZooKeeper mode): each protocol's own listener name
DEFAULT_SECURITY_PROTOCOL_MAP = ",".join(f"{p}:{p}" for p in SECURITY_PROTOCOLS)

NOT_IMPLEMENTED = "not implemented"
UNKNOWN = "unknown"

# Kafka broker settings (KafkaConfig's names, 2.x to 4.x, plus the authorizer's own settings
# server.properties commonly carries). Those odradek implements are listed too: the registry
# of ConfigDefs, not this list, decides what is implemented.
_KAFKA_BROKER_CONFIG_NAMES = """
advertised.host.name advertised.listeners advertised.port allow.everyone.if.no.acl.found
alter.config.policy.class.name alter.log.dirs.replication.quota.window.num
alter.log.dirs.replication.quota.window.size.seconds authorizer.class.name auto.create.topics.enable
auto.include.jmx.reporter auto.leader.rebalance.enable background.threads broker.heartbeat.interval.ms
broker.id broker.id.generation.enable broker.rack broker.session.timeout.ms client.quota.callback.class
compression.gzip.level compression.lz4.level compression.type compression.zstd.level
connection.failed.authentication.delay.ms connections.max.idle.ms connections.max.reauth.ms
control.plane.listener.name controlled.shutdown.enable controlled.shutdown.max.retries
controlled.shutdown.retry.backoff.ms controller.listener.names controller.quorum.append.linger.ms
controller.quorum.bootstrap.servers controller.quorum.election.backoff.max.ms
controller.quorum.election.timeout.ms controller.quorum.fetch.timeout.ms
controller.quorum.request.timeout.ms controller.quorum.retry.backoff.ms controller.quorum.voters
controller.quota.window.num controller.quota.window.size.seconds controller.socket.timeout.ms
create.topic.policy.class.name default.replication.factor delegation.token.expiry.check.interval.ms
delegation.token.expiry.time.ms delegation.token.master.key delegation.token.max.lifetime.ms
delegation.token.secret.key delete.records.purgatory.purge.interval.requests delete.topic.enable
early.start.listeners fetch.max.bytes fetch.purgatory.purge.interval.requests
group.consumer.assignors group.consumer.heartbeat.interval.ms group.consumer.max.heartbeat.interval.ms
group.consumer.max.session.timeout.ms group.consumer.max.size group.consumer.migration.policy
group.consumer.min.heartbeat.interval.ms group.consumer.min.session.timeout.ms
group.consumer.session.timeout.ms group.coordinator.append.linger.ms group.coordinator.new.enable
group.coordinator.rebalance.protocols group.coordinator.threads group.initial.rebalance.delay.ms
group.max.session.timeout.ms group.max.size group.min.session.timeout.ms host.name
initial.broker.registration.timeout.ms inter.broker.listener.name inter.broker.protocol.version
kafka.metrics.polling.interval.secs kafka.metrics.reporters leader.imbalance.check.interval.seconds
leader.imbalance.per.broker.percentage leader.replication.throttled.rate
follower.replication.throttled.rate listener.security.protocol.map listeners
log.cleaner.backoff.ms log.cleaner.dedupe.buffer.size log.cleaner.delete.retention.ms
log.cleaner.enable log.cleaner.io.buffer.load.factor log.cleaner.io.buffer.size
log.cleaner.io.max.bytes.per.second log.cleaner.max.compaction.lag.ms log.cleaner.min.cleanable.ratio
log.cleaner.min.compaction.lag.ms log.cleaner.threads log.cleanup.policy log.dir
log.dir.failure.timeout.ms log.dirs log.flush.interval.messages log.flush.interval.ms
log.flush.offset.checkpoint.interval.ms log.flush.scheduler.interval.ms
log.flush.start.offset.checkpoint.interval.ms log.index.interval.bytes log.index.size.max.bytes
log.initial.task.delay.ms log.local.retention.bytes log.local.retention.ms
log.message.downconversion.enable log.message.format.version log.message.timestamp.after.max.ms
log.message.timestamp.before.max.ms log.message.timestamp.difference.max.ms log.message.timestamp.type
log.preallocate log.retention.bytes log.retention.check.interval.ms log.retention.hours
log.retention.minutes log.retention.ms log.roll.hours log.roll.jitter.hours log.roll.jitter.ms
log.roll.ms log.segment.bytes log.segment.delete.delay.ms max.connection.creation.rate
max.connections max.connections.per.ip max.connections.per.ip.overrides
max.incremental.fetch.session.cache.slots message.max.bytes metadata.log.dir
metadata.log.max.record.bytes.between.snapshots metadata.log.max.snapshot.interval.ms
metadata.log.segment.bytes metadata.log.segment.min.bytes metadata.log.segment.ms
metadata.max.idle.interval.ms metadata.max.retention.bytes metadata.max.retention.ms metric.reporters
metrics.num.samples metrics.recording.level metrics.sample.window.ms min.insync.replicas
min.incremental.fetch.session.eviction.ms node.id num.io.threads num.network.threads num.partitions
num.recovery.threads.per.data.dir num.replica.alter.log.dirs.threads num.replica.fetchers
offset.metadata.max.bytes offsets.commit.required.acks offsets.commit.timeout.ms
offsets.load.buffer.size offsets.retention.check.interval.ms offsets.retention.minutes
offsets.topic.compression.codec offsets.topic.num.partitions offsets.topic.replication.factor
offsets.topic.segment.bytes password.encoder.cipher.algorithm password.encoder.iterations
password.encoder.key.length password.encoder.keyfactory.algorithm password.encoder.old.secret
password.encoder.secret port principal.builder.class process.roles
producer.id.expiration.check.interval.ms producer.id.expiration.ms
producer.purgatory.purge.interval.requests queued.max.request.bytes queued.max.requests
quota.consumer.default quota.producer.default quota.window.num quota.window.size.seconds
remote.fetch.max.wait.ms remote.log.index.file.cache.total.size.bytes
remote.log.manager.copier.thread.pool.size remote.log.manager.copy.max.bytes.per.second
remote.log.manager.expiration.thread.pool.size remote.log.manager.fetch.max.bytes.per.second
remote.log.manager.task.interval.ms remote.log.manager.task.retry.backoff.max.ms
remote.log.manager.task.retry.backoff.ms remote.log.manager.task.retry.jitter
remote.log.manager.thread.pool.size remote.log.metadata.custom.metadata.max.bytes
remote.log.metadata.manager.class.name remote.log.metadata.manager.class.path
remote.log.metadata.manager.impl.prefix remote.log.metadata.manager.listener.name
remote.log.reader.max.pending.tasks remote.log.reader.threads remote.log.storage.manager.class.name
remote.log.storage.manager.class.path remote.log.storage.manager.impl.prefix
remote.log.storage.system.enable replica.fetch.backoff.ms replica.fetch.max.bytes
replica.fetch.min.bytes replica.fetch.response.max.bytes replica.fetch.wait.max.ms
replica.high.watermark.checkpoint.interval.ms replica.lag.time.max.ms replica.selector.class
replica.socket.receive.buffer.bytes replica.socket.timeout.ms replication.quota.window.num
replication.quota.window.size.seconds request.timeout.ms reserved.broker.max.id
sasl.client.callback.handler.class sasl.enabled.mechanisms sasl.jaas.config sasl.kerberos.kinit.cmd
sasl.kerberos.min.time.before.relogin sasl.kerberos.principal.to.local.rules
sasl.kerberos.service.name sasl.kerberos.ticket.renew.jitter sasl.kerberos.ticket.renew.window.factor
sasl.login.callback.handler.class sasl.login.class sasl.login.connect.timeout.ms
sasl.login.read.timeout.ms sasl.login.refresh.buffer.seconds sasl.login.refresh.min.period.seconds
sasl.login.refresh.window.factor sasl.login.refresh.window.jitter sasl.login.retry.backoff.max.ms
sasl.login.retry.backoff.ms sasl.mechanism.controller.protocol sasl.mechanism.inter.broker.protocol
sasl.oauthbearer.clock.skew.seconds sasl.oauthbearer.expected.audience
sasl.oauthbearer.expected.issuer sasl.oauthbearer.jwks.endpoint.refresh.ms
sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms sasl.oauthbearer.jwks.endpoint.retry.backoff.ms
sasl.oauthbearer.jwks.endpoint.url sasl.oauthbearer.scope.claim.name sasl.oauthbearer.sub.claim.name
sasl.oauthbearer.token.endpoint.url sasl.server.callback.handler.class sasl.server.max.receive.size
security.inter.broker.protocol security.providers server.max.startup.time.ms
socket.connection.setup.timeout.max.ms socket.connection.setup.timeout.ms socket.listen.backlog.size
socket.receive.buffer.bytes socket.request.max.bytes socket.send.buffer.bytes ssl.allow.dn.changes
ssl.allow.san.changes ssl.cipher.suites ssl.client.auth ssl.enabled.protocols
ssl.endpoint.identification.algorithm ssl.engine.factory.class ssl.key.password
ssl.keymanager.algorithm ssl.keystore.certificate.chain ssl.keystore.key ssl.keystore.location
ssl.keystore.password ssl.keystore.type ssl.principal.mapping.rules ssl.protocol ssl.provider
ssl.secure.random.implementation ssl.trustmanager.algorithm ssl.truststore.certificates
ssl.truststore.location ssl.truststore.password ssl.truststore.type super.users
transaction.abort.timed.out.transaction.cleanup.interval.ms transaction.max.timeout.ms
transaction.partition.verification.enable transaction.remove.expired.transaction.cleanup.interval.ms
transaction.state.log.load.buffer.size transaction.state.log.min.isr
transaction.state.log.num.partitions transaction.state.log.replication.factor
transaction.state.log.segment.bytes transactional.id.expiration.ms unclean.leader.election.enable
unstable.api.versions.enable unstable.metadata.versions.enable zookeeper.clientCnxnSocket
zookeeper.connect zookeeper.connection.timeout.ms zookeeper.max.in.flight.requests
zookeeper.metadata.migration.enable zookeeper.metadata.migration.min.batch.size
zookeeper.session.timeout.ms zookeeper.set.acl zookeeper.ssl.cipher.suites zookeeper.ssl.client.enable
zookeeper.ssl.crl.enable zookeeper.ssl.enabled.protocols zookeeper.ssl.endpoint.identification.algorithm
zookeeper.ssl.keystore.location zookeeper.ssl.keystore.password zookeeper.ssl.keystore.type
zookeeper.ssl.ocsp.enable zookeeper.ssl.protocol zookeeper.ssl.truststore.location
zookeeper.ssl.truststore.password zookeeper.ssl.truststore.type zookeeper.sync.time.ms
"""
KAFKA_BROKER_CONFIG_NAMES: frozenset[str] = frozenset(_KAFKA_BROKER_CONFIG_NAMES.split()) | frozenset(
    KAFKA_BROKER_CONFIGS)

# Kafka settings named by a prefix: per-listener overrides (listener.name.<name>.<config>) and
# the remote storage plugins' own settings (remote.log.*.impl.prefix defaults)
KAFKA_BROKER_CONFIG_PREFIXES = ("listener.name.", "rlmm.config.", "rsm.config.")


# The settings the broker reads per listener (``listener.name.<listener>.<setting>``, falling back to
# ``<setting>``): TLS (Kafka's SslFactory), SASL (SaslChannelBuilder), re-authentication (KIP-368) and the
# connection creation rate (KIP-612). A listener-prefixed override of any other setting is not applied
# per listener, so it is warned about even when the unprefixed setting is implemented.
_PER_LISTENER_SETTINGS = """
ssl.keystore.type ssl.keystore.location ssl.keystore.password ssl.key.password ssl.keystore.certificate.chain
ssl.keystore.key ssl.truststore.type ssl.truststore.location ssl.truststore.certificates ssl.truststore.password
ssl.client.auth ssl.enabled.protocols ssl.cipher.suites ssl.endpoint.identification.algorithm
sasl.enabled.mechanisms sasl.jaas.config connections.max.reauth.ms max.connection.creation.rate
"""
PER_LISTENER_SETTINGS: frozenset[str] = frozenset(_PER_LISTENER_SETTINGS.split())


@dataclass(frozen=True)
class Unsupported:
    """A setting given to the broker that it does not implement."""

    name: str
    kind: str  # NOT_IMPLEMENTED | UNKNOWN

    def message(self) -> str:
        if self.kind == NOT_IMPLEMENTED:
            return (f"The configuration '{self.name}' was supplied but odradek does not implement this "
                    "Kafka broker setting: not implemented, ignored")
        hint = ""
        synonyms = _config.TOPIC_SYNONYMS.get(self.name)
        if synonyms:
            hint = f" ('{self.name}' is a topic config; the broker's default for it is '{synonyms[0]}')"
        return f"The configuration '{self.name}' was supplied but isn't a known config: unknown, ignored{hint}"


def is_kafka_broker_config(name: str) -> bool:
    return name in KAFKA_BROKER_CONFIG_NAMES or name.startswith(KAFKA_BROKER_CONFIG_PREFIXES)


def _implemented(name: str) -> bool:
    """A ConfigDef's name, or a per-listener override of a setting read per listener
    (``listener.name.<l>.<setting>`` for :data:`PER_LISTENER_SETTINGS`,
    ``listener.name.<l>.<mechanism>.sasl.jaas.config``)."""
    implemented = {n for n, d in _config.BROKER_CONFIGS.items() if d.implemented}
    if name in implemented:
        return True
    if name.startswith("listener.name."):
        rest = name[len("listener.name."):].split(".", 1)
        if len(rest) == 2:
            setting = rest[1]
            if setting in PER_LISTENER_SETTINGS:
                return setting in implemented
            mech, _, tail = setting.partition(".")
            return tail == "sasl.jaas.config" and mech.upper() in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
    return False


def unsupported_settings(props: Mapping[str, str]) -> list[Unsupported]:
    """The settings of ``props`` without a ConfigDef in the broker registry, sorted by name."""
    return [
        Unsupported(name, NOT_IMPLEMENTED if is_kafka_broker_config(name) else UNKNOWN)
        for name in sorted(props)
        if not _implemented(name)
    ]


def security_protocol_map(raw: str | None) -> dict[str, str]:
    """``listener.security.protocol.map`` (``NAME:PROTOCOL,...``; Kafka's default when unset)."""
    out: dict[str, str] = {}
    for item in (raw if raw is not None else DEFAULT_SECURITY_PROTOCOL_MAP).split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or not protocol:
            raise ConfigError(f"Invalid value {raw} for configuration listener.security.protocol.map: "
                              f"{item!r} is not of the form LISTENER_NAME:SECURITY_PROTOCOL")
        if protocol not in SECURITY_PROTOCOLS:
            raise ConfigError(f"Invalid value {raw} for configuration listener.security.protocol.map: "
                              f"unknown security protocol {protocol} (one of {', '.join(SECURITY_PROTOCOLS)})")
        out[name] = protocol
    return out


def check_security(props: Mapping[str, str]) -> None:
    """Raise :class:`ConfigError` when ``props`` ask for security odradek cannot provide."""
    protocols = security_protocol_map(props.get("listener.security.protocol.map"))
    for key in ("listeners", "advertised.listeners"):
        raw = props.get(key)
        if not raw:
            continue
        for name, _host, _port in parse_listeners(raw):
            protocol = protocols.get(name.upper())
            if protocol is None:
                raise ConfigError(f"No security protocol defined for listener {name} in {key} "
                                  "(add it to listener.security.protocol.map)")
            assert protocol in BUILT_SECURITY_PROTOCOLS
    inter = props.get("security.inter.broker.protocol")
    inter_name = props.get("inter.broker.listener.name")
    if inter is not None and inter_name:
        raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.")
    authorizer = (props.get("authorizer.class.name") or "").strip()
    if authorizer and authorizer not in KAFKA_AUTHORIZERS:
        raise ConfigError(
            f"authorizer.class.name={authorizer}: odradek implements Kafka's ACL authorizers only "
            f"({', '.join(sorted(KAFKA_AUTHORIZERS))}); refusing to start rather than run without it"
        )


# Kafka 4.4's ShareGroupConfig.validate, in its order: each (larger, smaller) pair must hold or the broker
# refuses to start ("<larger> must be greater than or equal to <smaller>", Utils.require)
SHARE_GROUP_BOUNDS: tuple[tuple[str, str], ...] = (
    ("group.share.max.delivery.count.limit", "group.share.delivery.count.limit"),
    ("group.share.delivery.count.limit", "group.share.min.delivery.count.limit"),
    ("group.share.max.partition.max.record.locks", "group.share.partition.max.record.locks"),
    ("group.share.partition.max.record.locks", "group.share.min.partition.max.record.locks"),
    ("group.share.record.lock.duration.ms", "group.share.min.record.lock.duration.ms"),
    ("group.share.max.record.lock.duration.ms", "group.share.record.lock.duration.ms"),
    ("group.share.max.share.sessions", "group.share.max.size"),
)


def check_share_group_bounds(value: Callable[[str], Any]) -> None:
    """ConfigError, with Kafka's message, when a share-group setting lies outside its ``group.share.min.*`` /
    ``group.share.max.*`` bounds (``value``: the broker's typed value of a setting)."""
    for larger, smaller in SHARE_GROUP_BOUNDS:
        if int(value(larger)) < int(value(smaller)):
            raise ConfigError(f"{larger} must be greater than or equal to {smaller}")


def check_startup(props: Mapping[str, str]) -> list[str]:
    """The start-up check of the static settings: raises :class:`ConfigError` for security
    that is not built, returns the warnings naming every setting that is not implemented."""
    check_security(props)
    return [u.message() for u in unsupported_settings(props)]
