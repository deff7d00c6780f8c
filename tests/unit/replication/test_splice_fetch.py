"""The follower's splice reader against a real loopback TCP connection: a FetchResponse v12 written
in small pieces by a server, read with odradek.replication.splice_fetch into real logs. Large records
must land in the segment file through splice(2) and be appended where they lie; everything that is not
appended (a partial last batch, records of a partition that moved on, a broken connection) must be
cut from the file again."""

from __future__ import annotations

import asyncio
import os
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from odradek.client.socket_wire import SocketWireClient
from odradek.log.config import LogConfig
from odradek.log.file_records import FileRecords
from odradek.log.log import Log
from odradek.protocol.fetch_response import PartitionResult, TopicResult, encode_fetch_response
from odradek.protocol.fetch_response_reader import FetchedPartition
from odradek.protocol.records import build_batch, complete_batches_length, validate_batches
from odradek.replication import splice_fetch

pytestmark = pytest.mark.skipif(not splice_fetch.available(), reason="splice(2) is Linux-only")


def batches(base: int, count: int, value_bytes: int = 20_000, per_batch: int = 4) -> bytes:
    out = bytearray()
    for i in range(count):
        recs = [(b"k%d" % j, bytes([(base + i + j) % 251]) * value_bytes) for j in range(per_batch)]
        out += build_batch(recs, base_offset=base + i * per_batch, partition_leader_epoch=1)
    return bytes(out)


@dataclass
class Sink:
    logs: dict[str, Log]
    valid: Callable[[str, int], bool] = lambda topic, calls: True  # still_valid's answer on its nth call
    heads: list[int] = field(default_factory=list)
    applied: list[tuple[str, int, int, bool]] = field(default_factory=list)  # topic, partition, bytes, placed

    def head(self, error_code: int) -> None:
        self.heads.append(error_code)

    def target(self, topic: str, partition: FetchedPartition, length: int) -> splice_fetch.SpliceTarget | None:
        lg = self.logs.get(topic)
        where = lg.splice_target() if lg is not None else None
        if where is None:
            return None
        calls = [0]

        def still_valid() -> bool:
            calls[0] += 1
            return self.valid(topic, calls[0])

        return splice_fetch.SpliceTarget(where[0], where[1], still_valid)

    def apply(self, topic: str, partition: FetchedPartition, placed: tuple[FileRecords, int] | None) -> None:
        records = partition.records
        assert records is not None
        self.applied.append((topic, partition.partition_index, len(records), placed is not None))
        whole = complete_batches_length(records)
        if topic in self.logs and whole:
            records = records[:whole]
            self.logs[topic].append_as_follower(records, validate_batches(records), 1000, placed)

    def write_failed(self, target: splice_fetch.SpliceTarget, error: OSError) -> None:
        raise AssertionError(error)


def response(topics: list[TopicResult], corr: int) -> bytes:
    parts, _ = encode_fetch_response(12, topics, session_id=0)
    body = struct.pack(">i", corr) + b"\x00" + b"".join(bytes(p) for p in parts)
    return struct.pack(">i", len(body)) + body


