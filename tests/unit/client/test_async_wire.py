"""AsyncWireClient.request_frame against a stand-in peer on loopback: the answer comes back as the
raw frame with its body offset, in the loop iteration after its bytes are read (no task of its own
in between, as asyncio.wait_for would add); a peer that does not answer in time is a WireError and
the connection is dropped."""

from __future__ import annotations

import asyncio
import struct

import pytest

from odradek.client.async_wire import AsyncWireClient, WireError


async def _peer(answer: bool, seen: list[bytes]) -> asyncio.Server:
    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                frame = await reader.readexactly(size)
            except asyncio.IncompleteReadError:
                return
            seen.append(frame)
            if answer:  # response header v0 (the request's correlation id), then a body
                body = frame[4:8] + b"answer"
                writer.write(struct.pack(">i", len(body)) + body)

    return await asyncio.start_server(serve, "127.0.0.1", 0)


def test_request_frame_returns_the_frame_and_body_offset() -> None:
    async def run() -> None:
        seen: list[bytes] = []
        server = await _peer(True, seen)
        port = server.sockets[0].getsockname()[1]
        client = AsyncWireClient("127.0.0.1", port, "t", timeout_s=5.0)
        for _ in range(3):
            frame, offset = await client.request_frame(18, 0, {})
            assert bytes(frame[offset:]) == b"answer"
        assert len(seen) == 3 and struct.unpack(">hh", seen[0][:4]) == (18, 0)
        client.close()
        server.close()

    asyncio.run(run())


def test_response_reaches_the_caller_one_iteration_after_it_is_read() -> None:
    async def run() -> None:
        server = await _peer(True, [])
        port = server.sockets[0].getsockname()[1]
        client = AsyncWireClient("127.0.0.1", port, "t", timeout_s=5.0)
        await client.request_frame(18, 0, {})  # connected
        frames = client._frames
        assert frames is not None
        iterations = [0]
        read_at: list[int] = []
        original = frames.buffer_updated

        def counted(nbytes: int) -> None:
            original(nbytes)
            if frames._frames or frames._waiter is not None and frames._waiter.done():
                read_at.append(iterations[0])

        frames.buffer_updated = counted  # type: ignore[method-assign]
        loop = asyncio.get_running_loop()
        running = [True]

        def tick() -> None:
            iterations[0] += 1
            if running[0]:
                loop.call_soon(tick)

        loop.call_soon(tick)
        await client.request_frame(18, 0, {})
        returned_at = iterations[0]
        running[0] = False
        assert read_at and returned_at - read_at[0] <= 1  # wait_for's own task took 3
        client.close()
        server.close()

    asyncio.run(run())


def test_no_answer_in_time_is_a_wire_error_and_drops_the_connection() -> None:
    async def run() -> None:
        server = await _peer(False, [])
        port = server.sockets[0].getsockname()[1]
        client = AsyncWireClient("127.0.0.1", port, "t", timeout_s=5.0)
        with pytest.raises(WireError, match="failed"):
            await client.request_frame(18, 0, {}, timeout_s=0.2)
        assert not client.connected
        server.close()

    asyncio.run(run())
