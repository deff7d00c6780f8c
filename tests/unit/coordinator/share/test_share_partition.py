"""Kafka's SharePartition as odradek keeps it (coordinator/share/share_partition.py): each transition, the
acquisition locks on a fake clock, delivery-count archiving, the start offset, batch splitting, members leaving,
and state persisted through the share coordinator then loaded again (what survives a broker kill -9)."""

from __future__ import annotations

import uuid

import pytest

from odradek.coordinator.share.share_partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    AcquiredRecords,
    AutoOffsetReset,
    Pending,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    StateWrite,
)
from odradek.coordinator.share.share_state import (
    ShareCoordinatorShard,
    SharePartitionKey,
    StateBatch,
    WriteStateRequest,
)
from odradek.protocol import errors

TOPIC = uuid.UUID(int=932)
ACCEPT, RELEASE, REJECT, RENEW, GAP = (AcknowledgeType.ACCEPT, AcknowledgeType.RELEASE, AcknowledgeType.REJECT,
                                      AcknowledgeType.RENEW, AcknowledgeType.GAP)


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def make(clock: Clock | None = None, start: int = 0, **cfg: int | bool) -> tuple[SharePartition, Clock]:
    clock = clock or Clock()
    sp = SharePartition("g", TOPIC, 0, clock, SharePartitionConfig(**cfg))  # type: ignore[arg-type]
    sp.initialize(start, 0)
    return sp, clock


def ack(sp: SharePartition, member: str, first: int, last: int, *types: int, commit: bool = True) -> Pending:
    p = sp.acknowledge(member, [AcknowledgementBatch(first, last, tuple(types))])
    if commit and p.token is not None:
        sp.commit(p.token)
    return p


def state(sp: SharePartition, offset: int) -> tuple[RecordState, int, str] | None:
    return sp.offset_state(offset)


def test_acquire_then_accept_moves_the_start_offset() -> None:
    sp, _ = make()
    res = sp.acquire("m1", [(0, 4), (5, 9)], 100)
    assert res.records == (AcquiredRecords(0, 9, 1),) and res.count == 10
    assert sp.next_fetch_offset() == 10 and sp.end_offset == 9 and sp.in_flight_count() == 10
    assert state(sp, 3) == (RecordState.ACQUIRED, 1, "m1")
    p = ack(sp, "m1", 0, 9, ACCEPT, commit=False)
    assert p.error_code == errors.NONE and p.token is not None
    # the write carries the start offset as it was (Kafka writes before it moves the SPSO)
    assert p.write == StateWrite(0, 0, 0, (StateBatch(0, 9, 2, 1),), 10)
    assert sp.start_offset == 0  # in transition until the write is persisted
    sp.commit(p.token)
    assert sp.start_offset == 10 and sp.in_flight_count() == 0 and sp.next_fetch_offset() == 10


def test_release_makes_records_available_again_with_a_higher_delivery_count() -> None:
    sp, _ = make()
    sp.acquire("m1", [(0, 9)], 100)
    p = ack(sp, "m1", 0, 9, RELEASE)
    assert p.write is not None and p.write.batches == (StateBatch(0, 9, 0, 1),)
    assert state(sp, 0) == (RecordState.AVAILABLE, 1, "")
    assert sp.next_fetch_offset() == 0
    res = sp.acquire("m2", [(0, 9)], 100)
    assert res.records == (AcquiredRecords(0, 9, 2),)


def test_reject_and_gap_archive() -> None:
    sp, _ = make()
    sp.acquire("m1", [(0, 3)], 100)
    ack(sp, "m1", 0, 3, REJECT, GAP, ACCEPT, REJECT)
    assert sp.start_offset == 4
    assert sp.offset_state(0) is None  # below the SPSO


def test_acquisition_lock_expires_on_the_fake_clock() -> None:
    sp, clock = make(record_lock_duration_ms=30_000)
    sp.acquire("m1", [(0, 4)], 100)
    assert sp.next_lock_deadline() == 30_000
    clock.now = 29_999
    assert sp.expire_locks() is None
    assert state(sp, 0) == (RecordState.ACQUIRED, 1, "m1")
    clock.now = 30_000
    write = sp.expire_locks()
    assert write is not None and write.batches == (StateBatch(0, 4, 0, 1),)
    assert state(sp, 0) == (RecordState.AVAILABLE, 1, "")
    assert sp.next_lock_deadline() is None
    # an acknowledgement after the lock expired: INVALID_RECORD_STATE, nothing changes
    p = ack(sp, "m1", 0, 4, ACCEPT)
    assert p.error_code == errors.INVALID_RECORD_STATE
    assert state(sp, 0) == (RecordState.AVAILABLE, 1, "")


