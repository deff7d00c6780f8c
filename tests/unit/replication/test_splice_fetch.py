"""The follower's splice reader against a real loopback TCP connection: a FetchResponse v12 written
in small pieces by a server, read with odradek.replication.splice_fetch into real logs. Large records
must land in the segment file through splice(2) and be appended where they lie; everything that is not
appended (a partial last batch, records of a partition that moved on, a broken connection) must be
cut from the file again."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import struct
import time
import uuid
from collections.abc import AsyncIterator, Callable
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
from odradek.protocol.varint import encode_uvarint
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
        async with connected(serve) as (client, pipe):
            corr = await client.send_request(1, 12, b"\x00" * 8)
            await asyncio.wait_for(splice_fetch.read_fetch_response_spliced(client, corr, pipe, sink), 10)

    asyncio.run(run())


@contextlib.asynccontextmanager
async def connected(serve: Callable[..., Any]) -> AsyncIterator[tuple[SocketWireClient, splice_fetch.Pipe]]:
    """A loopback server running ``serve``, a SocketWireClient connected to it and a pipe; all closed after."""
    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    client = SocketWireClient("127.0.0.1", server.sockets[0].getsockname()[1], "t", 10.0)
    pipe = splice_fetch.Pipe()
    try:
        yield client, pipe
    finally:
        pipe.close()
        client.close()
        server.close()  # not awaited: a handler may still hold its connection (Python 3.12 waits for them)


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



def test_spliced_records_are_read_back_exactly_through_one_reused_buffer(tmp_path: Path) -> None:
    # three partitions spliced from one response, the second the largest: each is read back whole for
    # its check (a wrong byte fails the CRC in append_as_follower) through the pipe's one buffer
    sizes = {0: 6, 1: 9, 2: 4}
    data = {p: batches(0, n, value_bytes=20_000 + p) for p, n in sizes.items()}
    logs = {f"t{p}": Log.create(tmp_path, f"t{p}", 0, LogConfig(), None) for p in sizes}
    sink = Sink(logs)
    exchange([TopicResult(f"t{p}", uuid.uuid4(), [PartitionResult(0, 0, 4 * n, 4 * n, 0, None, -1, [data[p]],
                                                                  len(data[p]))])
              for p, n in sizes.items()], sink)
    assert sink.applied == [(f"t{p}", 0, len(data[p]), True) for p in sizes]
    for p, n in sizes.items():
        assert logs[f"t{p}"].log_end_offset == 4 * n and on_disk(logs[f"t{p}"]) == data[p]


def test_read_file_reuses_its_buffer_and_refuses_a_short_file(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(bytes(range(256)) * 1024)
    pipe = splice_fetch.Pipe()
    fd = os.open(path, os.O_RDONLY)
    try:
        view = pipe.read_file(fd, 1000, 70_000)
        assert bytes(view) == path.read_bytes()[1000:71_000]
        buffer = pipe.read_back
        view.release()
        assert bytes(pipe.read_file(fd, 5, 300)) == path.read_bytes()[5:305] and pipe.read_back is buffer
        held = pipe.read_file(fd, 0, 10)  # a view still held: a larger read takes a new buffer, not this one
        pipe.read_file(fd, 0, 200_000)
        assert pipe.read_back is not buffer and bytes(held) == bytes(range(10))
        with pytest.raises(OSError) as e:
            pipe.read_file(fd, 262_000, 1_000)  # 144 bytes there
        assert e.value.errno == errno.EIO
    finally:
        os.close(fd)
        pipe.close()

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

        async with connected(serve) as (client, pipe):
            corr = await client.send_request(1, 12, b"\x00" * 8)
            await asyncio.wait_for(splice_fetch.read_fetch_response_spliced(client, corr, pipe, Sink({"a": lg})), 5)

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


def serve_once(data_of: Callable[[int], bytes], *, hold: float = 0.0) -> Callable[..., Any]:
    """A server handler answering each request with ``data_of(corr)`` (then idle ``hold`` seconds)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
            while True:
                req = await reader.readexactly(struct.unpack(">i", await reader.readexactly(4))[0])
                writer.write(data_of(struct.unpack_from(">i", req, 4)[0]))
                await writer.drain()
                if hold:
                    await asyncio.sleep(hold)

    return serve


