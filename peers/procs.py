"""Stopping the JVMs the peer scripts start (a Kafka node, a Connect worker), as their scripts' users do."""

from __future__ import annotations

import contextlib
import signal
import subprocess


def stop_process(proc: subprocess.Popen[bytes] | None, timeout: float = 60.0) -> int | None:
    """SIGTERM (Kafka's controlled shutdown; a Connect worker leaving its group), then SIGKILL after
    ``timeout``; the exit code, or None when nothing was started."""
    if proc is None:
        return None
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            kill_process(proc)
    return proc.returncode


def kill_process(proc: subprocess.Popen[bytes] | None) -> None:
    """SIGKILL, and reap it."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(30)
