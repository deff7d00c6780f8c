"""KIP-630 in the quorum, on a fake clock: a follower behind the leader's log start is told of the latest
snapshot, fetches it with FetchSnapshot (in chunks, every message through kio), installs it and fetches the
log after it; the leader's answers to a bad FetchSnapshot; observers in DescribeQuorum; and the controller's
state machine reloaded from a snapshot of its committed image answering as the original does; a controller
writing a snapshot when its interval has passed on a fake clock, and restarting from it."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import random
import uuid
from pathlib import Path

import pytest

from odradek.cli.storage_cmd import format_storage
from odradek.kraft.controller import ControllerConfig, QuorumController
from odradek.kraft.raft_log import MetadataRaftLog
from odradek.kraft.state_machine import ControllerError, ControllerState, Heartbeat, NewTopic
from odradek.metadata.batches import read_batches, records_of
from odradek.metadata.features import METADATA_VERSION, bootstrap_records
from odradek.metadata.image import EMPTY_IMAGE, image_records
from odradek.metadata.log_store import (
    BOOTSTRAP_SNAPSHOT,
    image_of_snapshot,
    read_snapshot_file,
    snapshot_bytes,
)
from odradek.metadata.log_store import SnapshotId as FileSnapshotId
from odradek.metadata.records import BeginTransactionRecord, EndTransactionRecord, RecordAndVersion
from odradek.protocol import errors
from odradek.raft.client import OBSERVER_SESSION_TIMEOUT_MS, RaftReplica
from odradek.raft.log import OffsetAndEpoch, validate_offset_and_epoch
from odradek.raft.messages import (
    FetchRequest,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    Received,
    Send,
    SnapshotId,
    SnapshotInstalled,
)

from ..raft.harness import Harness
from .test_kraft import WireHarness
from .test_state_machine import MV, Log, register, unfence

DOWN = 3


def _disk(h: Harness, i: int) -> MetadataRaftLog:
    log = h.logs[i]
    assert isinstance(log, MetadataRaftLog)
    return log


def _replicate_without(h: Harness, down: int, rounds: int = 3) -> None:
    for _ in range(rounds):
        for i in h.ids:
            if i != down:
                h.tick(i)
        h.deliver_all(drop=lambda s, m: down in (s, m.destination))
        h.tick(1, h.now + h.config.fetch_max_wait_ms)
        h.deliver_all(drop=lambda s, m: down in (s, m.destination))


def _snapshot_at_high_watermark(h: Harness) -> FileSnapshotId:
    """The leader's snapshot of everything committed (an image with no records: the core does not read them)."""
    leader = _disk(h, 1)
    hw = h.replicas[1].high_watermark
    assert hw is not None
    leader.mlog.update_high_watermark(hw)
    epoch = h.replicas[1].epoch  # every entry is in the leader's epoch here
    return leader.mlog.write_snapshot(dataclasses.replace(EMPTY_IMAGE, offset=hw - 1, epoch=epoch), now_ms=h.now)


def test_a_follower_behind_the_log_start_fetches_the_snapshot_in_chunks_then_the_log(tmp_path: Path) -> None:
    h = WireHarness(tmp_path)
    h.config = dataclasses.replace(h.config, fetch_max_bytes=64)  # a snapshot of ~170 bytes comes in 3 chunks
    for i in h.ids:
        h.start(i)
    h.elect(1)
    h.append(1, b"a")
    h.replicate()
    assert _disk(h, DOWN).end_offset() == 2
    # 3 is down while the leader appends, snapshots twice and deletes what the newer snapshot covers
    h.pending = [(s, m) for s, m in h.pending if DOWN not in (s, m.destination)]
    h.append(1, b"b", b"c")
    _replicate_without(h, DOWN)
    first = _snapshot_at_high_watermark(h)
    h.append(1, b"d")
    _replicate_without(h, DOWN)
    second = _snapshot_at_high_watermark(h)
    leader = _disk(h, 1)
    leader.mlog.config = dataclasses.replace(leader.mlog.config, retention_bytes=0)
    assert leader.mlog.clean(h.now) == 1
    assert leader.start_offset() == second.end_offset > first.end_offset > 2
    assert leader.earliest_snapshot_id() == leader.latest_snapshot_id() == OffsetAndEpoch(second.epoch,
                                                                                           second.end_offset)
    assert validate_offset_and_epoch(leader, 2, h.replicas[1].epoch).snapshot
    assert validate_offset_and_epoch(leader, second.end_offset, second.epoch).valid
    h.append(1, b"e")  # after the snapshot: fetched from the log once the snapshot is in
    # 3 comes back: Fetch at 2 -> the snapshot's id -> FetchSnapshot x3 -> Fetch from its end offset
    h.start(DOWN)
    h.replicate(4)
    three = _disk(h, DOWN)
    installed = [e for e in h.effects[DOWN] if isinstance(e, SnapshotInstalled)]
    assert installed == [SnapshotInstalled(SnapshotId(second.end_offset, second.epoch))]
    chunks = h.sent(DOWN, FetchSnapshotRequest)
    size = (leader.mlog.dir / second.file_name).stat().st_size
    assert size > 128
    assert [s.message.position for s in chunks] == list(range(0, size, 64))  # type: ignore[union-attr]
    assert three.start_offset() == second.end_offset
    assert (three.mlog.dir / second.file_name).read_bytes() == (leader.mlog.dir / second.file_name).read_bytes()
    assert three.end_offset() == leader.end_offset()
    assert three.read(second.end_offset, 1 << 20) == leader.read(second.end_offset, 1 << 20)
    assert [e.value for e in three.read(second.end_offset, 1 << 20)] == [b"e"]
    one: RaftReplica = h.replicas[1]
    assert one.is_leader() and h.replicas[DOWN].high_watermark == one.high_watermark == leader.end_offset()


