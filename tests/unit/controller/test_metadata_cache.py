"""The ZooKeeper-mode metadata cache (TopicRegistry.apply_partition_states, kept by the controller's
UpdateMetadata) and the Metadata answers built from it (issue 33: a leader once answered Metadata for a
topic it led without the topic's partition).

Kafka's ZkMetadataCache: an update is applied whole or not at all (a new snapshot swapped in), a
partition the update does not name keeps its state, a topic leaves the cache only when it is deleted,
and every cached partition is in the Metadata answer (LEADER_NOT_AVAILABLE when its leader is not live).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from kio.schema.metadata.v12 import response as m12

from odradek.controller import zk_data as zd
from odradek.controller.store import LocalStore
from odradek.controller.topics import TopicRegistry, topic_id_to_str
from odradek.controller.zk_store import StoreTimeoutError
from odradek.protocol import errors
from odradek.server.handlers import metadata

IDS = {name: topic_id_to_str(uuid.uuid4()) for name in ("a", "b", "c")}


class _FlakyStore(LocalStore):
    """A store whose reads of the paths in ``failing`` fail as a disconnected ZooKeeper's do."""

    def __init__(self) -> None:
        super().__init__(None)
        self.failing: set[str] = set()

    def get(self, path: str) -> tuple[bytes, int]:
        if path in self.failing:
            raise StoreTimeoutError(f"{path}: ZooKeeper is not connected (SUSPENDED)")
        return super().get(path)


def _state(topic: str, p: int, leader: int, isr: list[int], replicas: list[int] | None = None,
           epoch: int = 0) -> dict[str, Any]:
    return {"topic": topic, "partition": p, "controller_epoch": 1, "leader": leader, "leader_epoch": epoch,
            "isr": isr, "zk_version": 0, "replicas": replicas or [1, 2, 3], "adding_replicas": [],
            "removing_replicas": [], "is_new": False}


def _registry() -> tuple[TopicRegistry, _FlakyStore, list[tuple[str, str]]]:
    store = _FlakyStore()
    reg = TopicRegistry(store, lambda: [1, 2, 3])
    reg.controller_managed = True
    events: list[tuple[str, str]] = []
    reg.listeners.append(lambda event, meta: events.append((event, meta.name)))
    return reg, store, events


def _view(reg: TopicRegistry) -> dict[str, list[tuple[int, int, list[int]]]]:
    return {n: [(p.index, p.leader, p.isr) for p in m.partitions] for n, m in sorted(reg.topics.items())}


def test_an_update_the_store_fails_during_changes_nothing() -> None:
    reg, store, events = _registry()
    reg.apply_partition_states({"a": [_state("a", 0, 1, [1, 2, 3]), _state("a", 1, 2, [1, 2, 3])]},
                               {"a": IDS["a"]}, full=False)
    before = _view(reg)
    store.failing.add("/config/topics/c")  # the configs of a topic new to this cache cannot be read
    # an ISR shrink of a, a new topic b, a new topic c whose configs cannot be read
    update = {"a": [_state("a", 0, 1, [1, 2])], "b": [_state("b", 0, 3, [3])], "c": [_state("c", 0, 1, [1])]}
    with pytest.raises(StoreTimeoutError):
        reg.apply_partition_states(update, IDS, full=False)
    # all or nothing: a half-applied update would leave b cached and a shrunk, with c missing
    assert _view(reg) == before
    assert reg.get("b") is None and set(reg.by_id) == {reg.topics["a"].topic_id}
    assert events == [("created", "a")]
    store.failing.clear()  # the controller sends the request again
    reg.apply_partition_states(update, IDS, full=False)
    assert _view(reg) == {"a": [(0, 1, [1, 2]), (1, 2, [1, 2, 3])], "b": [(0, 3, [3])], "c": [(0, 1, [1])]}


def test_a_malformed_partition_state_changes_nothing() -> None:
    reg, _, _ = _registry()
    reg.apply_partition_states({"a": [_state("a", 0, 1, [1, 2, 3])]}, {"a": IDS["a"]}, full=False)
    bad = _state("b", 0, 1, [1])
    del bad["leader"]
    with pytest.raises(KeyError):
        reg.apply_partition_states({"a": [_state("a", 0, 1, [1])], "b": [bad]}, IDS, full=False)
    assert _view(reg) == {"a": [(0, 1, [1, 2, 3])]}


