"""Kafka's RemoteStorageManager (KIP-405) and two stores: a directory and S3.

A store keeps, per copied segment (one :class:`RemoteLogSegmentId`: a new one for every copy attempt), the
segment's ``.log`` and what Kafka's ``LogSegmentData`` carries with it: the offset index, the time index, the
transaction index (when the segment has one), the producer snapshot as of the segment's end and the leader
epoch checkpoint as of the segment's end (bytes, in the ``leader-epoch-checkpoint`` text format). It does
not interpret them. Its four operations, with Kafka's contract:

- ``copy_log_segment_data(metadata, data)``: store them; idempotent (a retry overwrites); returns the
  custom metadata to record with the segment (None here). A copy is visible only when it is complete: a copy
  that fails or is interrupted halfway leaves nothing that ``fetch_*`` returns;
- ``fetch_log_segment(metadata, start, end)``: the ``.log`` bytes from ``start`` to ``end`` (both
  inclusive; ``end`` None or past the end: to the end) as a :class:`RemoteStream` that reads no further;
- ``fetch_index(metadata, index_type)``: one index whole; an absent transaction index is
  :class:`RemoteResourceNotFoundError` (Kafka's contract), as is a segment that is not (completely) there;
- ``delete_log_segment_data(metadata)``: remove everything of the segment, including what an interrupted
  copy left; idempotent (nothing there is not an error).

Names, the same under a store's root (a directory, or a bucket and key prefix)::

    <topic>-<partition>-<topic id>/<start offset, 20 digits>-<segment id>/
        <start offset, 20 digits>.log        the segment's records (FileRecords)
        <start offset, 20 digits>.index      offset index        IndexType.OFFSET
        <start offset, 20 digits>.timeindex  time index          IndexType.TIMESTAMP
        <start offset, 20 digits>.txnindex   transaction index   IndexType.TRANSACTION (only when given)
        <start offset, 20 digits>.snapshot   producer snapshot   IndexType.PRODUCER_SNAPSHOT
        leader-epoch-checkpoint              leader epochs       IndexType.LEADER_EPOCH

Ids are Kafka's Uuid strings (22 characters of URL-safe base64), so a directory reads as Kafka's local log
directory does and Kafka's tools (DumpLogSegments) read the files as they are, e.g.
``orders-3-ASNFZ4mrze_-3LqYdlQyEA/00000000000000000100-ERERIjMzREQ1VWZmd3eIiA/00000000000000000100.log``.

Atomic visibility: :class:`FileSystemRemoteStorage` writes the files (each fsynced) into a hidden sibling
directory ``.<segment dir>.tmp-<random>`` and renames it into place; delete renames the segment directory
away (``.<segment dir>.deleted-<random>``) before removing it. :class:`S3RemoteStorage` uploads the index
objects first and the ``.log`` object last (one PUT, or a multipart upload completed only after its last
part): the ``.log`` object is the commit point, and ``fetch_index`` answers only when it exists; delete
removes the ``.log`` object first, then every object under the segment's prefix and any multipart upload
left unfinished there.

Every store reads a segment's files through ``open_source`` (a path to a binary file), injectable so that
tests can interrupt a copy halfway.
"""

from __future__ import annotations

import contextlib
import enum
import errno
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Protocol

from odradek.fsutil import fsync_dir
from odradek.tiered.metadata import RemoteLogSegmentMetadata, kafka_uuid_str

_CHUNK = 1 << 20


class RemoteStorageError(Exception):
    """Kafka's RemoteStorageException: the remote store failed (unreachable, refused, broken)."""


class RemoteResourceNotFoundError(RemoteStorageError):
    """Kafka's RemoteResourceNotFoundException: the segment, or the index asked for, is not in the store."""


class IndexType(enum.Enum):
    """Kafka's RemoteStorageManager.IndexType."""

    OFFSET = "OFFSET"
    TIMESTAMP = "TIMESTAMP"
    PRODUCER_SNAPSHOT = "PRODUCER_SNAPSHOT"
    TRANSACTION = "TRANSACTION"
    LEADER_EPOCH = "LEADER_EPOCH"


_SUFFIX = {
    IndexType.OFFSET: ".index",
    IndexType.TIMESTAMP: ".timeindex",
    IndexType.TRANSACTION: ".txnindex",
    IndexType.PRODUCER_SNAPSHOT: ".snapshot",
}
LEADER_EPOCH_FILE = "leader-epoch-checkpoint"


@dataclass(frozen=True)
class LogSegmentData:
    """Kafka's LogSegmentData: a closed segment's files, and the leader epochs up to its end."""

    log_segment: Path
    offset_index: Path
    time_index: Path
    transaction_index: Path | None
    producer_snapshot: Path
    leader_epoch_index: bytes


