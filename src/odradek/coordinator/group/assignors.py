"""Server-side partition assignors of the consumer group protocol (KIP-848), as pure functions.

An assignor gets the members (their subscriptions and their current target assignment, for
stickiness) and the partition count of every subscribed topic, and returns the new target
assignment. Topics are opaque hashable keys (the coordinator uses topic ids); they are ordered
by ``str(key)`` wherever an order is needed, so results are deterministic.

- ``uniform``: balanced and sticky. Every member keeps the partitions of its current assignment
  it is still entitled to, as far as balance allows; the rest go to the least loaded eligible
  member. With homogeneous subscriptions the partition counts of any two members differ by at
  most one (across all topics together). With heterogeneous subscriptions partitions are moved
  from heavier to lighter members while one of them can take it and the difference exceeds one.
- ``range``: per topic, the subscribed members sorted by member id get contiguous ranges; the
  first ``partitions % members`` get one extra. Topics with the same partition count and the
  same subscribers are therefore co-partitioned (partition *i* of each goes to the same member).

Rack awareness is not implemented: racks are accepted and ignored.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class MemberSpec(Generic[K]):
    subscribed: AbstractSet[K]
    current: Mapping[K, AbstractSet[int]] = field(default_factory=dict)
    instance_id: str | None = None
    rack: str | None = None


class Assignor(Protocol):
    def __call__(self, members: Mapping[str, MemberSpec[K]], topics: Mapping[K, int], /) -> dict[str, dict[K, set[int]]]: ...


class AssignorError(ValueError):
    pass


def _key(t: Hashable) -> str:
    return str(t)


def _result(members: Mapping[str, MemberSpec[K]], owned: Mapping[str, set[tuple[K, int]]]) -> dict[str, dict[K, set[int]]]:
    out: dict[str, dict[K, set[int]]] = {}
    for mid in members:
        a: dict[K, set[int]] = {}
        for t, p in owned[mid]:
            a.setdefault(t, set()).add(p)
        out[mid] = a
    return out


def uniform_assign(members: Mapping[str, MemberSpec[K]], topics: Mapping[K, int]) -> dict[str, dict[K, set[int]]]:
    """Balanced, sticky assignment (see the module docstring)."""
    mids = sorted(members)
    rank = {m: i for i, m in enumerate(mids)}
    owned: dict[str, set[tuple[K, int]]] = {m: set() for m in mids}
    if not mids:
        return {}
    eligible: dict[K, list[str]] = {}
    for t in sorted(topics, key=_key):
        subs = [m for m in mids if t in members[m].subscribed]
        if subs and topics[t] > 0:
            eligible[t] = subs
    all_parts = [(t, p) for t in eligible for p in range(topics[t])]
    homogeneous = len({frozenset(eligible.keys() & members[m].subscribed) for m in mids}) == 1
    if homogeneous and all_parts:
        # quotas: every member gets min_quota, `extra` of them one more
        min_quota, extra = divmod(len(all_parts), len(mids))
    else:
        min_quota, extra = len(all_parts), 0

    # 1. stickiness: keep current partitions that still exist and are still subscribed, up to the quota
    taken: set[tuple[K, int]] = set()
    kept: dict[str, set[tuple[K, int]]] = {m: set() for m in mids}
    # members with the most current partitions first claim the extra slots (fewest moves)
    for m in sorted(mids, key=lambda x: -sum(len(v) for v in members[x].current.values())):
        spec = members[m]
        valid = sorted(
            ((t, p) for t, ps in spec.current.items() if t in eligible and t in spec.subscribed
             for p in ps if 0 <= p < topics[t]),
            key=lambda tp: (_key(tp[0]), tp[1]),
        )
        valid = [tp for tp in valid if tp not in taken]
        limit = min_quota
        if len(valid) > min_quota and extra > 0:
            limit += 1
            extra -= 1
        for tp in valid[:limit]:
            owned[m].add(tp)
            kept[m].add(tp)
            taken.add(tp)

    # 2. unassigned partitions to the least loaded eligible member; the most constrained first
    rest = [tp for tp in all_parts if tp not in taken]
    rest.sort(key=lambda tp: (len(eligible[tp[0]]), _key(tp[0]), tp[1]))
    for t, p in rest:
        best = min(eligible[t], key=lambda m: (len(owned[m]), rank[m]))
        owned[best].add((t, p))

    # 3. balance: move partitions from heavier to lighter members while the gap exceeds one
    def movable(src: str, dst: str) -> tuple[K, int] | None:
        cands = [tp for tp in owned[src] if tp[0] in members[dst].subscribed]
        if not cands:
            return None
        # give away what was not kept (new to src) first, then the highest partitions
        cands.sort(key=lambda tp: (tp in kept[src], _key(tp[0]), tp[1]))
        return cands[0]

    for _ in range(len(all_parts) * len(mids) + 1):
        order = sorted(mids, key=lambda m: (len(owned[m]), rank[m]))
        moved = False
        for light in order:
            for heavy in reversed(order):
                if len(owned[heavy]) - len(owned[light]) <= 1:
                    break
                cand = movable(heavy, light)
                if cand is not None:
                    owned[heavy].discard(cand)
                    owned[light].add(cand)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            break
    return _result(members, owned)


def range_assign(members: Mapping[str, MemberSpec[K]], topics: Mapping[K, int]) -> dict[str, dict[K, set[int]]]:
    """Contiguous ranges per topic over the subscribed members sorted by member id."""
    out: dict[str, dict[K, set[int]]] = {m: {} for m in members}
    for t in sorted(topics, key=_key):
        subs = sorted(m for m in members if t in members[m].subscribed)
        n = topics[t]
        if not subs or n <= 0:
            continue
        per, extra = divmod(n, len(subs))
        start = 0
        for i, m in enumerate(subs):
            count = per + (1 if i < extra else 0)
            if count:
                out[m][t] = set(range(start, start + count))
            start += count
    return out


ASSIGNORS: dict[str, Assignor] = {"uniform": uniform_assign, "range": range_assign}
