"""Crash recovery from the checkpointed recovery point against recovery of everything (point 0), on random
histories: appends (plain and transactional, timestamps going up and down), commits and aborts, flushes,
rolls, leader epoch bumps, follower truncations (which checkpoint the lowered point, as LogManager does),
small and full indexes, preallocated files. The two recoveries must give the same log end offset, indexes
(each entry checked against its batch), largest timestamps, transaction indexes, producer state, last stable
offset and leader epochs."""

from __future__ import annotations

import random
import shutil
from pathlib import Path
from typing import Any

import pytest

import odradek.log.log as log_module
from odradek.log import Log, LogConfig
from odradek.log.txn_marker import ControlRecordType
from odradek.protocol.records import build_batch, validate_batches

from .log_helpers import NOW


def _state(lg: Log) -> dict[str, Any]:
    ps = lg.producer_state
    lg.first_unstable_offset()  # loads the producer state
    segs = []
    for s in lg.segments:
        oi, ti = s.offset_index, s.time_index
        headers = dict(s.log.iter_headers())
        by_last = {h.base_offset + h.last_offset_delta: h for h in headers.values()}
        bad: list[object] = []
        prev = None
        for i in range(oi.entries):
            o, p = oi.entry(i)
            h = headers.get(p)
            if h is None or h.base_offset + h.last_offset_delta != o or (prev is not None and o <= prev):
                bad.append(("offset index", o, p))
            prev = o
        prev_ts = None
        for i in range(ti.entries):
            ts, o = ti.entry(i)
            if o not in by_last or by_last[o].max_timestamp != ts or (prev_ts is not None and ts <= prev_ts):
                bad.append(("time index", ts, o))
            prev_ts = ts
        segs.append((s.base_offset, s.size, bad, s.max_timestamp, s.offset_of_max_timestamp,
                     list(s.txn_index.entries)))
    return {
        "leo": lg.log_end_offset,
        "segments": segs,
        "ongoing": sorted((t.producer_id, t.first_offset) for t in ps.ongoing_txns.values()),
        "producers": {pid: (e.epoch, e.current_txn_first_offset, e.coordinator_epoch, e.last_seq)
                      for pid, e in ps.producers.items()},
        "lso": lg.last_stable_offset,
        "epochs": list(lg.leader_epoch_cache.entries),
    }


# 86, 134 and 198: histories where the recovery from a point left above a truncation (no checkpoint written
# by the truncation) got the leader epochs wrong
@pytest.mark.parametrize("seed", [*range(40), 86, 134, 198])
def test_recovery_from_the_checkpointed_point_equals_a_whole_recovery(tmp_path: Path, seed: int,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    rnd = random.Random(seed)
    cfg = LogConfig(segment_bytes=rnd.choice([1500, 4000, 20000]), index_interval_bytes=rnd.choice([50, 200, 700]),
                    segment_index_bytes=rnd.choice([10_000_000, 120, 60]), preallocate=rnd.random() < 0.3)
    monkeypatch.setattr(log_module, "SNAPSHOT_AT_FLUSH_BYTES", rnd.choice([300, 1000, 1 << 24]))
    lg = Log.create(tmp_path / "live", "t", 0, cfg, time_ms=NOW)
    try:
        _check_history(tmp_path, rnd, cfg, lg)
    finally:  # 43 cases of open segment files and indexes would stay with the test worker otherwise
        lg.close_handlers()


def _check_history(tmp_path: Path, rnd: random.Random, cfg: LogConfig, lg: Log) -> None:
    checkpointed = [0]

    def write_checkpoint() -> None:  # what LogManager.checkpoint_recovery_points writes
        checkpointed[0] = lg.recovery_point

    lg.on_recovery_point_lowered = write_checkpoint
    seqs: dict[int, int] = {}
    open_txns: set[int] = set()
    epoch = 0
    for step in range(rnd.randint(20, 150)):
        r = rnd.random()
        if r < 0.45:
            n = rnd.randint(1, 5)
            ts = NOW + rnd.randint(-50, 50) * 7 + step
            pid = rnd.choice([-1, -1, 1, 2, 3])
            if pid < 0:
                data = bytearray(build_batch([(None, b"x" * rnd.randint(1, 80))] * n, timestamp=ts))
            else:
                seq = seqs.get(pid, 0)
                data = bytearray(build_batch([(None, b"v" * rnd.randint(1, 40))] * n, timestamp=ts, producer_id=pid,
                                             producer_epoch=0, base_sequence=seq, transactional=True))
                seqs[pid] = seq + n
                open_txns.add(pid)
            lg.append_as_leader(data, validate_batches(data), epoch, NOW)
            lg.update_high_watermark(lg.log_end_offset)
        elif r < 0.55 and open_txns:
            pid = rnd.choice(sorted(open_txns))
            open_txns.discard(pid)
            lg.append_txn_marker(pid, 0, 0, rnd.choice([ControlRecordType.COMMIT, ControlRecordType.ABORT]), epoch, NOW)
            lg.update_high_watermark(lg.log_end_offset)
        elif r < 0.65:
            lg.flush()
        elif r < 0.70:
            lg.flush_rolled_segments()
        elif r < 0.74:
            lg.roll()
        elif r < 0.78:
            epoch += 1
        elif r < 0.85:
            write_checkpoint()  # the periodic checkpoint
        elif r < 0.88 and lg.log_end_offset > 0:
            lg.truncate_to(rnd.randint(max(lg.log_start_offset, lg.high_watermark // 2), lg.log_end_offset))
            seqs = {pid: e.last_seq + 1 for pid, e in lg.producer_state.producers.items()}
            open_txns = {t.producer_id for t in lg.producer_state.ongoing_txns.values()}
    states = []
    for name, point in (("from-point", checkpointed[0]), ("whole", 0)):
        d = tmp_path / name / lg.dir.name
        shutil.copytree(lg.dir, d)  # kill -9: nothing closed
        recovered = Log.open(d, cfg, clean=False, recovery_point=point, high_watermark=lg.high_watermark, time_ms=NOW)
        try:
            states.append(_state(recovered))
        finally:
            recovered.close_handlers()
    assert states[0] == states[1]
    assert not any(bad for seg in states[0]["segments"] for bad in seg[2])
