"""producer.id.expiration.ms (issue 12, item 6): Kafka's ProducerStateManager.removeExpiredProducers."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.config import BrokerConfig, ConfigError
from odradek.log import LogConfig, LogManager
from odradek.log.producer_state import ProducerStateManager, snapshot_path
from odradek.log.validator import AppendOrigin
from odradek.protocol.records import build_batch, validate_batches

from .log_helpers import NOW, append, make_batch, new_log, reopen

HOUR = 3_600_000


def idem(n: int, seq: int, pid: int, ts: int = NOW, epoch: int = 0, transactional: bool = False) -> bytes:
    return make_batch(n, pid=pid, epoch=epoch, seq=seq, ts=ts, transactional=transactional)


def test_idle_producers_expire_active_and_open_transactions_stay(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    append(log, idem(2, 0, pid=1, ts=NOW - 2 * HOUR))  # idle for two hours
    append(log, idem(1, 0, pid=2, ts=NOW - 10))  # just wrote
    append(log, idem(1, 0, pid=3, ts=NOW - 2 * HOUR, transactional=True))  # open transaction
    ps = log.producer_state
    assert ps.remove_expired_producers(NOW) == 0  # no expiration configured: nothing expires
    ps.expiration_ms = HOUR
    assert ps.remove_expired_producers(NOW) == 1
    assert set(ps.producers) == {2, 3}
    # the boundary is inclusive (currentTime - lastTimestamp >= expiration)
    assert ps.remove_expired_producers(NOW - 10 + HOUR) == 1 and set(ps.producers) == {3}


def test_transaction_marker_refreshes_and_closes(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    append(log, idem(1, 0, pid=7, ts=NOW - 2 * HOUR, transactional=True))
    marker = build_batch([(b"\x00\x00\x00\x00", b"\x00\x00\x00\x00\x00\x00")], control=True, producer_id=7,
                         producer_epoch=0, timestamp=NOW - 30 * 60_000, transactional=True)
    data = bytearray(marker)
    log.append_as_leader(data, validate_batches(data), 0, NOW, origin=AppendOrigin.COORDINATOR)
    ps = log.producer_state
    entry = ps.producers[7]
    assert entry.current_txn_first_offset == -1 and entry.last_timestamp == NOW - 30 * 60_000
    ps.expiration_ms = HOUR
    assert ps.remove_expired_producers(NOW) == 0  # the marker is 30 minutes old
    assert ps.remove_expired_producers(NOW + HOUR) == 1


def test_expired_producer_writes_again_at_any_sequence(tmp_path: Path) -> None:
    """KIP-360 (Kafka 2.5+): no state, no current epoch: any sequence is accepted."""
    log = new_log(tmp_path)
    append(log, idem(3, 0, pid=9, ts=NOW - 2 * HOUR))
    log.producer_state.expiration_ms = HOUR
    log.producer_state.remove_expired_producers(NOW)
    info = append(log, idem(1, 3, pid=9))
    assert not info.duplicate and info.first_offset == 3
    assert log.producer_entry(9) is not None and log.producer_entry(9).last_seq == 3  # type: ignore[union-attr]
    # and from then on sequences are checked again
    assert append(log, idem(1, 3, pid=9)).duplicate


def test_snapshots_leave_out_removed_producers(tmp_path: Path) -> None:
    log = new_log(tmp_path)
    append(log, idem(1, 0, pid=1, ts=NOW - 2 * HOUR))
    append(log, idem(1, 0, pid=2))
    ps = log.producer_state
    ps.expiration_ms = HOUR
    ps.map_end_offset = log.log_end_offset
    path = ps.take_snapshot()  # as Kafka's takeSnapshot: what is in memory, until a check removes it
    assert set(ProducerStateManager.decode_snapshot(path.read_bytes())) == {1, 2}
    assert ps.remove_expired_producers(NOW) == 1
    path = ps.take_snapshot()
    assert set(ProducerStateManager.decode_snapshot(path.read_bytes())) == {2}


def test_expired_snapshot_entries_are_skipped_on_load(tmp_path: Path) -> None:
    # a timestamp far in the future needs message.timestamp.after.max.ms unbounded (KIP-937's default is 1 h)
    cfg = LogConfig(message_timestamp_after_max_ms=2**63 - 1)
    log = new_log(tmp_path, cfg)
    append(log, idem(1, 0, pid=1))  # NOW is years ago by the wall clock
    append(log, idem(1, 0, pid=2, ts=2**62))
    log = reopen(log, clean=True, config=cfg)  # the clean close writes a snapshot with both
    snap = snapshot_path(log.dir, log.log_end_offset)
    assert set(ProducerStateManager.decode_snapshot(snap.read_bytes())) == {1, 2}
    log.producer_state.expiration_ms = HOUR  # as the log manager sets it
    assert log.producer_entry(1) is None and log.producer_entry(2) is not None


def test_snapshot_keeps_the_marker_timestamp_of_a_producer_without_batches(tmp_path: Path) -> None:
    ps = ProducerStateManager(tmp_path)
    data = bytearray(build_batch([(b"\x00\x00\x00\x00", b"\x00" * 6)], control=True, producer_id=5,
                                 producer_epoch=1, timestamp=NOW, transactional=True))
    ps.replay((h, None) for h in validate_batches(data))
    assert not ps.producers[5].batches and ps.producers[5].last_timestamp == NOW
    restored = ProducerStateManager.decode_snapshot(ps.encode_snapshot())
    assert restored[5].last_timestamp == NOW


def test_log_manager_check_covers_every_log(tmp_path: Path) -> None:
    config = LogConfig()
    mgr = LogManager([tmp_path], lambda _t: config)
    mgr.startup()
    a = mgr.get_or_create_log("a", 0)
    b = mgr.get_or_create_log("b", 0)
    append(a, idem(1, 0, pid=1, ts=NOW - 2 * HOUR))
    append(b, idem(1, 0, pid=2, ts=NOW - 2 * HOUR))
    append(b, idem(1, 0, pid=3, ts=NOW))
    assert mgr.remove_expired_producers(HOUR, now_ms=NOW) == 2
    assert a.producer_entry(1) is None and b.producer_entry(2) is None and b.producer_entry(3) is not None
    assert a.producer_state.expiration_ms == HOUR
    mgr.shutdown()


def test_broker_configs() -> None:
    c = BrokerConfig()
    assert c.get("producer.id.expiration.ms") == 86_400_000
    assert c.get("producer.id.expiration.check.interval.ms") == 600_000
    BrokerConfig.validate_dynamic({"producer.id.expiration.ms": "1000"}, per_broker=False)  # dynamic, as in Kafka
    with pytest.raises(ConfigError):
        BrokerConfig.validate_dynamic({"producer.id.expiration.check.interval.ms": "1000"}, per_broker=True)
    for name in ("producer.id.expiration.ms", "producer.id.expiration.check.interval.ms"):
        with pytest.raises(ConfigError):
            BrokerConfig({name: "0"})
