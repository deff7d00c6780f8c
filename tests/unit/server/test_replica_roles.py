"""ReplicaManager's partition roles without a socket or an event loop: the controller's
LeaderAndIsr and StopReplica bodies applied to a real LogManager in tmp_path, a fake replica
fetcher manager, a fake clock, leadership listeners and a log dir failure (Kafka's
ReplicaManager.becomeLeaderOrFollower / stopReplicas / handleLogDirFailure)."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from odradek.controller.topics import topic_id_to_str
from odradek.log import LogConfig
from odradek.log.manager import LogManager
from odradek.protocol import errors
from odradek.protocol.records import build_batch
from odradek.replication.delayed_produce import DelayedProduce
from odradek.server.replica_manager import ReplicaManager

from ..fake_scheduler import FakeScheduler

NOW = 1_700_000_000_000
ME = 0
LEADER_1 = {"id": 1, "host": "10.0.0.1", "port": 9093}


class _Topics:
    def __init__(self, *names: str) -> None:
        self.metas = {n: SimpleNamespace(name=n, topic_id=uuid.uuid4(), partitions=[None] * 4) for n in names}

    def get(self, name: str) -> Any:
        return self.metas.get(name)

    def topic_id_from_store(self, name: str) -> uuid.UUID | None:
        return None


class _Fetchers:
    """ReplicaFetcherManager's add/remove, recorded."""

    def __init__(self) -> None:
        self.leader_of: dict[tuple[str, int], int] = {}
        self.added: list[tuple[tuple[str, int], int, str, int, int]] = []
        self.on_storage_error: Any = None
        self.stopped = False

    def add(self, tp: tuple[str, int], leader_id: int, host: str, port: int, leader_epoch: int) -> None:
        self.leader_of[tp] = leader_id
        self.added.append((tp, leader_id, host, port, leader_epoch))

    def remove(self, tp: tuple[str, int]) -> None:
        self.leader_of.pop(tp, None)

    async def shutdown(self) -> None:
        self.stopped = True


class _World:
    def __init__(self, tmp_path: Path, dirs: int = 1) -> None:
        self.sched = FakeScheduler(NOW)
        self.dirs = [tmp_path / f"d{i}" for i in range(dirs)]
        self.logs = LogManager(self.dirs, lambda topic: LogConfig())
        self.logs.startup()
        self.topics = _Topics("t", "__consumer_offsets")
        self.live: dict[int, dict[str, Any]] = {}
        self.dir_offline_notices = 0
        self.halted: list[int] = []
        self.isr_writes: list[Any] = []
        self.rm = ReplicaManager(
            ME, self.logs, self.topics, lambda: self.sched.now_ms,  # type: ignore[arg-type]
            scheduler=self.sched,
            isr_writer=SimpleNamespace(submit=lambda part, isr, done: self.isr_writes.append((isr, done))),
            live_broker=self.live.get,
            on_dir_offline=self._dir_offline,
            halt=self.halted.append,
        )
        self.fetchers = _Fetchers()
        self.rm.start_fetchers(self.fetchers)  # type: ignore[arg-type]
        self.heard: list[tuple[str, int, bool]] = []
        self.rm.add_leadership_listener("__consumer_offsets", lambda t, p, lead: self.heard.append((t, p, lead)))

    def _dir_offline(self) -> None:
        self.dir_offline_notices += 1


def _state(topic: str, p: int, leader: int, epoch: int, replicas: list[int] | None = None,
           isr: list[int] | None = None) -> dict[str, Any]:
    replicas = replicas if replicas is not None else [0, 1]
    return {"topic": topic, "partition": p, "leader": leader, "leader_epoch": epoch, "replicas": replicas,
            "isr": isr if isr is not None else list(replicas), "zk_version": 0, "controller_epoch": 1}


def _leader_and_isr(*states: dict[str, Any], live_leaders: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"partitions": list(states), "live_leaders": live_leaders or [], "topic_ids": {}}


def _stop(topic: str, p: int, delete: bool) -> dict[str, Any]:
    return {"partitions": [{"topic": topic, "partition": p, "delete": delete}]}


def _codes(out: list[dict[str, Any]]) -> dict[tuple[str, int], int]:
    return {(o["topic"], o["partition"]): o["error_code"] for o in out}


