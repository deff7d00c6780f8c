"""Zero-copy replication: a follower's Fetch response read from the socket with each large
partition's records moved straight into the end of its segment file with ``splice(2)``
(socket -> pipe -> file), never copied into Python on the way; then read back (one ``pread``
into a buffer the fetcher keeps), checked (CRC-32C, framing, offsets) and appended where they lie
(``Log.append_as_follower(placed=...)``). Kafka's ReplicaFetcherThread reads every response
into a buffer in the heap first. A response under :data:`SPLICE_MIN_BYTES` is read whole, in one
read, and its records are slices of that buffer.

The response's structure (sizes, counts, names, the partition fields before the records and the
tagged fields after them) is read into a small buffer, never past the item being read
(:class:`~odradek.protocol.fetch_response_reader.FetchResponseScanner`), so the first byte of a
partition's records is the socket's next byte. Records shorter than :data:`SPLICE_MIN_BYTES`, or of a
partition whose file cannot take bytes past its end (preallocated), or not wanted (an error, a
partition no longer fetched), are read into memory as before.

Safety: one splice at a time per file (``FileRecords.splicer``; a roll or close of the segment cuts
what it wrote), and bytes are spliced into the file only while the log has not moved since the reader
chose the position (checked before every write, with no await between the check and the write): if
the partition changed hands meanwhile (it became a leader and took a produce, was truncated or
deleted), the rest of its records are drained from the pipe and dropped, and the next fetch asks
again. Whatever was written past the log's end and not appended is cut from the file before the
reader goes on (``FileRecords.discard_past_end``), so a crash or a clean stop never finds it
(and recovery would drop it anyway: it would not continue the log's offsets or its CRCs).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, Protocol

from odradek.client import framer
from odradek.protocol.fetch_response_reader import FetchedPartition, FetchResponseError, FetchResponseScanner

if TYPE_CHECKING:
    from odradek.client.socket_wire import SocketWireClient
    from odradek.log.file_records import FileRecords

# below this, the pipe's two system calls and the read back cost more than copying the bytes in and out
SPLICE_MIN_BYTES = 64 << 10
PIPE_BYTES = 1 << 20  # the pipe's size asked for (the default Linux limit for an unprivileged process)
_F_SETPIPE_SZ = 1031
_F_GETPIPE_SZ = 1032
_SPLICE_FLAGS = getattr(os, "SPLICE_F_MOVE", 1) | getattr(os, "SPLICE_F_NONBLOCK", 2)


def available() -> bool:
    """Whether this platform can splice (Linux, Python 3.10+)."""
    return hasattr(os, "splice")


class SpliceTarget(NamedTuple):
    """Where a partition's records go: ``file`` at ``position`` (its end), while ``still_valid()``."""

    file: FileRecords
    position: int
    still_valid: Callable[[], bool]


class FetchSink(Protocol):
    def head(self, error_code: int) -> None:
        """The response's top-level error code, before any partition."""

    def target(self, topic: str, partition: FetchedPartition, length: int) -> SpliceTarget | None:
        """Where to splice ``length`` bytes of records, or None to have them read into memory."""

    def apply(self, topic: str, partition: FetchedPartition, placed: tuple[FileRecords, int] | None) -> None:
        """A partition with its records (a memory buffer; for records ``placed`` in a file, a copy of
        them read back from it, valid only during the call)."""

    def write_failed(self, target: SpliceTarget, error: OSError) -> None:
        """Writing into ``target``'s file failed (its log directory is failing)."""


class Pipe:
    """The pipe a fetcher splices through (kept for its connection; closed on any error, since
    it may then hold bytes of a response nobody will read), and the buffer the bytes spliced into a
    file are read back into for their check (grown to the largest records spliced, reused: mapping
    them instead, ``mmap`` with ``MAP_POPULATE`` and ``munmap`` per partition, cost ~1.3x the
    ``pread`` here, 133 against 99 us a MB with the CRC)."""

    def __init__(self) -> None:
        self.r, self.w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        with contextlib.suppress(OSError):  # else the default size (64 KB): more, smaller splices
            fcntl.fcntl(self.w, _F_SETPIPE_SZ, PIPE_BYTES)
        self.capacity = fcntl.fcntl(self.w, _F_GETPIPE_SZ)
        self.read_back = bytearray()

    def read_file(self, fd: int, position: int, n: int) -> memoryview:
        """The ``n`` bytes at ``position`` of file ``fd``, read into the reused buffer: the view is
        overwritten by the next call, so it must not be kept. Raises ``OSError`` (``EIO`` when the
        file holds fewer bytes there)."""
        if len(self.read_back) < n:
            self.read_back = bytearray(n)  # a new buffer: a view still held of the old one stays intact
        view = memoryview(self.read_back)[:n]
        got = 0
        while got < n:
            k = os.preadv(fd, [view[got:]], position + got)
            if k == 0:
                view.release()
                raise OSError(errno.EIO, f"{n - got} bytes missing at {position + got} of a file just written")
            got += k
        return view

    def close(self) -> None:
        os.close(self.r)
        os.close(self.w)


