"""A tiny hand-written Kafka wire-protocol kit for raw-socket tests (request header v1/v2, the few
non-flexible request/response bodies the tests need)."""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

T = TypeVar("T")

# API keys
PRODUCE = 0
FETCH = 1
LIST_OFFSETS = 2
METADATA = 3
API_VERSIONS = 18
CREATE_TOPICS = 19
INIT_PRODUCER_ID = 22

# error codes
NONE = 0
INVALID_TXN_STATE = 48
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
UNSUPPORTED_VERSION = 35
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_RECORD = 87


class Writer:
    def __init__(self) -> None:
        self.buf = bytearray()

    def int8(self, v: int) -> Writer:
        self.buf += struct.pack(">b", v)
        return self

    def bool(self, v: bool) -> Writer:
        return self.int8(1 if v else 0)

    def int16(self, v: int) -> Writer:
        self.buf += struct.pack(">h", v)
        return self

    def int32(self, v: int) -> Writer:
        self.buf += struct.pack(">i", v)
        return self

    def int64(self, v: int) -> Writer:
        self.buf += struct.pack(">q", v)
        return self

    def string(self, v: str | None) -> Writer:
        if v is None:
            return self.int16(-1)
        b = v.encode()
        self.int16(len(b))
        self.buf += b
        return self

    def bytes_(self, v: bytes | None) -> Writer:
        if v is None:
            return self.int32(-1)
        self.int32(len(v))
        self.buf += v
        return self

    def array(self, items: Iterable[T] | None, fn: Callable[[Writer, T], Any]) -> Writer:
        if items is None:
            return self.int32(-1)
        items = list(items)
        self.int32(len(items))
        for it in items:
            fn(self, it)
        return self

    def uvarint(self, v: int) -> Writer:
        while True:
            b = v & 0x7F
            v >>= 7
            if v:
                self.buf.append(b | 0x80)
            else:
                self.buf.append(b)
                return self

    def compact_string(self, v: str | None) -> Writer:
        if v is None:
            return self.uvarint(0)
        b = v.encode()
        self.uvarint(len(b) + 1)
        self.buf += b
        return self

    def raw(self, b: bytes) -> Writer:
        self.buf += b
        return self

    def done(self) -> bytes:
        return bytes(self.buf)