def segment_dir(m: RemoteLogSegmentMetadata) -> str:
    """The segment's directory (or key prefix, without the trailing slash) under a store's root."""
    tp = m.topic_id_partition
    return (
        f"{tp.topic}-{tp.partition}-{kafka_uuid_str(tp.topic_id)}/"
        f"{m.start_offset:020d}-{kafka_uuid_str(m.segment_id.id)}"
    )


def file_name(m: RemoteLogSegmentMetadata, index_type: IndexType | None) -> str:
    """The name of the segment's ``.log`` (``index_type`` None) or of one of its indexes."""
    if index_type is IndexType.LEADER_EPOCH:
        return LEADER_EPOCH_FILE
    return f"{m.start_offset:020d}{'.log' if index_type is None else _SUFFIX[index_type]}"


class RemoteStream:
    """A bounded stream of bytes from the store (Kafka's InputStream of fetchLogSegment / fetchIndex):
    ``read`` returns at most ``remaining`` bytes in all; b"" at the end. Close it (or use ``with``)."""

    def __init__(self, read: Callable[[int], bytes], remaining: int | None, close: Callable[[], None]) -> None:
        self._read = read
        self._remaining = remaining
        self._close = close
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        if self.closed:
            raise ValueError("read of a closed RemoteStream")
        if self._remaining is not None:
            if self._remaining <= 0:
                return b""
            size = self._remaining if size < 0 else min(size, self._remaining)
        if size < 0:
            parts = []
            while chunk := self._read(_CHUNK):
                parts.append(chunk)
            return b"".join(parts)
        data = self._read(size)
        if self._remaining is not None:
            self._remaining -= len(data)
        return data

    def readall(self) -> bytes:
        parts = []
        while chunk := self.read(_CHUNK):
            parts.append(chunk)
        return b"".join(parts)

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._close()

    def __enter__(self) -> RemoteStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RemoteStorageManager(Protocol):
    """Kafka's RemoteStorageManager: see the module docstring for each operation's contract."""

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> bytes | None: ...

    def fetch_log_segment(
        self, metadata: RemoteLogSegmentMetadata, start_position: int, end_position: int | None = None
    ) -> RemoteStream: ...

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> RemoteStream: ...

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None: ...

    def close(self) -> None: ...


Opener = Callable[[Path], BinaryIO]


def open_source(path: Path) -> BinaryIO:
    """The default ``open_source`` of the stores: the file, read-only."""
    return open(path, "rb")


def _check_positions(start: int, end: int | None) -> None:
    if start < 0:
        raise ValueError(f"start position {start} is negative")
    if end is not None and end < start:
        raise ValueError(f"end position {end} is before start position {start}")


def _read_full(f: BinaryIO, n: int) -> bytes:
    """``n`` bytes of ``f``, fewer only at its end (a read may return less than asked before the end)."""
    parts = []
    while n > 0 and (chunk := f.read(n)):
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


def _sources(data: LogSegmentData) -> Iterator[tuple[IndexType | None, Path | bytes]]:
    """What a copy writes, the ``.log`` last (the commit point of S3RemoteStorage)."""
    yield IndexType.OFFSET, data.offset_index
    yield IndexType.TIMESTAMP, data.time_index
    if data.transaction_index is not None:
        yield IndexType.TRANSACTION, data.transaction_index
    yield IndexType.PRODUCER_SNAPSHOT, data.producer_snapshot
    yield IndexType.LEADER_EPOCH, data.leader_epoch_index
    yield None, data.log_segment


# --- a directory -----------------------------------------------------------------------------------


