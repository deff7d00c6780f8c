"""Partition reassignment (KIP-455), the controller's part, as Kafka's ZooKeeper-mode
controller does it. Pure planning here; the controller applies the plans.

For a partition with current replicas RS and target TRS (original replicas ORS when it
started):

1. start: the assignment becomes ``TRS ++ (RS - TRS)`` (target first, then the replicas
   still to be removed), with ``adding_replicas = TRS - ORS`` and ``removing_replicas =
   ORS - TRS`` recorded in /brokers/topics/<t> (so a new controller resumes it); the
   leader epoch is bumped and every replica told, so new replicas start following.
2. complete, once every target replica is in the ISR: a leader from TRS (the current one
   if it is in TRS and alive, else the first target replica alive and in the ISR), ISR =
   ISR ∩ TRS, leader epoch bumped, assignment = TRS, StopReplica(delete) to RS - TRS.

Cancelling (replicas = null) reassigns back to ORS the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

from odradek.controller import election


@dataclass(frozen=True)
class Reassignment:
    original: tuple[int, ...]
    target: tuple[int, ...]

    @property
    def adding(self) -> list[int]:
        return [b for b in self.target if b not in self.original]

    @property
    def removing(self) -> list[int]:
        return [b for b in self.original if b not in self.target]


def validate_target(target: list[int], known_brokers: set[int]) -> str | None:
    """An error message, or None when ``target`` is acceptable."""
    if not target:
        return "The replica list is empty."
    if len(set(target)) != len(target):
        return f"The proposed assignment contains duplicate replicas: {target}."
    unknown = [b for b in target if b not in known_brokers]
    if unknown:
        return f"The proposed assignment contains brokers that are not alive: {unknown}."
    return None


def start(current: list[int], ongoing: Reassignment | None, target: list[int]) -> tuple[Reassignment, list[int]]:
    """(the reassignment, the assignment to write while it runs)."""
    original = ongoing.original if ongoing is not None else tuple(current)
    r = Reassignment(original, tuple(target))
    return r, list(target) + [b for b in current if b not in target]


@dataclass(frozen=True)
class Completion:
    leader: int
    isr: list[int]
    remove: list[int]


def completion(
    r: Reassignment, current: list[int], leader: int, isr: list[int], live: set[int]
) -> Completion | None:
    """What finishing looks like, or None while a target replica is not yet in the ISR
    (or no target replica can lead)."""
    if not all(b in isr for b in r.target):
        return None
    new_isr = [b for b in isr if b in r.target]
    if leader in r.target and leader in live:
        new_leader = leader
    else:
        chosen = election.reassign(r.target, new_isr, live)
        if chosen is None:
            return None
        new_leader = chosen[0]
    return Completion(new_leader, new_isr, [b for b in current if b not in r.target])


def from_topic_doc(replicas: list[int], adding: list[int], removing: list[int]) -> Reassignment | None:
    """Resume a reassignment recorded in /brokers/topics/<t> (controller failover)."""
    if not adding and not removing:
        return None
    return Reassignment(
        tuple(b for b in replicas if b not in adding), tuple(b for b in replicas if b not in removing)
    )
