"""A broker's link to the metadata store (Kafka's KafkaZkClient side of KafkaServer), on the
broker's event loop: registration, the inter-broker requests it receives, metadata waits,
config-change notices, log dir failure notices and controlled shutdown.

Two deployments run this same code (one controller, two stores):

- cluster mode (``zookeeper.connect`` set): a ZkStore; the controller runs on a thread of
  its own and talks to brokers over the inter-broker channel;
- embedded (the default): a LocalStore file; this single broker registers, elects itself
  controller and leader of everything, and the controller runs on the event loop with
  its requests handed straight to this broker (no sockets, no threads). Inter-broker
  requests from the network are refused.

- Registration: /brokers/ids/<id> (ephemeral); the broker epoch is that znode's czxid.
  After a lost session the broker registers again (a new epoch) and re-arms its watches.
- Controller: hosted by controller.runner.ControllerRunner (its event thread, queue and
  channel); ZooKeeper watches armed here put events on its queue, and this link does the
  broker's part of two of them on the controller's thread (Reregister, TopicChange).
- Inter-broker requests (protocol.interbroker) are accepted only on the inter-broker
  listener and the control plane listener (server.cluster_access: elsewhere they are
  answered CLUSTER_AUTHORIZATION_FAILED), fenced by controller epoch and broker epoch (an
  epoch or controller not seen before is checked against ZooKeeper first and refused only
  when ZooKeeper contradicts it, never for want of an answer: cluster_access.ControllerEpochGuard)
  and handed on: LeaderAndIsr and StopReplica to the
  replica manager (:class:`ReplicaRoles`), UpdateMetadata to the metadata cache (the
  TopicRegistry every client request is answered from), ControlledShutdown to the controller.
- Shutdown: controlled shutdown first (controlled.shutdown.enable, one request framed by
  client.framer through controller.channel.interbroker_request), then deregistration.

Wiring: constructed with the config and the store (the metadata cache and the replica manager
need the store and this link first), then :meth:`ClusterLink.wire` gives it the metadata cache,
the replica manager's roles and the config reload, each a narrow protocol.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from odradek.client.async_wire import Connect, plain_connect
from odradek.client.secure_connect import connector
from odradek.config import ConfigError
from odradek.controller import zk_data as zd
from odradek.controller.change_notifications import purge_obsolete
from odradek.controller.channel import interbroker_request
from odradek.controller.controller import Controller
from odradek.controller.runner import ControllerRunner
from odradek.controller.store import MetadataStore, StoreError
from odradek.controller.zk_data import endpoint_for
from odradek.controller.zk_store import ZkAuthFailedError, ZkStore
from odradek.protocol import errors
from odradek.protocol import interbroker as ib
from odradek.security.inter_broker import inter_broker_security
from odradek.security.zk_client import (
    LOGIN_CONFIG,
    SASL_CLIENT,
    SASL_CLIENT_CONFIG,
    ZkClientSecurity,
    zk_client_security,
)
from odradek.server.cluster_access import (
    Answer,
    ControllerEpochGuard,
    cluster_listeners,
    control_plane_listener,
    refusal,
)
from odradek.server.cluster_access import (
    inter_broker_listener as inter_broker_listener_of,
)

if TYPE_CHECKING:
    from odradek.config import BrokerConfig
    from odradek.controller.topics import TopicMeta

log = logging.getLogger("odradek.cluster")

# LeaderAndIsr partitions a broker applies per event loop turn (each may create a log); the
# embedded broker's own requests are sliced the same way by controller.runner (SELF_SLICE)
LEADER_AND_ISR_SLICE = 16

TP = tuple[str, int]


class ReplicaRoles(Protocol):
    """What the controller's requests change in the replica manager."""

    def become_leader_or_follower(self, body: dict[str, Any]) -> list[dict[str, Any]]: ...

    def stop_replicas(self, body: dict[str, Any]) -> list[dict[str, Any]]: ...

    def start_missing_fetchers(self) -> None: ...

    async def shutdown_fetchers(self) -> None: ...