def test_expiry_runs_before_an_acknowledgement_and_is_returned_to_persist() -> None:
    sp, clock = make(record_lock_duration_ms=1_000)
    sp.acquire("m1", [(0, 1)], 100)
    clock.now = 500
    sp.acquire("m2", [(2, 3)], 100)
    clock.now = 1_200
    p = ack(sp, "m2", 2, 3, ACCEPT, commit=False)
    assert p.error_code == errors.NONE
    assert p.expired is not None and p.expired.batches == (StateBatch(0, 1, 0, 1),)


def test_delivery_count_limit_archives_released_and_timed_out_records() -> None:
    sp, clock = make(delivery_count_limit=2, record_lock_duration_ms=100)
    sp.acquire("m1", [(0, 0), (1, 1)], 100)
    ack(sp, "m1", 0, 1, RELEASE)
    res = sp.acquire("m1", [(0, 0), (1, 1)], 100)
    assert res.records == (AcquiredRecords(0, 1, 2),)
    ack(sp, "m1", 0, 0, RELEASE)  # released at the limit: archived
    assert sp.start_offset == 1
    clock.now = 1_000
    write = sp.expire_locks()  # offset 1 times out at the limit: archived too
    assert write is not None and write.batches == (StateBatch(1, 1, 4, 2),)
    assert sp.start_offset == 2 and sp.in_flight_count() == 0


def test_records_on_their_last_delivery_attempt_are_delivered_alone() -> None:
    sp, _ = make(delivery_count_limit=3)
    sp.acquire("m", [(0, 2)], 100)
    ack(sp, "m", 0, 2, RELEASE, RELEASE, ACCEPT)  # 0-1 available at count 1
    res = sp.acquire("m", [(0, 2)], 100)  # throttle limit max(2, ceil(3/2)) = 2 not reached: both
    assert res.records == (AcquiredRecords(0, 1, 2),)
    ack(sp, "m", 0, 1, RELEASE)
    res = sp.acquire("m", [(0, 2)], 100)  # count 2 = limit - 1: the last attempt, one record alone
    assert res.records == (AcquiredRecords(0, 0, 3),)
    res = sp.acquire("m", [(0, 2)], 100)
    assert res.records == (AcquiredRecords(1, 1, 3),)


def test_partial_acknowledgement_splits_the_batch() -> None:
    sp, _ = make()
    sp.acquire("m1", [(0, 9)], 100)
    ack(sp, "m1", 0, 4, ACCEPT)
    assert sp.start_offset == 5
    assert [state(sp, o) for o in (5, 9)] == [(RecordState.ACQUIRED, 1, "m1")] * 2
    p = ack(sp, "m1", 5, 9, ACCEPT, RELEASE, REJECT, ACCEPT, RELEASE)
    assert p.write is not None
    assert p.write.batches == (StateBatch(5, 5, 2, 1), StateBatch(6, 6, 0, 1), StateBatch(7, 7, 4, 1),
                               StateBatch(8, 8, 2, 1), StateBatch(9, 9, 0, 1))
    assert sp.start_offset == 6
    assert sp.offsets_in(RecordState.AVAILABLE) == [6, 9]
    res = sp.acquire("m2", [(5, 9)], 100)
    assert res.records == (AcquiredRecords(6, 6, 2), AcquiredRecords(9, 9, 2))


def test_two_members_acquire_disjoint_ranges_and_cannot_acknowledge_each_others() -> None:
    sp, _ = make()
    a = sp.acquire("m1", [(0, 4)], 100)
    b = sp.acquire("m2", [(0, 4), (5, 9)], 100)
    assert a.records == (AcquiredRecords(0, 4, 1),)
    assert b.records == (AcquiredRecords(5, 9, 1),)
    p = ack(sp, "m2", 0, 4, ACCEPT)
    assert (p.error_code, p.error_message) == (errors.INVALID_RECORD_STATE, "Member is not the owner of batch record")
    p = ack(sp, "m2", 3, 6, ACCEPT)  # spans both: nothing is acknowledged
    assert p.error_code == errors.INVALID_RECORD_STATE
    assert state(sp, 5) == (RecordState.ACQUIRED, 1, "m2") and state(sp, 3) == (RecordState.ACQUIRED, 1, "m1")


