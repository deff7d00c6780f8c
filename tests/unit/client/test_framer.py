"""odradek.client.framer, the request framer of the clients inside the broker, and the
inter-broker request built on it (no sockets: asyncio stream readers fed by hand)."""

from __future__ import annotations

import asyncio
import io
import json
import struct
from typing import Any, cast

import pytest
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from odradek.client import framer
from odradek.controller.channel import interbroker_request
from odradek.protocol import interbroker as ib
from odradek.protocol.framing import FrameError, parse_request_header


def _kio_header(version: int, api_key: int, api_version: int, corr: int, client_id: str) -> bytes:
    buf = io.BytesIO()
    if version >= 2:
        entity_writer(RequestHeaderV2)(buf, RequestHeaderV2(
            request_api_key=i16(api_key), request_api_version=i16(api_version), correlation_id=i32(corr),
            client_id=client_id))
    else:
        entity_writer(RequestHeaderV1)(buf, RequestHeaderV1(
            request_api_key=i16(api_key), request_api_version=i16(api_version), correlation_id=i32(corr),
            client_id=client_id))
    return buf.getvalue()


@pytest.mark.parametrize("flexible", [False, True])
def test_request_frame_is_kafkas_request_header(flexible: bool) -> None:
    body = b"\x01\x02\x03"
    frame = framer.encode_request(1, 12, 77, "odradek-fetcher", body, flexible_header=flexible)
    expected = _kio_header(2 if flexible else 1, 1, 12, 77, "odradek-fetcher") + body
    assert frame == struct.pack(">i", len(expected)) + expected
    # and the broker's side parses it back
    h = parse_request_header(frame[4:], flexible)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (1, 12, 77, "odradek-fetcher")
    assert frame[4 + h.body_offset :] == body


def test_request_frame_null_client_id() -> None:
    frame = framer.encode_request(7, 0, 1, None, b"{}", flexible_header=False)
    assert frame == struct.pack(">ihhih", 12, 7, 0, 1, -1) + b"{}"
    assert parse_request_header(frame[4:], False).client_id is None


def test_response_size_bounds() -> None:
    assert framer.response_size(struct.pack(">i", 4)) == 4
    assert framer.response_size(struct.pack(">i", 100), 100) == 100
    for bad in (-1, 0, 3, 101):
        with pytest.raises(FrameError, match="response size"):
            framer.response_size(struct.pack(">i", bad), 100)


def test_response_header_v0_and_v1() -> None:
    assert framer.response_body_offset(struct.pack(">i", 5) + b"body", 5, False) == 4
    assert framer.response_body_offset(struct.pack(">i", 5) + b"\x00body", 5, True) == 5
    # a tagged field (tag 3, 2 bytes) is skipped
    assert framer.response_body_offset(struct.pack(">i", 5) + b"\x01\x03\x02xybody", 5, True) == 9


@pytest.mark.parametrize(
    ("frame", "flexible", "message"),
    [
        (b"\x00\x00\x00", False, "shorter"),
        (struct.pack(">i", 6) + b"body", False, "correlation id mismatch"),
        (struct.pack(">i", 5), True, "truncated varint"),
        (struct.pack(">i", 5) + b"\x01\x03\x09xy", True, "runs past"),
        (struct.pack(">i", 5) + b"\xff\xff\xff\xff\xff\x01", True, "longer than 5 bytes"),
    ],
)
def test_response_header_errors(frame: bytes, flexible: bool, message: str) -> None:
    with pytest.raises(FrameError, match=message):
        framer.response_body_offset(frame, 5, flexible)


def _reader(data: bytes, eof: bool = True) -> asyncio.StreamReader:
    r = asyncio.StreamReader()
    r.feed_data(data)
    if eof:
        r.feed_eof()
    return r


def test_read_response() -> None:
    async def main() -> None:
        payload = struct.pack(">i", 9) + b"\x00hello"
        frame, offset = await framer.read_response(_reader(struct.pack(">i", len(payload)) + payload + b"next"), 9, True)
        assert frame == payload and frame[offset:] == b"hello"
        with pytest.raises(FrameError, match="response size"):
            await framer.read_response(_reader(struct.pack(">i", 1 << 30)), 9, True)
        with pytest.raises(asyncio.IncompleteReadError):
            await framer.read_response(_reader(struct.pack(">i", 20) + b"\x00\x00"), 9, True)

    asyncio.run(main())


class _FakeSocket:
    """recv() hands out the queued bytes a few at a time."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def recv(self, n: int) -> bytes:
        chunk, self.data = self.data[: min(n, 3)], self.data[min(n, 3) :]
        return chunk


def test_recv_response_blocking() -> None:
    payload = struct.pack(">i", 2) + b"body"
    sock = cast(Any, _FakeSocket(struct.pack(">i", len(payload)) + payload))
    assert framer.recv_response(sock, 2, False) == (payload, 4)
    with pytest.raises(ConnectionError):
        framer.recv_response(cast(Any, _FakeSocket(b"\x00\x00")), 2, False)


class _Writer:
    def __init__(self) -> None:
        self.out = bytearray()

    def write(self, data: bytes) -> None:
        self.out += data

    async def drain(self) -> None:
        return None


def test_interbroker_request() -> None:
    """ControlledShutdown as a broker sends it to the controller: header v1, JSON body,
    response header v0 with the request's correlation id."""

    async def main() -> None:
        resp = struct.pack(">i", 1) + json.dumps({"error_code": 0, "remaining_partitions": []}).encode()
        w = _Writer()
        body = {"broker_id": 3, "broker_epoch": 42}
        got = await interbroker_request(
            _reader(struct.pack(">i", len(resp)) + resp), cast(Any, w), ib.CONTROLLED_SHUTDOWN, body, 1, "broker-3"
        )
        assert got == {"error_code": 0, "remaining_partitions": []}
        sent = bytes(w.out)
        client = b"broker-3"
        head = struct.pack(">hhih", ib.CONTROLLED_SHUTDOWN, ib.VERSION, 1, len(client)) + client
        assert sent == struct.pack(">i", len(head) + len(sent) - 4 - len(head)) + head + ib.encode(
            ib.CONTROLLED_SHUTDOWN, body)
        h = parse_request_header(sent[4:], False)
        assert ib.decode(h.api_key, h.api_version, sent[4 + h.body_offset :]) == body

        wrong = struct.pack(">i", 2) + b'{"error_code":0}'
        with pytest.raises(ib.InterBrokerDecodeError, match="correlation id mismatch"):
            await interbroker_request(_reader(struct.pack(">i", len(wrong)) + wrong), cast(Any, _Writer()),
                                      ib.CONTROLLED_SHUTDOWN, body, 1, "broker-3")
        with pytest.raises(ib.InterBrokerDecodeError, match="response size"):
            await interbroker_request(_reader(struct.pack(">i", 65 << 20)), cast(Any, _Writer()),
                                      ib.CONTROLLED_SHUTDOWN, body, 1, "broker-3")

    asyncio.run(main())