class FileSystemRemoteStorage:
    """The remote tier in a directory (the embedded default; a mounted network file system in production).
    See the module docstring for the names and how a copy becomes visible at once."""

    def __init__(self, root: Path, *, opener: Opener = open_source, fsync: bool = True) -> None:
        self.root = Path(root)
        self._open = opener
        self._fsync = fsync

    def _dir(self, m: RemoteLogSegmentMetadata) -> Path:
        return self.root / segment_dir(m)

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> bytes | None:
        final = self._dir(metadata)
        tmp = final.with_name(f".{final.name}.tmp-{uuid.uuid4().hex}")
        try:
            tmp.mkdir(parents=True)
            for kind, source in _sources(data):
                self._write(tmp / file_name(metadata, kind), source)
            if self._fsync:
                fsync_dir(tmp)
            if final.exists():  # a retried copy of the same id overwrites it
                self._remove(final)
            os.rename(tmp, final)
            if self._fsync:
                fsync_dir(final.parent)
        except BaseException as e:
            shutil.rmtree(tmp, ignore_errors=True)
            if isinstance(e, OSError):
                raise RemoteStorageError(f"copying {metadata.segment_id} to {final}: {e}") from e
            raise
        return None

    def _write(self, dest: Path, source: Path | bytes) -> None:
        with open(dest, "xb") as out:
            if isinstance(source, bytes):
                out.write(source)
            else:
                with self._open(source) as src:
                    shutil.copyfileobj(src, out, _CHUNK)
            if self._fsync:
                out.flush()
                os.fsync(out.fileno())

    def _open_file(self, metadata: RemoteLogSegmentMetadata, kind: IndexType | None) -> BinaryIO:
        path = self._dir(metadata) / file_name(metadata, kind)
        try:
            return open(path, "rb")
        except FileNotFoundError:
            what = "the segment" if kind is None or not self._dir(metadata).is_dir() else f"its {kind.name} index"
            raise RemoteResourceNotFoundError(f"{metadata.segment_id}: {what} is not in {self.root}") from None
        except OSError as e:
            raise RemoteStorageError(f"reading {path}: {e}") from e

    def fetch_log_segment(
        self, metadata: RemoteLogSegmentMetadata, start_position: int, end_position: int | None = None
    ) -> RemoteStream:
        _check_positions(start_position, end_position)
        f = self._open_file(metadata, None)
        size = os.fstat(f.fileno()).st_size
        last = size - 1 if end_position is None else min(end_position, size - 1)
        f.seek(min(start_position, size))
        return RemoteStream(f.read, max(0, last - start_position + 1), f.close)

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> RemoteStream:
        f = self._open_file(metadata, index_type)
        return RemoteStream(f.read, None, f.close)

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        final = self._dir(metadata)
        try:
            if final.exists():
                self._remove(final)
            if final.parent.is_dir():
                for leftover in final.parent.glob(f".{final.name}.*"):  # interrupted copies and deletes
                    shutil.rmtree(leftover)
                try:
                    final.parent.rmdir()  # the partition's last segment: its directory goes too
                except OSError as e:
                    if e.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOENT):
                        raise
        except OSError as e:
            raise RemoteStorageError(f"deleting {metadata.segment_id} from {final}: {e}") from e

    def _remove(self, path: Path) -> None:
        doomed = path.with_name(f".{path.name}.deleted-{uuid.uuid4().hex}")
        os.rename(path, doomed)
        if self._fsync:
            fsync_dir(path.parent)
        shutil.rmtree(doomed)

    def close(self) -> None:
        pass


# --- S3 --------------------------------------------------------------------------------------------

# S3 refuses parts below 5 MiB (all but the last); the segments Kafka copies are segment.bytes (1 GiB) at most
MIN_PART_SIZE = 5 << 20
_NOT_FOUND = frozenset({"NoSuchKey", "404", "NotFound"})
_INVALID_RANGE = frozenset({"InvalidRange", "416"})


