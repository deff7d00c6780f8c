"""Share groups' ``__consumer_offsets`` records byte for byte as Kafka 4.4 writes them, and a group's membership
and epochs replayed from them (a restart, a coordinator moving).

The golden bytes come from Kafka 4.4's own ``GroupCoordinatorRecordSerde`` (kafka-group-coordinator-4.4.0.jar): a
small Java program built the records below with the generated ShareGroup*Key/Value classes (``CoordinatorRecord
.record`` at value version 0, ``CoordinatorRecord.tombstone``) and printed ``serializeKey`` / ``serializeValue``
in hex. ``MemberState.STABLE.value()`` is 0."""

from __future__ import annotations

import contextlib
import random
import uuid

import pytest

from odradek.coordinator.share import share_group_records as sgr
from odradek.coordinator.share.share_group import ShareGroups, ShareGroupSettings
from odradek.protocol import errors

T = uuid.UUID(bytes=bytes.fromhex("0123456789abcdef0fedcba987654321"))
T2 = uuid.UUID(bytes=bytes.fromhex("11111111111111112222222222222222"))

GOLDEN: dict[str, tuple[sgr.ShareGroupKey, sgr.Value | None, str, str | None]] = {
    "group": (sgr.ShareGroupKey(11, "grp"), sgr.GroupMetadataValue(7, 0x0123456789ABCDEF),
              "000b0003677270", "0000000000070123456789abcdef00"),
    "member": (sgr.ShareGroupKey(10, "grp", "m-1"),
               sgr.MemberMetadataValue(None, "cli", "/127.0.0.1", ("a", "bé")),
               "000a000367727000036d2d31", "00000004636c690b2f3132372e302e302e310302610462c3a900"),
    "member_rack": (sgr.ShareGroupKey(10, "grp", "m-1"), sgr.MemberMetadataValue("r1", "", "h", ()),
                    "000a000367727000036d2d31", "00000372310102680100"),
    "target_meta": (sgr.ShareGroupKey(12, "grp"), sgr.TargetAssignmentMetadataValue(7),
                    "000c0003677270", "00000000000700"),
    "target_meta_ts": (sgr.ShareGroupKey(12, "grp"), sgr.TargetAssignmentMetadataValue(7, 1700000000123),
                       "000c0003677270", "0000000000070100080000018bcfe5687b"),
    "target_member": (sgr.ShareGroupKey(13, "grp", "m-1"),
                      sgr.TargetAssignmentMemberValue(((T, (0, 2)), (T2, (1,)))),
                      "000d000367727000036d2d31",
                      "0000030123456789abcdef0fedcba98765432103000000000000000200111111111111111122222222222222220200"
                      "0000010000"),
    "current": (sgr.ShareGroupKey(14, "grp", "m-1"), sgr.CurrentMemberAssignmentValue(7, 6, 0, ((T, (0, 2)),)),
                "000e000367727000036d2d31",
                "0000000000070000000600020123456789abcdef0fedcba9876543210300000000000000020000"),
    "state": (sgr.ShareGroupKey(15, "grp"),
              sgr.StatePartitionMetadataValue(
                  initializing_topics=(sgr.TopicPartitionsInfo(T2, "b", (3,)),),
                  initialized_topics=(sgr.TopicPartitionsInfo(T, "a", (0, 1, 2)),),
                  deleting_topics=((T2, "c"),)),
              "000f0003677270",
              "000002111111111111111122222222222222220262020000000300020123456789abcdef0fedcba98765432102610400000000"
              "000000010000000200021111111111111111222222222222222202630000"),
    "member_tomb": (sgr.ShareGroupKey(10, "grp", "m-1"), None, "000a000367727000036d2d31", None),
    "group_tomb": (sgr.ShareGroupKey(11, "grp"), None, "000b0003677270", None),
}


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_records_as_kafka_writes_them(name: str) -> None:
    key, value, key_hex, value_hex = GOLDEN[name]
    assert sgr.encode_key(key).hex() == key_hex
    assert sgr.decode_key(bytes.fromhex(key_hex)) == key
    assert sgr.is_share_group_key(bytes.fromhex(key_hex))
    if value is None:
        assert value_hex is None and sgr.decode_value(key.record_type, None) is None
        assert sgr.tombstone(key.record_type, key.group_id, key.member_id) == (bytes.fromhex(key_hex), None)
        return
    assert value_hex is not None
    assert sgr.encode_value(value).hex() == value_hex
    assert sgr.decode_value(key.record_type, bytes.fromhex(value_hex)) == value
    assert sgr.record(key.group_id, value, key.member_id) == (bytes.fromhex(key_hex), bytes.fromhex(value_hex))


