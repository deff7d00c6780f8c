"""``EmbeddedBroker``: one broker for tests and notebooks, started and stopped from Python.

::

    with EmbeddedBroker(config={"num.partitions": 3}) as broker:
        broker.create_topic("events", partitions=3)
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})

In thread mode the broker may run on a :class:`~odradek.clock.ManualClock` (``clock=``): the test moves
time on with ``clock.advance(ms)`` and the broker's periodic checks (retention every
``log.retention.check.interval.ms``, transaction timeouts, offsets expiry) act on the new time, as
Kafka's tests do with MockTime::

    clock = ManualClock()
    with EmbeddedBroker(config={"log.retention.check.interval.ms": "100"}, clock=clock) as broker:
        ...
        clock.advance(8 * 24 * 3600 * 1000)  # a week and a day later: retention.ms has passed

The broker listens on ``127.0.0.1`` on a free port (kept across restarts, so clients reconnect) and
keeps its data in a new temporary directory, removed by :meth:`close` (``data_dir`` gives one that
is kept). ``config`` takes Kafka's names; :data:`TEST_DEFAULTS` are applied first (a consumer group
rebalances at once, the internal topics have one partition), ``config`` overrides them.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Literal

from odradek.clock import SYSTEM_CLOCK, Clock
from odradek.config import BrokerConfig
from odradek.embedded.admin import TopicAdmin, config_strings
from odradek.embedded.probe import wait_serving
from odradek.embedded.process_runner import ProcessRunner
from odradek.embedded.thread_runner import ThreadRunner

Mode = Literal["thread", "process"]

TEST_DEFAULTS: dict[str, str] = {
    # Kafka's 3 s wait for more members before a new group's first rebalance: every consumer test pays it
    "group.initial.rebalance.delay.ms": "0",
    # 50 partitions each for __consumer_offsets / __transaction_state: created on first use, for nothing
    "offsets.topic.num.partitions": "1",
    "transaction.state.log.num.partitions": "1",
    "offsets.topic.replication.factor": "1",
    "transaction.state.log.replication.factor": "1",
}


def _never() -> None:
    return None


class EmbeddedBrokerError(RuntimeError):
    """The broker did not start or stop as asked."""


class EmbeddedBroker:
    def __init__(self, config: Mapping[str, object] | None = None, *, mode: Mode = "thread",
                 data_dir: str | Path | None = None, host: str = "127.0.0.1", port: int = 0,
                 start_timeout: float = 30.0, stop_timeout: float = 30.0, name: str = "broker",
                 clock: Clock | None = None) -> None:
        if mode not in ("thread", "process"):
            raise ValueError(f"mode must be 'thread' or 'process', not {mode!r}")
        if clock is not None and mode != "thread":
            raise ValueError("clock= needs mode='thread': a broker in its own process reads the machine's clock")
        # the broker's clock (odradek.clock): a ManualClock lets a test move time on (retention, timeouts)
        self.clock: Clock = SYSTEM_CLOCK if clock is None else clock
        user = config_strings(config)
        for key in ("listeners", "advertised.listeners"):
            if key in user:
                raise ValueError(f"{key} is set by EmbeddedBroker: pass host= and port= instead")
        self.mode: Mode = mode
        self.name = name
        self.host = host
        self.port = port
        self.start_timeout = start_timeout
        self.stop_timeout = stop_timeout
        self._own_dir = data_dir is None
        self.data_dir = Path(tempfile.mkdtemp(prefix="odradek-")) if data_dir is None else Path(data_dir)
        self.data_dir.mkdir(parents=True, exist_ok=True)
        # /metrics on a free port of the broker's host (the default 9644 would clash between brokers)
        self.config: dict[str, str] = {**TEST_DEFAULTS, "http.listeners": f"http://{host}:0",
                                       "log.dirs": str(self.data_dir / "data"), **user}
        self.http_port = 0  # the bound http.listeners port (0: none, or not started yet)
        self.startup_seconds: float | None = None  # start() to the first served request, last start
        self._thread: ThreadRunner | None = None
        self._process: ProcessRunner | None = None
        self._admin: TopicAdmin | None = None
        if mode == "process" and self.port == 0:
            from odradek.devcluster.zookeeper import free_port

            self.port = free_port()
        if mode == "process" and self.config["http.listeners"].endswith(":0"):
            from odradek.devcluster.zookeeper import free_port

            self.config["http.listeners"] = self.config["http.listeners"][:-2] + f":{free_port()}"

    # ------------------------------------------------------------------ addresses

    @property
    def bootstrap_servers(self) -> str:
        if self.port == 0:
            raise EmbeddedBrokerError("the broker has not started yet: its port is not chosen")
        return f"{self.host}:{self.port}"

    @property
    def metrics_url(self) -> str:
        """``http://host:port/metrics`` of the started broker (http.listeners)."""
        if not self.http_port:
            raise EmbeddedBrokerError("the broker serves no /metrics (not started, or http.listeners is empty)")
        return f"http://{self.host}:{self.http_port}/metrics"

    @property
    def running(self) -> bool:
        runner = self._thread if self.mode == "thread" else self._process
        return runner is not None and runner.running

    @property
    def pid(self) -> int | None:
        """The child's process id (process mode, while started)."""
        return self._process.pid if self._process is not None else None

    @property
    def log_path(self) -> Path | None:
        """The child's log file (process mode); in thread mode the broker logs to the ``odradek`` logger."""
        return self._process.log_path if self._process is not None else None

    def _overrides(self) -> dict[str, str]:
        return {**self.config, "listeners": f"PLAINTEXT://{self.host}:{self.port}"}

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> EmbeddedBroker:
        """Start and wait until the broker serves a request (``startup_seconds`` says how long that took)."""
        t0 = time.monotonic()
        self.launch()
        return self.wait_started(t0)

    def launch(self) -> None:
        """Start without waiting (process mode; thread mode waits for the listeners): see :meth:`wait_started`."""
        if self.running:
            raise EmbeddedBrokerError("broker already running")
        if self.mode == "thread":
            self._thread = ThreadRunner(BrokerConfig(self._overrides()), name=f"odradek-{self.name}", clock=self.clock)
            self._thread.start(self.start_timeout)
            self.port = self._thread.bound()[1]
            self.http_port = self._thread.http_bound()[1]
        else:
            if self._process is None:
                self._process = ProcessRunner(self._overrides(), self.data_dir, self.name)
            self._process.overrides = self._overrides()
            self._process.start()
            listener = self.config.get("http.listeners", "").strip()
            self.http_port = int(listener.rsplit(":", 1)[1]) if listener else 0

    def wait_started(self, t0: float | None = None) -> EmbeddedBroker:
        """Wait until a launched broker serves ApiVersions; ``t0`` (monotonic) is when it was launched."""
        t0 = time.monotonic() if t0 is None else t0
        left = max(1.0, self.start_timeout - (time.monotonic() - t0))
        try:
            served = wait_serving(self.host, self.port, left, self._process.exited if self._process else _never)
        except RuntimeError as e:
            raise EmbeddedBrokerError(str(e)) from None
        if not served:
            self._abort()
            tail = f"\n{self._process.log_tail()}" if self._process is not None else ""
            raise EmbeddedBrokerError(f"broker not serving on {self.bootstrap_servers} after {self.start_timeout:.0f}s{tail}")
        self.startup_seconds = time.monotonic() - t0
        return self

    def _abort(self) -> None:
        if self._process is not None:
            self._process.kill()
        if self._thread is not None:
            self._thread.stop(self.stop_timeout, abrupt=True)

    def stop(self) -> None:
        """Clean shutdown (SIGTERM in process mode, exit code 0 required). No-op when not running."""
        self._drop_admin()
        if self.mode == "thread":
            if self._thread is not None:
                self._thread.stop(self.stop_timeout)
        elif self._process is not None and self._process.running:
            code = self._process.stop(self.stop_timeout)
            if code != 0:
                raise EmbeddedBrokerError(f"broker exited with code {code} on SIGTERM\n{self._process.log_tail()}")

    def kill(self) -> None:
        """Crash the broker: SIGKILL in process mode; in thread mode an abrupt stop that writes no
        checkpoint and no clean-shutdown marker (the next start recovers the logs as after a crash;
        acknowledged writes are in the OS page cache and survive, as they do SIGKILL)."""
        if self.mode == "thread" and self.config.get("zookeeper.connect"):
            # the stop would still be a controlled shutdown, and the ZooKeeper session would close cleanly
            raise EmbeddedBrokerError("kill() of a cluster-mode broker needs mode='process' (SIGKILL)")
        self._drop_admin()
        if self.mode == "thread":
            if self._thread is not None:
                self._thread.stop(self.stop_timeout, abrupt=True)
        elif self._process is not None:
            self._process.kill()

    def restart(self) -> EmbeddedBroker:
        """Stop cleanly (when running) and start again: same port, same data."""
        self.stop()
        return self.start()

    def close(self) -> None:
        """Stop, and remove the data directory when it is the temporary one made here."""
        try:
            self.stop()
        finally:
            if self._own_dir:
                shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> EmbeddedBroker:
        if not self.running:
            self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # ------------------------------------------------------------------ topics

    def create_topic(self, name: str, partitions: int = 1, config: Mapping[str, object] | None = None,
                     replication_factor: int = 1, timeout: float = 30.0) -> str:
        """Create a topic (CreateTopics) and wait until each partition has a leader; returns its name."""
        if self._admin is None:
            self._admin = TopicAdmin(self.bootstrap_servers)
        self._admin.create_topic(name, partitions, replication_factor, config, timeout)
        return name

    def _drop_admin(self) -> None:
        self._admin = None

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<EmbeddedBroker {self.name} {self.mode} {self.host}:{self.port} {state} dir={self.data_dir}>"
