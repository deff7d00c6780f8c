"""Sans-I/O framing of the Kafka wire protocol.

Byte layout of a request frame::

    size            int32    bytes that follow
    api_key         int16
    api_version     int16
    correlation_id  int32
    client_id       int16 length + UTF-8 bytes (length -1 = null)   -- never compact
    tagged fields   uvarint count, then (uvarint tag, uvarint size, bytes)  -- header v2 only (KIP-482;
                    unsigned varints of :mod:`odradek.protocol.varint`)
    body            the request payload (kio decodes it)

Response frame::

    size            int32
    correlation_id  int32
    tagged fields   uvarint count (0)     -- header v1 only (flexible versions, not ApiVersions)
    body
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import NamedTuple

from odradek.protocol.varint import VarintError, skip_tagged_fields

try:  # src/odradek/_speedups.c: a large frame's buffer is about to be overwritten by the socket
    from odradek._speedups import uninitialized_bytearray as _frame_buffer
except ImportError:  # pragma: no cover - not built
    _frame_buffer = bytearray


def frame_buffer(size: int) -> bytearray:
    """A buffer of ``size`` bytes for a frame the socket is about to fill: not zeroed when the C
    speed-ups are built (zeroing a 1 MB buffer costs what reading it does)."""
    buf: bytearray = _frame_buffer(size)
    return buf

_HDR = struct.Struct(">hhih")
_SIZE = struct.Struct(">i")
_I32 = struct.Struct(">i")


class FrameError(Exception):
    """The byte stream cannot be framed; the connection must be closed."""


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int  # where the body starts within the frame


def parse_request_header(frame: bytes | bytearray | memoryview, flexible_header: bool | None) -> RequestHeader:
    """Parse a request header. ``flexible_header`` says whether header v2 (with tagged
    fields) is used; ``None`` means unknown (api/version not supported): tagged fields
    are then not parsed and ``body_offset`` points just after the client id."""
    if len(frame) < 10:
        raise FrameError("frame shorter than a request header")
    api_key, api_version, correlation_id, client_len = _HDR.unpack_from(frame, 0)
    pos = 10
    client_id: str | None = None
    if client_len >= 0:
        if pos + client_len > len(frame):
            raise FrameError("client id runs past the frame")
        try:
            client_id = bytes(frame[pos : pos + client_len]).decode("utf-8")
        except UnicodeDecodeError as e:
            raise FrameError("client id is not UTF-8") from e
        pos += client_len
    elif client_len != -1:
        raise FrameError("negative client id length")
    if flexible_header:
        try:
            pos = skip_tagged_fields(frame, pos, len(frame))
        except VarintError as e:
            raise FrameError(str(e)) from None
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos)


def peek_header(frame: bytes | bytearray | memoryview) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) of a frame with at least 8 bytes."""
    if len(frame) < 8:
        raise FrameError("frame shorter than a request header")
    api_key, api_version, correlation_id, _ = _HDR.unpack_from(bytes(frame[:8]) + b"\xff\xff", 0)
    return api_key, api_version, correlation_id


def response_header(correlation_id: int, flexible: bool) -> bytes:
    if flexible:
        return _I32.pack(correlation_id) + b"\x00"
    return _I32.pack(correlation_id)


LARGE_FRAME = 64 * 1024
# a large frame's buffer holds at most this many times the bytes received of it (at least LARGE_STEP):
# the declared size alone reserves nothing
GROWTH = 4
LARGE_STEP = 256 * 1024


