"""Group coordinator for the classic protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup)
and committed offsets, written against two injected edges and no I/O:

- ``write(partition, records)`` appends ``(key, value)`` records to a ``__consumer_offsets``
  partition and raises :class:`WriteError` if it could not;
- ``scheduler`` runs callbacks later (heartbeat expiry, delayed joins).

Delayed answers (JoinGroup waits for the other members, SyncGroup for the leader) are
given through ``respond`` callbacks. Replaying the records of ``__consumer_offsets``
through :meth:`GroupCoordinator.replay` rebuilds every group after a restart.

One concept in one file (over 600 lines): the classic group coordinator's state machine and committed offsets.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Protocol

from odradek.coordinator import records as rec
from odradek.coordinator.group.classic import ClassicGroup, GroupState, Member, OffsetAndMetadata
from odradek.protocol import errors

log = logging.getLogger("odradek.coordinator")

E, PR, CR, ST, DEAD = (
    GroupState.EMPTY,
    GroupState.PREPARING_REBALANCE,
    GroupState.COMPLETING_REBALANCE,
    GroupState.STABLE,
    GroupState.DEAD,
)


# JoinGroup answers given per loop turn when a rebalance completes (see _answer_joined), and
# SyncGroup answers once the leader's assignment is stored (see sync_group): each answer is a
# response to encode and write, 100 of them some 10-20 ms of the event loop
JOIN_ANSWER_SLICE = 100
SYNC_ANSWER_SLICE = 100


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class Scheduler(Protocol):
    def call_later(self, delay_s: float, fn: Callable[[], None]) -> Cancellable: ...
    def now_ms(self) -> int: ...


class WriteError(Exception):
    def __init__(self, error_code: int) -> None:
        super().__init__(error_code)
        self.error_code = error_code


Records = list[tuple[bytes, bytes | None]]
Writer = Callable[[int, Records], None]


class ModernGroups(Protocol):
    """Consumer-protocol (KIP-848) groups, whose committed offsets live here too: the offsets of
    such a group are held by an empty :class:`ClassicGroup` that listing, describing and
    expiry leave to the owner of the group (odradek.coordinator.group.consumer_group)."""

    def owns(self, group_id: str) -> bool: ...
    def is_empty(self, group_id: str) -> bool: ...
    def delete(self, group_id: str) -> None: ...
    def subscribed_topics(self, group_id: str) -> set[str]: ...
    def validate_offset_commit(self, group_id: str, member_id: str, member_epoch: int) -> int: ...
    # members speaking the classic protocol inside a consumer group (KIP-848 online migration)
    def classic_join(
        self, group_id: str, member_id: str, instance_id: str | None, client_id: str, client_host: str,
        session_timeout_ms: int, rebalance_timeout_ms: int, protocol_type: str,
        protocols: list[tuple[str, bytes]], require_known_member_id: bool,
    ) -> JoinResult: ...
    def classic_sync(
        self, group_id: str, generation_id: int, member_id: str, instance_id: str | None,
        protocol_type: str | None, protocol_name: str | None,
    ) -> SyncResult: ...
    def classic_heartbeat(self, group_id: str, generation_id: int, member_id: str, instance_id: str | None) -> int: ...
    def classic_leave(self, group_id: str, members: list[tuple[str, str | None]]) -> list[tuple[str, str | None, int]]: ...


@dataclass
class GroupConfig:
    num_partitions: int = 50
    min_session_timeout_ms: int = 6000
    max_session_timeout_ms: int = 1800000
    initial_rebalance_delay_ms: int = 3000
    max_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    offsets_retention_ms: int = 7 * 24 * 3600 * 1000


@dataclass
class JoinResult:
    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


@dataclass
class SyncResult:
    error_code: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


class GroupCoordinator:
    def __init__(
        self,
        config: GroupConfig,
        scheduler: Scheduler,
        write: Writer,
        partition_exists: Callable[[str, int], bool],
    ) -> None:
        self.config = config
        self.scheduler = scheduler
        self._write = write
        self.partition_exists = partition_exists
        self.groups: dict[str, ClassicGroup] = {}
        self._join_timers: dict[str, Cancellable] = {}
        self._hb_timers: dict[tuple[str, str], Cancellable] = {}
        self._initial_delay: set[str] = set()  # groups inside group.initial.rebalance.delay.ms
        # static members that rejoined a Stable group, answered once the group record is written
        self._static_rejoins: dict[str, list[tuple[str, str, str, Callable[[JoinResult], None]]]] = {}
        self.modern: ModernGroups | None = None
        self._hb_expired = self._on_heartbeat_expired  # one bound method for every heartbeat timer

    def _modern_owns(self, group_id: str) -> bool:
        return self.modern is not None and self.modern.owns(group_id)

    # ------------------------------------------------------------------ helpers
    def partition_for(self, group_id: str) -> int:
        return rec.partition_for(group_id, self.config.num_partitions)

    def write(self, group_id: str, records: Records) -> None:
        self._write(self.partition_for(group_id), records)

    def _group_record(self, g: ClassicGroup) -> tuple[bytes, bytes | None]:
        value = rec.GroupValue(
            protocol_type=g.protocol_type or "",
            generation=g.generation_id,
            protocol=g.protocol_name,
            leader=g.leader_id,
            current_state_timestamp=g.state_timestamp,
            members=[
                rec.MemberValue(
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.client_host,
                    m.rebalance_timeout_ms,
                    m.session_timeout_ms,
                    m.metadata(g.protocol_name) if g.protocol_name else b"",
                    m.assignment,
                )
                for m in g.members.values()
            ],
        )
        return rec.encode_group_key(g.group_id), rec.encode_group_value(value)

    def _store_group(self, g: ClassicGroup) -> int:
        try:
            self.write(g.group_id, [self._group_record(g)])
        except WriteError as e:
            return e.error_code
        return errors.NONE

    def _new_member_id(self, prefix: str | None) -> str:
        return f"{prefix or ''}-{uuid.uuid4()}"

    # ------------------------------------------------------------------ timers
    def _schedule_heartbeat(self, g: ClassicGroup, m: Member) -> None:
        key = (g.group_id, m.member_id)
        old = self._hb_timers.pop(key, None)
        if old is not None:
            old.cancel()
        timeout = m.session_timeout_ms
        # a partial of one bound method, not a closure per timer: fewer objects per member for the
        # garbage collector to walk in a group of 10,000
        self._hb_timers[key] = self.scheduler.call_later(
            timeout / 1000.0, partial(self._hb_expired, g.group_id, m.member_id)
        )

    def _cancel_heartbeat(self, group_id: str, member_id: str) -> None:
        t = self._hb_timers.pop((group_id, member_id), None)
        if t is not None:
            t.cancel()

    def _on_heartbeat_expired(self, group_id: str, member_id: str) -> None:
        self._hb_timers.pop((group_id, member_id), None)
        g = self.groups.get(group_id)
        if g is None:
            return
        if member_id in g.pending_members:
            g.pending_members.discard(member_id)
            log.info("pending member %s in group %s expired", member_id, group_id)
            if g.is_in(PR):
                self._maybe_complete_join(g)
            return
        m = g.members.get(member_id)
        if m is None:
            return
        if m.awaiting_join is not None or m.awaiting_sync is not None:
            self._schedule_heartbeat(g, m)  # kept alive while it waits on us
            return
        log.info("member %s in group %s has failed, removing it from the group", member_id, group_id)
        self._remove_member_and_update(g, m, "session timeout expired")

    def _cancel_join_timer(self, group_id: str) -> None:
        t = self._join_timers.pop(group_id, None)
        if t is not None:
            t.cancel()

    # ------------------------------------------------------------------ rebalancing
    def _prepare_rebalance(self, g: ClassicGroup, reason: str) -> None:
        if g.is_in(CR):
            # members waiting for their assignment must rejoin
            for m in g.members.values():
                m.assignment = b""
                if m.awaiting_sync is not None:
                    cb, m.awaiting_sync = m.awaiting_sync, None
                    cb(SyncResult(errors.REBALANCE_IN_PROGRESS))
        initial = g.is_in(E)
        g.transition(PR, self.scheduler.now_ms())
        log.info(
            "preparing to rebalance group %s in state PreparingRebalance with old generation %d (reason: %s)",
            g.group_id, g.generation_id, reason,
        )
        self._cancel_join_timer(g.group_id)
        if initial:
            # an empty group waits group.initial.rebalance.delay.ms (at least one loop turn)
            # so members starting together land in one generation
            self._initial_delay.add(g.group_id)
            delay = self.config.initial_rebalance_delay_ms
            if delay > 0:
                self._initial_delayed_join(g, delay, max(g.rebalance_timeout_ms() - delay, 0))
            else:
                self._join_timers[g.group_id] = self.scheduler.call_later(
                    0, lambda: self._complete_join(g.group_id, forced=True)
                )
        else:
            timeout = g.rebalance_timeout_ms()
            self._join_timers[g.group_id] = self.scheduler.call_later(
                timeout / 1000.0, lambda: self._complete_join(g.group_id, forced=True)
            )
            self._maybe_complete_join(g)

    def _initial_delayed_join(self, g: ClassicGroup, delay: int, remaining: int) -> None:
        g.new_member_added = False

        def fire() -> None:
            self._join_timers.pop(g.group_id, None)
            if g.new_member_added and remaining > 0:
                step = min(delay, remaining)
                self._initial_delayed_join(g, step, remaining - step)
            else:
                self._complete_join(g.group_id, forced=True)

        self._join_timers[g.group_id] = self.scheduler.call_later(delay / 1000.0, fire)

    def _maybe_complete_join(self, g: ClassicGroup) -> None:
        if not g.is_in(PR):
            return
        if g.all_joined() and g.group_id not in self._initial_delay:
            self._complete_join(g.group_id, forced=False)

    def _complete_join(self, group_id: str, forced: bool) -> None:
        g = self.groups.get(group_id)
        if g is None or not g.is_in(PR):
            return
        self._cancel_join_timer(group_id)
        self._initial_delay.discard(group_id)
        # dynamic members that did not rejoin in time are dropped; static ones stay
        for m in [m for m in g.members.values() if m.awaiting_join is None and m.group_instance_id is None]:
            log.info("member %s in group %s did not rejoin in time; removing it", m.member_id, group_id)
            g.remove(m.member_id)
            self._cancel_heartbeat(group_id, m.member_id)
        g.generation_id += 1
        now = self.scheduler.now_ms()
        if g.is_empty:
            g.protocol_name = None
            g.transition(E, now)
            code = self._store_group(g)
            if code:
                log.warning("failed to write empty group %s metadata: error %d", group_id, code)
            log.info("group %s with generation %d is now empty", group_id, g.generation_id)
            return
        g.protocol_name = g.select_protocol()
        g.transition(CR, now)
        log.info(
            "stabilized group %s generation %d with %d members (protocol %s)",
            group_id, g.generation_id, len(g.members), g.protocol_name,
        )
        g.new_member_added = False
        # the leader first (it computes the assignment); the rest in slices of JOIN_ANSWER_SLICE,
        # one loop turn each, so that answering 10,000 members does not hold every other client
        leader = g.members.get(g.leader_id or "")
        waiting = [m for m in g.members.values() if m.awaiting_join is not None and m is not leader]
        if leader is not None and leader.awaiting_join is not None:
            waiting.insert(0, leader)
        self._answer_joined(g, g.generation_id, waiting, 0)

    def _answer_joined(self, g: ClassicGroup, generation: int, waiting: list[Member], start: int) -> None:
        """Answer the JoinGroups of ``waiting[start:]`` for ``generation``, JOIN_ANSWER_SLICE of
        them now and the rest on later loop turns. A member the group has moved on from (removed,
        fenced, or rejoining for a newer rebalance) is skipped: its JoinGroup is answered by that."""
        if not g.is_in(CR, ST) or g.generation_id != generation or self.groups.get(g.group_id) is not g:
            return
        end = min(start + JOIN_ANSWER_SLICE, len(waiting))
        for m in waiting[start:end]:
            if g.members.get(m.member_id) is not m or m.awaiting_join is None:
                continue
            self._respond_join(g, m)
            m.is_new = False
            self._schedule_heartbeat(g, m)
        if end < len(waiting):
            self.scheduler.call_later(0, lambda: self._answer_joined(g, generation, waiting, end))

    def _join_result(self, g: ClassicGroup, m: Member, skip_assignment: bool = False) -> JoinResult:
        members: list[tuple[str, str | None, bytes]] = []
        if m.member_id == g.leader_id and g.protocol_name is not None:
            members = [(x.member_id, x.group_instance_id, x.metadata(g.protocol_name)) for x in g.members.values()]
        return JoinResult(
            errors.NONE,
            g.generation_id,
            g.protocol_type,
            g.protocol_name,
            g.leader_id or "",
            m.member_id,
            members,
            skip_assignment,
        )

    def _respond_join(self, g: ClassicGroup, m: Member) -> None:
        cb = g.take_join(m)
        if cb is not None:
            cb(self._join_result(g, m))

    def _fail_waiting(self, g: ClassicGroup, m: Member, code: int, member_id: str | None = None) -> None:
        """Answer ``m``'s waiting JoinGroup (with ``member_id``, default its own) and SyncGroup with ``code``."""
        cb = g.take_join(m)
        if cb is not None:
            cb(JoinResult(code, member_id=m.member_id if member_id is None else member_id))
        if m.awaiting_sync is not None:
            cb2, m.awaiting_sync = m.awaiting_sync, None
            cb2(SyncResult(code))

    def _remove_member_and_update(self, g: ClassicGroup, m: Member, reason: str) -> None:
        self._fail_waiting(g, m, errors.UNKNOWN_MEMBER_ID)
        g.remove(m.member_id)
        self._cancel_heartbeat(g.group_id, m.member_id)
        if g.is_in(ST, CR):
            self._prepare_rebalance(g, f"removing member {m.member_id}: {reason}")
        elif g.is_in(PR):
            self._maybe_complete_join(g)

    # ------------------------------------------------------------------ JoinGroup
    def join_group(
        self,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        require_known_member_id: bool,
        respond: Callable[[JoinResult], None],
    ) -> None:
        def fail(code: int) -> None:
            respond(JoinResult(code, member_id=member_id))

        if not group_id:
            return fail(errors.INVALID_GROUP_ID)
        if not self.config.min_session_timeout_ms <= session_timeout_ms <= self.config.max_session_timeout_ms:
            return fail(errors.INVALID_SESSION_TIMEOUT)
        if rebalance_timeout_ms < 0:
            rebalance_timeout_ms = session_timeout_ms
        if self.modern is not None and self.modern.owns(group_id):
            if not self.modern.is_empty(group_id):
                # a classic member of a consumer group (KIP-848's online migration)
                return respond(self.modern.classic_join(
                    group_id, member_id, group_instance_id, client_id, client_host, session_timeout_ms,
                    rebalance_timeout_ms, protocol_type, protocols, require_known_member_id,
                ))
            self.modern.delete(group_id)  # an empty consumer-protocol group becomes a classic one
        g = self.groups.get(group_id)
        if g is None:
            if member_id:
                return fail(errors.UNKNOWN_MEMBER_ID)
            g = self.groups[group_id] = ClassicGroup(group_id, state_timestamp=self.scheduler.now_ms())
        if not self._accept_joining_member(g, member_id):
            self._reject_over_capacity(g, member_id)
            return respond(JoinResult(errors.GROUP_MAX_SIZE_REACHED, member_id=""))
        if g.is_in(DEAD):
            return fail(errors.COORDINATOR_NOT_AVAILABLE)
        if not g.supports_protocols(protocol_type, protocols):
            return fail(errors.INCONSISTENT_GROUP_PROTOCOL)

        def new_member(mid: str) -> Member:
            return Member(
                mid, group_instance_id, client_id, client_host, rebalance_timeout_ms,
                session_timeout_ms, protocol_type, list(protocols),
            )

        if not member_id:
            static_id = g.static_member_id(group_instance_id)
            if static_id is not None:
                return self._static_rejoin(g, static_id, new_member, respond)
            mid = self._new_member_id(group_instance_id or client_id)
            if require_known_member_id and group_instance_id is None:
                g.pending_members.add(mid)
                self._hb_timers[(group_id, mid)] = self.scheduler.call_later(
                    session_timeout_ms / 1000.0, partial(self._hb_expired, group_id, mid)
                )
                respond(JoinResult(errors.MEMBER_ID_REQUIRED, member_id=mid))
                return None
            return self._add_member_and_rebalance(g, new_member(mid), respond)

        # a member id was given
        if member_id in g.pending_members:
            self._cancel_heartbeat(group_id, member_id)
            return self._add_member_and_rebalance(g, new_member(member_id), respond)
        static_id = g.static_member_id(group_instance_id)
        if group_instance_id is not None and static_id is not None and static_id != member_id:
            return fail(errors.FENCED_INSTANCE_ID)
        m = g.members.get(member_id)
        if m is None:
            return fail(errors.UNKNOWN_MEMBER_ID)
        if g.is_in(PR):
            self._update_member(g, m, protocols, rebalance_timeout_ms, session_timeout_ms, respond)
            self._maybe_complete_join(g)
        elif g.is_in(CR):
            if m.matches(protocols):
                respond(self._join_result(g, m))
            else:
                self._update_member(g, m, protocols, rebalance_timeout_ms, session_timeout_ms, respond)
                self._prepare_rebalance(g, f"updating metadata for member {member_id} during CompletingRebalance")
        elif g.is_in(ST):
            if member_id == g.leader_id or not m.matches(protocols):
                self._update_member(g, m, protocols, rebalance_timeout_ms, session_timeout_ms, respond)
                self._prepare_rebalance(g, f"leader or metadata change of member {member_id}")
            else:
                respond(self._join_result(g, m))
        else:
            fail(errors.UNKNOWN_MEMBER_ID)
        return None

    def _accept_joining_member(self, g: ClassicGroup, member_id: str) -> bool:
        """group.max.size as Kafka's GroupMetadataManager.acceptJoiningMember applies it: while
        preparing a rebalance the members already waiting count (so the last members to rejoin a
        group over capacity are the ones left out), otherwise the group's size."""
        m = g.members.get(member_id) if member_id else None
        if g.is_in(E, DEAD):
            return True
        if g.is_in(PR):
            return (m is not None and m.awaiting_join is not None) or g.num_awaiting_join < self.config.max_size
        return m is not None or len(g.members) < self.config.max_size

    def _reject_over_capacity(self, g: ClassicGroup, member_id: str) -> None:
        """A member refused by :meth:`_accept_joining_member` leaves the group (Kafka: group.remove)."""
        log.info("group %s is at its maximum size %d; member %r refused (GROUP_MAX_SIZE_REACHED)",
                 g.group_id, self.config.max_size, member_id)
        if not member_id:
            return
        self._cancel_heartbeat(g.group_id, member_id)
        g.pending_members.discard(member_id)
        m = g.members.get(member_id)
        if m is None:
            return
        self._fail_waiting(g, m, errors.GROUP_MAX_SIZE_REACHED, member_id="")
        g.remove(member_id)
        self._maybe_complete_join(g)

    def _update_member(
        self, g: ClassicGroup, m: Member, protocols: list[tuple[str, bytes]], rebalance_ms: int, session_ms: int,
        respond: Callable[[JoinResult], None],
    ) -> None:
        g.update_protocols(m, protocols)
        m.rebalance_timeout_ms = rebalance_ms
        m.session_timeout_ms = session_ms
        old = g.await_join(m, respond)
        if old is not None and old is not respond:
            old(JoinResult(errors.REBALANCE_IN_PROGRESS, member_id=m.member_id))

    def _add_member_and_rebalance(
        self, g: ClassicGroup, m: Member, respond: Callable[[JoinResult], None]
    ) -> None:
        m.is_new = True
        m.awaiting_join = respond
        g.add(m)
        g.new_member_added = True
        self._schedule_heartbeat(g, m)
        if g.is_in(PR):
            self._maybe_complete_join(g)
        else:
            self._prepare_rebalance(g, f"adding new member {m.member_id}")

    def _static_rejoin(
        self,
        g: ClassicGroup,
        old_id: str,
        make: Callable[[str], Member],
        respond: Callable[[JoinResult], None],
    ) -> None:
        proto = make("")
        instance = proto.group_instance_id
        assert instance is not None
        new_id = self._new_member_id(instance)
        old = g.members[old_id]
        self._cancel_heartbeat(g.group_id, old_id)
        self._fail_waiting(g, old, errors.FENCED_INSTANCE_ID)
        m = g.replace_static(instance, old_id, new_id)
        protocols_changed = not m.matches(proto.protocols)
        m.client_id, m.client_host = proto.client_id, proto.client_host
        m.session_timeout_ms, m.rebalance_timeout_ms = proto.session_timeout_ms, proto.rebalance_timeout_ms
        log.info("static member %s of group %s rejoined as %s (was %s)", instance, g.group_id, new_id, old_id)
        if g.is_in(ST) and not protocols_changed:
            # the new member id is persisted with the group record before the answer; rejoins of
            # the same loop turn share one record (see _flush_static_rejoins)
            self._schedule_heartbeat(g, m)
            pending = self._static_rejoins.setdefault(g.group_id, [])
            pending.append((instance, old_id, new_id, respond))
            if len(pending) == 1:
                self.scheduler.call_later(0, lambda: self._flush_static_rejoins(g.group_id))
            return
        g.update_protocols(m, proto.protocols)
        g.await_join(m, respond)
        self._schedule_heartbeat(g, m)
        if g.is_in(PR):
            self._maybe_complete_join(g)
        else:
            self._prepare_rebalance(g, f"static member {instance} rejoined with new metadata")

    def _flush_static_rejoins(self, group_id: str) -> None:
        """Write the group record once for every static member that rejoined a Stable group since
        the last flush, then answer them (Kafka writes it per rejoin, in the order of the requests;
        one record holding all of them is the same final state, and 10,000 restarting members cost
        one write per loop turn instead of 10,000 writes of the whole membership). If the write
        fails each one goes back to its old member id and is answered with the error, as Kafka
        reverts one."""
        pending = self._static_rejoins.pop(group_id, [])
        g = self.groups.get(group_id)
        if not pending or g is None:
            for _, _, new_id, respond in pending:
                respond(JoinResult(errors.NOT_COORDINATOR, member_id=new_id))
            return
        code = self._store_group(g)
        for instance, old_id, new_id, respond in reversed(pending) if code else pending:
            m = g.members.get(new_id)
            if m is None or g.static_members.get(instance) != new_id:
                respond(JoinResult(errors.FENCED_INSTANCE_ID, member_id=new_id))
            elif code:
                self._cancel_heartbeat(group_id, new_id)
                g.replace_static(instance, new_id, old_id)
                self._schedule_heartbeat(g, m)
                respond(JoinResult(code, member_id=""))
            else:
                # KIP-814: a returning leader must not reassign
                respond(self._join_result(g, m, skip_assignment=m.member_id == g.leader_id))

    # ------------------------------------------------------------------ SyncGroup
    def sync_group(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: dict[str, bytes],
        respond: Callable[[SyncResult], None],
    ) -> None:
        if self.modern is not None and self.modern.owns(group_id):
            return respond(self.modern.classic_sync(
                group_id, generation_id, member_id, group_instance_id, protocol_type, protocol_name
            ))
        g = self.groups.get(group_id)
        if g is None or g.is_in(DEAD):
            return respond(SyncResult(errors.UNKNOWN_MEMBER_ID))
        static_id = g.static_member_id(group_instance_id)
        if group_instance_id is not None and static_id is not None and static_id != member_id:
            return respond(SyncResult(errors.FENCED_INSTANCE_ID))
        m = g.members.get(member_id)
        if m is None:
            return respond(SyncResult(errors.UNKNOWN_MEMBER_ID))
        if generation_id != g.generation_id:
            return respond(SyncResult(errors.ILLEGAL_GENERATION))
        if (protocol_type is not None and protocol_type != g.protocol_type) or (
            protocol_name is not None and protocol_name != g.protocol_name
        ):
            return respond(SyncResult(errors.INCONSISTENT_GROUP_PROTOCOL))
        if g.is_in(E):
            return respond(SyncResult(errors.UNKNOWN_MEMBER_ID))
        if g.is_in(PR):
            return respond(SyncResult(errors.REBALANCE_IN_PROGRESS))
        if g.is_in(ST):
            self._schedule_heartbeat(g, m)
            return respond(SyncResult(errors.NONE, g.protocol_type, g.protocol_name, m.assignment))
        # CompletingRebalance
        m.awaiting_sync = respond
        self._schedule_heartbeat(g, m)
        if member_id != g.leader_id:
            return None
        for mid, member in g.members.items():
            member.assignment = assignments.get(mid, b"")
        code = self._store_group(g)
        if code:
            for member in g.members.values():
                member.assignment = b""
                if member.awaiting_sync is not None:
                    cb, member.awaiting_sync = member.awaiting_sync, None
                    cb(SyncResult(code))
            self._prepare_rebalance(g, "failed to persist the assignment")
            return None
        g.transition(ST, self.scheduler.now_ms())
        # every waiting member's answer is decided now (Kafka's propagateAssignment answers them
        # all at once, on its own request thread); they are given SYNC_ANSWER_SLICE per loop turn,
        # the leader's first, so that 10,000 answers do not hold every other client
        answers: list[tuple[Callable[[SyncResult], None], SyncResult]] = []
        for member in g.members.values():
            if member.awaiting_sync is not None:
                cb, member.awaiting_sync = member.awaiting_sync, None
                answer = (cb, SyncResult(errors.NONE, g.protocol_type, g.protocol_name, member.assignment))
                if member is m:
                    answers.insert(0, answer)
                else:
                    answers.append(answer)
        self._answer_synced(answers, 0)
        return None

    def _answer_synced(self, answers: list[tuple[Callable[[SyncResult], None], SyncResult]], start: int) -> None:
        end = min(start + SYNC_ANSWER_SLICE, len(answers))
        for cb, result in answers[start:end]:
            cb(result)
        if end < len(answers):
            self.scheduler.call_later(0, partial(self._answer_synced, answers, end))

    # ------------------------------------------------------------------ Heartbeat / LeaveGroup
    def heartbeat(self, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None) -> int:
        if self.modern is not None and self.modern.owns(group_id):
            return self.modern.classic_heartbeat(group_id, generation_id, member_id, group_instance_id)
        g = self.groups.get(group_id)
        if g is None or g.is_in(DEAD):
            return errors.UNKNOWN_MEMBER_ID
        static_id = g.static_member_id(group_instance_id)
        if group_instance_id is not None and static_id is not None and static_id != member_id:
            return errors.FENCED_INSTANCE_ID
        m = g.members.get(member_id)
        if m is None or g.is_in(E):
            return errors.UNKNOWN_MEMBER_ID
        if generation_id != g.generation_id:
            return errors.ILLEGAL_GENERATION
        self._schedule_heartbeat(g, m)
        if g.is_in(PR):
            return errors.REBALANCE_IN_PROGRESS
        return errors.NONE

    def leave_group(
        self, group_id: str, members: list[tuple[str, str | None]]
    ) -> tuple[int, list[tuple[str, str | None, int]]]:
        if self.modern is not None and self.modern.owns(group_id):
            return errors.NONE, self.modern.classic_leave(group_id, members)
        g = self.groups.get(group_id)
        if g is None or g.is_in(DEAD):
            return errors.UNKNOWN_MEMBER_ID, [(mid, iid, errors.UNKNOWN_MEMBER_ID) for mid, iid in members]
        out: list[tuple[str, str | None, int]] = []
        for mid, iid in members:
            target = mid
            if iid is not None:
                static_id = g.static_member_id(iid)
                if static_id is None:
                    out.append((mid, iid, errors.UNKNOWN_MEMBER_ID))
                    continue
                if mid and mid != static_id:
                    out.append((mid, iid, errors.FENCED_INSTANCE_ID))
                    continue
                target = static_id
            if target in g.pending_members:
                g.pending_members.discard(target)
                self._cancel_heartbeat(group_id, target)
                out.append((mid, iid, errors.NONE))
                if g.is_in(PR):
                    self._maybe_complete_join(g)
                continue
            m = g.members.get(target)
            if m is None:
                out.append((mid, iid, errors.UNKNOWN_MEMBER_ID))
                continue
            log.info("member %s has left group %s", target, group_id)
            self._remove_member_and_update(g, m, "the consumer is leaving the group")
            out.append((mid, iid, errors.NONE))
        return errors.NONE, out

    # ------------------------------------------------------------------ online migration (KIP-848)
    def classic_group(self, group_id: str) -> ClassicGroup | None:
        g = self.groups.get(group_id)
        return g if g is not None and not g.is_in(DEAD) else None

    def release_for_upgrade(self, group_id: str) -> None:
        """The group became a consumer group (odradek.coordinator.group.migration): its waiting
        JoinGroups and SyncGroups are answered REBALANCE_IN_PROGRESS, its timers stop, and it is
        kept empty, holding the group's committed offsets; the empty group record written
        replaces the one naming its members."""
        g = self.groups[group_id]
        self._cancel_join_timer(group_id)
        self._initial_delay.discard(group_id)
        for mid in list(g.pending_members):
            self._cancel_heartbeat(group_id, mid)
        g.pending_members.clear()
        for m in list(g.members.values()):
            self._cancel_heartbeat(group_id, m.member_id)
            self._fail_waiting(g, m, errors.REBALANCE_IN_PROGRESS)
        g.clear_members()
        g.leader_id = None
        g.protocol_name = None
        g.state, g.state_timestamp = E, self.scheduler.now_ms()
        code = self._store_group(g)
        if code:
            log.warning("group %s: writing the empty group record after its upgrade failed: error %d", group_id, code)

    def adopt_downgraded(
        self, group_id: str, generation: int, members: list[Member], assignments: dict[str, dict[str, list[int]]]
    ) -> None:
        """A consumer group whose members all speak the classic protocol becomes this classic
        group (odradek.coordinator.group.migration): Stable at ``generation`` with each member's
        assignment, then a rebalance prepared at once (Kafka's convertToClassicGroup)."""
        from odradek.coordinator.group.consumer_protocol import encode_assignment, metadata_version

        g = self.groups.get(group_id)
        if g is None:
            g = self.groups[group_id] = ClassicGroup(group_id)
        g.clear_members()
        g.pending_members.clear()
        g.leader_id = None
        g.generation_id = generation
        g.protocol_type = "consumer"
        for m in members:
            g.add(m)
        g.protocol_type = "consumer"
        g.protocol_name = g.select_protocol()
        for m in members:
            try:
                version = metadata_version(m.metadata(g.protocol_name))
            except (KeyError, ValueError):
                version = 0
            m.assignment = encode_assignment(assignments.get(m.member_id, {}), version)
        g.state, g.state_timestamp = ST, self.scheduler.now_ms()
        for m in members:
            self._schedule_heartbeat(g, m)
        code = self._store_group(g)
        if code:
            log.warning("group %s: writing the group record after its downgrade failed: error %d", group_id, code)
        self._prepare_rebalance(g, f"Downgrade group {group_id} from consumer to classic.")

    # ------------------------------------------------------------------ offsets
    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[tuple[str, int], tuple[int, int, str]],
    ) -> tuple[int, dict[tuple[str, int], int]]:
        """(group error, per-partition errors). ``offsets`` maps (topic, partition) to
        (offset, leader epoch, metadata)."""
        g = self.groups.get(group_id)
        if not group_id:
            return errors.INVALID_GROUP_ID, {}
        if self.modern is not None and self.modern.owns(group_id):
            code = self.modern.validate_offset_commit(group_id, member_id, generation_id)
            if code:
                return code, {}
            if g is None:
                g = self.groups[group_id] = ClassicGroup(group_id, state_timestamp=self.scheduler.now_ms())
        elif g is None:
            if generation_id >= 0:
                return errors.ILLEGAL_GENERATION, {}
            g = self.groups[group_id] = ClassicGroup(group_id, state_timestamp=self.scheduler.now_ms())
        elif g.is_in(DEAD):
            return errors.COORDINATOR_NOT_AVAILABLE, {}
        elif generation_id < 0 and g.is_in(E):
            pass  # a standalone consumer or an admin tool
        else:
            # Kafka's validateOffsetCommit order: member, generation, then the rebalance state
            if generation_id >= 0 or member_id or group_instance_id is not None:
                static_id = g.static_member_id(group_instance_id)
                if group_instance_id is not None and static_id is not None and static_id != member_id:
                    return errors.FENCED_INSTANCE_ID, {}
                m = g.members.get(member_id)
                if m is None:
                    return errors.UNKNOWN_MEMBER_ID, {}
                if generation_id != g.generation_id:
                    return errors.ILLEGAL_GENERATION, {}
                self._schedule_heartbeat(g, m)
            elif not g.is_in(E):
                return errors.UNKNOWN_MEMBER_ID, {}
            if g.is_in(CR):
                return errors.REBALANCE_IN_PROGRESS, {}
        now = self.scheduler.now_ms()
        results: dict[tuple[str, int], int] = {}
        to_write: Records = []
        accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
        for (topic, partition), (offset, epoch, metadata) in offsets.items():
            if not self.partition_exists(topic, partition):
                results[(topic, partition)] = errors.UNKNOWN_TOPIC_OR_PARTITION
                continue
            if metadata is not None and len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[(topic, partition)] = errors.OFFSET_METADATA_TOO_LARGE
                continue
            value = OffsetAndMetadata(offset, epoch, metadata or "", now)
            accepted[(topic, partition)] = value
            to_write.append(
                (
                    rec.encode_offset_key(group_id, topic, partition),
                    rec.encode_offset_value(rec.OffsetValue(offset, epoch, metadata or "", now)),
                )
            )
        if to_write:
            try:
                self.write(group_id, to_write)
            except WriteError as e:
                for tp in accepted:
                    results[tp] = e.error_code
                return errors.NONE, results
            g.offsets.update(accepted)
            for tp in accepted:
                results[tp] = errors.NONE
        return errors.NONE, results

    def fetch_offsets(
        self, group_id: str, partitions: list[tuple[str, int]] | None
    ) -> tuple[int, dict[tuple[str, int], OffsetAndMetadata | None]]:
        g = self.groups.get(group_id)
        if g is None or g.is_in(DEAD):
            return errors.NONE, {tp: None for tp in partitions or []}
        if partitions is None:
            return errors.NONE, dict(g.offsets)
        return errors.NONE, {tp: g.offsets.get(tp) for tp in partitions}

    # ------------------------------------------------------------------ admin
    def list_groups(self, states: set[str] | None = None) -> list[ClassicGroup]:
        out = [g for g in self.groups.values() if not g.is_in(DEAD) and not self._modern_owns(g.group_id)]
        if states:
            lowered = {s.lower() for s in states}
            out = [g for g in out if g.state.value.lower() in lowered]
        return out

    def delete_groups(self, group_ids: list[str]) -> dict[str, int]:
        out: dict[str, int] = {}
        for gid in group_ids:
            if self.modern is not None and self.modern.owns(gid):
                if not self.modern.is_empty(gid):
                    out[gid] = errors.NON_EMPTY_GROUP
                    continue
                self.modern.delete(gid)
                if gid not in self.groups:  # no committed offsets
                    out[gid] = errors.NONE
                    continue
            g = self.groups.get(gid)
            if g is None or g.is_in(DEAD):
                out[gid] = errors.GROUP_ID_NOT_FOUND
                continue
            if not g.is_in(E):
                out[gid] = errors.NON_EMPTY_GROUP
                continue
            tombstones: Records = [(rec.encode_offset_key(gid, t, p), None) for (t, p) in g.offsets]
            tombstones.append((rec.encode_group_key(gid), None))
            try:
                self.write(gid, tombstones)
            except WriteError as e:
                out[gid] = e.error_code
                continue
            g.transition(DEAD, self.scheduler.now_ms())
            del self.groups[gid]
            log.info("deleted group %s", gid)
            out[gid] = errors.NONE
        return out

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]]) -> tuple[int, dict[tuple[str, int], int]]:
        g = self.groups.get(group_id)
        if g is None or g.is_in(DEAD):
            return errors.GROUP_ID_NOT_FOUND, {}
        subscribed = g.subscribed_topics() if not g.is_in(E) else set()
        if self.modern is not None and self.modern.owns(group_id):
            subscribed = self.modern.subscribed_topics(group_id)
        if subscribed is None and not g.is_in(E):
            return errors.NON_EMPTY_GROUP, {}
        out: dict[tuple[str, int], int] = {}
        tombstones: Records = []
        for tp in partitions:
            if subscribed and tp[0] in subscribed:
                out[tp] = errors.GROUP_SUBSCRIBED_TO_TOPIC
                continue
            out[tp] = errors.NONE
            if tp in g.offsets:
                tombstones.append((rec.encode_offset_key(group_id, tp[0], tp[1]), None))
        if tombstones:
            try:
                self.write(group_id, tombstones)
            except WriteError as e:
                return e.error_code, {}
            for tp, code in out.items():
                if code == errors.NONE:
                    g.offsets.pop(tp, None)
        return errors.NONE, out

    def expire_offsets(self, now_ms: int) -> int:
        """offsets.retention.minutes: offsets of empty groups expire that long after the
        group became empty; a group left with no offsets is deleted."""
        removed = 0
        for g in list(self.groups.values()):
            if not g.is_in(E) or (self.modern is not None and not self.modern.is_empty(g.group_id)):
                continue
            expired = [
                tp for tp, om in g.offsets.items()
                if max(g.state_timestamp, om.commit_timestamp) + self.config.offsets_retention_ms <= now_ms
            ]
            records: Records = [(rec.encode_offset_key(g.group_id, t, p), None) for t, p in expired]
            delete_group = len(expired) == len(g.offsets)
            if delete_group:
                records.append((rec.encode_group_key(g.group_id), None))
            if not records:
                continue
            try:
                self.write(g.group_id, records)
            except WriteError:
                continue
            for tp in expired:
                del g.offsets[tp]
            removed += len(expired)
            if delete_group:
                g.transition(DEAD, now_ms)
                del self.groups[g.group_id]
                if self.modern is not None and self.modern.owns(g.group_id):
                    self.modern.delete(g.group_id)
                log.info("group %s expired (no members and no unexpired offsets)", g.group_id)
        return removed

    # ------------------------------------------------------------------ loading
    def replay(self, key: bytes | None, value: bytes | None) -> None:
        """Apply one ``__consumer_offsets`` record (in log order)."""
        if key is None:
            return
        try:
            k = rec.decode_key(key)
        except rec.RecordFormatError as e:
            log.warning("skipping unreadable __consumer_offsets key: %s", e)
            return
        if isinstance(k, rec.OffsetKey):
            g = self.groups.get(k.group)
            if value is None:
                if g is not None:
                    g.offsets.pop((k.topic, k.partition), None)
                return
            v = rec.decode_offset_value(value)
            if g is None:
                g = self.groups[k.group] = ClassicGroup(k.group)
            g.offsets[(k.topic, k.partition)] = OffsetAndMetadata(
                v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp
            )
            return
        if value is None:
            g = self.groups.pop(k.group, None)
            return
        gv = rec.decode_group_value(value)
        g = self.groups.get(k.group)
        if g is None:
            g = self.groups[k.group] = ClassicGroup(k.group)
        g.protocol_type = gv.protocol_type or None
        g.generation_id = gv.generation
        g.protocol_name = gv.protocol
        g.leader_id = gv.leader
        g.state_timestamp = gv.current_state_timestamp
        g.clear_members()
        for mv in gv.members:
            m = Member(
                mv.member_id, mv.group_instance_id, mv.client_id, mv.client_host, mv.rebalance_timeout,
                mv.session_timeout, gv.protocol_type, [(gv.protocol or "", mv.subscription)], mv.assignment,
            )
            g.add(m)
        g.leader_id = gv.leader
        g.state = ST if g.members else E

    def finish_loading(self, partition: int | None = None) -> None:
        """After replay: members of loaded groups must heartbeat within their session timeout."""
        for g in self.groups.values():
            if partition is not None and self.partition_for(g.group_id) != partition:
                continue
            for m in g.members.values():
                self._schedule_heartbeat(g, m)
            if len(g.members) > self.config.max_size and g.is_in(ST):
                # group.max.size was lowered since the group was written (Kafka's onLoaded)
                self._prepare_rebalance(
                    g, f"freshly-loaded group {g.group_id} (size {len(g.members)}) is over capacity "
                    f"{self.config.max_size}; rebalancing in order to give a chance for consumers to commit offsets",
                )

    def unload(self) -> None:
        for t in list(self._join_timers.values()) + list(self._hb_timers.values()):
            t.cancel()
        self._join_timers.clear()
        self._hb_timers.clear()

    def unload_partition(self, partition: int) -> list[str]:
        """This broker stopped leading ``partition`` of __consumer_offsets: forget its groups
        (their state lives on in the log, for the new coordinator); waiting JoinGroup /
        SyncGroup callers get NOT_COORDINATOR. Returns the groups dropped."""
        gone = [gid for gid in self.groups if self.partition_for(gid) == partition]
        for gid in gone:
            g = self.groups.pop(gid)
            t = self._join_timers.pop(gid, None)
            if t is not None:
                t.cancel()
            for key in [k for k in self._hb_timers if k[0] == gid]:
                self._hb_timers.pop(key).cancel()
            self._initial_delay.discard(gid)
            for m in g.members.values():
                for cb in (m.awaiting_join, m.awaiting_sync):
                    if cb is not None:
                        cb(JoinResult(errors.NOT_COORDINATOR, member_id=m.member_id) if cb is m.awaiting_join
                           else SyncResult(errors.NOT_COORDINATOR))
                g.take_join(m)
                m.awaiting_sync = None
        return gone

    def describe(self, group_id: str) -> ClassicGroup | None:
        g = self.groups.get(group_id)
        return g if g is not None and not g.is_in(DEAD) and not self._modern_owns(group_id) else None


def make_scheduler(loop: asyncio.AbstractEventLoop, now_ms: Callable[[], int]) -> Scheduler:
    """A Scheduler over an asyncio loop. Its callbacks all run in one context, copied when it is made
    (the loop would copy the current one for each timer: 10,000 heartbeat timers, 10,000 contexts
    for the garbage collector to walk)."""
    context = contextvars.copy_context()

    class _S:
        def call_later(self, delay_s: float, fn: Callable[[], None]) -> Cancellable:
            return loop.call_later(delay_s, fn, context=context)

        def now_ms(self) -> int:
            return now_ms()

    return _S()