def test_become_leader_creates_the_log_and_leads(tmp_path: Path) -> None:
    w = _World(tmp_path)
    out = w.rm.become_leader_or_follower(_leader_and_isr(_state("t", 0, ME, 3)))
    assert _codes(out) == {("t", 0): errors.NONE}
    plog = w.logs.get_log("t", 0)
    assert plog is not None and plog.topic_id == w.topics.metas["t"].topic_id
    part = w.rm.leading("t", 0)
    assert part is not None and part.leader_epoch == 3 and part.leader_state is not None
    assert plog.leader_epoch_cache.latest_epoch == 3
    assert w.fetchers.added == [] and ("t", 0) not in w.fetchers.leader_of
    r = w.rm.append("t", 0, build_batch([(None, b"v")], timestamp=NOW), NOW)
    assert r.error_code == errors.NONE and r.base_offset == 0


def test_a_log_of_another_topic_id_is_inconsistent_and_never_served(tmp_path: Path) -> None:
    """The controller names topic id B for "t" while the log here holds topic id A (a topic of the
    same name deleted and created again while this broker missed it): INCONSISTENT_TOPIC_ID, the
    role unchanged, the old records not served as the new topic's (Kafka's becomeLeaderOrFollower)."""
    w = _World(tmp_path)
    w.rm.become_leader_or_follower(_leader_and_isr(_state("t", 0, ME, 1)))
    assert w.rm.append("t", 0, build_batch([(None, b"old")], timestamp=NOW), NOW).error_code == errors.NONE
    old_id = w.topics.metas["t"].topic_id
    new_id = uuid.uuid4()
    body = _leader_and_isr(_state("t", 0, ME, 0))
    body["topic_ids"] = {"t": topic_id_to_str(new_id)}
    out = w.rm.become_leader_or_follower(body)
    assert _codes(out) == {("t", 0): errors.INCONSISTENT_TOPIC_ID}
    plog = w.logs.get_log("t", 0)
    assert plog is not None and plog.topic_id == old_id and plog.log_end_offset == 1
    assert w.rm.partitions[("t", 0)].leader_epoch == 1  # unchanged
    # the same from a folder not loaded yet (partition 1 of the old topic, on disk only)
    from odradek.log.checkpoint import write_partition_metadata
    from odradek.log.log import Log
    d = w.dirs[0] / "t-1"
    Log.create(w.dirs[0], "t", 1, LogConfig(), old_id).close()
    write_partition_metadata(d, old_id, sync=False)
    body = _leader_and_isr(_state("t", 1, ME, 0))
    body["topic_ids"] = {"t": topic_id_to_str(new_id)}
    assert _codes(w.rm.become_leader_or_follower(body)) == {("t", 1): errors.INCONSISTENT_TOPIC_ID}
    assert w.logs.get_log("t", 1) is None and ("t", 1) not in w.rm.partitions and d.is_dir()


def test_become_follower_fetches_from_the_live_leader(tmp_path: Path) -> None:
    w = _World(tmp_path)
    out = w.rm.become_leader_or_follower(_leader_and_isr(_state("t", 1, 1, 5), live_leaders=[LEADER_1]))
    assert _codes(out) == {("t", 1): errors.NONE}
    assert w.rm.leading("t", 1) is None and w.rm.partitions[("t", 1)].leader == 1
    assert w.fetchers.added == [(("t", 1), 1, "10.0.0.1", 9093, 5)]
    r = w.rm.append("t", 1, build_batch([(None, b"v")], timestamp=NOW), NOW)
    assert r.error_code == errors.NOT_LEADER_OR_FOLLOWER


def test_a_follower_of_a_leader_not_live_fetches_once_it_is(tmp_path: Path) -> None:
    w = _World(tmp_path)
    w.rm.become_leader_or_follower(_leader_and_isr(_state("t", 0, 1, 2)))
    assert w.fetchers.added == []  # leader 1 is not live
    w.rm.start_missing_fetchers()
    assert w.fetchers.added == []
    w.live[1] = LEADER_1  # UpdateMetadata named it live
    w.rm.start_missing_fetchers()
    assert w.fetchers.added == [(("t", 0), 1, "10.0.0.1", 9093, 2)]


def test_older_epoch_is_stale_and_the_same_state_only_refreshes_the_isr(tmp_path: Path) -> None:
    w = _World(tmp_path)
    w.rm.become_leader_or_follower(_leader_and_isr(_state("t", 0, ME, 4)))
    part = w.rm.partitions[("t", 0)]
    out = w.rm.become_leader_or_follower(_leader_and_isr(_state("t", 0, ME, 3)))
    assert _codes(out) == {("t", 0): errors.STALE_CONTROLLER_EPOCH}
    out = w.rm.become_leader_or_follower(_leader_and_isr(_state("t", 0, ME, 4, [0, 1, 2], [0, 2])))
    assert _codes(out) == {("t", 0): errors.NONE}
    assert w.rm.partitions[("t", 0)] is part and part.isr == [0, 2] and part.replicas == [0, 1, 2]
    # not a replica here: ignored (StopReplica removes it)
    out = w.rm.become_leader_or_follower(_leader_and_isr(_state("t", 2, 1, 1, [1, 2])))
    assert _codes(out) == {("t", 2): errors.NONE} and ("t", 2) not in w.rm.partitions


