"""client/socket_wire.py over a real loopback connection: the socket stays registered with the event
loop from one wait to the next (a fetcher waits once or twice per response; registering it each time
cost ~8 system calls), and bytes arriving while nobody waits unregister it rather than make the loop
call back on every iteration."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

from odradek.client.socket_wire import SocketWireClient


def test_the_socket_is_registered_once_across_waits_and_let_go_when_nobody_waits() -> None:
    async def run() -> None:
        writers: list[asyncio.StreamWriter] = []

        async def serve(_r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            writers.append(w)

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        client = SocketWireClient("127.0.0.1", server.sockets[0].getsockname()[1], "t", 10.0)
        loop = asyncio.get_running_loop()
        added: list[int] = []
        removed: list[int] = []
        add, remove = loop.add_reader, loop.remove_reader

        def counted_add(fd: int, cb: Any, *args: Any) -> None:
            added.append(fd)
            add(fd, cb, *args)

        def counted_remove(fd: int) -> bool:
            removed.append(fd)
            return remove(fd)

        loop.add_reader = counted_add  # type: ignore[method-assign]
        loop.remove_reader = counted_remove  # type: ignore[method-assign]
        try:
            await client.connect()
            while not writers:
                await asyncio.sleep(0.01)
            got = bytearray(4)
            for i in range(20):  # twenty round trips: each read waits for its bytes
                loop.call_later(0.002, writers[0].write, i.to_bytes(4, "big"))
                await client.recv_into(memoryview(got))
                assert int.from_bytes(got, "big") == i
            assert len(added) == 1 and removed == []
            # bytes nobody waits for: one callback lets the socket go, the loop does not spin on it
            calls: list[int] = []
            on_readable = client._on_readable

            def counted_readable() -> None:
                calls.append(1)
                on_readable()

            assert client.sock is not None
            fd = client.sock.fileno()
            remove(fd)
            add(fd, counted_readable)
            writers[0].write(b"late")
            await asyncio.sleep(0.2)
            assert len(calls) == 1 and not client._watching
            await client.recv_into(memoryview(got))  # read at once: already there
            assert bytes(got) == b"late"
            loop.call_later(0.002, writers[0].write, b"next")
            await client.recv_into(memoryview(got))  # a wait registers it again
            assert bytes(got) == b"next" and len(added) == 2
        finally:
            client.close()
            loop.add_reader, loop.remove_reader = add, remove  # type: ignore[method-assign]
            for w in writers:
                w.close()
            server.close()
            await server.wait_closed()

    asyncio.run(run())


@contextlib.asynccontextmanager
async def _connected() -> AsyncIterator[tuple[SocketWireClient, list[asyncio.StreamWriter],
                                              list[asyncio.StreamReader]]]:
    """A SocketWireClient connected to a loopback server that keeps each connection's reader and writer
    (and does nothing else); all closed after."""
    writers: list[asyncio.StreamWriter] = []
    readers: list[asyncio.StreamReader] = []

    async def serve(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        readers.append(r)
        writers.append(w)

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    client = SocketWireClient("127.0.0.1", server.sockets[0].getsockname()[1], "t", 10.0)
    try:
        await client.connect()
        while not writers:
            await asyncio.sleep(0.01)
        yield client, writers, readers
    finally:
        client.close()
        for w in writers:
            w.close()
        server.close()


def test_a_deadline_ends_a_wait_for_an_answer_that_does_not_come() -> None:
    async def run() -> None:
        async with _connected() as (client, writers, _readers):
            got = bytearray(4)
            client.set_deadline(0.2)
            t0 = asyncio.get_running_loop().time()
            try:
                await client.recv_into(memoryview(got))
                raise AssertionError("no answer came, yet the read returned")
            except TimeoutError:
                pass
            assert 0.15 < asyncio.get_running_loop().time() - t0 < 2.0
            # passed while nobody waited (the task was busy): the next wait raises at once
            client.set_deadline(0.05)
            await asyncio.sleep(0.15)
            try:
                await client.recv_into(memoryview(got))
                raise AssertionError("the deadline had passed, yet the read waited")
            except TimeoutError:
                pass
            # cleared in time: later waits are not limited by it
            client.set_deadline(0.05)
            client.clear_deadline()
            await asyncio.sleep(0.15)
            asyncio.get_running_loop().call_later(0.05, writers[0].write, b"late")
            await client.recv_into(memoryview(got))
            assert bytes(got) == b"late"

    asyncio.run(run())


def test_one_timer_serves_every_exchange() -> None:
    async def run() -> None:
        loop = asyncio.get_running_loop()
        armed: list[float] = []
        call_at = loop.call_at
        async with _connected() as (client, writers, _readers):

            def counted(when: float, cb: Any, *args: Any, **kw: Any) -> Any:
                if cb == client._on_deadline:
                    armed.append(when)
                return call_at(when, cb, *args, **kw)

            loop.call_at = counted  # type: ignore[method-assign]
            got = bytearray(4)
            for i in range(30):
                client.set_deadline(5.0)
                loop.call_later(0.001, writers[0].write, i.to_bytes(4, "big"))
                await client.recv_into(memoryview(got))
                client.clear_deadline()
                assert int.from_bytes(got, "big") == i
            loop.call_at = call_at  # type: ignore[method-assign]
            assert len(armed) == 1

    asyncio.run(run())


def test_a_request_waits_for_room_to_send_and_its_deadline_ends_that_wait_too() -> None:
    async def run() -> None:
        async with _connected() as (client, _writers, readers):
            big = b"x" * (16 << 20)  # more than the socket buffers hold: the send must wait
            # the peer reads it all: the request goes out whole
            async def drain(n: int) -> bytes:
                return await readers[0].readexactly(n)

            size = len(SocketWireClient("127.0.0.1", 1, "t").encode(1, 12, big))
            reading = asyncio.ensure_future(drain(size))
            await client.send_request(1, 12, big)
            frame = await asyncio.wait_for(reading, 20)
            assert frame[-len(big):] == big
            # nobody reads: the deadline ends the wait for room
            client.set_deadline(0.2)
            try:
                await client.send_request(1, 12, big)
                raise AssertionError("nobody read, yet the send finished")
            except TimeoutError:
                pass

    asyncio.run(run())