def exchange(topics: list[TopicResult], sink: Sink, *, cut: int | None = None, piece: int = 7_001) -> None:
    """Serve one response (in ``piece``-byte writes; only its first ``cut`` bytes when given) and read it."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        size = struct.unpack(">i", await reader.readexactly(4))[0]
        req = await reader.readexactly(size)
        corr = struct.unpack_from(">i", req, 4)[0]
        data = response(topics, corr)
        if cut is not None:
            data = data[:cut]
        for i in range(0, len(data), piece):
            writer.write(data[i : i + piece])
            await writer.drain()
            await asyncio.sleep(0)
        if cut is not None:
            writer.close()

    async def run() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        client = SocketWireClient("127.0.0.1", port, "test", 10.0)
        pipe = splice_fetch.Pipe()
        try:
            corr = await client.send_request(1, 12, b"\x00" * 8)
            await asyncio.wait_for(splice_fetch.read_fetch_response_spliced(client, corr, pipe, sink), 10)
        finally:
            pipe.close()
            client.close()
            server.close()
            await server.wait_closed()

    asyncio.run(run())


def on_disk(lg: Log) -> bytes:
    """The active segment's whole file, past the log's end included."""
    return Path(lg.active_segment.log.path).read_bytes()


def test_large_records_are_spliced_in_place_small_ones_read(tmp_path: Path) -> None:
    big, small = batches(0, 6), batches(0, 1, value_bytes=100, per_batch=2)
    assert len(big) >= splice_fetch.SPLICE_MIN_BYTES > len(small)
    logs = {"a": Log.create(tmp_path, "a", 0, LogConfig(), None), "b": Log.create(tmp_path, "b", 0, LogConfig(), None)}
    sink = Sink(logs)
    exchange([
        TopicResult("a", uuid.uuid4(), [PartitionResult(0, 0, 24, 24, 0, None, -1, [big], len(big)),
                                        PartitionResult(1, 6, -1, -1, -1, [(7, 3)], -1, [], 0)]),
        TopicResult("b", uuid.uuid4(), [PartitionResult(0, 0, 2, 2, 0, None, -1, [small], len(small))]),
        TopicResult("c", uuid.uuid4(), []),
    ], sink)
    assert sink.heads == [0]
    assert sink.applied == [("a", 0, len(big), True), ("a", 1, 0, False), ("b", 0, len(small), False)]
    assert logs["a"].log_end_offset == 24 and logs["b"].log_end_offset == 2
    assert on_disk(logs["a"]) == big and on_disk(logs["b"]) == small
    assert logs["a"].active_segment.log.size == len(big)
    # the offset index was built from the spliced batches: a read from offset 13 starts at its batch
    got = logs["a"].read(13, 1 << 20, 24, True)
    assert got.regions[0].position == 3 * (len(big) // 6)


def test_a_partial_last_batch_is_cut_from_the_file(tmp_path: Path) -> None:
    whole = batches(0, 4)
    sent = whole + batches(16, 1)[:5_000]
    lg = Log.create(tmp_path, "a", 0, LogConfig(), None)
    sink = Sink({"a": lg})
    exchange([TopicResult("a", uuid.uuid4(), [PartitionResult(0, 0, 20, 20, 0, None, -1, [sent], len(sent))])], sink)
    assert sink.applied == [("a", 0, len(sent), True)]
    assert lg.log_end_offset == 16 and on_disk(lg) == whole  # the partial batch's bytes are gone


def test_records_of_a_partition_that_moved_on_are_dropped(tmp_path: Path) -> None:
    big = batches(0, 8)
    lg = Log.create(tmp_path, "a", 0, LogConfig(), None)
    other = Log.create(tmp_path, "b", 0, LogConfig(), None)
    # valid for the first piece only: the partition changed hands while its records came in
    sink = Sink({"a": lg, "b": other}, valid=lambda topic, n: topic != "a" or n == 1)
    later = batches(0, 5)
    exchange([TopicResult("a", uuid.uuid4(), [PartitionResult(0, 0, 32, 32, 0, None, -1, [big], len(big))]),
              TopicResult("b", uuid.uuid4(), [PartitionResult(0, 0, 20, 20, 0, None, -1, [later], len(later))])],
             sink, piece=65_536)
    # a's records were not handed on (its first piece was written, then cut); the stream stayed in step for b
    assert sink.applied == [("b", 0, len(later), True)]
    assert lg.log_end_offset == 0 and on_disk(lg) == b""
    assert other.log_end_offset == 20 and on_disk(other) == later


def test_a_roll_or_skipped_batches_copy_the_records_out_of_the_tail(tmp_path: Path) -> None:
    first = batches(0, 4)
    lg = Log.create(tmp_path, "a", 0, LogConfig(segment_bytes=len(first) + 1000), None)
    lg.append_as_follower(first, validate_batches(first), 1000)
    # the leader sends from the batch holding offset 12 again (below our end), then new batches: the
    # append skips the first and needs a new segment for the rest
    again = first[3 * (len(first) // 4):] + batches(16, 4)
    sink = Sink({"a": lg})
    exchange([TopicResult("a", uuid.uuid4(), [PartitionResult(0, 0, 32, 32, 0, None, -1, [again], len(again))])],
             sink)
    assert lg.log_end_offset == 32 and len(lg.segments) == 2
    assert Path(lg.segments[0].log.path).read_bytes() == first  # the spliced tail was cut from the old segment
    assert on_disk(lg) == batches(16, 4)


def test_a_broken_connection_mid_records_leaves_nothing_behind(tmp_path: Path) -> None:
    big = batches(0, 8)
    lg = Log.create(tmp_path, "a", 0, LogConfig(), None)
    sink = Sink({"a": lg})
    with pytest.raises(ConnectionError):
        exchange([TopicResult("a", uuid.uuid4(), [PartitionResult(0, 0, 32, 32, 0, None, -1, [big], len(big))])],
                 sink, cut=100_000)
    assert sink.applied == [] and lg.log_end_offset == 0 and on_disk(lg) == b""


def test_a_preallocated_segment_reads_into_memory(tmp_path: Path) -> None:
    big = batches(0, 6)
    lg = Log.create(tmp_path, "a", 0, LogConfig(preallocate=True, segment_bytes=4 << 20), None)
    sink = Sink({"a": lg})
    exchange([TopicResult("a", uuid.uuid4(), [PartitionResult(0, 0, 24, 24, 0, None, -1, [big], len(big))])], sink)
    assert sink.applied == [("a", 0, len(big), False)] and lg.log_end_offset == 24


def test_corr_mismatch_and_garbage_are_refused(tmp_path: Path) -> None:
    from odradek.protocol.fetch_response_reader import FetchResponseError

    lg = Log.create(tmp_path, "a", 0, LogConfig(), None)

    async def run(data: bytes) -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await reader.readexactly(struct.unpack(">i", await reader.readexactly(4))[0])
            writer.write(data)
            await writer.drain()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        client = SocketWireClient("127.0.0.1", server.sockets[0].getsockname()[1], "test", 10.0)
        pipe = splice_fetch.Pipe()
        try:
            corr = await client.send_request(1, 12, b"\x00" * 8)
            await asyncio.wait_for(splice_fetch.read_fetch_response_spliced(client, corr, pipe, Sink({"a": lg})), 5)
        finally:
            pipe.close()
            client.close()
            server.close()

    with pytest.raises(FetchResponseError, match="correlation"):
        asyncio.run(run(response([], 999)))
    lying: Any = struct.pack(">i", 29) + struct.pack(">i", 1) + b"\x00" + b"\x00" * 10 + b"\xff\xff\xff\x0f" + b"\x00" * 10
    with pytest.raises(FetchResponseError):  # a topic count the frame cannot hold: refused
        asyncio.run(run(lying))
    # the same in a frame announced as 1 MB, of which only the header ever comes: refused at once,
    # neither awaited nor allocated
    lying = struct.pack(">i", 1 << 20) + lying[4:]
    with pytest.raises(FetchResponseError):
        asyncio.run(run(lying))
    assert os.path.getsize(lg.active_segment.log.path) == 0 if lg.active_segment.log.exists else True
