"""Topic metadata: creation, deletion, partitions and configs over a MetadataStore.

Znodes (Kafka's ZooKeeper mode)::

    /cluster/id                                  {"version":"1","id":"<cluster id>"}
    /brokers/topics/<t>                          {"version":3,"partitions":{"0":[0]},"topic_id":"<b64>",
                                                  "adding_replicas":{},"removing_replicas":{}}
    /brokers/topics/<t>/partitions/<p>/state     {"version":1,"controller_epoch":1,"leader":0,
                                                  "leader_epoch":0,"isr":[0]}
    /config/topics/<t>                           {"version":1,"config":{"retention.ms":"1000"}}
    /config/brokers/<default> | /config/brokers/<id>   {"version":1,"config":{...}}
    /config/client-metrics/<name>                {"version":1,"config":{"metrics":"...","interval.ms":"..."}}

The embedded default decides everything here synchronously (the single broker is its
own controller). Listeners are told of every change so the broker can create or
delete logs.

In cluster mode (``controller_managed``) mutations only write what Kafka's admin client
writes in ZooKeeper (the assignment, configs, a deletion marker, a config change
notification); the controller elects leaders and tells every broker, and this
registry is the broker's metadata cache, kept by the controller's UpdateMetadata
(:meth:`apply_partition_states`).
"""

from __future__ import annotations

import base64
import json
import logging
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.config import ConfigError, validate_topic_configs
from odradek.controller import partition_limits as limits
from odradek.controller.assignment import AssignmentError, assign_replicas
from odradek.controller.store import MetadataStore, NoNodeError, Op
from odradek.names import MAX_NAME_LENGTH, has_only_legal_characters, is_legal_topic_name
from odradek.protocol import errors

log = logging.getLogger("odradek.controller")

INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})


class TopicError(Exception):
    def __init__(self, error_code: int, message: str) -> None:
        super().__init__(message)
        self.error_code = error_code
        self.message = message


def validate_topic_name(name: str) -> None:
    """Kafka's Topic.validate: raises TopicError(INVALID_TOPIC_EXCEPTION)."""
    if not name:
        raise TopicError(errors.INVALID_TOPIC_EXCEPTION, "Topic name is illegal, it can't be empty")
    if name in (".", ".."):
        raise TopicError(errors.INVALID_TOPIC_EXCEPTION, "Topic name cannot be \".\" or \"..\"")
    if len(name) > MAX_NAME_LENGTH:
        raise TopicError(
            errors.INVALID_TOPIC_EXCEPTION,
            f"Topic name is illegal, it can't be longer than {MAX_NAME_LENGTH} characters, topic name: {name}",
        )
    if not has_only_legal_characters(name):
        raise TopicError(
            errors.INVALID_TOPIC_EXCEPTION,
            f"Topic name {name} is illegal, it contains a character other than ASCII alphanumerics, '.', '_' and '-'",
        )


def topic_id_to_str(topic_id: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(topic_id.bytes).decode().rstrip("=")


def topic_id_from_str(s: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(s + "=" * (-len(s) % 4)))


NO_LEADER = -1  # Kafka's LeaderAndIsr.NoLeader


@dataclass
class PartitionMeta:
    index: int
    replicas: list[int]
    leader: int
    leader_epoch: int
    isr: list[int]


def leaderless(index: int, replicas: list[int]) -> PartitionMeta:
    """A partition of the assignment the controller has not elected a leader for yet (no state
    znode), or that this cache has no state of: no leader, no leader epoch, no ISR. Metadata
    answers it LEADER_NOT_AVAILABLE, as Kafka does a partition without a leader; never a leader
    guessed from the assignment, which the controller may not choose (it takes the first live
    replica) and which does not lead before its LeaderAndIsr comes."""
    return PartitionMeta(index, list(replicas), NO_LEADER, -1, [])


@dataclass
class TopicMeta:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionMeta]
    configs: dict[str, str] = field(default_factory=dict)

    @property
    def is_internal(self) -> bool:
        return self.name in INTERNAL_TOPICS


TopicListener = Callable[[str, TopicMeta], None]  # (event, topic): "created" | "deleted" | "partitions" | "config"