def test_a_long_item_learnt_piece_by_piece_does_not_hold_the_event_loop() -> None:
    """3,900 aborted transactions in a 66 KB response (read item by item): the list is parsed again a
    logarithmic number of times, not once per byte that arrives (that held the loop for over a minute)."""
    n = 3_900
    part = struct.pack(">ihqqq", 0, 0, 0, 0, 0) + encode_uvarint(n + 1) + (struct.pack(">qq", 1, 2) + b"\x00") * n
    part += struct.pack(">i", -1) + encode_uvarint(1) + b"\x00"
    body = struct.pack(">ihi", 0, 0, 0) + encode_uvarint(2) + encode_uvarint(2) + b"a" + encode_uvarint(2) + part
    body += b"\x00\x00"

    def data_of(corr: int) -> bytes:
        frame = struct.pack(">i", corr) + b"\x00" + body
        return struct.pack(">i", len(frame)) + frame

    sink = Sink({})

    async def run() -> float:
        gap = [0.0]

        async def ticker() -> None:
            last = time.perf_counter()
            while True:
                await asyncio.sleep(0.01)
                now = time.perf_counter()
                gap[0], last = max(gap[0], now - last), now

        tick = asyncio.create_task(ticker())
        try:
            async with connected(serve_once(data_of, hold=30)) as (client, pipe):
                corr = await client.send_request(1, 12, b"\x00" * 8)
                await asyncio.sleep(0.2)  # the whole response waits in the socket
                async with asyncio.timeout(5):
                    await splice_fetch.read_fetch_response_spliced(client, corr, pipe, sink)
                await asyncio.sleep(0.05)
                return gap[0]
        finally:
            tick.cancel()

    assert asyncio.run(run()) < 0.5
    assert sink.applied == [("a", 0, 0, False)]


def test_a_log_dir_move_copies_only_what_the_log_holds(tmp_path: Path) -> None:
    """AlterReplicaLogDirs copies segment files while a splice has bytes past the log's end: they must not
    be copied (the log may later hold other bytes there, and the move copies only what grew since)."""
    from odradek.log import dir_move

    (tmp_path / "d1").mkdir()
    (tmp_path / "d2").mkdir()
    lg = Log.create(tmp_path / "d1", "a", 0, LogConfig(), None)
    valid = [True]
    sink = Sink({"a": lg}, valid=lambda topic, n: valid[0])
    big = batches(0, 8)
    fut = dir_move.FutureLog("a", 0, tmp_path / "d2", dir_move.new_uid())
    fut.path.mkdir()
    seg = lg.active_segment.log.path

    def copy_round() -> None:  # what LogManager._run_move / _finish_move do
        ranges, _ = dir_move.plan(fut, lg.dir, lg.segment_file_sizes())
        dir_move.record(fut, dir_move.copy_ranges(lg.dir, fut.path, ranges))

    async def run() -> None:
        go = asyncio.Event()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            req = await reader.readexactly(struct.unpack(">i", await reader.readexactly(4))[0])
            data = response([TopicResult("a", uuid.uuid4(), [PartitionResult(0, 0, 32, 32, 0, None, -1, [big],
                                                                             len(big))])],
                            struct.unpack_from(">i", req, 4)[0])
            writer.write(data[:300_000])
            await writer.drain()
            await go.wait()
            writer.write(data[300_000:])
            await writer.drain()

        async with connected(serve) as (client, pipe):
            corr = await client.send_request(1, 12, b"\x00" * 8)
            reading = asyncio.create_task(splice_fetch.read_fetch_response_spliced(client, corr, pipe, sink))
            while not seg.exists() or seg.stat().st_size < 200_000:  # spliced, not appended yet
                await asyncio.sleep(0.01)
            assert lg.active_segment.log.size == 0
            copy_round()
            valid[0] = False  # the partition changes hands: other bytes are appended at that position
            other = batches(0, 8, value_bytes=20_001)
            lg.append_as_follower(other, validate_batches(other), 1000)
            go.set()
            await reading

    asyncio.run(run())
    copy_round()
    assert (fut.path / seg.name).read_bytes() == seg.read_bytes() == batches(0, 8, value_bytes=20_001)


