"""Share groups' membership (KIP-932): the group coordinator's side of ShareGroupHeartbeat, pure, on an injected
clock (Kafka's GroupMetadataManager.shareGroupHeartbeat with ShareGroup / ShareGroupMember).

A share group's members join with a member id they generate (ShareGroupHeartbeat v1) and member epoch 0, heartbeat
with the epoch they were given, and leave with epoch -1. There is no revocation phase: the target assignment is
the member's assignment at once, since partitions may be shared. Every change of the group's membership, of a
member's subscription or of a subscribed topic's partition count bumps the group epoch and recomputes the
assignment with the **simple assignor** of KIP-932 (Kafka's SimpleAssignor, homogeneous case): every partition of
every subscribed topic is assigned; with at least as many partitions as members they are dealt round-robin over
the members (sorted by member id), with more members than partitions each member gets partition
``index mod partitions``, so several members share a partition.

A member that does not heartbeat within ``group.share.session.timeout.ms`` (a group's
``share.session.timeout.ms``) is removed by :meth:`ShareGroups.expire_members`; members are told to heartbeat every
``group.share.heartbeat.interval.ms``. ``group.share.max.size`` bounds a group's members (GROUP_MAX_SIZE_REACHED).

Every change of a group is also a list of records for ``__consumer_offsets`` (Kafka 4.4's ShareGroup* records,
coordinator.share.share_group_records), which the caller takes with :meth:`ShareGroups.drain_records` and appends
to the group's partition: a member's subscription (ShareGroupMemberMetadata), the group epoch with a hash of the
subscribed topics (ShareGroupMetadata), the assignment (ShareGroupTargetAssignmentMember and
ShareGroupTargetAssignmentMetadata), each member's epoch and partitions (ShareGroupCurrentMemberAssignment) and
the topics whose share state the group has (ShareGroupStatePartitionMetadata, its initialized topics); a member
that leaves, or whose session expires, is tombstoned, and a deleted group too. They are computed by comparing a
group before and after each change (:meth:`ShareGroups._persist`). :meth:`ShareGroups.replay` applies them
back when the coordinator loads the partition (a restart, a failover), as Kafka's GroupMetadataManager.replay
does: the members keep their ids and epochs, and each gets a full session timeout from the load to heartbeat
again. The share-partitions' delivery state lives in ``__share_group_state``.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from odradek.coordinator.share import share_group_records as sgr
from odradek.protocol import errors

LEAVE_GROUP_MEMBER_EPOCH = -1
ASSIGNOR_NAME = "simple"

# Kafka 4.4 defaults (GroupCoordinatorConfig)
DEFAULT_SESSION_TIMEOUT_MS = 45_000  # group.share.session.timeout.ms
DEFAULT_HEARTBEAT_INTERVAL_MS = 5_000  # group.share.heartbeat.interval.ms
DEFAULT_MAX_SIZE = 200  # group.share.max.size

Assignment = dict[uuid.UUID, frozenset[int]]


@dataclass(frozen=True)
class ShareGroupSettings:
    """One group's timing: the broker's ``group.share.*`` with the group's overrides."""

    session_timeout_ms: int = DEFAULT_SESSION_TIMEOUT_MS
    heartbeat_interval_ms: int = DEFAULT_HEARTBEAT_INTERVAL_MS


@dataclass
class ShareMember:
    """Kafka's ShareGroupMember."""

    member_id: str
    member_epoch: int
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    assignment: Assignment = field(default_factory=dict)
    deadline_ms: int = 0
    sent_epoch: int = -1  # the assignment epoch last sent to the member (None in the response when unchanged)
    previous_member_epoch: int = 0  # ShareGroupCurrentMemberAssignment's PreviousMemberEpoch


@dataclass
class ShareGroup:
    """Kafka's ShareGroup: members, the group epoch and the epoch of the assignment computed for it."""

    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: dict[str, ShareMember] = field(default_factory=dict)
    # topic name -> (topic id, partition count) the last assignment used
    topics: dict[str, tuple[uuid.UUID, int]] = field(default_factory=dict)

    @property
    def state(self) -> str:
        """Kafka's ShareGroup.ShareGroupState: Empty or Stable (share groups never reconcile)."""
        return "Empty" if not self.members else "Stable"

    def subscribed(self) -> set[str]:
        return {t for m in self.members.values() for t in m.subscribed_topic_names}

    def metadata_hash(self) -> int:
        """ShareGroupMetadataValue's MetadataHash: a signed 64-bit hash of the topics of :attr:`topics` (their
        names, ids and partition counts). Kafka computes its own (XXH3 over its topic images); this one only has
        to change when they change, and a coordinator that finds another value bumps the group epoch once."""
        text = "\n".join(f"{n}\0{t}\0{c}" for n, (t, c) in sorted(self.topics.items()))
        return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big", signed=True)


