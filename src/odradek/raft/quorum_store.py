"""The ``quorum-state`` file: a replica's epoch, leader and vote, as Kafka's FileQuorumStateStore keeps them.

Kafka writes the file in the metadata log's directory (``__cluster_metadata-0/quorum-state``) before it
acts on a new election state (QuorumState.durableTransitionTo): above all before granting a vote, so
that a replica that restarts cannot vote twice in one epoch. It is one line of JSON, UTF-8, with no line
break at the end: Jackson's compact form of QuorumStateData (raft/src/main/resources/common/message/
QuorumStateData.json) in the field order of that schema, plus ``data_version``. The version follows the
``kraft.version`` feature (KRaftVersion.quorumStateVersion):

version 1 (``kraft.version`` 1, KIP-853)::

    {"leaderId":1,"leaderEpoch":2,"votedId":-1,"votedDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA","data_version":1}

version 0 (``kraft.version`` 0, a static ``controller.quorum.voters``)::

    {"clusterId":"","leaderId":1,"leaderEpoch":2,"votedId":-1,"appliedOffset":0,
     "currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}

(one line in the file). ``leaderId`` and ``votedId`` are -1 for none; ``votedDirectoryId`` is the voted
replica's directory id as Kafka prints a Uuid (URL-safe base64 of its 16 bytes, no padding; the zero
Uuid, ``AAAAAAAAAAAAAAAAAAAAAA``, for none). ``clusterId``, ``appliedOffset`` and ``currentVoters`` of
version 0 are read and ignored, as Kafka 4 does.

The file is replaced through :func:`odradek.fsutil.write_atomic` (``quorum-state.tmp``, fsync, rename,
fsync of the directory): Kafka's writeElectionStateToFile with Utils.atomicMoveWithFallback. A file that
is not this JSON is refused with one line naming it (:class:`QuorumStateError`), never taken for "no
vote": guessing would let the replica vote twice.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from odradek.fsutil import write_atomic
from odradek.raft.state import NO_LEADER, ElectionState, ReplicaKey

DEFAULT_FILE_NAME = "quorum-state"  # Kafka's FileQuorumStateStore.DEFAULT_FILE_NAME
DATA_VERSION = "data_version"
LOWEST_SUPPORTED_VERSION = 0
HIGHEST_SUPPORTED_VERSION = 1
NOT_VOTED = -1
ZERO_UUID = uuid.UUID(int=0)


class QuorumStateError(Exception):
    """The ``quorum-state`` file cannot be read; the message names the file and says why, on one line."""


class QuorumStateStore(Protocol):
    """Kafka's QuorumStateStore."""

    def read_election_state(self) -> ElectionState | None: ...

    def write_election_state(self, election: ElectionState) -> None: ...


class InMemoryQuorumStateStore:
    """A QuorumStateStore that lives as long as the object: the tests' and the simulation's disk."""

    def __init__(self, election: ElectionState | None = None) -> None:
        self.election = election
        self.writes = 0

    def read_election_state(self) -> ElectionState | None:
        return self.election

    def write_election_state(self, election: ElectionState) -> None:
        self.election = election
        self.writes += 1


def kafka_uuid_str(value: uuid.UUID | None) -> str:
    """Kafka's Uuid.toString: URL-safe base64 of the 16 bytes, without padding."""
    return base64.urlsafe_b64encode((value or ZERO_UUID).bytes).decode("ascii").rstrip("=")


