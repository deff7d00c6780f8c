"""The RemoteStorageManager contract (Kafka's, KIP-405), one suite run against both stores of
odradek.tiered.storage: FileSystemRemoteStorage in a directory, and S3RemoteStorage against a real S3 server
(moto's, ``python -m moto.server``, started here on a free loopback port as a separate process).

moto and boto3 are test dependencies installed by scripts/setup.sh (pyproject's ``test`` extra): when
either is missing the S3 half fails (an import error, or the server process exiting), it is never skipped.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import boto3
import pytest

from odradek.tiered.metadata import RemoteLogSegmentId, RemoteLogSegmentMetadata, TopicIdPartition
from odradek.tiered.storage import (
    MIN_PART_SIZE,
    FileSystemRemoteStorage,
    IndexType,
    LogSegmentData,
    Opener,
    RemoteResourceNotFoundError,
    RemoteStorageError,
    RemoteStorageManager,
    S3RemoteStorage,
    open_source,
    segment_dir,
)

from .broker import free_port

HOST = "127.0.0.1"
MOTO_START_TIMEOUT = 60.0  # two busy cores: the server imports Flask and moto's S3 backend first
TP = TopicIdPartition(uuid.UUID("0123456789abcdeffedcba9876543210"), "orders", 3)


# --- the S3 server -----------------------------------------------------------------------------------


@dataclass
class MotoServer:
    proc: subprocess.Popen[bytes]
    endpoint: str
    log: Path

    def client(self) -> Any:
        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint, region_name="us-east-1",
            aws_access_key_id="testing", aws_secret_access_key="testing",
        )


@contextlib.contextmanager
def running_moto(log: Path, **env: str) -> Iterator[MotoServer]:
    """moto's S3 server as a process on a free loopback port, until the block ends."""
    port = free_port()
    full_env = {**os.environ, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", **env}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", HOST, "-p", str(port)],
            stdout=out, stderr=subprocess.STDOUT, env=full_env,
        )
    try:
        deadline = time.monotonic() + MOTO_START_TIMEOUT
        while True:
            if proc.poll() is not None:
                pytest.fail(f"moto's S3 server exited with {proc.returncode}: {log.read_text()[-2000:]}")
            try:
                socket.create_connection((HOST, port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"moto's S3 server did not listen on {port}: {log.read_text()[-2000:]}")
                time.sleep(0.1)
        yield MotoServer(proc, f"http://{HOST}:{port}", log)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def moto_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MotoServer]:
    with running_moto(tmp_path_factory.mktemp("moto") / "moto.log") as server:
        yield server


# --- the two stores under one harness ----------------------------------------------------------------


class Harness:
    """Makes a store (with a given opener for the local files) and lists everything it keeps."""

    name: str

    def make(self, opener: Opener = open_source) -> RemoteStorageManager:
        raise NotImplementedError

    def leftovers(self) -> list[str]:
        """Everything stored, visible or not (hidden directories, orphan objects, unfinished uploads)."""
        raise NotImplementedError


class FsHarness(Harness):
    name = "filesystem"

    def __init__(self, root: Path) -> None:
        self.root = root

    def make(self, opener: Opener = open_source) -> RemoteStorageManager:
        return FileSystemRemoteStorage(self.root, opener=opener)

    def leftovers(self) -> list[str]:
        return sorted(str(p.relative_to(self.root)) for p in self.root.rglob("*") if p.is_file())


class S3Harness(Harness):
    name = "s3"

    def __init__(self, server: MotoServer) -> None:
        self.server = server
        self.bucket = f"tiered-{uuid.uuid4().hex[:12]}"
        self.s3 = server.client()
        self.s3.create_bucket(Bucket=self.bucket)

    def make(self, opener: Opener = open_source) -> RemoteStorageManager:
        return S3RemoteStorage(
            self.bucket, "cluster-a/", endpoint_url=self.server.endpoint, region="us-east-1",
            access_key_id="testing", secret_access_key="testing", part_size=MIN_PART_SIZE, opener=opener,
        )

    def leftovers(self) -> list[str]:
        objects = self.s3.list_objects_v2(Bucket=self.bucket).get("Contents", [])
        uploads = self.s3.list_multipart_uploads(Bucket=self.bucket).get("Uploads", [])
        return sorted([o["Key"] for o in objects] + [f"upload:{u['Key']}" for u in uploads])