def test_losing_leadership_answers_waiting_produces(tmp_path: Path) -> None:
    w = _World(tmp_path)
    w.rm.become_leader_or_follower(_leader_and_isr(_state("t", 0, ME, 1)))
    assert w.rm.append("t", 0, build_batch([(None, b"v")], timestamp=NOW), NOW, acks=-1).error_code == errors.NONE
    op = w.rm.wait_for_replication({("t", 0): 1}, 1000)  # follower 1 has not fetched it
    assert isinstance(op, DelayedProduce)
    w.rm.become_leader_or_follower(_leader_and_isr(_state("t", 0, 1, 2), live_leaders=[LEADER_1]))
    assert op.completed and op.response == {("t", 0): errors.NOT_LEADER_OR_FOLLOWER}
    assert w.fetchers.leader_of == {("t", 0): 1}


def test_leadership_listeners_hear_their_topic_only(tmp_path: Path) -> None:
    w = _World(tmp_path)
    other: list[tuple[str, int, bool]] = []
    w.rm.add_leadership_listener("t", lambda t, p, lead: other.append((t, p, lead)))
    w.rm.become_leader_or_follower(_leader_and_isr(
        _state("__consumer_offsets", 0, ME, 1), _state("__consumer_offsets", 1, 1, 1), _state("t", 0, ME, 1),
        live_leaders=[LEADER_1],
    ))
    assert w.heard == [("__consumer_offsets", 0, True), ("__consumer_offsets", 1, False)]
    assert other == [("t", 0, True)]
    w.rm.stop_replicas(_stop("__consumer_offsets", 0, delete=False))
    assert w.heard[-1] == ("__consumer_offsets", 0, False)


def test_a_failing_listener_does_not_stop_the_others(tmp_path: Path) -> None:
    w = _World(tmp_path)

    def boom(t: str, p: int, lead: bool) -> None:
        raise RuntimeError("listener bug")

    w.rm.add_leadership_listener("__consumer_offsets", boom)
    w.rm.add_leadership_listener("__consumer_offsets", lambda t, p, lead: w.heard.append(("second", p, lead)))
    out = w.rm.become_leader_or_follower(_leader_and_isr(_state("__consumer_offsets", 0, ME, 1)))
    assert _codes(out) == {("__consumer_offsets", 0): errors.NONE}
    assert w.heard == [("__consumer_offsets", 0, True), ("second", 0, True)]


def test_stop_replica_without_delete_keeps_the_log(tmp_path: Path) -> None:
    w = _World(tmp_path)
    w.rm.become_leader_or_follower(_leader_and_isr(_state("t", 0, 1, 1), live_leaders=[LEADER_1]))
    assert ("t", 0) in w.fetchers.leader_of
    out = w.rm.stop_replicas(_stop("t", 0, delete=False))
    assert _codes(out) == {("t", 0): errors.NONE}
    assert ("t", 0) not in w.rm.partitions and ("t", 0) not in w.fetchers.leader_of
    assert w.logs.get_log("t", 0) is not None


def test_stop_replica_with_delete_deletes_the_log(tmp_path: Path) -> None:
    w = _World(tmp_path)
    w.rm.become_leader_or_follower(_leader_and_isr(_state("t", 0, ME, 1)))
    plog = w.logs.get_log("t", 0)
    assert plog is not None
    w.rm.stop_replicas(_stop("t", 0, delete=True))
    assert w.logs.get_log("t", 0) is None and ("t", 0) not in w.rm.partitions
    assert not (w.dirs[0] / "t-0").exists()  # renamed to t-0.<uuid>-delete
    assert w.rm.append("t", 0, build_batch([(None, b"v")], timestamp=NOW), NOW).error_code == (
        errors.NOT_LEADER_OR_FOLLOWER
    )