class S3RemoteStorage:
    """The remote tier in an S3 bucket (boto3), under ``prefix`` (e.g. ``"kafka/cluster-1/"``).

    See the module docstring for the object names and for the ``.log`` object as the commit point. A fetch
    of the ``.log`` is one ranged GET (``Range: bytes=start-end``); a fetch of an index is a HEAD of the
    ``.log`` and a GET of the index. ``client``: a boto3 S3 client to use; otherwise one is made from
    ``endpoint_url`` (an S3-compatible server), ``region`` and the credentials (or boto3's own chain:
    environment, profile, instance role), with path-style addressing when an endpoint is given.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        *,
        client: Any = None,
        endpoint_url: str | None = None,
        region: str | None = None,
        access_key_id: str | None = None,
        secret_access_key: str | None = None,
        addressing_style: str | None = None,
        max_attempts: int = 3,
        part_size: int = 16 << 20,
        opener: Opener = open_source,
    ) -> None:
        if part_size < MIN_PART_SIZE:
            raise ValueError(f"part_size {part_size} is below S3's minimum of {MIN_PART_SIZE}")
        self.bucket = bucket
        self.prefix = prefix
        self.part_size = part_size
        self._open = opener
        if client is None:
            import boto3
            from botocore.config import Config

            client = boto3.session.Session().client(
                "s3",
                endpoint_url=endpoint_url,
                region_name=region,
                aws_access_key_id=access_key_id,
                aws_secret_access_key=secret_access_key,
                config=Config(
                    s3={"addressing_style": addressing_style or ("path" if endpoint_url else "auto")},
                    retries={"max_attempts": max_attempts, "mode": "standard"},
                ),
            )
        self.client = client

    def key(self, m: RemoteLogSegmentMetadata, index_type: IndexType | None) -> str:
        """The object key of the segment's ``.log`` (``index_type`` None) or of one of its indexes."""
        return f"{self.prefix}{segment_dir(m)}/{file_name(m, index_type)}"

    def _call(self, what: str, fn: Callable[..., Any], *, empty_on: frozenset[str] = frozenset(), **kw: Any) -> Any:
        """``fn(Bucket=..., **kw)``, its errors as RemoteStorageError (None for the codes in ``empty_on``)."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return fn(Bucket=self.bucket, **kw)
        except ClientError as e:
            code = str(e.response.get("Error", {}).get("Code", ""))
            if code in empty_on:
                return None
            if code in _NOT_FOUND:
                raise RemoteResourceNotFoundError(f"{what}: s3://{self.bucket}/{kw.get('Key', '')} not found") from e
            raise RemoteStorageError(f"{what}: S3 answered {code}: {e}") from e
        except BotoCoreError as e:
            raise RemoteStorageError(f"{what}: {e}") from e

    def copy_log_segment_data(self, metadata: RemoteLogSegmentMetadata, data: LogSegmentData) -> bytes | None:
        what = f"copying {metadata.segment_id}"
        try:
            for kind, source in _sources(data):
                key = self.key(metadata, kind)
                if isinstance(source, bytes):
                    self._call(what, self.client.put_object, Key=key, Body=source)
                elif kind is None:
                    self._upload_log(what, key, source)
                else:
                    with self._open(source) as f:
                        self._call(what, self.client.put_object, Key=key, Body=f.read())
        except OSError as e:
            raise RemoteStorageError(f"{what}: reading the local segment: {e}") from e
        return None

    def _upload_log(self, what: str, key: str, path: Path) -> None:
        with self._open(path) as f:
            first = _read_full(f, self.part_size)
            second = _read_full(f, self.part_size) if len(first) == self.part_size else b""
            if not second:
                self._call(what, self.client.put_object, Key=key, Body=first)
                return
            upload = self._call(what, self.client.create_multipart_upload, Key=key)["UploadId"]
            try:
                parts: list[dict[str, Any]] = []
                part, pending = first, second  # every part but the last is part_size long
                while part:
                    n = len(parts) + 1
                    r = self._call(
                        what, self.client.upload_part, Key=key, UploadId=upload, PartNumber=n, Body=part
                    )
                    parts.append({"PartNumber": n, "ETag": r["ETag"]})
                    part, pending = pending, (_read_full(f, self.part_size) if pending else b"")
                self._call(
                    what, self.client.complete_multipart_upload, Key=key, UploadId=upload,
                    MultipartUpload={"Parts": parts},
                )
            except BaseException:
                # if this fails too, delete_log_segment_data aborts what is left under the segment's prefix
                with contextlib.suppress(RemoteStorageError):
                    self._call(what, self.client.abort_multipart_upload, Key=key, UploadId=upload)
                raise

    def fetch_log_segment(
        self, metadata: RemoteLogSegmentMetadata, start_position: int, end_position: int | None = None
    ) -> RemoteStream:
        _check_positions(start_position, end_position)
        rng = f"bytes={start_position}-{'' if end_position is None else end_position}"
        what = f"fetching {metadata.segment_id}"
        r = self._call(what, self.client.get_object, Key=self.key(metadata, None), Range=rng, empty_on=_INVALID_RANGE)
        if r is None:  # the start is at or past the end of the object
            return RemoteStream(lambda n: b"", 0, lambda: None)
        body = r["Body"]
        return RemoteStream(body.read, int(r["ContentLength"]), body.close)

    def fetch_index(self, metadata: RemoteLogSegmentMetadata, index_type: IndexType) -> RemoteStream:
        what = f"fetching the {index_type.name} index of {metadata.segment_id}"
        self._call(what, self.client.head_object, Key=self.key(metadata, None))  # the commit point
        r = self._call(what, self.client.get_object, Key=self.key(metadata, index_type))
        body = r["Body"]
        return RemoteStream(body.read, int(r["ContentLength"]), body.close)

    def delete_log_segment_data(self, metadata: RemoteLogSegmentMetadata) -> None:
        what = f"deleting {metadata.segment_id}"
        self._call(what, self.client.delete_object, Key=self.key(metadata, None))  # uncommit first
        prefix = f"{self.prefix}{segment_dir(metadata)}/"
        paginator = self.client.get_paginator("list_objects_v2")
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                keys = [{"Key": o["Key"]} for o in page.get("Contents", [])]
                if keys:
                    r = self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": keys, "Quiet": True})
                    if r.get("Errors"):
                        raise RemoteStorageError(f"{what}: S3 kept {r['Errors']}")
            uploads = self.client.list_multipart_uploads(Bucket=self.bucket, Prefix=prefix)
            for u in uploads.get("Uploads", []):
                self._call(what, self.client.abort_multipart_upload, Key=u["Key"], UploadId=u["UploadId"])
        except (BotoCoreError, ClientError) as e:
            raise RemoteStorageError(f"{what}: {e}") from e

    def close(self) -> None:
        self.client.close()
