"""The state of KIP-848's consumer groups: a group, its members and their states, the heartbeat's request
and answer, and the reconciliation of a member's assignment with its target (Kafka's ConsumerGroup and
ConsumerGroupMember beside the GroupMetadataManager that drives them). consumer_group.py's
ConsumerGroupCoordinator drives them; consumer_classic.py (classic-protocol members of a consumer group) and
migration.py work on them without importing the coordinator back.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2

Parts = dict[uuid.UUID, frozenset[int]]
TP = tuple[uuid.UUID, int]


class MemberState(enum.Enum):
    STABLE = "STABLE"
    UNREVOKED_PARTITIONS = "UNREVOKED_PARTITIONS"
    UNRELEASED_PARTITIONS = "UNRELEASED_PARTITIONS"


class ConsumerGroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"
    DEAD = "Dead"


class GroupError(Exception):
    def __init__(self, code: int, message: str | None = None) -> None:
        super().__init__(message or str(code))
        self.code = code
        self.message = message


class TopicView(Protocol):
    def lookup(self, name: str) -> tuple[uuid.UUID, int] | None:
        """(topic id, partition count) of a topic, None if it does not exist."""

    def name_of(self, topic_id: uuid.UUID) -> str | None: ...

    def names(self) -> Iterable[str]:
        """Every non-internal topic name (for regex subscriptions)."""


@dataclass
class ConsumerGroupConfig:
    heartbeat_interval_ms: int = 5000
    session_timeout_ms: int = 45000
    assignors: tuple[str, ...] = ("uniform", "range")
    max_size: int = 2**31 - 1


@dataclass(frozen=True)
class ClassicMemberInfo:
    """What a member that speaks the classic protocol (JoinGroup / SyncGroup / Heartbeat) inside
    a consumer group keeps of its JoinGroup (Kafka's ClassicMemberMetadata, KIP-848's online
    migration): its session timeout and the protocols it offered, in its order of preference."""

    session_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]

    @property
    def protocol_names(self) -> frozenset[str]:
        return frozenset(name for name, _ in self.protocols)


@dataclass
class ConsumerMember:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    rebalance_timeout_ms: int = -1
    member_epoch: int = 0
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    assigned: Parts = field(default_factory=dict)
    pending_revocation: Parts = field(default_factory=dict)
    classic: ClassicMemberInfo | None = None  # set while the member uses the classic protocol
    # whether the member's principal may DESCRIBE a topic (None without an authorizer): what its
    # regex subscription matches is limited to those (Kafka's filterTopicDescribeAuthorizedTopics)
    may_describe: Callable[[str], bool] | None = field(default=None, compare=False, repr=False)

    @property
    def uses_classic_protocol(self) -> bool:
        return self.classic is not None

    def is_reconciled_to(self, epoch: int) -> bool:
        return self.state == MemberState.STABLE and self.member_epoch == epoch

    def with_epoch(self, epoch: int, **changes: object) -> ConsumerMember:
        """A copy at ``epoch`` whose previous epoch is the current one (Kafka's updateMemberEpoch)."""
        return dataclasses.replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch, **changes)  # type: ignore[arg-type]