def test_log_dir_failure_takes_its_partitions_offline(tmp_path: Path) -> None:
    w = _World(tmp_path, dirs=2)
    w.rm.become_leader_or_follower(_leader_and_isr(
        _state("t", 0, ME, 1), _state("__consumer_offsets", 0, ME, 1), _state("t", 1, 1, 1),
        live_leaders=[LEADER_1],
    ))
    by_dir: dict[Path, list[tuple[str, int]]] = {}
    for tp in (("t", 0), ("__consumer_offsets", 0), ("t", 1)):
        d = w.logs.log_dir_of(*tp)
        assert d is not None
        by_dir.setdefault(d, []).append(tp)
    failed = max(by_dir, key=lambda d: len(by_dir[d]))  # two of the three
    gone = by_dir[failed]
    w.rm.handle_log_dir_failure(failed / "t-0" / "00000000000000000000.log", OSError(5, "Input/output error"))
    assert failed in w.logs.offline_dirs and w.dir_offline_notices == 1 and w.halted == []
    for tp in gone:
        assert tp not in w.rm.partitions and tp not in w.fetchers.leader_of and w.logs.get_log(*tp) is None
        assert w.rm.append(*tp, build_batch([(None, b"v")], timestamp=NOW), NOW).error_code != errors.NONE
    kept = [tp for tp in (("t", 0), ("__consumer_offsets", 0), ("t", 1)) if tp not in gone]
    assert all(tp in w.rm.partitions for tp in kept)
    if ("__consumer_offsets", 0) in gone:
        assert ("__consumer_offsets", 0, False) in w.heard
    # the controller tries again: the replicas in the offline dir answer KAFKA_STORAGE_ERROR
    out = w.rm.become_leader_or_follower(_leader_and_isr(*(_state(t, p, ME, 2) for t, p in gone)))
    assert set(_codes(out).values()) == {errors.KAFKA_STORAGE_ERROR}
    # the same dir again, or a path outside every log dir: nothing more
    w.rm.handle_log_dir_failure(failed, OSError(5, "again"))
    w.rm.handle_log_dir_failure(tmp_path / "elsewhere", OSError(5, "not ours"))
    assert w.dir_offline_notices == 1


def test_the_last_log_dir_failing_halts_the_broker(tmp_path: Path) -> None:
    w = _World(tmp_path)
    w.rm.become_leader_or_follower(_leader_and_isr(_state("t", 0, ME, 1)))
    w.rm.handle_log_dir_failure(w.dirs[0], OSError(28, "No space left on device"))
    assert w.halted == [1] and w.dir_offline_notices == 0 and not w.rm.partitions


def test_a_checkpoint_that_cannot_be_written_takes_its_log_dir_offline(tmp_path: Path) -> None:
    # a full disk refuses the periodic checkpoints as it refuses appends: Kafka's
    # CheckpointFileWithFailureHandler takes the dir offline; this only logged a traceback and kept
    # serving from the dir (found reading what the disk-full nemesis, odradek.verify, makes a broker do)
    from odradek.log.manager import REPLICATION_OFFSET_CHECKPOINT

    w = _World(tmp_path, dirs=2)
    w.rm.become_leader_or_follower(_leader_and_isr(_state("t", 0, ME, 1), _state("t", 1, ME, 1)))
    broken = w.dirs[1]
    (broken / (REPLICATION_OFFSET_CHECKPOINT + ".tmp")).mkdir()  # the write of its temporary file fails
    w.rm.checkpoint()
    assert w.logs.offline_dirs == {broken} and w.dir_offline_notices == 1 and w.halted == []
    assert (w.dirs[0] / REPLICATION_OFFSET_CHECKPOINT).exists()  # the other dir's checkpoints still written
    with pytest.raises(OSError):  # without a handler (the shutdown's last checkpoint) it is raised
        w2 = _World(tmp_path / "alone")
        (w2.dirs[0] / (REPLICATION_OFFSET_CHECKPOINT + ".tmp")).mkdir()
        w2.logs.checkpoint()
    w2.rm.checkpoint()  # the only log dir: the broker halts
    assert w2.halted == [1] and w2.logs.offline_dirs == {w2.dirs[0]}


