"""Property: whatever members, acknowledgements, releases, lock timeouts, failed writes, the log cleaner, retention
and broker restarts (kill -9: only what the share coordinator persisted remains) do, no offset is ever held by two
members at once, no ACCEPTed offset is delivered again, no record of an aborted transaction is delivered,
acknowledging what a member does not hold fails, and every record ends up accepted, rejected or archived at the
delivery count limit (nothing is lost)."""

from __future__ import annotations

import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.coordinator.share.share_partition import (
    AcknowledgementBatch,
    AcknowledgeType,
    Pending,
    RecordState,
    SharePartition,
    SharePartitionConfig,
    StateWrite,
)
from odradek.coordinator.share.share_state import ShareCoordinatorShard, SharePartitionKey, WriteStateRequest
from odradek.protocol import errors

MEMBERS = ("a", "b", "c")
TOPIC = uuid.UUID(int=1)


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


class Model:
    def __init__(self, clock: Clock, cfg: SharePartitionConfig, log: list[tuple[int, int]],
                 aborted: list[tuple[int, int]]) -> None:
        self.clock = clock
        self.cfg = cfg
        self.log = log
        self.aborted = aborted  # read_committed: batches of aborted transactions
        self.limit = cfg.delivery_count_limit
        self.key = SharePartitionKey("g", TOPIC, 0)
        self.shard = ShareCoordinatorShard(lambda t: 1, clock, snapshot_update_records_per_snapshot=4)
        self.shard.apply(self.shard.initialize_state(self.key, 0, 0))
        self.held: dict[int, str] = {}  # offset -> member holding its acquisition lock
        self.accepted: set[int] = set()
        self.rejected: set[int] = set()
        self.max_delivery: dict[int, int] = {}
        # token -> (offsets in transition, accepted, rejected, the write to persist on success)
        self.pending: dict[int, tuple[set[int], set[int], set[int], StateWrite | None]] = {}
        self.sp = self.load()

    def load(self) -> SharePartition:
        r = self.shard.apply(self.shard.read_state(self.key, 0))
        assert r.error_code == errors.NONE
        sp = SharePartition("g", TOPIC, 0, self.clock, self.cfg)
        sp.initialize(r.start_offset, r.state_epoch, r.state_batches)
        return sp

    def restart(self) -> None:
        """kill -9: the in-memory state and the pending writes are gone; the members' locks with them."""
        self.sp = self.load()
        self.held.clear()
        self.pending.clear()

    def persist(self, write: StateWrite | None) -> None:
        if write is not None:
            res = self.shard.write_state(WriteStateRequest(
                self.key, write.state_epoch, write.leader_epoch, write.start_offset, write.batches,
                write.delivery_complete_count))
            assert self.shard.apply(res).error_code == errors.NONE

    def fetched(self, start: int, n: int) -> list[tuple[int, int]]:
        return [b for b in self.log if b[1] >= start][:n]

    def acquire(self, member: str, n_batches: int, max_records: int, strict: bool) -> None:
        start = self.sp.next_fetch_offset()
        res = self.sp.acquire(member, self.fetched(start, n_batches), max_records, fetch_offset=start, strict=strict,
                              aborted=self.aborted)
        self.persist(res.write)
        for r in res.records:
            for o in range(r.first_offset, r.last_offset + 1):
                assert not any(a <= o <= b for a, b in self.aborted), f"aborted offset {o} delivered"
                assert o not in self.held, f"offset {o} acquired by {member} while {self.held[o]} holds it"
                assert o not in self.accepted, f"accepted offset {o} delivered again"
                assert r.delivery_count <= self.limit
                self.held[o] = member
                self.max_delivery[o] = max(self.max_delivery.get(o, 0), r.delivery_count)
        self.refresh()

    def in_transition(self) -> set[int]:
        out: set[int] = set()
        for offs, _, _, _ in self.pending.values():
            out |= offs
        return out

    def refresh(self) -> None:
        busy = self.in_transition()
        for o, m in list(self.held.items()):
            st_ = self.sp.offset_state(o)
            if o in busy or (st_ is not None and st_[0] is RecordState.ACQUIRED and st_[2] == m):
                continue
            del self.held[o]

    def track(self, p: Pending, offsets: set[int], accept: set[int], reject: set[int]) -> None:
        self.persist(p.expired)
        if p.token is not None:
            self.pending[p.token] = (offsets, accept, reject, p.write)

    def ack(self, member: str, pick: int, length: int, types: list[int], garbage: bool) -> None:
        busy = self.in_transition()
        mine = sorted(o for o, m in self.held.items() if m == member and o not in busy)
        if garbage or not mine:  # anything: it succeeds exactly when the member holds every offset from the SPSO on
            first = pick % (self.log[-1][1] + 2)
            offs = set(range(first, first + length + 1)) if types[0] != AcknowledgeType.RENEW else set()
            start = self.sp.start_offset
            relevant = [o for o in range(first, first + length + 1) if o >= start]
            expect_ok = all(self.held.get(o) == member and o not in busy for o in relevant)
            p = self.sp.acknowledge(member, [AcknowledgementBatch(first, first + length, (types[0],))])
            if expect_ok:
                assert p.error_code == 0, (p, first, length)
            else:
                assert p.error_code in (errors.INVALID_RECORD_STATE, errors.INVALID_REQUEST), (p, first, length)
            accept = offs if types[0] == AcknowledgeType.ACCEPT else set()
            reject = offs if types[0] in (AcknowledgeType.REJECT, AcknowledgeType.GAP) else set()
            self.track(p, offs, accept, reject)
            self.refresh()
            return
        first = mine[pick % len(mine)]
        last = first
        while last + 1 in mine and last - first + 1 < length:
            last += 1
        n = last - first + 1
        tys = tuple(types[i % len(types)] for i in range(n)) if len(types) > 1 else (types[0],)
        p = self.sp.acknowledge(member, [AcknowledgementBatch(first, last, tys)])
        assert p.error_code == 0, (p, first, last, tys)
        typed = {first + i: tys[i] if len(tys) > 1 else tys[0] for i in range(n)}
        accept = {o for o, t in typed.items() if t == AcknowledgeType.ACCEPT}
        reject = {o for o, t in typed.items() if t in (AcknowledgeType.REJECT, AcknowledgeType.GAP)}
        renewed = {o for o, t in typed.items() if t == AcknowledgeType.RENEW}  # not a transition: the lock may expire
        self.track(p, set(typed) - renewed, accept, reject)
        self.refresh()

    def finish(self, token: int, ok: bool) -> None:
        _, accept, reject, write = self.pending.pop(token)
        if ok:
            self.persist(write)
            self.sp.commit(token)
            self.accepted |= accept
            self.rejected |= reject
        else:
            self.sp.rollback(token)
        self.refresh()


