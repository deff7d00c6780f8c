"""Start-up never deletes data it does not recognise (issue 33, item 2).

A real broker process, its log dir damaged while it is stopped: the metadata file truncated, garbled or
deleted (with and without its previous copy), logs that the metadata does not account for, a garbled
``partition.metadata``, a ``meta.properties`` of another broker or a damaged one. Each time: no partition
directory is deleted, the broker either starts on what it can trust (with a warning) or refuses with one
line naming the file (no traceback), and once the operator repairs what the README says, every
acknowledged record is read back.
"""

from __future__ import annotations

import base64
import os
import shutil
import struct
import subprocess
import sys
import uuid

import pytest

from .broker import Broker, BrokerError, BrokerFactory
from .clients import (
    Out,
    check_acks_contiguous,
    consume_confluent,
    create_topic,
    make_messages,
    produce,
    unique,
    wait_for_topic,
)

METADATA = "odradek-metadata.json"


def _load(b: Broker, topic: str, partitions: int = 2, n: int = 300) -> dict[int, list[Out]]:
    """Create ``topic`` and produce ``n`` records round-robin; the acknowledged records per partition."""
    create_topic(b.bootstrap, topic, partitions)
    msgs = make_messages(n, topic)
    per: dict[int, list[Out]] = {p: [] for p in range(partitions)}
    for m in msgs:
        per[m.index % partitions].append(m)
    for p, ms in per.items():
        acks = produce("confluent", b.bootstrap, topic, ms, partition=p)
        check_acks_contiguous(acks, start={p: 0})
    return per


def _check_all_readable(b: Broker, topic: str, per: dict[int, list[Out]]) -> None:
    for p, ms in per.items():
        got = consume_confluent(b.bootstrap, topic, {p: 0}, len(ms), timeout=30)
        assert [(m.offset, m.key, m.value) for m in got] == [
            (i, o.key, o.value) for i, o in enumerate(ms)
        ], f"{topic}-{p} after the repair"


def _partition_dirs(b: Broker) -> dict[str, set[str]]:
    """Every directory in the log dir with the names of the segment files it holds."""
    return {e.name: {f for f in os.listdir(e.path) if f.endswith(".log")}
            for e in os.scandir(b.logdir) if e.is_dir()}


def _last_start_log(b: Broker) -> str:
    return b.log_text().rsplit("===== start #", 1)[-1]


def _start_refused(b: Broker) -> str:
    """Start the broker, expecting it to exit at start-up; the one ERROR line it wrote."""
    with pytest.raises(BrokerError, match="during start-up"):
        b.start(timeout=60)
    assert b.exit_codes[-1] in (1, 2), b.exit_codes
    text = _last_start_log(b)
    assert "Traceback" not in text, text
    errors = [line for line in text.splitlines() if " ERROR " in line]
    assert len(errors) == 1, text
    return errors[0]


def _stop_and_snapshot(b: Broker, topic: str) -> dict[str, set[str]]:
    b.stop()
    before = _partition_dirs(b)
    assert {f"{topic}-0", f"{topic}-1"} <= set(before)
    return before