class FrameDecoder:
    """Accumulates bytes and yields complete request frames (without the size prefix).

    Small frames are cut out of an accumulation buffer. A large frame (≥ 64 KiB, e.g. a
    produce request) is received into a buffer of its own, and :meth:`recv_target` exposes
    the unfilled rest so the socket can ``recv_into`` it directly: the payload is copied
    once, from the kernel. That buffer is reserved as bytes arrive, never for the declared
    size up front: it holds at most ``GROWTH`` times what was received (``LARGE_STEP`` at
    least) and grows when full, so a peer that declares 100 MB and sends little holds little
    (a 1 MB produce request whose first read brings ≥ 256 KiB still gets one buffer).

    Raises :class:`FrameError` on a negative size or one above ``max_size``
    (Kafka's socket.request.max.bytes): the caller closes the connection. ``reserve``, when
    given, is asked for each frame's declared size as soon as its size field is read
    (``queued.max.request.bytes``, Kafka's MemoryPool): when it refuses, decoding stops before
    that frame, :attr:`blocked` is set, and a later :meth:`feed` (``b""`` will do) retries.
    ``MemoryError`` from a buffer allocation propagates; the decoder is then unusable.
    """

    __slots__ = ("_buf", "max_size", "_need", "_big", "_big_filled", "reserve", "blocked")

    def __init__(self, max_size: int = 104857600, reserve: Callable[[int], bool] | None = None) -> None:
        self._buf = bytearray()
        self.max_size = max_size
        self._need = -1  # size of the frame being read, -1 = reading the size field
        self._big: bytearray | None = None
        self._big_filled = 0
        self.reserve = reserve
        self.blocked = False

    def recv_target(self) -> memoryview | None:
        """Where the next bytes should be received, when a large frame is being filled."""
        if self._big is None:
            return None
        return memoryview(self._big)[self._big_filled :]

    def advance(self, n: int) -> list[bytes | memoryview]:
        """``n`` bytes were received into :meth:`recv_target`. A finished frame is handed
        out as a writable view of a buffer no one else holds (Produce assigns offsets in
        place; the kio path makes it read-only)."""
        big = self._big
        assert big is not None
        filled = self._big_filled = self._big_filled + n
        if filled < self._need:
            if filled == len(big):  # full but the frame goes on: grow with what came
                grown = _frame_buffer(min(self._need, GROWTH * filled))
                grown[:filled] = big
                self._big = grown
            return []
        self._big = None
        self._big_filled = 0
        self._need = -1
        return [memoryview(big)]

    def feed(self, data: bytes | bytearray | memoryview) -> list[bytes | memoryview]:
        """Frames completed by ``data`` (copied out: the caller may reuse ``data``'s memory)."""
        self.blocked = False
        buf = self._buf
        accumulated = bool(buf)
        if accumulated:  # a small frame or a size field left over from the last read
            buf += data
            view = memoryview(buf)
        else:  # the usual case: frames start at the start of this read; no accumulation copy
            view = memoryview(data).cast("B")
        frames: list[bytes | memoryview] = []
        pos, end = 0, len(view)
        try:
            while True:
                if self._need < 0:
                    if end - pos < 4:
                        break
                    size = _SIZE.unpack_from(view, pos)[0]
                    if size < 0 or size > self.max_size:
                        raise FrameError(f"request size {size} outside [0, {self.max_size}]")
                    if size < 8:
                        raise FrameError(f"request size {size} smaller than a request header")
                    if self.reserve is not None and not self.reserve(size):
                        self.blocked = True
                        break
                    self._need = size
                    pos += 4
                n = self._need
                if end - pos < n:
                    if n >= LARGE_FRAME:
                        big = _frame_buffer(min(n, max(LARGE_STEP, GROWTH * (end - pos))))
                        have = end - pos
                        big[:have] = view[pos:end]
                        pos = end
                        self._big = big
                        self._big_filled = have
                    break
                frames.append(bytes(view[pos : pos + n]))
                pos += n
                self._need = -1
            rest = bytes(view[pos:end]) if not accumulated and pos < end else b""
        finally:
            view.release()
        if accumulated:
            del buf[:pos]
        elif rest:
            buf += rest
        return frames

    @property
    def buffered(self) -> int:
        return len(self._buf) + self._big_filled
