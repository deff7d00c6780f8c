"""The broker process: wires its components together, runs the listeners and the periodic
tasks, on one event loop.

Embedded default: one broker with its metadata in a LocalStore file, deciding topic
changes itself. Cluster mode (``zookeeper.connect`` set): the metadata lives in
ZooKeeper, a controller elected there assigns roles, and server.cluster.ClusterLink
connects this broker to both.

Each component gets narrow edges at construction, not the Broker: the ReplicaManager its
logs, metadata cache, clock, ISR writer (replication.alter_partition) and log-dir-failure
notice; the ClusterLink its config and endpoints, then the metadata cache, the replica
manager's roles and the config reload; the GroupCoordinatorRuntime the metadata cache, the
topic admin, the replica manager and the logs, and it subscribes to leadership of
``__consumer_offsets`` as a ReplicaManager leadership listener; handlers a BrokerServices.

One concept in one file (over 600 lines): wiring the broker's components together and running its listeners and periodic tasks; entry points (cli/broker_cmd.py) import it, no component does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
import uuid
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from odradek.clock import SYSTEM_CLOCK, Clock
from odradek.config import (
    BROKER_CONFIGS,
    TOPIC_CONFIGS,
    BrokerConfig,
    ConfigError,
    check_remote_storage_configs,
)
from odradek.config_check import check_share_group_bounds, check_startup
from odradek.connection_quotas import (
    ConnectionQuotas,
    RequestMemoryPool,
    parse_ip_overrides,
)
from odradek.console.app import ConsoleApp
from odradek.console.wiring import build_console, metrics_need_login
from odradek.controller import features as ft
from odradek.controller.store import (
    LocalStore,
    MetadataStore,
    PersistError,
    StoreError,
)
from odradek.controller.topics import TopicError, TopicMeta, TopicRegistry, topic_id_to_str
from odradek.coordinator.producer_id_manager import ProducerIdManager
from odradek.coordinator.runtime import OFFSETS_TOPIC, GroupCoordinatorRuntime
from odradek.coordinator.transaction.coordinator import TRANSACTION_STATE_TOPIC
from odradek.coordinator.txn_runtime import TransactionCoordinatorRuntime
from odradek.log.config import KAFKA_NAMES, LogConfig
from odradek.log.manager import LogManager
from odradek.metrics.collector import MetricsSources
from odradek.metrics.stats import BrokerTopicStats, RequestStats, WorkerPoolStats
from odradek.protocol import errors
from odradek.replication.alter_partition import (
    AlterPartitionManager,
    ZkPartitionStates,
    in_worker_thread,
    inline_then_soon,
)
from odradek.replication.fetcher import FetcherConfig, ReplicaFetcherManager
from odradek.security.listeners import build_listener_security
from odradek.security.services import build_security, start_security
from odradek.server import client_metrics, gc_tuning, group_configs, http_listeners, meta_properties
from odradek.server.acceptor import Acceptor
from odradek.server.cluster import ClusterLink
from odradek.server.connection import Connection, ConnectionEdges
from odradek.server.fetch_session import FetchSessionCache
from odradek.server.finalized_features import FinalizedFeatureCache
from odradek.server.handlers import schema_warm_up_steps
from odradek.server.quota.client_quotas import ClientQuotas
from odradek.server.quota.connection_rate import ConnectionRateQuotas
from odradek.server.quota.manager import QuotaConfig
from odradek.server.quota.remote_log import ThrottleTimeSensor
from odradek.server.quota.replication import ReplicationQuotaManager
from odradek.server.remote_log_manager import RemoteLogManager, storage_from_config
from odradek.server.replica_manager import ReplicaManager
from odradek.server.request_context import BrokerServices
from odradek.server.share_services import ShareServices
from odradek.server.tls_connection import connection_for

if TYPE_CHECKING:
    from odradek.log.log import Log

CLUSTER_MIN_ISR = "min.insync.replicas"
log = logging.getLogger("odradek.broker")

# schema warm-up: a step runs after this long without socket reads, or after waiting the maximum
SCHEMA_WARM_UP_IDLE_S = 0.02
SCHEMA_WARM_UP_MAX_WAIT_S = 10.0


@contextlib.contextmanager
def store_errors_as_topic_errors() -> Iterator[None]:
    """An operation that needs the metadata store while it is unreachable (ZooKeeper) or cannot
    be written (the embedded LocalStore's file) fails with a retriable REQUEST_TIMED_OUT and says
    why; the store applied nothing of it."""
    try:
        yield
    except StoreError as e:
        log.warning("metadata store operation failed: %s", e)
        what = "The metadata could not be written" if isinstance(e, PersistError) else "ZooKeeper is not available"
        raise TopicError(errors.REQUEST_TIMED_OUT, f"{what}: {e}") from None


def stray_reason(meta: TopicMeta | None, partition: int, topic_id: uuid.UUID | None, node_id: int) -> str | None:
    """Why a log found on disk at start-up is stray (Kafka's LogManager.isStrayReplica, KIP-858), or
    None when the metadata accounts for it. A log without a topic id (no ``partition.metadata``) is
    taken to be the topic's: it is given the id, as Kafka does."""
    if meta is None:
        return "its topic is not in the metadata"
    if topic_id is not None and topic_id != meta.topic_id:
        return f"its topic id {topic_id_to_str(topic_id)} is not the topic's {topic_id_to_str(meta.topic_id)}"
    part = next((p for p in meta.partitions if p.index == partition), None)
    if part is None:
        return f"the topic has no partition {partition}"
    if node_id not in part.replicas:
        return f"broker {node_id} is not one of its replicas {part.replicas}"
    return None


class Broker:
    def __init__(self, config: BrokerConfig, clock: Clock = SYSTEM_CLOCK) -> None:
        # what time it is for everything the broker does on time (odradek.clock): retention, rolls, expiries,
        # quotas, the ISR's lag; a test's in-process broker may run on a ManualClock
        self.clock = clock
        # refuse security that is not built (ConfigError), name every setting that is not implemented
        for warning in check_startup(config.static):
            log.warning("%s", warning)
        check_share_group_bounds(config.get)  # Kafka's ShareGroupConfig.validate: ConfigError now
        metrics_need_login(config)  # http.metrics.auth.required with nothing to log in with: ConfigError now
        http_listeners.http_connection_quotas(config)  # bad http.max.connections.per.ip(.overrides) too
        self.config = config
        self.node_id = config.node_id
        self.rack: str | None = config.raw("broker.rack")[0]
        self.validate_records = bool(config.get("odradek.validate.records"))
        self.log_dirs = config.log_dirs
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        # refuse a log dir of another broker before anything in it is read (InconsistentBrokerIdException)
        used_before = meta_properties.check_broker_id(self.log_dirs, self.node_id)
        self.store: MetadataStore
        local_store: MetadataStore | None = None
        if config.raw("zookeeper.connect")[0]:
            if config.get("node.id") < 0 and config.get("broker.id") < 0:
                raise ConfigError("broker.id must be set in cluster mode (zookeeper.connect is set)")
        else:
            # a broker ran on this log dir (meta.properties): its metadata file must be there, else its
            # topics would be forgotten and every partition directory taken for a stray
            local_store = LocalStore(
                self.log_dirs[0] / "odradek-metadata.json",
                must_exist=f"{self.log_dirs[0] / meta_properties.META_PROPERTIES} shows that a broker ran here"
                if used_before else "",
            )
        self.cluster = ClusterLink(
            config, self.node_id, local_store=local_store, advertised_endpoint=self.advertised_endpoint,
            inter_broker_listener=self.inter_broker_listener, rack=self.rack,
        )
        self.store = self.cluster.store
        # the metadata cache: written by the controller's UpdateMetadata, mutations go to the store
        self.topics = TopicRegistry(self.store, self._live_broker_ids)
        # KIP-848 per-group configs (odradek.server.group_configs), read once per group until changed
        self.group_configs = group_configs.GroupConfigCache(
            lambda gid: self.topics.group_configs(group_configs.store_name(gid)))
        self.topics.controller_managed = True
        self.topics.broker_racks = self._broker_racks
        self.topics.config_changed = self.cluster.notify_config_change
        self.topics.listeners.append(self._on_topic_event)
        self._log_configs: dict[tuple[tuple[str, str], ...], LogConfig] = {}
        self.log_manager = LogManager(list(self.log_dirs), self.log_config_for, now_ms=self.now_ms)
        # ISR changes go to the partition state znodes (a worker thread against ZooKeeper)
        isr_writer = AlterPartitionManager(
            self.node_id, ZkPartitionStates(self.store),
            inline_then_soon if self.cluster.embedded else in_worker_thread,
        )
        cluster = self.cluster
        # metrics (odradek.metrics): topic counters always (they are a few int additions); request
        # latencies only when http.listeners serves them
        self.topic_stats = BrokerTopicStats()
        self.request_stats: RequestStats | None = (
            RequestStats() if http_listeners.http_listener(config) is not None else None
        )
        self.http: http_listeners.HttpServer | None = None
        self.replica_manager = ReplicaManager(
            self.node_id, self.log_manager, self.topics, self.now_ms,
            validate_records=self.validate_records,
            isr_writer=isr_writer,
            live_broker=lambda broker_id: cluster.live_brokers.get(broker_id),
            on_dir_offline=cluster.notify_log_dir_failure,
            topic_stats=self.topic_stats,
            leader_quota=self._replication_quota("leader"),
            lag_clock_ms=lambda: clock.monotonic_ns() // 1_000_000,
        )
        cluster.wire(self.topics, self.replica_manager, self.reload_configs_from_store)
        self.fetch_sessions = FetchSessionCache(
            int(config.get("max.incremental.fetch.session.cache.slots")),
            int(config.get("min.incremental.fetch.session.eviction.ms")),
        )
        self.producer_ids = ProducerIdManager(self.store, self.node_id)
        self.features = FinalizedFeatureCache()  # KIP-584: read from /feature once the controller made it
        self.quotas = ClientQuotas(QuotaConfig(int(config.get("quota.window.num")),
                                               int(config.get("quota.window.size.seconds"))))
        self.groups: GroupCoordinatorRuntime = None  # type: ignore[assignment]  # created in start()
        self.remote_log_manager: RemoteLogManager | None = None  # remote.log.storage.system.enable, in start()
        # tiered storage's store, made here so that a bad store setting stops the broker before it starts
        self._remote_storage = (storage_from_config(config, list(self.log_dirs))
                                if config.get("remote.log.storage.system.enable") else None)
        self.txn: TransactionCoordinatorRuntime | None = None  # created in start()
        self.share: ShareServices | None = None  # created in start()
        self.services: BrokerServices | None = None  # what handlers may use, wired in start()
        self.cluster_id = ""
        self.conn_quotas = ConnectionQuotas(
            int(config.get("max.connections")),
            int(config.get("max.connections.per.ip")),
            parse_ip_overrides(config.get("max.connections.per.ip.overrides") or ""),
        )
        # KIP-612: max.connection.creation.rate and the ip entities' connection_creation_rate
        self.conn_rates = ConnectionRateQuotas(
            lambda: int(self.config.get("max.connection.creation.rate")), lambda: self.quotas.ip_rates,
            int(config.get("quota.window.num")), int(config.get("quota.window.size.seconds")),
        )
        self.acceptor = Acceptor(
            self.conn_quotas, self.conn_rates, self.now_ms,
            lambda listener: self.config.raw(f"listener.name.{listener.lower()}.max.connection.creation.rate")[0],
            lambda: self.inter_broker_listener,
            lambda: self._stopping is not None and self._stopping.is_set(),
        )
        queued = int(config.get("queued.max.request.bytes"))
        self.request_memory: RequestMemoryPool | None = (
            RequestMemoryPool(queued, lambda fn: asyncio.get_running_loop().call_soon(fn)) if queued > 0 else None
        )
        self._stopping: asyncio.Event | None = None  # set once stop() is past the controlled shutdown
        self._stop_requested: asyncio.Event | None = None  # request_stop(): wait_stopped returns
        self._timers: list[asyncio.TimerHandle] = []
        self.reads = 0  # socket read bursts served (connections count them; idle detection)
        self.bound: dict[str, tuple[str, int]] = {}
        # each listener's TLS context and SASL mechanisms (ConfigError here, before anything starts)
        self.security = build_security(config, self.store)
        assert self.security.credentials is not None
        self.listener_security = build_listener_security(config, self.security.credentials.lookup)

    # -- configuration
    @property
    def inter_broker_listener(self) -> str:
        name = self.config.raw("inter.broker.listener.name")[0]
        return name or self.config.listeners[0][0]

    def _live_broker_ids(self) -> list[int]:
        from odradek.controller import zk_data as zd

        return sorted(zd.live_brokers(self.store))

    def _broker_racks(self) -> dict[int, str | None]:
        from odradek.controller import zk_data as zd

        return {b: i.rack for b, i in zd.live_brokers(self.store).items()}

    def _replica_fetchers(self) -> ReplicaFetcherManager:
        """The follower side of replication, configured from replica.fetch.* (Kafka's ReplicaFetcherManager)."""
        cfg = self.config
        return ReplicaFetcherManager(
            FetcherConfig(
                broker_id=self.node_id,
                wait_max_ms=int(cfg.get("replica.fetch.wait.max.ms")),
                min_bytes=int(cfg.get("replica.fetch.min.bytes")),
                max_bytes=int(cfg.get("replica.fetch.max.bytes")),
                response_max_bytes=int(cfg.get("replica.fetch.response.max.bytes")),
                backoff_ms=int(cfg.get("replica.fetch.backoff.ms")),
                socket_timeout_ms=int(cfg.get("replica.socket.timeout.ms")),
                connect=None if self.cluster.ib_plaintext else self.cluster.ib_connect,
                splice=bool(cfg.get("odradek.replica.fetch.splice")),
            ),
            self.log_manager.get_log,
            # which partitions a follower throttles: the topics' follower.replication.throttled.replicas,
            # parsed once per text (the fetcher asks per partition, per fetch); its rate is the ByteQuota's
            self._replication_quota("follower").is_throttled,
            lambda: int(self.config.get("follower.replication.throttled.rate")),
            now_ms=self.now_ms,
        )

    def _replication_quota(self, side: str) -> ReplicationQuotaManager:
        """KIP-73: ``<side>.replication.throttled.rate`` over the partitions listed in the topics'
        ``<side>.replication.throttled.replicas`` with this broker's id."""
        cfg, topics, name = self.config, self.topics, f"{side}.replication.throttled.replicas"

        def throttled_config(topic: str) -> str:
            meta = topics.get(topic)
            return meta.configs.get(name, "") if meta is not None else ""

        return ReplicationQuotaManager(
            self.node_id, lambda: int(cfg.get(f"{side}.replication.throttled.rate")), throttled_config,
            self.now_ms, int(cfg.get("replication.quota.window.num")),
            int(cfg.get("replication.quota.window.size.seconds")),
        )

    def reload_configs_from_store(self) -> None:
        """A /config/changes notification: re-read dynamic broker and topic configs."""
        try:
            self._load_dynamic_broker_configs()
            self.topics.reload_configs()
            self.quotas.reload(self.store)
            self.group_configs.invalidate()
        except Exception:
            log.exception("reloading configs from the metadata store failed")
            return
        for plog in self.log_manager.logs():
            self._update_log_config(plog, self.log_config_for(plog.topic))
        self._reconfigure_cleaner()

    def _update_log_config(self, plog: Log, cfg: LogConfig) -> None:
        """A log's new config; a tiered topic turned off with remote.log.delete.on.disable (KIP-950, Kafka's
        TopicConfigHandler.maybeUpdateRemoteLogComponents): where this broker leads the partition, its remote
        segments are deleted (as a deleted topic's are) and its log starts at the local log start offset;
        followers take that log start from the leader's fetch responses."""
        was_tiered = plog.config.remote_storage_enable
        plog.update_config(cfg)
        if not (was_tiered and not cfg.remote_storage_enable and cfg.remote_log_delete_on_disable):
            return
        rlm = self.remote_log_manager
        if rlm is None or self.replica_manager.leading(plog.topic, plog.partition) is None:
            return
        log.info("remote storage disabled on %s with remote.log.delete.on.disable: deleting its remote tier, the "
                 "log starts at %d", plog.name, plog.local_log_start_offset)
        rlm.delete_remote_log_partition(plog)
        plog.advance_log_start_offset(plog.local_log_start_offset)

    def log_config_for(self, topic: str) -> LogConfig:
        """The topic's log config: its overrides over the broker's (dynamic, then static) values.
        Memoised on the overrides (LogConfig is frozen; new dynamic broker values clear it)."""
        meta = self.topics.get(topic)
        # a log may be created (LeaderAndIsr) before the metadata cache knows its topic: its
        # overrides are then read from the store, as Kafka's LogManager reads them from ZooKeeper
        overrides = meta.configs if meta is not None else self.topics.read_configs(topic)
        key = (("internal", str(topic.startswith("__"))), *sorted(overrides.items()))
        cached = self._log_configs.get(key)
        if cached is not None:
            return cached
        values: dict[str, Any] = {}
        for kafka_name, field in KAFKA_NAMES.items():
            v, _ = self.config.topic_value(kafka_name, overrides)
            if isinstance(v, list):
                v = ",".join(v)
            values[field] = v
        # Kafka's UnifiedLog.remoteLogEnabled: the broker's system switch, the topic's, and not internal
        values["remote_storage_enable"] = bool(
            values["remote_storage_enable"] and self.config.get("remote.log.storage.system.enable")
            and not topic.startswith("__"))
        cfg = self._log_configs[key] = LogConfig(**values)
        return cfg

    def advertised_endpoint(self, listener: str) -> tuple[str, int]:
        for name, host, port in self.config.advertised_listeners:
            if name == listener:
                if port == 0 and listener in self.bound:
                    port = self.bound[listener][1]
                if not host or host == "0.0.0.0":
                    host = self.bound.get(listener, ("127.0.0.1", 0))[0]
                    if host in ("0.0.0.0", ""):
                        host = socket.gethostname()
                return host, port
        host, port = self.bound.get(listener, ("127.0.0.1", 9092))
        return host, port

    def now_ms(self) -> int:
        """Milliseconds since the epoch on the broker's clock."""
        return self.clock.wall_ms()

    # -- topic operations (the embedded controller decides synchronously)
    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignment: Mapping[int, list[int]] | None = None,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicMeta:
        self._check_remote_storage(configs or {}, {})
        with store_errors_as_topic_errors():
            return self.topics.create_topic(
                name,
                num_partitions,
                replication_factor,
                assignment,
                configs,
                default_partitions=self.config.get("num.partitions"),
                default_replication_factor=self.config.get("default.replication.factor"),
                max_partitions=self.config.get("max.partitions"),
                validate_only=validate_only,
            )

    def _check_remote_storage(self, configs: Mapping[str, str | None], existing: Mapping[str, str]) -> None:
        """Kafka's checks of tiered storage's topic configs against the broker's (LogConfig.validate):
        INVALID_CONFIG with Kafka's message."""
        given = {k: v for k, v in configs.items() if v is not None and k in TOPIC_CONFIGS}
        was = str(existing.get("remote.storage.enable", "false")).strip().lower() == "true"
        try:
            check_remote_storage_configs(
                lambda n: self.config.topic_value(n, given)[0],
                system_enabled=bool(self.config.get("remote.log.storage.system.enable")), was_enabled=was,
            )
        except ConfigError as e:
            raise TopicError(errors.INVALID_CONFIG, str(e)) from None

    def delete_topic(self, name: str) -> None:
        with store_errors_as_topic_errors():
            self.topics.delete_topic(name)

    def create_partitions(
        self, name: str, count: int, assignment: list[list[int]] | None, *, validate_only: bool = False
    ) -> None:
        with store_errors_as_topic_errors():
            self.topics.create_partitions(name, count, assignment, max_partitions=self.config.get("max.partitions"),
                                          validate_only=validate_only)

    def set_topic_configs(self, name: str, configs: Mapping[str, str], *, validate_only: bool = False) -> None:
        meta = self.topics.get(name)
        self._check_remote_storage(configs, meta.configs if meta is not None else {})
        with store_errors_as_topic_errors():
            self.topics.set_topic_configs(name, configs, validate_only=validate_only)

    def set_broker_configs(self, entity: str, configs: Mapping[str, str], *, validate_only: bool = False) -> None:
        ignored = BrokerConfig.validate_dynamic(configs, per_broker=entity != "")
        if validate_only:
            return
        before = self.topics.broker_configs(entity)
        if not entity and CLUSTER_MIN_ISR in before and CLUSTER_MIN_ISR not in configs:
            # Kafka 4.1+ (KIP-966, eligible leader replicas): the cluster-level value stays while ELR is on
            raise TopicError(errors.INVALID_CONFIG,
                             f"Cluster-level {CLUSTER_MIN_ISR} cannot be removed while ELR is enabled.")
        for name in ignored:
            if before.get(name) != configs[name]:
                d = BROKER_CONFIGS.get(name)
                # names and values are the client's: bounded in the log
                log.warning("broker config %.200s set to %.200s for %s: %s, ignored", name,
                            "[hidden]" if d is None or d.sensitive else configs[name],
                            f"broker {entity}" if entity else "the cluster default",
                            "a Kafka setting odradek does not implement" if d is not None else "not a known config")
        with store_errors_as_topic_errors():
            self.topics.set_broker_configs(entity, configs)
        self._load_dynamic_broker_configs()
        for plog in self.log_manager.logs():
            self._update_log_config(plog, self.log_config_for(plog.topic))
        self._reschedule_retention()
        self._reconfigure_cleaner()

    def set_client_metrics_configs(self, name: str, configs: Mapping[str, str], *,
                                   validate_only: bool = False) -> None:
        """A KIP-714 client metrics subscription (odradek.server.client_metrics); ConfigError if invalid."""
        client_metrics.validate_name(name)
        client_metrics.validate(configs)
        if validate_only:
            return
        with store_errors_as_topic_errors():
            self.topics.set_client_metrics_configs(name, configs)

    def _consumer_group_settings(self, group_id: str) -> tuple[int, int] | None:
        """(session timeout, heartbeat interval) of a KIP-848 group with config overrides, else None."""
        overrides = self.group_configs.get(group_id)
        if not overrides:
            return None
        values = group_configs.effective(overrides, self.config)
        return values["consumer.session.timeout.ms"], values["consumer.heartbeat.interval.ms"]

    def set_group_configs(self, group_id: str, configs: Mapping[str, str], *, validate_only: bool = False) -> None:
        """A group's config overrides (KIP-848's GROUP resource, odradek.server.group_configs); ConfigError if invalid."""
        name = group_configs.store_name(group_id)
        clean = {k: v.strip() for k, v in configs.items()}
        group_configs.validate(clean, self.config)
        if validate_only:
            return
        with store_errors_as_topic_errors():
            self.topics.set_group_configs(name, clean)
        self.group_configs.invalidate(group_id)

    def _set_cluster_min_insync_replicas(self) -> None:
        """Kafka 4.1+ (KIP-966): a cluster has a cluster-level ``min.insync.replicas`` (the broker resource
        named "", Kafka's controller writes it from its own config when the cluster has none), so describing
        the cluster's broker configs lists it and topics inherit it as DYNAMIC_DEFAULT_BROKER_CONFIG."""
        value = self.config.raw(CLUSTER_MIN_ISR)[0] or "1"
        for _ in range(3):
            defaults = self.topics.broker_configs("")
            if CLUSTER_MIN_ISR in defaults:
                return
            try:
                self.topics.set_broker_configs("", {**defaults, CLUSTER_MIN_ISR: value})
            except StoreError as e:
                # brokers starting together race to write it first (the znode appeared meanwhile): read again
                log.info("setting the cluster-level %s raced with another write (%s); reading it again",
                         CLUSTER_MIN_ISR, e)
                continue
            log.info("cluster-level %s set to %s (KIP-966)", CLUSTER_MIN_ISR, value)
            return
        log.warning("could not set the cluster-level %s (the metadata store kept refusing the write): describing "
                    "the cluster's broker configs will not list it until a broker sets it", CLUSTER_MIN_ISR)

    def _load_dynamic_broker_configs(self) -> None:
        self._log_configs.clear()
        self.config.set_dynamic(False, self.topics.broker_configs(""))
        self.config.set_dynamic(True, self.topics.broker_configs(str(self.node_id)))

    def _on_topic_event(self, event: str, meta: TopicMeta) -> None:
        # replicas (logs) come and go with the controller's LeaderAndIsr / StopReplica
        if event == "created":
            log.info("topic %s with %d partitions (topic id %s)", meta.name, len(meta.partitions),
                     topic_id_to_str(meta.topic_id))
        elif event == "deleted":
            log.info("topic %s deleted", meta.name)
            self.topic_stats.remove(meta.name)
            if self.share is not None:
                self.share.stats.remove_topic(meta.name)
        elif event == "config":
            cfg = self.log_config_for(meta.name)
            for p in meta.partitions:
                plog = self.log_manager.get_log(meta.name, p.index)
                if plog is not None:
                    self._update_log_config(plog, cfg)

    # -- lifecycle
    async def start(self) -> None:
        t0 = time.monotonic()
        self._stopping = asyncio.Event()
        self._stop_requested = asyncio.Event()
        if self.cluster.zk is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.cluster.connect_store)
        else:
            self.cluster.connect_store()
        self.topics.load()
        self.cluster_id = self.config.raw("cluster.id")[0] or self.topics.cluster_id()
        meta_properties.check_cluster_id(self.log_dirs, self.cluster_id)
        meta_properties.write_missing(self.log_dirs, self.node_id, self.cluster_id)
        self._set_cluster_min_insync_replicas()
        self._load_dynamic_broker_configs()
        self.quotas.reload(self.store)
        loop = asyncio.get_running_loop()
        start_security(self.security, loop.call_soon_threadsafe)  # ACLs loaded before any client is served
        self.log_manager.startup()
        # logs on disk that the metadata does not account for (topic deleted while we were down, or
        # re-created with another topic id, partition gone, replica moved away): renamed -stray and
        # kept, never deleted (KIP-858; Kafka's LogManager in KRaft mode)
        for plog in list(self.log_manager.logs()):
            why = stray_reason(self.topics.get(plog.topic), plog.partition, plog.topic_id, self.node_id)
            if why is not None:
                self.log_manager.mark_stray(plog.topic, plog.partition, why)
        # logs for every hosted partition (created after a crash between metadata and log)
        for meta in self.topics.topics.values():
            for p in meta.partitions:
                if self.node_id in p.replicas and self.log_manager.get_log(meta.name, p.index) is None:
                    self.log_manager.get_or_create_log(meta.name, p.index, meta.topic_id)
        # high watermarks come from replication-offset-checkpoint, then from replication (a lone
        # leader's moves to its log end at once); groups load when this broker leads their partition
        self.groups = GroupCoordinatorRuntime(
            self.config, self.topics, self, self.replica_manager, self.log_manager, self.now_ms
        )
        self.replica_manager.add_leadership_listener(OFFSETS_TOPIC, self.groups.on_leadership)
        self.groups.consumer.group_settings = self._consumer_group_settings
        self.txn = txn = TransactionCoordinatorRuntime(
            self.config, self.topics, self, self.replica_manager, self.log_manager, self.now_ms, self.producer_ids,
            self.node_id, self.cluster, self.inter_broker_listener, self.groups,
        )
        self.replica_manager.add_leadership_listener(TRANSACTION_STATE_TOPIC, txn.on_leadership)
        if self._remote_storage is not None:  # tiered storage (KIP-405)
            self.remote_log_manager = RemoteLogManager(
                self.config, self.node_id, self.replica_manager, self.log_manager, self.topics, self,
                self._remote_storage, self.now_ms,
                connect=None if self.cluster.ib_plaintext else self.cluster.ib_connect,
            )
            self.replica_manager.remote_reader = self.remote_log_manager
        self.share = ShareServices(self.config, self.topics, self, self.replica_manager, self.log_manager, self.now_ms,
                                   self.group_configs.get, self.groups)
        self.share.start()
        self.services = BrokerServices(
            node_id=self.node_id,
            cluster_id=self.cluster_id,
            rack=self.rack,
            config=self.config,
            topics=self.topics,
            cluster=self.cluster,
            replica_manager=self.replica_manager,
            log_manager=self.log_manager,
            groups=self.groups,
            txn=txn,
            fetch_sessions=self.fetch_sessions,
            producer_ids=self.producer_ids,
            admin=self,
            advertised_endpoint=self.advertised_endpoint,
            now_ms=self.now_ms,
            features=self.features,
            quotas=self.quotas,
            security=self.security,
            fetch_max_bytes=int(self.config.get("fetch.max.bytes")),
            share=self.share,
        )
        self.features.listeners.append(lambda f: txn.set_transaction_version(f.get(ft.TRANSACTION_VERSION, 0)))
        self._connection_edges = ConnectionEdges(
            services=self.services,
            max_request_bytes=int(self.config.get("socket.request.max.bytes")),
            request_memory=self.request_memory,
            on_closed=self.connection_closed,
            on_read=self._count_read,
            inter_broker=None if self.cluster.embedded else self.cluster,
            listener_security=self.listener_security,
            request_stats=self.request_stats,
        )
        fetchers = self._replica_fetchers()
        fetchers.tier_state = self.remote_log_manager  # a follower below a tiered leader's local log start
        self.replica_manager.start_fetchers(fetchers)
        if self.cluster.embedded:
            await self.cluster.start()  # elects itself and leads every partition before serving
            self._load_features()
            await self._start_listeners()
        else:
            # the registration names the bound port; connections wait in the backlog until this
            # broker is registered and knows the registered brokers and the controller (Kafka
            # enables request processing at the end of start-up too)
            await self._start_listeners()
            await self.cluster.start()
            await asyncio.get_running_loop().run_in_executor(None, self._load_features)
        # /metrics listens before the first Kafka request is answered: whoever saw this broker answer
        # (a client, a readiness probe) finds http.listeners bound too
        console = self._console()
        self.http = await http_listeners.start_http(
            self.config, self._metrics_sources(), {"/": console},
            metrics_guard=console.guard if metrics_need_login(self.config) else None)
        self.acceptor.enable(
            lambda sock, addr, listener: connection_for(self._connection_edges, sock, addr, listener))
        self._schedule_periodic()
        txn.start()
        self._warm_up_schemas()
        log.info(
            "started broker %d (cluster %s) with %d partitions in %.2fs, listening on %s",
            self.node_id,
            self.cluster_id,
            sum(1 for _ in self.log_manager.logs()),
            time.monotonic() - t0,
            ", ".join([f"{n}://{h}:{p}" for n, (h, p) in self.bound.items()]
                      + [f"http://{h}:{p}" for h, p in [self.http_bound] if p]),
        )

    def _load_features(self) -> None:
        """Read the finalized features and follow /feature (Kafka's FinalizedFeatureChangeListener);
        a broker that cannot support what is finalized refuses to start, as Kafka's does."""
        features, store, loop = self.features, self.store, self.cluster.loop

        def changed(_path: str) -> None:
            read = FinalizedFeatureCache.read(store)  # the watcher's thread (kazoo's in cluster mode)
            if read is None:
                return
            if self.cluster.embedded or loop is None:
                features.update(*read)
            else:
                loop.call_soon_threadsafe(features.update, *read)

        store.watch(ft.FEATURE_ZNODE, changed)
        read = FinalizedFeatureCache.read(store)
        if read is not None:
            bad = ft.incompatibilities(read[0], features.supported)
            if bad:
                raise ConfigError("The finalized features are incompatible with this broker: " + "; ".join(bad))
            features.update(*read)

    async def _start_listeners(self) -> None:
        """Bind and listen; connections wait in the backlog until the acceptor is enabled (server.acceptor)."""
        for name, host, port in self.config.listeners:
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host or "0.0.0.0", port))
            sock.listen(1024)
            sock.setblocking(False)
            bound = sock.getsockname()
            self.bound[name] = (str(bound[0]), int(bound[1]))
            self.acceptor.servers.append((sock, name))

    @property
    def http_bound(self) -> tuple[str, int]:
        """The address ``http.listeners`` is bound to; ("", 0) when there is none."""
        return self.http.bound or ("", 0) if self.http is not None else ("", 0)

    def _console(self) -> ConsoleApp:
        """The web console at / of http.listeners (odradek.console): Kafka requests as its users."""
        return build_console(self.config, lambda: self.services, self.config.listeners[0][0], self.log_manager,
                             self.security, self.topic_stats, self.request_stats)

    def _remote_pools(self) -> tuple[WorkerPoolStats, WorkerPoolStats] | None:
        """Tiered storage's copy and reader pools (their gauges in /metrics); None when the broker does not tier."""
        rlm = self.remote_log_manager
        return (rlm.copy_pool, rlm.reader_pool) if rlm is not None else None

    def _remote_throttles(self) -> tuple[ThrottleTimeSensor, ThrottleTimeSensor] | None:
        """KIP-956: the remote log manager's copy and fetch throttle-time sensors; None when the broker does not tier."""
        rlm = self.remote_log_manager
        return (rlm.copy_throttle_time, rlm.fetch_throttle_time) if rlm is not None else None

    def _remote_byte_rates(self) -> tuple[float, float] | None:
        """KIP-956: the bytes per second the copy and fetch quotas measure; None when the broker does not tier."""
        rlm = self.remote_log_manager
        return (rlm.copy_quota.measured(), rlm.fetch_quota.measured()) if rlm is not None else None

    def _metrics_sources(self) -> MetricsSources:
        rm, cluster, node, sessions = self.replica_manager, self.cluster, self.node_id, self.fetch_sessions

        def connections() -> dict[str, int]:
            out = dict.fromkeys(self.bound, 0)
            for c in self.connections:
                out[c.listener] = out.get(c.listener, 0) + 1
            return out

        return MetricsSources(
            node_id=node,
            topic_stats=self.topic_stats,
            request_stats=self.request_stats,
            api_names=http_listeners.api_names(),
            partitions=lambda: list(rm.partitions.values()),
            isr_changes=lambda: (rm.isr_shrinks, rm.isr_expands),
            spliced_bytes=lambda: rm.fetchers.spliced_bytes() if rm.fetchers is not None else 0,
            fetch_sessions=lambda: (len(sessions.sessions), sessions.total_partitions, sessions.evictions),
            offline_replicas=lambda: len(self.log_manager.offline_partitions),
            min_isr=lambda topic: self.log_config_for(topic).min_insync_replicas,
            logs=lambda: list(self.log_manager.logs()),
            is_controller=lambda: bool(cluster.controller.active),
            topics=lambda: list(self.topics.topics.values()),
            live_brokers=lambda: {node} | set(cluster.live_brokers) if cluster.embedded else set(cluster.live_brokers),
            committed_offsets=lambda: http_listeners.committed_offsets(self.groups),
            connections=connections,
            quotas={"Produce": self.quotas.produce, "Fetch": self.quotas.fetch, "Request": self.quotas.request},
            now_ms=self.now_ms,
            gc_pauses=gc_tuning.pauses(),
            gc_pause_bounds=gc_tuning.PAUSE_BUCKETS,
            remote_pools=self._remote_pools,
            remote_throttles=self._remote_throttles,
            remote_byte_rates=self._remote_byte_rates,
            share_stats=self.share.stats if self.share is not None else None,
            share_coordinator_loads=self.share.coordinator_load_times if self.share is not None else None,
            share_group_states=self.share.group_states if self.share is not None else (lambda: ()),
        )

    # -- connections (accepting them: server.acceptor, Kafka's Acceptor with its ConnectionQuotas)
    @property
    def connections(self) -> set[Connection]:
        """The open client and inter-broker connections."""
        return self.acceptor.connections

    def _count_read(self) -> None:
        self.reads += 1

    def connection_closed(self, conn: Connection) -> None:
        self.acceptor.closed(conn)

    def _every(self, interval_ms: int, fn: Any, name: str) -> None:
        loop = asyncio.get_running_loop()

        def tick() -> None:
            try:
                fn()
            except Exception:
                log.exception("periodic task %s failed", name)
            if self._stopping is not None and not self._stopping.is_set():
                self._timers.append(loop.call_later(interval_ms / 1000.0, tick))

        self._timers.append(loop.call_later(interval_ms / 1000.0, tick))

    def _schedule_periodic(self) -> None:
        self._reschedule_retention()
        max_idle_ms = int(self.config.get("connections.max.idle.ms"))
        if max_idle_ms >= 0:
            self._every(
                min(max(max_idle_ms // 10, 10), 1000),
                lambda: self.acceptor.expire_idle(max_idle_ms / 1000.0),
                "idle-connections",
            )
        self._every(1000, lambda: self.replica_manager.flush_dirty(self.now_ms()), "log-flusher")
        self._every(
            max(int(self.config.get("log.flush.offset.checkpoint.interval.ms")), 1000),
            self.replica_manager.checkpoint,
            "checkpoint",
        )
        self._every(1000, self._prune_timers, "timers")
        rlm = self.remote_log_manager
        if rlm is not None:
            self._every(int(self.config.get("remote.log.manager.task.interval.ms")), rlm.tick, "remote-log-manager")
        if self.request_stats is not None:
            self._every(int(RequestStats.WINDOW_S * 1000), self.request_stats.rotate, "request-metrics-window")
        if self.share is not None:  # PartitionLoadTimeMs' percentiles: the recent loads, as the request latencies
            self._every(int(RequestStats.WINDOW_S * 1000), self.share.stats.partition_load.rotate,
                        "share-metrics-window")
        # producer.id.expiration.ms is dynamic: read at each check (Kafka's PeriodicProducerExpirationCheck)
        self.log_manager.remove_expired_producers(int(self.config.get("producer.id.expiration.ms")))
        self._every(
            int(self.config.get("producer.id.expiration.check.interval.ms")),
            lambda: self.log_manager.remove_expired_producers(int(self.config.get("producer.id.expiration.ms"))),
            "producer-id-expiration",
        )
        if not self.cluster.embedded:
            lag = int(self.config.get("replica.lag.time.max.ms"))
            self._every(
                max(lag // 2, 100), lambda: self.replica_manager.check_isr(self.replica_manager.lag_clock_ms(), lag), "isr-expiration"
            )
            self._every(
                int(self.config.get("replica.high.watermark.checkpoint.interval.ms")),
                self.replica_manager.checkpoint,
                "high-watermark-checkpoint",
            )
            if self.config.get("auto.leader.rebalance.enable"):
                cluster = self.cluster
                self._every(
                    int(self.config.get("leader.imbalance.check.interval.seconds")) * 1000,
                    lambda: cluster.put("AutoLeaderBalance"),
                    "auto-leader-balance",
                )
        self._every(
            int(self.config.get("offsets.retention.check.interval.ms")),
            lambda: self.groups.coordinator.expire_offsets(self.now_ms()),
            "offsets-expiry",
        )
        # ---- log cleaner (compaction, odradek.log.cleaner): the heavy part runs in the cleaner's
        # worker thread; choosing a log and installing the result run here, on the loop.
        self._reconfigure_cleaner()
        # ---- end log cleaner

    def _warm_up_schemas(self) -> None:
        """Load the protocol classes clients use most while the broker is idle, one API per loop
        turn, so the first Fetch or ListOffsets does not pay for them (and stall the loop) when
        it comes. A step waits while sockets are being read (clients get the CPU first) and
        runs anyway once it has waited SCHEMA_WARM_UP_MAX_WAIT_S."""
        loop = asyncio.get_running_loop()
        steps = schema_warm_up_steps()
        waited_since = loop.time()
        seen = self.reads

        def run(i: int) -> None:
            nonlocal waited_since, seen
            if self._stopping is None or self._stopping.is_set():
                return
            busy = self.reads != seen
            seen = self.reads
            if busy and loop.time() - waited_since < SCHEMA_WARM_UP_MAX_WAIT_S:
                self._timers.append(loop.call_later(SCHEMA_WARM_UP_IDLE_S, run, i))
                return
            try:
                steps[i]()
            except Exception:  # the request that needs it fails the same way, and reports it
                log.debug("protocol schema warm-up step %d failed", i, exc_info=True)
            waited_since = loop.time()
            seen = self.reads
            if i + 1 < len(steps):
                self._timers.append(loop.call_later(SCHEMA_WARM_UP_IDLE_S, run, i + 1))

        if steps:
            self._timers.append(loop.call_later(SCHEMA_WARM_UP_IDLE_S, run, 0))

    def _prune_timers(self) -> None:
        self._timers = [t for t in self._timers if not t.cancelled() and t.when() > asyncio.get_running_loop().time()]
        if self._retention_timer is not None:
            self._timers.append(self._retention_timer)
        if self._cleaner_timer is not None:
            self._timers.append(self._cleaner_timer)

    _retention_timer: asyncio.TimerHandle | None = None
    _cleaner_timer: asyncio.TimerHandle | None = None
    _cleaner_settings: tuple[int, int] | None = None

    def _reconfigure_cleaner(self) -> None:
        """The log cleaner's settings from the broker config, static or dynamic: log.cleaner.backoff.ms and
        log.cleaner.dedupe.buffer.size are dynamic cluster-wide configs in Kafka (LogCleaner is Reconfigurable),
        so a changed value takes effect at once, the next run scheduled after the new backoff (Kafka restarts
        its cleaner threads with the new config). Nothing happens when log.cleaner.enable (read-only) is false,
        outside a running loop, or when neither value changed."""
        if not self.config.get("log.cleaner.enable"):
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        from odradek.log.cleaner import CleanerConfig

        backoff_ms = max(int(self.config.get("log.cleaner.backoff.ms")), 100)
        dedupe = int(self.config.get("log.cleaner.dedupe.buffer.size"))
        if self._cleaner_settings == (backoff_ms, dedupe):
            return
        self._cleaner_settings = (backoff_ms, dedupe)
        self.log_manager.cleaner.config = CleanerConfig(enabled=True, backoff_ms=backoff_ms, dedupe_buffer_size=dedupe)
        if self._cleaner_timer is not None:
            self._cleaner_timer.cancel()

        def clean_tick() -> None:
            try:
                self.log_manager.maybe_clean(self.now_ms(), wake=lambda: loop.call_soon_threadsafe(wake_tick))
            except Exception:
                log.exception("periodic task log-cleaner failed")

        def wake_tick() -> None:
            if self._stopping is None or not self._stopping.is_set():
                clean_tick()

        def timer_tick() -> None:
            clean_tick()
            if self._stopping is not None and not self._stopping.is_set():
                self._cleaner_timer = loop.call_later(backoff_ms / 1000.0, timer_tick)

        self._cleaner_timer = loop.call_later(backoff_ms / 1000.0, timer_tick)

    def _reschedule_retention(self) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        if self._retention_timer is not None:
            self._retention_timer.cancel()
        interval = int(self.config.get("log.retention.check.interval.ms")) / 1000.0

        def tick() -> None:
            try:
                self.log_manager.cleanup_logs(self.now_ms())
            except Exception:
                log.exception("retention check failed")
            if self._stopping is not None and not self._stopping.is_set():
                self._retention_timer = loop.call_later(interval, tick)

        self._retention_timer = loop.call_later(interval, tick)

    def request_stop(self) -> None:
        """Ask for a stop: :meth:`wait_stopped` returns, and its caller runs :meth:`stop`. The broker
        goes on serving (and accepting connections) until then: a controlled shutdown needs it, the
        controller's own ControlledShutdown request reaching it over a new connection to itself, as
        in Kafka, where the socket server stops only after the controlled shutdown."""
        if self._stop_requested is not None:
            self._stop_requested.set()

    async def wait_stopped(self) -> None:
        assert self._stop_requested is not None
        await self._stop_requested.wait()

    async def stop(self) -> None:
        log.info("shutting down broker %d", self.node_id)
        if not self.cluster.embedded:
            await self.cluster.shutdown()  # controlled shutdown first, while still serving
        if self._stopping is not None:
            self._stopping.set()
        if self._stop_requested is not None:
            self._stop_requested.set()
        for t in self._timers:
            t.cancel()
        if self._retention_timer is not None:
            self._retention_timer.cancel()
        if self._cleaner_timer is not None:
            self._cleaner_timer.cancel()
        self.acceptor.close()
        if self.http is not None:
            await self.http.stop()
        self.replica_manager.cancel_waiters()
        for conn in list(self.connections):
            conn.close()
        if self.groups is not None:
            self.groups.shutdown()
        if self.txn is not None:
            self.txn.shutdown()
        if self.remote_log_manager is not None:
            self.remote_log_manager.shutdown()
        if self.share is not None:
            self.share.shutdown()
        self.log_manager.shutdown()
        if self.cluster.embedded:
            await self.cluster.shutdown()
        log.info("broker %d shut down cleanly", self.node_id)

