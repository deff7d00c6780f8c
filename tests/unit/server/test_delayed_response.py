"""A DelayedResponse is answered from the call that completes its delayed operation: the response
is on the socket before the event loop runs again (an asyncio Future's done-callback would wait for
the next iteration). A connection closing first cancels the operation. A real socketpair, a real
loop, a stand-in operation."""

from __future__ import annotations

import asyncio
import socket
import struct

from odradek.protocol.framing import response_header
from odradek.purgatory import DelayedOperation, DelayedResponse
from odradek.server.connection import Connection, ConnectionEdges


class Op(DelayedOperation[bytes]):
    def __init__(self) -> None:
        super().__init__(60_000)
        self.answer = b""

    def try_complete(self, key: object = None) -> bool:
        return False

    def on_complete(self) -> bytes:
        return self.answer


def _connection(sock: socket.socket) -> tuple[Connection, list[Connection]]:
    closed: list[Connection] = []
    edges = ConnectionEdges(services=None, max_request_bytes=1 << 20, request_memory=None,  # type: ignore[arg-type]
                            on_closed=closed.append, on_read=lambda: None, inter_broker=None)
    return Connection(edges, sock, ("10.0.0.1", 5555), "PLAINTEXT"), closed


def test_answered_in_the_completing_call() -> None:
    async def run() -> None:
        a, b = socket.socketpair()
        conn, _ = _connection(a)
        conn.start()
        op = Op()
        slot = conn._slot(7, False)
        conn._answer_when_done(slot, DelayedResponse(op, lambda body: body + b"!"))
        assert conn.on_close == [op.cancel]  # cancelled if the connection closes first
        b.setblocking(False)
        op.answer = b"done"
        assert op.force_complete()
        head = response_header(7, False)
        want = struct.pack(">i", len(head) + 5) + head + b"done!"
        assert b.recv(100) == want  # no await in between: written by force_complete's call
        assert conn.on_close == []  # forgotten once answered
        conn.close()
        b.close()

    asyncio.run(run())


def test_closing_the_connection_cancels_the_operation() -> None:
    async def run() -> None:
        a, b = socket.socketpair()
        conn, closed = _connection(a)
        conn.start()
        op = Op()
        conn._answer_when_done(conn._slot(8, False), DelayedResponse(op, lambda body: body))
        conn.close()
        assert op.completed and isinstance(op.error, asyncio.CancelledError)
        assert closed == [conn]
        assert not op.force_complete()  # nothing left to answer
        b.close()

    asyncio.run(run())
