"""Response frames read straight into a buffer of each frame's size (asyncio's BufferedProtocol):
the replica fetcher's connection to its leader, whose Fetch responses carry megabytes of records.

A StreamReader copies every socket read into its buffer, then again into the bytes
``readexactly`` returns, and wakes its reader once per 256 KB read; here, between frames, the
transport's ``recv_into`` fills a 16 KB scratch buffer: the frames wholly inside it are cut out
(small responses: one read each, size field and all), and a frame that goes on past it gets a
``bytearray`` of its size, the bytes so far copied in, which the following reads then fill
directly; so the records a follower appends are, but for at most 16 KB, the bytes the kernel
wrote, sliced, never copied in Python. Completed frames queue until
:meth:`FrameReader.read_frame` takes them. Installed on an open connection (plain TCP, TLS, after
SASL) with ``transport.set_protocol``.

Frame: ``size`` int32 (checked to lie in ``[4, max_size]``, else the connection is closed), then
``size`` bytes (response header and body; :func:`odradek.client.framer.response_body_offset`).
"""

from __future__ import annotations

import asyncio
from collections import deque

from odradek.client import framer
from odradek.protocol.framing import FrameError, frame_buffer

SCRATCH_BYTES = 16 * 1024


class FrameReader(asyncio.BufferedProtocol):
    def __init__(self, transport: asyncio.BaseTransport, max_size: int = framer.MAX_RESPONSE) -> None:
        self.transport = transport
        self.max_size = max_size
        self._scratch = bytearray(SCRATCH_BYTES)
        self._scratch_view = memoryview(self._scratch)
        self._scratch_len = 0  # bytes read into the scratch buffer and not cut into frames yet (< 4 or a frame's start)
        self._frame: bytearray | None = None  # a frame larger than what the scratch buffer held, filling
        self._pos = 0
        self._frames: deque[bytearray] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._error: Exception | None = None

    # -- asyncio.BufferedProtocol
    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is None:
            return self._scratch_view[self._scratch_len :]
        return memoryview(self._frame)[self._pos :]

    def buffer_updated(self, nbytes: int) -> None:
        frame = self._frame
        if frame is not None:
            self._pos += nbytes
            if self._pos == len(frame):
                self._frames.append(frame)
                self._frame = None
                self._wake()
            return
        self._scratch_len += nbytes
        self._cut_scratch()

    def _cut_scratch(self) -> None:
        """The whole frames in the scratch buffer queued; a frame it holds the start of gets its own
        buffer; a size field cut short stays at the scratch buffer's start."""
        buf, end, pos = self._scratch, self._scratch_len, 0
        done = False
        while end - pos >= 4:
            try:
                size = framer.response_size(bytes(buf[pos : pos + 4]), self.max_size)
            except FrameError as e:
                self._fail(e)
                self.transport.close()
                self._scratch_len = 0
                return
            start = pos + 4
            if end - start >= size:
                self._frames.append(buf[start : start + size])
                pos = start + size
                done = True
                continue
            frame = frame_buffer(size)  # filled by the socket before anyone reads it
            have = end - start
            frame[:have] = buf[start:end]
            self._frame, self._pos = frame, have
            pos = end
            break
        rest = end - pos
        if rest and pos:
            buf[:rest] = buf[pos:end]
        self._scratch_len = rest
        if done:
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
