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

Members may speak the classic protocol (``ConsumerMember.classic``) after KIP-848's online
upgrade of a classic group, or when a classic consumer joins a consumer group: they are served
by odradek.coordinator.group.consumer_classic, and the group becomes a classic group again when
the last consumer-protocol member leaves (odradek.coordinator.group.migration).

One concept in one file (over 600 lines): the KIP-848 consumer group state machine and its reconciliation.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
import uuid
from collections.abc import Callable
from typing import Protocol

from odradek.coordinator.group.assignors import ASSIGNORS, AssignorError, MemberSpec
from odradek.coordinator.group.consumer_model import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupConfig,
    ConsumerMember,
    GroupError,
    HeartbeatRequest,
    HeartbeatResult,
    MemberState,
    TopicView,
    is_subset,
    new_member_id,
    reconcile,
)
from odradek.coordinator.group.coordinator import Cancellable, JoinResult, Scheduler, SyncResult
from odradek.protocol import errors
from odradek.protocol.errors import INVALID_REGULAR_EXPRESSION
from odradek.re2_syntax import Re2SyntaxError, compile_re2

log = logging.getLogger("odradek.coordinator")

@functools.lru_cache(maxsize=1024)
def topic_regex(pattern: str) -> re.Pattern[str]:
    """A subscription regex as Kafka reads it (RE2/J syntax: odradek.re2_syntax), compiled once;
    :class:`Re2SyntaxError` when RE2 refuses it (lookaround, backreferences, ...). Match whole names."""
    return compile_re2(pattern)


class Migration(Protocol):
    """KIP-848's online migration between a classic group and a consumer group
    (``group.consumer.migration.policy``; odradek.coordinator.group.migration)."""

    def upgrade(self, group_id: str) -> ConsumerGroup | None:
        """The consumer group a classic group with members becomes, None if it may not."""

    def downgrade(self, group: ConsumerGroup, leaving_member_id: str) -> bool:
        """Whether ``group``, losing ``leaving_member_id``, became a classic group."""


