"""A small HTTP/1.1 server on the broker's event loop: the ``http.listeners`` endpoint.

Routes are registered by path prefix (:meth:`HttpServer.register`); the longest registered prefix
matching a request's path answers it. ``/metrics`` is one route (odradek.metrics); a console or
another read-only page is mounted the same way on the same listener.

What a request may be (refused cheaply, as the Kafka listener refuses oversized frames):

* request line and headers: at most ``MAX_HEADER_BYTES`` (8 KiB) together, received within
  ``HEADER_TIMEOUT_S`` of the first byte of the request (slow senders are dropped, a slowloris
  holds a connection for that long at most) — 431 or a closed connection otherwise;
* a body: ``Content-Length`` only (no chunked uploads), at most ``MAX_BODY_BYTES``, received
  within ``BODY_TIMEOUT_S`` — 413 / 411 / closed otherwise;
* at most ``max_connections`` connections at once. A connection is *waiting* while the server waits
  for its client's bytes (a new connection, keep-alive between requests, a request line, headers or
  body still arriving) and *busy* while its request is answered. When a connection arrives and all
  slots are taken, the connection that has waited longest for its client is closed to make room, so a
  flood of idle or slowloris connections cannot lock the scraper or the console's users out (it only
  churns its own connections); when every slot is busy the newcomer is closed. A new connection sends
  its first request within ``header_timeout_s``; between requests a keep-alive connection is closed
  after ``IDLE_TIMEOUT_S``;
* at most ``per_ip``'s limit of them from one address (``http.max.connections.per.ip``, counted by
  the same ConnectionQuotas class the Kafka listeners use for ``max.connections.per.ip``): a
  connection from an address at its limit takes the place of that address's connection that has
  waited longest for its client, or is closed at once when all of the address's connections are
  busy, so one address cannot hold every slot and the others keep being served. These closes are
  logged, one line per ``LOG_INTERVAL_S`` at most (with how many there were);
* a ``Host`` the server's :class:`~odradek.http.host_check.HostPolicy` does not accept (DNS
  rebinding) is answered 421 before any route sees the request, one without ``Host`` 400.

A handler that raises answers 500 and the connection goes on; nothing a client sends reaches
the Kafka listener or the broker's state except through a handler.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import parse_qs, unquote, urlsplit

from odradek.connection_quotas import normalise_ip
from odradek.http.host_check import HostPolicy

log = logging.getLogger("odradek.http")

MAX_HEADER_BYTES = 8 * 1024
MAX_BODY_BYTES = 1024 * 1024
MAX_HEADERS = 64
HEADER_TIMEOUT_S = 10.0
BODY_TIMEOUT_S = 30.0
IDLE_TIMEOUT_S = 60.0
DEFAULT_MAX_CONNECTIONS = 64
# listen queue: a burst of connections waits here for accept() instead of having its SYNs dropped
# (each dropped SYN costs its client a one-second retransmission); the kernel caps it at somaxconn
BACKLOG = 1024
LOG_INTERVAL_S = 10.0  # at most one line per this long about connections closed over the per-address limit

_REASONS = {
    200: "OK", 204: "No Content", 303: "See Other", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
    408: "Request Timeout", 421: "Misdirected Request", 411: "Length Required", 413: "Content Too Large", 429: "Too Many Requests", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 501: "Not Implemented", 503: "Service Unavailable", 505: "HTTP Version Not Supported",
}
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH"})


@dataclass(slots=True)
class HttpRequest:
    method: str
    target: str  # as sent: path and query
    path: str  # decoded path, without the query
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names; a repeated header keeps its last value
    body: bytes
    peer: str


@dataclass(slots=True)
class HttpResponse:
    status: int = 200
    body: bytes = b""
    content_type: str = "text/plain; charset=utf-8"
    headers: dict[str, str] = field(default_factory=dict)


Handler = Callable[[HttpRequest], "HttpResponse | Awaitable[HttpResponse]"]


class PerIpLimit(Protocol):
    """Connections counted per address (odradek.connection_quotas.ConnectionQuotas)."""

    def inc(self, ip: str) -> int | None:
        """Count one more from ``ip``; its limit when that is one too many, else None."""
        ...

    def dec(self, ip: str) -> None: ...


class RateLimitedLog:
    """At most one log line per ``interval_s`` for a kind of event that may come in floods: :meth:`note`
    counts one and returns how many to report now (0: stay quiet, it is counted for the next line)."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._next = float("-inf")
        self._pending = 0

    def note(self, now: float) -> int:
        self._pending += 1
        if now < self._next:
            return 0
        n, self._pending = self._pending, 0
        self._next = now + self.interval_s
        return n


class _Refused(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def parse_listener(url: str) -> tuple[str, int]:
    """``http://host:port`` -> (host, port); a port of 0 binds a free one. ValueError otherwise."""
    parts = urlsplit(url.strip())
    if parts.scheme.lower() != "http" or not parts.netloc or parts.path not in ("", "/"):
        raise ValueError(f"an http listener is http://host:port, not {url!r}")
    host = parts.hostname or ""
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"bad port in http listener {url!r}") from None
    if port is None:
        raise ValueError(f"an http listener names its port: {url!r}")
    return host, port


