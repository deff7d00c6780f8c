"""The online migration between a classic group and a consumer group (KIP-848,
``group.consumer.migration.policy``: Kafka's ConsumerGroupMigrationPolicy and
GroupMetadataManager.convertToConsumerGroup / convertToClassicGroup). No I/O.

Upgrade: a ConsumerGroupHeartbeat joining (epoch 0) a classic group that has members and uses
the ``consumer`` embedded protocol turns it into a consumer group: every classic member becomes
a consumer-group member speaking the classic protocol, at member epoch = the classic generation,
Stable, holding the partitions of its last SyncGroup assignment, which is also its target; the
group epoch and assignment epoch are the generation. The joining member then bumps the group
epoch and a new target is computed; the classic members are asked to rejoin through their
heartbeats (odradek.coordinator.group.consumer_classic). Join and sync requests waiting on the
classic group are answered REBALANCE_IN_PROGRESS.

Downgrade: when a member speaking the consumer protocol leaves or is fenced and every other
member speaks the classic protocol, the group becomes a classic group again: generation = the
group epoch, each member's assignment its target (in the version of its subscription), a
protocol all support selected, and a rebalance prepared at once so they rejoin.

Either direction is refused (the group keeps its type; a heartbeat then gets GROUP_ID_NOT_FOUND)
when the policy does not allow it, when the classic group does not use the ``consumer``
protocol, when the group would be over the other type's maximum size, or when the members'
embedded protocol cannot be read.
"""

from __future__ import annotations

import enum
import logging
import uuid
from collections.abc import Callable
from typing import Protocol

from odradek.coordinator.group.classic import ClassicGroup, Member
from odradek.coordinator.group.consumer_model import (
    ClassicMemberInfo,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    Parts,
    TopicView,
)
from odradek.coordinator.group.consumer_protocol import assignment_partitions, decode_subscription

log = logging.getLogger("odradek.coordinator")

PROTOCOL_TYPE = "consumer"


class MigrationPolicy(enum.Enum):
    DISABLED = "disabled"
    DOWNGRADE = "downgrade"
    UPGRADE = "upgrade"
    BIDIRECTIONAL = "bidirectional"

    @classmethod
    def parse(cls, value: str) -> MigrationPolicy:
        """Kafka's names, case insensitive."""
        return cls(value.strip().lower())

    @property
    def upgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.UPGRADE, MigrationPolicy.BIDIRECTIONAL)

    @property
    def downgrade_enabled(self) -> bool:
        return self in (MigrationPolicy.DOWNGRADE, MigrationPolicy.BIDIRECTIONAL)


class ClassicSide(Protocol):
    """What the migration needs of the classic coordinator."""

    def classic_group(self, group_id: str) -> ClassicGroup | None: ...
    def release_for_upgrade(self, group_id: str) -> None: ...
    def adopt_downgraded(
        self, group_id: str, generation: int, members: list[Member], assignments: dict[str, dict[str, list[int]]]
    ) -> None: ...


class ConsumerSide(Protocol):
    """What the migration needs of the consumer-group coordinator."""

    topics: TopicView

    def subscription_metadata(self, g: ConsumerGroup) -> dict[str, tuple[uuid.UUID, int]]: ...


def consumer_group_from_classic(g: ClassicGroup, topics: TopicView, now_ms: int) -> ConsumerGroup:
    """Kafka's ConsumerGroup.fromClassicGroup; raises ``ValueError`` on a member's malformed
    subscription or assignment."""
    generation = g.generation_id
    cg = ConsumerGroup(g.group_id, group_epoch=generation, assignment_epoch=generation, state_timestamp=now_ms)
    for m in g.members.values():
        protocol = g.protocol_name if g.protocol_name is not None else (m.protocols[0][0] if m.protocols else "")
        sub = decode_subscription(m.metadata(protocol))
        parts: Parts = {}
        for name, ps in assignment_partitions(m.assignment).items():
            meta = topics.lookup(name)
            if meta is not None:
                parts[meta[0]] = frozenset(p for p in ps if 0 <= p < meta[1])
        member = ConsumerMember(
            m.member_id,
            instance_id=m.group_instance_id,
            rack_id=sub.rack_id,
            client_id=m.client_id,
            client_host=m.client_host,
            subscribed_topic_names=tuple(sorted(set(sub.topics))),
            rebalance_timeout_ms=m.rebalance_timeout_ms,
            member_epoch=generation,
            previous_member_epoch=generation,
            state=MemberState.STABLE,
            assigned={t: ps for t, ps in parts.items() if ps},
            classic=ClassicMemberInfo(m.session_timeout_ms, tuple(m.protocols)),
        )
        cg.put_member(member, None)
        cg.target[m.member_id] = dict(member.assigned)
    return cg


