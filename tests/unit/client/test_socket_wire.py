"""client/socket_wire.py over a real loopback connection: the socket stays registered with the event
loop from one wait to the next (a fetcher waits once or twice per response; registering it each time
cost ~8 system calls), and bytes arriving while nobody waits unregister it rather than make the loop
call back on every iteration."""

from __future__ import annotations

import asyncio
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
