"""MetadataRequest / MetadataResponse v1 written and read by hand, for clients that only need a
partition's leader (the Spark source's tasks): no kio entity is built, so a process that reads
records never imports kio's schema modules.

Request body, MetadataRequest v1 (request header v1)::

    topics                  array (int32 count; -1 = all topics)
      name                  string (int16 length, UTF-8)

Response body, MetadataResponse v1 (response header v0)::

    brokers                 array (int32 count)
      node_id               int32
      host                  string
      port                  int32
      rack                  nullable string (int16 length; -1 = null)
    controller_id           int32
    topics                  array
      error_code            int16
      name                  string
      is_internal           int8 (boolean)
      partitions            array
        error_code          int16
        partition_index     int32
        leader_id           int32
        replica_nodes       array of int32
        isr_nodes           array of int32

A count larger than the bytes left could hold, or anything running past the frame, raises
:class:`MetadataResponseError`; nothing is allocated from a count before it is checked.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

API_KEY = 3
VERSION = 1

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_PART = struct.Struct(">hii")  # error_code, partition_index, leader_id


class MetadataResponseError(ValueError):
    """The response does not parse as MetadataResponse v1."""


@dataclass(slots=True)
class TopicMetadata:
    error_code: int
    name: str
    is_internal: bool
    # partition index -> (error_code, leader_id)
    partitions: dict[int, tuple[int, int]] = field(default_factory=dict)


@dataclass(slots=True)
class Metadata:
    brokers: dict[int, tuple[str, int]]  # node id -> (host, port)
    controller_id: int
    topics: list[TopicMetadata]

    def leader(self, topic: str, partition: int) -> tuple[str, int] | None:
        """The address of the partition's leader; None when the partition is unknown or leaderless."""
        for t in self.topics:
            if t.name == topic:
                part = t.partitions.get(partition)
                if part is None:
                    return None
                return self.brokers.get(part[1])
        return None


def encode_metadata_request(topics: list[str] | None) -> bytes:
    """The body of a MetadataRequest v1; ``None`` asks for every topic."""
    if topics is None:
        return _I32.pack(-1)
    out = bytearray(_I32.pack(len(topics)))
    for name in topics:
        raw = name.encode()
        out += _I16.pack(len(raw)) + raw
    return bytes(out)


class _Reader:
    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: memoryview, pos: int) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf)

    def need(self, n: int) -> None:
        if self.pos + n > self.end:
            raise MetadataResponseError("response ends early")

    def i16(self) -> int:
        self.need(2)
        v: int = _I16.unpack_from(self.buf, self.pos)[0]
        self.pos += 2
        return v

    def i32(self) -> int:
        self.need(4)
        v: int = _I32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return v

    def count(self, min_item: int) -> int:
        n = self.i32()
        if n < 0:
            return 0
        if n * min_item > self.end - self.pos:
            raise MetadataResponseError(f"{n} entries in {self.end - self.pos} bytes")
        return n

    def string(self, nullable: bool = False) -> str | None:
        n = self.i16()
        if n < 0:
            if nullable:
                return None
            raise MetadataResponseError("null where a string is required")
        self.need(n)
        s = str(self.buf[self.pos : self.pos + n], "utf-8")
        self.pos += n
        return s


def read_metadata_response(frame: bytes | bytearray | memoryview, offset: int) -> Metadata:
    """Parse the body of a MetadataResponse v1 that starts at ``offset`` of ``frame``."""
    r = _Reader(memoryview(frame), offset)
    try:
        brokers: dict[int, tuple[str, int]] = {}
        for _ in range(r.count(12)):
            node = r.i32()
            host = r.string()
            port = r.i32()
            r.string(nullable=True)
            assert host is not None
            brokers[node] = (host, port)
        controller = r.i32()
        topics: list[TopicMetadata] = []
        for _ in range(r.count(9)):
            code = r.i16()
            name = r.string()
            assert name is not None
            r.need(1)
            internal = r.buf[r.pos] != 0
            r.pos += 1
            t = TopicMetadata(code, name, internal)
            for _ in range(r.count(18)):
                r.need(_PART.size)
                p_code, index, leader = _PART.unpack_from(r.buf, r.pos)
                r.pos += _PART.size
                for _ in range(2):  # replica_nodes, isr_nodes
                    n = r.count(4)
                    r.pos += 4 * n
                t.partitions[index] = (p_code, leader)
            topics.append(t)
    except UnicodeDecodeError as e:
        raise MetadataResponseError(f"undecodable MetadataResponse v{VERSION}: {e}") from None
    return Metadata(brokers, controller, topics)
