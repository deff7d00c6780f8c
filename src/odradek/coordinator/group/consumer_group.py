"""Consumer groups of the new group protocol (KIP-848): ConsumerGroupHeartbeat and
ConsumerGroupDescribe, with server-side assignors and incremental reconciliation (no I/O).

Group epoch, target assignment and member epochs::

    group epoch        bumped when a member joins or leaves, a subscription or the requested
                       server assignor changes, or a subscribed topic appears or changes its
                       partition count (the group's "subscription metadata")
    assignment epoch   the group epoch the current target assignment was computed for; the
                       target is recomputed, by the group's assignor, on the next heartbeat
                       after a bump
    member epoch       advances to the assignment epoch once the member has reconciled

Reconciliation of one member (Kafka's CurrentAssignmentBuilder), on each of its heartbeats::

    keep    = assigned ∩ target              revoke = assigned − target
    add     = target − keep, only partitions no other member still owns

    revoke non-empty and still owned    → UNREVOKED_PARTITIONS: the member gets ``keep`` only
                                          and keeps its epoch; it acknowledges by reporting its
                                          owned partitions (without the revoked ones)
    otherwise                           → epoch = assignment epoch, assigned = keep ∪ add;
                                          STABLE, or UNRELEASED_PARTITIONS while part of its
                                          target is still owned by someone else

Group state: Empty (no members), Assigning (group epoch > assignment epoch), Reconciling (a
member is not yet STABLE at the assignment epoch), Stable.

Member epochs sent by clients: 0 joins (or rejoins), -1 leaves, -2 is a static member leaving
temporarily (it keeps its partitions until its session times out or it rejoins). A heartbeat
with a stale epoch is answered FENCED_MEMBER_EPOCH, except the previous epoch with owned
partitions within the current assignment (the response carrying the new epoch may have been
lost). A member silent for group.consumer.session.timeout.ms, or one that does not revoke
within its rebalance timeout, is fenced: removed from the group, whose epoch is bumped.

**State is kept in memory only**: unlike Kafka, which writes ConsumerGroup* records to
``__consumer_offsets``, the membership, epochs and assignments of these groups are lost when
the broker restarts; members then get UNKNOWN_MEMBER_ID and rejoin with epoch 0. Committed
offsets do persist: they go through the classic coordinator's OffsetCommit records.

One concept in one file (over 600 lines): the KIP-848 consumer group state machine and its reconciliation.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import logging
import re
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from odradek.coordinator.group.assignors import ASSIGNORS, AssignorError, MemberSpec
from odradek.coordinator.group.coordinator import Cancellable, Scheduler
from odradek.protocol import errors

log = logging.getLogger("odradek.coordinator")

LEAVE_GROUP_MEMBER_EPOCH = -1
LEAVE_GROUP_STATIC_MEMBER_EPOCH = -2
INVALID_REGULAR_EXPRESSION = 128

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
        if new.instance_id is not None:
            self.static_members[new.instance_id] = new.member_id

    def drop_member(self, member_id: str) -> ConsumerMember | None:
        m = self.members.pop(member_id, None)
        if m is None:
            return None
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


class ConsumerGroupCoordinator:
    """Consumer-protocol groups; ``classic_group_active(group_id)`` tells whether a classic group
    with members holds the id, ``on_empty(group_id, now_ms)`` is called when a group empties."""

    def __init__(
        self,
        config: ConsumerGroupConfig,
        scheduler: Scheduler,
        topics: TopicView,
        classic_group_active: Callable[[str], bool] = lambda _g: False,
        on_empty: Callable[[str, int], None] = lambda _g, _t: None,
    ) -> None:
        unknown = [a for a in config.assignors if a not in ASSIGNORS]
        if unknown or not config.assignors:
            raise ValueError(f"group.consumer.assignors: unknown assignor(s) {unknown}; known: {sorted(ASSIGNORS)}")
        self.config = config
        self.scheduler = scheduler
        self.topics = topics
        self.classic_group_active = classic_group_active
        self.on_empty = on_empty
        self.groups: dict[str, ConsumerGroup] = {}
        self._session_timers: dict[tuple[str, str], Cancellable] = {}
        self._rebalance_timers: dict[tuple[str, str], Cancellable] = {}

    # ------------------------------------------------------------------ heartbeat
    def heartbeat(self, req: HeartbeatRequest, api_version: int, client_id: str, client_host: str) -> HeartbeatResult:
        try:
            self._validate(req, api_version)
            if req.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(req)
            return self._heartbeat(req, client_id, client_host)
        except GroupError as e:
            return HeartbeatResult(e.code, e.message)

    def _validate(self, req: HeartbeatRequest, api_version: int) -> None:
        def blank(s: str | None) -> bool:
            return s is not None and not s.strip()

        if not req.group_id:
            raise GroupError(errors.INVALID_GROUP_ID)
        if (api_version >= 1 or req.member_epoch > 0 or req.member_epoch == LEAVE_GROUP_MEMBER_EPOCH) and not (
            req.member_id or ""
        ).strip():
            raise GroupError(errors.INVALID_REQUEST, "MemberId can't be empty.")
        if blank(req.group_id):
            raise GroupError(errors.INVALID_REQUEST, "GroupId can't be empty.")
        if blank(req.instance_id):
            raise GroupError(errors.INVALID_REQUEST, "InstanceId can't be empty.")
        if blank(req.rack_id):
            raise GroupError(errors.INVALID_REQUEST, "RackId can't be empty.")
        if req.member_epoch == 0:
            if req.rebalance_timeout_ms == -1:
                raise GroupError(errors.INVALID_REQUEST, "RebalanceTimeoutMs must be provided in first request.")
            if req.topic_partitions is None or len(req.topic_partitions) > 0:
                raise GroupError(errors.INVALID_REQUEST, "TopicPartitions must be empty when (re-)joining.")
            if req.subscribed_topic_names is None and req.subscribed_topic_regex is None:
                raise GroupError(
                    errors.INVALID_REQUEST,
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.",
                )
        elif req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if req.instance_id is None:
                raise GroupError(errors.INVALID_REQUEST, "InstanceId can't be null.")
        elif req.member_epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise GroupError(errors.INVALID_REQUEST, "MemberEpoch is invalid.")
        if req.server_assignor is not None and req.server_assignor not in self.config.assignors:
            raise GroupError(
                errors.UNSUPPORTED_ASSIGNOR,
                f"ServerAssignor {req.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(self.config.assignors)}.",
            )
        if req.subscribed_topic_regex:
            try:
                re.compile(req.subscribed_topic_regex)
            except re.error as e:
                raise GroupError(INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex {req.subscribed_topic_regex!r} is not a valid regular expression: {e}.") from e

    def _group_for_heartbeat(self, group_id: str, create: bool) -> ConsumerGroup:
        g = self.groups.get(group_id)
        if g is not None:
            return g
        if self.classic_group_active(group_id):
            raise GroupError(errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
        if not create:
            # Kafka answers GROUP_ID_NOT_FOUND, which librdkafka treats as fatal; as groups are
            # not persisted here (lost on restart), tell the member to rejoin instead
            raise GroupError(errors.UNKNOWN_MEMBER_ID, f"Group {group_id} not found.")
        g = self.groups[group_id] = ConsumerGroup(group_id, state_timestamp=self.scheduler.now_ms())
        log.info("created consumer group %s", group_id)
        return g

    @staticmethod
    def _check_epoch(m: ConsumerMember, req: HeartbeatRequest) -> None:
        e = req.member_epoch
        if e == 0:
            return  # a known member rejoining (KAFKA-19233)
        if e > m.member_epoch:
            raise GroupError(
                errors.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a greater member epoch ({e}) than the one known by the group "
                f"coordinator ({m.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        if e < m.member_epoch and (e != m.previous_member_epoch or not is_subset(req.topic_partitions, m.assigned)):
            raise GroupError(
                errors.FENCED_MEMBER_EPOCH,
                f"The consumer group member has a smaller member epoch ({e}) than the one known by the group "
                f"coordinator ({m.member_epoch}). The member must abandon all its partitions and rejoin.",
            )

    def _static_member(self, g: ConsumerGroup, member_id: str, req: HeartbeatRequest) -> tuple[ConsumerMember, bool]:
        """(member, is new) for a heartbeat with an instance id; replaces a released static member."""
        instance = req.instance_id
        assert instance is not None
        existing_id = g.static_members.get(instance)
        existing = g.members.get(existing_id) if existing_id is not None else None
        if req.member_epoch == 0:
            if existing is None:
                m = g.members.get(member_id)
                return (m, False) if m is not None else (ConsumerMember(member_id, instance_id=instance), True)
            if existing.member_id == member_id:
                return existing, False
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise GroupError(
                    errors.UNRELEASED_INSTANCE_ID,
                    f"Static member {member_id} with instance id {instance} cannot join the group because the "
                    f"instance id is owned by {existing.member_id} member.",
                )
            # the released static member comes back under a new member id: it keeps its assignment
            self._cancel_timers(g.group_id, existing.member_id)
            target = g.target.get(existing.member_id)
            g.drop_member(existing.member_id)
            replacement = dataclasses.replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            g.put_member(replacement, None)
            if target is not None:
                g.target[member_id] = target
            log.info(
                "static member with instance id %s rejoined consumer group %s as %s (replacing %s)",
                instance, g.group_id, member_id, existing.member_id,
            )
            return replacement, False
        if existing is None:
            raise GroupError(errors.UNKNOWN_MEMBER_ID, f"Instance id {instance} is unknown.")
        if existing.member_id != member_id:
            raise GroupError(
                errors.FENCED_INSTANCE_ID,
                f"Static member {member_id} with instance id {instance} was fenced by member {existing.member_id}.",
            )
        self._check_epoch(existing, req)
        return existing, False

    def _heartbeat(self, req: HeartbeatRequest, client_id: str, client_host: str) -> HeartbeatResult:
        g = self._group_for_heartbeat(req.group_id, create=req.member_epoch == 0)
        if len(g.members) >= self.config.max_size and (not req.member_id or req.member_id not in g.members):
            raise GroupError(
                errors.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {self.config.max_size} members.",
            )
        mid = req.member_id or new_member_id()
        if req.instance_id is None:
            found = g.members.get(mid)
            if found is None:
                if req.member_epoch != 0:
                    raise GroupError(errors.UNKNOWN_MEMBER_ID, f"Member {mid} is not a member of group {g.group_id}.")
                old, is_new = ConsumerMember(mid), True
            else:
                self._check_epoch(found, req)
                old, is_new = found, False
        else:
            old, is_new = self._static_member(g, mid, req)

        # 1. update the member; a new member or a changed subscription bumps the group epoch
        m = dataclasses.replace(old, client_id=client_id, client_host=client_host)
        if req.instance_id is not None:
            m.instance_id = req.instance_id
        if req.rack_id is not None:
            m.rack_id = req.rack_id
        if req.rebalance_timeout_ms != -1:
            m.rebalance_timeout_ms = req.rebalance_timeout_ms
        if req.subscribed_topic_names is not None:
            m.subscribed_topic_names = tuple(sorted(set(req.subscribed_topic_names)))
        if req.subscribed_topic_regex is not None:
            m.subscribed_topic_regex = req.subscribed_topic_regex or None
        if req.server_assignor is not None:
            m.server_assignor = req.server_assignor
        bump = is_new or (
            m.subscribed_topic_names != old.subscribed_topic_names
            or m.subscribed_topic_regex != old.subscribed_topic_regex
            or m.server_assignor != old.server_assignor
        )
        if is_new:
            log.info("member %s joins consumer group %s", mid, g.group_id)
        g.put_member(m, old if not is_new else None)
        metadata = self._subscription_metadata(g)
        if metadata != g.subscription_metadata:
            g.subscription_metadata = metadata
            bump = True
        if bump:
            g.group_epoch += 1
            log.info("consumer group %s: bumped group epoch to %d", g.group_id, g.group_epoch)

        # 2. a new target assignment when the group epoch moved past it
        if g.group_epoch > g.assignment_epoch:
            self._compute_target(g)

        # 3. reconcile the member towards its target
        new = m
        if not m.is_reconciled_to(g.assignment_epoch):
            new = reconcile(
                m, g.assignment_epoch, g.target.get(mid, {}), req.topic_partitions,
                lambda t, p: g.partition_owner.get((t, p), mid) == mid,
            )
            if new is not m:
                g.put_member(new, m)
                if new.state == MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance_timeout(g, new)
                else:
                    self._cancel_rebalance_timeout(g.group_id, mid)
        self._schedule_session_timeout(g.group_id, mid)

        full = req.member_epoch == 0 or (
            req.rebalance_timeout_ms != -1
            and (req.subscribed_topic_names is not None or req.subscribed_topic_regex is not None)
            and req.topic_partitions is not None
        )
        return HeartbeatResult(
            errors.NONE,
            member_id=mid,
            member_epoch=new.member_epoch,
            heartbeat_interval_ms=self.config.heartbeat_interval_ms,
            assignment=dict(new.assigned) if full or new.assigned != old.assigned else None,
        )

    def _leave(self, req: HeartbeatRequest) -> HeartbeatResult:
        g = self.groups.get(req.group_id)
        if g is None:
            raise GroupError(errors.UNKNOWN_MEMBER_ID, f"Group {req.group_id} not found.")
        if req.instance_id is None:
            m = g.members.get(req.member_id)
            if m is None:
                raise GroupError(errors.UNKNOWN_MEMBER_ID, f"Member {req.member_id} is not a member of group {g.group_id}.")
        else:
            mid = g.static_members.get(req.instance_id)
            m = g.members.get(mid) if mid is not None else None
            if m is None:
                raise GroupError(errors.UNKNOWN_MEMBER_ID, f"Instance id {req.instance_id} is unknown.")
            if m.member_id != req.member_id:
                raise GroupError(
                    errors.FENCED_INSTANCE_ID,
                    f"Static member {req.member_id} with instance id {req.instance_id} was fenced by member {m.member_id}.",
                )
        if req.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            # keeps its assignment (and the group its epoch) until it rejoins or its session expires
            released = dataclasses.replace(m, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH)
            g.put_member(released, m)
            self._cancel_rebalance_timeout(g.group_id, m.member_id)
            log.info("static member %s (instance %s) left consumer group %s temporarily", m.member_id, m.instance_id, g.group_id)
        else:
            self._remove_member(g, m.member_id, "the consumer is leaving the group")
        return HeartbeatResult(
            errors.NONE, member_id=req.member_id, member_epoch=req.member_epoch,
            heartbeat_interval_ms=0,
        )

    # ------------------------------------------------------------------ group epoch inputs
    def member_topics(self, m: ConsumerMember) -> set[str]:
        names = set(m.subscribed_topic_names)
        if m.subscribed_topic_regex:
            try:
                rx = re.compile(m.subscribed_topic_regex)
            except re.error:
                return names
            names |= {t for t in self.topics.names() if rx.fullmatch(t)}
        return names

    def _subscription_metadata(self, g: ConsumerGroup) -> dict[str, tuple[uuid.UUID, int]]:
        names: set[str] = set()
        for m in g.members.values():
            names |= self.member_topics(m)
        out: dict[str, tuple[uuid.UUID, int]] = {}
        for n in sorted(names):
            meta = self.topics.lookup(n)
            if meta is not None:
                out[n] = meta
        return out

    def preferred_assignor(self, g: ConsumerGroup) -> str:
        """The server assignor most members ask for; else the first of group.consumer.assignors."""
        counts: dict[str, int] = {}
        for m in g.members.values():
            if m.server_assignor is not None:
                counts[m.server_assignor] = counts.get(m.server_assignor, 0) + 1
        if not counts:
            return self.config.assignors[0]
        order = list(self.config.assignors)
        return max(counts, key=lambda a: (counts[a], -order.index(a) if a in order else -len(order)))

    def _compute_target(self, g: ConsumerGroup) -> None:
        name = self.preferred_assignor(g)
        ids = {n: tid for n, (tid, _) in g.subscription_metadata.items()}
        topics = {tid: count for tid, count in g.subscription_metadata.values()}
        specs = {
            mid: MemberSpec(
                frozenset(ids[n] for n in self.member_topics(m) if n in ids),
                g.target.get(mid, {}),
                m.instance_id,
                m.rack_id,
            )
            for mid, m in g.members.items()
        }
        try:
            result = ASSIGNORS[name](specs, topics)
        except AssignorError as e:  # pragma: no cover - the built-in assignors do not fail
            log.error("assignor %s failed for consumer group %s: %s", name, g.group_id, e)
            return
        g.target = {mid: {t: frozenset(ps) for t, ps in a.items() if ps} for mid, a in result.items()}
        g.assignment_epoch = g.group_epoch
        g.assignor_name = name
        log.info(
            "consumer group %s: computed target assignment for epoch %d with the %s assignor (%d members)",
            g.group_id, g.group_epoch, name, len(g.members),
        )

    def on_topic_changed(self, topic: str) -> None:
        """A topic was created, deleted or got partitions: bump the epoch of groups subscribed to it."""
        for g in self.groups.values():
            if not g.members:
                continue
            metadata = self._subscription_metadata(g)
            if metadata != g.subscription_metadata:
                g.subscription_metadata = metadata
                g.group_epoch += 1
                log.info("consumer group %s: metadata of %s changed, group epoch %d", g.group_id, topic, g.group_epoch)

    # ------------------------------------------------------------------ removal and timers
    def _remove_member(self, g: ConsumerGroup, member_id: str, reason: str) -> None:
        self._cancel_timers(g.group_id, member_id)
        if g.drop_member(member_id) is None:
            return
        g.subscription_metadata = self._subscription_metadata(g)
        g.group_epoch += 1
        log.info("member %s removed from consumer group %s (%s); group epoch %d", member_id, g.group_id, reason, g.group_epoch)
        if not g.members:
            now = self.scheduler.now_ms()
            g.state_timestamp = now
            self.on_empty(g.group_id, now)

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        for timers in (self._session_timers, self._rebalance_timers):
            t = timers.pop((group_id, member_id), None)
            if t is not None:
                t.cancel()

    def _schedule_session_timeout(self, group_id: str, member_id: str) -> None:
        key = (group_id, member_id)
        old = self._session_timers.pop(key, None)
        if old is not None:
            old.cancel()

        def expire() -> None:
            self._session_timers.pop(key, None)
            g = self.groups.get(group_id)
            if g is not None and member_id in g.members:
                self._remove_member(g, member_id, "session timeout expired")

        self._session_timers[key] = self.scheduler.call_later(self.config.session_timeout_ms / 1000.0, expire)

    def _schedule_rebalance_timeout(self, g: ConsumerGroup, m: ConsumerMember) -> None:
        key, epoch, group_id = (g.group_id, m.member_id), m.member_epoch, g.group_id
        self._cancel_rebalance_timeout(*key)
        timeout = m.rebalance_timeout_ms if m.rebalance_timeout_ms >= 0 else self.config.session_timeout_ms

        def expire() -> None:
            self._rebalance_timers.pop(key, None)
            grp = self.groups.get(group_id)
            cur = grp.members.get(key[1]) if grp is not None else None
            if grp is not None and cur is not None and cur.state == MemberState.UNREVOKED_PARTITIONS and cur.member_epoch == epoch:
                self._remove_member(grp, key[1], "did not revoke its partitions within the rebalance timeout")

        self._rebalance_timers[key] = self.scheduler.call_later(timeout / 1000.0, expire)

    def _cancel_rebalance_timeout(self, group_id: str, member_id: str) -> None:
        t = self._rebalance_timers.pop((group_id, member_id), None)
        if t is not None:
            t.cancel()

    def unload_partition(self, partition: int, partition_of: Callable[[str], int]) -> None:
        """Forget the groups coordinated by ``partition`` of __consumer_offsets (leadership
        moved away; KIP-848 membership is not persisted, members rejoin the new coordinator)."""
        for gid in [g for g in self.groups if partition_of(g) == partition]:
            self.groups.pop(gid)
            for key in [k for k in self._session_timers if k[0] == gid]:
                self._session_timers.pop(key).cancel()
            for key in [k for k in self._rebalance_timers if k[0] == gid]:
                self._rebalance_timers.pop(key).cancel()

    def unload(self) -> None:
        for t in list(self._session_timers.values()) + list(self._rebalance_timers.values()):
            t.cancel()
        self._session_timers.clear()
        self._rebalance_timers.clear()

    # ------------------------------------------------------------------ hooks for the classic coordinator
    def owns(self, group_id: str) -> bool:
        return group_id in self.groups

    def is_empty(self, group_id: str) -> bool:
        g = self.groups.get(group_id)
        return g is None or not g.members

    def delete(self, group_id: str) -> None:
        g = self.groups.pop(group_id, None)
        if g is not None:
            for mid in list(g.members):
                self._cancel_timers(group_id, mid)
            log.info("deleted consumer group %s", group_id)

    def subscribed_topics(self, group_id: str) -> set[str]:
        g = self.groups.get(group_id)
        return set(g.subscription_metadata) if g is not None else set()

    def validate_offset_commit(self, group_id: str, member_id: str, member_epoch: int) -> int:
        """OffsetCommit into a consumer group: members commit with their current epoch; an
        empty group accepts commits without one (admin tools, -1)."""
        g = self.groups[group_id]
        if member_epoch < 0 and not g.members:
            return errors.NONE
        m = g.members.get(member_id)
        if m is None:
            return errors.UNKNOWN_MEMBER_ID
        if member_epoch != m.member_epoch:
            return errors.STALE_MEMBER_EPOCH
        return errors.NONE

    def validate_offset_fetch(self, group_id: str, member_id: str | None, member_epoch: int) -> int:
        g = self.groups.get(group_id)
        if g is None or (member_id is None and member_epoch < 0):
            return errors.NONE
        m = g.members.get(member_id or "")
        if m is None:
            return errors.UNKNOWN_MEMBER_ID
        if member_epoch != m.member_epoch:
            return errors.STALE_MEMBER_EPOCH
        return errors.NONE

    # ------------------------------------------------------------------ describe / list
    def describe(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def list_groups(self, states: set[str] | None = None) -> list[ConsumerGroup]:
        out = list(self.groups.values())
        if states:
            lowered = {s.lower() for s in states}
            out = [g for g in out if g.state.value.lower() in lowered]
        return out
