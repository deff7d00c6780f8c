import struct

import pytest

from odradek.protocol.framing import FrameDecoder, FrameError, parse_request_header, response_header


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
    assert target is not None and len(target) == len(body) - 996
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
