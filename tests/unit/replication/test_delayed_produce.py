from odradek.protocol import errors
from odradek.protocol.records import build_batch, complete_batches_length
from odradek.purgatory import DelayedOperationPurgatory
from odradek.replication.delayed_produce import DelayedProduce

from ..fake_scheduler import FakeScheduler


def test_partial_trailing_batch_is_cut() -> None:
    a = build_batch([(b"k", b"v" * 50)], timestamp=1)
    b = build_batch([(b"k", b"w" * 80)], timestamp=2)
    assert complete_batches_length(a + b) == len(a) + len(b)
    assert complete_batches_length(a + b[:30]) == len(a)
    assert complete_batches_length(a[:5]) == 0
    assert complete_batches_length(b"") == 0


def test_completes_when_every_partition_is_replicated() -> None:
    hw = {("t", 0): 0, ("t", 1): 0}
    checked: list[tuple[str, int]] = []

    def check(tp: tuple[str, int], required: int) -> int | None:
        checked.append(tp)
        return errors.NONE if hw[tp] >= required else None

    purgatory: DelayedOperationPurgatory[tuple[str, int]] = DelayedOperationPurgatory("Produce", FakeScheduler())
    d = DelayedProduce({("t", 0): 5, ("t", 1): 3}, check, 5000)
    assert not purgatory.try_complete_else_watch(d, [("t", 0), ("t", 1)])
    hw[("t", 0)] = 5
    checked.clear()
    purgatory.check_and_complete(("t", 0))
    assert not d.completed and checked == [("t", 0)]  # a key check looks at that partition only
    hw[("t", 1)] = 9
    purgatory.check_and_complete(("t", 1))
    assert d.response == {("t", 0): errors.NONE, ("t", 1): errors.NONE}
    assert purgatory.delayed() == 0 and not purgatory.watchers


def test_times_out_with_request_timed_out() -> None:
    sched = FakeScheduler()
    purgatory: DelayedOperationPurgatory[tuple[str, int]] = DelayedOperationPurgatory("Produce", sched)
    hw = {("t", 0): 5, ("t", 1): 0}
    d = DelayedProduce({("t", 0): 5, ("t", 1): 5},
                       lambda tp, r: errors.NONE if hw[tp] >= r else None, 20)
    purgatory.try_complete_else_watch(d, [("t", 0), ("t", 1)])
    sched.advance(20)
    # the partition that made it keeps its outcome; the other one timed out
    assert d.response == {("t", 0): errors.NONE, ("t", 1): errors.REQUEST_TIMED_OUT}
    assert not purgatory.watchers


def test_partitions_decided_before_parking_keep_their_outcome() -> None:
    sched = FakeScheduler()
    purgatory: DelayedOperationPurgatory[tuple[str, int]] = DelayedOperationPurgatory("Produce", sched)
    hw = {("t", 1): 0}
    d = DelayedProduce({("t", 1): 4}, lambda tp, r: errors.NONE if hw[tp] >= r else None, 100,
                       {("t", 0): errors.NOT_LEADER_OR_FOLLOWER})
    purgatory.watch(d, [("t", 1)])
    assert not purgatory.is_watched(("t", 0))
    hw[("t", 1)] = 4
    purgatory.check_and_complete(("t", 1))
    assert d.response == {("t", 0): errors.NOT_LEADER_OR_FOLLOWER, ("t", 1): errors.NONE}