class ConsumerGroupCoordinator:
    """Consumer-protocol groups; ``classic_group_active(group_id)`` tells whether a classic group
    with members holds the id, ``on_empty(group_id, now_ms)`` is called when a group empties.
    ``migration``, when set, turns a classic group into a consumer group (and back) as members
    of the other protocol join (and leave); members speaking the classic protocol are served by
    :attr:`classic` (odradek.coordinator.group.consumer_classic)."""

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
        # classic-protocol members: the join (rebalance) and sync timeouts, by (group, member, kind)
        self._classic_timers: dict[tuple[str, str, str], Cancellable] = {}
        self.migration: Migration | None = None
        # a group's own (session timeout, heartbeat interval) when it has config overrides (KIP-848's
        # GROUP config resource), else None for the configured ones
        self.group_settings: Callable[[str], tuple[int, int] | None] = lambda _g: None
        from odradek.coordinator.group.consumer_classic import ClassicProtocolMembers

        self.classic = ClassicProtocolMembers(self)

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
                topic_regex(req.subscribed_topic_regex)
            except Re2SyntaxError as e:
                raise GroupError(INVALID_REGULAR_EXPRESSION, f"SubscribedTopicRegex {req.subscribed_topic_regex!r} is not a valid regular expression: {e}.") from e

    def _group_for_heartbeat(self, group_id: str, create: bool) -> ConsumerGroup:
        g = self.groups.get(group_id)
        if g is not None:
            return g
        if self.classic_group_active(group_id):
            upgraded = self.migration.upgrade(group_id) if create and self.migration is not None else None
            if upgraded is None:
                raise GroupError(errors.GROUP_ID_NOT_FOUND, f"Group {group_id} is not a consumer group.")
            self.groups[group_id] = upgraded
            for m in upgraded.members.values():
                self._schedule_session_timeout(group_id, m.member_id)
            return upgraded
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
        m.may_describe = req.may_describe  # the principal of its latest heartbeat
        m.classic = None  # a member heartbeating this way speaks the consumer protocol
        self.update_member(g, old, m, is_new)
        # 2 and 3: the target assignment, and the member reconciled towards it
        new = self.reconcile_member(g, m, req.topic_partitions)
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
            heartbeat_interval_ms=self.heartbeat_interval_ms(g.group_id),
            assignment=dict(new.assigned) if full or new.assigned != old.assigned else None,
        )

    def update_member(self, g: ConsumerGroup, old: ConsumerMember, m: ConsumerMember, is_new: bool) -> None:
        """Step 1 of a heartbeat or a classic JoinGroup: store the updated member ``m``; a new
        member, a changed subscription or assignor, or changed subscription metadata bumps the
        group epoch."""
        bump = is_new or (
            m.subscribed_topic_names != old.subscribed_topic_names
            or m.subscribed_topic_regex != old.subscribed_topic_regex
            or m.server_assignor != old.server_assignor
        )
        if is_new:
            log.info("member %s joins consumer group %s", m.member_id, g.group_id)
        g.put_member(m, old if not is_new else None)
        metadata = self.subscription_metadata(g)
        if metadata != g.subscription_metadata:
            g.subscription_metadata = metadata
            bump = True
        if bump:
            g.group_epoch += 1
            log.info("consumer group %s: bumped group epoch to %d", g.group_id, g.group_epoch)

    def reconcile_member(
        self, g: ConsumerGroup, m: ConsumerMember, owned: list[tuple[uuid.UUID, list[int]]] | None
    ) -> ConsumerMember:
        """Steps 2 and 3: a new target assignment when the group epoch moved past it, then ``m``
        reconciled towards its target given the partitions it reports ``owned``; returns the
        member as stored."""
        if g.group_epoch > g.assignment_epoch:
            self._compute_target(g)
        if m.is_reconciled_to(g.assignment_epoch):
            return m
        mid = m.member_id
        new = reconcile(
            m, g.assignment_epoch, g.target.get(mid, {}), owned,
            lambda t, p: g.partition_owner.get((t, p), mid) == mid,
        )
        if new is not m:
            g.put_member(new, m)
            # a classic member is held to its rebalance timeout by the join and sync timeouts
            if new.state == MemberState.UNREVOKED_PARTITIONS and new.classic is None:
                self._schedule_rebalance_timeout(g, new)
            else:
                self._cancel_rebalance_timeout(g.group_id, mid)
        return new

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
        """The topics ``m`` subscribes to: its topic names, and what its regex matches of the topics
        its principal may DESCRIBE (Kafka resolves a regex to the topics the heartbeat's principal
        may DESCRIBE, GroupMetadataManager's filterTopicDescribeAuthorizedTopics; a topic name the
        principal may not DESCRIBE is refused with the heartbeat, in the handler)."""
        names = set(m.subscribed_topic_names)
        if m.subscribed_topic_regex:
            try:
                rx = topic_regex(m.subscribed_topic_regex)
            except Re2SyntaxError:
                return names
            may_describe = m.may_describe
            names |= {t for t in self.topics.names()
                      if rx.fullmatch(t) and (may_describe is None or may_describe(t))}
        return names

    def subscription_metadata(self, g: ConsumerGroup) -> dict[str, tuple[uuid.UUID, int]]:
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
            metadata = self.subscription_metadata(g)
            if metadata != g.subscription_metadata:
                g.subscription_metadata = metadata
                g.group_epoch += 1
                log.info("consumer group %s: metadata of %s changed, group epoch %d", g.group_id, topic, g.group_epoch)

    # ------------------------------------------------------------------ removal and timers
    def _remove_member(self, g: ConsumerGroup, member_id: str, reason: str, may_downgrade: bool = True) -> None:
        """Fence or remove a member (Kafka's consumerGroupFenceMember): when every member left
        speaks the classic protocol the group may become a classic group instead (the online
        downgrade; a classic LeaveGroup does not, as in Kafka)."""
        self._cancel_timers(g.group_id, member_id)
        if member_id not in g.members:
            return
        if may_downgrade and self.migration is not None and self.migration.downgrade(g, member_id):
            log.info("member %s left consumer group %s (%s); the group is a classic group now", member_id, g.group_id, reason)
            self._forget(g.group_id)
            return
        g.drop_member(member_id)
        g.subscription_metadata = self.subscription_metadata(g)
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
        for kind in ("join", "sync"):
            self.cancel_classic_timer(group_id, member_id, kind)

    def _forget(self, group_id: str) -> None:
        """Drop a group and every timer of its members (it was deleted, unloaded or downgraded)."""
        self.groups.pop(group_id, None)
        for timers in (self._session_timers, self._rebalance_timers):
            for key in [k for k in timers if k[0] == group_id]:
                timers.pop(key).cancel()
        for ckey in [k for k in self._classic_timers if k[0] == group_id]:
            self._classic_timers.pop(ckey).cancel()

    def schedule_classic_timer(self, group_id: str, member_id: str, kind: str, timeout_ms: int, if_absent: bool = False) -> None:
        """The join (rebalance) or sync timeout of a classic member: it is fenced when it fires."""
        key = (group_id, member_id, kind)
        if if_absent and key in self._classic_timers:
            return
        self.cancel_classic_timer(group_id, member_id, kind)

        def expire() -> None:
            self._classic_timers.pop(key, None)
            g = self.groups.get(group_id)
            if g is not None and member_id in g.members:
                what = "join within the rebalance timeout" if kind == "join" else "sync within the rebalance timeout"
                self._remove_member(g, member_id, f"the classic member failed to {what}")

        self._classic_timers[key] = self.scheduler.call_later(max(timeout_ms, 0) / 1000.0, expire)

    def cancel_classic_timer(self, group_id: str, member_id: str, kind: str) -> None:
        t = self._classic_timers.pop((group_id, member_id, kind), None)
        if t is not None:
            t.cancel()

    def _schedule_session_timeout(self, group_id: str, member_id: str) -> None:
        """A member silent for its session timeout is fenced: group.consumer.session.timeout.ms,
        or for a classic member the session timeout of its JoinGroup."""
        key = (group_id, member_id)
        old = self._session_timers.pop(key, None)
        if old is not None:
            old.cancel()

        def expire() -> None:
            self._session_timers.pop(key, None)
            g = self.groups.get(group_id)
            if g is not None and member_id in g.members:
                self._remove_member(g, member_id, "session timeout expired")

        g = self.groups.get(group_id)
        m = g.members.get(member_id) if g is not None else None
        timeout = (m.classic.session_timeout_ms if m is not None and m.classic is not None
                   else self.session_timeout_ms(group_id))
        self._session_timers[key] = self.scheduler.call_later(timeout / 1000.0, expire)

    def session_timeout_ms(self, group_id: str) -> int:
        own = self.group_settings(group_id)
        return own[0] if own is not None else self.config.session_timeout_ms

    def heartbeat_interval_ms(self, group_id: str) -> int:
        own = self.group_settings(group_id)
        return own[1] if own is not None else self.config.heartbeat_interval_ms

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
            self._forget(gid)

    def unload(self) -> None:
        for timers in (self._session_timers, self._rebalance_timers, self._classic_timers):
            for t in list(timers.values()):
                t.cancel()
            timers.clear()

    # ------------------------------------------------------------------ hooks for the classic coordinator
    def owns(self, group_id: str) -> bool:
        return group_id in self.groups

    def is_empty(self, group_id: str) -> bool:
        g = self.groups.get(group_id)
        return g is None or not g.members

    def delete(self, group_id: str) -> None:
        if group_id in self.groups:
            self._forget(group_id)
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
            # a classic member commits with its generation, which is its member epoch
            return errors.ILLEGAL_GENERATION if m.classic is not None else errors.STALE_MEMBER_EPOCH
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

    # ------------------------------------------------------------------ classic-protocol members
    def classic_join(
        self, group_id: str, member_id: str, instance_id: str | None, client_id: str, client_host: str,
        session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]], require_known_member_id: bool,
    ) -> JoinResult:
        from odradek.coordinator.group.consumer_classic import ClassicJoin

        return self.classic.join(ClassicJoin(
            group_id, member_id, instance_id, client_id, client_host, session_timeout_ms, rebalance_timeout_ms,
            protocol_type, tuple(protocols), require_known_member_id,
        ))

    def classic_sync(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None,
    ) -> SyncResult:
        return self.classic.sync(group_id, generation_id, member_id, instance_id, protocol_type, protocol_name)

    def classic_heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> int:
        return self.classic.heartbeat(group_id, generation_id, member_id, instance_id)

    def classic_leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[tuple[str, str | None, int]]:
        return self.classic.leave(group_id, members)

    # ------------------------------------------------------------------ describe / list
    def describe(self, group_id: str) -> ConsumerGroup | None:
        return self.groups.get(group_id)

    def list_groups(self, states: set[str] | None = None) -> list[ConsumerGroup]:
        out = list(self.groups.values())
        if states:
            lowered = {s.lower() for s in states}
            out = [g for g in out if g.state.value.lower() in lowered]
        return out
