"""Accepting connections on the broker's listeners: Kafka's SocketServer Acceptor with its ConnectionQuotas.

The listening sockets are bound by the broker; once start-up lets clients in (:meth:`Acceptor.enable`),
the accept loop is a reader on each listening socket, taking up to 64 connections a loop turn, and:

- **max.connections** and the descriptor room (``connection_quotas.ConnectionQuotas``): at the limit the
  readers are removed (a paused accept loop costs nothing; new connections wait in the kernel's
  backlog) until a connection closes;
- **max.connections.per.ip** (and its overrides): a connection over its address's count is closed at once,
  with Kafka's log line;
- **KIP-612's connection creation rates** (``server.quota.connection_rate``): over the listener's or the
  broker-wide ``max.connection.creation.rate`` a connection is held (and the accept loop with it) until
  the rate allows it (the inter-broker listener is exempt from the broker-wide rate when there are others,
  Kafka's protectedListener); over an address's ``connection_creation_rate`` it is closed once the
  throttle time has passed (Kafka's ConnectionThrottledException);
- **accept() failing** for want of descriptors or memory: accepting stops for a back-off that doubles
  while it keeps failing (:data:`ACCEPT_BACKOFF_S` to :data:`ACCEPT_BACKOFF_MAX_S`), logged once each,
  instead of retrying on every loop turn; errors that concern the one connection are skipped;
- **connections.max.idle.ms** (:meth:`Acceptor.expire_idle`): connections with no read or write for that
  long are closed (Kafka's Selector expiring idle channels).

An accepted connection is handed to ``make_connection`` (``tls_connection.connection_for``) and kept in
:attr:`Acceptor.connections` until it tells :meth:`Acceptor.closed`.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
import time
from collections.abc import Callable
from typing import Any, Protocol

from odradek.connection_quotas import ConnectionQuotas, nofile_soft_limit, normalise_ip, open_fd_count
from odradek.server.quota.connection_rate import ConnectionRateQuotas

log = logging.getLogger("odradek.broker")

# accept() failing for want of descriptors or memory: stop accepting this long (doubling while it
# keeps failing, up to the maximum) instead of retrying at once
ACCEPT_BACKOFF_S = 0.1
ACCEPT_BACKOFF_MAX_S = 5.0
ACCEPTS_PER_TURN = 64
# accept errors that concern the one connection being accepted: skip it and go on
_ACCEPT_SKIP = frozenset({errno.ECONNABORTED, errno.EPROTO, errno.EPERM, errno.ENETDOWN, errno.EHOSTUNREACH})
_ACCEPT_EXHAUSTED = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})


class AcceptedConnection(Protocol):
    """What the acceptor needs of a connection it made."""

    listener: str
    quota_ip: str
    last_active: float

    def start(self) -> None: ...

    def close(self, reason: str | None = None) -> None: ...


class Acceptor:
    def __init__(
        self,
        quotas: ConnectionQuotas,
        rates: ConnectionRateQuotas,
        now_ms: Callable[[], int],
        listener_rate: Callable[[str], str | None],
        inter_broker_listener: Callable[[], str],
        stopping: Callable[[], bool],
    ) -> None:
        """``listener_rate(listener)``: the listener's ``listener.name.<l>.max.connection.creation.rate``
        as configured (or None); ``stopping()``: whether the broker is past its controlled shutdown (no new
        connection is served then)."""
        self.quotas = quotas
        self.rates = rates
        self.now_ms = now_ms
        self.listener_rate = listener_rate
        self.inter_broker_listener = inter_broker_listener
        self.stopping = stopping
        self.make_connection: Callable[[socket.socket, Any, str], AcceptedConnection] | None = None
        self.servers: list[tuple[socket.socket, str]] = []
        self.connections: set[Any] = set()
        self._held: set[socket.socket] = set()  # accepted sockets a connection rate holds or will close
        self._rate_hold: asyncio.TimerHandle | None = None  # the broker-wide rate holds the accept loop
        self._enabled = False  # listeners accept (set once start-up lets clients in)
        self._accepting = False  # the listening sockets' readers are registered
        self._backoff_s = 0.0  # > 0 while backing off after accept() ran out of descriptors
        self._backoff_timer: asyncio.TimerHandle | None = None
        self._limit_logged = False

    # -- the accept loop
    def enable(self, make_connection: Callable[[socket.socket, Any, str], AcceptedConnection]) -> None:
        """Start accepting on every listening socket, making each connection with ``make_connection``."""
        self.make_connection = make_connection
        self._enabled = True
        self._refresh_fd_limit()
        self._set_accepting(True)

    def _set_accepting(self, on: bool) -> None:
        """Register or remove the listening sockets' readers: a paused accept loop costs nothing,
        and the connections that wait meanwhile sit in the kernel's backlog."""
        if on == self._accepting:
            return
        loop = asyncio.get_running_loop()
        for sock, name in self.servers:
            if on:
                loop.add_reader(sock.fileno(), self._accept, sock, name)
            else:
                loop.remove_reader(sock.fileno())
        self._accepting = on

    def _refresh_fd_limit(self) -> None:
        quotas = self.quotas
        before = quotas.fd_limit
        after = quotas.refresh_fd_limit(nofile_soft_limit(), open_fd_count())
        if after != before and after < quotas.max_connections:
            log.info(
                "the open-file limit leaves room for %d connections (RLIMIT_NOFILE %s less the broker's own "
                "descriptors and a reserve)", after, nofile_soft_limit(),
            )

    def _accept(self, server: socket.socket, listener: str) -> None:
        quotas = self.quotas
        for _ in range(ACCEPTS_PER_TURN):
            if not quotas.slot_available():
                self._refresh_fd_limit()  # the broker's own descriptors may have changed
                if not quotas.slot_available():
                    if not self._limit_logged:
                        log.info(
                            "%d connections open, the limit (max.connections %d, descriptor room %d): "
                            "not accepting until one closes", quotas.total, quotas.max_connections,
                            quotas.fd_limit,
                        )
                        self._limit_logged = True
                    self._set_accepting(False)
                    return
            try:
                sock, addr = server.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                if e.errno in _ACCEPT_SKIP:
                    continue
                self._back_off(listener, e)
                return
            self._backoff_s = 0.0
            ip = normalise_ip(str(addr[0])) if addr else ""
            hold_ms = self._connection_rate_hold(listener)
            if hold_ms > 0:  # max.connection.creation.rate: this one waits, and nothing else is accepted
                self._held.add(sock)
                self._set_accepting(False)
                self._rate_hold = asyncio.get_running_loop().call_later(
                    hold_ms / 1000, self._release_held, sock, addr, listener, ip)
                return
            self._admit(sock, addr, listener, ip)

    def _connection_rate_hold(self, listener: str) -> int:
        """KIP-612: the ms a new connection on ``listener`` waits for the listener's and the
        broker-wide max.connection.creation.rate (the inter-broker listener is exempt from the
        broker-wide one when there are others, Kafka's protectedListener)."""
        rates, now = self.rates, self.now_ms()
        raw = self.listener_rate(listener)
        hold = rates.record_listener(listener, int(raw), now) if raw and raw.strip().isdigit() else 0
        if not (listener == self.inter_broker_listener() and len(self.servers) > 1):
            hold = max(hold, rates.record_broker(now))
        return hold

    def _release_held(self, sock: socket.socket, addr: Any, listener: str, ip: str) -> None:
        self._rate_hold = None
        self._held.discard(sock)
        self._admit(sock, addr, listener, ip)
        self._maybe_resume()

    def _close_held(self, sock: socket.socket) -> None:
        self._held.discard(sock)
        with contextlib.suppress(OSError):
            sock.close()

    def _admit(self, sock: socket.socket, addr: Any, listener: str, ip: str) -> None:
        """An accepted connection past the broker-wide rate: the address's rate and count, then served."""
        if self.stopping():
            self._close_held(sock)
            return
        close_ms = self.rates.record_ip(ip, self.now_ms())
        if close_ms > 0:  # Kafka's ConnectionThrottledException: closed once the throttle time passed
            log.info("Connection from %s throttled for %d ms by its connection_creation_rate quota", ip, close_ms)
            self._held.add(sock)
            asyncio.get_running_loop().call_later(close_ms / 1000, self._close_held, sock)
            return
        quotas = self.quotas
        limit = quotas.inc(ip)
        if limit is not None:
            quotas.dec(ip)
            log.info("Rejected connection from %s, address already has the configured maximum of %d connections.",
                     ip, limit)
            self._close_held(sock)
            return
        assert self.make_connection is not None, "accepting before enable()"
        try:
            conn = self.make_connection(sock, addr, listener)
        except BaseException:
            quotas.dec(ip)
            sock.close()
            raise
        conn.quota_ip = ip
        self.connections.add(conn)
        conn.start()

    def _back_off(self, listener: str, error: OSError) -> None:
        """accept() failed for want of descriptors or memory (or for a reason it will fail for again):
        stop accepting for a while, logging once per back-off, instead of retrying on every loop turn."""
        self._backoff_s = min(max(self._backoff_s * 2, ACCEPT_BACKOFF_S), ACCEPT_BACKOFF_MAX_S)
        log.warning("accept failed on %s: %s; not accepting connections for %d ms (%d open)", listener, error,
                    self._backoff_s * 1000, len(self.connections))
        self._set_accepting(False)
        if error.errno in _ACCEPT_EXHAUSTED:
            self._refresh_fd_limit()
        if self._backoff_timer is not None:
            self._backoff_timer.cancel()
        self._backoff_timer = asyncio.get_running_loop().call_later(self._backoff_s, self._end_backoff)

    def _end_backoff(self) -> None:
        self._backoff_timer = None
        self._maybe_resume()

    def _maybe_resume(self) -> None:
        if (
            self._enabled
            and not self._accepting
            and self._backoff_timer is None
            and self._rate_hold is None
            and not self.stopping()
            and self.quotas.slot_available()
        ):
            self._limit_logged = False
            self._set_accepting(True)

    # -- connections
    def closed(self, conn: AcceptedConnection) -> None:
        """A connection closed: its slot is free again."""
        if conn in self.connections:
            self.connections.discard(conn)
            self.quotas.dec(conn.quota_ip)
            if not self._accepting:
                self._maybe_resume()

    def expire_idle(self, max_idle_s: float) -> None:
        """connections.max.idle.ms: close connections with no read or write for that long (Kafka's
        Selector expires idle channels); one waiting on the rest of a frame is idle too."""
        deadline = time.monotonic() - max_idle_s
        idle = [c for c in self.connections if c.last_active < deadline]
        for c in idle:
            c.close(f"idle for more than {max_idle_s * 1000:.0f} ms (connections.max.idle.ms)")
        quotas = self.quotas
        if quotas.total * 2 > quotas.fd_limit:  # near the descriptor room: the broker's own share may have grown
            self._refresh_fd_limit()
            if not self._accepting:
                self._maybe_resume()

    def close(self) -> None:
        """Stop accepting for good: timers cancelled, held sockets and the listening sockets closed (the
        open connections are the broker's to close)."""
        if self._backoff_timer is not None:
            self._backoff_timer.cancel()
        if self._rate_hold is not None:
            self._rate_hold.cancel()
        for held in list(self._held):
            self._close_held(held)
        self._set_accepting(False)
        self._enabled = False
        loop = asyncio.get_running_loop()
        for sock, _ in self.servers:
            with contextlib.suppress(ValueError, OSError):
                loop.remove_reader(sock.fileno())
            sock.close()
        self.servers.clear()
