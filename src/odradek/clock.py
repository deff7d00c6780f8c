"""The broker's clock: one object that says what time it is (Kafka's ``org.apache.kafka.common.utils.Time``).

A component that acts on time (retention, segment rolls, transaction and producer-id expiry, offsets
expiry, quotas, the ISR's lag) is handed the broker's :class:`Clock`, or a ``now_ms`` function bound to
it, instead of reading ``time.time()`` itself. The process runs on :data:`SYSTEM_CLOCK`; a test or a
notebook that starts an in-process broker (``EmbeddedBroker(clock=ManualClock())``) moves time on with
:meth:`ManualClock.advance`, as Kafka's tests do with MockTime, and sees retention or a transaction
timeout happen at the broker's next periodic check instead of waiting the hours they are configured for.

Two readings, as Kafka's Time has them:

- :meth:`Clock.wall_ms`: milliseconds since the epoch (``Time.milliseconds``): timestamps written into the
  log and compared with them (retention, ``segment.ms``, LogAppendTime, transaction timeouts, producer
  expiry);
- :meth:`Clock.monotonic_ns`: a clock that never goes back (``Time.nanoseconds``): durations the broker
  measures between two of its own readings (a follower's lag behind the leader).

What the clock does not drive: the event loop's own timers (``loop.call_later``) and socket-level
timing (idle connections, throttle delays, SASL re-authentication) run on the loop's monotonic clock, as
the sockets they pace do; a scheduling budget (:mod:`odradek.server.turns`) and a duration logged for
people are measured with ``time.perf_counter`` / ``time.monotonic`` directly.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def wall_ms(self) -> int:
        """Milliseconds since the epoch."""
        ...

    def monotonic_ns(self) -> int:
        """Nanoseconds on a clock that never goes back (its zero is arbitrary)."""
        ...


class SystemClock:
    """The machine's clocks."""

    def wall_ms(self) -> int:
        return time.time_ns() // 1_000_000

    def monotonic_ns(self) -> int:
        return time.monotonic_ns()

    def __repr__(self) -> str:
        return "SystemClock()"


SYSTEM_CLOCK: Clock = SystemClock()


class ManualClock:
    """A clock that moves only when told to (Kafka's MockTime). It starts at the machine's time unless
    given one. Thread-safe: a test thread advances it while the broker's loop thread reads it."""

    def __init__(self, wall_ms: int | None = None, monotonic_ns: int = 0) -> None:
        self._lock = threading.Lock()
        self._wall_ms = time.time_ns() // 1_000_000 if wall_ms is None else int(wall_ms)
        self._monotonic_ns = int(monotonic_ns)

    def wall_ms(self) -> int:
        with self._lock:
            return self._wall_ms

    def monotonic_ns(self) -> int:
        with self._lock:
            return self._monotonic_ns

    def advance(self, ms: float) -> None:
        """Move both readings on by ``ms`` milliseconds (not negative: time does not go back)."""
        if ms < 0:
            raise ValueError(f"a clock advances by zero or more milliseconds, not {ms}")
        with self._lock:
            self._wall_ms += int(ms)
            self._monotonic_ns += int(ms * 1_000_000)

    def set_wall_ms(self, wall_ms: int) -> None:
        """Set the wall clock alone, forwards or back (a clock jump: NTP stepping the machine's time);
        the monotonic reading does not move."""
        with self._lock:
            self._wall_ms = int(wall_ms)

    def __repr__(self) -> str:
        return f"ManualClock(wall_ms={self._wall_ms}, monotonic_ns={self._monotonic_ns})"