@dataclass
class ConsumerGroup:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ConsumerMember] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)  # instance id -> member id
    target: dict[str, Parts] = field(default_factory=dict)  # member id -> target partitions
    subscription_metadata: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)
    partition_owner: dict[TP, str] = field(default_factory=dict)  # assigned or pending revocation
    assignor_name: str = ""
    state_timestamp: int = -1
    # the members speaking the classic protocol, and how many of them offer each protocol name
    # (Kafka's classicProtocolMembersSupportedProtocols: a joining classic member must share one)
    num_classic: int = 0
    classic_protocols: Counter[str] = field(default_factory=Counter)

    @property
    def state(self) -> ConsumerGroupState:
        if not self.members:
            return ConsumerGroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return ConsumerGroupState.ASSIGNING
        if any(not m.is_reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return ConsumerGroupState.RECONCILING
        return ConsumerGroupState.STABLE

    def put_member(self, new: ConsumerMember, old: ConsumerMember | None) -> None:
        """Store ``new`` and move the ownership of its partitions from ``old``'s."""
        if old is not None:
            self._count_classic(old, -1)
            for parts in (old.assigned, old.pending_revocation):
                for t, ps in parts.items():
                    for p in ps:
                        if self.partition_owner.get((t, p)) == old.member_id:
                            del self.partition_owner[(t, p)]
        for parts in (new.assigned, new.pending_revocation):
            for t, ps in parts.items():
                for p in ps:
                    self.partition_owner[(t, p)] = new.member_id
        self.members[new.member_id] = new
        self._count_classic(new, 1)
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id

    def _count_classic(self, m: ConsumerMember, sign: int) -> None:
        if m.classic is not None:
            self.num_classic += sign
            self.classic_protocols.update({name: sign for name in m.classic.protocol_names})

    def supports_classic_protocols(self, names: Iterable[str]) -> bool:
        """Whether a classic member offering ``names`` can join: one must be offered by every
        classic member already in (Kafka's ConsumerGroup.supportsClassicProtocols)."""
        return self.num_classic == 0 or any(self.classic_protocols[n] == self.num_classic for n in names)

    def all_classic_except(self, member_id: str) -> bool:
        """Whether every member but ``member_id`` uses the classic protocol."""
        leaving = self.members.get(member_id)
        others = self.num_classic - (1 if leaving is not None and leaving.classic is not None else 0)
        return others == len(self.members) - (1 if leaving is not None else 0)

    def drop_member(self, member_id: str) -> ConsumerMember | None:
        m = self.members.pop(member_id, None)
        if m is None:
            return None
        self._count_classic(m, -1)
        for parts in (m.assigned, m.pending_revocation):
            for t, ps in parts.items():
                for p in ps:
                    if self.partition_owner.get((t, p)) == member_id:
                        del self.partition_owner[(t, p)]
        if m.instance_id is not None and self.static_members.get(m.instance_id) == member_id:
            del self.static_members[m.instance_id]
        self.target.pop(member_id, None)
        return m


@dataclass
class HeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: list[str] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    topic_partitions: list[tuple[uuid.UUID, list[int]]] | None = None
    # the heartbeating principal's DESCRIBE on topics, None without an authorizer (ConsumerMember.may_describe)
    may_describe: Callable[[str], bool] | None = None


@dataclass
class HeartbeatResult:
    error_code: int
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Parts | None = None


def new_member_id() -> str:
    """A random id in Kafka's Uuid text form (URL-safe base64, no padding)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")


def owns_any(owned: list[tuple[uuid.UUID, list[int]]] | None, parts: Parts) -> bool:
    """Whether the owned partitions reported by a member include any of ``parts``; a member
    that did not report them (null) is assumed to still own everything."""
    if owned is None:
        return True
    return any(p in parts.get(t, ()) for t, ps in owned for p in ps)


def is_subset(owned: list[tuple[uuid.UUID, list[int]]] | None, parts: Parts) -> bool:
    if owned is None:
        return False
    return all(p in parts.get(t, ()) for t, ps in owned for p in ps)


def reconcile(
    member: ConsumerMember,
    target_epoch: int,
    target: Parts,
    owned: list[tuple[uuid.UUID, list[int]]] | None,
    is_free: Callable[[uuid.UUID, int], bool],
) -> ConsumerMember:
    """The next state of ``member`` towards ``target`` (see the module docstring)."""
    if member.state == MemberState.STABLE:
        if member.member_epoch == target_epoch:
            return member
    elif member.state == MemberState.UNREVOKED_PARTITIONS and owns_any(owned, member.pending_revocation):
        return member
    keep: dict[uuid.UUID, frozenset[int]] = {}
    revoke: dict[uuid.UUID, frozenset[int]] = {}
    add: dict[uuid.UUID, frozenset[int]] = {}
    unreleased = False
    for t in set(target) | set(member.assigned):
        tgt = target.get(t, frozenset())
        cur = member.assigned.get(t, frozenset())
        k, r = cur & tgt, cur - tgt
        wanted = tgt - k
        free = frozenset(p for p in wanted if is_free(t, p))
        unreleased = unreleased or free != wanted
        if k:
            keep[t] = k
        if r:
            revoke[t] = r
        if free:
            add[t] = free
    if revoke and owns_any(owned, revoke):
        return member.with_epoch(
            member.member_epoch, state=MemberState.UNREVOKED_PARTITIONS, assigned=keep, pending_revocation=revoke
        )
    assigned = dict(keep)
    for t, ps in add.items():
        assigned[t] = assigned.get(t, frozenset()) | ps
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return member.with_epoch(target_epoch, state=state, assigned=assigned, pending_revocation={})