class MetadataCacheUpdates(Protocol):
    """What UpdateMetadata and the controller's unclean-election check need of the metadata cache."""

    def get(self, name: str) -> TopicMeta | None: ...

    def apply_partition_states(
        self, by_topic: Mapping[str, list[dict[str, object]]], topic_ids: Mapping[str, str], *, full: bool
    ) -> None: ...


class ClusterLink:
    def __init__(
        self,
        config: BrokerConfig,
        broker_id: int,
        *,
        local_store: MetadataStore | None = None,
        advertised_endpoint: Callable[[str], tuple[str, int]],
        inter_broker_listener: str,
        rack: str | None = None,
    ) -> None:
        cfg = self.config = config
        self.broker_id = broker_id
        self.advertised_endpoint = advertised_endpoint
        self.rack = rack
        self.embedded = local_store is not None
        self.zk: ZkStore | None = None
        self.zk_security = ZkClientSecurity()
        self.store: MetadataStore
        if local_store is not None:
            self.store = local_store
        else:
            zk_security = zk_client_security(
                {n: cfg.raw(n)[0] for n in (LOGIN_CONFIG, SASL_CLIENT, SASL_CLIENT_CONFIG)},
                set_acl=bool(cfg.get("zookeeper.set.acl")))
            self.zk_security = zk_security
            self.zk = ZkStore(
                str(cfg.get("zookeeper.connect")),
                session_timeout_ms=int(cfg.get("zookeeper.session.timeout.ms")),
                connection_timeout_ms=cfg.get("zookeeper.connection.timeout.ms"),
                sasl_options=zk_security.sasl_options(),
                acls_for=(lambda path: zd.default_acls(path, True)) if zk_security.set_acl else None,
                create_chroot=True,
            )
            self.store = self.zk
        zk = self.zk
        # Kafka's listener rules are checked at start-up (a ConfigError stops the broker)
        self.ib_listener = inter_broker_listener_of(cfg) if zk is not None else inter_broker_listener
        self.control_listener = control_plane_listener(cfg) if zk is not None else None
        self.cluster_listeners = cluster_listeners(cfg) if zk is not None else frozenset()
        # this broker's own connections to other brokers speak the inter-broker listener's
        # protocol (TLS, SASL); the controller's those of its control plane listener when set
        self.ib_connect: Connect = plain_connect
        self.control_connect: Connect = plain_connect
        self.ib_plaintext = True  # no TLS, no SASL: the replica fetchers may splice (odradek.replica.fetch.splice)
        if zk is not None:
            ib_security = inter_broker_security(cfg, self.ib_listener)
            self.ib_plaintext = ib_security.protocol == "PLAINTEXT"
            self.ib_connect = connector(ib_security, f"broker-{broker_id}")
            self.control_connect = connector(
                inter_broker_security(cfg, self.control_listener or self.ib_listener), f"controller-{broker_id}")
        self.guard = ControllerEpochGuard(self.store, zk.sync if zk is not None else None)
        self.broker_epoch = -1
        self.controller_epoch = 0  # the highest seen in a controller request
        self.controller_id = -1
        self.live_brokers: dict[int, dict[str, Any]] = {}
        self.metadata_received = False  # a controller's UpdateMetadata has been applied
        self.loop: asyncio.AbstractEventLoop | None = None
        # the controller: on a thread of its own in cluster mode, on the loop embedded
        self.runner = ControllerRunner(
            self.broker_id,
            self.store,
            threaded=zk is not None,
            unclean_leader_election=self._unclean_allowed,
            imbalance_percentage=int(cfg.get("leader.imbalance.per.broker.percentage")),
            endpoint_of=self._controller_endpoint,
            serve_local=self.handle_request,
            before_event=self._before_controller_event,
            after_event=self._after_controller_event,
        )
        self._watched_topics: set[str] = set()
        self._session_lost = False
        self._metadata_waiters: list[tuple[Callable[[], bool], asyncio.Future[Any], Callable[[], Any]]] = []
        # given by wire()
        self.metadata_cache: MetadataCacheUpdates | None = None
        self.replicas: ReplicaRoles | None = None
        self.reload_configs: Callable[[], None] = lambda: None

    def wire(
        self, metadata_cache: MetadataCacheUpdates, replicas: ReplicaRoles, reload_configs: Callable[[], None]
    ) -> None:
        """The components this link hands the controller's requests and config notices to."""
        self.metadata_cache = metadata_cache
        self.replicas = replicas
        self.reload_configs = reload_configs

    @property
    def controller(self) -> Controller:
        """This broker's controller (``active`` once it is elected)."""
        return self.runner.controller

    def call_controller(self, kind: str, then: Callable[[Any], Any], **args: Any) -> asyncio.Future[Any]:
        """Run a controller event that answers through ``reply`` (ControllerRunner.call_controller)."""
        return self.runner.call_controller(kind, then, **args)

    # ------------------------------------------------------------------ start / stop
    async def start(self) -> None:
        """Register, start the controller; called once listeners are bound. Embedded: returns
        once this broker leads every partition."""
        self.loop = asyncio.get_running_loop()
        if self.zk is None:
            self._register()
            self._arm_watches()
            self.runner.start_embedded(self.loop)  # lead every partition before the listeners open
            return
        self.runner.open_channel(int(self.config.get("controller.socket.timeout.ms")) / 1000.0, self.control_connect)
        self.zk.state_listeners.append(self._on_session_state)
        await self.loop.run_in_executor(None, self._register)
        brokers, controller = await self.loop.run_in_executor(None, self._read_cluster)
        self._learn_brokers(brokers)
        if controller is not None:
            self._learn_controller(controller)
        self.runner.start(self.loop)
        await self.loop.run_in_executor(None, self._arm_watches)
        self.put("Startup")

    def connect_store(self) -> None:
        """Blocking: open the ZooKeeper session (cluster mode); create the persistent paths."""
        if self.zk is not None:
            try:
                self.zk.start()
            except ZkAuthFailedError:
                raise ConfigError(f"ZooKeeper refused the SASL login of {self.zk_security.describe()}: "
                                  "check the username and password") from None
            if self.zk_security.sasl:
                log.info("logged in to ZooKeeper as %s%s", self.zk_security.describe(),
                         "; znodes get secure ACLs (zookeeper.set.acl)" if self.zk_security.set_acl else "")
        zd.ensure_paths(self.store)

    def _registration(self) -> zd.BrokerInfo:
        host, port = self.advertised_endpoint(self.ib_listener)
        endpoints = tuple(
            f"{name}://{h}:{p}" for name, h, p in
            ((n, *self.advertised_endpoint(n)) for n, _, _ in self.config.advertised_listeners)
        )
        from odradek.config_check import security_protocol_map

        known = security_protocol_map(self.config.raw("listener.security.protocol.map")[0])
        protocols = tuple((n, known.get(n.upper(), "PLAINTEXT")) for n, _, _ in self.config.advertised_listeners)
        return zd.BrokerInfo(self.broker_id, host, port, self.rack, endpoints, protocols=protocols)

    def _register(self) -> None:
        info = self._registration()
        session_s = self.zk.client._session_timeout / 1000.0 if self.zk is not None else 0.0  # noqa: SLF001
        deadline = time.monotonic() + max(session_s, 6.0) + 2.0
        while True:
            try:
                self.broker_epoch = zd.register_broker(self.store, info)
                break
            except StoreError as e:
                # the previous session's ephemeral node may still be there (restart within
                # the session timeout): wait for ZooKeeper to expire it, as Kafka does
                if time.monotonic() > deadline:
                    raise
                log.info("registration of broker %d failed (%s); retrying", self.broker_id, e)
                time.sleep(0.5)
        if self.zk is not None:
            log.info("registered broker %d at %s:%d in ZooKeeper (broker epoch %d)",
                     self.broker_id, info.host, info.port, self.broker_epoch)

    def _arm_watches(self) -> None:
        w = self.store.watch
        w(zd.CONTROLLER, lambda _p: self.put("ControllerChange"))
        w(zd.BROKER_IDS, lambda _p: self.put("BrokerChange"))
        w("/brokers/topics", lambda _p: self.put("TopicChange"))
        w(zd.ISR_CHANGE, lambda _p: self.put("IsrChangeNotification"))
        w(zd.DELETE_TOPICS, lambda _p: self.put("TopicDeletion"))
        w(zd.PREFERRED, lambda _p: self.put("PreferredReplicaElectionNode"))
        w(zd.REASSIGN, lambda _p: self.put("ReassignmentNode"))
        w(zd.LOG_DIR_EVENT, lambda _p: self.put("LogDirEventNotification"))
        w("/config/changes", lambda _p: self._on_config_change())
        self._watch_topics()

    def _watch_topics(self) -> None:
        try:
            topics = self.store.children("/brokers/topics")
        except StoreError:
            return
        for t in topics:
            if t not in self._watched_topics:
                self._watched_topics.add(t)
                self.store.watch(f"/brokers/topics/{t}", self._partition_modifications_of(t))

    def _partition_modifications_of(self, topic: str) -> Callable[[str], None]:
        return lambda _path: self.put("PartitionModifications", topic=topic)

    async def shutdown(self) -> None:
        """Controlled shutdown, then leave the cluster."""
        if self.zk is None:
            self.runner.stop()
            if self.replicas is not None:
                await self.replicas.shutdown_fetchers()
            self.store.close()
            return
        if self.config.get("controlled.shutdown.enable"):
            try:
                await self._controlled_shutdown()
            except Exception:
                log.exception("controlled shutdown failed; stopping anyway")
        self.runner.stop()
        if self.replicas is not None:
            await self.replicas.shutdown_fetchers()
        await self.runner.close()
        assert self.loop is not None
        await self.loop.run_in_executor(None, self.zk.close)
        self.runner.join(timeout=5)

    # ------------------------------------------------------------------ ZooKeeper session
    def _on_session_state(self, state: str) -> None:
        # kazoo's thread: never block here
        if state in ("SUSPENDED", "LOST"):
            if state == "LOST":
                self._session_lost = True
            self.put("Resign")
        elif state == "CONNECTED" and self._session_lost:
            self.put("Reregister")  # the flag is cleared once registered again
        elif state == "CONNECTED":
            self.put("ControllerChange")  # the session survived: take part in the election again

    # ------------------------------------------------------------------ controller events
    def put(self, kind: str, **args: Any) -> None:
        """Queue a controller event (any thread)."""
        self.runner.put(kind, **args)

    def _before_controller_event(self, kind: str) -> str | None:
        """The broker's part of an event, on the controller's thread: register again after a
        lost session (then the controller starts over), watch new topics. None: drop the event."""
        if kind == "Reregister":
            if not self._session_lost:
                return None
            try:
                self._register()
            except StoreError as e:
                log.warning("registering again failed (%s); retrying in 1 s", e)
                retry = threading.Timer(1.0, self.put, ("Reregister",))
                retry.daemon = True
                retry.start()
                return None
            self._session_lost = False
            if self.zk is not None:
                self.zk.rearm_watches()
            return "Startup"
        if kind == "TopicChange":
            self._watch_topics()
        return kind

    def _after_controller_event(self, kind: str, c: Controller) -> None:
        """On the controller's thread: what the election and registrations tell Metadata answers."""
        if kind in ("Startup", "ControllerChange") and c.known_controller is not None and self.loop is not None:
            self.loop.call_soon_threadsafe(self._learn_controller, c.known_controller)
        if kind in ("Startup", "BrokerChange") and not self.metadata_received and self.loop is not None:
            self.loop.call_soon_threadsafe(self._learn_brokers, self._registered_brokers())

    def _learn_controller(self, controller_id: int) -> None:
        """The controller ZooKeeper names, for Metadata answers until a controller's own request
        says who it is. Without it a broker that registered after the election answered
        controller -1 until the controller's UpdateMetadata came, and librdkafka's admin client,
        told -1 twice, waits for a broker state change that never comes (CreateTopics or
        ElectLeaders then time out)."""
        if self.controller_id < 0:
            self.controller_id = controller_id

    def _registered_brokers(self) -> dict[int, dict[str, Any]]:
        try:
            infos = zd.live_brokers(self.store)
        except StoreError as e:
            log.info("reading the broker registrations failed: %s", e)
            return {}
        return {b: {"id": b, "host": i.host, "port": i.port, "rack": i.rack, "endpoints": list(i.endpoints)}
                for b, i in infos.items()}

    def _read_cluster(self) -> tuple[dict[int, dict[str, Any]], int | None]:
        """Blocking: the registered brokers and the controller ZooKeeper names."""
        try:
            controller = zd.read_controller(self.store)
        except StoreError:
            controller = None
        return self._registered_brokers(), controller

    def _learn_brokers(self, brokers: dict[int, dict[str, Any]]) -> None:
        """The brokers registered in ZooKeeper, for Metadata answers until the controller's first
        UpdateMetadata arrives. Without them a broker that registered while the controller could
        not reach it answered with no brokers at all, and librdkafka's admin client, told the
        controller's id (see _learn_controller) but not its address, waits for a broker state
        change that never comes: it does not ask for Metadata again (CreateTopics timed out
        after 30 s in CI)."""
        if not self.metadata_received and brokers:
            self.live_brokers = brokers

    def _controller_endpoint(self, info: zd.BrokerInfo) -> tuple[str, int]:
        """Where the controller's requests to a broker go: its control plane listener when one
        is set, else its inter-broker listener (Kafka's ControllerChannelManager)."""
        name = self.control_listener or self.ib_listener
        return endpoint_for({"host": info.host, "port": info.port, "endpoints": info.endpoints}, name)

    def notify_log_dir_failure(self) -> None:
        """Tell the controller (/log_dir_event_notification) that a log dir of this broker failed."""
        doc = json.dumps({"version": 1, "broker": self.broker_id, "event": 1}).encode()

        def work() -> None:
            try:
                self.store.create(zd.LOG_DIR_EVENT + "/log_dir_event_", doc, sequential=True, makepath=True)
            except StoreError as e:
                log.error("could not notify the controller of a log dir failure: %s", e)

        if self.zk is None or self.loop is None:
            work()
        else:
            self.loop.run_in_executor(None, work)

    def _unclean_allowed(self, topic: str) -> bool:
        meta = self.metadata_cache.get(topic) if self.metadata_cache is not None else None
        v, _ = self.config.topic_value("unclean.leader.election.enable", meta.configs if meta else {})
        return bool(v)

    # ------------------------------------------------------------------ inter-broker requests
    def handle_request(
        self, api_key: int, body: dict[str, Any], listener: str | None = None, peer: str = ""
    ) -> dict[str, Any] | asyncio.Future[Any]:
        """An inter-broker request; ``listener`` is None for the embedded controller's own."""
        if listener is not None:
            if listener not in self.cluster_listeners:
                log.warning("refusing inter-broker request %d from %s on listener %s: CLUSTER_AUTHORIZATION_FAILED "
                            "(accepted only on %s)", api_key, peer, listener, ", ".join(sorted(self.cluster_listeners)))
                return refusal(api_key)
            if api_key != ib.CONTROLLED_SHUTDOWN and self.loop is not None:
                return self.guard.run(self.loop, api_key, body, self._apply_controller_request,
                                      lambda: self.controller_epoch)
        if api_key == ib.CONTROLLED_SHUTDOWN:
            return self._on_controlled_shutdown_request(body)
        return self._apply_controller_request(api_key, body)

    def _apply_controller_request(self, api_key: int, body: dict[str, Any]) -> Answer:
        fenced = self._fence(body)
        if fenced is not None:
            return {"error_code": fenced, "partitions": []}
        if api_key == ib.UPDATE_METADATA:
            self.apply_metadata(body)
            return {"error_code": errors.NONE}
        replicas = self.replicas
        assert replicas is not None, "wire() first"
        if api_key == ib.LEADER_AND_ISR:
            if not self.embedded and self.loop is not None and len(body["partitions"]) > LEADER_AND_ISR_SLICE:
                return self._become_in_slices(body)
            return {"error_code": errors.NONE, "partitions": replicas.become_leader_or_follower(body)}
        if api_key == ib.STOP_REPLICA:
            return {"error_code": errors.NONE, "partitions": replicas.stop_replicas(body)}
        return {"error_code": errors.INVALID_REQUEST}

    def _become_in_slices(self, body: dict[str, Any]) -> asyncio.Future[Any]:
        """A large LeaderAndIsr (a new topic's batch, every partition after a failover) applied
        LEADER_AND_ISR_SLICE partitions per loop turn, each making its logs, so other clients are
        served in between; answered once every partition is done (requests after it wait, see
        ControllerEpochGuard)."""
        assert self.loop is not None and self.replicas is not None
        loop, replicas = self.loop, self.replicas
        parts = list(body["partitions"])
        answers: list[dict[str, Any]] = []
        fut: asyncio.Future[Any] = loop.create_future()

        def step(start: int) -> None:
            if fut.done():
                return
            try:
                answers.extend(replicas.become_leader_or_follower(
                    dict(body, partitions=parts[start:start + LEADER_AND_ISR_SLICE])))
            except Exception as e:
                fut.set_exception(e)
                return
            if start + LEADER_AND_ISR_SLICE < len(parts):
                loop.call_soon(step, start + LEADER_AND_ISR_SLICE)
            else:
                fut.set_result({"error_code": errors.NONE, "partitions": answers})

        step(0)
        return fut

    def _fence(self, body: dict[str, Any]) -> int | None:
        epoch = int(body["controller_epoch"])
        if epoch < self.controller_epoch:
            log.info("ignoring a request from controller %d with stale epoch %d (current %d)",
                     body["controller_id"], epoch, self.controller_epoch)
            return errors.STALE_CONTROLLER_EPOCH
        be = int(body["broker_epoch"])
        if be >= 0 and self.broker_epoch >= 0 and be < self.broker_epoch:  # meant for an earlier incarnation
            log.info("ignoring a controller request for broker epoch %d (mine is %d)", be, self.broker_epoch)
            return errors.STALE_BROKER_EPOCH
        self.controller_epoch = epoch
        self.controller_id = int(body["controller_id"])
        return None

    def apply_metadata(self, body: dict[str, Any]) -> None:
        self.metadata_received = True
        self.live_brokers = {int(n["id"]): n for n in body["live_brokers"]}
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for ps in body["partitions"]:
            by_topic.setdefault(str(ps["topic"]), []).append(ps)
        assert self.metadata_cache is not None and self.replicas is not None, "wire() first"
        self.metadata_cache.apply_partition_states(
            by_topic, dict(body.get("topic_ids", {})), full=bool(body.get("full", True))
        )
        if not self.embedded:
            self.replicas.start_missing_fetchers()
        self._check_metadata_waiters()

    def _on_controlled_shutdown_request(self, body: dict[str, Any]) -> asyncio.Future[Any]:
        def answer(result: tuple[int, list[TP]]) -> dict[str, Any]:
            code, remaining = result
            return {"error_code": code, "remaining_partitions": [{"topic": t, "partition": p} for t, p in remaining]}

        return self.call_controller("ControlledShutdown", answer, broker_id=int(body["broker_id"]),
                                    broker_epoch=int(body["broker_epoch"]))

    # ------------------------------------------------------------------ metadata waits
    def wait_for_metadata(
        self, predicate: Callable[[], bool], timeout_ms: int, then: Callable[[], Any]
    ) -> asyncio.Future[Any]:
        """Resolves with ``then()`` once ``predicate()`` holds after a metadata update, or at the
        timeout (``then`` looks at the cache itself to tell which)."""
        assert self.loop is not None
        fut: asyncio.Future[Any] = self.loop.create_future()
        if predicate():
            fut.set_result(then())
            return fut
        entry = (predicate, fut, then)
        self._metadata_waiters.append(entry)

        def expire() -> None:
            if not fut.done():
                fut.set_result(then())
            with contextlib.suppress(ValueError):
                self._metadata_waiters.remove(entry)

        self.loop.call_later(max(timeout_ms, 0) / 1000.0, expire)
        return fut

    def _check_metadata_waiters(self) -> None:
        keep = []
        for pred, fut, then in self._metadata_waiters:
            if fut.done():
                continue
            if pred():
                fut.set_result(then())
            else:
                keep.append((pred, fut, then))
        self._metadata_waiters = keep

    # ------------------------------------------------------------------ config changes
    def _on_config_change(self) -> None:
        if self.loop is not None:
            self.loop.call_soon_threadsafe(self._reload_configs_then_elect)
            # then delete the notifications older than 15 minutes (ZkNodeChangeNotificationListener)
            self.loop.call_soon_threadsafe(self.loop.run_in_executor, None, self._purge_config_changes)

    def _reload_configs_then_elect(self) -> None:
        """On the loop: re-read the configs, then let the controller (if this broker is it) try
        leaderless partitions again, which a newly allowed unclean election may give a leader."""
        self.reload_configs()
        self.put("UncleanLeaderElectionEnable")

    def _purge_config_changes(self) -> None:
        try:
            purge_obsolete(self.store, "/config/changes", int(time.time() * 1000),
                           int(self.config.get("odradek.change.notification.expiration.ms")))
        except Exception:
            log.exception("purging /config/changes notifications failed")

    def notify_config_change(self, entity_path: str) -> None:
        if self.zk is None:
            return  # embedded: the one broker applied it already
        doc = json.dumps({"version": 2, "entity_path": entity_path}).encode()
        self.store.create("/config/changes/config_change_", doc, sequential=True, makepath=True)

    # ------------------------------------------------------------------ controlled shutdown
    async def _controlled_shutdown(self) -> None:
        cfg = self.config
        retries = int(cfg.get("controlled.shutdown.max.retries"))
        backoff = int(cfg.get("controlled.shutdown.retry.backoff.ms")) / 1000.0
        assert self.loop is not None
        for attempt in range(retries):
            controller = await self.loop.run_in_executor(None, zd.read_controller, self.store)
            node = None
            if controller is not None:
                node = self.live_brokers.get(controller)
                if node is None:
                    brokers = await self.loop.run_in_executor(None, zd.live_brokers, self.store)
                    info = brokers.get(controller)
                    node = {"host": info.host, "port": info.port} if info is not None else None
            if node is None:
                log.info("controlled shutdown: no controller; retrying")
                await asyncio.sleep(backoff)
                continue
            try:
                resp = await self._send_controlled_shutdown(str(node["host"]), int(node["port"]))
            except (OSError, TimeoutError, asyncio.IncompleteReadError, ib.InterBrokerDecodeError) as e:
                log.info("controlled shutdown attempt %d failed: %s", attempt + 1, e)
                await asyncio.sleep(backoff)
                continue
            remaining = resp.get("remaining_partitions", [])
            if resp["error_code"] == errors.NONE and not remaining:
                log.info("controlled shutdown of broker %d succeeded", self.broker_id)
                return
            log.info("controlled shutdown attempt %d: error %d, %d partitions still led here",
                     attempt + 1, resp["error_code"], len(remaining))
            await asyncio.sleep(backoff)
        log.warning("controlled shutdown of broker %d did not complete after %d attempts", self.broker_id, retries)

    async def _send_controlled_shutdown(self, host: str, port: int) -> dict[str, Any]:
        timeout = int(self.config.get("controller.socket.timeout.ms")) / 1000.0
        reader, writer = await self.ib_connect(host, port, timeout)
        try:
            body = {"broker_id": self.broker_id, "broker_epoch": self.broker_epoch}
            return await asyncio.wait_for(
                interbroker_request(reader, writer, ib.CONTROLLED_SHUTDOWN, body, 1, f"broker-{self.broker_id}"),
                timeout,
            )
        finally:
            writer.close()
