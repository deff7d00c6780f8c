"""Who may act as a broker or as the controller in cluster mode.

Kafka lets a connection send the controller's requests (LeaderAndIsr, StopReplica,
UpdateMetadata; ControlledShutdown to the controller) and follower fetches only when its
principal holds CLUSTER_ACTION on the cluster (KafkaApis: ``authorizeClusterOperation(request,
CLUSTER_ACTION)`` answers CLUSTER_AUTHORIZATION_FAILED otherwise; a follower Fetch without it
gets TOPIC_AUTHORIZATION_FAILED on every partition). Both checks apply here: the connection
must have come in on the inter-broker listener or, when set, the control plane listener
(``control.plane.listener.name``, KIP-291), and with an authorizer its principal must hold
CLUSTER_ACTION (brokers authenticate on that listener with TLS or SASL,
odradek.security.inter_broker; make them super users or grant them ClusterAction). Kafka itself keeps processing controller requests on data-plane listeners
(KIP-291 only adds a dedicated one, and KIP-702, which would have made the control plane
refuse data requests, was never adopted); without an authorizer that would let any client
pose as the controller, hence the refusal here.

The inter-broker listener is Kafka's (KafkaConfig.interBrokerListenerName):
``inter.broker.listener.name`` if set, else the listener named after
``security.inter.broker.protocol`` (default PLAINTEXT); it must be one of the advertised
listeners. When every listener is one (the default single PLAINTEXT listener), clients share
it with brokers and can still pose as one unless an authorizer is set: listener separation
is the defence without one.

A controller request naming a controller epoch this broker has not seen yet is checked against
ZooKeeper before it counts (:class:`ControllerEpochGuard`). Kafka's broker takes the epoch of any
authorized LeaderAndIsr, UpdateMetadata or StopReplica at or above the highest it has seen as the
new current one and answers STALE_CONTROLLER_EPOCH below it, without asking ZooKeeper
(ReplicaManager.becomeLeaderOrFollower, maybeUpdateMetadataCache, stopReplicas): a sender posing
as the controller with a higher epoch fences the real controller until restart. Here ZooKeeper
must not contradict the claim: a request is refused (STALE_CONTROLLER_EPOCH) only when ZooKeeper,
read after a sync, holds a newer epoch, has never held the claimed one, or names another broker
controller at it. When ZooKeeper cannot answer within CHECK_PATIENCE_S (disconnected, no quorum,
slow), the request is taken on Kafka's rule alone: Kafka's controller never sends a refused
request again (KafkaController.processLeaderAndIsrResponseReceived and
processUpdateMetadataResponseReceived only log the error), so a refusal for want of an answer
left the broker leading partitions its metadata cache did not have, or the other way round,
until the next controller (issue 33). The check only stops an epoch being raised: a sender
repeating the current epoch and controller id is not told apart from the controller (that is
the listeners' and the authorizer's job, above).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import time
from collections.abc import Callable
from typing import Any

from odradek.config import SRC_DEFAULT, BrokerConfig, ConfigError
from odradek.controller import zk_data as zd
from odradek.controller.store import MetadataStore, StoreError
from odradek.protocol import errors
from odradek.protocol import interbroker as ib

log = logging.getLogger("odradek.cluster")

# how long a request naming an unseen controller epoch waits for ZooKeeper to confirm or contradict it
CHECK_PATIENCE_S = 5.0
CHECK_BACKOFF_S = 0.25


def inter_broker_listener(config: BrokerConfig) -> str:
    """Kafka's rule: inter.broker.listener.name, else the listener named after
    security.inter.broker.protocol; it must be an advertised listener."""
    name = config.raw("inter.broker.listener.name")[0]
    protocol_set = config.raw("security.inter.broker.protocol")[1] != SRC_DEFAULT
    if name and protocol_set:
        raise ConfigError("Only one of inter.broker.listener.name and security.inter.broker.protocol should be set.")
    if not name:
        name = str(config.get("security.inter.broker.protocol")).upper()
    if name not in {n for n, _, _ in config.advertised_listeners}:
        raise ConfigError(
            f"inter.broker.listener.name must be a listener name defined in advertised.listeners "
            f"(listener {name} is not one of {[n for n, _, _ in config.advertised_listeners]})"
        )
    return name


def control_plane_listener(config: BrokerConfig) -> str | None:
    name = config.raw("control.plane.listener.name")[0]
    if not name:
        return None
    if name not in {n for n, _, _ in config.listeners}:
        raise ConfigError(f"control.plane.listener.name {name} must be a listener name defined in listeners")
    if name == inter_broker_listener(config):
        raise ConfigError("control.plane.listener.name must not be the same as inter.broker.listener.name")
    return name


def cluster_listeners(config: BrokerConfig) -> frozenset[str]:
    """The listeners whose connections may act as brokers (CLUSTER_ACTION)."""
    plane = control_plane_listener(config)
    return frozenset({inter_broker_listener(config)} | ({plane} if plane else set()))


def may_write_txn_marker(listener: str | None, cluster: frozenset[str], commit: bool) -> bool:
    """Whether a WriteTxnMarkers entry from a connection on ``listener`` may be written, on top
    of the authorizer's CLUSTER_ACTION check (which the handler makes first).

    Kafka authorizes WriteTxnMarkers with CLUSTER_ACTION only; with no authorizer configured
    (``authorizer.class.name`` unset) it allows every request, and that is what lets
    kafka-transactions.sh abort a hanging transaction from the admin client (KIP-664: an ABORT
    marker with the producer id, epoch and coordinator epoch the partition leader reported in
    DescribeProducers). Odradek follows Kafka for ABORT markers: they can only end the producer's
    current transaction (the leader refuses an older producer epoch or coordinator epoch). A
    COMMIT marker would make a transaction's data visible on the say of whoever connects, and no
    tool sends one, so it is kept to the listeners that stand for brokers here (the inter-broker
    or control plane listener), as the other inter-broker requests are."""
    if listener is None or listener in cluster:
        return True
    return not commit


def refusal(api_key: int) -> dict[str, Any]:
    """The answer to an inter-broker request from a connection without CLUSTER_ACTION."""
    code = errors.CLUSTER_AUTHORIZATION_FAILED
    if api_key == ib.CONTROLLED_SHUTDOWN:
        return {"error_code": code, "remaining_partitions": []}
    if api_key == ib.UPDATE_METADATA:
        return {"error_code": code}
    return {"error_code": code, "partitions": []}


Answer = dict[str, Any] | asyncio.Future[Any]


class Verdict(enum.Enum):
    """What ZooKeeper says of a controller request's claim (controller id, controller epoch)."""

    CONFIRMED = "confirmed"  # that broker is, or was last, the controller at that epoch
    CONTRADICTED = "contradicted"  # a newer epoch, one ZooKeeper never held, or another controller
    UNANSWERED = "unanswered"  # ZooKeeper did not tell in time: Kafka's rule alone decides


