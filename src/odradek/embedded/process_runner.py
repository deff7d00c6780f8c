"""A broker in a child process: ``python -m odradek broker --override key=value ...``.

The child writes its log to ``<dir>/broker.stderr.log`` (appended to across restarts, with a
``=====`` line per start), runs in its own session (a terminal's Ctrl-C reaches only the caller)
and gets SIGTERM should the caller die (Linux). :meth:`ProcessRunner.stop` sends SIGTERM and waits
for exit code 0 (Kafka's clean shutdown); ``kill`` sends SIGKILL.
"""

from __future__ import annotations

import contextlib
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path


class ProcessRunner:
    def __init__(self, overrides: Mapping[str, str], workdir: Path, log_name: str = "broker") -> None:
        self.overrides = dict(overrides)
        self.workdir = workdir
        self.log_path = workdir / f"{log_name}.stderr.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    def command(self) -> list[str]:
        args = [sys.executable, "-m", "odradek", "broker"]
        for k, v in self.overrides.items():
            args += ["--override", f"{k}={v}"]
        return args

    def start(self) -> None:
        from odradek.devcluster.zookeeper import tied_to_parent

        cmd, preexec = tied_to_parent(self.command())

        assert not self.running, "broker already running"
        self.workdir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as err:
            err.write(f"\n===== {time.strftime('%Y-%m-%d %H:%M:%S')} {shlex.join(self.command())}\n".encode())
            err.flush()
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=err, stderr=err, cwd=self.workdir,
                start_new_session=True, preexec_fn=preexec,
            )

    def exited(self) -> str | None:
        """Why start-up cannot succeed any more (the child exited), else None."""
        if self.proc is not None and self.proc.poll() is not None:
            return f"broker exited with code {self.proc.returncode} during start-up\n{self.log_tail()}"
        return None

    def stop(self, timeout: float) -> int | None:
        """SIGTERM and wait; SIGKILL (and RuntimeError) when it does not exit within ``timeout``."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                raise RuntimeError(f"broker did not exit within {timeout:.0f}s of SIGTERM\n{self.log_tail()}") from None
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL and reap."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            self.proc.wait()

    def log_tail(self, lines: int = 40) -> str:
        try:
            text = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        return f"--- last lines of {self.log_path} ---\n" + "\n".join(text[-lines:])
