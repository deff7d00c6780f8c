"""The controller: one event queue that alone owns the cluster's controller state
(Kafka's KafkaController + ControllerEventManager), written against the
MetadataStore interface and an injected request channel, with no threads or sockets
of its own.

Events (processed strictly one at a time, in order)::

    Startup / ControllerChange   try to become controller; on success load everything and
                                 elect leaders for new and offline partitions
    BrokerChange                 brokers joined/left /brokers/ids: offline elections,
                                 ISR shrinks, metadata to everyone, roles to the new ones
    TopicChange                  new topics: initial leaders and ISRs, then roles + metadata,
                                 NEW_PARTITION_BATCH partitions at a time (ElectNewPartitions
                                 continues with the rest as an event of its own); deleted ones
    PartitionModifications       one topic's assignment changed: its added partitions, as above
    UncleanLeaderElectionEnable  configs changed: leaderless partitions tried again
    IsrChangeNotification        leaders changed ISRs in the store: metadata to everyone
    PreferredReplicaElection     move leadership back to preferred replicas
    AutoLeaderBalance            the same, where a broker's imbalance > the configured %
    ControlledShutdown           move leadership off a broker that is stopping
    Resign                       stop acting (session SUSPENDED/LOST, or shutdown)

Every LeaderAndIsr / UpdateMetadata / StopReplica carries the controller epoch and the
receiving broker's epoch, so a stale controller or an earlier incarnation of the
broker is fenced (protocol/interbroker.py). An election's changes go out as Kafka's
ControllerBrokerRequestBatch sends them: LeaderAndIsr to the replicas, then UpdateMetadata to
every broker (:meth:`Controller._announce`), so a new leader leads before its Metadata names it.

One concept in one file (over 600 lines): the controller's event handling over its state tables (hosted by controller.runner).
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from odradek.controller import election
from odradek.controller import reassignment as ra
from odradek.controller import zk_data as zd
from odradek.controller.features import FeatureUpdate, default_finalized
from odradek.controller.states import (
    IllegalTransition,
    PartitionState,
    ReplicaState,
    check_partition,
    check_replica,
)
from odradek.controller.store import BadVersionError, MetadataStore, NoNodeError, StoreError
from odradek.protocol import interbroker as ib

log = logging.getLogger("odradek.controller")

TP = tuple[str, int]
# new partitions elected (state znodes written, LeaderAndIsr and UpdateMetadata sent) per controller
# event: a 10,000-partition topic is forty events, with other events and, in the embedded broker,
# other clients' requests served between them (Kafka's ZooKeeper controller writes new partitions'
# states in batches too, ZkPartitionStateMachine.initializeLeaderAndIsrForPartitions)
NEW_PARTITION_BATCH = 250
# channel(broker_id, api_key, body) queues a request to that broker (fire and forget;
# the response handler, if any, is the channel's business)
Channel = Callable[[int, int, dict[str, Any]], None]


# the leader epoch of StopReplica for a deleted topic's replicas (Kafka's LeaderAndIsr.EpochDuringDelete)
EPOCH_DURING_DELETE = -2


@dataclass
class Event:
    kind: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass
class ControllerContext:
    epoch: int = 0
    epoch_zk_version: int = -1
    brokers: dict[int, zd.BrokerInfo] = field(default_factory=dict)
    assignments: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    topic_ids: dict[str, str] = field(default_factory=dict)
    states: dict[TP, zd.LeaderAndIsr] = field(default_factory=dict)
    partition_states: dict[TP, PartitionState] = field(default_factory=dict)
    shutting_down: set[int] = field(default_factory=set)
    reassignments: dict[TP, ra.Reassignment] = field(default_factory=dict)
    replica_states: dict[tuple[str, int, int], ReplicaState] = field(default_factory=dict)
    offline_replicas: set[tuple[str, int, int]] = field(default_factory=set)  # in a failed log dir

    @property
    def live(self) -> set[int]:
        return set(self.brokers) - self.shutting_down


class Controller:
    def __init__(
        self,
        broker_id: int,
        store: MetadataStore,
        channel: Channel,
        *,
        unclean_leader_election: Callable[[str], bool] = lambda topic: False,
        imbalance_percentage: int = 10,
    ) -> None:
        self.broker_id = broker_id
        self.store = store
        self.channel = channel
        self.unclean = unclean_leader_election
        self.imbalance_percentage = imbalance_percentage
        self.ctx = ControllerContext()
        self.active = False
        # the controller as ZooKeeper names it, seen at the last election attempt (None: none yet)
        self.known_controller: int | None = None
        self.queue: deque[Event] = deque()
        # how the controller queues an event that continues the current one (the runner puts it on
        # its event queue, behind what is waiting there; by default it runs in the same process_all)
        self.defer: Callable[[str], None] = self.put
        self._new_partitions: deque[TP] = deque()  # new partitions still to elect (ElectNewPartitions)

    # ------------------------------------------------------------------ event queue
    def put(self, kind: str, **args: Any) -> None:
        self.queue.append(Event(kind, args))

    def process_all(self) -> int:
        """Run queued events one by one (the caller's single controller thread/task)."""
        n = 0
        while self.queue:
            ev = self.queue.popleft()
            try:
                self._dispatch(ev)
            except StoreError as e:
                log.error("controller event %s failed on the metadata store: %s; resigning", ev.kind, e)
                self._resign()
            n += 1
        return n

    def _dispatch(self, ev: Event) -> None:
        if ev.kind in ("Startup", "ControllerChange"):
            self._elect()
            return
        if ev.kind == "Resign":
            self._resign()
            return
        if not self.active:
            if ev.kind == "ControlledShutdown":
                ev.args["reply"](errors_not_controller(), [])
            elif ev.kind in ("ElectLeaders", "AlterReassignments", "ListReassignments", "UpdateFeatures"):
                ev.args["reply"](None)
            return
        handler = getattr(self, f"_on_{ev.kind}", None)
        if handler is None:
            log.warning("unknown controller event %s", ev.kind)
            return
        handler(**ev.args)

    # ------------------------------------------------------------------ election / failover
    def _elect(self) -> None:
        if self.active and zd.read_controller(self.store) == self.broker_id:
            return
        self.active = False
        claim = zd.try_become_controller(self.store, self.broker_id)
        if claim is None:
            self.known_controller = zd.read_controller(self.store)
            log.info("broker %d is not the controller (controller is %s)", self.broker_id, self.known_controller)
            return
        self.known_controller = self.broker_id
        self.ctx = ControllerContext(epoch=claim.epoch, epoch_zk_version=claim.epoch_zk_version)
        self._new_partitions.clear()  # all elected below
        self.active = True
        log.info("broker %d became the controller with epoch %d", self.broker_id, claim.epoch)
        zd.ensure_feature_znode(self.store, default_finalized())
        self._load()
        self._elect_for(self._partitions_needing_leaders())
        self._announce(set(self.ctx.states))
        for tp in sorted(self.ctx.reassignments):
            self._maybe_complete_reassignment(tp)
        self._on_TopicDeletion()  # deletions a previous controller left unfinished

    def _resign(self) -> None:
        if self.active:
            log.info("broker %d resigns as controller (epoch %d)", self.broker_id, self.ctx.epoch)
        self.active = False
        self._new_partitions.clear()  # the next controller elects them

    def _load(self) -> None:
        ctx = self.ctx
        ctx.brokers = zd.live_brokers(self.store)
        try:
            topics = self.store.children("/brokers/topics")
        except NoNodeError:
            topics = []
        for t in topics:
            self._load_topic(t)

    def _load_topic(self, topic: str) -> None:
        try:
            data, _ = self.store.get(f"/brokers/topics/{topic}")
        except NoNodeError:
            return
        doc = json.loads(data)
        assignment = {int(p): [int(b) for b in r] for p, r in doc["partitions"].items()}
        self.ctx.assignments[topic] = assignment
        if doc.get("topic_id"):
            self.ctx.topic_ids[topic] = doc["topic_id"]
        adding, removing = doc.get("adding_replicas") or {}, doc.get("removing_replicas") or {}
        for p_str in set(adding) | set(removing):
            p = int(p_str)
            if p in assignment:
                r = ra.from_topic_doc(assignment[p], [int(b) for b in adding.get(p_str, [])],
                                      [int(b) for b in removing.get(p_str, [])])
                if r is not None:
                    self.ctx.reassignments[(topic, p)] = r
        try:  # a new topic has no state znodes yet: one read instead of one per partition
            stated = set(self.store.children(f"/brokers/topics/{topic}/partitions"))
        except NoNodeError:
            stated = set()
        live = self.ctx.live
        for p in assignment:
            st = zd.read_partition_state(self.store, topic, p) if str(p) in stated else None
            tp = (topic, p)
            for b in assignment[p]:  # initialisation, as Kafka's replica state machine does it
                self.ctx.replica_states[(topic, p, b)] = ReplicaState.ONLINE if b in live else (
                    ReplicaState.NEW if st is None else ReplicaState.OFFLINE)
            if st is None:
                self.ctx.partition_states[tp] = PartitionState.NEW
                continue
            self.ctx.states[tp] = st
            online = st.leader in self.ctx.live
            self.ctx.partition_states[tp] = PartitionState.ONLINE if online else PartitionState.OFFLINE

    def _partitions_needing_leaders(self) -> list[TP]:
        return sorted(
            tp for tp, s in self.ctx.partition_states.items() if s in (PartitionState.NEW, PartitionState.OFFLINE)
        )

    # ------------------------------------------------------------------ leader election
    def _elect_for(self, tps: list[TP], rule: str = "offline", bump: set[TP] | None = None) -> list[TP]:
        """Elect leaders; returns the partitions whose state changed. A partition coming back
        from offline, or in ``bump`` (its leader restarted), gets a new leader epoch even when
        leader and ISR stay the same, so every replica hears of it and truncates/fetches anew."""
        ctx = self.ctx
        changed: list[TP] = []
        new_states: dict[str, dict[int, zd.LeaderAndIsr]] = {}
        for tp in tps:
            for _attempt in range(3):  # a lost race on the znode version is re-read and retried
                outcome = self._elect_one(tp, rule, bump or set(), new_states)
                if outcome is not None:
                    if outcome:
                        changed.append(tp)
                    break
            else:
                log.warning("could not write the state of %s-%d; it stays offline until the next event", *tp)
                self._set_partition_state(tp, PartitionState.OFFLINE)
        for topic, states in new_states.items():
            try:
                zd.create_partition_states(self.store, topic, states)
            except StoreError as e:
                log.error("could not create partition states of %s: %s", topic, e)
                continue
            for p, st in states.items():
                st.zk_version = 0
                ctx.states[(topic, p)] = st
                self._set_partition_state((topic, p), PartitionState.ONLINE)
                replicas = ctx.assignments[topic][p]
                self._set_replica_states((topic, p), [b for b in replicas if b in ctx.live], ReplicaState.ONLINE)
                self._set_replica_states((topic, p), [b for b in replicas if b not in ctx.live], ReplicaState.OFFLINE)
                changed.append((topic, p))
        return changed

    def _elect_one(
        self, tp: TP, rule: str, bump: set[TP], new_states: dict[str, dict[int, zd.LeaderAndIsr]]
    ) -> bool | None:
        """True: state written; False: nothing to write; None: the write lost a race (retry)."""
        ctx = self.ctx
        topic, p = tp
        replicas = ctx.assignments.get(topic, {}).get(p)
        if not replicas:
            return False
        # a replica in a failed log dir cannot lead
        replicas = [b for b in replicas if (topic, p, b) not in ctx.offline_replicas] or replicas
        live = ctx.live
        cur = ctx.states.get(tp)
        if cur is None:  # a new partition: the live replicas form the ISR
            isr = [r for r in replicas if r in live]
            if not isr:
                log.warning("no live replica for new partition %s-%d; it stays offline", topic, p)
                self._set_partition_state(tp, PartitionState.OFFLINE)
                return False
            new_states.setdefault(topic, {})[p] = zd.LeaderAndIsr(isr[0], 0, isr, ctx.epoch)
            return False
        if rule == "offline":
            result = election.offline(replicas, cur.isr, live, self.unclean(topic))
        elif rule == "preferred":
            result = election.preferred(replicas, cur.isr, live)
        elif rule == "controlled":
            result = election.controlled_shutdown(replicas, cur.isr, set(ctx.brokers), ctx.shutting_down)
        else:
            raise ValueError(rule)
        if result is None:
            if rule == "offline":
                log.error("no eligible leader for %s-%d (isr %s, live %s); partition offline", topic, p, cur.isr,
                          sorted(live))
                self._set_partition_state(tp, PartitionState.OFFLINE)
            return False
        leader, isr = result
        returning = ctx.partition_states.get(tp) is PartitionState.OFFLINE
        if leader == cur.leader and isr == cur.isr and not returning and tp not in bump:
            self._set_partition_state(tp, PartitionState.ONLINE)
            return False
        st = zd.LeaderAndIsr(leader, cur.leader_epoch + 1, isr, ctx.epoch, cur.zk_version)
        return True if self._write_state(tp, st) else None


    # ------------------------------------------------------------------ state machines
    def _set_partition_state(self, tp: TP, target: PartitionState) -> bool:
        """Move a partition to ``target`` if Kafka's table allows it (else log, as Kafka does)."""
        cur = self.ctx.partition_states.get(tp, PartitionState.NON_EXISTENT)
        try:
            check_partition(cur, target)
        except IllegalTransition as e:
            log.error("controller: illegal %s for %s-%d", e, tp[0], tp[1])
            return False
        if target is PartitionState.NON_EXISTENT:
            self.ctx.partition_states.pop(tp, None)
        else:
            self.ctx.partition_states[tp] = target
        return True

    def _set_replica_states(self, tp: TP, brokers: list[int], target: ReplicaState) -> None:
        for b in brokers:
            key = (tp[0], tp[1], b)
            cur = self.ctx.replica_states.get(key, ReplicaState.NON_EXISTENT)
            try:
                check_replica(cur, target)
            except IllegalTransition as e:
                log.error("controller: illegal %s for replica %d of %s-%d", e, b, tp[0], tp[1])
                continue
            if target is ReplicaState.NON_EXISTENT:
                self.ctx.replica_states.pop(key, None)
            else:
                self.ctx.replica_states[key] = target

    def _delete_replicas(self, tp: TP, brokers: list[int]) -> None:
        """Replicas being removed: offline, deletion started and done (StopReplica with delete
        sent; this controller does not wait for the answers), then gone."""
        for state in (ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED, ReplicaState.DELETION_SUCCESSFUL,
                      ReplicaState.NON_EXISTENT):
            self._set_replica_states(tp, brokers, state)

    def _write_state(self, tp: TP, st: zd.LeaderAndIsr) -> bool:
        try:
            st.zk_version = zd.update_partition_state(self.store, tp[0], tp[1], st)
        except BadVersionError:
            # the leader changed the ISR meanwhile: re-read and let the next event retry
            fresh = zd.read_partition_state(self.store, *tp)
            if fresh is not None:
                self.ctx.states[tp] = fresh
            return False
        self.ctx.states[tp] = st
        self._set_partition_state(tp, PartitionState.ONLINE)
        log.info("partition %s-%d: leader %d, epoch %d, isr %s", tp[0], tp[1], st.leader, st.leader_epoch, st.isr)
        return True

    # ------------------------------------------------------------------ events
    def _on_BrokerChange(self) -> None:
        ctx = self.ctx
        current = zd.live_brokers(self.store)
        old = ctx.brokers
        new_ids = {b for b, info in current.items() if b not in old or old[b].epoch != info.epoch}
        dead = set(old) - set(current)
        # restarted between two looks at /brokers/ids: handled as a failure, then a start-up
        # (its log may have lost an unflushed tail; it must not lead on at its old epoch)
        bounced = {b for b in new_ids if b in old}
        gone = dead | bounced
        ctx.brokers = current
        ctx.shutting_down -= dead
        ctx.offline_replicas = {r for r in ctx.offline_replicas if r[2] not in new_ids}
        for (t, p, b) in list(ctx.replica_states):
            if b in gone:
                self._set_replica_states((t, p), [b], ReplicaState.OFFLINE)
            if b in new_ids:
                self._set_replica_states((t, p), [b], ReplicaState.ONLINE)
        if gone:
            log.info("brokers %s left%s", sorted(dead), f" (restarted: {sorted(bounced)})" if bounced else "")
            offline = sorted(tp for tp, st in ctx.states.items() if st.leader in gone)
            saved = set(ctx.shutting_down)
            ctx.shutting_down |= bounced  # not eligible in this round
            try:
                changed = self._elect_for(offline, bump=set(offline))
                # followers on dead (or restarted) brokers leave the ISR of partitions whose leader survived
                for tp, st in list(ctx.states.items()):
                    if tp in changed or st.leader in gone:
                        continue
                    isr = [b for b in st.isr if b not in gone]
                    shrunk = zd.LeaderAndIsr(st.leader, st.leader_epoch + 1, isr, ctx.epoch, st.zk_version)
                    if isr and isr != st.isr and self._write_state(tp, shrunk):
                        changed.append(tp)
            finally:
                ctx.shutting_down = saved - dead
            self._announce(set(changed))
        if new_ids:
            log.info("brokers %s joined", sorted(new_ids))
            # Kafka's onBrokerStartup: metadata first, then the joining brokers' replicas (followers)
            self._send_metadata_to(set(ctx.brokers))
            hosted = {tp for tp in ctx.states if any(b in ctx.assignments[tp[0]][tp[1]] for b in new_ids)}
            self._send_leader_and_isr(hosted, only=new_ids)
            # partitions that were offline may have a leader now
            changed = self._elect_for(self._partitions_needing_leaders())
            if changed:
                self._announce(set(changed))
        for tp in sorted(ctx.reassignments):
            self._maybe_complete_reassignment(tp)

    def _on_TopicChange(self) -> None:
        """Topics created or deleted (Kafka's TopicChange): only those topics are read. Partitions
        added to an existing topic come through that topic's own watch (PartitionModifications):
        re-reading every topic here made creating n topics cost O(n^2) reads and parses."""
        try:
            topics = set(self.store.children("/brokers/topics"))
        except NoNodeError:
            topics = set()
        ctx = self.ctx
        gone = set(ctx.assignments) - topics
        for t in gone:
            self._forget_topic(t)
        added = sorted(topics - set(ctx.assignments))
        for t in added:
            self._load_topic(t)
        self._queue_first_elections([(t, p) for t in added for p in sorted(ctx.assignments.get(t, {}))])

    def _on_PartitionModifications(self, topic: str) -> None:
        """The assignment of one existing topic changed (Kafka's PartitionModifications): partitions
        added by CreatePartitions get their first leaders; a topic not known yet is TopicChange's."""
        ctx = self.ctx
        if topic not in ctx.assignments:
            return
        try:
            data, _ = self.store.get(f"/brokers/topics/{topic}")
        except NoNodeError:
            return  # deleted: TopicChange forgets it
        assignment = {int(p): [int(b) for b in r] for p, r in json.loads(data)["partitions"].items()}
        added = sorted(set(assignment) - set(ctx.assignments[topic]))
        for p in added:
            self._set_partition_state((topic, p), PartitionState.NEW)
            self._set_replica_states((topic, p), assignment[p], ReplicaState.NEW)
        ctx.assignments[topic] = assignment
        self._queue_first_elections([(topic, p) for p in added])

    def _on_UncleanLeaderElectionEnable(self) -> None:
        """Configs changed (Kafka's UncleanLeaderElectionEnable / TopicUncleanLeaderElectionEnable):
        partitions without a leader are tried again, now that an unclean election may be allowed."""
        changed = self._elect_for(self._partitions_needing_leaders())
        if changed:
            self._announce(set(changed))

    def _queue_first_elections(self, tps: list[TP]) -> None:
        """Queue new partitions for their first election, NEW_PARTITION_BATCH per event."""
        ctx = self.ctx
        waiting = not self._new_partitions
        queued = set(self._new_partitions)
        self._new_partitions.extend(
            tp for tp in tps
            if tp not in queued and ctx.partition_states.get(tp) in (PartitionState.NEW, PartitionState.OFFLINE))
        if waiting and self._new_partitions:
            self._on_ElectNewPartitions()

    def _on_ElectNewPartitions(self) -> None:
        """Elect the next NEW_PARTITION_BATCH partitions waiting for their first leader, tell the
        brokers (metadata of those partitions only, then their roles), and queue the rest."""
        ctx = self.ctx
        batch: list[TP] = []
        while self._new_partitions and len(batch) < NEW_PARTITION_BATCH:
            tp = self._new_partitions.popleft()
            # deleted, or elected by another event, since it was queued
            if ctx.partition_states.get(tp) in (PartitionState.NEW, PartitionState.OFFLINE):
                batch.append(tp)
        changed = self._elect_for(batch)
        if changed:
            self._announce(set(changed), only_these=True)
        if self._new_partitions:
            self.defer("ElectNewPartitions")

    def _forget_topic(self, topic: str) -> None:
        ctx = self.ctx
        replicas = {b for r in ctx.assignments.get(topic, {}).values() for b in r}
        parts = [tp for tp in ctx.states if tp[0] == topic]
        for b in replicas & set(ctx.brokers):
            self._send(b, ib.STOP_REPLICA, {
                # Kafka's EpochDuringDelete: the replica is deleted because its topic is
                "partitions": [{"topic": t, "partition": p, "leader_epoch": EPOCH_DURING_DELETE, "delete": True}
                               for t, p in parts],
            })
        for tp in parts:
            ctx.states.pop(tp, None)
            self._delete_replicas(tp, list(ctx.assignments.get(topic, {}).get(tp[1], [])))
            self._set_partition_state(tp, PartitionState.OFFLINE)
            self._set_partition_state(tp, PartitionState.NON_EXISTENT)
        for tp in [tp for tp in ctx.partition_states if tp[0] == topic]:  # never elected
            ctx.partition_states.pop(tp, None)
        ctx.reassignments = {tp: r for tp, r in ctx.reassignments.items() if tp[0] != topic}
        ctx.assignments.pop(topic, None)
        ctx.topic_ids.pop(topic, None)
        self._send_metadata_to(set(ctx.brokers))

    def _on_TopicDeletion(self) -> None:
        """/admin/delete_topics/<t>: stop and delete the replicas, then the topic's znodes."""
        try:
            names = self.store.children(zd.DELETE_TOPICS)
        except NoNodeError:
            return
        for name in names:
            log.info("deleting topic %s", name)
            for path in (f"/brokers/topics/{name}", f"/config/topics/{name}"):
                with contextlib.suppress(NoNodeError):
                    self.store.delete(path, recursive=True)
            if name in self.ctx.assignments:
                self._forget_topic(name)  # StopReplica(delete) to its replicas, metadata to everyone
            with contextlib.suppress(NoNodeError):
                self.store.delete(f"{zd.DELETE_TOPICS}/{name}")

    def _on_PreferredReplicaElectionNode(self) -> None:
        """/admin/preferred_replica_election: elect the listed partitions, then delete it."""
        parts = zd.read_admin_partitions(self.store, zd.PREFERRED)
        if parts:
            self._on_PreferredReplicaElection([(str(p["topic"]), int(p["partition"])) for p in parts])
        with contextlib.suppress(NoNodeError):
            self.store.delete(zd.PREFERRED)

    def _on_ReassignmentNode(self) -> None:
        """/admin/reassign_partitions (the ZooKeeper-era tool's way): start the listed
        reassignments, then delete the znode (progress lives in /brokers/topics/<t>)."""
        parts = zd.read_admin_partitions(self.store, zd.REASSIGN)
        if parts:
            wanted: dict[TP, list[int] | None] = {
                (str(p["topic"]), int(p["partition"])): [int(b) for b in p["replicas"]] for p in parts
            }
            self._on_AlterReassignments(wanted, lambda res: log.info("reassignments from %s: %s", zd.REASSIGN, res))
        with contextlib.suppress(NoNodeError):
            self.store.delete(zd.REASSIGN)

    def _on_IsrChangeNotification(self) -> None:
        names, parts = zd.read_isr_changes(self.store)
        for tp in parts:
            st = zd.read_partition_state(self.store, *tp)
            if st is not None and tp in self.ctx.states:
                self.ctx.states[tp] = st
        if parts:
            self._send_metadata_to(set(self.ctx.brokers), only_partitions=parts)
        zd.delete_isr_changes(self.store, names)
        for tp in sorted(parts & set(self.ctx.reassignments)):
            self._maybe_complete_reassignment(tp)

    def _on_PreferredReplicaElection(self, partitions: list[TP] | None = None) -> dict[TP, int]:
        """Returns an error code per partition (ElectLeaders semantics)."""
        from odradek.protocol import errors

        ctx = self.ctx
        wanted = partitions if partitions is not None else sorted(ctx.states)
        results: dict[TP, int] = {}
        todo = []
        for tp in wanted:
            st = ctx.states.get(tp)
            replicas = ctx.assignments.get(tp[0], {}).get(tp[1])
            if st is None or not replicas:
                results[tp] = errors.UNKNOWN_TOPIC_OR_PARTITION
            elif st.leader == replicas[0]:
                results[tp] = errors.ELECTION_NOT_NEEDED
            elif replicas[0] not in ctx.live or replicas[0] not in st.isr:
                results[tp] = errors.PREFERRED_LEADER_NOT_AVAILABLE
            else:
                todo.append(tp)
        changed = self._elect_for(todo, rule="preferred")
        for tp in todo:
            results[tp] = errors.NONE if tp in changed else errors.PREFERRED_LEADER_NOT_AVAILABLE
        if changed:
            self._announce(set(changed))
        return results

    def _on_ElectLeaders(
        self, election_type: int, partitions: list[TP] | None, reply: Callable[[dict[TP, int]], None]
    ) -> None:
        """The ElectLeaders API: preferred (0) or unclean (1) elections; an error code per partition."""
        from odradek.protocol import errors

        if election_type == 0:
            reply(self._on_PreferredReplicaElection(partitions))
            return
        ctx = self.ctx
        wanted = partitions if partitions is not None else sorted(ctx.states)
        results: dict[TP, int] = {}
        changed: list[TP] = []
        for tp in wanted:
            st = ctx.states.get(tp)
            replicas = ctx.assignments.get(tp[0], {}).get(tp[1])
            if st is None or not replicas:
                results[tp] = errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if st.leader in ctx.live:
                results[tp] = errors.ELECTION_NOT_NEEDED
                continue
            result = election.offline(replicas, st.isr, ctx.live, True)
            if result is None:
                results[tp] = errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
                continue
            leader, isr = result
            if self._write_state(tp, zd.LeaderAndIsr(leader, st.leader_epoch + 1, isr, ctx.epoch, st.zk_version)):
                changed.append(tp)
                results[tp] = errors.NONE
            else:
                results[tp] = errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
        if changed:
            self._announce(set(changed))
        reply(results)

    # ------------------------------------------------------------------ log dir failures
    def _on_UpdateFeatures(self, updates: list[FeatureUpdate], validate_only: bool, reply: Callable[..., None]) -> None:
        """KIP-584's UpdateFeatures: the finalized set in /feature (controller.features validates)."""
        reply(zd.update_features(self.store, updates, validate_only))

    def _on_LogDirEventNotification(self) -> None:
        """/log_dir_event_notification: ask each notifying broker about all its replicas; the
        ones in a failed log dir answer KAFKA_STORAGE_ERROR (handled below)."""
        try:
            names = self.store.children(zd.LOG_DIR_EVENT)
        except NoNodeError:
            return
        brokers: set[int] = set()
        for n in names:
            try:
                data, _ = self.store.get(f"{zd.LOG_DIR_EVENT}/{n}")
                brokers.add(int(json.loads(data)["broker"]))
            except (NoNodeError, ValueError, KeyError):
                pass
            with contextlib.suppress(NoNodeError):
                self.store.delete(f"{zd.LOG_DIR_EVENT}/{n}")
        ctx = self.ctx
        for b in sorted(brokers & set(ctx.brokers)):
            log.info("log dir failure on broker %d: asking it about its replicas", b)
            hosted = {tp for tp in ctx.states if b in ctx.assignments[tp[0]][tp[1]]}
            self._send_leader_and_isr(hosted, only={b})

    def _on_LeaderAndIsrResponse(self, broker_id: int, storage_errors: list[TP]) -> None:
        """Replicas of ``broker_id`` in a failed log dir: offline; they leave the ISR and
        partitions they led get a new leader (none left: leader -1, offline)."""
        ctx = self.ctx
        changed: list[TP] = []
        for tp in storage_errors:
            st = ctx.states.get(tp)
            if st is None or (tp[0], tp[1], broker_id) in ctx.offline_replicas:
                continue
            ctx.offline_replicas.add((tp[0], tp[1], broker_id))
            self._set_replica_states(tp, [broker_id], ReplicaState.OFFLINE)
            isr = [b for b in st.isr if b != broker_id]
            if st.leader == broker_id:
                replicas = [b for b in ctx.assignments[tp[0]][tp[1]] if b != broker_id]
                result = election.offline(replicas, isr, ctx.live, self.unclean(tp[0]))
                if result is None:
                    log.error("%s-%d has no replica left to lead after broker %d's log dir failed", *tp, broker_id)
                    new = zd.LeaderAndIsr(-1, st.leader_epoch + 1, st.isr, ctx.epoch, st.zk_version)
                    if self._write_state(tp, new):
                        self._set_partition_state(tp, PartitionState.OFFLINE)
                        changed.append(tp)
                    continue
                new = zd.LeaderAndIsr(result[0], st.leader_epoch + 1, result[1], ctx.epoch, st.zk_version)
            elif isr != st.isr and isr:
                new = zd.LeaderAndIsr(st.leader, st.leader_epoch + 1, isr, ctx.epoch, st.zk_version)
            else:
                continue
            if self._write_state(tp, new):
                changed.append(tp)
        if changed:
            self._announce(set(changed))

    # ------------------------------------------------------------------ reassignment (KIP-455)
    def _on_AlterReassignments(
        self, requests: dict[TP, list[int] | None], reply: Callable[[dict[TP, tuple[int, str | None]]], None],
        allow_replication_factor_change: bool = True,
    ) -> None:
        """AlterPartitionReassignments: a target per partition, None to cancel. Without
        ``allow_replication_factor_change`` (v1, KIP-860) a target of another size than the
        partition's replication factor (its original replicas' while a reassignment runs) is
        INVALID_REPLICATION_FACTOR, as Kafka's ReplicationControlManager.changePartitionReassignment;
        a cancellation is not checked."""
        from odradek.protocol import errors

        ctx = self.ctx
        results: dict[TP, tuple[int, str | None]] = {}
        for tp, target in sorted(requests.items()):
            current = ctx.assignments.get(tp[0], {}).get(tp[1])
            if current is None or tp not in ctx.states:
                results[tp] = (errors.UNKNOWN_TOPIC_OR_PARTITION, "The partition does not exist.")
                continue
            ongoing = ctx.reassignments.get(tp)
            if target is None:
                if ongoing is None:
                    results[tp] = (errors.NO_REASSIGNMENT_IN_PROGRESS, "No reassignment in progress.")
                    continue
                target = list(ongoing.original)
            problem = ra.validate_target(target, set(ctx.brokers))
            if problem is not None:
                results[tp] = (errors.INVALID_REPLICA_ASSIGNMENT, problem)
                continue
            if not allow_replication_factor_change and requests[tp] is not None:
                factor = len(ongoing.original) if ongoing is not None else len(current)
                if len(target) != factor:
                    results[tp] = (errors.INVALID_REPLICATION_FACTOR,
                                   f"The replication factor is changed from {factor} to {len(target)}")
                    continue
            if ongoing is None and target == current:
                results[tp] = (errors.NONE, None)
                continue
            try:
                self._start_reassignment(tp, target)
            except StoreError as e:
                results[tp] = (errors.UNKNOWN_SERVER_ERROR, str(e))
                continue
            results[tp] = (errors.NONE, None)
        reply(results)
        for tp in sorted(tp for tp in requests if tp in ctx.reassignments):
            self._maybe_complete_reassignment(tp)

    def _on_ListReassignments(
        self, partitions: list[TP] | None, reply: Callable[[dict[TP, tuple[list[int], list[int], list[int]]]], None]
    ) -> None:
        out = {}
        for tp, r in sorted(self.ctx.reassignments.items()):
            if partitions is None or tp in partitions:
                out[tp] = (list(self.ctx.assignments[tp[0]][tp[1]]), r.adding, r.removing)
        reply(out)

    def _write_assignment(self, topic: str) -> None:
        path = f"/brokers/topics/{topic}"
        data, _ = self.store.get(path)
        doc = json.loads(data)
        doc["partitions"] = {str(p): r for p, r in sorted(self.ctx.assignments[topic].items())}
        mine = {tp[1]: r for tp, r in self.ctx.reassignments.items() if tp[0] == topic}
        doc["adding_replicas"] = {str(p): r.adding for p, r in mine.items() if r.adding}
        doc["removing_replicas"] = {str(p): r.removing for p, r in mine.items() if r.removing}
        self.store.set(path, json.dumps(doc, separators=(",", ":"), sort_keys=True).encode())

    def _start_reassignment(self, tp: TP, target: list[int]) -> None:
        ctx = self.ctx
        current = ctx.assignments[tp[0]][tp[1]]
        r, replicas = ra.start(current, ctx.reassignments.get(tp), target)
        ctx.reassignments[tp] = r
        fresh = [b for b in replicas if b not in current]
        self._set_replica_states(tp, fresh, ReplicaState.NEW)
        self._set_replica_states(tp, [b for b in fresh if b in ctx.live], ReplicaState.ONLINE)
        ctx.assignments[tp[0]][tp[1]] = replicas
        self._write_assignment(tp[0])
        log.info("reassigning %s-%d from %s to %s (replicas now %s)", tp[0], tp[1], list(r.original), target, replicas)
        st = ctx.states[tp]
        # a new leader epoch tells every replica, the new ones included, of the new replica set
        if self._write_state(tp, zd.LeaderAndIsr(st.leader, st.leader_epoch + 1, st.isr, ctx.epoch, st.zk_version)):
            self._announce({tp}, only_these=True)

    def _maybe_complete_reassignment(self, tp: TP) -> None:
        ctx = self.ctx
        r = ctx.reassignments.get(tp)
        st = ctx.states.get(tp)
        if r is None or st is None:
            return
        current = ctx.assignments[tp[0]][tp[1]]
        done = ra.completion(r, current, st.leader, st.isr, ctx.live)
        if done is None:
            return
        new = zd.LeaderAndIsr(done.leader, st.leader_epoch + 1, done.isr, ctx.epoch, st.zk_version)
        if not self._write_state(tp, new):
            return
        ctx.assignments[tp[0]][tp[1]] = list(r.target)
        del ctx.reassignments[tp]
        self._write_assignment(tp[0])
        log.info("reassignment of %s-%d done: replicas %s, leader %d", tp[0], tp[1], list(r.target), done.leader)
        self._announce({tp})
        for b in done.remove:
            self._send(b, ib.STOP_REPLICA, {
                "partitions": [{"topic": tp[0], "partition": tp[1], "leader_epoch": new.leader_epoch, "delete": True}],
            })
        self._delete_replicas(tp, done.remove)

    def _on_AutoLeaderBalance(self) -> None:
        ctx = self.ctx
        leaders = {tp: st.leader for tp, st in ctx.states.items()}
        preferred = {tp: ctx.assignments[tp[0]][tp[1]][0] for tp in ctx.states if ctx.assignments.get(tp[0])}
        todo: list[TP] = []
        for b in sorted(ctx.live):
            ratio = election.imbalance_ratio(leaders, preferred, b)
            if ratio * 100 > self.imbalance_percentage:
                todo += [tp for tp, pb in preferred.items() if pb == b and leaders.get(tp) != b]
        if todo:
            self._on_PreferredReplicaElection(sorted(todo))

    def _on_ControlledShutdown(self, broker_id: int, broker_epoch: int, reply: Callable[[int, list[TP]], None]) -> None:
        from odradek.protocol import errors

        ctx = self.ctx
        info = ctx.brokers.get(broker_id)
        if info is None:
            reply(errors.BROKER_NOT_AVAILABLE, [])
            return
        if info.epoch >= 0 and broker_epoch != info.epoch:
            reply(errors.STALE_BROKER_EPOCH, [])
            return
        ctx.shutting_down.add(broker_id)
        led = sorted(tp for tp, st in ctx.states.items() if st.leader == broker_id and len(ctx.assignments[tp[0]][tp[1]]) > 1)
        changed = self._elect_for(led, rule="controlled")
        # as a follower it leaves the ISR
        for tp, st in list(ctx.states.items()):
            if tp in changed or st.leader == broker_id or broker_id not in st.isr or len(st.isr) <= 1:
                continue
            isr = [b for b in st.isr if b != broker_id]
            if self._write_state(tp, zd.LeaderAndIsr(st.leader, st.leader_epoch + 1, isr, ctx.epoch, st.zk_version)):
                changed.append(tp)
        if changed:
            self._announce(set(changed))
        # single-replica partitions cannot move; they do not hold the shutdown up (as in Kafka)
        remaining = sorted(tp for tp, st in ctx.states.items()
                           if st.leader == broker_id and len(ctx.assignments[tp[0]][tp[1]]) > 1)
        reply(errors.NONE, remaining)

    # ------------------------------------------------------------------ requests to brokers
    def _send(self, broker_id: int, api_key: int, body: dict[str, Any]) -> None:
        info = self.ctx.brokers.get(broker_id)
        if info is None:
            return
        body = {"controller_id": self.broker_id, "controller_epoch": self.ctx.epoch, "broker_epoch": info.epoch, **body}
        self.channel(broker_id, api_key, body)

    def _partition_state_json(self, tp: TP, is_new: bool = False) -> dict[str, Any]:
        st = self.ctx.states[tp]
        replicas = self.ctx.assignments[tp[0]][tp[1]]
        return {
            "topic": tp[0], "partition": tp[1], "controller_epoch": st.controller_epoch, "leader": st.leader,
            "leader_epoch": st.leader_epoch, "isr": list(st.isr), "zk_version": st.zk_version,
            "replicas": list(replicas), "adding_replicas": [], "removing_replicas": [], "is_new": is_new,
        }

    def _nodes(self, ids: set[int]) -> list[dict[str, Any]]:
        return [
            {"id": b, "host": i.host, "port": i.port, "rack": i.rack, "endpoints": list(i.endpoints)}
            for b, i in sorted(self.ctx.brokers.items()) if b in ids
        ]

    def _announce(self, tps: set[TP], *, only_these: bool = False) -> None:
        """Tell the replicas of ``tps`` their roles, then every broker the metadata (of ``tps`` only
        when ``only_these``, else of every partition): Kafka's ControllerBrokerRequestBatch order
        (LeaderAndIsr, then UpdateMetadata). A broker's requests are sent in order, so a new leader
        leads before its own Metadata answers name it; the other way round it answered Produce with
        NOT_LEADER_OR_FOLLOWER while advertising itself, and an idempotent producer whose first batch
        it refused and whose next (pipelined) batch it took after leading was stuck on
        OUT_OF_ORDER_SEQUENCE_NUMBER for good (issue 33)."""
        self._send_leader_and_isr(tps, to_all_replicas=True)
        self._send_metadata_to(set(self.ctx.brokers), only_partitions=tps if only_these else None)

    def _send_leader_and_isr(self, tps: set[TP], *, to_all_replicas: bool = False, only: set[int] | None = None) -> None:
        by_broker: dict[int, list[TP]] = {}
        for tp in tps:
            if tp not in self.ctx.states:
                continue
            for b in self.ctx.assignments[tp[0]][tp[1]]:
                if b in self.ctx.brokers and (only is None or b in only):
                    by_broker.setdefault(b, []).append(tp)
        for b, parts in sorted(by_broker.items()):
            leaders = {self.ctx.states[tp].leader for tp in parts}
            topics = {t for t, _ in parts}
            self._send(b, ib.LEADER_AND_ISR, {
                "partitions": [self._partition_state_json(tp) for tp in sorted(parts)],
                "live_leaders": self._nodes(leaders),
                # as LeaderAndIsr v5+: a broker creating a log learns its topic id from the request
                "topic_ids": {t: i for t, i in self.ctx.topic_ids.items() if t in topics},
            })

    def _send_metadata_to(self, brokers: set[int], only_partitions: set[TP] | None = None) -> None:
        tps = sorted(self.ctx.states) if only_partitions is None else sorted(only_partitions & set(self.ctx.states))
        body = {
            "partitions": [self._partition_state_json(tp) for tp in tps],
            "live_brokers": self._nodes(set(self.ctx.brokers)),
            "topic_ids": dict(self.ctx.topic_ids),
            "full": only_partitions is None,  # a full update also says which topics are gone
        }
        for b in sorted(brokers):
            self._send(b, ib.UPDATE_METADATA, body)


def errors_not_controller() -> int:
    from odradek.protocol import errors

    return errors.NOT_CONTROLLER