def test_a_member_leaving_releases_only_its_records() -> None:
    sp, _ = make()
    sp.acquire("m1", [(0, 4)], 100)
    sp.acquire("m2", [(5, 9)], 100)
    ack(sp, "m1", 0, 1, ACCEPT)
    p = sp.release_acquired_records("m1")
    # fetched, never delivered (Kafka 4.4's DeliveryCountOps.DECREASE): the acquisition does not count
    assert p.write is not None and p.write.batches == (StateBatch(2, 4, 0, 0),)
    assert p.token is not None
    sp.commit(p.token)
    assert sp.offsets_in(RecordState.AVAILABLE) == [2, 3, 4]
    assert sp.offsets_in(RecordState.ACQUIRED) == [5, 6, 7, 8, 9]
    assert sp.next_fetch_offset() == 2
    assert state(sp, 5) == (RecordState.ACQUIRED, 1, "m2")


def test_a_closed_session_releases_its_records_without_counting_the_delivery() -> None:
    """Kafka 4.4 (KAFKA-17541): records a member still holds when its share session closes (ShareAcknowledge or
    ShareFetch with epoch -1, the connection closing, the member leaving) were fetched but not delivered: the
    release lowers the delivery count again, never archives for the limit, and archives (count kept) below the
    SPSO. A lock timeout or an acknowledged RELEASE keeps the count."""
    sp, clock = make(delivery_count_limit=3, record_lock_duration_ms=1_000)
    assert sp.acquire("a", [(0, 0)], 100).records == (AcquiredRecords(0, 0, 1),)
    p = sp.release_acquired_records("a")
    assert p.token is not None and p.write is not None and p.write.batches == (StateBatch(0, 0, 0, 0),)
    sp.commit(p.token)
    assert state(sp, 0) == (RecordState.AVAILABLE, 0, "")
    assert sp.acquire("b", [(0, 0)], 100).records == (AcquiredRecords(0, 0, 1),)  # its first delivery again
    ack(sp, "b", 0, 0, RELEASE)
    assert sp.acquire("b", [(0, 0)], 100).records == (AcquiredRecords(0, 0, 2),)
    clock.now = 1_000
    assert sp.expire_locks() is not None
    assert sp.acquire("c", [(0, 0)], 100).records == (AcquiredRecords(0, 0, 3),)  # at the limit
    p = sp.release_acquired_records("c")  # not archived: this delivery did not happen
    assert p.token is not None
    sp.commit(p.token)
    assert state(sp, 0) == (RecordState.AVAILABLE, 2, "")
    assert sp.acquire("d", [(0, 0)], 100).records == (AcquiredRecords(0, 0, 3),)
    clock.now = 2_000
    assert sp.expire_locks() is not None  # the lock timeout at the limit archives
    assert sp.offsets_in(RecordState.ARCHIVED) == [] and sp.start_offset == 1
    # a failed write of the release puts everything back, count included
    assert sp.acquire("e", [(1, 4)], 100).records == (AcquiredRecords(1, 4, 1),)
    p = sp.release_acquired_records("e")
    assert p.token is not None and state(sp, 3) == (RecordState.AVAILABLE, 0, "")
    sp.rollback(p.token)
    assert state(sp, 3) == (RecordState.ACQUIRED, 1, "e")


def test_a_closed_session_archives_its_records_below_the_start_offset_with_their_count() -> None:
    sp, _ = make()
    sp.acquire("a", [(0, 4)], 100)
    sp.update_log_start_offset(3)  # retention: 0..2 are gone while acquired
    p = sp.release_acquired_records("a")
    assert p.write is not None and p.write.batches == (StateBatch(0, 2, 4, 1), StateBatch(3, 4, 0, 0))


