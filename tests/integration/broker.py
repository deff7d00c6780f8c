"""A real broker process for the integration tests.

The broker is started as a subprocess on a free loopback port with its own log directory:

    python -m odradek broker --override listeners=PLAINTEXT://127.0.0.1:<port>
                             --override log.dirs=<tmp>/data [--override key=value ...]

``ODRADEK_TEST_BROKER_CMD`` replaces that command, to aim the suite at another binary. It is split
with ``shlex`` and may use the placeholders ``{host}``, ``{port}``, ``{logdir}`` and ``{overrides}``
(the ``--override key=value`` arguments, expanded as separate words; left out when the placeholder is
absent), for example::

    ODRADEK_TEST_BROKER_CMD='/opt/other/broker --listen tcp://{host}:{port} --data {logdir}'
"""

from __future__ import annotations

import contextlib
import os
import resource
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from odradek.devcluster.zookeeper import free_port as zk_free_port
from odradek.embedded.probe import api_versions_ok

HOST = "127.0.0.1"
# generous: three test workers, their brokers and Spark share two cores, each broker importing under coverage
START_TIMEOUT = 60.0
STOP_TIMEOUT = 20.0
CMD_ENV = "ODRADEK_TEST_BROKER_CMD"


def free_port() -> int:
    """A port for a broker or listener started later: below the kernel's ephemeral range, a slice per
    pytest-xdist worker (odradek.devcluster.zookeeper.free_port)."""
    return zk_free_port()


def normalise_overrides(overrides: Mapping[str, object] | None = None, **kw: object) -> dict[str, str]:
    """``message_max_bytes=5`` and ``{"message.max.bytes": 5}`` both give ``message.max.bytes=5``."""
    out: dict[str, str] = {}
    for k, v in (overrides or {}).items():
        out[k] = _value(v)
    for k, v in kw.items():
        out[k.replace("_", ".")] = _value(v)
    return out


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


class BrokerError(AssertionError):
    pass