class HttpServer:
    def __init__(self, host: str, port: int, *, max_connections: int = DEFAULT_MAX_CONNECTIONS,
                 header_timeout_s: float = HEADER_TIMEOUT_S, idle_timeout_s: float = IDLE_TIMEOUT_S,
                 host_policy: HostPolicy | None = None, per_ip: PerIpLimit | None = None) -> None:
        self.host = host
        self.per_ip = per_ip
        self.host_policy = host_policy
        self.header_timeout_s = header_timeout_s
        self.idle_timeout_s = idle_timeout_s
        self.port = port
        self.max_connections = max_connections
        self.routes: dict[str, Handler] = {}
        self.bound: tuple[str, int] | None = None
        self.requests_served = 0
        self.refused = 0  # requests or connections refused (limits, malformed input)
        self.misdirected = 0  # requests refused for their Host header
        self._server: asyncio.base_events.Server | None = None
        self._conns: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
        # the connections waiting for their client's bytes, and since when (loop time); the others are busy
        self._waiting: dict[asyncio.Task[None], float] = {}
        self.evicted = 0  # waiting connections closed to make room for a new one
        self._ips: dict[asyncio.Task[None], str] = {}  # the address each counted connection is counted under
        self.over_ip_limit = 0  # connections closed because their address had per_ip's limit
        self._ip_log = RateLimitedLog(LOG_INTERVAL_S)

    def register(self, prefix: str, handler: Handler) -> None:
        """Serve paths starting with ``prefix`` (``/metrics``, ``/``) with ``handler``."""
        if not prefix.startswith("/"):
            raise ValueError(f"a route prefix starts with '/': {prefix!r}")
        self.routes[prefix] = handler

    def route(self, path: str) -> Handler | None:
        best: str | None = None
        for prefix in self.routes:
            matches = path == prefix or path.startswith(prefix.rstrip("/") + "/") or prefix == "/"
            if matches and (best is None or len(prefix) > len(best)):
                best = prefix
        return None if best is None else self.routes[best]

    async def start(self) -> tuple[str, int]:
        self._server = await asyncio.start_server(
            self._on_connection, self.host or None, self.port, limit=MAX_HEADER_BYTES, backlog=BACKLOG,
            reuse_address=True,
        )
        sock = self._server.sockets[0].getsockname()
        self.bound = (str(sock[0]), int(sock[1]))
        return self.bound

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for t, w in list(self._conns.items()):
            w.transport.abort()
            t.cancel()
        if self._conns:
            await asyncio.wait(list(self._conns), timeout=2.0)

    # -- connections
    async def _on_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        loop = asyncio.get_running_loop()
        peer = writer.get_extra_info("peername")
        peer_s = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)
        ip = normalise_ip(str(peer[0])) if isinstance(peer, tuple) and peer else peer_s
        if self.per_ip is not None:
            limit = self.per_ip.inc(ip)
            if limit is not None:  # one too many from this address: its own longest-waiting one goes
                made_room = self._evict_longest_waiting(ip)
                self._over_ip_limit(loop.time(), ip, limit, made_room)
                if not made_room:
                    self.per_ip.dec(ip)
                    self.refused += 1
                    writer.close()
                    return
        if len(self._conns) >= self.max_connections and not self._evict_longest_waiting():
            if self.per_ip is not None:
                self.per_ip.dec(ip)
            self.refused += 1
            writer.close()
            return
        if self.per_ip is not None:
            self._ips[task] = ip
        self._conns[task] = writer
        self._waiting[task] = loop.time()
        try:
            first_wait = self.header_timeout_s  # a new connection owes its first request promptly
            while True:
                self._waiting[task] = loop.time()
                try:
                    first = await asyncio.wait_for(reader.read(1), first_wait)
                except TimeoutError:
                    return
                first_wait = self.idle_timeout_s
                if not first:
                    return
                try:
                    request = await asyncio.wait_for(self._read_request(first, reader, peer_s),
                                                     self.header_timeout_s)
                except TimeoutError:
                    self.refused += 1
                    await self._send(writer, HttpResponse(408, b"request not received in time\n"), False, True)
                    return
                except _Refused as e:
                    self.refused += 1
                    await self._send(writer, HttpResponse(e.status, f"{e}\n".encode()), False, True)
                    return
                self._waiting.pop(task, None)  # busy: answering
                response = await self._answer(request)
                keep = request.headers.get("connection", "").lower() != "close" and response.status not in (400, 421)
                await self._send(writer, response, request.method == "HEAD", not keep)
                self.requests_served += 1
                if not keep:
                    return
        except (ConnectionError, asyncio.IncompleteReadError, OSError, RuntimeError, TimeoutError):
            return
        except asyncio.CancelledError:  # stop(): the server is going away, the connection with it
            return
        finally:
            self._conns.pop(task, None)
            self._waiting.pop(task, None)
            self._uncount(task)
            writer.close()

    def _uncount(self, task: asyncio.Task[None]) -> None:
        ip = self._ips.pop(task, None)
        if ip is not None and self.per_ip is not None:
            self.per_ip.dec(ip)

    def _evict_longest_waiting(self, ip: str | None = None) -> bool:
        """Close the connection (of address ``ip`` when given) that has waited longest for its client;
        False when there is none waiting (all are busy)."""
        candidates = self._waiting if ip is None else {t: w for t, w in self._waiting.items() if self._ips.get(t) == ip}
        if not candidates:
            return False
        task = min(candidates, key=candidates.__getitem__)
        del self._waiting[task]
        writer = self._conns.pop(task, None)
        if writer is not None:
            writer.transport.abort()
        self._uncount(task)  # counted off now: a burst from one address evicts one connection per newcomer
        task.cancel()
        self.evicted += 1
        return True

    def _over_ip_limit(self, now: float, ip: str, limit: int, made_room: bool) -> None:
        self.over_ip_limit += 1
        n = self._ip_log.note(now)
        if n:
            what = ("its connection that had waited longest for its client was closed to make room" if made_room
                    else "all of them were being answered, so the new one was closed")
            log.warning("closed %d HTTP connection(s) over http.max.connections.per.ip since the last such line "
                        "(%d in all); the latest from %s, which had its maximum of %d: %s", n, self.over_ip_limit,
                        ip, limit, what)

    async def _read_request(self, first: bytes, reader: asyncio.StreamReader, peer: str) -> HttpRequest:
        try:
            rest = await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise _Refused(431, "request line and headers exceed 8 KiB") from None
        except asyncio.IncompleteReadError:
            raise ConnectionResetError("peer closed before the headers ended") from None
        head = first + rest
        if len(head) > MAX_HEADER_BYTES:
            raise _Refused(431, "request line and headers exceed 8 KiB")
        try:
            text = head.decode("latin-1")
        except UnicodeDecodeError:  # pragma: no cover - latin-1 decodes any byte
            raise _Refused(400, "bad request") from None
        lines = text.split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or parts[0] not in _METHODS or not parts[1].startswith("/"):
            raise _Refused(400, "bad request line")
        method, target, version = parts
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            raise _Refused(505, "HTTP/1.1 only")
        headers: dict[str, str] = {}
        for line in lines[1:]:
            if not line:
                continue
            if len(headers) >= MAX_HEADERS:
                raise _Refused(431, "too many headers")
            name, sep, value = line.partition(":")
            if not sep or not name or name != name.strip() or any(c in name for c in " \t"):
                raise _Refused(400, "bad header line")
            headers[name.lower()] = value.strip()
        if version == "HTTP/1.0" and headers.get("connection", "").lower() != "keep-alive":
            headers["connection"] = "close"
        if "transfer-encoding" in headers:
            raise _Refused(411, "chunked request bodies are not accepted: send Content-Length")
        body = b""
        length_s = headers.get("content-length")
        if length_s is not None:
            if not length_s.isdigit() or len(length_s) > 10:
                raise _Refused(400, "bad Content-Length")
            length = int(length_s)
            if length > MAX_BODY_BYTES:
                raise _Refused(413, "request body larger than 1 MiB")
            if length:
                body = await asyncio.wait_for(reader.readexactly(length), BODY_TIMEOUT_S)
        split = urlsplit(target)
        return HttpRequest(method, target, unquote(split.path), parse_qs(split.query), headers, body, peer)

    async def _answer(self, request: HttpRequest) -> HttpResponse:
        if self.host_policy is not None and "host" not in request.headers:
            self.refused += 1
            return HttpResponse(400, b"a Host header is required\n")  # RFC 9112 section 3.2
        if self.host_policy is not None and not self.host_policy.allows(request.headers.get("host")):
            self.refused += 1
            self.misdirected += 1
            if self.misdirected in (1, 10, 100) or self.misdirected % 1000 == 0:  # a flood logs a few lines
                log.warning("refused an HTTP request from %s for Host %r (%d so far): not a name of this "
                            "broker; add it to http.allowed.hosts if it is", request.peer,
                            request.headers.get("host", "")[:100], self.misdirected)
            return HttpResponse(421, b"this server does not answer to that Host name\n")
        handler = self.route(request.path)
        if handler is None:
            return HttpResponse(404, b"not found\n")
        try:
            out = handler(request)
            if inspect.isawaitable(out):
                out = await out
            assert isinstance(out, HttpResponse)
            return out
        except Exception:
            log.exception("http handler for %s failed", request.path)
            return HttpResponse(500, b"internal error\n")

    @staticmethod
    async def _send(writer: asyncio.StreamWriter, r: HttpResponse, head_only: bool, close: bool) -> None:
        lines = [f"HTTP/1.1 {r.status} {_REASONS.get(r.status, 'Status')}",
                 f"Content-Type: {r.content_type}", f"Content-Length: {len(r.body)}"]
        lines += [f"{k}: {v}" for k, v in r.headers.items()]
        if close:
            lines.append("Connection: close")
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if not head_only and r.body:
            writer.write(r.body)
        await asyncio.wait_for(writer.drain(), BODY_TIMEOUT_S)
