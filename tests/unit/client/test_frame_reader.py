"""FrameReader: response frames read into frame-sized buffers, whatever the socket reads' sizes."""

import asyncio
import struct

import pytest

from odradek.client.frame_reader import SCRATCH_BYTES, FrameReader
from odradek.protocol.framing import FrameError


class FakeTransport:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def feed(reader: FrameReader, data: bytes, chunk: int) -> None:
    """What a transport does: recv_into the buffer get_buffer hands out, then buffer_updated."""
    pos = 0
    while pos < len(data):
        buf = reader.get_buffer(-1)
        n = min(len(buf), chunk, len(data) - pos)
        buf[:n] = data[pos : pos + n]
        reader.buffer_updated(n)
        pos += n


@pytest.mark.parametrize("chunk", [1, 3, 7, 4096, 16383, 16384, 16385, 1 << 20])
def test_frames_whole_and_in_order(chunk: int) -> None:
    # small frames cut from the scratch buffer, a frame larger than it (its own buffer, the scratch
    # bytes copied in), frames straddling the scratch buffer's end, one of exactly its size
    bodies = [b"\x00\x00\x00\x01" + b"x" * 10, b"\x00\x00\x00\x02" + bytes(range(256)) * 40,
              b"\x00\x00\x00\x03" + bytes(range(251)) * 800, b"\x00\x00\x00\x04",
              b"\x00\x00\x00\x05" + b"y" * (SCRATCH_BYTES - 8), b"\x00\x00\x00\x06" + b"z" * 9000,
              b"\x00\x00\x00\x07" + b"w" * 9000]
    wire = b"".join(struct.pack(">i", len(b)) + b for b in bodies)

    async def run() -> list[bytearray]:
        reader = FrameReader(FakeTransport())  # type: ignore[arg-type]
        feed(reader, wire, chunk)
        return [await reader.read_frame() for _ in bodies]

    assert [bytes(f) for f in asyncio.run(run())] == bodies


def test_a_waiting_reader_is_woken_and_a_bad_size_closes() -> None:
    async def run() -> None:
        transport = FakeTransport()
        reader = FrameReader(transport, max_size=100)  # type: ignore[arg-type]
        waiting = asyncio.ensure_future(reader.read_frame())
        await asyncio.sleep(0)
        feed(reader, struct.pack(">i", 5) + b"hello", 2)
        assert bytes(await waiting) == b"hello"
        feed(reader, struct.pack(">i", 1000), 4)  # over max_size
        assert transport.closed
        with pytest.raises(FrameError):
            await reader.read_frame()

    asyncio.run(run())


def test_connection_lost_fails_the_reader() -> None:
    async def run() -> None:
        reader = FrameReader(FakeTransport())  # type: ignore[arg-type]
        waiting = asyncio.ensure_future(reader.read_frame())
        await asyncio.sleep(0)
        reader.connection_lost(None)
        with pytest.raises(ConnectionError):
            await waiting

    asyncio.run(run())


def test_small_frames_take_one_read_together() -> None:
    # a read that brings several small responses (size fields included) completes them all: no
    # separate read for each size field
    bodies = [b"\x00\x00\x00\x01ok", b"\x00\x00\x00\x02", b"\x00\x00\x00\x03" + b"r" * 500]
    wire = b"".join(struct.pack(">i", len(b)) + b for b in bodies)

    async def run() -> list[bytes]:
        reader = FrameReader(FakeTransport())  # type: ignore[arg-type]
        buf = reader.get_buffer(-1)
        assert len(buf) >= len(wire)
        buf[: len(wire)] = wire
        reader.buffer_updated(len(wire))
        return [bytes(await reader.read_frame()) for _ in bodies]

    assert asyncio.run(run()) == bodies