async def read_fetch_response_spliced(client: SocketWireClient, correlation_id: int, pipe: Pipe,
                                      sink: FetchSink) -> None:
    """Read one FetchResponse v12 (the response to ``correlation_id``) from ``client``'s socket,
    handing each partition to ``sink`` as soon as its records are in. Raises
    ``FetchResponseError``/``FrameError`` (undecodable: the caller drops the connection),
    ``OSError`` (the connection failed)."""
    prefix = bytearray(4)
    await client.recv_into(memoryview(prefix))
    size = framer.response_size(bytes(prefix))
    scanner = FetchResponseScanner(size, correlation_id)
    whole = size < SPLICE_MIN_BYTES  # no partition's records can be spliced: one read, as before
    buf = bytearray(size if whole else 256)
    start, end = 0, 0  # buf[start:end]: bytes read from the socket, not parsed yet
    if whole:
        await client.recv_into(memoryview(buf))
        end = size
    topic = ""
    head_told = False
    while True:
        pos, part = scanner.scan(memoryview(buf), start, end)
        start = pos
        if not head_told and scanner.head_read:
            head_told = True
            sink.head(scanner.error_code)
        if scanner.topic_started:
            topic = scanner.topic
            continue
        if part is None:
            if scanner.done:
                left = scanner.left  # bytes after the response's fields: ignored, as in a whole frame
                scratch = memoryview(bytearray(min(left, 1 << 16)))
                while left > 0:
                    k = min(left, len(scratch))
                    await client.recv_into(scratch[:k])
                    left -= k
                return
            # more structure: read exactly the bytes the next item needs at least, so nothing of a
            # partition's records is ever read here
            have = end - start
            if start > 0:
                buf[:have] = buf[start:end]
                start, end = 0, have
            want = min(scanner.need, scanner.left) - have
            if want <= 0:  # the scanner refuses a response cut short before it asks past its end
                raise FetchResponseError("fetch response ends inside an item")
            if end + want > len(buf):
                buf.extend(bytes(end + want - len(buf)))
            await client.recv_into(memoryview(buf)[end : end + want])
            end += want
            continue
        n = scanner.records_length
        placed: tuple[FileRecords, int] | None = None
        target = None
        try:
            if n > 0:
                target = sink.target(topic, part, n) if n >= SPLICE_MIN_BYTES and end == start else None
                if whole:  # a slice of the frame, as read_fetch_response gives it
                    part.records = memoryview(buf)[start : start + n]
                    start += n
                elif target is None:
                    records = bytearray(n)
                    carried = min(end - start, n)
                    records[:carried] = buf[start : start + carried]
                    start += carried
                    if carried < n:
                        await client.recv_into(memoryview(records)[carried:])
                    part.records = memoryview(records)
                else:
                    target.file.splicer = target  # one splice into a file at a time; a roll cuts it
                    if await _splice_records(client, pipe, target, n, sink):
                        try:
                            part.records = pipe.read_file(target.file.fileno(), target.position, n)
                            placed = (target.file, target.position)
                        except OSError as e:
                            sink.write_failed(target, e)
                    if placed is None:
                        scanner.records_consumed()
                        continue  # dropped: the partition moved on, or its log dir failed
            elif n == 0:
                part.records = memoryview(b"")
            scanner.records_consumed()
            sink.apply(topic, part, placed)
        finally:
            if part.records is not None and (whole or placed is not None):
                part.records.release()  # the frame's buffer stays resizable; the read-back one reusable
            part.records = None
            if target is not None and target.file.splicer is target:
                target.file.splicer = None
                if target.file.size != target.position + n:  # not all appended in place
                    target.file.discard_past_end()


async def _splice_records(client: SocketWireClient, pipe: Pipe, target: SpliceTarget, n: int,
                          sink: FetchSink) -> bool:
    """Move ``n`` bytes from the socket to ``target``; False when they were dropped instead."""
    sock = client.sock
    assert sock is not None
    fd = sock.fileno()
    at = target.position
    done = 0
    writing = True
    splice = os.splice
    while done < n:
        try:
            k = splice(fd, pipe.w, min(n - done, pipe.capacity), flags=_SPLICE_FLAGS)
        except BlockingIOError:
            await client.wait_readable(min(n - done, pipe.capacity))
            continue
        if k == 0:
            raise ConnectionError("the leader closed the connection")
        if writing and target.file.splicer is target and target.still_valid():
            w = 0
            try:
                out = target.file.fileno()
                while w < k:
                    w += splice(pipe.r, out, k - w, offset_dst=at + done + w)
            except OSError as e:
                writing = False
                sink.write_failed(target, e)
                _drain(pipe, k - w)
        else:
            writing = False
            _drain(pipe, k)
        done += k
    return writing and target.file.splicer is target and target.still_valid()


def _drain(pipe: Pipe, n: int) -> None:
    while n > 0:
        n -= len(os.read(pipe.r, min(n, 1 << 16)))