def test_a_log_that_cannot_be_flushed_takes_its_log_dir_offline(tmp_path: Path) -> None:
    # the log flusher's tick (flush.ms, rolled segments) writes producer snapshots and leader epoch
    # checkpoints: refused by a full disk, Kafka's flushDirtyLogs takes the log's dir offline; this logged
    # a traceback each second, left the dir serving, and skipped the logs after the failing one
    import dataclasses

    w = _World(tmp_path, dirs=2)
    w.rm.become_leader_or_follower(_leader_and_isr(_state("t", 0, ME, 1), _state("t", 1, ME, 1)))
    logs = {tp: w.logs.get_log(*tp) for tp in (("t", 0), ("t", 1))}
    assert all(lg is not None for lg in logs.values())
    assert logs[("t", 0)].dir.parent != logs[("t", 1)].dir.parent  # type: ignore[union-attr]  # one log per dir
    for tp, lg in logs.items():
        assert lg is not None
        lg.config = dataclasses.replace(lg.config, flush_ms=0)
        assert w.rm.append(*tp, build_batch([(None, b"v")], timestamp=NOW), NOW).error_code == errors.NONE
    broken = logs[("t", 0)]
    assert broken is not None
    broken.leader_epoch_cache.assign(2, broken.log_end_offset)  # a new epoch: written by the next flush
    (broken.dir / "leader-epoch-checkpoint.tmp").mkdir()  # ... which cannot write it
    w.rm.flush_dirty(2 * NOW)  # later than the logs' last flush (which read the real clock)
    assert w.logs.offline_dirs == {broken.dir.parent} and w.dir_offline_notices == 1 and w.halted == []
    kept = logs[("t", 1)]
    assert kept is not None and kept.recovery_point == kept.log_end_offset == 1  # still flushed


def test_a_fetchers_storage_error_reaches_the_replica_manager(tmp_path: Path) -> None:
    w = _World(tmp_path, dirs=2)
    assert w.fetchers.on_storage_error == w.rm.handle_log_dir_failure
    w.fetchers.on_storage_error(w.dirs[1], OSError(5, "Input/output error"))
    assert w.logs.offline_dirs == {w.dirs[1]} and w.dir_offline_notices == 1


def test_after_fetchers_shut_down_the_controllers_requests_are_ignored(tmp_path: Path) -> None:
    w = _World(tmp_path)
    asyncio.run(w.rm.shutdown_fetchers())
    assert w.fetchers.stopped and w.rm.fetchers is None
    assert w.rm.become_leader_or_follower(_leader_and_isr(_state("t", 0, ME, 1))) == []
    assert w.rm.stop_replicas(_stop("t", 0, delete=True)) == []


@pytest.mark.parametrize("isr_result", ["written", "failed"])
def test_isr_shrink_goes_to_the_isr_writer_and_its_outcome_is_applied(tmp_path: Path, isr_result: str) -> None:
    w = _World(tmp_path)
    w.rm.become_leader_or_follower(_leader_and_isr(_state("t", 0, ME, 1, [0, 1], [0, 1])))
    part = w.rm.partitions[("t", 0)]
    w.sched.now_ms += 30_001
    w.rm.check_isr(w.sched.now_ms, 30_000)  # follower 1 never fetched
    assert [isr for isr, _ in w.isr_writes] == [[0]] and part.isr_write_in_flight
    w.rm.check_isr(w.sched.now_ms, 30_000)
    assert len(w.isr_writes) == 1  # one write in flight at a time
    _, done = w.isr_writes[0]
    done(([0], 7, 1) if isr_result == "written" else None)
    assert not part.isr_write_in_flight
    if isr_result == "written":
        assert part.isr == [0] and part.zk_version == 7
    else:
        assert part.isr == [0, 1] and part.leader_state is not None and part.leader_state.isr == [0, 1]


def test_only_the_fetching_follower_rejoins_the_isr(tmp_path: Path) -> None:
    """Nothing produced, follower 2 stopped fetching and was shrunk out while its last known log end still
    equals the high watermark: follower 1's fetches must not take 2 back into the ISR (CI saw the ISR of a
    SIGSTOPped follower flap back within 40 ms of every shrink); 2's own fetch does."""
    w = _World(tmp_path)
    w.rm.become_leader_or_follower(_leader_and_isr(_state("t", 0, ME, 1, [0, 1, 2], [0, 1, 2])))
    part = w.rm.partitions[("t", 0)]
    for f in (1, 2):
        w.rm.on_follower_fetch("t", 0, f, 0, w.sched.now_ms)
    w.sched.now_ms += 30_001
    w.rm.on_follower_fetch("t", 0, 1, 0, w.sched.now_ms)
    w.rm.check_isr(w.sched.now_ms, 30_000)
    assert [isr for isr, _ in w.isr_writes] == [[0, 1]]
    w.isr_writes.pop()[1](([0, 1], 1, 1))
    assert part.isr == [0, 1]
    for _ in range(3):
        w.sched.now_ms += 500
        w.rm.on_follower_fetch("t", 0, 1, 0, w.sched.now_ms)
    assert w.isr_writes == []  # 2 stays out
    w.rm.on_follower_fetch("t", 0, 2, 0, w.sched.now_ms)
    assert [isr for isr, _ in w.isr_writes] == [[0, 1, 2]]