def test_the_interleaving_seen_on_ci_gives_each_member_the_next_count() -> None:
    """issue 37's run, replayed on the fake clock: the other member's waiting fetch acquired the records first
    (count 1) and its client kept them buffered; after that lock the holder got them (count 2), after the holder's
    lock the other member again (count 3). The broker's counts never disagree; what disagreed was the client
    handing over its stale count-1 copy, which the integration test must not take for the redelivery."""
    sp, clock = make(record_lock_duration_ms=3_000)
    fetched = [(0, 4)]
    assert sp.acquire("other", fetched, 10).records == (AcquiredRecords(0, 4, 1),)
    assert sp.acquire("holder", fetched, 10).records == ()
    clock.now = 3_000
    assert sp.acquire("holder", fetched, 10).records == (AcquiredRecords(0, 4, 2),)
    assert ack(sp, "other", 0, 4, ACCEPT).error_code == errors.INVALID_RECORD_STATE  # the stale copy
    clock.now = 5_999
    assert sp.acquire("other", fetched, 10).records == ()
    clock.now = 6_000
    assert sp.acquire("other", fetched, 10).records == (AcquiredRecords(0, 4, 3),)


def test_soft_and_strict_record_limits_and_batch_size() -> None:
    sp, _ = make()
    res = sp.acquire("m", [(0, 4), (5, 9), (10, 14)], 7)  # soft: the batch holding the 7th record is taken whole
    assert res.records == (AcquiredRecords(0, 9, 1),)
    sp2, _ = make()
    res = sp2.acquire("m", [(0, 4), (5, 9), (10, 14)], 7, strict=True)
    assert res.records == (AcquiredRecords(0, 6, 1),)
    sp3, _ = make()
    res = sp3.acquire("m", [(0, 4), (5, 9), (10, 14)], 100, batch_size=5)
    assert res.records == (AcquiredRecords(0, 14, 1),)  # coalesced in the answer ...
    ack(sp3, "m", 5, 9, ACCEPT)  # ... but three in-flight batches: one acknowledged whole, no split
    assert sp3.offsets_in(RecordState.ACKNOWLEDGED) == [5, 6, 7, 8, 9]


def test_max_record_locks_bounds_the_in_flight_window() -> None:
    sp, _ = make(max_in_flight_records=10)
    fetched = [(i, i) for i in range(100)]
    assert sp.acquire("m", fetched, 500).records == (AcquiredRecords(0, 9, 1),)
    assert sp.acquire("m", fetched[10:], 500).count == 0  # at the limit, nothing past the window
    ack(sp, "m", 0, 3, ACCEPT)
    assert sp.acquire("m", fetched[10:], 500).records == (AcquiredRecords(10, 13, 1),)
    ack(sp, "m", 4, 5, RELEASE)  # at the limit, offsets inside the window are acquired again
    assert sp.acquire("m", fetched[4:], 500).records == (AcquiredRecords(4, 5, 2),)


def test_renew_extends_the_lock() -> None:
    sp, clock = make(record_lock_duration_ms=30_000)
    sp.acquire("m1", [(0, 4)], 100)
    clock.now = 20_000
    p = ack(sp, "m1", 0, 4, RENEW)
    assert (p.error_code, p.write, p.token) == (errors.NONE, None, None)
    clock.now = 45_000
    assert sp.expire_locks() is None and state(sp, 0) == (RecordState.ACQUIRED, 1, "m1")
    assert ack(sp, "m2", 0, 4, RENEW).error_code == errors.INVALID_RECORD_STATE
    clock.now = 50_000
    assert sp.expire_locks() is not None and state(sp, 0) == (RecordState.AVAILABLE, 1, "")
    sp2, _ = make(renew_acknowledge_enable=False)
    sp2.acquire("m1", [(0, 0)], 1)
    p = ack(sp2, "m1", 0, 0, RENEW)
    assert (p.error_code, p.error_message) == (errors.INVALID_RECORD_STATE,
                                               "Renewing acquisition locks is not enabled for the group.")


def test_renew_per_offset_with_other_types() -> None:
    sp, clock = make(record_lock_duration_ms=1_000)
    sp.acquire("m1", [(0, 2)], 100)
    clock.now = 900
    ack(sp, "m1", 0, 2, ACCEPT, RENEW, RELEASE)
    clock.now = 1_500
    sp.expire_locks()
    assert state(sp, 1) == (RecordState.ACQUIRED, 1, "m1")
    clock.now = 1_900
    sp.expire_locks()
    assert state(sp, 1) == (RecordState.AVAILABLE, 1, "")


