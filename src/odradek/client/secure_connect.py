"""Opening a connection with a client's security (:class:`odradek.security.inter_broker.ClientSecurity`):
TCP, then TLS when the protocol is SSL / SASL_SSL, then the SASL exchange of
:mod:`odradek.security.sasl_client` when it is SASL_PLAINTEXT / SASL_SSL. Used by every client a
broker opens to another broker (replica fetcher, controller channel, transaction channel,
ControlledShutdown) through :func:`connector`, and by the blocking client (:func:`authenticate_blocking`).

The SASL requests are framed by :mod:`odradek.client.framer` (SaslHandshake v1 with request header
v1, SaslAuthenticate v2 with header v2) and their responses decoded with kio after
:mod:`odradek.protocol.kio_guard`'s check.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

from kio.serial import entity_reader

from odradek.client import framer
from odradek.client.async_wire import Connect, Streams, build
from odradek.protocol import codec, kio_guard
from odradek.protocol.framing import FrameError
from odradek.security.inter_broker import PLAINTEXT, ClientSecurity
from odradek.security.sasl_client import SaslClientError, exchange

MAX_SASL_RESPONSE = 1 << 20


def _encode(api_key: int, version: int, correlation_id: int, client_id: str, fields: dict[str, Any]) -> tuple[bytes, bool]:
    req_cls = codec.request_class(api_key, version)
    assert req_cls is not None, (api_key, version)
    frame = framer.encode_request(api_key, version, correlation_id, client_id, codec.encode(build(req_cls, fields)),
                                  flexible_header=req_cls.__header_schema__.__version__ >= 2)
    return frame, codec.response_header_flexible(api_key, version)


def _decode(api_key: int, version: int, data: bytes, offset: int) -> Any:
    resp_cls = codec.response_class(api_key, version)
    try:
        kio_guard.check(resp_cls, data, offset)
        value, _ = entity_reader(resp_cls)(data, offset)
    except Exception as e:
        raise SaslClientError(f"undecodable SASL response (api {api_key}): {e!r}") from None
    return value


async def authenticate(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, security: ClientSecurity,
                       client_id: str) -> None:
    """The SASL exchange on open streams; :class:`SaslClientError` when refused."""
    assert security.sasl_mechanism is not None
    steps = exchange(security.sasl_mechanism, security.username, security.password)
    request = next(steps)
    corr = 0
    while True:
        corr += 1
        api_key, version, fields = request
        frame, flexible = _encode(api_key, version, corr, client_id, fields)
        writer.write(frame)
        await writer.drain()
        try:
            data, offset = await framer.read_response(reader, corr, flexible, MAX_SASL_RESPONSE)
        except FrameError as e:
            raise SaslClientError(f"SASL response: {e}") from None
        try:
            request = steps.send(_decode(api_key, version, data, offset))
        except StopIteration:
            return


def authenticate_blocking(sock: socket.socket, security: ClientSecurity, client_id: str) -> None:
    """:func:`authenticate` on a blocking socket (the CLI's :class:`~odradek.client.wire.WireClient`)."""
    assert security.sasl_mechanism is not None
    steps = exchange(security.sasl_mechanism, security.username, security.password)
    request = next(steps)
    corr = 0
    while True:
        corr += 1
        api_key, version, fields = request
        frame, flexible = _encode(api_key, version, corr, client_id, fields)
        sock.sendall(frame)
        try:
            data, offset = framer.recv_response(sock, corr, flexible, MAX_SASL_RESPONSE)
        except FrameError as e:
            raise SaslClientError(f"SASL response: {e}") from None
        try:
            request = steps.send(_decode(api_key, version, data, offset))
        except StopIteration:
            return


async def open_connection(host: str, port: int, timeout_s: float, security: ClientSecurity = PLAINTEXT,
                          client_id: str = "odradek") -> Streams:
    """Connected, TLS-wrapped and authenticated streams, within ``timeout_s``. ``OSError`` /
    ``TimeoutError`` / ``ssl.SSLError`` when the broker cannot be reached or the handshake fails,
    :class:`SaslClientError` when authentication is refused."""
    async def run() -> Streams:
        ctx = security.current_ssl_context()
        if ctx is not None:
            reader, writer = await asyncio.open_connection(host, port, ssl=ctx, server_hostname=host)
        else:
            reader, writer = await asyncio.open_connection(host, port)
        if security.uses_sasl:
            try:
                await authenticate(reader, writer, security, client_id)
            except BaseException:
                writer.close()
                raise
        return reader, writer

    return await asyncio.wait_for(run(), timeout_s)


def connector(security: ClientSecurity, client_id: str) -> Connect:
    """A :data:`Connect` opening connections with ``security``."""
    async def connect(host: str, port: int, timeout_s: float) -> Streams:
        return await open_connection(host, port, timeout_s, security, client_id)

    return connect
