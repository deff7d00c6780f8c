"""Connection limits (Kafka's ConnectionQuotas) and the request memory pool (Kafka's MemoryPool).

Sans-I/O bookkeeping the listeners and connections consult; nothing here touches a socket.

``ConnectionQuotas`` counts open connections per peer address and in total:

* ``max.connections`` (default Int.MaxValue): while the broker holds that many, the accept loop is
  paused (the listening sockets' readers are removed; newcomers wait in the kernel's backlog) and
  resumed when a connection closes. Kafka's Acceptor waits in ``ConnectionQuotas.waitForConnectionSlot``.
* an implicit limit from ``RLIMIT_NOFILE``: the soft limit minus the descriptors the broker holds for
  itself (segments, indexes, checkpoints, ...) minus a reserve (``fd_reserve``: 1/20 of the limit, at least
  ``FD_RESERVE_MIN``), so clients cannot take the descriptors a segment roll needs. It acts as a smaller
  ``max.connections`` whenever it is below it.
* ``max.connections.per.ip`` (default Int.MaxValue) with ``max.connections.per.ip.overrides``
  (``host:n,host:n``, hostnames resolved at start-up): a connection past its address's limit is closed
  at once (Kafka's TooManyConnectionsException; it is logged, not answered).

``RequestMemoryPool`` is Kafka's non-strict SimpleMemoryPool as the broker uses it for
``queued.max.request.bytes``: a request's declared size is reserved when its size field is read and
released when it is answered; a reservation is granted while any memory is free (so the pool
overshoots by at most one request), and a connection refused one stops reading until memory is
released (Kafka's Selector mutes channels while the pool is out of memory).
"""

from __future__ import annotations

import ipaddress
import resource
import socket
from collections.abc import Callable

from odradek.config import ConfigError

INT_MAX = 2**31 - 1
FD_RESERVE_MIN = 64


def normalise_ip(host: str) -> str:
    """One spelling per address (``::ffff:10.0.0.1`` is ``10.0.0.1``, IPv6 compressed)."""
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return str(ip)


def parse_ip_overrides(raw: str, resolve: Callable[[str], list[str]] | None = None,
                       name: str = "max.connections.per.ip.overrides") -> dict[str, int]:
    """``max.connections.per.ip.overrides`` (or ``name``, ``http.max.connections.per.ip.overrides``):
    ``host:n,host:n`` → {address: n}. A hostname stands for every address it resolves to (Kafka
    resolves each with InetAddress.getByName)."""
    out: dict[str, int] = {}
    for item in raw.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, n = item.rpartition(":")
        host = host.strip().strip("[]")
        if not sep or not host:
            raise ConfigError(f"Invalid value {item} in {name}: expected host:count")
        try:
            limit = int(n)
        except ValueError:
            raise ConfigError(f"Invalid value {item} in {name}: expected host:count") from None
        if not 0 <= limit <= INT_MAX:
            raise ConfigError(f"Invalid connection count {limit} for {host} in {name}")
        try:
            addresses = [str(ipaddress.ip_address(host))]
        except ValueError:
            addresses = resolve(host) if resolve is not None else _resolve(host, name)
        for a in addresses:
            out[normalise_ip(a)] = limit
    return out


def _resolve(host: str, name: str) -> list[str]:
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except OSError as e:
        raise ConfigError(f"Cannot resolve {host} of {name}: {e}") from None
    return sorted({str(info[4][0]) for info in infos})


def fd_reserve(soft_limit: int) -> int:
    return max(FD_RESERVE_MIN, soft_limit // 20)


def open_fd_count() -> int | None:
    """Descriptors this process holds (Linux /proc), or None when they cannot be counted."""
    import os

    try:
        return len(os.listdir("/proc/self/fd")) - 1  # less the one listdir itself opened
    except OSError:
        return None


def nofile_soft_limit() -> int | None:
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return None if soft == resource.RLIM_INFINITY else int(soft)


class ConnectionQuotas:
    """The Kafka listeners' counts (``Broker._admit``); the HTTP endpoint keeps an instance of its own
    for ``http.max.connections.per.ip`` (``odradek.http.server.HttpServer``, per address only)."""

    def __init__(self, max_connections: int, max_per_ip: int, overrides: dict[str, int],
                 per_ip_name: str = "max.connections.per.ip") -> None:
        if max_per_ip == 0 and not overrides:
            # Kafka's KafkaConfig requirement
            raise ConfigError(
                f"{per_ip_name} can be set to zero only if {per_ip_name}.overrides property is set."
            )
        self.max_connections = max_connections
        self.max_per_ip = max_per_ip
        self.overrides = overrides
        self.fd_limit = INT_MAX  # connections the descriptor limit leaves room for (refresh_fd_limit)
        self.total = 0
        self.counts: dict[str, int] = {}

    @property
    def limit(self) -> int:
        """The effective broker-wide limit: max.connections or the descriptor room, the smaller."""
        return min(self.max_connections, self.fd_limit)

    def slot_available(self) -> bool:
        return self.total < self.limit

    def ip_limit(self, ip: str) -> int:
        return self.overrides.get(ip, self.max_per_ip)

    def inc(self, ip: str) -> int | None:
        """Count a new connection from ``ip``. Returns the address's limit when the connection is one
        too many (the caller closes it and calls :meth:`dec`), else None."""
        count = self.counts.get(ip, 0)
        self.counts[ip] = count + 1
        self.total += 1
        limit = self.ip_limit(ip)
        return limit if count >= limit else None

    def dec(self, ip: str) -> None:
        count = self.counts.get(ip, 0)
        if count <= 1:
            self.counts.pop(ip, None)
        else:
            self.counts[ip] = count - 1
        self.total = max(self.total - 1, 0)

    def refresh_fd_limit(self, soft_limit: int | None, open_fds: int | None) -> int:
        """Recompute the connections the descriptor limit leaves room for: the soft RLIMIT_NOFILE less
        the broker's own descriptors (all it holds but its connections) less the reserve."""
        if soft_limit is None or open_fds is None:
            self.fd_limit = INT_MAX
        else:
            own = max(open_fds - self.total, 0)
            self.fd_limit = max(soft_limit - own - fd_reserve(soft_limit), 0)
        return self.fd_limit


class RequestMemoryPool:
    """``queued.max.request.bytes`` (Kafka's SimpleMemoryPool, non-strict)."""

    def __init__(self, capacity: int, wake: Callable[[Callable[[], None]], object]) -> None:
        self.capacity = capacity
        self.used = 0
        self._wake_scheduled = False
        self._call_soon = wake
        self.waiters: dict[Callable[[], bool], None] = {}  # FIFO set of muted connections' resume hooks

    @property
    def out_of_memory(self) -> bool:
        return self.used >= self.capacity

    def try_reserve(self, n: int) -> bool:
        if self.used >= self.capacity:
            return False
        self.used += n
        return True

    def release(self, n: int) -> None:
        self.used -= n
        if self.waiters and self.used < self.capacity and not self._wake_scheduled:
            self._wake_scheduled = True
            self._call_soon(self._wake)

    def wait(self, resume: Callable[[], bool]) -> None:
        """``resume`` is called once memory is free; it returns True when it got what it waited for
        (False: it waits again, and the waiters behind it keep waiting)."""
        self.waiters[resume] = None

    def forget(self, resume: Callable[[], bool]) -> None:
        self.waiters.pop(resume, None)

    def _wake(self) -> None:
        self._wake_scheduled = False
        while self.waiters and self.used < self.capacity:
            resume = next(iter(self.waiters))
            del self.waiters[resume]
            if not resume():
                break
