"""The replica fetcher's client over a plain TCP socket of its own, non-blocking, driven with
the event loop's socket calls rather than a transport: a caller can then read part of a
response with its own system calls, as the follower's splice reader does
(:mod:`odradek.replication.splice_fetch`: records moved from this socket into a segment file
with ``splice(2)``, never read into Python). Requests, framing and kio decoding are
:class:`~odradek.client.async_wire.AsyncWireClient`'s; only plain TCP (an inter-broker listener
with TLS or SASL uses that client).
"""

from __future__ import annotations

import asyncio
import socket

from odradek.client import framer
from odradek.client.async_wire import MAX_RESPONSE, AsyncWireClient, WireError
from odradek.protocol import codec
from odradek.protocol.framing import FrameError


class SocketWireClient(AsyncWireClient):
    def __init__(self, host: str, port: int, client_id: str, timeout_s: float = 30.0) -> None:
        super().__init__(host, port, client_id, timeout_s)
        self.sock: socket.socket | None = None
        self._lowat = 1
        # the socket stays registered with the event loop between waits (uvloop's add_reader and
        # remove_reader cost ~10 system calls a pair: a fetcher waits once or twice per response)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watching = False
        self._waiter: asyncio.Future[None] | None = None
        self._write_waiter: asyncio.Future[None] | None = None
        # the exchange under way must end by this loop time (0: no limit); one timer serves every
        # exchange, re-armed only when it fires before the current limit (asyncio.timeout made and
        # cancelled a timer and a Timeout per exchange: ~6 us of a follower's fetch)
        self._deadline = 0.0
        self._deadline_timer: asyncio.TimerHandle | None = None
        self._expired = False

    @property
    def connected(self) -> bool:
        return self.sock is not None

    async def connect(self) -> None:
        loop = asyncio.get_running_loop()
        host, port = self.address
        try:
            async with asyncio.timeout(self.timeout_s):
                infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
                last: OSError | None = None
                for family, kind, proto, _, addr in infos:
                    sock = socket.socket(family, kind, proto)
                    try:
                        sock.setblocking(False)
                        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        await loop.sock_connect(sock, addr)
                    except OSError as e:
                        sock.close()
                        last = e
                        continue
                    except BaseException:
                        sock.close()
                        raise
                    self.sock = sock
                    return
                raise last or OSError(f"no address for {host}")
        except (OSError, TimeoutError) as e:
            raise WireError(f"cannot connect to {host}:{port}: {e}") from None

    def close(self) -> None:
        self.clear_deadline()
        if self._deadline_timer is not None:
            self._deadline_timer.cancel()
            self._deadline_timer = None
        self._unwatch()
        if self.sock is not None:
            self.sock.close()
            self.sock = None
        self._lowat = 1

    def set_deadline(self, seconds: float) -> None:
        """The exchange starting now must end within ``seconds``: past that, the wait under way (or the
        next one) raises ``TimeoutError``. :meth:`clear_deadline` when it has ended."""
        loop = asyncio.get_running_loop()
        self._deadline = loop.time() + seconds
        self._expired = False
        if self._deadline_timer is None:
            self._deadline_timer = loop.call_at(self._deadline, self._on_deadline, loop)

    def clear_deadline(self) -> None:
        self._deadline = 0.0
        self._expired = False

    def _on_deadline(self, loop: asyncio.AbstractEventLoop) -> None:
        self._deadline_timer = None
        deadline = self._deadline
        if not deadline:
            return
        if loop.time() < deadline:  # set again since the timer was armed
            self._deadline_timer = loop.call_at(deadline, self._on_deadline, loop)
            return
        self._deadline = 0.0
        error = TimeoutError(f"no answer from {self.address[0]}:{self.address[1]} in time")
        waiting = False
        for waiter in (self._waiter, self._write_waiter):
            if waiter is not None and not waiter.done():
                waiter.set_exception(error)
                waiting = True
        self._expired = not waiting  # between waits: the next one raises

    def _check_expired(self) -> None:
        if self._expired:
            self._expired = False
            raise TimeoutError(f"no answer from {self.address[0]}:{self.address[1]} in time")

    async def send_request(self, api_key: int, version: int, body: bytes) -> int:
        """Send a request whose body the caller encoded; returns its correlation id (the caller
        reads the response)."""
        if self.sock is None:
            await self.connect()
        assert self.sock is not None
        await self._send_all(self.sock, self.encode(api_key, version, body))
        return self._corr

    async def _send_all(self, sock: socket.socket, data: bytes) -> None:
        """Write ``data`` whole: at once when the socket buffer has room (a request always does, but for
        a very large one), else waiting for room within the deadline."""
        view = memoryview(data)
        while view:
            try:
                n = sock.send(view)
            except BlockingIOError:
                await self._wait_writable(sock)
                continue
            view = view[n:]

    async def _wait_writable(self, sock: socket.socket) -> None:
        self._check_expired()
        loop = asyncio.get_running_loop()
        ready = self._write_waiter = loop.create_future()
        fd = sock.fileno()
        loop.add_writer(fd, _wake, ready)
        try:
            await ready
        finally:
            self._write_waiter = None
            loop.remove_writer(fd)

    async def recv_into(self, view: memoryview) -> None:
        """Fill ``view`` from the socket; ``ConnectionError`` when the peer closes first."""
        sock = self.sock
        if sock is None:
            raise ConnectionError("not connected")
        got, n = 0, len(view)
        while got < n:
            try:  # what has arrived is read at once; a wait only when nothing has
                k = sock.recv_into(view[got:])
            except BlockingIOError:
                await self.wait_readable(n - got)
                continue
            if k == 0:
                raise ConnectionError(f"{self.address[0]}:{self.address[1]} closed the connection")
            got += k

    async def wait_readable(self, at_least: int = 1) -> None:
        """Until ``at_least`` bytes can be read (SO_RCVLOWAT: one wake-up for a large read rather than one
        per segment that arrives; the kernel also wakes it when the peer closes). ``at_least`` must be
        bytes the peer is sure to send."""
        sock = self.sock
        if sock is None:
            raise ConnectionError("not connected")
        self._check_expired()
        if at_least != self._lowat:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, at_least)
            self._lowat = at_least
        loop = asyncio.get_running_loop()
        ready = self._waiter = loop.create_future()
        if not self._watching:
            loop.add_reader(sock.fileno(), self._on_readable)
            self._loop = loop
            self._watching = True
        try:
            await ready
        finally:
            self._waiter = None

    def _on_readable(self) -> None:
        waiter = self._waiter
        if waiter is not None:
            if not waiter.done():
                waiter.set_result(None)
            return
        # readable while nobody waits (the peer closed, or sent what is not asked for yet): stop
        # watching until the next wait, or the loop would call this on every iteration
        self._unwatch()

    def _unwatch(self) -> None:
        if self._watching and self._loop is not None and self.sock is not None and not self._loop.is_closed():
            self._loop.remove_reader(self.sock.fileno())
        self._watching = False
        self._loop = None

    async def _exchange(self, frame: bytes, corr: int, api_key: int, version: int) -> tuple[bytearray, int]:
        sock = self.sock
        if sock is None:
            raise ConnectionError("not connected")
        await self._send_all(sock, frame)
        prefix = bytearray(4)
        await self.recv_into(memoryview(prefix))
        try:
            data = bytearray(framer.response_size(bytes(prefix), MAX_RESPONSE))
            await self.recv_into(memoryview(data))
            return data, framer.response_body_offset(data, corr, codec.response_header_flexible(api_key, version))
        except FrameError as e:
            raise WireError(str(e)) from None


def _wake(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)