def test_a_partial_update_keeps_the_partitions_it_does_not_name() -> None:
    reg, _, events = _registry()
    reg.apply_partition_states({"a": [_state("a", p, 1 + p, [1, 2, 3]) for p in range(3)]}, IDS, full=False)
    reg.apply_partition_states({"a": [_state("a", 1, 2, [2, 3], epoch=0)]}, IDS, full=False)  # an ISR change
    assert _view(reg) == {"a": [(0, 1, [1, 2, 3]), (1, 2, [2, 3]), (2, 3, [1, 2, 3])]}
    assert events == [("created", "a")]


def test_a_full_update_keeps_a_topic_the_controller_knows_without_leader_states() -> None:
    reg, _, events = _registry()
    reg.apply_partition_states({"a": [_state("a", 0, 1, [1, 2, 3])], "b": [_state("b", 0, 2, [2])]}, IDS, full=False)
    # a full update with states for b only: the controller still knows a (its id is in topic_ids)
    reg.apply_partition_states({"b": [_state("b", 0, 2, [2, 3])]}, IDS, full=True)
    assert _view(reg) == {"a": [(0, 1, [1, 2, 3])], "b": [(0, 2, [2, 3])]}
    assert ("deleted", "a") not in events


def test_a_full_update_drops_the_topics_the_controller_no_longer_knows() -> None:
    reg, _, events = _registry()
    reg.apply_partition_states({"a": [_state("a", 0, 1, [1])], "b": [_state("b", 0, 2, [2])],
                                "c": [_state("c", 0, 3, [3])]}, IDS, full=False)
    # a deleted; c deleted and made again under another id (its old incarnation is gone)
    ids = {"b": IDS["b"], "c": topic_id_to_str(uuid.uuid4())}
    reg.apply_partition_states({"b": [_state("b", 0, 2, [2])]}, ids, full=True)
    assert _view(reg) == {"b": [(0, 2, [2])]}
    assert ("deleted", "a") in events and ("deleted", "c") in events
    # without topic ids (an older controller's body) every topic it does not name is gone, as before
    reg.apply_partition_states({"a": [_state("a", 0, 1, [1])]}, {}, full=True)
    assert _view(reg) == {"a": [(0, 1, [1])]}


@pytest.mark.parametrize("live", [{1, 2, 3}, {2, 3}, set()])
def test_the_metadata_answer_lists_every_cached_partition(live: set[int]) -> None:
    reg, _, _ = _registry()
    reg.apply_partition_states({"a": [_state("a", p, 1 + p % 3, [1, 2, 3]) for p in range(5)]}, IDS, full=False)
    for update in ({"a": [_state("a", 0, 1, [1, 2])]}, {"a": [_state("a", 3, 1, [1], epoch=1)]}):
        reg.apply_partition_states(update, IDS, full=False)
        meta = reg.get("a")
        assert meta is not None
        answer = metadata._topic_response(m12, meta, 12, live)
        assert answer.error_code == errors.NONE
        assert [p.partition_index for p in answer.partitions] == list(range(5))
        for cached, p in zip(meta.partitions, answer.partitions, strict=True):
            up = cached.leader in live
            assert p.error_code == (errors.NONE if up else errors.LEADER_NOT_AVAILABLE)
            assert p.leader_id == (cached.leader if up else -1)
            assert list(p.isr_nodes) == cached.isr and list(p.replica_nodes) == cached.replicas


def _write_topic(store: LocalStore, name: str, assignment: dict[int, list[int]], topic_id: str) -> None:
    doc = {"version": 3, "partitions": {str(p): r for p, r in assignment.items()}, "topic_id": topic_id,
           "adding_replicas": {}, "removing_replicas": {}}
    store.create(f"/brokers/topics/{name}", json.dumps(doc).encode(), makepath=True)