def parse_kafka_uuid(text: str) -> uuid.UUID | None:
    """Kafka's Uuid.fromString; None for the zero Uuid."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except ValueError:
        raw = b""
    if len(raw) != 16:
        raise ValueError(f"{text!r} is not a Uuid (16 bytes in URL-safe base64)")
    value = uuid.UUID(bytes=raw)
    return None if value == ZERO_UUID else value


def encode(election: ElectionState, version: int = HIGHEST_SUPPORTED_VERSION, voters: Sequence[int] = ()) -> bytes:
    """The file's bytes for ``election`` (version 0 also lists ``voters``, as Kafka's static quorum does)."""
    voted_id = election.voted_key.id if election.voted_key else NOT_VOTED
    doc: dict[str, object]
    if version == 0:
        doc = {
            "clusterId": "",
            "leaderId": election.leader_id,
            "leaderEpoch": election.epoch,
            "votedId": voted_id,
            "appliedOffset": 0,
            "currentVoters": [{"voterId": v} for v in voters],
        }
    elif version == 1:
        doc = {
            "leaderId": election.leader_id,
            "leaderEpoch": election.epoch,
            "votedId": voted_id,
            "votedDirectoryId": kafka_uuid_str(election.voted_key.directory_id if election.voted_key else None),
        }
    else:
        raise ValueError(f"quorum state data version {version} is not between 0 and {HIGHEST_SUPPORTED_VERSION}")
    doc[DATA_VERSION] = version
    return json.dumps(doc, separators=(",", ":")).encode("utf-8")


def _int_field(doc: dict[str, object], name: str, version: int) -> int:
    value = doc.get(name)
    if value is None:
        raise ValueError(f"QuorumStateData: unable to locate field '{name}', which is mandatory in version {version}")
    if not isinstance(value, int) or isinstance(value, bool) or not -(2**31) <= value < 2**31:
        raise ValueError(f"field '{name}' is {value!r}, not an int32")
    return value


def decode(data: bytes) -> ElectionState:
    """The election state in the file's bytes (its first line, as Kafka reads it); ValueError if garbage."""
    line = data.split(b"\n", 1)[0]
    if not line.strip():
        raise ValueError("the file is empty")
    try:
        doc = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"not JSON ({e})") from None
    if not isinstance(doc, dict):
        raise ValueError(f"the JSON is a {type(doc).__name__}, not an object")
    if DATA_VERSION not in doc:
        raise ValueError(f"no {DATA_VERSION} field")
    version = doc[DATA_VERSION]
    if not isinstance(version, int) or not LOWEST_SUPPORTED_VERSION <= version <= HIGHEST_SUPPORTED_VERSION:
        raise ValueError(
            f"data_version ({version}) is not within the min ({LOWEST_SUPPORTED_VERSION}) and max "
            f"({HIGHEST_SUPPORTED_VERSION}) supported version"
        )
    leader_id = _int_field(doc, "leaderId", version)
    epoch = _int_field(doc, "leaderEpoch", version)
    voted_id = _int_field(doc, "votedId", version)
    directory_id: uuid.UUID | None = None
    if version >= 1:
        text = doc.get("votedDirectoryId")
        if not isinstance(text, str):
            raise ValueError(
                "QuorumStateData: unable to locate field 'votedDirectoryId', which is mandatory in version 1"
            )
        directory_id = parse_kafka_uuid(text)
    if epoch < 0:
        raise ValueError(f"leaderEpoch {epoch} is negative")
    return ElectionState(
        epoch,
        leader_id if leader_id >= 0 else NO_LEADER,
        ReplicaKey(voted_id, directory_id) if voted_id != NOT_VOTED else None,
    )


class FileQuorumStateStore:
    """Kafka's FileQuorumStateStore over one file (``quorum-state`` in the metadata log's directory)."""

    def __init__(self, path: Path, *, version: int = HIGHEST_SUPPORTED_VERSION, voters: Sequence[int] = ()) -> None:
        if not LOWEST_SUPPORTED_VERSION <= version <= HIGHEST_SUPPORTED_VERSION:
            raise ValueError(f"quorum state data version {version} is not supported")
        self.path = path
        self.version = version
        self.voters = tuple(voters)

    def read_election_state(self) -> ElectionState | None:
        """None when there is no file (a new replica); QuorumStateError when it cannot be read."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as e:
            raise QuorumStateError(f"{self.path}: cannot read the quorum state: {e.strerror or e}") from None
        try:
            return decode(data)
        except ValueError as e:
            raise QuorumStateError(f"{self.path}: not a quorum-state file Kafka's FileQuorumStateStore reads: {e}") from None

    def write_election_state(self, election: ElectionState) -> None:
        write_atomic(self.path, encode(election, self.version, self.voters))
