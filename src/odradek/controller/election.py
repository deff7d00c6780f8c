"""Partition leader election rules (Kafka's PartitionLeaderElectionAlgorithms), pure.

Each returns ``(leader, isr)`` or ``None`` when no leader can be elected.

- offline:  the first live replica, in assignment order, that is in the ISR; with
            unclean.leader.election.enable, else the first live replica at all (ISR
            becomes just that replica: data outside the old ISR may be lost).
- reassign: the first replica of the target assignment that is alive and in the ISR.
- preferred: the first replica of the assignment, if alive and in the ISR.
- controlled shutdown: the first replica that is alive, in the ISR and not shutting
            down; the shutting-down brokers leave the ISR.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

Election = tuple[int, list[int]] | None


def offline(assignment: Sequence[int], isr: Sequence[int], live: Collection[int], unclean: bool) -> Election:
    for r in assignment:
        if r in live and r in isr:
            return r, [b for b in isr if b in live]
    if unclean:
        for r in assignment:
            if r in live:
                return r, [r]
    return None


def reassign(target: Sequence[int], isr: Sequence[int], live: Collection[int]) -> Election:
    for r in target:
        if r in live and r in isr:
            return r, list(isr)
    return None


def preferred(assignment: Sequence[int], isr: Sequence[int], live: Collection[int]) -> Election:
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0], list(isr)
    return None


def controlled_shutdown(
    assignment: Sequence[int], isr: Sequence[int], live: Collection[int], shutting_down: Collection[int]
) -> Election:
    new_isr = [b for b in isr if b not in shutting_down]
    for r in assignment:
        if r in live and r in new_isr:
            return r, new_isr
    return None


def imbalance_ratio(leaders: dict[tuple[str, int], int], preferred_of: dict[tuple[str, int], int], broker: int) -> float:
    """Share of the partitions whose preferred leader is ``broker`` that it does not lead
    (leader.imbalance.per.broker.percentage compares against this)."""
    mine = [tp for tp, b in preferred_of.items() if b == broker]
    if not mine:
        return 0.0
    not_led = sum(1 for tp in mine if leaders.get(tp) != broker)
    return not_led / len(mine)