@pytest.fixture(params=["filesystem", "s3"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Harness:
    if request.param == "filesystem":
        return FsHarness(tmp_path / "remote")
    return S3Harness(request.getfixturevalue("moto_server"))


# --- segments ------------------------------------------------------------------------------------------


@dataclass
class Segment:
    metadata: RemoteLogSegmentMetadata
    data: LogSegmentData
    contents: dict[IndexType | None, bytes]


def make_segment(tmp_path: Path, start: int, log_size: int, *, txn: bool = True) -> Segment:
    d = tmp_path / f"local-{start}"
    d.mkdir()
    contents: dict[IndexType | None, bytes] = {
        None: os.urandom(log_size),
        IndexType.OFFSET: os.urandom(4096),
        IndexType.TIMESTAMP: os.urandom(1200),
        IndexType.PRODUCER_SNAPSHOT: os.urandom(300),
        IndexType.LEADER_EPOCH: b"0\n2\n0 100\n2 150\n",
    }
    if txn:
        contents[IndexType.TRANSACTION] = os.urandom(340)
    names = {None: ".log", IndexType.OFFSET: ".index", IndexType.TIMESTAMP: ".timeindex",
             IndexType.TRANSACTION: ".txnindex", IndexType.PRODUCER_SNAPSHOT: ".snapshot"}
    paths: dict[IndexType | None, Path] = {}
    for kind, suffix in names.items():
        if kind in contents:
            paths[kind] = d / f"{start:020d}{suffix}"
            paths[kind].write_bytes(contents[kind])
    data = LogSegmentData(
        paths[None], paths[IndexType.OFFSET], paths[IndexType.TIMESTAMP], paths.get(IndexType.TRANSACTION),
        paths[IndexType.PRODUCER_SNAPSHOT], contents[IndexType.LEADER_EPOCH],
    )
    metadata = RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate_new(TP), start, start + 99, 1700000000000, 1, 1700000000500, log_size,
        {0: start},
    )
    return Segment(metadata, data, contents)


def read_all(stream_factory: Callable[[], Any], chunk: int = 7919) -> bytes:
    with stream_factory() as s:
        out = b""
        while piece := s.read(chunk):
            assert len(piece) <= chunk
            out += piece
        return out


# --- the contract --------------------------------------------------------------------------------------


def test_copy_then_fetch_the_log_whole_and_by_ranges(harness: Harness, tmp_path: Path) -> None:
    seg = make_segment(tmp_path, 100, 300_000)
    store = harness.make()
    assert store.copy_log_segment_data(seg.metadata, seg.data) is None
    log = seg.contents[None]
    m = seg.metadata
    assert read_all(lambda: store.fetch_log_segment(m, 0)) == log
    assert read_all(lambda: store.fetch_log_segment(m, 1000, 1999)) == log[1000:2000]  # both ends inclusive
    assert read_all(lambda: store.fetch_log_segment(m, 5, 5)) == log[5:6]
    assert read_all(lambda: store.fetch_log_segment(m, 299_000, 10**9)) == log[299_000:]  # end past the end
    assert read_all(lambda: store.fetch_log_segment(m, len(log) - 1)) == log[-1:]
    assert read_all(lambda: store.fetch_log_segment(m, len(log))) == b""  # start at the end
    with store.fetch_log_segment(m, 10, 20) as s:  # the stream ends at the end position, whatever is asked
        assert s.read(1000) == log[10:21]
        assert s.read(1000) == b""
    with pytest.raises(ValueError):
        store.fetch_log_segment(m, -1)
    with pytest.raises(ValueError):
        store.fetch_log_segment(m, 10, 9)
    store.close()


def test_fetch_index_returns_each_index_whole(harness: Harness, tmp_path: Path) -> None:
    with_txn = make_segment(tmp_path, 100, 5000)
    without_txn = make_segment(tmp_path, 200, 5000, txn=False)
    store = harness.make()
    store.copy_log_segment_data(with_txn.metadata, with_txn.data)
    store.copy_log_segment_data(without_txn.metadata, without_txn.data)
    for kind in IndexType:
        assert read_all(lambda k=kind: store.fetch_index(with_txn.metadata, k)) == with_txn.contents[kind]
    for kind in IndexType:
        if kind is IndexType.TRANSACTION:
            with pytest.raises(RemoteResourceNotFoundError):  # Kafka's contract for an absent txn index
                store.fetch_index(without_txn.metadata, kind)
        else:
            assert read_all(lambda k=kind: store.fetch_index(without_txn.metadata, k)) == without_txn.contents[kind]


def test_an_unknown_segment_is_not_found(harness: Harness, tmp_path: Path) -> None:
    seg = make_segment(tmp_path, 100, 1000)
    store = harness.make()
    with pytest.raises(RemoteResourceNotFoundError):
        store.fetch_log_segment(seg.metadata, 0)
    with pytest.raises(RemoteResourceNotFoundError):
        store.fetch_index(seg.metadata, IndexType.OFFSET)


def test_delete_removes_the_segment_and_is_idempotent(harness: Harness, tmp_path: Path) -> None:
    kept = make_segment(tmp_path, 100, 2000)
    gone = make_segment(tmp_path, 200, 2000)
    store = harness.make()
    store.copy_log_segment_data(kept.metadata, kept.data)
    store.copy_log_segment_data(gone.metadata, gone.data)
    store.delete_log_segment_data(gone.metadata)
    with pytest.raises(RemoteResourceNotFoundError):
        store.fetch_log_segment(gone.metadata, 0)
    with pytest.raises(RemoteResourceNotFoundError):
        store.fetch_index(gone.metadata, IndexType.OFFSET)
    store.delete_log_segment_data(gone.metadata)  # again: not an error
    assert read_all(lambda: store.fetch_log_segment(kept.metadata, 0)) == kept.contents[None]
    assert all(segment_dir(gone.metadata) not in name for name in harness.leftovers())
    store.delete_log_segment_data(kept.metadata)
    assert harness.leftovers() == []


def test_a_retried_copy_overwrites(harness: Harness, tmp_path: Path) -> None:
    seg = make_segment(tmp_path, 100, 3000)
    store = harness.make()
    store.copy_log_segment_data(seg.metadata, seg.data)
    seg.data.log_segment.write_bytes(b"x" * 10)
    store.copy_log_segment_data(seg.metadata, seg.data)
    assert read_all(lambda: store.fetch_log_segment(seg.metadata, 0)) == b"x" * 10


class FailingReader:
    """A local .log that breaks after ``fail_after`` bytes (a disk error, or the broker going away)."""

    def __init__(self, path: Path, fail_after: int) -> None:
        self.f: BinaryIO = open(path, "rb")  # noqa: SIM115 (closed by __exit__)
        self.left = fail_after

    def read(self, n: int = -1) -> bytes:
        if self.left <= 0:
            raise OSError(5, "Input/output error")
        data = self.f.read(self.left if n < 0 else min(n, self.left))
        self.left -= len(data)
        return data

    def __enter__(self) -> FailingReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.f.close()


@pytest.mark.parametrize("log_size", [300_000, 3 * MIN_PART_SIZE - 12345])  # one PUT; a multipart upload
def test_a_copy_interrupted_halfway_leaves_nothing_visible(harness: Harness, tmp_path: Path, log_size: int) -> None:
    seg = make_segment(tmp_path, 100, log_size)

    def opener(path: Path) -> BinaryIO:
        if path == seg.data.log_segment:
            return FailingReader(path, log_size // 2 + 7)  # type: ignore[return-value]
        return open(path, "rb")

    broken = harness.make(opener)
    with pytest.raises(RemoteStorageError):
        broken.copy_log_segment_data(seg.metadata, seg.data)
    store = harness.make()
    with pytest.raises(RemoteResourceNotFoundError):
        store.fetch_log_segment(seg.metadata, 0)
    for kind in IndexType:
        with pytest.raises(RemoteResourceNotFoundError):
            store.fetch_index(seg.metadata, kind)
    assert all(".log" not in name and not name.startswith("upload:") for name in harness.leftovers())
    # Kafka's RemoteLogManager deletes the failed attempt's segment id: nothing of it is left
    store.delete_log_segment_data(seg.metadata)
    assert harness.leftovers() == []
    # and a new attempt (a new segment id) copies it whole
    retry = RemoteLogSegmentMetadata(
        RemoteLogSegmentId.generate_new(TP), 100, 199, 1700000000000, 1, 1700000000900, log_size, {0: 100}
    )
    store.copy_log_segment_data(retry, seg.data)
    assert read_all(lambda: store.fetch_log_segment(retry, 0), chunk=1 << 20) == seg.contents[None]
    middle = MIN_PART_SIZE - 10  # across the first part boundary of a multipart upload
    assert read_all(lambda: store.fetch_log_segment(retry, middle, middle + 99)) == seg.contents[None][middle : middle + 100]


def test_the_filesystem_layout_is_the_documented_one(tmp_path: Path) -> None:
    seg = make_segment(tmp_path, 100, 1000)
    store = FileSystemRemoteStorage(tmp_path / "remote")
    store.copy_log_segment_data(seg.metadata, seg.data)
    d = tmp_path / "remote" / segment_dir(seg.metadata)
    assert d.parent.name == "orders-3-ASNFZ4mrze_-3LqYdlQyEA"
    assert sorted(p.name for p in d.iterdir()) == [
        "00000000000000000100.index", "00000000000000000100.log", "00000000000000000100.snapshot",
        "00000000000000000100.timeindex", "00000000000000000100.txnindex", "leader-epoch-checkpoint",
    ]
    assert (d / "00000000000000000100.log").read_bytes() == seg.contents[None]


def test_s3_object_keys_are_the_documented_ones(moto_server: MotoServer, tmp_path: Path) -> None:
    h = S3Harness(moto_server)
    seg = make_segment(tmp_path, 100, 1000, txn=False)
    h.make().copy_log_segment_data(seg.metadata, seg.data)
    base = f"cluster-a/orders-3-ASNFZ4mrze_-3LqYdlQyEA/00000000000000000100-{segment_dir(seg.metadata)[-22:]}/"
    assert h.leftovers() == [
        base + n for n in (
            "00000000000000000100.index", "00000000000000000100.log", "00000000000000000100.snapshot",
            "00000000000000000100.timeindex", "leader-epoch-checkpoint",
        )
    ]


def test_s3_errors_are_remote_storage_errors(moto_server: MotoServer, tmp_path: Path) -> None:
    seg = make_segment(tmp_path, 100, 1000)
    no_bucket = S3RemoteStorage(
        "no-such-bucket", endpoint_url=moto_server.endpoint, region="us-east-1",
        access_key_id="testing", secret_access_key="testing",
    )
    with pytest.raises(RemoteStorageError) as e:
        no_bucket.copy_log_segment_data(seg.metadata, seg.data)
    assert not isinstance(e.value, RemoteResourceNotFoundError) and "NoSuchBucket" in str(e.value)
    unreachable = S3RemoteStorage(
        "b", endpoint_url=f"http://{HOST}:{free_port()}", region="us-east-1",
        access_key_id="testing", secret_access_key="testing", max_attempts=1,
    )
    with pytest.raises(RemoteStorageError) as e:
        unreachable.fetch_log_segment(seg.metadata, 0)
    assert not isinstance(e.value, RemoteResourceNotFoundError)


def test_s3_refused_credentials_are_a_storage_error_never_a_missing_segment(tmp_path: Path) -> None:
    # INITIAL_NO_AUTH_ACTION_COUNT=0: moto checks every request's access key, as S3 does
    with running_moto(tmp_path / "moto.log", INITIAL_NO_AUTH_ACTION_COUNT="0") as server:
        seg = make_segment(tmp_path, 100, 1000)
        store = S3RemoteStorage(
            "b", endpoint_url=server.endpoint, region="us-east-1",
            access_key_id="nobody", secret_access_key="wrong",
        )
        calls: list[Callable[[], object]] = [
            lambda: store.copy_log_segment_data(seg.metadata, seg.data),
            lambda: store.fetch_log_segment(seg.metadata, 0),
            lambda: store.fetch_index(seg.metadata, IndexType.OFFSET),
            lambda: store.delete_log_segment_data(seg.metadata),
        ]
        for call in calls:
            with pytest.raises(RemoteStorageError, match="InvalidAccessKeyId|403") as e:  # HEAD: no body
                call()
            assert not isinstance(e.value, RemoteResourceNotFoundError)
