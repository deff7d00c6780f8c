"""Replica assignment for new topics and partitions, as Kafka's AdminUtils.assignReplicasToBrokers
does it: the one implementation, used by the controller (CreateTopics, CreatePartitions) and by
``odradek reassign --generate`` (:mod:`odradek.cli.reassign_cmd`, rack-unaware like its proposals).

Rack-unaware: brokers sorted by id; the first replica of partition p is broker
``(p + start) % n``; followers are shifted by ``1 + (shift + j) % (n - 1)``, and the shift
grows by one every n partitions, so replicas spread evenly and the leaders (first
replicas) round-robin. ``start`` and the initial shift are random unless fixed.

Rack-aware (every broker has a rack): brokers are interleaved rack by rack, and each
partition's followers skip brokers whose rack (or the broker itself) is already used,
until every rack holds a replica.
"""

from __future__ import annotations

import random
from collections.abc import Mapping


class AssignmentError(ValueError):
    pass


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_rack_unaware(
    brokers: list[int],
    num_partitions: int,
    replication_factor: int,
    *,
    start_partition: int = 0,
    fixed_start: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    if num_partitions <= 0:
        raise AssignmentError("Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise AssignmentError("Replication factor must be larger than 0.")
    if replication_factor > len(brokers):
        raise AssignmentError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(brokers)}."
        )
    rnd = rng or random.Random()
    ids = sorted(brokers)
    n = len(ids)
    start = fixed_start if fixed_start >= 0 else rnd.randrange(n)
    shift = fixed_start if fixed_start >= 0 else rnd.randrange(n)
    out: dict[int, list[int]] = {}
    p = max(start_partition, 0)
    for _ in range(num_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        replicas = [ids[first]]
        for j in range(replication_factor - 1):
            replicas.append(ids[_replica_index(first, shift, j, n)])
        out[p] = replicas
        p += 1
    return out


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Brokers interleaved by rack: r1b1, r2b1, r3b1, r1b2, ... (racks and brokers sorted)."""
    by_rack: dict[str, list[int]] = {}
    for b, r in sorted(racks.items()):
        by_rack.setdefault(r, []).append(b)
    iters = [list(v) for _, v in sorted(by_rack.items())]
    out: list[int] = []
    i = 0
    while len(out) < len(racks):
        for lst in iters:
            if i < len(lst):
                out.append(lst[i])
        i += 1
    return out


def assign_rack_aware(
    racks: Mapping[int, str],
    num_partitions: int,
    replication_factor: int,
    *,
    start_partition: int = 0,
    fixed_start: int = -1,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    if replication_factor > len(racks):
        raise AssignmentError(
            f"Replication factor: {replication_factor} larger than available brokers: {len(racks)}."
        )
    rnd = rng or random.Random()
    arranged = rack_alternated(racks)
    n = len(arranged)
    num_racks = len(set(racks.values()))
    start = fixed_start if fixed_start >= 0 else rnd.randrange(n)
    shift = fixed_start if fixed_start >= 0 else rnd.randrange(n)
    out: dict[int, list[int]] = {}
    p = max(start_partition, 0)
    for _ in range(num_partitions):
        if p > 0 and p % n == 0:
            shift += 1
        first = (p + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {racks[leader]}
        brokers_used = {leader}
        k = 0
        for _j in range(replication_factor - 1):
            done = False
            while not done:
                broker = arranged[_replica_index(first, shift * num_racks, k, n)]
                rack = racks[broker]
                if (rack not in racks_used or len(racks_used) == num_racks) and (
                    broker not in brokers_used or len(brokers_used) == n
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    done = True
                k += 1
        out[p] = replicas
        p += 1
    return out


def assign_replicas(
    brokers: list[int],
    racks: Mapping[int, str | None],
    num_partitions: int,
    replication_factor: int,
    *,
    start_partition: int = 0,
    rng: random.Random | None = None,
) -> dict[int, list[int]]:
    """Rack-aware when every broker has a rack, rack-unaware when none has; mixed is an error
    (Kafka's default for CreateTopics)."""
    with_rack = {b: r for b, r in racks.items() if r and b in brokers}
    if with_rack and len(with_rack) == len(brokers):
        return assign_rack_aware(
            with_rack, num_partitions, replication_factor, start_partition=start_partition, rng=rng
        )
    if with_rack:
        raise AssignmentError("Not all brokers have rack information for replica rack aware assignment.")
    return assign_rack_unaware(brokers, num_partitions, replication_factor, start_partition=start_partition, rng=rng)