def test_a_storage_error_choosing_the_target_fails_the_log_dir_not_the_connection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from odradek.log import file_records
    from odradek.replication.fetcher import FetcherConfig, FetchState, ReplicaFetcher

    lg = Log.create(tmp_path, "a", 0, LogConfig(), None)
    assert not lg.active_segment.log.exists  # a new partition's first segment file is made lazily
    big = batches(0, 8)
    real_open = os.open

    def failing_open(path: Any, flags: int, *a: Any) -> int:
        if str(path).endswith(".log"):
            raise OSError(errno.EIO, "Input/output error", str(path))
        return real_open(path, flags, *a)

    monkeypatch.setattr(file_records.os, "open", failing_open)
    failed: list[Path] = []

    async def run() -> None:
        data_of = lambda corr: response(  # noqa: E731
            [TopicResult("a", uuid.uuid4(), [PartitionResult(0, 0, 32, 32, 0, None, -1, [big], len(big))])], corr)
        server = await asyncio.start_server(serve_once(data_of), "127.0.0.1", 0)
        f = ReplicaFetcher(FetcherConfig(broker_id=1), 0, "127.0.0.1", server.sockets[0].getsockname()[1],
                           lambda t, p: lg if (t, p) == ("a", 0) else None)
        await f.stop()  # its own loop out of the way: one fetch, driven here
        f.stopped = False
        f.on_storage_error = lambda d, e: failed.append(d)
        f.partitions[("a", 0)] = FetchState(0, truncating=False)
        try:
            await f._fetch([("a", 0)])  # no WireError: the connection is fine
            assert f.client.connected
        finally:
            f._drop_connection()
            server.close()

    asyncio.run(run())
    assert failed and set(failed) == {lg.dir}


def test_bytes_after_the_fields_of_a_large_response_are_read_past(tmp_path: Path) -> None:
    """A frame longer than its fields (ignored by read_fetch_response) leaves the stream in step."""
    big = batches(0, 6)
    lg = Log.create(tmp_path, "a", 0, LogConfig(), None)
    sink = Sink({"a": lg})

    def data_of(corr: int) -> bytes:
        data = response([TopicResult("a", uuid.uuid4(), [PartitionResult(0, 0, 24, 24, 0, None, -1, [big],
                                                                         len(big))])], corr)
        padded = data[4:] + b"\x00" * 1000
        return struct.pack(">i", len(padded)) + padded

    async def run() -> None:
        async with connected(serve_once(data_of)) as (client, pipe):
            for _ in range(2):
                corr = await client.send_request(1, 12, b"\x00" * 8)
                await asyncio.wait_for(splice_fetch.read_fetch_response_spliced(client, corr, pipe, sink), 5)

    asyncio.run(run())
    # the second answer repeats the same batches: spliced past the end, all below it, none appended, cut
    assert [a[3] for a in sink.applied] == [True, True]
    assert lg.log_end_offset == 24 and on_disk(lg) == big


def test_a_leader_that_does_not_answer_fails_the_fetch_after_the_socket_timeout(tmp_path: Path) -> None:
    from odradek.client.async_wire import WireError
    from odradek.replication.fetcher import FetcherConfig, FetchState, ReplicaFetcher

    lg = Log.create(tmp_path, "a", 0, LogConfig(), None)

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.read(1 << 16)  # takes the request, never answers
        await asyncio.sleep(30)

    async def run() -> float:
        server = await asyncio.start_server(silent, "127.0.0.1", 0)
        f = ReplicaFetcher(FetcherConfig(broker_id=1, socket_timeout_ms=200, wait_max_ms=100), 0, "127.0.0.1",
                           server.sockets[0].getsockname()[1], lambda t, p: lg if (t, p) == ("a", 0) else None)
        await f.stop()  # its own loop out of the way: one fetch, driven here
        f.stopped = False
        f.partitions[("a", 0)] = FetchState(0, truncating=False)
        t0 = time.monotonic()
        try:
            with pytest.raises(WireError):
                await asyncio.wait_for(f._fetch([("a", 0)]), 10)
            return time.monotonic() - t0
        finally:
            f._drop_connection()
            server.close()

    took = asyncio.run(run())
    assert 0.25 < took < 5  # socket timeout + max wait (0.3 s), not the wait_for's 10 s