def test_fetch_snapshot_errors(tmp_path: Path) -> None:
    h = WireHarness(tmp_path)
    h.elect(1)
    h.append(1, b"a")
    h.replicate()
    sid = _snapshot_at_high_watermark(h)
    one = h.replicas[1]

    def ask(to: int, r: FetchSnapshotRequest) -> FetchSnapshotResponse:
        [send] = [e for e in h.replicas[to].handle(Received(2, 999, r), h.now) if isinstance(e, Send)
                  and e.correlation_id == 999]
        assert isinstance(send.message, FetchSnapshotResponse)
        return send.message

    ok = ask(1, FetchSnapshotRequest(None, 2, one.epoch, SnapshotId(sid.end_offset, sid.epoch), 10, 20))
    size = (_disk(h, 1).mlog.dir / sid.file_name).stat().st_size
    assert (ok.error_code, ok.size, ok.position, len(ok.unaligned_records)) == (errors.NONE, size, 10, 20)
    assert ask(1, FetchSnapshotRequest(None, 2, one.epoch, SnapshotId(99, 9), 0)).error_code == errors.SNAPSHOT_NOT_FOUND
    assert ask(1, FetchSnapshotRequest(None, 2, one.epoch, SnapshotId(sid.end_offset, sid.epoch), size)).error_code \
        == errors.POSITION_OUT_OF_RANGE
    assert ask(1, FetchSnapshotRequest(None, 2, one.epoch - 1, SnapshotId(sid.end_offset, sid.epoch), 0)).error_code \
        == errors.FENCED_LEADER_EPOCH
    assert ask(2, FetchSnapshotRequest(None, 3, one.epoch, SnapshotId(sid.end_offset, sid.epoch), 0)).error_code \
        == errors.NOT_LEADER_OR_FOLLOWER


def test_describe_quorum_lists_observers_with_their_fetch_time_and_offset() -> None:
    h = Harness(3)
    h.elect(1)
    h.append(1, b"a", b"b")
    h.replicate()
    one = h.replicas[1]
    hw = one.high_watermark
    t0 = h.now
    directory = uuid.uuid4()
    fetch = FetchRequest(None, 100, 0, one.epoch, 1, one.epoch, directory)
    h.deliver(100, Send(1, 7, fetch))
    q = one.describe_quorum(t0)
    assert [(o.replica_id, o.replica_directory_id, o.log_end_offset, o.last_fetch_timestamp) for o in q.observers] == [
        (100, directory, 1, t0)]
    assert one.high_watermark == hw  # an observer's fetch takes no part in the high watermark
    assert [v.replica_id for v in q.current_voters] == [1, 2, 3]
    # caught up at its next fetch
    h.now += 10
    h.deliver(100, Send(1, 8, dataclasses.replace(fetch, fetch_offset=_end(h))))
    [obs] = one.describe_quorum(h.now).observers
    assert obs.log_end_offset == _end(h) and obs.last_caught_up_timestamp == h.now
    assert one.describe_quorum(h.now + OBSERVER_SESSION_TIMEOUT_MS - 1).observers
    assert one.describe_quorum(h.now + OBSERVER_SESSION_TIMEOUT_MS).observers == ()  # forgotten after 5 minutes


def _end(h: Harness) -> int:
    return h.logs[1].end_offset()


