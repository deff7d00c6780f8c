"""TransactionCoordinator scenarios against fake edges (log, markers, clock, producer ids)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from odradek.coordinator.transaction import records as rec
from odradek.coordinator.transaction.coordinator import (
    ADD_OFFSETS_TO_TXN,
    ADD_PARTITIONS_TO_TXN,
    END_TXN,
    INIT_PRODUCER_ID,
    EndTxnResult,
    InitProducerIdResult,
    ProducerIdUnavailable,
    TransactionConfig,
    TransactionCoordinator,
    error_for_version,
)
from odradek.coordinator.transaction.state import SHORT_MAX, TransactionResult, TransactionState
from odradek.protocol import errors

from ..fakes import FakeClock

S = TransactionState
TID = "my-txn"


class FakeLog:
    """__transaction_state: appends at once (or holds them, or fails them)."""

    def __init__(self) -> None:
        self.records: list[tuple[int, bytes, bytes | None]] = []
        self.fail: int | None = None
        self.hold = False
        self.held: list[tuple[int, list[tuple[bytes, bytes | None]], Callable[[int], None]]] = []

    def __call__(self, partition: int, records: list[tuple[bytes, bytes | None]],
                 on_done: Callable[[int], None]) -> None:
        if self.hold:
            self.held.append((partition, records, on_done))
            return
        if self.fail is not None:
            on_done(self.fail)
            return
        self.records += [(partition, k, v) for k, v in records]
        on_done(errors.NONE)

    def release(self, code: int = errors.NONE) -> None:
        held, self.held, self.hold = self.held, [], False
        for partition, records, on_done in held:
            if code == errors.NONE:
                self.records += [(partition, k, v) for k, v in records]
            on_done(code)

    def states(self, tid: str = TID) -> list[tuple[str, int, int]]:
        """(state, producer id, epoch) of each value written for ``tid``; ("tombstone", -1, -1)."""
        out = []
        for _, k, v in self.records:
            if rec.decode_key(k) != tid:
                continue
            d = rec.decode_value(v)
            out.append(("tombstone", -1, -1) if d is None else
                       (S.from_id(d.transaction_status).state_name, d.producer_id, d.producer_epoch))
        return out


class FakeMarkers:
    def __init__(self) -> None:
        self.sent: list[tuple[int, int, TransactionResult, frozenset[tuple[str, int]], int]] = []
        self.pending: list[Callable[[int], None]] = []
        self.auto = True

    def __call__(self, producer_id: int, producer_epoch: int, result: TransactionResult,
                 partitions: frozenset[tuple[str, int]], on_done: Callable[[int], None], *,
                 coordinator_epoch: int, transactional_id: str) -> None:
        self.sent.append((producer_id, producer_epoch, result, partitions, coordinator_epoch))
        if self.auto:
            on_done(errors.NONE)
        else:
            self.pending.append(on_done)

    def ack(self, code: int = errors.NONE) -> None:
        pending, self.pending = self.pending, []
        for cb in pending:
            cb(code)


class Ids:
    def __init__(self) -> None:
        self.next = 1000
        self.unavailable = False

    def __call__(self) -> int:
        if self.unavailable:
            raise ProducerIdUnavailable()
        self.next += 1
        return self.next - 1


class Env:
    def __init__(self, partitions: int = 1, coordinator_epoch: int = 1, **cfg: int) -> None:
        self.clock, self.log, self.markers, self.ids = FakeClock(), FakeLog(), FakeMarkers(), Ids()
        self.clock.t = 1000.0
        self.coord = TransactionCoordinator(TransactionConfig(num_partitions=partitions, **cfg), self.clock,
                                            self.log, self.markers, self.ids)
        for p in range(partitions):
            self.coord.begin_loading(p, coordinator_epoch)
            self.coord.finish_loading(p, coordinator_epoch)
        self.coord.start()

    def init(self, tid: str | None = TID, timeout: int = 60000, pid: int = -1, epoch: int = -1) -> InitProducerIdResult:
        box: list[InitProducerIdResult] = []
        self.coord.init_producer_id(tid, timeout, pid, epoch, box.append)
        assert len(box) == 1
        return box[0]

    def add(self, pid: int, epoch: int, parts: list[tuple[str, int]], tid: str = TID) -> int | None:
        box: list[int] = []
        self.coord.add_partitions(tid, pid, epoch, parts, box.append)
        return box[0] if box else None

    def end(self, pid: int, epoch: int, commit: bool, tid: str = TID) -> EndTxnResult | None:
        box: list[EndTxnResult] = []
        self.coord.end_txn(tid, pid, epoch, commit, box.append)
        return box[0] if box else None

    def md(self, tid: str = TID):  # type: ignore[no-untyped-def]
        return self.coord.metadata(tid)


PARTS = [("orders", 0), ("orders", 1), ("audit", 0)]


def test_init_add_commit_in_kafkas_order() -> None:
    env = Env()
    r = env.init()
    assert r == InitProducerIdResult(errors.NONE, 1000, 0)
    assert env.add(1000, 0, PARTS) == errors.NONE
    assert env.add(1000, 0, PARTS[:1]) == errors.NONE  # already there: nothing written
    env.markers.auto = False
    res = env.end(1000, 0, commit=True)
    assert res == EndTxnResult(errors.NONE, 1000, 0)  # answered once PrepareCommit is written
    assert env.log.states() == [("Empty", 1000, 0), ("Ongoing", 1000, 0), ("PrepareCommit", 1000, 0)]
    assert env.markers.sent == [(1000, 0, TransactionResult.COMMIT, frozenset(PARTS), 1)]
    # while the markers are being written
    assert env.end(1000, 0, commit=True) == EndTxnResult(errors.CONCURRENT_TRANSACTIONS)
    assert env.add(1000, 0, [("x", 0)]) == errors.CONCURRENT_TRANSACTIONS
    assert env.init(pid=1000, epoch=0).error_code == errors.CONCURRENT_TRANSACTIONS
    env.markers.ack()
    assert env.log.states()[-1] == ("CompleteCommit", 1000, 0)
    assert env.md().state is S.COMPLETE_COMMIT and not env.md().topic_partitions
    # the ongoing record carried the partitions, grouped by topic
    ongoing = rec.decode_value(env.log.records[1][2])
    assert ongoing is not None and ongoing.partitions() == frozenset(PARTS)
    assert ongoing.transaction_partitions == (("audit", (0,)), ("orders", (0, 1)))
    # retried EndTxn: same result is fine, the other one is not
    assert env.end(1000, 0, commit=True) == EndTxnResult(errors.NONE, 1000, 0)
    assert env.end(1000, 0, commit=False) == EndTxnResult(errors.INVALID_TXN_STATE)
    # the next transaction
    assert env.add(1000, 0, [("orders", 2)]) == errors.NONE
    assert env.md().topic_partitions == {("orders", 2)}


def test_abort_and_add_offsets() -> None:
    env = Env()
    env.init()
    box: list[int] = []
    env.coord.add_offsets(TID, 1000, 0, "my-group", box.append)
    assert box == [errors.NONE]
    tp = ("__consumer_offsets", rec.partition_for("my-group", 50))
    assert env.md().topic_partitions == {tp}
    assert env.end(1000, 0, commit=False) == EndTxnResult(errors.NONE, 1000, 0)
    assert [s for s, _, _ in env.log.states()] == ["Empty", "Ongoing", "PrepareAbort", "CompleteAbort"]
    assert env.markers.sent[-1][2:4] == (TransactionResult.ABORT, frozenset({tp}))
    assert env.end(1000, 0, commit=False) == EndTxnResult(errors.NONE, 1000, 0)
    assert env.end(1000, 0, commit=True) == EndTxnResult(errors.INVALID_TXN_STATE)


def test_end_txn_state_errors() -> None:
    env = Env()
    env.init()
    assert env.end(1000, 0, commit=True) == EndTxnResult(errors.INVALID_TXN_STATE)  # nothing begun
    assert env.end(1001, 0, commit=True) == EndTxnResult(errors.INVALID_PRODUCER_ID_MAPPING)
    assert env.end(1000, 0, commit=True, tid="unknown") == EndTxnResult(errors.INVALID_PRODUCER_ID_MAPPING)
    assert env.end(1000, 0, commit=True, tid="") == EndTxnResult(errors.INVALID_REQUEST)
    env.add(1000, 0, PARTS)
    env.markers.auto = False
    env.end(1000, 0, commit=True)
    assert env.end(1000, 0, commit=False) == EndTxnResult(errors.CONCURRENT_TRANSACTIONS)  # pending wins
    env.markers.ack()


def test_fencing_a_zombie() -> None:
    env = Env()
    a = env.init()
    assert env.add(a.producer_id, a.producer_epoch, PARTS) == errors.NONE
    # a new instance with the same transactional id: the ongoing transaction is aborted first
    env.markers.auto = False
    b = env.init()
    assert b == InitProducerIdResult(errors.CONCURRENT_TRANSACTIONS)
    assert env.log.states()[-1] == ("PrepareAbort", 1000, 1)
    assert env.markers.sent == [(1000, 1, TransactionResult.ABORT, frozenset(PARTS), 1)]
    assert env.init() == InitProducerIdResult(errors.CONCURRENT_TRANSACTIONS)  # still completing
    env.markers.ack()
    assert env.log.states()[-1] == ("CompleteAbort", 1000, 1)
    b = env.init()
    assert b == InitProducerIdResult(errors.NONE, 1000, 2)
    # the zombie, per request version (KIP-588's PRODUCER_FENCED, INVALID_PRODUCER_EPOCH before)
    res = env.end(1000, 0, commit=True)
    assert res is not None and res.error_code == errors.PRODUCER_FENCED
    assert error_for_version(res.error_code, END_TXN, 2) == errors.PRODUCER_FENCED
    assert error_for_version(res.error_code, END_TXN, 1) == errors.INVALID_PRODUCER_EPOCH
    code = env.add(1000, 0, PARTS)
    assert code == errors.PRODUCER_FENCED
    assert error_for_version(code, ADD_PARTITIONS_TO_TXN, 1) == errors.INVALID_PRODUCER_EPOCH
    assert error_for_version(code, ADD_PARTITIONS_TO_TXN, 2) == errors.PRODUCER_FENCED
    assert error_for_version(code, ADD_OFFSETS_TO_TXN, 1) == errors.INVALID_PRODUCER_EPOCH
    r = env.init(pid=1000, epoch=0)  # KIP-360 resume with a stale epoch
    assert r.error_code == errors.PRODUCER_FENCED
    assert error_for_version(r.error_code, INIT_PRODUCER_ID, 3) == errors.INVALID_PRODUCER_EPOCH
    assert error_for_version(r.error_code, INIT_PRODUCER_ID, 4) == errors.PRODUCER_FENCED
    assert env.init(pid=999, epoch=2).error_code == errors.PRODUCER_FENCED  # another producer id
    # the new instance works
    assert env.add(1000, 2, PARTS) == errors.NONE
    assert env.end(1000, 2, commit=True) == EndTxnResult(errors.NONE, 1000, 2)


@pytest.mark.parametrize("transaction_version", [1, 2])
def test_a_fence_ends_in_prepare_abort_only(transaction_version: int) -> None:
    """The coordinator ends a transaction it fenced with an abort; a commit under the fence is
    refused (INVALID_TXN_STATE) and the fence stays, under either transaction version (at
    version 1 this raised IllegalTransitionError out of the coordinator)."""
    env = Env(transaction_version=transaction_version)
    env.init()
    assert env.add(1000, 0, PARTS) == errors.NONE
    md = env.md()
    fence = md.prepare_fence_producer_epoch()
    box: list[EndTxnResult] = []
    env.coord._end_transaction(TID, fence.producer_id, fence.producer_epoch, TransactionResult.COMMIT, False,
                               box.append)
    assert box == [EndTxnResult(errors.INVALID_TXN_STATE)]
    assert (md.state, md.pending_state, md.producer_epoch) == (S.ONGOING, S.PREPARE_EPOCH_FENCE, 0)
    env.coord._end_transaction(TID, fence.producer_id, fence.producer_epoch, TransactionResult.ABORT, False,
                               box.append)
    bumped = 2 if transaction_version == 2 else 1  # version 2's PrepareAbort bumps the fence's epoch again
    assert box[1] == EndTxnResult(errors.NONE, 1000, bumped)
    assert env.log.states()[-2:] == [("PrepareAbort", 1000, bumped), ("CompleteAbort", 1000, bumped)]


def test_kip360_retry_gets_the_same_epoch() -> None:
    env = Env()
    env.init()
    env.end(1000, 0, True)
    assert env.init(pid=1000, epoch=0) == InitProducerIdResult(errors.NONE, 1000, 1)
    assert env.init(pid=1000, epoch=0) == InitProducerIdResult(errors.NONE, 1000, 1)  # lost answer, retried
    assert env.init(pid=1000, epoch=1) == InitProducerIdResult(errors.NONE, 1000, 2)


def test_timed_out_transaction_aborted_by_the_sweep() -> None:
    env = Env()
    r = env.init(timeout=5000)
    env.add(r.producer_id, r.producer_epoch, PARTS)
    env.clock.advance(5.0)  # the sweep at +10 s has not run yet
    assert env.md().state is S.ONGOING
    env.clock.advance(6.0)
    assert env.log.states()[-2:] == [("PrepareAbort", 1000, 1), ("CompleteAbort", 1000, 1)]
    assert env.markers.sent[-1] == (1000, 1, TransactionResult.ABORT, frozenset(PARTS), 1)
    # the old epoch is fenced (Kafka keeps no "last epoch" for a timeout abort)
    assert env.end(1000, 0, commit=True) == EndTxnResult(errors.PRODUCER_FENCED)
    assert env.add(1000, 0, PARTS) == errors.PRODUCER_FENCED
    # KIP-360/588: InitProducerId with the producer id and the current epoch bumps it and resumes
    assert env.init(pid=1000, epoch=1, timeout=5000) == InitProducerIdResult(errors.NONE, 1000, 2)
    assert env.add(1000, 2, PARTS) == errors.NONE
    assert env.end(1000, 2, commit=True) == EndTxnResult(errors.NONE, 1000, 2)
    # a transaction within its timeout is left alone
    env.add(1000, 2, PARTS)
    env.clock.advance(4.0)
    assert env.coord.abort_timed_out_transactions() == 0


def test_write_failure_leaves_state_unchanged() -> None:
    env = Env()
    env.init()
    env.log.fail = errors.NOT_ENOUGH_REPLICAS
    assert env.add(1000, 0, PARTS) == errors.COORDINATOR_NOT_AVAILABLE
    md = env.md()
    assert (md.state, md.topic_partitions, md.pending_state, md.txn_start_timestamp) == (S.EMPTY, set(), None, -1)
    env.log.fail = None
    assert env.add(1000, 0, PARTS) == errors.NONE
    env.log.fail = errors.NOT_LEADER_OR_FOLLOWER
    assert env.end(1000, 0, commit=True) == EndTxnResult(errors.NOT_COORDINATOR)
    assert (md.state, md.pending_state, md.producer_epoch) == (S.ONGOING, None, 0)
    assert env.init() == InitProducerIdResult(errors.NOT_COORDINATOR)  # the fence's abort failed
    assert md.producer_epoch == 1 and md.has_failed_epoch_fence and md.state is S.ONGOING  # as Kafka
    env.log.fail = None
    assert env.init() == InitProducerIdResult(errors.CONCURRENT_TRANSACTIONS)
    assert env.log.states()[-1] == ("CompleteAbort", 1000, 1)  # not bumped twice
    assert env.init() == InitProducerIdResult(errors.NONE, 1000, 2)


def test_reload_after_crash_in_prepare_commit() -> None:
    env = Env(coordinator_epoch=3)
    env.init()
    env.add(1000, 0, PARTS)
    env.markers.auto = False
    env.end(1000, 0, commit=True)
    written = list(env.log.records)  # the broker dies before the markers are all written
    assert env.log.states()[-1] == ("PrepareCommit", 1000, 0)

    new = Env(coordinator_epoch=1)
    new.coord.unload_partition(0)
    new.coord.begin_loading(0, 4)
    assert new.init().error_code == errors.COORDINATOR_LOAD_IN_PROGRESS
    assert new.coord.list_transactions().error_code == errors.COORDINATOR_LOAD_IN_PROGRESS
    for p, k, v in written:
        assert new.coord.replay(p, k, v)
    assert not new.coord.replay(0, b"\x00\x09junk", None)  # unreadable: skipped
    new.markers.auto = False
    new.coord.finish_loading(0, 4)
    assert new.coord.coordinator_epoch(0) == 4
    assert new.markers.sent == [(1000, 0, TransactionResult.COMMIT, frozenset(PARTS), 4)]
    assert new.end(1000, 0, commit=True) == EndTxnResult(errors.CONCURRENT_TRANSACTIONS)
    new.markers.ack()
    assert new.log.states() == [("CompleteCommit", 1000, 0)]
    assert new.end(1000, 0, commit=True) == EndTxnResult(errors.NONE, 1000, 0)
    # the old coordinator's late marker answer is dropped once it lost the partition
    env.coord.unload_partition(0, 3)
    env.markers.ack()
    assert env.log.states()[-1] == ("PrepareCommit", 1000, 0)


def test_unload_answers_not_coordinator() -> None:
    env = Env()
    env.init()
    env.log.hold = True
    box: list[int] = []
    env.coord.add_partitions(TID, 1000, 0, PARTS, box.append)
    assert env.coord.unload_partition(0) == 1
    env.log.release()
    assert box == [errors.NOT_COORDINATOR]  # written, but no longer ours to apply
    assert env.init() == InitProducerIdResult(errors.NOT_COORDINATOR)
    assert env.add(1000, 0, PARTS) == errors.NOT_COORDINATOR
    assert env.end(1000, 0, True) == EndTxnResult(errors.NOT_COORDINATOR)
    assert env.coord.describe_transactions([TID])[0].error_code == errors.NOT_COORDINATOR
    assert env.coord.verify_partitions(TID, 1000, 0, PARTS) == dict.fromkeys(PARTS, errors.NOT_COORDINATOR)
    assert env.coord.coordinator_epoch(0) is None


def test_reloaded_under_a_new_epoch_drops_old_callbacks() -> None:
    env = Env()
    env.init()
    env.log.hold = True
    box: list[int] = []
    env.coord.add_partitions(TID, 1000, 0, PARTS, box.append)
    records = [(p, k, v) for p, recs, _ in env.log.held for k, v in recs]
    env.coord.begin_loading(0, 2)
    for p, k, v in env.log.records:
        env.coord.replay(p, k, v)
    env.coord.finish_loading(0, 2)
    env.log.release()
    assert box == [errors.NOT_COORDINATOR]
    assert env.md().state is S.EMPTY and env.md().pending_state is None
    assert records  # the held write is the one answered


def test_epoch_exhaustion_rotates_the_producer_id() -> None:
    env = Env()
    env.init()
    md = env.md()
    md.producer_epoch = SHORT_MAX - 2  # as if loaded after many bumps
    assert env.init() == InitProducerIdResult(errors.NONE, 1000, SHORT_MAX - 1)
    assert env.init() == InitProducerIdResult(errors.NONE, 1001, 0)  # exhausted: a new producer id
    assert env.log.states()[-1] == ("Empty", 1001, 0)
    value = rec.decode_value(env.log.records[-1][2])
    assert value is not None and value.previous_producer_id == 1000
    # KIP-360 with the exhausted epoch: rotation remembering it, and its retry is answered again
    md.producer_epoch = SHORT_MAX - 1
    assert env.init(pid=1001, epoch=SHORT_MAX - 1) == InitProducerIdResult(errors.NONE, 1002, 0)
    assert env.init(pid=1001, epoch=SHORT_MAX - 1) == InitProducerIdResult(errors.NONE, 1002, 0)
    assert env.init(pid=1001, epoch=SHORT_MAX - 2).error_code == errors.PRODUCER_FENCED
    # fencing an ongoing transaction at the last epoch: aborted under Short.MaxValue, then rotated
    md.producer_epoch = SHORT_MAX - 1
    env.add(1002, SHORT_MAX - 1, PARTS)
    assert env.init() == InitProducerIdResult(errors.CONCURRENT_TRANSACTIONS)
    assert env.log.states()[-2:] == [("PrepareAbort", 1002, SHORT_MAX), ("CompleteAbort", 1002, SHORT_MAX)]
    assert env.init() == InitProducerIdResult(errors.NONE, 1003, 0)


def test_transactional_id_expiration() -> None:
    env = Env(transactional_id_expiration_ms=60_000, remove_expired_transaction_cleanup_interval_ms=30_000)
    env.init()
    env.init(tid="busy")
    env.add(1001, 0, PARTS, tid="busy")
    env.clock.advance(50)
    assert env.md() is not None
    env.clock.advance(40)  # the sweep at +90 s: idle for more than 60 s
    assert env.md() is None
    assert env.log.states()[-1] == ("tombstone", -1, -1)
    assert env.coord.metadata("busy") is not None  # Ongoing never expires (it is aborted instead)
    # a failed tombstone keeps the id
    env.init(tid="other")
    env.log.fail = errors.NOT_ENOUGH_REPLICAS
    env.clock.advance(30 * 4)
    md = env.coord.metadata("other")
    assert md is not None and md.pending_state is None
    # replaying the tombstone forgets the id
    env.log.fail = None
    env.coord.begin_loading(0, 2)
    for p, k, v in env.log.records:
        env.coord.replay(p, k, v)
    env.coord.finish_loading(0, 2)
    assert env.md() is None and env.coord.metadata("other") is not None


def test_describe_and_list() -> None:
    env = Env()
    env.init()
    env.add(1000, 0, PARTS)
    env.init(tid="idle")
    env.clock.advance(2)
    d = env.coord.describe_transactions([TID, "nope", ""])
    assert d[0].error_code == errors.NONE and d[0].state == "Ongoing" and d[0].producer_id == 1000
    assert d[0].topics == {"audit": [0], "orders": [0, 1]} and d[0].transaction_start_time_ms == 1_000_000
    assert d[1].error_code == errors.TRANSACTIONAL_ID_NOT_FOUND
    assert d[2].error_code == errors.INVALID_REQUEST
    everything = env.coord.list_transactions()
    assert sorted((t.transactional_id, t.state) for t in everything.transactions) == [
        ("idle", "Empty"), (TID, "Ongoing")]
    only = env.coord.list_transactions(["Ongoing", "Bogus"])
    assert [t.transactional_id for t in only.transactions] == [TID] and only.unknown_state_filters == ["Bogus"]
    assert [t.transactional_id for t in env.coord.list_transactions(producer_id_filters=[1001]).transactions] == [
        "idle"]
    running = env.coord.list_transactions(["Ongoing"], duration_filter_ms=1500)
    assert [t.transactional_id for t in running.transactions] == [TID]
    assert env.coord.list_transactions(["Ongoing"], duration_filter_ms=5000).transactions == []
    # KIP-1152: an RE2 pattern the whole id must match; null or empty: all; an invalid one is refused
    assert [t.transactional_id for t in env.coord.list_transactions(transactional_id_pattern="id.*").transactions] \
        == ["idle"]
    assert env.coord.list_transactions(transactional_id_pattern="idl").transactions == []  # not a search
    assert len(env.coord.list_transactions(transactional_id_pattern="").transactions) == 2
    for bad in ("(", "(?=i)dle", "(i)\\1dle", "id**"):  # RE2 has no lookahead or backreference
        refused = env.coord.list_transactions(transactional_id_pattern=bad)
        assert refused.error_code == errors.INVALID_REGULAR_EXPRESSION and refused.transactions == [], bad
    env.coord.shutdown()
    assert env.coord.list_transactions().error_code == errors.COORDINATOR_NOT_AVAILABLE


def test_verify_only_add_partitions() -> None:
    env = Env()
    env.init()
    env.add(1000, 0, PARTS[:1])
    v = env.coord.verify_partitions(TID, 1000, 0, PARTS[:2])
    assert v == {PARTS[0]: errors.NONE, PARTS[1]: errors.TRANSACTION_ABORTABLE}
    assert env.coord.verify_partitions(TID, 1000, 1, PARTS[:1]) == {PARTS[0]: errors.PRODUCER_FENCED}
    assert env.coord.verify_partitions("x", 1000, 0, PARTS[:1]) == {PARTS[0]: errors.INVALID_PRODUCER_ID_MAPPING}
    assert env.coord.verify_partitions("", 1000, 0, PARTS[:1]) == {PARTS[0]: errors.INVALID_REQUEST}
    assert len(env.log.records) == 2  # nothing written by verification


def test_init_producer_id_arguments() -> None:
    env = Env(transaction_max_timeout_ms=10_000)
    assert env.init(tid=None) == InitProducerIdResult(errors.NONE, 1000, 0)  # idempotent producer
    assert env.init(tid="") == InitProducerIdResult(errors.INVALID_REQUEST)
    assert env.init(timeout=10_001) == InitProducerIdResult(errors.INVALID_TRANSACTION_TIMEOUT)
    assert env.init(timeout=0) == InitProducerIdResult(errors.INVALID_TRANSACTION_TIMEOUT)
    assert env.init(pid=5) == InitProducerIdResult(errors.INVALID_REQUEST)  # producer id without epoch
    env.ids.unavailable = True
    assert env.init(timeout=5000) == InitProducerIdResult(errors.COORDINATOR_LOAD_IN_PROGRESS)
    assert env.init(tid=None) == InitProducerIdResult(errors.COORDINATOR_LOAD_IN_PROGRESS)
    env.ids.unavailable = False
    # a new transactional id resuming with an id and epoch it cannot know: the fresh metadata accepts it
    assert env.init(pid=77, epoch=3, timeout=5000) == InitProducerIdResult(errors.NONE, 1001, 0)


def test_marker_and_completion_failures_are_retried() -> None:
    env = Env()
    env.init()
    env.add(1000, 0, PARTS)
    env.markers.auto = False
    env.end(1000, 0, commit=True)
    env.markers.ack(errors.NOT_LEADER_OR_FOLLOWER)
    assert len(env.markers.sent) == 1
    env.clock.advance(0.2)
    assert len(env.markers.sent) == 2  # sent again after the backoff
    env.log.fail = errors.NOT_ENOUGH_REPLICAS
    env.markers.ack()
    assert env.md().pending_state is S.COMPLETE_COMMIT  # kept while the completion is retried
    env.log.fail = None
    env.clock.advance(0.2)
    assert env.log.states()[-1] == ("CompleteCommit", 1000, 0)
    assert env.md().state is S.COMPLETE_COMMIT and env.md().pending_state is None


def test_partition_and_value_version_config() -> None:
    env = Env(partitions=3, log_value_version=0)
    env.init(tid="a")
    p, k, v = env.log.records[0]
    assert p == rec.partition_for("a", 3) == env.coord.partition_for("a")
    assert v is not None and v[:2] == b"\x00\x00"  # TransactionLogValue version 0
    assert env.coord.owned_partitions() == {0, 1, 2}


@pytest.mark.parametrize("code,expected", [
    (errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND, errors.COORDINATOR_NOT_AVAILABLE),
    (errors.REQUEST_TIMED_OUT, errors.COORDINATOR_NOT_AVAILABLE),
    (errors.KAFKA_STORAGE_ERROR, errors.NOT_COORDINATOR),
    (errors.RECORD_LIST_TOO_LARGE, errors.UNKNOWN_SERVER_ERROR),
])
def test_append_errors_mapped_as_kafka(code: int, expected: int) -> None:
    env = Env()
    env.log.fail = code
    assert env.init().error_code == expected


def test_an_edge_that_raises_counts_as_a_failed_call() -> None:
    from odradek.coordinator.group.coordinator import WriteError

    env = Env()
    env.init()

    def raising_write(partition: int, records: list[tuple[bytes, bytes | None]],
                      on_done: Callable[[int], None]) -> None:
        raise WriteError(errors.NOT_COORDINATOR)

    env.coord._write = raising_write
    assert env.add(1000, 0, PARTS) == errors.NOT_COORDINATOR
    assert env.md().pending_state is None and env.md().state is S.EMPTY

    def broken_write(partition: int, records: list[tuple[bytes, bytes | None]],
                     on_done: Callable[[int], None]) -> None:
        raise RuntimeError("bug")

    env.coord._write = broken_write
    assert env.add(1000, 0, PARTS) == errors.UNKNOWN_SERVER_ERROR
    assert env.md().pending_state is None


def test_an_edge_calling_back_twice_counts_once() -> None:
    """A log write or a marker send that calls back twice (or calls back after raising) is
    answered once: the first call back counts, for every edge (the coordinator's _call_edge)."""
    env = Env()
    env.init()
    inner_write = env.coord._write

    def twice_write(partition: int, records: list[tuple[bytes, bytes | None]],
                    on_done: Callable[[int], None]) -> None:
        inner_write(partition, records, on_done)
        on_done(errors.NOT_ENOUGH_REPLICAS)

    env.coord._write = twice_write
    answers: list[int] = []
    env.coord.add_partitions(TID, 1000, 0, PARTS, answers.append)
    assert answers == [errors.NONE] and env.md().state is S.ONGOING

    def twice_markers(producer_id: int, producer_epoch: int, result: TransactionResult,
                      partitions: frozenset[tuple[str, int]], on_done: Callable[[int], None], *,
                      coordinator_epoch: int, transactional_id: str) -> None:
        on_done(errors.NONE)
        on_done(errors.NOT_LEADER_OR_FOLLOWER)

    env.coord._send_markers = twice_markers
    assert env.end(1000, 0, commit=True) == EndTxnResult(errors.NONE, 1000, 0)
    env.clock.advance(1.0)  # no retry was scheduled by the second call back
    assert env.log.states()[-2:] == [("PrepareCommit", 1000, 0), ("CompleteCommit", 1000, 0)]
    assert env.md().state is S.COMPLETE_COMMIT and env.md().pending_state is None

    def late_after_raise(partition: int, records: list[tuple[bytes, bytes | None]],
                         on_done: Callable[[int], None]) -> None:
        env.clock.call_later(0.1, lambda: inner_write(partition, records, on_done))
        raise RuntimeError("bug")

    env.coord._write = late_after_raise
    answers.clear()
    env.coord.add_partitions(TID, 1000, 0, PARTS, answers.append)
    env.clock.advance(1.0)
    assert answers == [errors.UNKNOWN_SERVER_ERROR]
    assert env.md().state is S.COMPLETE_COMMIT and env.md().pending_state is None


def test_replay_skips_states_never_written() -> None:
    env = Env()
    env.init()
    env.coord.begin_loading(0, 2)
    for p, k, v in env.log.records:
        assert env.coord.replay(p, k, v)
    for state in (S.DEAD, S.PREPARE_EPOCH_FENCE):
        value = rec.encode_value(rec.TransactionLogValue(1000, 5, 60000, state.id, None, 1, -1))
        assert not env.coord.replay(0, rec.encode_key(TID), value)
    env.coord.finish_loading(0, 2)
    assert env.md().state is S.EMPTY and env.md().producer_epoch == 0
    assert env.init() == InitProducerIdResult(errors.NONE, 1000, 1)


def test_a_loaded_record_contradicting_itself_does_not_raise_out_of_callbacks() -> None:
    env = Env()
    env.coord.begin_loading(0, 2)
    bad = rec.TransactionLogValue(1000, 0, 60000, S.PREPARE_COMMIT.id, (("t", (0,)),), 1, -1)  # no start time
    assert env.coord.replay(0, rec.encode_key(TID), rec.encode_value(bad))
    env.coord.finish_loading(0, 2)  # markers sent; the completion cannot be applied
    assert env.markers.sent and env.md().pending_state is None and env.md().state is S.PREPARE_COMMIT


def test_transaction_topic_configs() -> None:
    from odradek.coordinator.transaction.coordinator import transaction_topic_configs

    assert transaction_topic_configs() == {
        "cleanup.policy": "compact", "compression.type": "uncompressed", "unclean.leader.election.enable": "false",
        "min.insync.replicas": "2", "segment.bytes": "104857600",
    }
