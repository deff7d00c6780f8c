"""Response frames read straight into a buffer of each frame's size (asyncio's BufferedProtocol):
the replica fetcher's connection to its leader, whose Fetch responses carry megabytes of records.

A StreamReader copies every socket read into its buffer, then again into the bytes
``readexactly`` returns, and wakes its reader once per 256 KB read; here the transport's
``recv_into`` fills the frame itself (the 4-byte size first, then a ``bytearray`` of that size),
so the records a follower appends are the bytes the kernel wrote, sliced, never copied in
Python. One frame is read at a time; completed frames queue until :meth:`FrameReader.read_frame`
takes them. Installed on an open connection (plain TCP, TLS, after SASL) with
``transport.set_protocol``.

Frame: ``size`` int32 (checked to lie in ``[4, max_size]``, else the connection is closed), then
``size`` bytes (response header and body; :func:`odradek.client.framer.response_body_offset`).
"""

from __future__ import annotations

import asyncio
from collections import deque

from odradek.client import framer
from odradek.protocol.framing import FrameError, frame_buffer


class FrameReader(asyncio.BufferedProtocol):
    def __init__(self, transport: asyncio.BaseTransport, max_size: int = framer.MAX_RESPONSE) -> None:
        self.transport = transport
        self.max_size = max_size
        self._head = bytearray(4)
        self._head_pos = 0
        self._frame: bytearray | None = None
        self._pos = 0
        self._frames: deque[bytearray] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._error: Exception | None = None

    # -- asyncio.BufferedProtocol
    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is None:
            return memoryview(self._head)[self._head_pos :]
        return memoryview(self._frame)[self._pos :]

    def buffer_updated(self, nbytes: int) -> None:
        frame = self._frame
        if frame is None:
            self._head_pos += nbytes
            if self._head_pos < 4:
                return
            self._head_pos = 0
            try:
                size = framer.response_size(bytes(self._head), self.max_size)
            except FrameError as e:
                self._fail(e)
                self.transport.close()
                return
            self._frame = frame_buffer(size)  # filled by the socket before anyone reads it
            self._pos = 0
            return
        self._pos += nbytes
        if self._pos == len(frame):
            self._frames.append(frame)
            self._frame = None
            self._wake()

    def eof_received(self) -> bool:
        self._fail(ConnectionError("the broker closed the connection"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._fail(exc if exc is not None else ConnectionError("connection closed"))

    # -- the client's side
    async def read_frame(self) -> bytearray:
        """The next whole frame (without its size field)."""
        while not self._frames:
            if self._error is not None:
                raise self._error
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self._frames.popleft()

    def _wake(self) -> None:
        w = self._waiter
        if w is not None and not w.done():
            w.set_result(None)

    def _fail(self, error: Exception) -> None:
        if self._error is None:
            self._error = error
        self._wake()