def judge(epoch: int, controller_id: int, zk_epoch: int, zk_controller: int | None, synced: bool) -> Verdict | None:
    """One read of /controller_epoch and /controller against a claim; None when the read may be
    behind the ensemble (the sync before it failed) and does not show the claimed epoch yet.

    The controller writes /controller and its epoch in one multi before it sends anything
    (zk_data.try_become_controller), so after a sync a claimed epoch above ZooKeeper's was never
    held. /controller gone at the claimed epoch is the controller at that epoch having gone since
    (its session ended; the next one bumps the epoch): what it sent before is what it wrote, and
    Kafka's broker takes it too."""
    if zk_epoch > epoch:
        return Verdict.CONTRADICTED
    if zk_epoch < epoch:
        return Verdict.CONTRADICTED if synced else None
    if zk_controller is not None and zk_controller != controller_id:
        return Verdict.CONTRADICTED
    return Verdict.CONFIRMED


class ControllerEpochGuard:
    """Controller requests claiming an unseen (controller epoch, controller id) wait for a check
    against ZooKeeper, and every later request waits behind them (they are applied in order).
    ``sync`` is the store's ZooKeeper sync (bounded; None for a store that reads its latest state)."""

    def __init__(
        self, store: MetadataStore, sync: Callable[[str], None] | None = None, *,
        patience_s: float | None = None, backoff_s: float | None = None,
    ) -> None:
        self.store = store
        self.sync = sync
        self.patience_s = CHECK_PATIENCE_S if patience_s is None else patience_s
        self.backoff_s = CHECK_BACKOFF_S if backoff_s is None else backoff_s
        self.verified: tuple[int, int] = (-1, -1)  # (epoch, controller id) taken after a check
        self._tail: asyncio.Future[Any] | None = None

    def needs_check(self, body: dict[str, Any], current_epoch: int) -> bool:
        """An epoch below the current one is fenced without asking (STALE_CONTROLLER_EPOCH)."""
        key = (int(body["controller_epoch"]), int(body["controller_id"]))
        return key[0] >= current_epoch and key != self.verified

    def check(self, epoch: int, controller_id: int) -> Verdict:
        """Blocking (on an executor thread): ZooKeeper's word on ``controller_id`` at ``epoch``,
        asked again after a failed read until ``patience_s`` has passed (then UNANSWERED)."""
        deadline = time.monotonic() + self.patience_s
        attempt = 0
        while True:
            attempt += 1
            synced = self.sync is None
            if self.sync is not None:
                try:
                    self.sync(zd.CONTROLLER_EPOCH)  # see what the controller wrote before it sent
                    synced = True
                except Exception as e:
                    log.info("cannot sync with ZooKeeper to check controller epoch %d (attempt %d): %s",
                             epoch, attempt, e)
            try:
                zk_epoch = zd.read_controller_epoch(self.store)[0]
                zk_controller = zd.read_controller(self.store)
            except StoreError as e:
                log.warning("cannot check controller epoch %d against ZooKeeper (attempt %d): %s", epoch, attempt, e)
            else:
                verdict = judge(epoch, controller_id, zk_epoch, zk_controller, synced)
                if verdict is Verdict.CONTRADICTED:
                    log.warning("ZooKeeper contradicts 'controller' %d at epoch %d: it names controller %s at "
                                "epoch %d", controller_id, epoch, zk_controller, zk_epoch)
                if verdict is not None:
                    return verdict
            if time.monotonic() + self.backoff_s >= deadline:
                return Verdict.UNANSWERED
            time.sleep(self.backoff_s)

    def run(
        self, loop: asyncio.AbstractEventLoop, api_key: int, body: dict[str, Any],
        apply: Callable[[int, dict[str, Any]], Answer], current_epoch: Callable[[], int],
    ) -> Answer:
        """``apply(api_key, body)`` now, or once the requests ahead of it (and its own check,
        when it names an unseen epoch or controller) are done. ``apply`` may answer later (a
        future: a large LeaderAndIsr applied over several loop turns); later requests wait for it."""
        if self._tail is None and not self.needs_check(body, current_epoch()):
            answer = apply(api_key, body)
            if isinstance(answer, asyncio.Future) and not answer.done():
                self._tail = answer
                answer.add_done_callback(self._clear_tail)
            return answer
        fut: asyncio.Future[Any] = loop.create_future()
        decided: list[Verdict] = []  # the check's verdict, once (the check or the timer, first)
        prev = self._tail
        self._tail = fut

        def settle(result: Answer | BaseException) -> None:
            if isinstance(result, asyncio.Future):  # answered later: settle once it is
                result.add_done_callback(lambda f: settle(f.exception() or f.result()))
                return
            if isinstance(result, BaseException):
                fut.set_exception(result)
            else:
                fut.set_result(result)
            if self._tail is fut:
                self._tail = None

        def applied() -> None:
            try:
                settle(apply(api_key, body))
            except Exception as e:
                settle(e)

        timers: list[asyncio.TimerHandle] = []

        def decide(verdict: Verdict) -> None:
            for t in timers:
                t.cancel()
            if fut.done() or decided:
                return
            decided.append(verdict)
            epoch, controller_id = int(body["controller_epoch"]), int(body["controller_id"])
            if verdict is Verdict.CONTRADICTED:
                log.warning("refusing request %d of 'controller' %d at epoch %d: STALE_CONTROLLER_EPOCH",
                            api_key, controller_id, epoch)
                settle(refused(api_key, errors.STALE_CONTROLLER_EPOCH))
                return
            if verdict is Verdict.UNANSWERED:
                log.warning("ZooKeeper did not confirm controller %d at epoch %d within %.1f s: its request is "
                            "taken on the epoch alone, as Kafka's broker takes it", controller_id, epoch,
                            self.patience_s)
            self.verified = (epoch, controller_id)
            applied()

        def start(_: Any = None) -> None:
            if not self.needs_check(body, current_epoch()):
                applied()
                return
            # the check's own deadline ends it; the timer answers for a ZooKeeper call that hangs
            timers.append(loop.call_later(self.patience_s + self.backoff_s, decide, Verdict.UNANSWERED))
            check = loop.run_in_executor(None, self.check, int(body["controller_epoch"]), int(body["controller_id"]))
            check.add_done_callback(lambda f: decide(
                Verdict.UNANSWERED if f.cancelled() or f.exception() is not None else f.result()))

        if prev is None:
            start()
        else:
            prev.add_done_callback(start)
        return fut

    def _clear_tail(self, done: asyncio.Future[Any]) -> None:
        if self._tail is done:
            self._tail = None


def refused(api_key: int, code: int) -> dict[str, Any]:
    out = refusal(api_key)
    out["error_code"] = code
    return out
