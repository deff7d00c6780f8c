"""The request framer of every client inside Odradek: the CLI's blocking admin client
(:mod:`odradek.client.wire`), the replica fetcher's asyncio client (:mod:`odradek.client.async_wire`),
the controller-to-broker channel and the controlled-shutdown request
(:mod:`odradek.controller.channel`). It writes a request frame and reads the response frame
and header; what the body holds (kio entities, inter-broker JSON) is the caller's business.
The broker's side of the same frames is :mod:`odradek.protocol.framing`.

Request frame (Kafka's RequestHeader, KIP-482 for header v2)::

    size            int32    bytes that follow
    api_key         int16
    api_version     int16
    correlation_id  int32
    client_id       int16 length + UTF-8 bytes (length -1 = null)   -- never compact
    tagged fields   uvarint count (0)                               -- header v2 only
    body

Response frame (Kafka's ResponseHeader)::

    size            int32    bytes that follow, at least 4 and at most the reader's bound
    correlation_id  int32    must be the request's
    tagged fields   uvarint count, then (uvarint tag, uvarint size, bytes)  -- header v1 only
    body

Which header version an API version uses is Kafka's rule (flexible versions use request
header v2 / response header v1, except ApiVersions responses, always v0):
:func:`odradek.protocol.codec.request_header_flexible` / ``response_header_flexible``; the
inter-broker APIs use request header v1 and response header v0. A response that cannot be
framed raises :class:`~odradek.protocol.framing.FrameError`: the connection must be closed.
"""

from __future__ import annotations

import asyncio
import socket
import struct

from odradek.protocol.framing import FrameError
from odradek.protocol.varint import VarintError, skip_tagged_fields

_REQUEST_HEADER = struct.Struct(">ihhih")  # size, api_key, api_version, correlation_id, client_id length
_I32 = struct.Struct(">i")

MAX_RESPONSE = 256 << 20  # the largest response frame read unless the caller says otherwise


def encode_request(
    api_key: int,
    api_version: int,
    correlation_id: int,
    client_id: str | None,
    body: bytes,
    *,
    flexible_header: bool,
) -> bytes:
    """The whole request frame: size prefix, request header v1 (v2 when ``flexible_header``)
    and ``body``."""
    cid = b"" if client_id is None else client_id.encode()
    tags = b"\x00" if flexible_header else b""
    size = 10 + len(cid) + len(tags) + len(body)
    head = _REQUEST_HEADER.pack(size, api_key, api_version, correlation_id, -1 if client_id is None else len(cid))
    return head + cid + tags + body


def response_size(prefix: bytes, max_size: int = MAX_RESPONSE) -> int:
    """The size field of a response frame (4 bytes), checked to lie in ``[4, max_size]``."""
    size: int = _I32.unpack(prefix)[0]
    if not 4 <= size <= max_size:
        raise FrameError(f"response size {size}")
    return size


def response_body_offset(frame: bytes | bytearray, correlation_id: int, flexible_header: bool) -> int:
    """Check the response header at the start of ``frame`` (the bytes after the size field)
    and return where the body starts."""
    if len(frame) < 4:
        raise FrameError("response shorter than its header")
    if _I32.unpack_from(frame, 0)[0] != correlation_id:
        raise FrameError("correlation id mismatch")
    pos = 4
    if flexible_header:
        try:
            pos = skip_tagged_fields(frame, pos, len(frame))
        except VarintError as e:
            raise FrameError(f"response header: {e}") from None
    return pos


async def read_response(
    reader: asyncio.StreamReader, correlation_id: int, flexible_header: bool, max_size: int = MAX_RESPONSE
) -> tuple[bytes, int]:
    """Read one response frame: ``(frame without its size field, offset of the body)``.
    ``asyncio.IncompleteReadError`` when the peer closes the connection first."""
    size = response_size(await reader.readexactly(4), max_size)
    frame = await reader.readexactly(size)
    return frame, response_body_offset(frame, correlation_id, flexible_header)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    """``n`` bytes from a blocking socket; ``ConnectionError`` when the peer closes first."""
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("broker closed the connection")
        buf += chunk
    return bytes(buf)


def recv_response(
    sock: socket.socket, correlation_id: int, flexible_header: bool, max_size: int = MAX_RESPONSE
) -> tuple[bytes, int]:
    """:func:`read_response` on a blocking socket."""
    size = response_size(recv_exact(sock, 4), max_size)
    frame = recv_exact(sock, size)
    return frame, response_body_offset(frame, correlation_id, flexible_header)
