import struct

import pytest

from odradek.protocol.framing import (
    GROWTH,
    LARGE_STEP,
    FrameDecoder,
    FrameError,
    parse_request_header,
    response_header,
)


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


def header_v1(api_key: int, version: int, corr: int, client: str | None) -> bytes:
    cid = b"\xff\xff" if client is None else struct.pack(">h", len(client)) + client.encode()
    return struct.pack(">hhi", api_key, version, corr) + cid


def test_frames_split_across_feeds() -> None:
    d = FrameDecoder()
    a = frame(header_v1(18, 0, 1, "c") + b"xyz")
    b = frame(header_v1(3, 1, 2, None))
    data = a + b
    out = []
    for i in range(len(data)):
        out += d.feed(data[i : i + 1])
    assert out == [a[4:], b[4:]]
    assert d.buffered == 0


def test_many_frames_in_one_feed() -> None:
    d = FrameDecoder()
    frames = [frame(header_v1(18, 0, i, "x")) for i in range(100)]
    assert len(d.feed(b"".join(frames))) == 100


@pytest.mark.parametrize("size", [-1, 2**31 - 1, 0, 7])
def test_bad_sizes_rejected(size: int) -> None:
    d = FrameDecoder(max_size=1024)
    with pytest.raises(FrameError):
        d.feed(struct.pack(">i", size) + b"\x00" * 8)


def test_header_v1_and_v2() -> None:
    body = header_v1(0, 3, 7, "client-1") + b"BODY"
    h = parse_request_header(body, flexible_header=False)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (0, 3, 7, "client-1")
    assert body[h.body_offset :] == b"BODY"
    # v2: tagged fields after the client id: 1 field, tag 5, 2 bytes
    body2 = header_v1(3, 12, 9, None) + b"\x01\x05\x02ab" + b"REST"
    h2 = parse_request_header(body2, flexible_header=True)
    assert h2.client_id is None and body2[h2.body_offset :] == b"REST"


def test_header_truncated() -> None:
    with pytest.raises(FrameError):
        parse_request_header(struct.pack(">hhih", 0, 3, 1, 50) + b"short", flexible_header=False)
    with pytest.raises(FrameError):
        parse_request_header(header_v1(3, 12, 9, None) + b"\x01\x05\x09ab", flexible_header=True)


def test_response_header() -> None:
    assert response_header(5, False) == b"\x00\x00\x00\x05"
    assert response_header(5, True) == b"\x00\x00\x00\x05\x00"


def test_large_frame_is_received_in_place() -> None:
    d = FrameDecoder()
    body = header_v1(0, 9, 1, "c") + bytes(range(256)) * 1024  # > 64 KiB
    data = frame(body)
    assert d.feed(data[:1000]) == []
    target = d.recv_target()
    # the buffer is reserved as bytes arrive, not for the declared size: LARGE_STEP to start with
    assert target is not None and len(target) == LARGE_STEP - 996 < len(body) - 996
    out = []
    pos = 1000
    while pos < len(data):  # the socket fills the target in pieces
        t = d.recv_target()
        assert t is not None
        n = min(len(t), 70000)
        t[:n] = data[pos : pos + n]
        pos += n
        out += d.advance(n)
    assert [bytes(f) for f in out] == [body] and d.recv_target() is None
    assert not out[0].readonly  # the request owns its buffer: Produce assigns offsets in place
    small = frame(header_v1(18, 0, 2, None))
    assert d.feed(small) == [small[4:]]