def _partition_meta(ps: Mapping[str, object]) -> PartitionMeta:
    """One partition state of an UpdateMetadata (protocol.interbroker's JSON) as the cache keeps it."""
    idx = int(ps["partition"])  # type: ignore[call-overload]
    return PartitionMeta(
        idx, [int(b) for b in ps["replicas"]], int(ps["leader"]),  # type: ignore[attr-defined, call-overload]
        int(ps["leader_epoch"]), [int(b) for b in ps["isr"]],  # type: ignore[attr-defined, call-overload]
    )


def _j(obj: object) -> bytes:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True).encode()


class TopicRegistry:
    """Topic metadata of the cluster, cached in memory, persisted in the store."""

    def __init__(self, store: MetadataStore, live_brokers: Callable[[], list[int]]) -> None:
        self.store = store
        self.live_brokers = live_brokers
        self.broker_racks: Callable[[], dict[int, str | None]] = lambda: {}
        self.topics: dict[str, TopicMeta] = {}
        self.by_id: dict[uuid.UUID, TopicMeta] = {}
        self.listeners: list[TopicListener] = []
        self.controller_epoch = 1
        self.controller_managed = False
        self.config_changed: Callable[[str], None] = lambda entity_path: None

    # -- loading
    def load(self) -> None:
        for path in ("/brokers/topics", "/config/topics", "/config/brokers", "/admin/delete_topics"):
            if self.store.exists(path) is None:
                self.store.create(path, b"", makepath=True)
        for name in self.store.children("/brokers/topics"):
            if not is_legal_topic_name(name):
                # written by a version whose name check let it through: serving it would create a
                # directory the log loader cannot parse again
                log.error("Ignoring topic %r in the metadata store: not a legal topic name", name)
                continue
            meta = self._read_topic(name)
            if meta is not None:
                self.topics[name] = meta
                self.by_id[meta.topic_id] = meta
        if self.controller_managed:
            return  # deletions are the controller's
        # finish deletions interrupted by a crash
        for name in self.store.children("/admin/delete_topics"):
            if name in self.topics:
                self.delete_topic(name)
            else:
                self.store.delete(f"/admin/delete_topics/{name}")

    def _read_topic(self, name: str) -> TopicMeta | None:
        """A topic as the store has it. A partition without a state znode (a topic being created:
        the controller writes the states after the assignment) is :func:`leaderless`; in cluster mode
        the controller's UpdateMetadata brings its state. Kafka's ZooKeeper-mode broker starts with
        an empty cache and learns partition states from the controller alone; this one reads the
        states the controller wrote, so it answers Metadata before the controller's first update
        arrives, but invents none. One read of the partitions' children tells which states exist."""
        try:
            data, _ = self.store.get(f"/brokers/topics/{name}")
        except NoNodeError:
            return None
        doc = json.loads(data)
        try:
            stated = set(self.store.children(f"/brokers/topics/{name}/partitions"))
        except NoNodeError:
            stated = set()
        parts: list[PartitionMeta] = []
        for p_str, replicas in sorted(doc["partitions"].items(), key=lambda kv: int(kv[0])):
            p = int(p_str)
            st: dict[str, Any] | None = None
            if str(p) in stated:
                try:
                    sdata, _ = self.store.get(f"/brokers/topics/{name}/partitions/{p}/state")
                    st = json.loads(sdata)
                except NoNodeError:
                    pass
            if st is None:
                parts.append(leaderless(p, [int(b) for b in replicas]))
            else:
                parts.append(PartitionMeta(p, list(replicas), st["leader"], st["leader_epoch"], list(st["isr"])))
        configs: dict[str, str] = {}
        try:
            cdata, _ = self.store.get(f"/config/topics/{name}")
            configs = dict(json.loads(cdata).get("config", {}))
        except NoNodeError:
            pass
        return TopicMeta(name, topic_id_from_str(doc["topic_id"]), parts, configs)

    def _notify(self, event: str, meta: TopicMeta) -> None:
        for cb in self.listeners:
            cb(event, meta)

    # -- queries
    def get(self, name: str) -> TopicMeta | None:
        return self.topics.get(name)

    # -- assignment
    def _assign(self, num_partitions: int, rf: int, start: int = 0) -> dict[int, list[int]]:
        brokers = sorted(self.live_brokers())
        try:
            return assign_replicas(brokers, self.broker_racks(), num_partitions, rf, start_partition=start)
        except AssignmentError as e:
            code = errors.INVALID_REPLICATION_FACTOR if "Replication factor" in str(e) else errors.INVALID_REQUEST
            raise TopicError(code, str(e)) from None

    def partition_count(self) -> int:
        """Partitions of every topic in the cache (what ``max.partitions`` bounds)."""
        return sum(len(m.partitions) for m in self.topics.values())

    def _check_limits(self, adding: int, max_partitions: int | None) -> None:
        """Refuse, before anything is allocated for them, more new partitions than one request
        may create or the cluster may hold (:mod:`odradek.controller.partition_limits`)."""
        why = limits.request_limit_error(adding)
        if why is None and max_partitions is not None:
            why = limits.cluster_limit_error(self.partition_count(), adding, max_partitions)
        if why is not None:
            raise TopicError(errors.POLICY_VIOLATION, why)

    def _check_assignment(self, assignment: Mapping[int, list[int]], expected_start: int) -> None:
        live = set(self.live_brokers())
        keys = sorted(assignment)
        if keys != list(range(expected_start, expected_start + len(keys))):
            raise TopicError(errors.INVALID_REPLICA_ASSIGNMENT, "Partitions must be consecutive and start at the next index")
        sizes = {len(r) for r in assignment.values()}
        if len(sizes) != 1 or 0 in sizes:
            raise TopicError(errors.INVALID_REPLICA_ASSIGNMENT, "All partitions must have the same number of replicas")
        for replicas in assignment.values():
            if len(set(replicas)) != len(replicas):
                raise TopicError(errors.INVALID_REPLICA_ASSIGNMENT, "Duplicate replica in assignment")
            if not set(replicas) <= live:
                raise TopicError(errors.INVALID_REPLICA_ASSIGNMENT, f"Unknown broker in assignment {replicas}")

    # -- mutations
    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        assignment: Mapping[int, list[int]] | None = None,
        configs: Mapping[str, str | None] | None = None,
        *,
        default_partitions: int = 1,
        default_replication_factor: int = 1,
        max_partitions: int | None = None,
        validate_only: bool = False,
    ) -> TopicMeta:
        """Checks are ordered cheapest first: the partition limits come before the assignment is
        checked or made, so an absurd count costs nothing (``max_partitions``: the cluster-wide
        ``max.partitions``, None for none)."""
        validate_topic_name(name)
        if name in self.topics:
            raise TopicError(errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.")
        norm = name.replace(".", "_")
        for other in self.topics:
            if other.replace(".", "_") == norm:
                raise TopicError(
                    errors.INVALID_TOPIC_EXCEPTION,
                    f"Topic '{name}' collides with existing topic: {other}",
                )
        try:
            checked = validate_topic_configs(configs or {})
        except ConfigError as e:
            raise TopicError(errors.INVALID_CONFIG, str(e)) from None
        if assignment:
            if num_partitions != -1 or replication_factor != -1:
                raise TopicError(
                    errors.INVALID_REQUEST,
                    "Both numPartitions or replicationFactor and replicasAssignments were set. Both cannot be used at the same time.",
                )
            self._check_limits(len(assignment), max_partitions)
            self._check_assignment(assignment, 0)
            plan = {p: list(r) for p, r in assignment.items()}
        else:
            if num_partitions == -1:
                num_partitions = default_partitions
            if replication_factor == -1:
                replication_factor = default_replication_factor
            if num_partitions <= 0:
                raise TopicError(errors.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
            if replication_factor <= 0:
                raise TopicError(errors.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0.")
            self._check_limits(num_partitions, max_partitions)
            plan = self._assign(num_partitions, replication_factor)
        min_isr = checked.get("min.insync.replicas")
        rf = len(next(iter(plan.values())))
        if min_isr is not None and min_isr > rf:
            raise TopicError(errors.INVALID_CONFIG, f"min.insync.replicas {min_isr} is larger than the replication factor {rf}")
        config_strs = {k: str(v) for k, v in (configs or {}).items() if v is not None}
        meta = TopicMeta(
            name,
            uuid.uuid4(),
            [PartitionMeta(p, r, r[0], 0, list(r)) for p, r in sorted(plan.items())],
            config_strs,
        )
        if validate_only:
            return meta
        ops = [
            Op("create", f"/config/topics/{name}", _j({"version": 1, "config": config_strs})),
            Op("create", f"/brokers/topics/{name}", self._topic_doc(meta)),
        ]
        if self.controller_managed:
            from odradek.controller.store import NodeExistsError

            try:
                self.store.multi(ops)
            except NodeExistsError:
                raise TopicError(errors.TOPIC_ALREADY_EXISTS, f"Topic '{name}' already exists.") from None
            return meta  # the controller elects leaders; UpdateMetadata brings it into the cache
        ops += [Op("create", self._state_path(name, p.index), self._state_doc(p)) for p in meta.partitions]
        self.store.multi(ops)
        self.topics[name] = meta
        self.by_id[meta.topic_id] = meta
        self._notify("created", meta)
        return meta

    def delete_topic(self, name: str) -> TopicMeta:
        meta = self.topics.get(name)
        if meta is None:
            raise TopicError(errors.UNKNOWN_TOPIC_OR_PARTITION, "This server does not host this topic-partition.")
        marker = f"/admin/delete_topics/{name}"
        if self.store.exists(marker) is None:
            self.store.create(marker, b"", makepath=True)
        if self.controller_managed:
            return meta  # the controller deletes replicas and znodes
        # logs go first (the listener deletes them), then the metadata, then the marker
        self._notify("deleted", meta)
        ops = [Op("delete", f"/brokers/topics/{name}")]
        if self.store.exists(f"/config/topics/{name}") is not None:
            ops.append(Op("delete", f"/config/topics/{name}"))
        ops.append(Op("delete", marker))
        self.store.multi(ops)
        del self.topics[name]
        self.by_id.pop(meta.topic_id, None)
        return meta

    def create_partitions(
        self, name: str, count: int, assignment: list[list[int]] | None, *, max_partitions: int | None = None,
        validate_only: bool = False,
    ) -> TopicMeta:
        meta = self.topics.get(name)
        if meta is None:
            raise TopicError(errors.UNKNOWN_TOPIC_OR_PARTITION, f"The topic '{name}' does not exist.")
        old = len(meta.partitions)
        if count < old:
            raise TopicError(errors.INVALID_PARTITIONS, f"Topic currently has {old} partitions, which is higher than the requested {count}.")
        if count == old:
            raise TopicError(errors.INVALID_PARTITIONS, f"Topic already has {old} partitions.")
        rf = len(meta.partitions[0].replicas)
        if assignment and len(assignment) != count - old:
            raise TopicError(
                errors.INVALID_REPLICA_ASSIGNMENT,
                f"Increasing the number of partitions by {count - old} but {len(assignment)} assignments provided.",
            )
        self._check_limits(count - old, max_partitions)
        if assignment:
            plan = {old + i: list(r) for i, r in enumerate(assignment)}
            self._check_assignment(plan, old)
            if len(plan[old]) != rf:
                raise TopicError(errors.INVALID_REPLICA_ASSIGNMENT, "Inconsistent replication factor")
        else:
            plan = self._assign(count - old, rf, start=old)
        if validate_only:
            return meta
        new_parts = [PartitionMeta(p, r, r[0], 0, list(r)) for p, r in sorted(plan.items())]
        updated = TopicMeta(meta.name, meta.topic_id, meta.partitions + new_parts, meta.configs)
        ops = [Op("set", f"/brokers/topics/{name}", self._topic_doc(updated))]
        if self.controller_managed:
            self.store.multi(ops)
            return updated
        ops += [Op("create", self._state_path(name, p.index), self._state_doc(p)) for p in new_parts]
        self.store.multi(ops)
        meta.partitions = updated.partitions
        self._notify("partitions", meta)
        return meta

    def set_topic_configs(self, name: str, configs: Mapping[str, str], *, validate_only: bool = False) -> None:
        meta = self.topics.get(name)
        if meta is None:
            raise TopicError(errors.UNKNOWN_TOPIC_OR_PARTITION, f"Topic {name} does not exist")
        try:
            checked = validate_topic_configs(configs)
        except ConfigError as e:
            raise TopicError(errors.INVALID_CONFIG, str(e)) from None
        min_isr = checked.get("min.insync.replicas")
        if min_isr is not None and min_isr > len(meta.partitions[0].replicas):
            raise TopicError(errors.INVALID_CONFIG, "min.insync.replicas is larger than the replication factor")
        if validate_only:
            return
        self._write_entity_config(f"/config/topics/{name}", configs)
        meta.configs = dict(configs)
        if self.controller_managed:
            self.config_changed(f"topics/{name}")
        self._notify("config", meta)

    def _read_entity_config(self, path: str) -> dict[str, str]:
        """The ``config`` of an entity config node (``{"version":1,"config":{...}}``), empty when absent."""
        try:
            data, _ = self.store.get(path)
        except NoNodeError:
            return {}
        return dict(json.loads(data).get("config", {}))

    def _write_entity_config(self, path: str, configs: Mapping[str, str], *, delete_if_empty: bool = False) -> None:
        """Create or replace an entity config node; with ``delete_if_empty``, no configs remove it."""
        if not configs and delete_if_empty:
            if self.store.exists(path) is not None:
                self.store.delete(path)
            return
        doc = _j({"version": 1, "config": dict(configs)})
        if self.store.exists(path) is None:
            self.store.create(path, doc, makepath=True)
        else:
            self.store.set(path, doc)

    def broker_configs(self, entity: str) -> dict[str, str]:
        """Dynamic broker configs of ``entity`` ("" = cluster default, else a broker id)."""
        return self._read_entity_config(f"/config/brokers/{entity or '<default>'}")

    def set_broker_configs(self, entity: str, configs: Mapping[str, str]) -> None:
        self._write_entity_config(f"/config/brokers/{entity or '<default>'}", configs)
        if self.controller_managed:
            self.config_changed(f"brokers/{entity or '<default>'}")

    def client_metrics_configs(self, name: str) -> dict[str, str]:
        """The configs of client metrics subscription ``name`` (KIP-714; empty when there is none)."""
        return self._read_entity_config(f"/config/client-metrics/{name}")

    def client_metrics_names(self) -> list[str]:
        try:
            return sorted(self.store.children("/config/client-metrics"))
        except NoNodeError:
            return []

    def set_client_metrics_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Install a subscription's configs; none left deletes it, as Kafka forgets an empty subscription."""
        self._write_entity_config(f"/config/client-metrics/{name}", configs, delete_if_empty=True)

    def group_configs(self, store_name: str) -> dict[str, str]:
        """The config overrides of one group (odradek.server.group_configs names the node)."""
        return self._read_entity_config(f"/config/groups/{store_name}")

    def set_group_configs(self, store_name: str, configs: Mapping[str, str]) -> None:
        """Install a group's config overrides (none left deletes the node) and tell the other brokers."""
        self._write_entity_config(f"/config/groups/{store_name}", configs, delete_if_empty=True)
        if self.controller_managed:
            self.config_changed(f"groups/{store_name}")

    # -- cluster mode: the metadata cache
    def apply_partition_states(
        self, by_topic: Mapping[str, list[dict[str, object]]], topic_ids: Mapping[str, str], *, full: bool
    ) -> None:
        """Apply the controller's UpdateMetadata, all of it or nothing (Kafka's ZkMetadataCache builds
        a new snapshot and swaps it in). Everything that can fail comes first: the store reads of the
        topics new to this cache (their assignment and id, their configs) and the parsing of every
        partition state, so a read that fails (the store disconnected) leaves the cache as it was; the
        connection is then closed and the controller sends the request again. A topic's partitions
        are merged: a partition the request does not name keeps its state.

        ``full``: the cached topics the controller no longer knows are gone, those named neither in
        the partition states nor, with the id cached, in ``topic_ids``. A topic the controller knows
        but has no leader state for (partitions not elected yet) stays: Kafka's brokers drop a topic
        only on its deletion (``LeaderDuringDelete``), never because an update left it out.

        Every partition of a topic is in the cache, so every one is in a Metadata answer: a topic new
        to the cache gets the partitions of its assignment in the store that the update does not name
        as :func:`leaderless` (LEADER_NOT_AVAILABLE), and so does a gap an update leaves in a cached
        topic's partitions. An update naming only some partitions of a topic new here (the
        controller's first leaders of a large topic come in batches; an ISR change names only its
        partition, and reached a broker that had missed the topic's first update) made the topic look
        smaller than it is: a partitioner counts partitions, and a Metadata answer once lacked one."""
        parsed = {name: [_partition_meta(ps) for ps in states] for name, states in by_topic.items()}
        created: dict[str, TopicMeta] = {}
        assignments: dict[str, dict[int, list[int]]] = {}
        for name, states in parsed.items():
            cached = self.topics.get(name)
            if cached is None:
                doc = self._read_topic_doc(name)
                tid_str = topic_ids.get(name) or (doc or {}).get("topic_id")
                tid = topic_id_from_str(tid_str) if tid_str else uuid.uuid4()
                created[name] = TopicMeta(name, tid, [], self.read_configs(name))
            else:
                indices = {p.index for p in cached.partitions} | {pm.index for pm in states}
                if indices == set(range(len(indices))):
                    continue
                doc, tid = self._read_topic_doc(name), cached.topic_id
            if doc is not None and doc.get("topic_id") in (None, topic_id_to_str(tid)):  # not another incarnation
                assignments[name] = {int(p): [int(b) for b in r] for p, r in doc["partitions"].items()}
        # nothing below reads the store or parses: it cannot stop half way
        for name, states in parsed.items():
            meta = created.get(name) or self.topics[name]
            parts = {p.index: p for p in meta.partitions}
            for index, replicas in assignments.get(name, {}).items():
                parts.setdefault(index, leaderless(index, replicas))
            for pm in states:
                parts[pm.index] = pm
            for index in range(max(parts, default=-1)):  # a gap the store could not account for
                parts.setdefault(index, leaderless(index, []))
            grew = len(parts) > len(meta.partitions)
            meta.partitions = [parts[i] for i in sorted(parts)]
            if name in created:
                self.topics[name] = meta
                self.by_id[meta.topic_id] = meta
                self._notify("created", meta)
            elif grew:
                self._notify("partitions", meta)
        if full:
            for name in [n for n, m in self.topics.items() if n not in by_topic
                         and topic_ids.get(n) != topic_id_to_str(m.topic_id)]:
                gone = self.topics.pop(name)
                self.by_id.pop(gone.topic_id, None)
                self._notify("deleted", gone)

    def _read_topic_doc(self, name: str) -> dict[str, Any] | None:
        """The topic's znode (its assignment and id), None when there is none."""
        try:
            data, _ = self.store.get(f"/brokers/topics/{name}")
        except NoNodeError:
            return None
        doc: dict[str, Any] = json.loads(data)
        return doc

    def topic_id_from_store(self, name: str) -> uuid.UUID | None:
        doc = self._read_topic_doc(name)
        tid = doc.get("topic_id") if doc is not None else None
        return topic_id_from_str(tid) if tid else None

    def read_configs(self, name: str) -> dict[str, str]:
        try:
            cdata, _ = self.store.get(f"/config/topics/{name}")
        except NoNodeError:
            return {}
        return dict(json.loads(cdata).get("config", {}))

    def reload_configs(self) -> list[TopicMeta]:
        """Re-read every cached topic's configs; returns the topics whose configs changed."""
        changed = []
        for meta in list(self.topics.values()):
            fresh = self.read_configs(meta.name)
            if fresh != meta.configs:
                meta.configs = fresh
                changed.append(meta)
                self._notify("config", meta)
        return changed

    # -- cluster id
    def cluster_id(self) -> str:
        try:
            data, _ = self.store.get("/cluster/id")
            return str(json.loads(data)["id"])
        except NoNodeError:
            cid = topic_id_to_str(uuid.uuid4())
            from odradek.controller.store import NodeExistsError

            try:
                self.store.create("/cluster/id", _j({"version": "1", "id": cid}), makepath=True)
            except NodeExistsError:  # another broker of the cluster was first
                return self.cluster_id()
            return cid

    # -- encoding helpers
    @staticmethod
    def _state_path(name: str, p: int) -> str:
        return f"/brokers/topics/{name}/partitions/{p}/state"

    def _state_doc(self, p: PartitionMeta) -> bytes:
        return _j(
            {
                "version": 1,
                "controller_epoch": self.controller_epoch,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "isr": p.isr,
            }
        )

    @staticmethod
    def _topic_doc(meta: TopicMeta) -> bytes:
        return _j(
            {
                "version": 3,
                "partitions": {str(p.index): p.replicas for p in meta.partitions},
                "topic_id": topic_id_to_str(meta.topic_id),
                "adding_replicas": {},
                "removing_replicas": {},
            }
        )