class Reader:
    def __init__(self, data: bytes, pos: int = 0) -> None:
        self.data = data
        self.pos = pos

    def _unpack(self, fmt: str) -> int:
        s = struct.Struct(fmt)
        if self.pos + s.size > len(self.data):
            raise ValueError(f"response truncated at {self.pos} (need {s.size} more bytes)")
        (v,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return int(v)

    def int8(self) -> int:
        return self._unpack(">b")

    def int16(self) -> int:
        return self._unpack(">h")

    def int32(self) -> int:
        return self._unpack(">i")

    def int64(self) -> int:
        return self._unpack(">q")

    def string(self) -> str | None:
        n = self.int16()
        if n < 0:
            return None
        v = self.data[self.pos : self.pos + n].decode()
        self.pos += n
        return v

    def bytes_(self) -> bytes | None:
        n = self.int32()
        if n < 0:
            return None
        v = self.data[self.pos : self.pos + n]
        self.pos += n
        return v

    def array(self, fn: Callable[[Reader], T]) -> list[T]:
        n = self.int32()
        return [fn(self) for _ in range(max(n, 0))]

    @property
    def remaining(self) -> int:
        return len(self.data) - self.pos


def request_header(api_key: int, version: int, correlation_id: int, client_id: str | None = "odradek-raw",
                   flexible: bool = False) -> bytes:
    w = Writer().int16(api_key).int16(version).int32(correlation_id).string(client_id)
    if flexible:
        w.uvarint(0)  # empty tagged fields (request header v2)
    return w.done()


def frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def encode_request(api_key: int, version: int, correlation_id: int, body: bytes = b"",
                   client_id: str | None = "odradek-raw", flexible: bool = False) -> bytes:
    return frame(request_header(api_key, version, correlation_id, client_id, flexible) + body)


class Conn:
    """A blocking socket speaking length-prefixed frames."""

    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self._corr = 100

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Conn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def next_corr(self) -> int:
        self._corr += 1
        return self._corr

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(min(n - len(buf), 1 << 20))
            if not chunk:
                raise ConnectionError(f"connection closed after {len(buf)} of {n} bytes")
            buf += chunk
        return bytes(buf)

    def recv_frame(self) -> bytes:
        (size,) = struct.unpack(">i", self.recv_exact(4))
        assert 0 <= size < 1 << 28, f"absurd response size {size}"
        return self.recv_exact(size)

    def request(self, api_key: int, version: int, body: bytes = b"", flexible_header: bool = False,
                flexible_response: bool = False) -> Reader:
        """Send one request and return a Reader positioned after the response header."""
        corr = self.next_corr()
        self.send(encode_request(api_key, version, corr, body, flexible=flexible_header))
        resp = self.recv_frame()
        r = Reader(resp)
        got = r.int32()
        assert got == corr, f"correlation id {got} != {corr}"
        if flexible_response:
            _skip_tagged_fields(r)
        return r

    def outcome(self, timeout: float = 5.0) -> tuple[str, bytes]:
        """Wait for what the broker does next: ("closed", b"") when it closes the connection,
        ("frame", payload) when it answers with a frame, ("open", partial) when it does neither."""
        self.sock.settimeout(timeout)
        buf = bytearray()
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                self.sock.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = self.sock.recv(65536)
                if not chunk:
                    # closed; a complete frame before the close still counts as an answer
                    if len(buf) >= 4 and len(buf) - 4 >= struct.unpack_from(">i", buf)[0] >= 0:
                        return "frame", bytes(buf[4:])
                    return "closed", b""
                buf += chunk
                if len(buf) >= 4:
                    (size,) = struct.unpack_from(">i", buf)
                    if 0 <= size <= len(buf) - 4:
                        return "frame", bytes(buf[4 : 4 + size])
        except (ConnectionResetError, BrokenPipeError):
            return "closed", b""
        except TimeoutError:
            pass
        return "open", bytes(buf)


def _skip_tagged_fields(r: Reader) -> None:
    n = _uvarint(r)
    for _ in range(n):
        _uvarint(r)
        size = _uvarint(r)
        r.pos += size


def _uvarint(r: Reader) -> int:
    shift = 0
    v = 0
    while True:
        b = r.data[r.pos]
        r.pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v
        shift += 7


# ---------------------------------------------------------------------------- ApiVersions


def parse_api_versions_v0(r: Reader) -> tuple[int, dict[int, tuple[int, int]]]:
    error = r.int16()
    apis = r.array(lambda rr: (rr.int16(), rr.int16(), rr.int16()))
    return error, {k: (lo, hi) for k, lo, hi in apis}


def api_versions(conn: Conn) -> dict[int, tuple[int, int]]:
    r = conn.request(API_VERSIONS, 0)
    error, apis = parse_api_versions_v0(r)
    assert error == NONE, f"ApiVersions v0 error {error}"
    return apis


# ---------------------------------------------------------------------------- Produce v3


def produce_body(partitions: dict[tuple[str, int], bytes | None], acks: int = -1, timeout_ms: int = 10000,
                 transactional_id: str | None = None) -> bytes:
    """Produce v3..v8 request body (non-flexible)."""
    by_topic: dict[str, list[tuple[int, bytes | None]]] = {}
    for (topic, part), records in partitions.items():
        by_topic.setdefault(topic, []).append((part, records))
    w = Writer().string(transactional_id).int16(acks).int32(timeout_ms)
    w.array(by_topic.items(), lambda w, tp: w.string(tp[0]).array(
        tp[1], lambda w, p: w.int32(p[0]).bytes_(p[1])))
    return w.done()


def parse_produce_v3(r: Reader) -> dict[tuple[str, int], tuple[int, int]]:
    """-> {(topic, partition): (error_code, base_offset)}"""
    out: dict[tuple[str, int], tuple[int, int]] = {}

    def part(rr: Reader, topic: str) -> None:
        idx = rr.int32()
        err = rr.int16()
        base = rr.int64()
        rr.int64()  # log_append_time_ms
        out[(topic, idx)] = (err, base)

    def topic(rr: Reader) -> None:
        name = rr.string()
        assert name is not None
        rr.array(lambda r3: part(r3, name))

    r.array(topic)
    r.int32()  # throttle_time_ms
    return out


def produce(conn: Conn, topic: str, partition: int, records: bytes | None, acks: int = -1,
            version: int = 3) -> tuple[int, int]:
    """Produce one record set; returns (error_code, base_offset)."""
    r = conn.request(PRODUCE, version, produce_body({(topic, partition): records}, acks=acks))
    resp = parse_produce_v3(r)
    assert (topic, partition) in resp, f"no answer for {topic}-{partition}: {resp}"
    return resp[(topic, partition)]


# ---------------------------------------------------------------------------- InitProducerId v0


def init_producer_id(conn: Conn, transactional_id: str | None = None) -> tuple[int, int]:
    """InitProducerId v0; with a transactional id, retried while the coordinator is loading or
    busy (COORDINATOR_LOAD_IN_PROGRESS 14, CONCURRENT_TRANSACTIONS 51)."""
    for _ in range(100):
        r = conn.request(INIT_PRODUCER_ID, 0, Writer().string(transactional_id).int32(60000).done())
        r.int32()  # throttle
        err = r.int16()
        pid = r.int64()
        epoch = r.int16()
        if err not in (14, 51):
            break
        time.sleep(0.1)
    assert err == NONE, f"InitProducerId error {err}"
    return pid, epoch


# ---------------------------------------------------------------------------- CreateTopics v2..v4


def create_topics_body(topics: list[tuple[str, int, dict[str, str]]], timeout_ms: int = 10000,
                       validate_only: bool = False) -> bytes:
    w = Writer()
    w.array(topics, lambda w, t: w.string(t[0]).int32(t[1]).int16(1).array([], lambda w, a: None)
            .array(t[2].items(), lambda w, kv: w.string(kv[0]).string(kv[1])))
    w.int32(timeout_ms).bool(validate_only)
    return w.done()


def create_topics(conn: Conn, topics: list[tuple[str, int, dict[str, str]]], version: int = 4,
                  validate_only: bool = False) -> list[tuple[str | None, int, str | None]]:
    """-> [(name, error_code, error_message)] in the order of the response"""
    assert 2 <= version <= 4
    r = conn.request(CREATE_TOPICS, version, create_topics_body(topics, validate_only=validate_only))
    r.int32()  # throttle
    return r.array(lambda rr: (rr.string(), rr.int16(), rr.string()))