class Broker:
    """One broker process. ``start()`` may be called again after ``stop()``/``kill()``: same port, same
    log directory."""

    def __init__(self, basedir: Path, overrides: Mapping[str, str] | None = None, port: int | None = None,
                 name: str = "broker", memory_limit: int | None = None, env: Mapping[str, str] | None = None) -> None:
        self.basedir = Path(basedir)
        self.basedir.mkdir(parents=True, exist_ok=True)
        self.logdir = self.basedir / "data"
        self.logdir.mkdir(exist_ok=True)
        self.stderr_path = self.basedir / f"{name}.stderr.log"
        self.name = name
        self.host = HOST
        self.port = port if port is not None else free_port()
        self.http_port = free_port()  # http.listeners (/metrics); an override replaces it
        self.overrides: dict[str, str] = dict(overrides or {})
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0
        self.exit_codes: list[int] = []
        # RLIMIT_AS of the broker process, in bytes: a hostile-input test that makes the broker inflate a bomb
        # sees the broker fail (MemoryError, or killed) instead of the test machine swapping
        self.memory_limit = memory_limit
        # variables added to the broker process's environment (e.g. KAFKA_OPTS)
        self.env: dict[str, str] = dict(env or {})

    # ------------------------------------------------------------------ properties

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def partition_dir(self, topic: str, partition: int = 0) -> Path:
        return self.logdir / f"{topic}-{partition}"

    def segment_files(self, topic: str, partition: int = 0, suffix: str = ".log") -> list[Path]:
        d = self.partition_dir(topic, partition)
        if not d.is_dir():
            return []
        return sorted(p for p in d.iterdir() if p.name.endswith(suffix) and p.name[: -len(suffix)].isdigit())

    # ------------------------------------------------------------------ command

    def command(self) -> list[str]:
        override_args: list[str] = []
        merged = {"listeners": f"PLAINTEXT://{self.host}:{self.port}", "log.dirs": str(self.logdir),
                  "http.listeners": f"http://{self.host}:{self.http_port}"}
        merged.update(self.overrides)
        for k, v in merged.items():
            override_args += ["--override", f"{k}={v}"]
        template = os.environ.get(CMD_ENV)
        if not template:
            return [sys.executable, "-m", "odradek", "broker", *override_args]
        words: list[str] = []
        for word in shlex.split(template):
            if word == "{overrides}":
                words += override_args
            else:
                words.append(word.format(host=self.host, port=self.port, logdir=self.logdir))
        return words

    # ------------------------------------------------------------------ lifecycle

    def start(self, timeout: float = START_TIMEOUT) -> Broker:
        assert not self.running, "broker already running"
        self.starts += 1
        with open(self.stderr_path, "ab") as f:
            f.write(f"\n===== start #{self.starts}: {shlex.join(self.command())}\n".encode())
        err = open(self.stderr_path, "ab")  # noqa: SIM115 - handed to the child
        try:
            self.proc = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=err, stderr=err,
                cwd=self.basedir, start_new_session=True, preexec_fn=self._limits,
                env={**os.environ, **self.env} if self.env else None,
            )
        finally:
            err.close()
        self._wait_ready(timeout)
        return self

    def _limits(self) -> None:
        if self.memory_limit is not None:
            resource.setrlimit(resource.RLIMIT_AS, (self.memory_limit, self.memory_limit))

    def _wait_ready(self, timeout: float) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rc = self.proc.poll()
            if rc is not None:
                self.exit_codes.append(rc)
                raise BrokerError(f"broker exited with code {rc} during start-up\n{self.log_tail()}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.5):
                    pass
            except OSError:
                time.sleep(0.05)
                continue
            if api_versions_ok(self.host, self.port):
                return
            time.sleep(0.1)
        self._kill_quietly()
        raise BrokerError(f"broker not ready after {timeout:.0f}s on {self.bootstrap}\n{self.log_tail()}")

    def stop(self, timeout: float = STOP_TIMEOUT, check: bool = True) -> int:
        """SIGTERM, wait, and (with ``check``) assert a clean exit code 0."""
        assert self.proc is not None, "broker was never started"
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                rc = self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(OSError):  # the broker dumps its threads' stacks on SIGUSR1
                    self.proc.send_signal(signal.SIGUSR1)
                    time.sleep(1.0)
                self._kill_quietly()
                raise BrokerError(
                    f"broker did not exit within {timeout:.0f}s of SIGTERM\n{self.log_tail()}"
                ) from None
        else:
            rc = self.proc.returncode
        self.exit_codes.append(rc)
        if check and rc != 0:
            raise BrokerError(f"broker exited with code {rc} after SIGTERM (expected 0)\n{self.log_tail()}")
        return rc

    def kill(self) -> None:
        """SIGKILL: no clean shutdown."""
        assert self.proc is not None, "broker was never started"
        self._kill_quietly()

    def _kill_quietly(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)
            self.exit_codes.append(self.proc.returncode)

    def restart(self) -> Broker:
        self.stop()
        return self.start()

    def assert_alive(self) -> None:
        assert self.proc is not None
        rc = self.proc.poll()
        if rc is not None:
            raise BrokerError(f"broker died (exit code {rc})\n{self.log_tail()}")

    # ------------------------------------------------------------------ diagnostics

    def log_text(self) -> str:
        try:
            return self.stderr_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def log_tail(self, lines: int = 60) -> str:
        text = self.log_text().splitlines()
        return f"--- last {min(lines, len(text))} lines of {self.stderr_path} ---\n" + "\n".join(text[-lines:])

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<Broker {self.name} {self.bootstrap} {state} dir={self.basedir}>"


class BrokerFactory:
    def __init__(self, base: Path, memory_limit: int | None = None) -> None:
        self.base = base
        self.brokers: list[Broker] = []
        self.memory_limit = memory_limit

    def __call__(self, overrides: dict[str, Any] | None = None, *, start: bool = True,
                 **kw: Any) -> Broker:
        b = Broker(self.base / f"broker{len(self.brokers)}", normalise_overrides(overrides, **kw),
                   name=f"broker{len(self.brokers)}", memory_limit=self.memory_limit)
        self.brokers.append(b)
        if start:
            b.start()
        return b

    def close(self) -> None:
        errors = []
        for b in self.brokers:
            if b.running:
                try:
                    b.stop()
                except AssertionError as e:
                    errors.append(str(e))
        if errors:
            raise BrokerError("broker did not shut down cleanly:\n" + "\n".join(errors))