def test_other_consumer_offsets_keys_are_not_share_group_keys() -> None:
    assert not sgr.is_share_group_key(bytes.fromhex("00020003677270"))  # GroupMetadataKey
    assert not sgr.is_share_group_key(bytes.fromhex("0001000367727000"))  # OffsetCommitKey
    assert not sgr.is_share_group_key(bytes.fromhex("0003"))  # ConsumerGroupMetadata
    assert not sgr.is_share_group_key(None) and not sgr.is_share_group_key(b"\x00")


@pytest.mark.parametrize("key_hex,value_hex", [
    ("000b", None), ("000b0003677270ff", None), ("000a0003677270", None),  # truncated, trailing, missing member
    ("00100003677270", None),  # record type 16 is not a share group's
    ("000b0003677270", "00010000000700"),  # unknown value version
    ("000b0003677270", "0000000000070123456789abcdef"),  # no tagged-field section
    ("000d000367727000036d2d31", "0000ff"),  # array count runs past the end
    ("000c0003677270", "0000000000070100040000018b"),  # assignment timestamp of 4 bytes
    ("000a000367727000036d2d31", "000000"),  # null client id
])
def test_malformed_records_are_refused(key_hex: str, value_hex: str | None) -> None:
    with pytest.raises(sgr.ShareGroupRecordError):
        key = sgr.decode_key(bytes.fromhex(key_hex))
        sgr.decode_value(key.record_type, bytes.fromhex(value_hex) if value_hex is not None else b"")


# ------------------------------------------------------------------------------------------- replay


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000

    def __call__(self) -> int:
        return self.now


def make(known: dict[str, tuple[uuid.UUID, int]], clock: Clock | None = None) -> ShareGroups:
    return ShareGroups(clock or Clock(), known.get, lambda _g: ShareGroupSettings(45_000, 5_000))


def reload(records: list[tuple[str, sgr.Record]], known: dict[str, tuple[uuid.UUID, int]],
           clock: Clock | None = None) -> ShareGroups:
    """A new coordinator that replays what the old one wrote, through the bytes."""
    fresh = make(known, clock)
    for _, (k, v) in records:
        fresh.replay(k, v)
    return fresh


def summary(groups: ShareGroups) -> dict[str, tuple[object, ...]]:
    return {gid: (g.group_epoch, g.assignment_epoch, dict(g.topics), {
        mid: (m.member_epoch, m.previous_member_epoch, m.rack_id, m.client_id, m.client_host,
              m.subscribed_topic_names, m.assignment) for mid, m in g.members.items()})
        for gid, g in groups.groups.items()}


def test_a_groups_members_and_epochs_come_back_from_its_records() -> None:
    known = {"t1": (T, 3), "t2": (T2, 1)}
    groups = make(known)
    log: list[tuple[str, sgr.Record]] = []
    assert groups.heartbeat("g", "m1", 0, "rack-a", ["t1"], "c1", "/10.0.0.1").member_epoch == 2
    assert groups.heartbeat("g", "m2", 0, None, ["t1", "t2"], "c2", "/10.0.0.2").member_epoch == 4
    assert groups.heartbeat("g", "m1", 2, "rack-a", None).member_epoch == 4
    assert groups.heartbeat("other", "x", 0, None, ["t2"]).error_code == errors.NONE
    log += groups.drain_records()
    assert all(sgr.is_share_group_key(k) for _, (k, _v) in log)
    types = [sgr.decode_key(k).record_type for g, (k, _v) in log if g == "g"]
    # the first join: subscription, epoch, share-state topics, target assignment, its epoch, current assignment
    assert types[:6] == [10, 11, 15, 13, 12, 14]
    again = reload(log, known)
    assert summary(again) == summary(groups)
    assert again.groups["g"].members["m1"].deadline_ms == 1_000_000 + 45_000
    # the members carry on at their epochs: no UNKNOWN_MEMBER_ID, no new epoch, nothing to write
    r = again.heartbeat("g", "m1", 4, "rack-a", None)
    assert (r.error_code, r.member_epoch) == (errors.NONE, 4)
    assert again.heartbeat("g", "m2", 4, None, None).member_epoch == 4
    assert again.drain_records() == []
    assert again.heartbeat("g", "m2", 3, None, None).error_code == errors.FENCED_MEMBER_EPOCH
    # a new member joins at a higher epoch than any before the reload
    assert again.heartbeat("g", "m3", 0, None, ["t1"]).member_epoch == 5


