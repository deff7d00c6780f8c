"""How Connection._flush writes a response holding file regions (a fetch response's records): a
small region is read in and goes out in the same sendmsg as the buffers around it; a large one goes
by sendfile; a region its file can no longer give closes the connection. A real socketpair, a real
loop, real files."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
from pathlib import Path
from typing import Any

import pytest

from odradek.protocol.fetch_response import FileRegion
from odradek.protocol.framing import response_header
from odradek.server import connection as connection_mod
from odradek.server.connection import Connection, ConnectionEdges
from odradek.server.handlers import RawResponse


class CountingSocket(socket.socket):
    """A socket counting the calls that write buffers to it."""

    writes: list[int]

    def sendmsg(self, buffers: Any, *args: Any) -> int:  # type: ignore[override]
        bufs = list(buffers)
        self.writes.append(len(bufs))
        return super().sendmsg(bufs, *args)

    def send(self, data: Any, *args: Any) -> int:  # type: ignore[override]
        self.writes.append(1)
        return super().send(data, *args)


class Segment:
    def __init__(self, path: Path) -> None:
        self.fd = os.open(path, os.O_RDONLY)

    def fileno(self) -> int:
        return self.fd


def _answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, length: int, *, file_bytes: int | None = None,
            ) -> tuple[bytes, list[int], list[int], bool]:
    """Send one response (a buffer, ``length`` bytes of a file, a buffer) through a Connection; what the
    peer read, the buffer counts of each sendmsg/send, the lengths each sendfile was asked, and whether
    the connection closed."""
    content = bytes(range(256)) * ((length >> 8) + 1)
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(content[: length if file_bytes is None else file_bytes])
    sendfiles: list[int] = []
    real_sendfile = os.sendfile

    def counting_sendfile(out_fd: int, in_fd: int, offset: int | None, count: int) -> int:
        sendfiles.append(count)
        return real_sendfile(out_fd, in_fd, offset, count)

    monkeypatch.setattr(connection_mod.os, "sendfile", counting_sendfile)
    seg = Segment(path)

    async def run() -> tuple[bytes, list[int], bool]:
        a, b = socket.socketpair()
        sock = CountingSocket(fileno=a.detach())
        sock.writes = []
        closed: list[Connection] = []
        edges = ConnectionEdges(services=None, max_request_bytes=1 << 20, request_memory=None,  # type: ignore[arg-type]
                                on_closed=closed.append, on_read=lambda: None, inter_broker=None)
        conn = Connection(edges, sock, ("10.0.0.1", 5555), "PLAINTEXT")
        conn.start()
        parts = [b"head", FileRegion(seg, 0, length), b"\x00\x00\x00"]
        conn._complete(conn._slot(9, False), RawResponse(parts, 4 + length + 3))
        b.setblocking(False)
        got = b""
        for _ in range(200):
            try:
                chunk = b.recv(1 << 20)
            except BlockingIOError:
                await asyncio.sleep(0.005)
                continue
            if not chunk:
                break
            got += chunk
            if len(got) >= 4 and len(got) >= 4 + struct.unpack_from(">i", got)[0]:
                break
        was_closed = bool(closed)
        conn.close()
        b.close()
        return got, sock.writes, was_closed

    try:
        got, writes, was_closed = asyncio.run(run())
    finally:
        os.close(seg.fd)
    return got, writes, sendfiles, was_closed


def _frame(body: bytes) -> bytes:
    head = response_header(9, False)
    return struct.pack(">i", len(head) + len(body)) + head + body


def test_a_small_region_goes_out_with_the_buffers_in_one_sendmsg(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    n = connection_mod.INLINE_REGION_BYTES
    got, writes, sendfiles, closed = _answer(tmp_path, monkeypatch, n)
    assert got == _frame(b"head" + (bytes(range(256)) * (n >> 8))[:n] + b"\x00\x00\x00")
    assert sendfiles == [] and writes == [5] and not closed  # size, header, head, records, tail


def test_a_large_region_goes_by_sendfile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    n = connection_mod.INLINE_REGION_BYTES + 1
    got, writes, sendfiles, closed = _answer(tmp_path, monkeypatch, n)
    assert got == _frame(b"head" + (bytes(range(256)) * ((n >> 8) + 1))[:n] + b"\x00\x00\x00")
    assert sendfiles == [n] and len(writes) == 2 and not closed  # before and after the records


def test_a_small_region_past_the_end_of_its_file_closes_the_connection(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    got, writes, sendfiles, closed = _answer(tmp_path, monkeypatch, 1000, file_bytes=600)  # truncated
    assert closed and got == b"" and writes == [] and sendfiles == []
