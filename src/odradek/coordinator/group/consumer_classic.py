"""Members of a consumer group (KIP-848) that speak the classic protocol: JoinGroup, SyncGroup,
Heartbeat and LeaveGroup served from the consumer group's target assignment (Kafka's
GroupMetadataManager.classicGroup*ToConsumerGroup, the online migration of KIP-848). No I/O.

A classic member is a :class:`ConsumerMember` with :attr:`ConsumerMember.classic` set. Its
generation is its member epoch. The exchange, as Kafka runs it::

    Heartbeat   -> REBALANCE_IN_PROGRESS while the group epoch is ahead of the member epoch,
                   while it has partitions to revoke, or while partitions it waits for are free
                   (and a join timeout of its rebalance timeout starts, if none runs)
    JoinGroup   -> the member is updated from its subscription (topics, rack, the partitions it
                   still owns) and reconciled towards its target at once; the answer names no
                   leader and no members (nobody computes an assignment), the generation is the
                   new member epoch, the protocol its first; a sync timeout starts
    SyncGroup   -> its assigned partitions as a ConsumerProtocolAssignment, in the version of
                   the subscription it sent
    LeaveGroup  -> removed, the group epoch bumped (no downgrade, as in Kafka)

A cooperative member reports what it still owns and is given ``keep`` only until it has let the
revoked partitions go (UNREVOKED_PARTITIONS); an eager one revokes everything before it joins.
"""

from __future__ import annotations

import dataclasses
import logging
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.coordinator.group.consumer_model import (
    ClassicMemberInfo,
    ConsumerGroup,
    ConsumerMember,
    GroupError,
    MemberState,
    new_member_id,
)
from odradek.coordinator.group.consumer_protocol import (
    decode_subscription,
    encode_assignment,
    metadata_version,
)
from odradek.coordinator.group.coordinator import JoinResult, SyncResult
from odradek.protocol import errors

if TYPE_CHECKING:
    from odradek.coordinator.group.consumer_group import ConsumerGroupCoordinator

log = logging.getLogger("odradek.coordinator")

PROTOCOL_TYPE = "consumer"


@dataclass(frozen=True)
class ClassicJoin:
    """The fields of a JoinGroup request the consumer group reads."""

    group_id: str
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    require_known_member_id: bool