# what of a group its records carry, to compare before and after a change
_MemberImage = tuple[str | None, str, str, tuple[str, ...], Assignment, int]
_GroupImage = tuple[int, int, dict[str, tuple[uuid.UUID, int]], dict[str, _MemberImage]]


def _member_image(m: ShareMember) -> _MemberImage:
    return m.rack_id, m.client_id, m.client_host, m.subscribed_topic_names, m.assignment, m.member_epoch


def _image(group: ShareGroup | None) -> _GroupImage | None:
    if group is None:
        return None
    return (group.group_epoch, group.assignment_epoch, dict(group.topics),
            {mid: _member_image(m) for mid, m in group.members.items()})


def _current_assignment(group_id: str, m: ShareMember) -> sgr.Record:
    return sgr.record(group_id, sgr.CurrentMemberAssignmentValue(
        m.member_epoch, m.previous_member_epoch, sgr.MEMBER_STATE_STABLE, sgr.topic_partitions(m.assignment)),
        m.member_id)


@dataclass(frozen=True)
class HeartbeatResult:
    error_code: int = errors.NONE
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


# topic name -> (topic id, partition count), None when the topic does not exist
TopicLookup = Callable[[str], "tuple[uuid.UUID, int] | None"]


def simple_assign(members: Iterable[str], topics: dict[str, tuple[uuid.UUID, int]],
                  subscriptions: dict[str, tuple[str, ...]]) -> dict[str, Assignment]:
    """KIP-932's simple assignor: every subscribed partition to at least one subscribed member, balanced."""
    out: dict[str, Assignment] = {m: {} for m in members}
    for name in sorted(topics):
        topic_id, count = topics[name]
        subs = sorted(m for m in out if name in subscriptions.get(m, ()))
        if not subs or count <= 0:
            continue
        per: dict[str, set[int]] = {m: set() for m in subs}
        if count >= len(subs):
            for p in range(count):
                per[subs[p % len(subs)]].add(p)
        else:
            for i, m in enumerate(subs):
                per[m].add(i % count)
        for m, ps in per.items():
            if ps:
                out[m][topic_id] = frozenset(ps)
    return out