def test_feed_copies_out_of_a_reused_receive_buffer() -> None:
    """The connection reads every socket into one scratch buffer: what a feed keeps (a partial
    small frame, the start of a large one) must survive the buffer being overwritten."""
    d = FrameDecoder()
    small = frame(header_v1(18, 0, 1, "c") + b"abc")
    big_body = header_v1(0, 9, 2, "c") + bytes(range(256)) * 300  # > 64 KiB
    big = frame(big_body)
    data = small + big + small
    scratch = bytearray(4096)
    out: list[bytes] = []
    pos = 0
    while pos < len(data):
        target = d.recv_target()
        if target is None:
            n = min(len(scratch), len(data) - pos, 7 if pos < 20 else 4096)
            scratch[:n] = data[pos : pos + n]
            out += [bytes(f) for f in d.feed(memoryview(scratch)[:n])]
            scratch[:] = b"\xee" * len(scratch)  # the next read overwrites it
        else:
            n = min(len(target), len(data) - pos, 5000)
            target[:n] = data[pos : pos + n]
            out += [bytes(f) for f in d.advance(n)]
        pos += n
    assert out == [small[4:], big_body, small[4:]]
    assert d.buffered == 0 and d.recv_target() is None


def test_large_frame_buffer_is_exactly_the_frame() -> None:
    d = FrameDecoder()
    body = header_v1(0, 9, 1, "c") + b"\x00" * 70000
    assert d.feed(frame(body)[:10]) == []
    target = d.recv_target()
    assert target is not None
    target[:] = body[6:]
    (f,) = d.advance(len(target))
    assert bytes(f) == body and len(f) == len(body)


def test_declared_size_reserves_nothing_up_front() -> None:
    """A peer that declares 100 MB and sends a little holds a buffer proportional to what it sent."""
    d = FrameDecoder()
    size = 100_000_000
    head = struct.pack(">i", size) + header_v1(0, 9, 1, "c")
    assert d.feed(head + b"x" * 1000) == []
    target = d.recv_target()
    assert target is not None
    capacity = len(target) + d.buffered
    assert capacity == LARGE_STEP
    sent = d.buffered
    chunk = b"y" * 50_000
    while sent < 3_000_000:
        t = d.recv_target()
        assert t is not None
        n = min(len(t), len(chunk))
        t[:n] = chunk[:n]
        assert d.advance(n) == []
        sent += n
        t = d.recv_target()
        assert t is not None and len(t) > 0
        assert len(t) + d.buffered <= max(LARGE_STEP, GROWTH * d.buffered)
    assert d.buffered == sent


@pytest.mark.parametrize("first", [10, 5000, 70_000, 262_144])
@pytest.mark.parametrize("piece", [1, 4096, 65536, 300_000])
def test_growing_large_frame_keeps_every_byte(first: int, piece: int) -> None:
    body = header_v1(0, 9, 1, "c") + bytes(range(251)) * 4000  # ~1 MB, not a multiple of anything
    data = frame(body) + frame(header_v1(18, 0, 2, None))
    if piece == 1:
        piece = 100_003
    out = [bytes(f) for f in d_feed_all(data, first, piece)]
    assert out == [body, header_v1(18, 0, 2, None)]


def d_feed_all(data: bytes, first: int, piece: int) -> list[bytes | memoryview]:
    d = FrameDecoder()
    out = d.feed(data[:first])
    pos = first
    while pos < len(data):
        t = d.recv_target()
        if t is None:
            out += d.feed(data[pos : pos + piece])
            pos += piece
        else:
            n = min(len(t), piece, len(data) - pos)
            t[:n] = data[pos : pos + n]
            pos += n
            out += d.advance(n)
    return out


def test_reserve_refused_blocks_before_the_frame_and_retries() -> None:
    """queued.max.request.bytes: each frame's size is asked for when its size field is read."""
    granted: list[int] = []
    allow = [True, False]

    def reserve(n: int) -> bool:
        if allow[0]:
            allow[0] = allow[1]
            granted.append(n)
            return True
        return False

    d = FrameDecoder(reserve=reserve)
    a = frame(header_v1(18, 0, 1, "a"))
    b = frame(header_v1(18, 0, 2, "b"))
    assert d.feed(a + b) == [a[4:]]
    assert d.blocked and granted == [len(a) - 4]
    assert d.feed(b"") == [] and d.blocked  # still refused
    allow[0] = True
    assert d.feed(b"") == [b[4:]]
    assert not d.blocked and granted == [len(a) - 4, len(b) - 4] and d.buffered == 0