@pytest.mark.timeout(240)
@pytest.mark.parametrize("damage", ["truncated", "garbled", "deleted"])
def test_damaged_metadata_file_falls_back_to_its_previous_copy(make_broker: BrokerFactory, damage: str) -> None:
    b = make_broker()
    topic = unique("meta")
    per = _load(b, topic)
    create_topic(b.bootstrap, unique("later"), 1)  # one more change: the previous copy knows `topic`
    before = _stop_and_snapshot(b, topic)
    f = b.logdir / METADATA
    assert (b.logdir / f"{METADATA}.prev").exists()
    raw = f.read_bytes()
    if damage == "truncated":
        f.write_bytes(raw[: len(raw) // 3])
    elif damage == "garbled":
        f.write_bytes(raw[:40] + b"\x00" * 64 + raw[104:])
    else:
        f.unlink()

    b.start()
    text = _last_start_log(b)
    assert "using the previous copy odradek-metadata.json.prev" in text, text
    after = _partition_dirs(b)
    for name, segments in before.items():  # every directory there before is there, with its segments
        assert segments <= after.get(name, set()), (name, after)
    _check_all_readable(b, topic, per)
    if damage != "deleted":
        assert [p for p in os.listdir(b.logdir) if ".corrupt-" in p], "the damaged file is kept aside"


@pytest.mark.timeout(240)
def test_kill9_replays_the_metadata_journal_and_drops_a_torn_last_entry(make_broker: BrokerFactory) -> None:
    """The changes since the last snapshot live only in the journal when the broker is killed; a write the
    kill interrupted (a last entry cut short) is dropped with a warning, everything acknowledged is back."""
    b = make_broker()
    topic = unique("journal")
    per = _load(b, topic)
    later = unique("later")
    create_topic(b.bootstrap, later, 3)
    b.kill()
    journal = b.logdir / "odradek-metadata.journal"
    raw = journal.read_bytes()
    assert len(raw) > 40, "the topics' changes are in the journal, not yet in a snapshot"
    journal.write_bytes(raw + struct.pack(">II", 500, 0) + b"\x00\x00\x00\x01\x01")  # 500 bytes announced, 5 there

    b.start()
    text = _last_start_log(b)
    assert "a change the crash interrupted (never acknowledged): dropped" in text, text
    _check_all_readable(b, topic, per)
    wait_for_topic(b.bootstrap, later, 3)
    # the journal was cut back: the changes after the restart survive another kill
    again = unique("again")
    create_topic(b.bootstrap, again, 1)
    b.kill()
    b.start()
    assert "dropped" not in _last_start_log(b)
    wait_for_topic(b.bootstrap, again, 1)
    _check_all_readable(b, topic, per)


@pytest.mark.timeout(300)
def test_metadata_file_and_copy_lost_refuses_start_then_the_operator_adopts_the_strays(
    make_broker: BrokerFactory,
) -> None:
    b = make_broker()
    topic = unique("lost")
    per = _load(b, topic)
    before = _stop_and_snapshot(b, topic)
    (b.logdir / METADATA).unlink()
    (b.logdir / f"{METADATA}.prev").unlink()

    line = _start_refused(b)
    assert str(b.logdir / METADATA) in line and "refusing to start" in line, line
    assert _partition_dirs(b) == before, "nothing may be deleted or renamed by a refused start"

    # the operator has no copy to restore: they start over with empty metadata (meta.properties removed),
    # and the broker keeps every partition directory, renamed -stray
    (b.logdir / "meta.properties").unlink()
    b.start()
    after = _partition_dirs(b)
    strays = {n: s for n, s in after.items() if n.endswith("-stray")}
    for p in (0, 1):
        [name] = [n for n in strays if n.startswith(f"{topic}-{p}.")]
        assert strays[name] == before[f"{topic}-{p}"], "a stray keeps its segments"
    assert f"{topic}-0" not in after
    assert "Found stray log" in _last_start_log(b)

    # adopting them: re-create the topic, stop, and `odradek log-dirs adopt-strays` puts each stray in
    # place of the new empty log (moved aside, not deleted) without its old topic id; start
    create_topic(b.bootstrap, topic, 2)
    b.stop()

    def adopt(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "odradek", "log-dirs", "adopt-strays", "--log-dirs",
                               str(b.logdir), "--topic", topic, *extra], capture_output=True, text=True, timeout=60)

    dry = adopt("--dry-run")
    assert dry.returncode == 0 and dry.stdout.count("would adopt") == 2, dry.stdout + dry.stderr
    assert set(strays) <= set(_partition_dirs(b)), "a dry run changes nothing"
    done = adopt()
    assert done.returncode == 0, done.stdout + done.stderr
    after_adopt = _partition_dirs(b)
    assert not set(strays) & set(after_adopt), "every stray was renamed back"
    for p in (0, 1):
        assert after_adopt[f"{topic}-{p}"] == before[f"{topic}-{p}"]
        kept = os.listdir(b.logdir / f"{topic}-{p}")
        assert [n for n in kept if n.startswith("partition.metadata.adopted-")] and "partition.metadata" not in kept
    again = adopt()  # the empty logs moved aside are strays now, and the live logs hold records
    assert again.returncode == 1 and "holds records" in again.stdout, again.stdout
    b.start()
    _check_all_readable(b, topic, per)


@pytest.mark.timeout(240)
def test_logs_the_metadata_does_not_account_for_are_renamed_stray_not_deleted(make_broker: BrokerFactory) -> None:
    b = make_broker()
    topic = unique("known")
    per = _load(b, topic)
    before = _stop_and_snapshot(b, topic)
    # a log of a topic the metadata does not have, and one whose topic id is another topic's
    shutil.copytree(b.logdir / f"{topic}-0", b.logdir / "ghost-0")
    other_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
    (b.logdir / f"{topic}-1" / "partition.metadata").write_text(f"version: 0\ntopic_id: {other_id}\n")

    b.start()
    text = _last_start_log(b)
    after = _partition_dirs(b)
    [ghost] = [n for n in after if n.startswith("ghost-0.") and n.endswith("-stray")]
    assert after[ghost] == before[f"{topic}-0"]
    [moved] = [n for n in after if n.startswith(f"{topic}-1.") and n.endswith("-stray")]
    assert after[moved] == before[f"{topic}-1"]
    assert "Found stray log ghost-0 (its topic is not in the metadata)" in text, text
    assert f"Found stray log {topic}-1 (its topic id {other_id} is not the topic's" in text, text
    # the partition whose log was stray gets a new, empty one; the other is untouched
    _check_all_readable(b, topic, {0: per[0], 1: []})
    # a stray is never loaded again, nor deleted, on later starts
    b.restart()
    assert {ghost, moved} <= set(_partition_dirs(b))


@pytest.mark.timeout(180)
@pytest.mark.parametrize("content", [b"\xff\xfe\x00garbage", b"version: 0\ntopic_id: !!not-an-id!!\n", b"\n"])
def test_garbled_partition_metadata_is_one_line_error_naming_the_file(
    make_broker: BrokerFactory, content: bytes
) -> None:
    b = make_broker()
    topic = unique("pmeta")
    per = _load(b, topic)
    before = _stop_and_snapshot(b, topic)
    pm = b.logdir / f"{topic}-0" / "partition.metadata"
    pm.write_bytes(content)

    line = _start_refused(b)
    assert f"Malformed {pm}" in line or f"in {pm}" in line, line
    assert _partition_dirs(b) == before
    # the README's repair: remove it, the log takes the topic id of the topic with its name
    pm.unlink()
    b.start()
    _check_all_readable(b, topic, per)


@pytest.mark.timeout(180)
def test_meta_properties_of_another_broker_or_damaged_refuses_start(make_broker: BrokerFactory) -> None:
    b = make_broker()
    topic = unique("brokerid")
    per = _load(b, topic)
    before = _stop_and_snapshot(b, topic)
    props = b.logdir / "meta.properties"
    text = props.read_text()
    assert "broker.id=0" in text and "cluster.id=" in text and "version=0" in text

    b.overrides["broker.id"] = "7"
    line = _start_refused(b)
    assert f"Configured broker.id 7 doesn't match stored broker.id 0 in {props}" in line, line
    del b.overrides["broker.id"]

    for damaged in (b"\xff\xfe\x00", b"version=0\nbroker.id=zero\n", b"version=0\n"):
        props.write_bytes(damaged)
        line = _start_refused(b)
        assert str(props) in line, line
        assert _partition_dirs(b) == before

    props.write_text(text)
    b.start()
    _check_all_readable(b, topic, per)