class ShareGroups:
    """The share groups this coordinator holds. ``settings(group_id)`` gives a group's timing,
    ``topic_lookup`` the subscribed topics, ``clock()`` milliseconds; ``on_member_removed(group, member, expired)`` is
    called when a member leaves (``expired`` False) or its session times out (True)."""

    def __init__(
        self,
        clock: Callable[[], int],
        topic_lookup: TopicLookup,
        settings: Callable[[str], ShareGroupSettings] | None = None,
        max_size: int = DEFAULT_MAX_SIZE,
        on_member_removed: Callable[[str, str, bool], None] | None = None,
    ) -> None:
        self.clock = clock
        self.topic_lookup = topic_lookup
        self.settings = settings or (lambda _g: ShareGroupSettings())
        self.max_size = max_size
        self.on_member_removed = on_member_removed
        self.groups: dict[str, ShareGroup] = {}
        # (group id, record) for __consumer_offsets, in order, until drain_records takes them
        self.outbox: list[tuple[str, sgr.Record]] = []

    # ------------------------------------------------------------------------------- heartbeat

    def heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed_topic_names: Iterable[str] | None,
        client_id: str = "",
        client_host: str = "",
    ) -> HeartbeatResult:
        """ShareGroupHeartbeat (Kafka's shareGroupHeartbeat, with its request validation); the records of what
        changed go to :attr:`outbox`."""
        if subscribed_topic_names is not None:
            subscribed_topic_names = list(subscribed_topic_names)  # read twice below
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if (group is not None and member is not None and member_epoch > 0 and member_epoch == member.member_epoch
                and group.assignment_epoch == group.group_epoch
                and (subscribed_topic_names is None
                     or tuple(sorted(set(subscribed_topic_names))) == member.subscribed_topic_names)
                and self._current_topics(group) == group.topics):
            # a steady member's heartbeat changes no group epoch and no other member (the group image of every
            # member would cost a 200-member group 5 times the heartbeat): only its own records, if anything
            epochs, mine = (group.group_epoch, group.assignment_epoch), _member_image(member)
            result = self._heartbeat(group_id, member_id, member_epoch, rack_id, subscribed_topic_names, client_id,
                                     client_host)
            if (group.group_epoch, group.assignment_epoch) != epochs or group.members.get(member_id) is not member:
                self.record_change(group_id, None)  # not expected: write the whole group
            elif _member_image(member) != mine:
                self._member_records(group_id, member, mine)
            return result
        before = _image(group)
        try:
            return self._heartbeat(group_id, member_id, member_epoch, rack_id, subscribed_topic_names, client_id,
                                   client_host)
        finally:
            self.record_change(group_id, before)

    def _heartbeat(
        self,
        group_id: str,
        member_id: str,
        member_epoch: int,
        rack_id: str | None,
        subscribed_topic_names: Iterable[str] | None,
        client_id: str,
        client_host: str,
    ) -> HeartbeatResult:
        names = None if subscribed_topic_names is None else tuple(sorted(set(subscribed_topic_names)))
        if not group_id:
            return HeartbeatResult(errors.INVALID_REQUEST, "GroupId can't be empty.")
        if not member_id:
            return HeartbeatResult(errors.INVALID_REQUEST, "MemberId can't be empty.")
        if member_epoch == 0 and not names:
            return HeartbeatResult(errors.INVALID_REQUEST,
                                   "SubscribedTopicNames must be set in first request.")
        if member_epoch < LEAVE_GROUP_MEMBER_EPOCH:
            return HeartbeatResult(errors.INVALID_REQUEST,
                                   f"MemberEpoch is {member_epoch}, but must be greater than or equal to -1.")
        now = self.clock()
        settings = self.settings(group_id)
        group = self.groups.get(group_id)
        if member_epoch == LEAVE_GROUP_MEMBER_EPOCH:
            if group is None or member_id not in group.members:
                return HeartbeatResult(errors.UNKNOWN_MEMBER_ID, None, member_id, LEAVE_GROUP_MEMBER_EPOCH)
            self._remove(group, member_id, expired=False)
            return HeartbeatResult(member_id=member_id, member_epoch=LEAVE_GROUP_MEMBER_EPOCH)
        member = group.members.get(member_id) if group is not None else None
        if member_epoch == 0:
            if group is None:
                group = self.groups[group_id] = ShareGroup(group_id)
            if member is None:
                if len(group.members) >= self.max_size:
                    return HeartbeatResult(errors.GROUP_MAX_SIZE_REACHED,
                                           f"The share group has reached its maximum capacity of {self.max_size} members.")
                member = ShareMember(member_id, 0, rack_id, client_id, client_host, names or ())
                group.members[member_id] = member
                group.group_epoch += 1
            member.sent_epoch = -1  # a (re)join always gets its assignment
        elif member is None:
            return HeartbeatResult(errors.UNKNOWN_MEMBER_ID,
                                   f"Member {member_id} is not a member of group {group_id}.", member_id, member_epoch)
        elif member_epoch != member.member_epoch:
            return HeartbeatResult(errors.FENCED_MEMBER_EPOCH,
                                   f"The share group member has a smaller or larger member epoch ({member_epoch}) "
                                   f"than the one known by the group coordinator ({member.member_epoch}).",
                                   member_id, member_epoch)
        assert group is not None
        member.deadline_ms = now + settings.session_timeout_ms
        member.rack_id = rack_id if rack_id is not None else member.rack_id
        if client_id:
            member.client_id, member.client_host = client_id, client_host
        if names is not None and names != member.subscribed_topic_names:
            member.subscribed_topic_names = names
            group.group_epoch += 1
        self._maybe_refresh_topics(group)
        if group.assignment_epoch != group.group_epoch:
            self._assign(group)
        if member.member_epoch != group.assignment_epoch:
            member.previous_member_epoch = member.member_epoch
            member.member_epoch = group.assignment_epoch
        assignment = None
        if member.sent_epoch != member.member_epoch:
            assignment = dict(member.assignment)
            member.sent_epoch = member.member_epoch
        return HeartbeatResult(member_id=member_id, member_epoch=member.member_epoch,
                               heartbeat_interval_ms=settings.heartbeat_interval_ms, assignment=assignment)

    def _current_topics(self, group: ShareGroup) -> dict[str, tuple[uuid.UUID, int]]:
        current: dict[str, tuple[uuid.UUID, int]] = {}
        for name in group.subscribed():
            found = self.topic_lookup(name)
            if found is not None:
                current[name] = found
        return current

    def _maybe_refresh_topics(self, group: ShareGroup) -> None:
        """A subscribed topic created, deleted or grown since the last assignment bumps the group epoch."""
        current = self._current_topics(group)
        if current != group.topics:
            group.topics = current
            group.group_epoch += 1

    def _assign(self, group: ShareGroup) -> None:
        subs = {m.member_id: m.subscribed_topic_names for m in group.members.values()}
        target = simple_assign(group.members, group.topics, subs)
        for mid, m in group.members.items():
            new = target.get(mid, {})
            if new != m.assignment:
                m.assignment = new
                m.sent_epoch = -1
        group.assignment_epoch = group.group_epoch

    def _remove(self, group: ShareGroup, member_id: str, expired: bool) -> None:
        del group.members[member_id]
        group.group_epoch += 1
        if group.members:
            self._assign(group)
        else:
            group.assignment_epoch = group.group_epoch
        if self.on_member_removed is not None:
            self.on_member_removed(group.group_id, member_id, expired)

    # ------------------------------------------------------------------------------- sessions

    def expire_members(self) -> list[tuple[str, str]]:
        """Remove the members whose session timed out (Kafka's session timeout timer); which were removed."""
        now = self.clock()
        gone = []
        for group in list(self.groups.values()):
            before: _GroupImage | None = None
            for m in list(group.members.values()):
                if m.deadline_ms <= now:
                    before = before or _image(group)
                    self._remove(group, m.member_id, expired=True)
                    gone.append((group.group_id, m.member_id))
            if before is not None:
                self.record_change(group.group_id, before)
        return gone

    def next_deadline(self) -> int | None:
        deadlines = [m.deadline_ms for g in self.groups.values() for m in g.members.values()]
        return min(deadlines) if deadlines else None

    # ------------------------------------------------------------------------------- admin

    def is_member(self, group_id: str, member_id: str) -> bool:
        g = self.groups.get(group_id)
        return g is not None and member_id in g.members

    def list_groups(self, states: set[str] | None = None) -> list[ShareGroup]:
        wanted = {s.lower() for s in states} if states else None
        return [g for g in self.groups.values() if wanted is None or g.state.lower() in wanted]

    def delete_group(self, group_id: str) -> int:
        """DeleteGroups of a share group: only when it has no members (NON_EMPTY_GROUP otherwise)."""
        g = self.groups.get(group_id)
        if g is None:
            return errors.GROUP_ID_NOT_FOUND
        if g.members:
            return errors.NON_EMPTY_GROUP
        before = _image(g)
        del self.groups[group_id]
        self.record_change(group_id, before)
        return errors.NONE

    def create_empty(self, group_id: str) -> ShareGroup:
        """An empty group (AlterShareGroupOffsets of a group not known yet), written at epoch 0."""
        group = self.groups.get(group_id)
        if group is None:
            group = self.groups[group_id] = ShareGroup(group_id)
            self.record_change(group_id, None)
        return group

    # ------------------------------------------------------------------------------- __consumer_offsets

    def image(self, group_id: str) -> _GroupImage | None:
        """What the group's records say now, for :meth:`record_change` after a change."""
        return _image(self.groups.get(group_id))

    def record_change(self, group_id: str, before: _GroupImage | None) -> None:
        """Queue the records of what changed in the group since ``before`` (its :meth:`image`), in the order Kafka's
        GroupMetadataManager writes them: a departed member's tombstones (current assignment, target assignment,
        subscription), subscriptions, the group epoch, the share-state topics, the target assignment and its
        epoch, the members' current assignments; a deleted group's tombstones."""
        group = self.groups.get(group_id)
        after = _image(group)
        if after == before:
            return
        out: list[sgr.Record] = []
        old_members = before[3] if before is not None else {}
        new_members = after[3] if after is not None else {}
        for mid in old_members:
            if mid not in new_members:
                out.append(sgr.tombstone(sgr.CURRENT_MEMBER_ASSIGNMENT, group_id, mid))
                out.append(sgr.tombstone(sgr.TARGET_ASSIGNMENT_MEMBER, group_id, mid))
                out.append(sgr.tombstone(sgr.MEMBER_METADATA, group_id, mid))
        if group is None or after is None:
            out.append(sgr.tombstone(sgr.STATE_PARTITION_METADATA, group_id))
            out.append(sgr.tombstone(sgr.TARGET_ASSIGNMENT_METADATA, group_id))
            out.append(sgr.tombstone(sgr.GROUP_METADATA, group_id))
            self.outbox.extend((group_id, r) for r in out)
            return
        for mid, img in new_members.items():
            old = old_members.get(mid)
            if old is None or old[:4] != img[:4]:
                out.append(sgr.record(group_id, sgr.MemberMetadataValue(img[0], img[1], img[2], img[3]), mid))
        if before is None or before[0] != after[0]:
            out.append(sgr.record(group_id, sgr.GroupMetadataValue(group.group_epoch, group.metadata_hash())))
        if before is None or before[2] != after[2]:
            out.append(sgr.record(group_id, sgr.StatePartitionMetadataValue(initialized_topics=tuple(
                sgr.TopicPartitionsInfo(tid, name, tuple(range(count)))
                for name, (tid, count) in sorted(group.topics.items())))))
        for mid, img in new_members.items():
            old = old_members.get(mid)
            if old is None or old[4] != img[4]:
                out.append(sgr.record(group_id, sgr.TargetAssignmentMemberValue(sgr.topic_partitions(img[4])), mid))
        if before is None or before[1] != after[1]:
            out.append(sgr.record(group_id, sgr.TargetAssignmentMetadataValue(group.assignment_epoch, self.clock())))
        for mid, img in new_members.items():
            old = old_members.get(mid)
            if old is None or old[4:] != img[4:]:
                out.append(_current_assignment(group_id, group.members[mid]))
        self.outbox.extend((group_id, r) for r in out)

    def _member_records(self, group_id: str, member: ShareMember, before: _MemberImage) -> None:
        """The records of one member's change that changed nothing else (its client, its epoch)."""
        now = _member_image(member)
        if now[:4] != before[:4]:
            self.outbox.append((group_id, sgr.record(group_id, sgr.MemberMetadataValue(*now[:4]), member.member_id)))
        if now[4:] != before[4:]:
            self.outbox.append((group_id, _current_assignment(group_id, member)))

    def drain_records(self) -> list[tuple[str, sgr.Record]]:
        """The records queued since the last call, (group id, (key, value)), in order."""
        out, self.outbox = self.outbox, []
        return out

    def replay(self, key: bytes, value: bytes | None) -> None:
        """Apply one share group record of ``__consumer_offsets`` (in log order), as Kafka's
        GroupMetadataManager.replay: a member comes back with its id, epochs, subscription and assignment and a
        full session timeout from now. Raises :class:`sgr.ShareGroupRecordError` for a record that does not
        decode."""
        k = sgr.decode_key(key)
        v = sgr.decode_value(k.record_type, value)
        gid, mid = k.group_id, k.member_id
        group = self.groups.get(gid)
        if v is None:  # tombstones
            if k.record_type == sgr.GROUP_METADATA:
                self.groups.pop(gid, None)
            elif group is not None and k.record_type == sgr.MEMBER_METADATA and mid is not None:
                group.members.pop(mid, None)
            elif group is not None and k.record_type == sgr.STATE_PARTITION_METADATA:
                group.topics = {}
            return
        if group is None:
            group = self.groups[gid] = ShareGroup(gid)
        if isinstance(v, sgr.GroupMetadataValue):
            group.group_epoch = v.epoch
            return
        if isinstance(v, sgr.TargetAssignmentMetadataValue):
            group.assignment_epoch = v.assignment_epoch
            return
        if isinstance(v, sgr.StatePartitionMetadataValue):
            group.topics = {i.topic_name: (i.topic_id, len(i.partitions))
                            for i in (*v.initializing_topics, *v.initialized_topics)}
            return
        assert mid is not None
        member = group.members.get(mid)
        if member is None:
            member = group.members[mid] = ShareMember(mid, 0, None, "", "", ())
        member.deadline_ms = self.clock() + self.settings(gid).session_timeout_ms
        if isinstance(v, sgr.MemberMetadataValue):
            member.rack_id, member.client_id, member.client_host = v.rack_id, v.client_id, v.client_host
            member.subscribed_topic_names = v.subscribed_topic_names
        elif isinstance(v, sgr.TargetAssignmentMemberValue):
            member.assignment = {t: frozenset(ps) for t, ps in v.topic_partitions}
        elif isinstance(v, sgr.CurrentMemberAssignmentValue):
            member.member_epoch, member.previous_member_epoch = v.member_epoch, v.previous_member_epoch

    def unload(self, owned_elsewhere: Callable[[str], bool]) -> list[str]:
        """Forget the groups for which ``owned_elsewhere(group_id)`` (their ``__consumer_offsets`` partition is
        no longer led here, or is about to be loaded again); their records stay in the log."""
        gone = [gid for gid in self.groups if owned_elsewhere(gid)]
        for gid in gone:
            del self.groups[gid]
        self.outbox = [(g, r) for g, r in self.outbox if g not in gone]
        return gone
