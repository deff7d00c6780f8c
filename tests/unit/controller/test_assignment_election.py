import random
from collections import Counter

import pytest

from odradek.controller import election
from odradek.controller.assignment import (
    AssignmentError,
    assign_rack_aware,
    assign_rack_unaware,
    assign_replicas,
    rack_alternated,
)
from odradek.controller.states import (
    IllegalTransition,
    PartitionState,
    ReplicaState,
    check_partition,
    check_replica,
)


def test_rack_unaware_matches_kafkas_layout() -> None:
    # Kafka's documented example: 5 brokers, 10 partitions, RF 3, start index 0, shift 0
    a = assign_rack_unaware([0, 1, 2, 3, 4], 10, 3, fixed_start=0)
    assert a[0] == [0, 1, 2] and a[1] == [1, 2, 3] and a[4] == [4, 0, 1]
    assert a[5] == [0, 2, 3] and a[9] == [4, 1, 2]


def test_rack_unaware_balance_and_distinct() -> None:
    a = assign_rack_unaware([1, 2, 3, 4], 400, 3, rng=random.Random(7))
    for reps in a.values():
        assert len(set(reps)) == 3
    leaders = Counter(r[0] for r in a.values())
    assert set(leaders.values()) == {100}
    replicas = Counter(b for r in a.values() for b in r)
    assert set(replicas.values()) == {300}
    with pytest.raises(AssignmentError):
        assign_rack_unaware([1, 2], 1, 3)


def test_rack_aware_spreads_racks() -> None:
    racks = {0: "a", 1: "a", 2: "b", 3: "b", 4: "c", 5: "c"}
    assert rack_alternated(racks) == [0, 2, 4, 1, 3, 5]
    a = assign_rack_aware(racks, 60, 3, rng=random.Random(1))
    for reps in a.values():
        assert len({racks[b] for b in reps}) == 3 and len(set(reps)) == 3
    with pytest.raises(AssignmentError):
        assign_replicas([0, 1], {0: "a", 1: None}, 1, 1)


def test_elections() -> None:
    assert election.offline([1, 2, 3], [2, 3], {1, 2, 3}, False) == (2, [2, 3])
    assert election.offline([1, 2, 3], [1], {2, 3}, False) is None
    assert election.offline([1, 2, 3], [1], {2, 3}, True) == (2, [2])
    assert election.preferred([1, 2], [2, 1], {1, 2}) == (1, [2, 1])
    assert election.preferred([1, 2], [2], {1, 2}) is None
    assert election.controlled_shutdown([1, 2, 3], [1, 2, 3], {1, 2, 3}, {1}) == (2, [2, 3])
    assert election.reassign([4, 5], [5, 1], {4, 5}) == (5, [5, 1])
    assert election.imbalance_ratio({("t", 0): 2, ("t", 1): 1}, {("t", 0): 1, ("t", 1): 1}, 1) == 0.5


def test_state_tables() -> None:
    check_partition(PartitionState.NON_EXISTENT, PartitionState.NEW)
    check_partition(PartitionState.OFFLINE, PartitionState.ONLINE)
    with pytest.raises(IllegalTransition):
        check_partition(PartitionState.NEW, PartitionState.NON_EXISTENT)
    check_replica(ReplicaState.OFFLINE, ReplicaState.DELETION_STARTED)
    with pytest.raises(IllegalTransition):
        check_replica(ReplicaState.ONLINE, ReplicaState.DELETION_STARTED)
