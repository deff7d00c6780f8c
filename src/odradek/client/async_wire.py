"""A minimal asyncio Kafka client over kio, one request at a time on one connection: what a
follower's replica fetcher needs to talk to its leader (Fetch, OffsetForLeaderEpoch).

Frames: int32 size, request header v1/v2 (by the API's flexible versions), body; the
response (header v0/v1) is read whole, straight into a frame-sized buffer
(:mod:`odradek.client.frame_reader`, installed on the connection once it is open). Both are :mod:`odradek.client.framer`'s; the response
body is checked by :mod:`odradek.protocol.kio_guard`, then decoded with kio.
"""

from __future__ import annotations

import asyncio
import dataclasses
import typing
from collections.abc import Awaitable, Callable
from typing import Any

from kio.serial import entity_reader

from odradek.client import framer
from odradek.client.frame_reader import FrameReader
from odradek.protocol import codec, kio_guard
from odradek.protocol.framing import FrameError

MAX_RESPONSE = framer.MAX_RESPONSE

Streams = tuple[asyncio.StreamReader, asyncio.StreamWriter]
# (host, port, timeout) -> open streams, TLS-wrapped and authenticated as the caller's security asks
# (odradek.client.secure_connect.connector); None: plain TCP
Connect = Callable[[str, int, float], Awaitable[Streams]]


async def plain_connect(host: str, port: int, timeout_s: float) -> Streams:
    return await asyncio.wait_for(asyncio.open_connection(host, port), timeout=timeout_s)


def build(cls: Any, fields: dict[str, Any]) -> Any:
    """A kio entity from a dict, nested entities (and tuples of them) given as dicts too."""
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in fields:
            continue
        v = fields[f.name]
        ftype = f.type
        if isinstance(v, dict):
            v = build(ftype, v)
        elif isinstance(v, (tuple, list)) and v and isinstance(v[0], dict):
            (item_cls, *_) = typing.get_args(ftype)
            v = tuple(build(item_cls, x) for x in v)
        kwargs[f.name] = v
    return cls(**kwargs)


class WireError(Exception):
    """The connection failed or the peer sent something undecodable: reconnect."""


class AsyncWireClient:
    def __init__(self, host: str, port: int, client_id: str, timeout_s: float = 30.0,
                 connect: Connect | None = None) -> None:
        self.address = (host, port)
        self._connect = connect or plain_connect
        self.client_id = client_id
        self.timeout_s = timeout_s
        self._writer: asyncio.StreamWriter | None = None
        self._transport: asyncio.WriteTransport | None = None
        self._frames: FrameReader | None = None
        self._corr = 0

    @property
    def connected(self) -> bool:
        return self._transport is not None

    async def connect(self) -> None:
        """Open the connection (TCP, TLS, SASL as ``connect`` does them), then read its responses
        with a :class:`FrameReader` straight into frame-sized buffers."""
        try:
            reader, writer = await self._connect(*self.address, self.timeout_s)
        except (OSError, TimeoutError) as e:
            raise WireError(f"cannot connect to {self.address[0]}:{self.address[1]}: {e}") from None
        leftover: Any = getattr(reader, "_buffer", None)
        if reader.at_eof() or leftover:  # request/response in lockstep: nothing left over
            writer.close()
            raise WireError(f"unexpected bytes from {self.address[0]}:{self.address[1]} after connecting")
        transport = writer.transport
        frames = FrameReader(transport, MAX_RESPONSE)
        transport.set_protocol(frames)
        # the writer is kept: a StreamWriter that goes away closes its transport
        self._writer, self._transport, self._frames = writer, transport, frames

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        self._writer = self._transport = self._frames = None

    def encode(self, api_key: int, version: int, fields: dict[str, Any] | bytes) -> bytes:
        """The request frame; ``fields`` as a dict (built into a kio entity) or an encoded body."""
        req_cls = codec.request_class(api_key, version)
        assert req_cls is not None, (api_key, version)
        self._corr = (self._corr + 1) & 0x7FFFFFFF
        body = fields if isinstance(fields, bytes) else codec.encode(build(req_cls, fields))
        return framer.encode_request(
            api_key, version, self._corr, self.client_id, body,
            flexible_header=req_cls.__header_schema__.__version__ >= 2,
        )

    async def request(self, api_key: int, version: int, fields: dict[str, Any] | bytes,
                      timeout_s: float | None = None) -> Any:
        raw, offset = await self.request_frame(api_key, version, fields, timeout_s)
        try:
            return self._decode(raw, offset, api_key, version)
        except WireError:
            self.close()
            raise

    async def request_frame(
        self, api_key: int, version: int, fields: dict[str, Any] | bytes, timeout_s: float | None = None
    ) -> tuple[bytearray, int]:
        """Like :meth:`request`, but the response undecoded: ``(frame, offset of the body)``, for
        a caller that encodes the request body (``fields`` as bytes) and parses the response body
        itself (the replica fetcher's Fetch requests and responses, read without copying records)."""
        if not self.connected:
            await self.connect()
        frame = self.encode(api_key, version, fields)
        corr = self._corr
        try:
            # asyncio.timeout, not wait_for: wait_for runs the exchange as a task of its own, whose
            # completion reaches this one two event-loop iterations after the response frame is
            # read (each behind every socket ready by then); a follower's next fetch, which is
            # what completes the leader's acks=all produces, would go out that much later
            async with asyncio.timeout(timeout_s or self.timeout_s):
                return await self._exchange(frame, corr, api_key, version)
        except (OSError, TimeoutError, asyncio.IncompleteReadError) as e:
            self.close()
            raise WireError(f"request {api_key} v{version} to {self.address[0]}:{self.address[1]} failed: {e!r}") from None
        except WireError:
            self.close()
            raise

    async def _exchange(self, frame: bytes, corr: int, api_key: int, version: int) -> tuple[bytearray, int]:
        transport, frames = self._transport, self._frames
        if transport is None or frames is None or transport.is_closing():
            raise ConnectionError("not connected")
        transport.write(frame)  # a request is small: no flow control needed
        data = await frames.read_frame()
        try:
            return data, framer.response_body_offset(data, corr, codec.response_header_flexible(api_key, version))
        except FrameError as e:
            raise WireError(str(e)) from None

    @staticmethod
    def _decode(raw: bytearray, offset: int, api_key: int, version: int) -> Any:
        data = bytes(raw)  # kio's entities keep bytes fields
        resp_cls = codec.response_class(api_key, version)
        try:
            kio_guard.check(resp_cls, data, offset)  # a lying count aborts kio's native reader
            value, _ = entity_reader(resp_cls)(data, offset)
        except Exception as e:
            raise WireError(f"undecodable response to api {api_key} v{version}: {e!r}") from None
        return value