@pytest.mark.parametrize(("batch", "code"), [
    (AcknowledgementBatch(0, 4, (9,)), errors.INVALID_REQUEST),
    (AcknowledgementBatch(0, 4, (1, 1)), errors.INVALID_REQUEST),
    (AcknowledgementBatch(4, 0, (1,)), errors.INVALID_REQUEST),
    (AcknowledgementBatch(0, 20, (1,)), errors.INVALID_REQUEST),
    (AcknowledgementBatch(12, 14, (1,)), errors.INVALID_REQUEST),
])
def test_bad_acknowledgements(batch: AcknowledgementBatch, code: int) -> None:
    sp, _ = make()
    sp.acquire("m", [(0, 9)], 100)
    p = sp.acknowledge("m", [AcknowledgementBatch(0, 1, (1,)), batch])
    assert p.error_code == code and p.token is None
    assert state(sp, 0) == (RecordState.ACQUIRED, 1, "m")  # all or nothing


def test_acknowledging_what_was_never_acquired() -> None:
    sp, _ = make(start=5)
    assert ack(sp, "m", 5, 6, ACCEPT).error_code == errors.INVALID_RECORD_STATE
    assert ack(sp, "m", 0, 3, ACCEPT).error_code == errors.NONE  # all below the SPSO: nothing to do


def test_rollback_when_the_write_fails() -> None:
    sp, _ = make()
    sp.acquire("m1", [(0, 4)], 100)
    p = ack(sp, "m1", 0, 4, ACCEPT, commit=False)
    assert p.token is not None
    # in transition: no second acknowledgement, not acquirable
    assert ack(sp, "m1", 0, 4, ACCEPT).error_code == errors.INVALID_RECORD_STATE
    sp.rollback(p.token)
    assert state(sp, 0) == (RecordState.ACQUIRED, 1, "m1") and sp.start_offset == 0
    assert ack(sp, "m1", 0, 4, ACCEPT).error_code == errors.NONE
    assert sp.start_offset == 5


def test_rollback_after_the_lock_expired_releases() -> None:
    sp, clock = make(record_lock_duration_ms=100)
    sp.acquire("m1", [(0, 0)], 100)
    p = ack(sp, "m1", 0, 0, ACCEPT, commit=False)
    clock.now = 200
    assert sp.expire_locks() is None  # in transition: the timeout waits
    assert p.token is not None
    sp.rollback(p.token)
    assert state(sp, 0) == (RecordState.AVAILABLE, 1, "")


def test_aborted_transactions_are_archived_not_delivered() -> None:
    sp, _ = make()
    res = sp.acquire("m", [(0, 2), (3, 5), (6, 9)], 100, aborted=[(3, 5)])
    assert res.records == (AcquiredRecords(0, 2, 1), AcquiredRecords(6, 9, 1)) and res.count == 7
    assert sp.offsets_in(RecordState.ARCHIVED) == [3, 4, 5]
    ack(sp, "m", 0, 2, ACCEPT)
    ack(sp, "m", 6, 9, ACCEPT)
    assert sp.start_offset == 10


def test_offsets_missing_from_the_log_are_archived() -> None:
    sp, _ = make()
    res = sp.acquire("m", [(5, 9)], 100, fetch_offset=0)  # 0-4 compacted away
    assert res.records == (AcquiredRecords(5, 9, 1),)
    ack(sp, "m", 5, 9, ACCEPT)
    assert sp.start_offset == 10


def test_log_start_offset_moving_archives_available_records() -> None:
    sp, _ = make()
    sp.acquire("m", [(0, 9)], 100)
    ack(sp, "m", 0, 9, RELEASE)
    sp.update_log_start_offset(6)
    assert sp.start_offset == 6 and sp.offsets_in(RecordState.AVAILABLE) == [6, 7, 8, 9]


class Offsets:
    def earliest(self) -> int:
        return 3

    def latest(self) -> int:
        return 42

    def for_timestamp(self, timestamp_ms: int) -> int:
        return timestamp_ms // 1000


def test_share_auto_offset_reset() -> None:
    clock = Clock()
    clock.now = 100_000
    for text, start in (("latest", 42), ("earliest", 3), ("by_duration:PT30S", 70), ("by_duration:P0DT1M", 40)):
        sp = SharePartition("g", TOPIC, 0, clock)
        sp.initialize(-1, 0, offsets=Offsets(), reset=AutoOffsetReset.parse(text))
        assert sp.start_offset == start and sp.next_fetch_offset() == start
    assert AutoOffsetReset.parse("by_duration:PT1.5S").duration_ms == 1500
    for bad in ("none", "by_duration:", "by_duration:-PT1S", "by_duration:PT", "by_duration:P1DT"):
        with pytest.raises(ValueError):
            AutoOffsetReset.parse(bad)


