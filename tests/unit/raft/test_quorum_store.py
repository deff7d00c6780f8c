"""The quorum-state file: Kafka's FileQuorumStateStore JSON, byte for byte, written atomically, refused when garbage."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from odradek.raft.quorum_store import (
    FileQuorumStateStore,
    QuorumStateError,
    decode,
    encode,
    kafka_uuid_str,
    parse_kafka_uuid,
)
from odradek.raft.state import ElectionState, ReplicaKey


def test_version_1_bytes_are_kafkas() -> None:
    # FileQuorumStateStore's javadoc example, with no line break after it
    data = encode(ElectionState(2, -1, ReplicaKey(1, parse_kafka_uuid("J8aAPcfLQt2bqs1JT_rMgQ"))))
    assert data == (
        b'{"leaderId":-1,"leaderEpoch":2,"votedId":1,"votedDirectoryId":"J8aAPcfLQt2bqs1JT_rMgQ","data_version":1}'
    )
    assert encode(ElectionState(2, 1)) == (
        b'{"leaderId":1,"leaderEpoch":2,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}'
    )


def test_version_0_bytes_are_kafkas() -> None:
    data = encode(ElectionState(2, 1), version=0, voters=[1, 2, 3])
    assert data == (
        b'{"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,'
        b'"currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}'
    )
    assert decode(data) == ElectionState(2, 1)


@pytest.mark.parametrize(
    "election",
    [
        ElectionState(0),
        ElectionState(7, 3),
        ElectionState(7, -1, ReplicaKey(2)),
        ElectionState(9, 2, ReplicaKey(2, uuid.UUID("12345678-1234-5678-1234-567812345678"))),
    ],
)
def test_round_trip(election: ElectionState) -> None:
    assert decode(encode(election)) == election


def test_kafka_uuid_strings() -> None:
    u = uuid.uuid4()
    assert parse_kafka_uuid(kafka_uuid_str(u)) == u
    assert kafka_uuid_str(None) == "AAAAAAAAAAAAAAAAAAAAAA"
    assert parse_kafka_uuid("AAAAAAAAAAAAAAAAAAAAAA") is None


def test_file_store_writes_atomically_and_reads_back(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    store = FileQuorumStateStore(path)
    assert store.read_election_state() is None  # a new replica
    store.write_election_state(ElectionState(3, -1, ReplicaKey(2)))
    store.write_election_state(ElectionState(3, 2, ReplicaKey(2)))
    assert FileQuorumStateStore(path).read_election_state() == ElectionState(3, 2, ReplicaKey(2))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["quorum-state"]  # no quorum-state.tmp left


def test_kafka_written_file_with_a_trailing_line_is_read(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    path.write_bytes(b'{"leaderId":3,"leaderEpoch":12,"votedId":3,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}\n')
    assert FileQuorumStateStore(path).read_election_state() == ElectionState(12, 3, ReplicaKey(3))


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"", "empty"),
        (b"\x00\x01garbage", "not JSON"),
        (b"[1, 2]", "not an object"),
        (b'{"leaderId":1,"leaderEpoch":2,"votedId":-1}', "no data_version"),
        (b'{"leaderId":1,"leaderEpoch":2,"votedId":-1,"data_version":7}', "data_version \\(7\\)"),
        (b'{"leaderId":1,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}', "leaderEpoch"),
        (b'{"leaderId":1,"leaderEpoch":2,"votedId":-1,"data_version":1}', "votedDirectoryId"),
        (b'{"leaderId":"x","leaderEpoch":2,"votedId":-1,"data_version":0}', "not an int32"),
        (b'{"leaderId":1,"leaderEpoch":2,"votedId":-1,"votedDirectoryId":"short","data_version":1}', "Uuid"),
    ],
)
def test_garbage_is_refused_in_one_line_naming_the_file(tmp_path: Path, content: bytes, why: str) -> None:
    path = tmp_path / "quorum-state"
    path.write_bytes(content)
    with pytest.raises(QuorumStateError, match=why) as info:
        FileQuorumStateStore(path).read_election_state()
    message = str(info.value)
    assert message.startswith(str(path)) and "\n" not in message


def test_unreadable_file_is_named(tmp_path: Path) -> None:
    path = tmp_path / "quorum-state"
    path.mkdir()  # a directory where the file should be
    with pytest.raises(QuorumStateError, match="cannot read") as info:
        FileQuorumStateStore(path).read_election_state()
    assert str(path) in str(info.value)
