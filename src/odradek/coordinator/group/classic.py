"""A classic consumer group: its state, members and protocol selection (no I/O).

States and the transitions Kafka allows (``validPreviousStates``)::

    Empty               <- PreparingRebalance
    PreparingRebalance  <- Empty, Stable, CompletingRebalance
    CompletingRebalance <- PreparingRebalance
    Stable              <- CompletingRebalance
    Dead                <- Empty, Stable, PreparingRebalance, CompletingRebalance, Dead
"""

from __future__ import annotations

import enum
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class GroupState(enum.Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(GroupState),
}


class IllegalStateTransition(RuntimeError):
    pass


@dataclass
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: list[tuple[str, bytes]]
    assignment: bytes = b""
    # a JoinGroup / SyncGroup waiting for its answer (callbacks set by the coordinator)
    awaiting_join: Callable[[Any], None] | None = None
    awaiting_sync: Callable[[Any], None] | None = None
    heartbeat_deadline: float = 0.0
    is_new: bool = False

    def metadata(self, protocol: str) -> bytes:
        for name, meta in self.protocols:
            if name == protocol:
                return meta
        raise KeyError(protocol)

    def matches(self, protocols: list[tuple[str, bytes]]) -> bool:
        return self.protocols == protocols


@dataclass
class OffsetAndMetadata:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    pending_members: set[str] = field(default_factory=set)  # member ids handed out, not yet joined
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    state_timestamp: int = -1
    new_member_added: bool = False
    # Kafka's ClassicGroup bookkeeping that keeps each join O(1) instead of a scan of the members:
    # how many members support each protocol, and how many have a JoinGroup waiting for its answer
    supported_protocols: Counter[str] = field(default_factory=Counter)
    num_awaiting_join: int = 0

    def transition(self, target: GroupState, now_ms: int = -1) -> None:
        if self.state not in VALID_PREVIOUS[target]:
            raise IllegalStateTransition(f"group {self.group_id}: {self.state.value} -> {target.value}")
        self.state = target
        self.state_timestamp = now_ms

    def is_in(self, *states: GroupState) -> bool:
        return self.state in states

    @property
    def is_empty(self) -> bool:
        return not self.members

    def add(self, member: Member) -> None:
        if not self.members:
            self.protocol_type = member.protocol_type
        self.members[member.member_id] = member
        self.supported_protocols.update({name for name, _ in member.protocols})
        if member.awaiting_join is not None:
            self.num_awaiting_join += 1
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = member.member_id
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.pending_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        m = self.members.pop(member_id, None)
        if m is None:
            return None
        self.supported_protocols.subtract({name for name, _ in m.protocols})
        if m.awaiting_join is not None:
            self.num_awaiting_join -= 1
        if m.group_instance_id is not None and self.static_members.get(m.group_instance_id) == member_id:
            del self.static_members[m.group_instance_id]
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)
        return m

    def clear_members(self) -> None:
        self.members.clear()
        self.static_members.clear()
        self.supported_protocols.clear()
        self.num_awaiting_join = 0

    def update_protocols(self, m: Member, protocols: list[tuple[str, bytes]]) -> None:
        """A member's protocols change (it rejoined with new metadata)."""
        if m.member_id in self.members:
            self.supported_protocols.subtract({name for name, _ in m.protocols})
            self.supported_protocols.update({name for name, _ in protocols})
        m.protocols = list(protocols)

    def await_join(self, m: Member, respond: Callable[[Any], None]) -> Callable[[Any], None] | None:
        """``m``'s JoinGroup now waits for its answer through ``respond``; returns the callback it
        replaces (None if it was not waiting)."""
        old, m.awaiting_join = m.awaiting_join, respond
        if old is None and m.member_id in self.members:
            self.num_awaiting_join += 1
        return old

    def take_join(self, m: Member) -> Callable[[Any], None] | None:
        """The callback of ``m``'s waiting JoinGroup, which is answered now (None if none waits)."""
        cb, m.awaiting_join = m.awaiting_join, None
        if cb is not None and m.member_id in self.members:
            self.num_awaiting_join -= 1
        return cb

    def replace_static(self, instance_id: str, old_id: str, new_id: str) -> Member:
        m = self.members.pop(old_id)
        m.member_id = new_id
        self.members[new_id] = m
        self.static_members[instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        return m

    def static_member_id(self, instance_id: str | None) -> str | None:
        if instance_id is None:
            return None
        return self.static_members.get(instance_id)

    def candidate_protocols(self) -> set[str]:
        n = len(self.members)
        if not n:
            return set()
        return {name for name, count in self.supported_protocols.items() if count == n}

    def supports_protocols(self, protocol_type: str, protocols: list[tuple[str, bytes]]) -> bool:
        names = {name for name, _ in protocols}
        if not self.members:
            return bool(protocol_type) and bool(names)
        n = len(self.members)
        return self.protocol_type == protocol_type and any(self.supported_protocols[p] == n for p in names)

    def select_protocol(self) -> str:
        """Each member votes for its most preferred protocol among those all support."""
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        order: list[str] = []
        for m in self.members.values():
            for name, _ in m.protocols:
                if name in candidates:
                    votes[name] = votes.get(name, 0) + 1
                    if name not in order:
                        order.append(name)
                    break
        return max(order, key=lambda n: (votes[n], -order.index(n)))

    def all_joined(self) -> bool:
        return self.num_awaiting_join == len(self.members) and not self.pending_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def subscribed_topics(self) -> set[str] | None:
        """Topics the members subscribe to, when the protocol is ``consumer``; None if unknown."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        from odradek.coordinator.group.consumer_protocol import subscription_topics

        topics: set[str] = set()
        for m in self.members.values():
            try:
                topics |= subscription_topics(m.metadata(self.protocol_name))
            except (KeyError, ValueError):
                return None
        return topics