def test_the_state_machine_reloaded_from_a_snapshot_answers_as_the_original() -> None:
    s = ControllerState(session_timeout_ms=9000)
    log = Log(s)
    log.commit([RecordAndVersion(BeginTransactionRecord(name="Bootstrap records"), 0),
                *bootstrap_records({METADATA_VERSION: MV}), RecordAndVersion(EndTransactionRecord(), 0)])
    e1 = register(s, log, 1, 0)
    e2 = register(s, log, 2, 0)
    unfence(s, log, 1, e1, 0)
    log.commit(s.create_topics([NewTopic("t", 2, 1)])[0])
    records, first_block = s.allocate_producer_ids(1, e1)
    log.commit(records)
    # the snapshot's bytes, read back as a follower or a restarted controller would
    sid = FileSnapshotId(s.committed.offset + 1, 1)
    data = snapshot_bytes(image_records(s.committed), epoch=sid.epoch, timestamp=5)
    reloaded = ControllerState(session_timeout_ms=9000)
    reloaded.load_snapshot(image_of_snapshot(sid, list(read_batches(data))))
    assert reloaded.committed == s.committed
    assert reloaded.registration_offset == s.registration_offset == {1: e1, 2: e2}
    for st in (s, reloaded):
        # broker 2 caught up to its registration is unfenced; the next producer id block follows the first
        records, result = st.heartbeat(Heartbeat(2, e2, log.end, False, False), 100)
        assert not result.is_fenced and result.is_caught_up
        assert st.allocate_producer_ids(1, e1)[1] == first_block + 1000
        assert [r.error_code for r in st.create_topics([NewTopic("t", 1, 1)])[1]] == [errors.TOPIC_ALREADY_EXISTS]
        with pytest.raises(ControllerError) as e:
            st.heartbeat(Heartbeat(1, e1 + 1, log.end, False, False), 100)
        assert e.value.code == errors.STALE_BROKER_EPOCH


def test_the_controller_snapshots_on_its_clock_and_restarts_from_the_snapshot(tmp_path: Path) -> None:
    """A one-voter controller on a fake clock: nothing is due before metadata.log.max.snapshot.interval.ms; once
    it has passed, the next commit writes a snapshot of the committed image, the bootstrap snapshot and the log
    before the new one are deleted (metadata.max.retention.bytes=0); a restart loads the image from the
    snapshot and does not write the bootstrap records again."""
    props = {"process.roles": "controller", "node.id": "1", "controller.quorum.voters": "1@127.0.0.1:1",
             "controller.listener.names": "CONTROLLER", "metadata.log.dir": str(tmp_path / "m"),
             "log.dirs": str(tmp_path / "m"),
             "metadata.log.max.record.bytes.between.snapshots": "100000000",
             "metadata.log.max.snapshot.interval.ms": "60000", "metadata.max.retention.bytes": "0"}
    format_storage(props, "AAAAAAAAAAAAAAAAAAAAAQ", out=io.StringIO(), now_ms=0)
    cfg = ControllerConfig.from_properties(props)
    clock = [1_000_000]

    async def run() -> None:
        c = QuorumController(cfg, clock=lambda: clock[0], rng=random.Random(0))
        c._core(lambda: c.replica.tick(c.clock()))  # the only voter leads at once
        await asyncio.sleep(0)  # the bootstrap records, written on activation
        assert c.replica.is_leader() and c.state.committed.metadata_version is not None
        clock[0] += 59_999
        c._noop_and_sessions()
        assert c.mlog.snapshots() == [BOOTSTRAP_SNAPSHOT]  # not due yet
        clock[0] += 1
        c._noop_and_sessions()
        sid = c.mlog.latest_snapshot()
        assert sid is not None and sid != BOOTSTRAP_SNAPSHOT and sid.end_offset == c.applied_end
        assert c.mlog.snapshots() == [sid] and c.mlog.log_start_offset == sid.end_offset
        batches = read_snapshot_file(c.mlog.snapshot_path(sid))
        assert [r.record for r in records_of(batches)] == [r.record for r in image_records(c.state.committed)]
        image = c.state.committed
        await c.close()

        again = QuorumController(cfg, clock=lambda: clock[0], rng=random.Random(1))
        assert again.state.committed == image and again.applied_end == sid.end_offset
        again._core(lambda: again.replica.tick(again.clock()))
        await asyncio.sleep(0)
        assert again.replica.is_leader() and again.replica.epoch > image.epoch
        written = [e.record.record for b in again.mlog.read(sid.end_offset) for e in b.entries if e.record is not None]
        assert not any(isinstance(r, BeginTransactionRecord) for r in written), written
        await again.close()

    asyncio.run(run())