# ------------------------------------------------------------------ persisted, then loaded again

class Persisted:
    """A SharePartition whose writes go through the share coordinator, as the broker's will."""

    def __init__(self, clock: Clock, **cfg: int) -> None:
        self.key = SharePartitionKey("g", TOPIC, 0)
        self.shard = ShareCoordinatorShard(lambda t: 1, clock, snapshot_update_records_per_snapshot=3)
        self.shard.apply(self.shard.initialize_state(self.key, 0, 0))
        self.clock = clock
        self.cfg = cfg
        self.sp = self.load()

    def load(self) -> SharePartition:
        r = self.shard.apply(self.shard.read_state(self.key, 0))
        sp = SharePartition("g", TOPIC, 0, self.clock, SharePartitionConfig(**self.cfg))  # type: ignore[arg-type]
        sp.initialize(r.start_offset, r.state_epoch, r.state_batches)
        return sp

    def persist(self, write: StateWrite | None) -> None:
        if write is not None:
            res = self.shard.write_state(WriteStateRequest(
                self.key, write.state_epoch, write.leader_epoch, write.start_offset, write.batches,
                write.delivery_complete_count))
            assert self.shard.apply(res).error_code == errors.NONE

    def ack(self, member: str, first: int, last: int, *types: int) -> None:
        p = self.sp.acknowledge(member, [AcknowledgementBatch(first, last, tuple(types))])
        assert p.error_code == errors.NONE
        self.persist(p.expired)
        self.persist(p.write)
        if p.token is not None:
            self.sp.commit(p.token)


def test_state_written_then_replayed_gives_the_same_available_and_acknowledged_sets() -> None:
    clock = Clock()
    box = Persisted(clock, record_lock_duration_ms=1_000)
    sp = box.sp
    sp.acquire("m1", [(0, 9), (10, 19)], 100)
    box.ack("m1", 0, 4, ACCEPT)
    box.ack("m1", 5, 9, RELEASE, ACCEPT, REJECT, RELEASE, ACCEPT)
    box.ack("m1", 12, 13, ACCEPT)
    sp.acquire("m2", [(20, 29)], 100)  # in flight at the crash: redelivered after it
    box.ack("m2", 25, 25, ACCEPT)
    clock.now = 1_500
    box.persist(sp.expire_locks())  # m1's 10-11, 14-19 time out
    sp.acquire("m3", [(30, 34)], 100)  # acquired, never persisted
    done = set(sp.offsets_in(RecordState.ACKNOWLEDGED, RecordState.ARCHIVED))
    undelivered = set(range(sp.start_offset, 35)) - done
    # kill -9: only the share coordinator's records remain
    again = box.load()
    assert again.start_offset == sp.start_offset
    assert set(again.offsets_in(RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)) == done
    assert again.offsets_in(RecordState.ACQUIRED) == []
    got = set()
    while True:
        res = again.acquire("m9", [(o, o) for o in range(again.next_fetch_offset(), 35)], 100)
        if not res.records:
            break
        for r in res.records:
            got.update(range(r.first_offset, r.last_offset + 1))
            p = again.acknowledge("m9", [AcknowledgementBatch(r.first_offset, r.last_offset, (1,))])
            assert p.token is not None
            again.commit(p.token)
    assert got == undelivered  # every record not done is delivered again, none done is
    assert again.start_offset == 35


def test_delivery_counts_survive_a_restart() -> None:
    clock = Clock()
    box = Persisted(clock, delivery_count_limit=3)
    box.sp.acquire("m", [(0, 0)], 1)
    box.ack("m", 0, 0, RELEASE)
    box.sp.acquire("m", [(0, 0)], 1)
    box.ack("m", 0, 0, RELEASE)
    again = box.load()
    assert again.acquire("m", [(0, 0)], 1).records == (AcquiredRecords(0, 0, 3),)
    p = again.acknowledge("m", [AcknowledgementBatch(0, 0, (2,))])
    assert p.write is not None and p.write.batches == (StateBatch(0, 0, 4, 3),)  # released at the limit