def classic_members_of(g: ConsumerGroup, leaving_member_id: str, topics: TopicView) -> tuple[list[Member], dict[str, dict[str, list[int]]]]:
    """The classic members a downgraded group is made of (all but the leaving one), and each
    one's target assignment by topic name (Kafka's ClassicGroup.fromConsumerGroup)."""
    members: list[Member] = []
    assignments: dict[str, dict[str, list[int]]] = {}
    for mid, cm in g.members.items():
        if mid == leaving_member_id or cm.classic is None:
            continue
        members.append(Member(
            mid, cm.instance_id, cm.client_id, cm.client_host, cm.rebalance_timeout_ms,
            cm.classic.session_timeout_ms, PROTOCOL_TYPE, list(cm.classic.protocols),
        ))
        by_name: dict[str, list[int]] = {}
        for t, ps in g.target.get(mid, {}).items():
            name = topics.name_of(t)
            if name is not None and ps:
                by_name[name] = sorted(ps)
        assignments[mid] = by_name
    return members, assignments


class GroupMigration:
    """Both directions, between a :class:`ClassicSide` and a :class:`ConsumerSide`."""

    def __init__(
        self,
        policy: MigrationPolicy,
        classic: ClassicSide,
        consumer: ConsumerSide,
        classic_max_size: int,
        consumer_max_size: int,
        now_ms: Callable[[], int],
    ) -> None:
        self.policy = policy
        self.classic = classic
        self.consumer = consumer
        self.classic_max_size = classic_max_size
        self.consumer_max_size = consumer_max_size
        self._now_ms = now_ms

    def upgrade(self, group_id: str) -> ConsumerGroup | None:
        g = self.classic.classic_group(group_id)
        if g is None or not g.members:
            return None
        if not self.policy.upgrade_enabled:
            log.info("cannot upgrade classic group %s to a consumer group: the online upgrade is disabled "
                     "(group.consumer.migration.policy=%s)", group_id, self.policy.value)
            return None
        if g.protocol_type != PROTOCOL_TYPE:
            log.info("cannot upgrade classic group %s to a consumer group: it uses the %r protocol, not the "
                     "consumer embedded protocol", group_id, g.protocol_type)
            return None
        if len(g.members) > self.consumer_max_size:
            log.info("cannot upgrade classic group %s to a consumer group: its %d members exceed "
                     "group.consumer.max.size", group_id, len(g.members))
            return None
        now = self._now()
        try:
            cg = consumer_group_from_classic(g, self.consumer.topics, now)
        except (ValueError, KeyError) as e:
            log.warning("cannot upgrade classic group %s to a consumer group: malformed embedded consumer "
                        "protocol (%s)", group_id, e)
            return None
        cg.subscription_metadata = self.consumer.subscription_metadata(cg)
        self.classic.release_for_upgrade(group_id)
        log.info("upgraded classic group %s (generation %d, %d members) to a consumer group",
                 group_id, cg.group_epoch, len(cg.members))
        return cg

    def downgrade(self, group: ConsumerGroup, leaving_member_id: str) -> bool:
        """Kafka's validateOnlineDowngradeWithFencedMember, then the conversion."""
        if not group.all_classic_except(leaving_member_id):
            return False
        if len(group.members) <= 1:
            return False  # it empties: an empty consumer group stays one
        if not self.policy.downgrade_enabled:
            log.info("cannot downgrade consumer group %s to a classic group: the online downgrade is disabled "
                     "(group.consumer.migration.policy=%s)", group.group_id, self.policy.value)
            return False
        if len(group.members) - 1 > self.classic_max_size:
            log.info("cannot downgrade consumer group %s to a classic group: its size exceeds group.max.size",
                     group.group_id)
            return False
        members, assignments = classic_members_of(group, leaving_member_id, self.consumer.topics)
        self.classic.adopt_downgraded(group.group_id, group.group_epoch, members, assignments)
        log.info("downgraded consumer group %s (epoch %d, %d members) to a classic group",
                 group.group_id, group.group_epoch, len(members))
        return True

    def _now(self) -> int:
        return self._now_ms()
