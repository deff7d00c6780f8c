"""AlterReplicaLogDirs (KIP-113) with kafka-python's KafkaAdminClient: a partition's log moves from one
log dir to another while it takes writes; every record stays readable by confluent-kafka, across a
restart; Kafka's errors for a bad dir or partition. (confluent-kafka's AdminClient has no
AlterReplicaLogDirs.)"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from kafka import TopicPartitionReplica
from kafka import errors as kerrors
from kafka.admin import KafkaAdminClient
from waiting import wait_until

from .broker import Broker, BrokerFactory
from .clients import Out, consume_confluent, create_topic, make_messages, produce_confluent

T = 30.0


def _two_dirs(make_broker: BrokerFactory, tmp_path: Path) -> tuple[Broker, Path, Path]:
    a, b = (tmp_path / "dir-a").resolve(), (tmp_path / "dir-b").resolve()
    broker = make_broker({"log.dirs": f"{a},{b}", "num.partitions": 1, "offsets.topic.num.partitions": 1})
    return broker, a, b


def _where(root_dirs: tuple[Path, Path], topic: str) -> list[Path]:
    return [d for d in root_dirs if (d / f"{topic}-0").is_dir()]


def _describe(ka: KafkaAdminClient, topic: str) -> list[dict[str, Any]]:
    """[(log dir, partition, size, is_future)] for the topic's partition 0."""
    out = []
    for broker in ka.describe_log_dirs():
        for r in broker["log_dirs"]:
            for t in r["topics"]:
                if t["name"] == topic:
                    for p in t["partitions"]:
                        out.append({"dir": r["log_dir"], **p})
    return out


def _records(topic: str, n: int, tag: str, size: int = 400) -> list[Out]:
    return make_messages(n, tag, value_size=size)


def _produce(bootstrap: str, topic: str, msgs: list[Out]) -> None:
    produce_confluent(bootstrap, topic, msgs, extra={"batch.size": 16384})


def _values(bootstrap: str, topic: str, count: int) -> list[bytes | None]:
    got = consume_confluent(bootstrap, topic, {0: 0}, count)
    return [m.value for m in got]


def test_move_a_partition_between_log_dirs_while_it_takes_writes(make_broker: BrokerFactory, tmp_path: Path) -> None:
    broker, a, b = _two_dirs(make_broker, tmp_path)
    topic = f"move-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1, config={"segment.bytes": 100_000})
    first = _records(topic, 3000, "a")
    _produce(broker.bootstrap, topic, first)
    (src,) = _where((a, b), topic)
    dest = b if src == a else a
    assert len(list((src / f"{topic}-0").glob("*.log"))) > 5  # several segments to copy
    ka = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        res = ka.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 0): str(dest)})
        assert res == {TopicPartitionReplica(topic, 0, 0): kerrors.NoError}
        # writes go on while it moves
        second = _records(topic, 500, "b")
        _produce(broker.bootstrap, topic, second)
        wait_until(lambda: _where((a, b), topic) == [dest], T, f"the partition to move to {dest}")
        assert not list(dest.glob(f"{topic}-0.*-future"))
        described = _describe(ka, topic)
        assert [(d["dir"], d["is_future_key"]) for d in described] == [(str(dest), False)], described
        third = _records(topic, 200, "c")
        _produce(broker.bootstrap, topic, third)
        want = [m.value for m in first + second + third]
        assert _values(broker.bootstrap, topic, len(want)) == want
        # moving it to where it is is a no-op; bad requests get Kafka's errors
        res = ka.alter_replica_log_dirs({
            TopicPartitionReplica(topic, 0, 0): str(dest),
            TopicPartitionReplica(topic, 1, 0): str(dest),
            TopicPartitionReplica("no-such-topic", 0, 0): str(dest),
        })
        assert res == {
            TopicPartitionReplica(topic, 0, 0): kerrors.NoError,
            TopicPartitionReplica(topic, 1, 0): kerrors.UnknownTopicOrPartitionError,
            TopicPartitionReplica("no-such-topic", 0, 0): kerrors.UnknownTopicOrPartitionError,
        }
        res = ka.alter_replica_log_dirs({TopicPartitionReplica(topic, 0, 0): str(tmp_path / "not-a-log-dir")})
        assert res == {TopicPartitionReplica(topic, 0, 0): kerrors.LogDirNotFoundError}
    finally:
        ka.close()
    broker.assert_alive()
    broker.restart()
    assert _where((a, b), topic) == [dest]
    assert _values(broker.bootstrap, topic, len(want)) == want
    assert not list(src.glob(f"{topic}-0*"))  # the old directory is gone


@pytest.mark.parametrize("stage", ["copying", "swapped-halfway"])
def test_restart_in_the_middle_of_a_move(make_broker: BrokerFactory, tmp_path: Path, stage: str) -> None:
    """A move the broker did not finish: the future log is copied again, or the swap is finished."""
    broker, a, b = _two_dirs(make_broker, tmp_path)
    topic = f"move-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap, topic, 1, config={"segment.bytes": 100_000})
    recs = _records(topic, 1000, "a")
    _produce(broker.bootstrap, topic, recs)
    (src,) = _where((a, b), topic)
    dest = b if src == a else a
    broker.stop()
    uid = uuid.uuid4().hex
    future = dest / f"{topic}-0.{uid}-future"
    if stage == "copying":  # a partial copy: one segment, cut short
        future.mkdir()
        seg = sorted((src / f"{topic}-0").glob("*.log"))[0]
        (future / seg.name).write_bytes(seg.read_bytes()[:1000])
    else:  # the current log renamed to -delete, the (complete) future not yet renamed
        import shutil

        shutil.copytree(src / f"{topic}-0", future)
        for idx in list(future.glob("*.index")) + list(future.glob("*.timeindex")):
            idx.unlink()
        (src / f"{topic}-0").rename(src / f"{topic}-0.{uid}-delete")
    broker.start()
    wait_until(lambda: _where((a, b), topic) == [dest], T, f"the partition to move to {dest}")
    assert not list(dest.glob("*-future"))
    assert [p.name.endswith("-delete") for p in src.glob(f"{topic}-0*")] in ([], [True])  # removed after a delay
    assert _values(broker.bootstrap, topic, len(recs)) == [m.value for m in recs]
    _produce(broker.bootstrap, topic, _records(topic, 10, "z"))
    assert len(_values(broker.bootstrap, topic, len(recs) + 10)) == len(recs) + 10
