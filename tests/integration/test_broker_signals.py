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


def test_sigterm_during_start_up_stops_cleanly(tmp_path: Path) -> None:
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
            if "Loaded 0 log(s)" in line:  # the logs are loaded: start-up is under way, the port not yet open
                os.kill(proc.pid, signal.SIGTERM)
                break
            assert time.monotonic() < deadline, "".join(lines)
        lines += proc.stderr.readlines()
        assert proc.wait(60) == 0, "".join(lines)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = "".join(lines)
    assert "shutting down broker" in text, text