class ClassicProtocolMembers:
    """The classic-protocol requests of one :class:`ConsumerGroupCoordinator`'s groups."""

    def __init__(self, groups: ConsumerGroupCoordinator) -> None:
        self.groups = groups

    def _group(self, group_id: str) -> ConsumerGroup:
        g = self.groups.groups.get(group_id)
        if g is None:
            raise GroupError(errors.UNKNOWN_MEMBER_ID, f"Group {group_id} not found.")
        return g

    @staticmethod
    def _member(g: ConsumerGroup, member_id: str, instance_id: str | None) -> ConsumerMember:
        """Kafka's validateConsumerGroupMember, then throwIfMemberDoesNotUseClassicProtocol."""
        if instance_id is None:
            m = g.members.get(member_id)
            if m is None:
                raise GroupError(errors.UNKNOWN_MEMBER_ID, f"Member {member_id} is not a member of group {g.group_id}.")
        else:
            sid = g.static_members.get(instance_id)
            m = g.members.get(sid) if sid is not None else None
            if m is None:
                raise GroupError(
                    errors.UNKNOWN_MEMBER_ID, f"Member with instance id {instance_id} is not a member of group {g.group_id}."
                )
            if m.member_id != member_id:
                raise GroupError(errors.FENCED_INSTANCE_ID, f"Static member {member_id} with instance id {instance_id} was fenced.")
        if m.classic is None:
            raise GroupError(errors.UNKNOWN_MEMBER_ID, f"Member {m.member_id} does not use the classic protocol.")
        return m

    # ------------------------------------------------------------------ JoinGroup
    def join(self, req: ClassicJoin) -> JoinResult:
        try:
            return self._join(req)
        except GroupError as e:
            return JoinResult(e.code, member_id=req.member_id)

    def _join(self, req: ClassicJoin) -> JoinResult:
        cg = self.groups
        g = self._group(req.group_id)
        unknown = not req.member_id
        mid = new_member_id() if unknown else req.member_id
        if mid not in g.members and len(g.members) >= cg.config.max_size:
            raise GroupError(
                errors.GROUP_MAX_SIZE_REACHED,
                f"The consumer group has reached its maximum capacity of {cg.config.max_size} members.",
            )
        names = [name for name, _ in req.protocols]
        if req.protocol_type != PROTOCOL_TYPE or not names or not g.supports_classic_protocols(names):
            raise GroupError(errors.INCONSISTENT_GROUP_PROTOCOL)
        if unknown and req.require_known_member_id and req.instance_id is None:
            log.info("dynamic member joining consumer group %s through JoinGroup gets member id %s", g.group_id, mid)
            return JoinResult(errors.MEMBER_ID_REQUIRED, member_id=mid)
        try:
            sub = decode_subscription(req.protocols[0][1])
        except ValueError as e:
            log.info("JoinGroup to consumer group %s with a malformed subscription: %s", g.group_id, e)
            raise GroupError(errors.INCONSISTENT_GROUP_PROTOCOL) from e

        old, is_new = self._member_for_join(g, mid, unknown, req.instance_id)
        mid = old.member_id
        m = dataclasses.replace(
            old,
            instance_id=req.instance_id if req.instance_id is not None else old.instance_id,
            rack_id=sub.rack_id if sub.rack_id is not None else old.rack_id,
            rebalance_timeout_ms=req.rebalance_timeout_ms,
            server_assignor=None,
            subscribed_topic_names=tuple(sorted(set(sub.topics))),
            subscribed_topic_regex=None,
            client_id=req.client_id,
            client_host=req.client_host,
            classic=ClassicMemberInfo(req.session_timeout_ms, tuple(req.protocols)),
        )
        cg.update_member(g, old, m, is_new)
        owned: list[tuple[uuid.UUID, list[int]]] = []
        for name, ps in sub.owned_partitions.items():
            meta = cg.topics.lookup(name)
            if meta is not None:
                owned.append((meta[0], ps))
        new = cg.reconcile_member(g, m, owned)
        cg.cancel_classic_timer(g.group_id, mid, "join")
        cg._schedule_session_timeout(g.group_id, mid)
        cg.schedule_classic_timer(g.group_id, mid, "sync", req.rebalance_timeout_ms)
        return JoinResult(
            errors.NONE,
            generation_id=new.member_epoch,
            protocol_type=PROTOCOL_TYPE,
            protocol_name=req.protocols[0][0],
            leader="",
            member_id=mid,
        )

    def _member_for_join(
        self, g: ConsumerGroup, mid: str, unknown: bool, instance_id: str | None
    ) -> tuple[ConsumerMember, bool]:
        """(member, is new): a dynamic member is created on its first JoinGroup; a static member
        joining with no member id takes over its instance's member, assignment and target (the
        classic protocol's static rejoin)."""
        if instance_id is None:
            found = g.members.get(mid)
            return (found, False) if found is not None else (ConsumerMember(mid), True)
        sid = g.static_members.get(instance_id)
        existing = g.members.get(sid) if sid is not None else None
        if existing is None:
            found = g.members.get(mid)
            return (found, False) if found is not None else (ConsumerMember(mid, instance_id=instance_id), True)
        if existing.member_id == mid:
            return existing, False
        if not unknown:
            raise GroupError(
                errors.FENCED_INSTANCE_ID,
                f"Static member {mid} with instance id {instance_id} was fenced by member {existing.member_id}.",
            )
        cg = self.groups
        cg._cancel_timers(g.group_id, existing.member_id)
        target = g.target.get(existing.member_id)
        g.drop_member(existing.member_id)
        replacement = dataclasses.replace(existing, member_id=mid)
        g.put_member(replacement, None)
        if target is not None:
            g.target[mid] = target
        log.info("static member with instance id %s rejoined consumer group %s as %s (replacing %s)",
                 instance_id, g.group_id, mid, existing.member_id)
        return replacement, False

    # ------------------------------------------------------------------ SyncGroup
    def sync(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None,
    ) -> SyncResult:
        cg = self.groups
        try:
            g = self._group(group_id)
            m = self._member(g, member_id, instance_id)
            assert m.classic is not None
            if generation_id != m.member_epoch:
                raise GroupError(errors.ILLEGAL_GENERATION)
            first = m.classic.protocols[0][0]
            if (protocol_type is not None and protocol_type != PROTOCOL_TYPE) or (
                protocol_name is not None and protocol_name != first
            ):
                raise GroupError(errors.INCONSISTENT_GROUP_PROTOCOL)
            if g.group_epoch > m.member_epoch and m.state != MemberState.UNREVOKED_PARTITIONS:
                cg.schedule_classic_timer(group_id, m.member_id, "join", m.rebalance_timeout_ms, if_absent=True)
                raise GroupError(errors.REBALANCE_IN_PROGRESS)
        except GroupError as e:
            return SyncResult(e.code)
        cg.cancel_classic_timer(group_id, m.member_id, "sync")
        cg._schedule_session_timeout(group_id, m.member_id)
        by_name: dict[str, list[int]] = {}
        for t, ps in m.assigned.items():
            name = cg.topics.name_of(t)
            if name is not None:
                by_name[name] = sorted(ps)
        try:
            version = metadata_version(m.classic.protocols[0][1])
        except ValueError:
            version = 0
        return SyncResult(
            errors.NONE,
            protocol_type if protocol_type is not None else PROTOCOL_TYPE,
            protocol_name if protocol_name is not None else first,
            encode_assignment(by_name, version),
        )

    # ------------------------------------------------------------------ Heartbeat / LeaveGroup
    def heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> int:
        cg = self.groups
        try:
            g = self._group(group_id)
            m = self._member(g, member_id, instance_id)
        except GroupError as e:
            return e.code
        if generation_id != m.member_epoch:
            return errors.ILLEGAL_GENERATION
        cg._schedule_session_timeout(group_id, m.member_id)
        if (
            m.member_epoch < g.group_epoch
            or m.state == MemberState.UNREVOKED_PARTITIONS
            or (m.state == MemberState.UNRELEASED_PARTITIONS and not self._waiting_on_unreleased(g, m))
        ):
            cg.schedule_classic_timer(group_id, m.member_id, "join", m.rebalance_timeout_ms, if_absent=True)
            return errors.REBALANCE_IN_PROGRESS
        return errors.NONE

    @staticmethod
    def _waiting_on_unreleased(g: ConsumerGroup, m: ConsumerMember) -> bool:
        """Whether a partition of ``m``'s target it does not have yet is still owned by another."""
        for t, ps in g.target.get(m.member_id, {}).items():
            mine = m.assigned.get(t, frozenset())
            for p in ps:
                if p not in mine and g.partition_owner.get((t, p), m.member_id) != m.member_id:
                    return True
        return False

    def leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[tuple[str, str | None, int]]:
        """Kafka's classicGroupLeaveToConsumerGroup: per (member id, instance id), the error."""
        cg = self.groups
        g = cg.groups.get(group_id)
        out: list[tuple[str, str | None, int]] = []
        for mid, iid in members:
            if g is None:
                out.append((mid, iid, errors.UNKNOWN_MEMBER_ID))
                continue
            try:
                if iid is None:
                    m = self._member(g, mid, None)
                else:
                    sid = g.static_members.get(iid)
                    if sid is None:
                        raise GroupError(errors.UNKNOWN_MEMBER_ID)
                    m = self._member(g, mid or sid, iid)
            except GroupError as e:
                out.append((mid, iid, e.code))
                continue
            log.info("member %s has left consumer group %s through LeaveGroup", m.member_id, group_id)
            cg._remove_member(g, m.member_id, "the classic member is leaving the group", may_downgrade=False)
            out.append((m.member_id, iid, errors.NONE))
        return out