def test_often_redelivered_records_come_in_halving_batches_then_alone() -> None:
    sp, _ = make(delivery_count_limit=5)  # throttling from delivery count max(2, ceil(5 / 2)) = 3
    fetched = [(0, 7)]
    for _ in range(3):
        sp.acquire("m", fetched, 100)
        ack(sp, "m", 0, 7, RELEASE)
    assert sp.acquire("m", fetched, 100).records == (AcquiredRecords(0, 3, 4),)  # 8 >> 1
    assert sp.acquire("m", fetched, 100).records == (AcquiredRecords(4, 7, 4),)
    ack(sp, "m", 0, 7, RELEASE)
    # count 4 = limit - 1: the last attempt, each record alone
    for o in range(8):
        assert sp.acquire("m", fetched, 100).records == (AcquiredRecords(o, o, 5),)
    ack(sp, "m", 0, 7, RELEASE)  # released at the limit: all archived
    assert sp.start_offset == 8


def test_a_restart_delivers_the_offsets_between_persisted_batches() -> None:
    sp, _ = make()
    sp.initialize(10, 3, [StateBatch(12, 13, 2, 1), StateBatch(16, 17, 0, 2)])
    assert (sp.start_offset, sp.state_epoch, sp.end_offset) == (10, 3, 17)
    assert sp.next_fetch_offset() == 10
    res = sp.acquire("m", [(10, 19)], 100)
    # 10-11 and 14-15 were not persisted (in flight at the crash): new, at count 1; 16-17 at count 3
    assert res.records == (AcquiredRecords(10, 11, 1), AcquiredRecords(14, 15, 1), AcquiredRecords(16, 17, 3),
                           AcquiredRecords(18, 19, 1))
    ack(sp, "m", 10, 11, ACCEPT)
    assert sp.start_offset == 14  # over 12-13, acknowledged before the crash
    assert sp.delivery_complete_count() == 0


def test_a_fenced_partition_acquires_nothing() -> None:
    sp, _ = make()
    sp.mark_fenced()
    assert sp.acquire("m", [(0, 9)], 100).count == 0


def test_initialized_state_batches_below_the_start_offset_are_cut() -> None:
    sp, _ = make()
    sp.initialize(5, 0, [StateBatch(0, 6, 0, 2), StateBatch(7, 7, 1, 1), StateBatch(8, 8, 3, 1)])
    # 5-6 kept at count 2; ACQUIRED (never persisted by Kafka) is loaded as AVAILABLE, ARCHIVING as ARCHIVED
    assert [state(sp, o) for o in (4, 5, 7, 8)] == [None, (RecordState.AVAILABLE, 2, ""),
                                                   (RecordState.AVAILABLE, 1, ""), (RecordState.ARCHIVED, 1, "")]
    assert sp.delivery_complete_count() == 1


def test_available_records_no_longer_in_the_log_are_archived() -> None:
    sp, _ = make()
    sp.acquire("m", [(0, 9)], 100)
    ack(sp, "m", 0, 9, RELEASE, RELEASE, RELEASE, ACCEPT, ACCEPT, RELEASE, ACCEPT, ACCEPT, ACCEPT, ACCEPT)
    # compaction removed 0-5 since: a read at 0 starts at 6
    res = sp.acquire("m", [(6, 9)], 100, fetch_offset=0)
    assert res.records == ()
    assert sp.start_offset == 10


def test_locks_survive_a_split_by_aborted_ranges_and_the_log_start_offset() -> None:
    sp, clock = make(record_lock_duration_ms=100)
    sp.acquire("m", [(0, 2), (3, 3)], 100, aborted=[(0, 2)])  # one in-flight batch, split by the archive
    clock.now = 100
    write = sp.expire_locks()
    assert write is not None and write.batches == (StateBatch(3, 3, 0, 1),)
    assert sp.offsets_in(RecordState.AVAILABLE) == [3]
    sp.acquire("m2", [(3, 9)], 100)
    sp.update_log_start_offset(6)  # splits 3-9, still held by m2
    clock.now = 200
    write = sp.expire_locks()
    # 4-5 fell below the SPSO: archived when their lock ends (Kafka does the same); 3 left the window whole
    assert write is not None and write.batches == (StateBatch(4, 5, 4, 1), StateBatch(6, 9, 0, 1))
    assert sp.offsets_in(RecordState.AVAILABLE) == [6, 7, 8, 9]
