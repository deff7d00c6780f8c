"""A broker on its own event-loop thread in the calling process.

The thread runs :func:`odradek.cli.broker_cmd.serve` (the code ``odradek broker`` runs) on a new
uvloop loop, without signal handlers. :meth:`ThreadRunner.stop` asks the broker to stop from
outside the loop (``call_soon_threadsafe``) and joins the thread.

The abrupt stop (``abrupt=True``) stands in for SIGKILL, which a thread cannot receive: the broker
stops serving and closes its sockets as on a clean stop, but its logs are released with
``Log.close_handlers`` instead of ``LogManager.shutdown``: no producer-state snapshot, no index
trim, no recovery-point / log-start-offset / replication-offset checkpoints and no
``.kafka_cleanshutdown`` marker. The next start therefore recovers the logs as after a crash.
Records are written to the segment files with ``os.write`` before a produce is acknowledged, so
(as with SIGKILL) an acknowledged write stays in the page cache and survives; what neither
simulates is losing the page cache (a power cut) — ``log.flush.interval.messages=1`` is the setting
that covers that, as in Kafka.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import TYPE_CHECKING, Any

from odradek.clock import SYSTEM_CLOCK, Clock
from odradek.config import BrokerConfig

if TYPE_CHECKING:
    from odradek.server.broker import Broker

log = logging.getLogger("odradek.embedded")


def _crash_close(broker: Broker) -> None:
    """Replace the clean log shutdown of this broker instance by a release that writes nothing."""
    manager = broker.log_manager

    def release() -> None:
        log.warning("broker %d killed: logs released without checkpoints or clean-shutdown marker", broker.node_id)
        for lg in manager.logs():
            try:
                lg.close_handlers()
            except OSError as e:  # pragma: no cover - a vanished file
                log.warning("releasing %s-%d: %s", lg.topic, lg.partition, e)

    manager.shutdown = release  # type: ignore[method-assign]


class ThreadRunner:
    def __init__(self, config: BrokerConfig, name: str = "odradek-broker", clock: Clock = SYSTEM_CLOCK) -> None:
        self.config = config
        self.clock = clock
        self.name = name
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._broker: Broker | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive() and self._broker is not None

    def bound(self, listener: str | None = None) -> tuple[str, int]:
        """The address the first (or the named) listener is bound to."""
        assert self._broker is not None, "broker not started"
        bound = self._broker.bound
        return bound[listener] if listener is not None else next(iter(bound.values()))

    def http_bound(self) -> tuple[str, int]:
        """The address ``http.listeners`` is bound to (("", 0) without one)."""
        assert self._broker is not None, "broker not started"
        return self._broker.http_bound

    def start(self, timeout: float) -> None:
        assert not self.running, "broker already running"
        self._started.clear()
        self._error = None
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        if not self._started.wait(timeout):
            self.stop(timeout)
            raise TimeoutError(f"broker did not start within {timeout:.0f}s")
        if self._error is not None:
            self._thread.join(timeout)
            error, self._error = self._error, None
            raise error

    def _run(self) -> None:
        from odradek.cli.broker_cmd import serve

        try:
            import uvloop

            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        except ImportError:  # pragma: no cover - uvloop is a dependency
            loop = asyncio.new_event_loop()

        def started(broker: Broker) -> None:
            self._broker = broker
            self._loop = loop
            self._started.set()

        try:
            loop.run_until_complete(serve(self.config, started=started, embedded=True, clock=self.clock))
        except BaseException as e:
            if self._started.is_set():  # raised by stop() (or the next start) in the caller's thread
                log.exception("embedded broker failed")
            self._error = e
        finally:
            self._broker = None
            self._loop = None
            try:
                _cancel_leftovers(loop)
            finally:
                loop.close()
                self._started.set()

    def stop(self, timeout: float, abrupt: bool = False) -> None:
        """Stop the broker (cleanly, or abruptly: see the module docstring) and join its thread."""
        loop, broker, thread = self._loop, self._broker, self._thread
        if loop is not None and broker is not None:
            def request() -> None:
                if abrupt:
                    _crash_close(broker)
                broker.request_stop()

            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(request)
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                raise TimeoutError(f"broker thread did not stop within {timeout:.0f}s")
        self._thread = None
        error, self._error = self._error, None
        if error is not None:
            raise RuntimeError(f"the broker failed: {error!r}") from error


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks the broker left on its loop, and let them finish, before the loop closes."""
    tasks: set[asyncio.Task[Any]] = {t for t in asyncio.all_tasks(loop) if not t.done()}
    for t in tasks:
        t.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())