def test_loading_a_topic_being_created_invents_no_leader() -> None:
    """A broker starting while a topic is created: its assignment is in the store, the controller has
    written the state of partition 0 only. Kafka's broker learns partition states from the controller
    alone; partition 1 has no leader (LEADER_NOT_AVAILABLE), not the first replica of its assignment,
    which had not been elected and does not lead (it was answered leader 3, epoch 0, before issue 33)."""
    store = LocalStore(None)
    _write_topic(store, "t", {0: [2, 1], 1: [3, 2]}, IDS["a"])
    zd.create_partition_states(store, "t", {0: zd.LeaderAndIsr(1, 4, [1, 2], 1)})
    reg = TopicRegistry(store, lambda: [1, 2, 3])
    reg.controller_managed = True
    reg.load()
    assert _view(reg) == {"t": [(0, 1, [1, 2]), (1, -1, [])]}
    meta = reg.get("t")
    assert meta is not None and meta.partitions[1].replicas == [3, 2] and meta.partitions[1].leader_epoch == -1
    answer = metadata._topic_response(m12, meta, 12, {1, 2, 3})
    assert [(p.partition_index, p.error_code, p.leader_id) for p in answer.partitions] == [
        (0, errors.NONE, 1), (1, errors.LEADER_NOT_AVAILABLE, -1)]
    # the controller's UpdateMetadata brings the state it elected
    reg.apply_partition_states({"t": [_state("t", 1, 2, [2, 3], replicas=[3, 2])]}, {"t": IDS["a"]}, full=False)
    assert _view(reg) == {"t": [(0, 1, [1, 2]), (1, 2, [2, 3])]}


def test_a_topic_new_to_the_cache_has_every_partition_of_its_assignment() -> None:
    """A broker that missed a topic's first UpdateMetadata hears of it from one naming a single partition
    (an ISR change): the topic's other partitions are in its Metadata answer too, without a leader, rather
    than the topic answered with one partition (what the leader of a topic once answered in CI)."""
    reg, store, events = _registry()
    _write_topic(store, "a", {0: [1, 2, 3], 1: [2, 3, 1], 2: [3, 1, 2]}, IDS["a"])
    reg.apply_partition_states({"a": [_state("a", 1, 2, [2, 3], replicas=[2, 3, 1])]}, IDS, full=False)
    assert _view(reg) == {"a": [(0, -1, []), (1, 2, [2, 3]), (2, -1, [])]}
    assert events == [("created", "a")]
    meta = reg.get("a")
    assert meta is not None and [p.replicas for p in meta.partitions] == [[1, 2, 3], [2, 3, 1], [3, 1, 2]]
    answer = metadata._topic_response(m12, meta, 12, {1, 2, 3})
    assert [(p.partition_index, p.error_code) for p in answer.partitions] == [
        (0, errors.LEADER_NOT_AVAILABLE), (1, errors.NONE), (2, errors.LEADER_NOT_AVAILABLE)]
    # the first leaders of a large topic come in batches: the next names the rest
    reg.apply_partition_states({"a": [_state("a", 0, 1, [1, 2, 3]), _state("a", 2, 3, [3, 1, 2])]}, IDS, full=False)
    assert _view(reg) == {"a": [(0, 1, [1, 2, 3]), (1, 2, [2, 3]), (2, 3, [3, 1, 2])]}
    assert events == [("created", "a")]


def test_a_gap_in_a_cached_topic_is_filled_from_the_assignment() -> None:
    reg, store, events = _registry()
    reg.apply_partition_states({"a": [_state("a", p, 1, [1]) for p in range(2)]}, IDS, full=False)
    # partitions 2 and 3 added (CreatePartitions); the update naming 2 did not reach this broker
    _write_topic(store, "a", {0: [1], 1: [1], 2: [2], 3: [3]}, IDS["a"])
    reg.apply_partition_states({"a": [_state("a", 3, 3, [3], replicas=[3])]}, IDS, full=False)
    meta = reg.get("a")
    assert meta is not None
    assert [(p.index, p.leader, p.replicas) for p in meta.partitions] == [(0, 1, [1, 2, 3]), (1, 1, [1, 2, 3]),
                                                                           (2, -1, [2]), (3, 3, [3])]
    assert events == [("created", "a"), ("partitions", "a")]


def test_another_incarnations_assignment_is_not_used() -> None:
    """The store holds a topic of the same name under another id (deleted and made again): its
    assignment says nothing of this one; a gap is still filled, without replicas."""
    reg, store, _ = _registry()
    _write_topic(store, "a", {0: [1], 1: [2], 2: [3]}, topic_id_to_str(uuid.uuid4()))
    reg.apply_partition_states({"a": [_state("a", 1, 2, [2], replicas=[2])]}, IDS, full=False)
    meta = reg.get("a")
    assert meta is not None
    assert [(p.index, p.leader, p.replicas) for p in meta.partitions] == [(0, -1, []), (1, 2, [2])]
