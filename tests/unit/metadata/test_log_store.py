"""odradek.metadata.log_store: the __cluster_metadata-0 partition on disk (segments and KIP-630 snapshots), and
image_records, the inverse of applying records to an image."""

from __future__ import annotations

import os
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from kio.schema.snapshot_footer_record.v0.data import SnapshotFooterRecord
from kio.schema.snapshot_header_record.v0.data import SnapshotHeaderRecord

from odradek.metadata.batches import build_control_batch, build_records_batch, read_file
from odradek.metadata.delta import apply_batches, apply_records
from odradek.metadata.image import EMPTY_IMAGE, MetadataImage, image_records
from odradek.metadata.log_store import (
    PARTITION_DIR,
    MetadataLog,
    MetadataLogConfig,
    SnapshotId,
    read_snapshot_file,
    snapshot_id_of,
)
from odradek.metadata.records import (
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RecordAndVersion,
    TopicRecord,
)
from odradek.metadata.schema import MetadataRecordError

from .samples import sample_log

T0 = 1_700_000_000_000


def _image_of_sample() -> MetadataImage:
    log = sample_log()
    data = build_records_batch(log, base_offset=0, leader_epoch=3, timestamp=T0)
    from odradek.metadata.batches import read_batches

    return apply_batches(EMPTY_IMAGE, read_batches(data))


def test_image_records_give_the_image_back() -> None:
    image = _image_of_sample()
    assert image.topics and image.brokers and image.acls and image.scram and image.client_quotas
    again = apply_records(EMPTY_IMAGE, image_records(image))
    assert replace(again, offset=image.offset, epoch=image.epoch) == image
    records = [r.record for r in image_records(image)]
    assert isinstance(records[0], FeatureLevelRecord) and records[0].name == "metadata.version"


def _topic_batch(name: str, base: int, epoch: int, *, partitions: int = 1) -> tuple[bytes, uuid.UUID]:
    tid = uuid.uuid5(uuid.NAMESPACE_DNS, name)
    recs: list[MetadataRecord] = [TopicRecord(name=name, topic_id=tid)]
    recs += [PartitionRecord(partition_id=p, topic_id=tid, replicas=(1,), isr=(1,), leader=1, leader_epoch=0,
                             partition_epoch=0) for p in range(partitions)]
    return build_records_batch(recs, base_offset=base, leader_epoch=epoch, timestamp=T0 + base), tid


def _bootstrap(ml: MetadataLog) -> None:
    ml.append(build_records_batch([FeatureLevelRecord(name="metadata.version", feature_level=33)], base_offset=0,
                                  leader_epoch=1, timestamp=T0), T0)


def test_append_read_and_load(tmp_path: Path) -> None:
    ml = MetadataLog.open(tmp_path, now_ms=T0)
    _bootstrap(ml)
    data, tid = _topic_batch("orders", 1, 1, partitions=2)
    assert ml.append(data, T0) == 4
    change = build_records_batch([PartitionChangeRecord(partition_id=0, topic_id=tid, leader=-1)], base_offset=4,
                                 leader_epoch=2, timestamp=T0)
    ml.append(change, T0)
    assert [b.base_offset for b in ml.read(0)] == [0, 1, 4]
    assert [b.base_offset for b in ml.read(2)] == [1, 4]
    assert [b.leader_epoch for b in ml.read(0)] == [1, 1, 2]
    image = ml.load()
    assert (image.offset, image.epoch, image.metadata_version) == (4, 2, 33)
    topic = image.topic("orders")
    assert topic is not None and topic.partitions[0].leader == -1 and topic.partitions[0].leader_epoch == 1
    ml.close()
    names = sorted(p.name for p in (tmp_path / PARTITION_DIR).iterdir())
    assert "00000000000000000000.log" in names and "leader-epoch-checkpoint" in names
    assert (tmp_path / PARTITION_DIR / "leader-epoch-checkpoint").read_text().splitlines()[2:] == ["1 0", "2 4"]


