"""SIGTERM while the broker is still starting ends in a clean stop (exit code 0), as Kafka's shutdown hook
does, not in the signal's default action."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from .broker import HOST, free_port


def _sigterm_after(tmp_path: Path, marker: str) -> list[str]:
    """Run the broker command, SIGTERM it once a stderr line contains ``marker``; every line it wrote, after
    checking that it exited 0."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "odradek", "broker", "--override", f"listeners=PLAINTEXT://{HOST}:{free_port()}",
         "--override", f"log.dirs={tmp_path / 'data'}", "--override", "http.listeners="],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        for line in proc.stderr:
            lines.append(line)
            if marker in line:
                break
            assert time.monotonic() < deadline, "".join(lines)
        os.kill(proc.pid, signal.SIGTERM)
        lines += proc.stderr.readlines()
        assert proc.wait(60) == 0, "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return lines


def test_sigterm_during_start_up_stops_cleanly(tmp_path: Path) -> None:
    # the logs are loaded: start-up is under way, the port not yet open
    text = "".join(_sigterm_after(tmp_path, "Loaded 0 log(s)"))
    assert "shutting down broker" in text, text


def test_the_broker_command_freezes_its_start_up_objects(tmp_path: Path) -> None:
    """server/gc_tuning.py: once the broker serves, what start-up left is out of every later collection."""
    lines = _sigterm_after(tmp_path, "started broker")  # the freeze follows at once, before a signal is handled
    froze = next((line for line in lines if "froze" in line), "")
    assert froze, "".join(lines)
    assert int(froze.split("froze ")[1].split()[0]) > 10_000, "".join(lines)
    assert lines.index(froze) > next(i for i, line in enumerate(lines) if "started broker" in line), "".join(lines)