ops = st.one_of(
    st.tuples(st.just("acquire"), st.sampled_from(MEMBERS), st.integers(1, 4), st.integers(1, 12), st.booleans()),
    st.tuples(st.just("ack"), st.sampled_from(MEMBERS), st.integers(0, 200), st.integers(0, 6),
              st.lists(st.sampled_from([0, 1, 2, 3, 4]), min_size=1, max_size=3), st.integers(0, 9)),
    st.tuples(st.just("leave"), st.sampled_from(MEMBERS)),
    st.tuples(st.just("tick"), st.integers(0, 150)),
    st.tuples(st.just("finish"), st.integers(0, 10), st.integers(0, 3)),
    st.tuples(st.just("compact"), st.integers(0, 100)),
    st.tuples(st.just("retention"), st.integers(0, 100)),
    st.tuples(st.just("restart")),
)


@settings(max_examples=500, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(1, 5), st.integers(0, 2), st.integers(0, 5)), min_size=1, max_size=15),
    limit=st.integers(2, 5),
    max_in_flight=st.integers(3, 40),
    program=st.lists(ops, max_size=60),
)
def test_no_double_acquisition_and_no_redelivery_of_accepted_records(
    sizes: list[tuple[int, int, int]], limit: int, max_in_flight: int, program: list[tuple]  # type: ignore[type-arg]
) -> None:
    log = []
    aborted = []
    pos = 0
    for size, hole, kind in sizes:  # record batches, with offsets compaction removed between some
        pos += hole
        log.append((pos, pos + size - 1))
        if kind == 0:
            aborted.append((pos, pos + size - 1))
        pos += size
    end = pos
    clock = Clock()
    cfg = SharePartitionConfig(max_in_flight_records=max_in_flight, delivery_count_limit=limit,
                               record_lock_duration_ms=100)
    m = Model(clock, cfg, log, aborted)
    for op in program:
        kind = op[0]
        if kind == "acquire":
            m.acquire(op[1], op[2], op[3], op[4])
        elif kind == "ack":
            m.ack(op[1], op[2], op[3], op[4], op[5] == 0)
        elif kind == "leave":
            busy = m.in_transition()
            held = {o for o, who in m.held.items() if who == op[1] and o not in busy}
            m.track(m.sp.release_acquired_records(op[1]), held, set(), set())
            m.refresh()
        elif kind == "tick":
            clock.now += op[1]
            m.persist(m.sp.expire_locks())
            m.refresh()
        elif kind == "finish" and m.pending:
            tokens = sorted(m.pending)
            m.finish(tokens[op[1] % len(tokens)], op[2] != 0)
        elif kind == "compact" and len(log) > 1:  # the cleaner removes a batch (never the last)
            del log[op[1] % (len(log) - 1)]
        elif kind == "retention" and len(log) > 1:  # the log start offset moves to a batch's base (not the last)
            lso = log[op[1] % (len(log) - 1)][0]
            del log[: op[1] % (len(log) - 1)]
            m.sp.update_log_start_offset(lso)
            m.refresh()
        elif kind == "restart":
            m.restart()
    drain(m, clock, end)
    in_log = {o for first, last in log for o in range(first, last + 1)}
    for o in in_log - {o for a, b in aborted for o in range(a, b + 1)}:
        assert o in m.accepted or o in m.rejected or m.max_delivery.get(o) == limit, o
    assert not (m.accepted & m.rejected)
    # a restart now: what was not persisted (archives of aborted or compacted records) is redone, nothing delivered
    m.restart()
    drain(m, clock, end)


def drain(m: Model, clock: Clock, end: int) -> None:
    """The pending writes succeed, the locks expire, one member accepts everything left (acquire() checks that
    nothing accepted comes back)."""
    for token in sorted(m.pending):
        m.finish(token, True)
    clock.now += 1_000
    m.persist(m.sp.expire_locks())
    m.refresh()
    for _ in range(10 * end + 10):
        sp = m.sp
        if sp.start_offset >= end:
            break
        before = (m.accepted.copy(), sp.start_offset)
        m.acquire("z", 100, 1_000, False)
        for o in sorted(o for o, who in m.held.items() if who == "z"):
            p = sp.acknowledge("z", [AcknowledgementBatch(o, o, (AcknowledgeType.ACCEPT,))])
            assert p.error_code == 0 and p.token is not None
            m.pending[p.token] = ({o}, {o}, set(), p.write)
            m.finish(p.token, True)
        assert (m.accepted, sp.start_offset) != before or sp.start_offset >= end, "no progress"
    assert m.sp.start_offset == end