def test_a_read_from_an_offset_costs_what_it_reads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The controller reads from its applied end at every high-watermark change: the segment is read from the
    batch holding the offset on (its offset index), not from its start."""
    ml = MetadataLog.open(tmp_path, now_ms=T0)
    _bootstrap(ml)
    base = 1
    for i in range(300):
        data, _ = _topic_batch(f"topic-{i}", base, 1, partitions=3)
        base = ml.append(data, T0)
    offsets = [b.base_offset for b in ml.read(0)]
    for start in (0, 1, 2, 5, offsets[150], offsets[150] + 1, offsets[-1], offsets[-1] + 3):
        assert [b.base_offset for b in ml.read(start)] == [o for o, n in zip(offsets, [*offsets[1:], base], strict=True)
                                                            if n > start]
    import odradek.metadata.log_store as log_store

    read_sizes: list[int] = []
    real = log_store.read_batches

    def counting(data: Any, **kw: Any) -> Any:
        read_sizes.append(len(data))
        return real(data, **kw)

    monkeypatch.setattr(log_store, "read_batches", counting)
    assert [b.base_offset for b in ml.read(offsets[-1])] == [offsets[-1]]
    segment = ml.log.segments[0].log.size
    # the last batch only, not the segment
    assert sum(read_sizes) < segment // 4, (sum(read_sizes), segment)


def test_append_refuses_gaps_lower_epochs_and_bad_crcs(tmp_path: Path) -> None:
    ml = MetadataLog.open(tmp_path, now_ms=T0)
    _bootstrap(ml)
    ml.append(_topic_batch("a", 1, 5)[0], T0)
    with pytest.raises(MetadataRecordError, match="not at the log end offset 3"):
        ml.append(_topic_batch("b", 7, 5)[0], T0)
    with pytest.raises(MetadataRecordError, match="below the log's last epoch 5"):
        ml.append(_topic_batch("b", 3, 4)[0], T0)
    bad = bytearray(_topic_batch("b", 3, 5)[0])
    bad[-1] ^= 0xFF
    with pytest.raises(MetadataRecordError, match="CRC"):
        ml.append(bytes(bad), T0)
    with pytest.raises(MetadataRecordError, match="after the last whole batch"):
        ml.append(_topic_batch("b", 3, 5)[0][:-3], T0)
    assert ml.log_end_offset == 3


def test_snapshot_round_trip_and_layout(tmp_path: Path) -> None:
    ml = MetadataLog.open(tmp_path, now_ms=T0)
    records = sample_log()
    # the sample log as data batches (its transactions apply at load, as in a real log)
    ml.append(build_records_batch(records, base_offset=0, leader_epoch=4, timestamp=T0), T0)
    image = ml.load()
    ml.update_high_watermark(ml.log_end_offset)
    sid = ml.write_snapshot(image, now_ms=T0 + 5, last_contained_timestamp=T0)
    assert sid == SnapshotId(len(records), 4)
    path = tmp_path / PARTITION_DIR / f"{len(records):020d}-0000000004.checkpoint"
    assert path.is_file() and snapshot_id_of(path.name) == sid
    assert not list((tmp_path / PARTITION_DIR).glob("*.part"))
    assert os.stat(path).st_mode & 0o777 == 0o400
    batches = read_snapshot_file(path)
    assert isinstance(batches[0].entries[0].control, SnapshotHeaderRecord)
    assert int(batches[0].entries[0].control.last_contained_log_timestamp) == T0
    assert isinstance(batches[-1].entries[-1].control, SnapshotFooterRecord)
    assert {b.leader_epoch for b in batches} == {4}
    offsets = [e.offset for b in batches for e in b.entries]
    assert offsets == list(range(len(offsets)))
    ml.close()
    # a new store loads the snapshot alone: same image
    again = MetadataLog.open(tmp_path, now_ms=T0).load()
    assert again == image
    with pytest.raises(ValueError, match="not newer"):
        MetadataLog.open(tmp_path, now_ms=T0).write_snapshot(image, now_ms=T0)


def test_load_is_the_snapshot_then_the_log_after_it(tmp_path: Path) -> None:
    ml = MetadataLog.open(tmp_path, now_ms=T0)
    _bootstrap(ml)
    ml.append(_topic_batch("a", 1, 1)[0], T0)
    ml.update_high_watermark(3)
    ml.write_snapshot(ml.load(), now_ms=T0)
    ml.append(_topic_batch("b", 3, 2)[0], T0)
    ml.append(build_records_batch([ConfigRecord(resource_type=2, resource_name="a", name="retention.ms", value="9")],
                                  base_offset=5, leader_epoch=2, timestamp=T0), T0)
    image = ml.load()
    assert set(image.topic_ids) == {"a", "b"} and dict(image.config(2, "a")) == {"retention.ms": "9"}
    assert (image.offset, image.epoch) == (5, 2)


def test_load_with_a_torn_log_tail(tmp_path: Path) -> None:
    ml = MetadataLog.open(tmp_path, now_ms=T0)
    _bootstrap(ml)
    ml.append(_topic_batch("kept", 1, 1)[0], T0)
    ml.close()
    segment = tmp_path / PARTITION_DIR / "00000000000000000000.log"
    whole = segment.stat().st_size
    torn, _ = _topic_batch("torn", 3, 1)
    with open(segment, "ab") as f:  # a crash in the middle of the next batch's write
        f.write(torn[: len(torn) // 2])
    again = MetadataLog.open(tmp_path, now_ms=T0)
    assert again.log_end_offset == 3 and segment.stat().st_size == whole
    image = again.load()
    assert set(image.topic_ids) == {"kept"}
    assert again.append(torn, T0) == 5  # the log goes on where the whole batches end
    assert set(again.load().topic_ids) == {"kept", "torn"}


def test_a_partial_snapshot_is_removed_and_a_corrupt_one_is_an_error(tmp_path: Path) -> None:
    ml = MetadataLog.open(tmp_path, now_ms=T0)
    _bootstrap(ml)
    ml.update_high_watermark(1)
    ml.close()
    d = tmp_path / PARTITION_DIR
    (d / "00000000000000000001-0000000001.checkpoint.part").write_bytes(b"half a snapshot")
    ml = MetadataLog.open(tmp_path, now_ms=T0)
    assert not list(d.glob("*.part")) and ml.snapshots() == []
    header = build_control_batch([SnapshotHeaderRecord(version=0, last_contained_log_timestamp=T0)],  # type: ignore[arg-type]
                                 base_offset=0, leader_epoch=1, timestamp=T0)
    body = build_records_batch([FeatureLevelRecord(name="metadata.version", feature_level=33)], base_offset=1,
                               leader_epoch=1, timestamp=T0)
    (d / "00000000000000000001-0000000001.checkpoint").write_bytes(header + body)  # no footer
    with pytest.raises(MetadataRecordError, match="does not end with a SnapshotFooterRecord"):
        MetadataLog.open(tmp_path, now_ms=T0).load()


def test_retention_deletes_old_snapshots_and_the_log_before_the_next(tmp_path: Path) -> None:
    cfg = MetadataLogConfig(segment_bytes=8 * 1024 * 1024, retention_bytes=-1, retention_ms=1000)
    ml = MetadataLog.open(tmp_path, cfg, now_ms=T0)
    _bootstrap(ml)
    offset = 1
    snapshots = []
    for i in range(3):
        data, _ = _topic_batch(f"t{i}", offset, 1)
        ml.append(data, T0)
        offset += 2
        ml.log.roll(T0)  # one segment per step, so that segments can go
        ml.update_high_watermark(offset)
        snapshots.append(ml.write_snapshot(ml.load(), now_ms=T0 + i, last_contained_timestamp=T0 + i))
    assert ml.clean(T0 + 500) == 0  # nothing older than a second yet
    assert ml.clean(T0 + 5000) == 2  # all but the latest
    assert ml.snapshots() == [snapshots[-1]]
    assert ml.log_start_offset == snapshots[-1].end_offset
    d = tmp_path / PARTITION_DIR
    assert sorted(p.name for p in d.glob("*.checkpoint")) == [snapshots[-1].file_name]
    assert not [p for p in d.glob("*.log") if int(p.name[:20]) < snapshots[-1].end_offset]
    assert set(ml.load().topic_ids) == {"t0", "t1", "t2"}
    ml.close()
    assert set(MetadataLog.open(tmp_path, cfg, now_ms=T0).load().topic_ids) == {"t0", "t1", "t2"}


def test_retention_by_size_and_never_past_the_high_watermark(tmp_path: Path) -> None:
    cfg = MetadataLogConfig(retention_bytes=1, retention_ms=-1)
    ml = MetadataLog.open(tmp_path, cfg, now_ms=T0)
    _bootstrap(ml)
    ml.update_high_watermark(1)
    ml.write_snapshot(ml.load(), now_ms=T0)
    ml.append(_topic_batch("a", 1, 1)[0], T0)
    # a snapshot at 3 needs the high watermark there: written, but not a reason to delete the older one yet
    ml.update_high_watermark(3)
    ml.write_snapshot(ml.load(), now_ms=T0)
    ml.log.update_high_watermark(2)  # the raft layer lowered nothing, but an old snapshot at 3 > hw stays
    assert ml.clean(T0) == 0
    ml.update_high_watermark(3)
    assert ml.clean(T0) == 1 and ml.snapshots() == [SnapshotId(3, 1)]


def test_should_snapshot_after_bytes_or_time(tmp_path: Path) -> None:
    cfg = MetadataLogConfig(max_record_bytes_between_snapshots=200, max_snapshot_interval_ms=60_000)
    ml = MetadataLog.open(tmp_path, cfg, now_ms=T0)
    assert not ml.should_snapshot(T0 + 10**9)  # nothing appended
    _bootstrap(ml)
    assert not ml.should_snapshot(T0 + 1)
    assert ml.should_snapshot(T0 + 60_000)  # a minute with something new
    ml.append(_topic_batch("a", 1, 1)[0], T0)
    ml.append(_topic_batch("b", 3, 1)[0], T0)
    assert ml.should_snapshot(T0 + 1)  # past 200 bytes
    ml.update_high_watermark(ml.log_end_offset)
    ml.write_snapshot(ml.load(), now_ms=T0 + 2)
    assert not ml.should_snapshot(T0 + 3)


def test_a_snapshot_past_the_log_end_starts_the_log_there(tmp_path: Path) -> None:
    ml = MetadataLog.open(tmp_path, now_ms=T0)
    _bootstrap(ml)
    ml.append(_topic_batch("a", 1, 1)[0], T0)
    ml.update_high_watermark(3)
    sid = ml.write_snapshot(ml.load(), now_ms=T0)
    ml.close()
    snapshot = (tmp_path / PARTITION_DIR / sid.file_name).read_bytes()
    other = tmp_path / "follower"
    (other / PARTITION_DIR).mkdir(parents=True)
    (other / PARTITION_DIR / sid.file_name).write_bytes(snapshot)  # fetched from the leader (FetchSnapshot)
    follower = MetadataLog.open(other, now_ms=T0)
    assert (follower.log_start_offset, follower.log_end_offset) == (3, 3)
    assert set(follower.load().topic_ids) == {"a"}
    follower.append(_topic_batch("b", 3, 2)[0], T0)
    assert set(follower.load().topic_ids) == {"a", "b"}
    assert read_file(other / PARTITION_DIR / "00000000000000000003.log")[0].base_offset == 3


def test_records_at_their_versions_survive_a_snapshot(tmp_path: Path) -> None:
    ml = MetadataLog.open(tmp_path, now_ms=T0)
    rv = [RecordAndVersion(FeatureLevelRecord(name="metadata.version", feature_level=20), 0)]
    ml.append(build_records_batch(rv, base_offset=0, leader_epoch=1, timestamp=T0), T0)
    ml.update_high_watermark(1)
    ml.write_snapshot(ml.load(), now_ms=T0)
    assert MetadataLog.open(tmp_path, now_ms=T0).load().metadata_version == 20


def test_a_snapshot_that_ends_inside_a_batch(tmp_path: Path) -> None:
    """The records of the batch that the snapshot already holds are not applied twice."""
    ml = MetadataLog.open(tmp_path, now_ms=T0)
    tid = uuid.uuid4()
    first: list[MetadataRecord] = [
        FeatureLevelRecord(name="metadata.version", feature_level=33), TopicRecord(name="t", topic_id=tid),
        PartitionRecord(partition_id=0, topic_id=tid, replicas=(1, 2), isr=(1, 2), leader=1, leader_epoch=0,
                        partition_epoch=0)]
    changes = [PartitionChangeRecord(partition_id=0, topic_id=tid, isr=(1,)),
               PartitionChangeRecord(partition_id=0, topic_id=tid, leader=2)]
    ml.append(build_records_batch(first, base_offset=0, leader_epoch=1, timestamp=T0), T0)
    ml.append(build_records_batch(changes, base_offset=3, leader_epoch=1, timestamp=T0), T0)
    ml.update_high_watermark(5)
    # an image of the records up to offset 3, snapshotted at end offset 4: inside the second batch
    image = replace(apply_records(EMPTY_IMAGE, [*first, changes[0]]), offset=3, epoch=1)
    ml.write_snapshot(image, now_ms=T0)
    loaded = ml.load()
    topic = loaded.topic("t")
    assert topic is not None
    p = topic.partitions[0]
    assert (p.leader, p.isr, p.leader_epoch, p.partition_epoch) == (2, (1,), 1, 2)  # each change applied once
    assert loaded.offset == 4
