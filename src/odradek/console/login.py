"""Token login of the console (``http.auth.token``): the secret compared in constant time, the
sessions its login form opens, and the per-address limit on failed logins.

* ``Authorization: Bearer <token>`` on any request, for scripts and scrapers;
* the login form (``POST /login``) opens a session: a random id in a cookie (HttpOnly, so no script
  reads it; SameSite=Strict, so no other site's page sends it), kept here as a digest with the
  principal and its end (``SESSION_TTL_S``); ``POST /logout`` ends it;
* every failed login (token, form or HTTP Basic) is answered after a delay (the broker's
  ``connection.failed.authentication.delay.ms``, as a failed SASL authentication), and an address
  with ``MAX_FAILURES`` failures within ``FAILURE_WINDOW_S`` is refused (429) until the oldest of
  them is that old, before its credentials are even checked.

Pure bookkeeping over an injected clock (seconds, monotonic); nothing here sleeps or does I/O.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
from collections import deque
from collections.abc import Callable

SESSION_COOKIE = "odradek_session"
SESSION_TTL_S = 12 * 3600.0
MAX_SESSIONS = 10_000
MAX_FAILURES = 10
FAILURE_WINDOW_S = 60.0
MAX_TRACKED_ADDRESSES = 10_000

Clock = Callable[[], float]


def parse_bearer(header: str | None) -> str | None:
    """``Bearer <token>`` -> the token (RFC 6750); None for another scheme or a malformed header."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return token


def token_matches(expected: str, given: str) -> bool:
    """Constant time in the given value and the secret's length: both are hashed first, so neither
    the position of the first difference nor a length mismatch shows in the time taken."""
    a = hashlib.sha256(expected.encode()).digest()
    b = hashlib.sha256(given.encode("utf-8", "surrogateescape")).digest()
    return hmac.compare_digest(a, b)


def cookie(header: str | None, name: str) -> str | None:
    """The value of cookie ``name`` in a ``Cookie`` header (RFC 6265 ``name=value; name=value``)."""
    if not header:
        return None
    for part in header.split(";"):
        k, sep, v = part.strip().partition("=")
        if sep and k.strip() == name:
            return v.strip().strip('"')
    return None


def session_cookie(session_id: str, max_age_s: float) -> str:
    return f"{SESSION_COOKIE}={session_id}; Path=/; Max-Age={int(max_age_s)}; HttpOnly; SameSite=Strict"


def expired_cookie() -> str:
    return f"{SESSION_COOKIE}=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict"


class Sessions:
    """Open console sessions: digest of the id -> (principal, end). The oldest goes when there are
    ``max_sessions``."""

    def __init__(self, clock: Clock, ttl_s: float = SESSION_TTL_S, max_sessions: int = MAX_SESSIONS) -> None:
        self.clock = clock
        self.ttl_s = ttl_s
        self.max_sessions = max_sessions
        self._open: dict[bytes, tuple[str, float]] = {}

    @staticmethod
    def _key(session_id: str) -> bytes:
        return hashlib.sha256(session_id.encode("utf-8", "surrogateescape")).digest()

    def open(self, principal: str) -> str:
        now = self.clock()
        if len(self._open) >= self.max_sessions:
            self._open = {k: v for k, v in self._open.items() if v[1] > now}
            while len(self._open) >= self.max_sessions:
                del self._open[next(iter(self._open))]
        session_id = secrets.token_urlsafe(32)
        self._open[self._key(session_id)] = (principal, now + self.ttl_s)
        return session_id

    def principal(self, session_id: str) -> str | None:
        key = self._key(session_id)
        hit = self._open.get(key)
        if hit is None:
            return None
        if hit[1] <= self.clock():
            del self._open[key]
            return None
        return hit[0]

    def close(self, session_id: str) -> None:
        self._open.pop(self._key(session_id), None)

    def __len__(self) -> int:
        return len(self._open)


class LoginThrottle:
    """Failed logins per address: at most ``max_failures`` within ``window_s``."""

    def __init__(self, clock: Clock, max_failures: int = MAX_FAILURES, window_s: float = FAILURE_WINDOW_S,
                 max_addresses: int = MAX_TRACKED_ADDRESSES) -> None:
        self.clock = clock
        self.max_failures = max_failures
        self.window_s = window_s
        self.max_addresses = max_addresses
        self._failures: dict[str, deque[float]] = {}

    def _recent(self, ip: str, now: float) -> deque[float] | None:
        times = self._failures.get(ip)
        if times is None:
            return None
        while times and times[0] <= now - self.window_s:
            times.popleft()
        if not times:
            del self._failures[ip]
            return None
        return times

    def retry_after(self, ip: str) -> int:
        """Seconds (rounded up) until ``ip`` may try again; 0 when it may now."""
        now = self.clock()
        times = self._recent(ip, now)
        if times is None or len(times) < self.max_failures:
            return 0
        return max(1, math.ceil(times[-self.max_failures] + self.window_s - now))

    def failed(self, ip: str) -> None:
        now = self.clock()
        times = self._recent(ip, now)
        if times is None:
            if len(self._failures) >= self.max_addresses:
                for other in list(self._failures):
                    self._recent(other, now)
                while len(self._failures) >= self.max_addresses:
                    del self._failures[next(iter(self._failures))]
            times = self._failures[ip] = deque(maxlen=self.max_failures)
        times.append(now)