def test_leaving_expiring_and_deleting_tombstone_the_group() -> None:
    known = {"t1": (T, 2)}
    clock = Clock()
    groups = make(known, clock)
    groups.heartbeat("g", "m1", 0, None, ["t1"])
    groups.heartbeat("g", "m2", 0, None, ["t1"])
    log = groups.drain_records()
    assert groups.heartbeat("g", "m1", -1, None, None).member_epoch == -1
    left = groups.drain_records()
    kinds = [(sgr.decode_key(k).record_type, sgr.decode_key(k).member_id, v is None) for _, (k, v) in left]
    assert kinds[:3] == [(14, "m1", True), (13, "m1", True), (10, "m1", True)]
    assert (11, None, False) in kinds and (12, None, False) in kinds  # the new group and assignment epochs
    log += left
    mid = reload(log, known, clock)
    assert summary(mid) == summary(groups) and set(mid.groups["g"].members) == {"m2"}
    clock.now += 45_001
    assert groups.expire_members() == [("g", "m2")]
    log += groups.drain_records()
    assert groups.delete_group("g") == errors.NONE
    deleted = groups.drain_records()
    assert [(sgr.decode_key(k).record_type, v) for _, (k, v) in deleted] == [(15, None), (12, None), (11, None)]
    log += deleted
    assert reload(log, known).groups == {}


def test_share_state_topics_survive_for_describe_and_delete() -> None:
    known = {"t1": (T, 2)}
    groups = make(known)
    groups.heartbeat("g", "m1", 0, None, ["t1"])
    groups.heartbeat("g", "m1", 2, None, None)
    groups.heartbeat("g", "m1", -1, None, None)
    empty = groups.create_empty("fresh")  # AlterShareGroupOffsets of an unknown group
    before = groups.image("fresh")
    empty.topics["t1"] = (T, 2)
    groups.record_change("fresh", before)
    again = reload(groups.drain_records(), known)
    assert again.groups["g"].topics == {"t1": (T, 2)} and again.groups["g"].state == "Empty"
    assert again.groups["fresh"].topics == {"t1": (T, 2)} and again.groups["fresh"].group_epoch == 0
    # the topic grew while the group was unloaded: the next join bumps the epoch once more than a join does
    known["t1"] = (T, 3)
    assert again.heartbeat("g", "m9", 0, None, ["t1"]).member_epoch == groups.groups["g"].group_epoch + 2


def test_unload_forgets_only_the_moved_groups() -> None:
    groups = make({"t1": (T, 1)})
    groups.heartbeat("a", "m", 0, None, ["t1"])
    groups.heartbeat("b", "m", 0, None, ["t1"])
    groups.heartbeat("b", "n", 0, None, ["t1"])
    assert groups.unload(lambda gid: gid == "b") == ["b"]
    assert set(groups.groups) == {"a"} and {g for g, _ in groups.drain_records()} == {"a"}


def test_metadata_hash_follows_the_topics() -> None:
    groups = make({"t1": (T, 1)})
    groups.heartbeat("g", "m", 0, None, ["t1"])
    g = groups.groups["g"]
    h = g.metadata_hash()
    assert -(2**63) <= h < 2**63 and h == g.metadata_hash()
    g.topics["t1"] = (T, 2)
    assert g.metadata_hash() != h


def test_a_steady_heartbeat_writes_only_what_changed_of_its_member() -> None:
    known = {"t1": (T, 4)}
    groups = make(known)
    groups.heartbeat("g", "m1", 0, None, ["t1"], "c1", "/h1")
    groups.heartbeat("g", "m2", 0, None, ["t1"], "c2", "/h2")
    log = groups.drain_records()
    assert groups.heartbeat("g", "m2", 3, None, None).member_epoch == 3
    assert groups.drain_records() == []  # nothing changed
    r = groups.heartbeat("g", "m1", 2, "rack-z", None, "c1-new", "/h1")  # a new epoch, rack and client id
    assert (r.member_epoch, r.assignment) == (3, {T: frozenset({0, 2})})
    changed = groups.drain_records()
    assert [(sgr.decode_key(k).record_type, sgr.decode_key(k).member_id) for _, (k, _v) in changed] == [
        (10, "m1"), (14, "m1")]
    assert sgr.decode_value(14, changed[1][1][1]) == sgr.CurrentMemberAssignmentValue(3, 2, 0, ((T, (0, 2)),))
    assert summary(reload(log + changed, known)) == summary(groups)


def test_random_bytes_decode_or_raise_the_record_error() -> None:
    rng = random.Random(932)
    samples = [sgr.encode_key(k) for k, _v, _kh, _vh in GOLDEN.values()]
    values = [(k.record_type, bytes.fromhex(vh)) for k, _v, _kh, vh in GOLDEN.values() if vh is not None]
    for _ in range(3000):
        key = bytearray(rng.choice(samples))
        record_type, value = rng.choice(values)
        raw = bytearray(value)
        for buf in (key, raw):
            for _ in range(rng.randint(0, 3)):
                if buf and rng.random() < 0.5:
                    buf[rng.randrange(len(buf))] = rng.randrange(256)
                else:
                    del buf[rng.randrange(len(buf) + 1):]
        with contextlib.suppress(sgr.ShareGroupRecordError):  # nothing else escapes
            sgr.decode_key(bytes(key))
        with contextlib.suppress(sgr.ShareGroupRecordError):
            sgr.decode_value(record_type, bytes(raw))
