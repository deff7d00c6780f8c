"""server/allocator.py: glibc's mmap and trim thresholds fixed for the broker's process, unless the
environment sets them; a megabyte buffer then comes back from the heap without new page faults."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import odradek
from odradek.server.allocator import MMAP_THRESHOLD, TRIM_THRESHOLD, tune_malloc


def test_sets_both_thresholds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    assert tune_malloc() == {"MALLOC_TRIM_THRESHOLD_": TRIM_THRESHOLD, "MALLOC_MMAP_THRESHOLD_": MMAP_THRESHOLD}


def test_environment_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    monkeypatch.delenv("MALLOC_TRIM_THRESHOLD_", raising=False)
    assert tune_malloc() == {"MALLOC_TRIM_THRESHOLD_": TRIM_THRESHOLD}


_CHURN = """
import resource, sys
if sys.argv[1] == "tuned":
    from odradek.server.allocator import tune_malloc
    tune_malloc()
faults = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_minflt
bytearray(1 << 20)
before = faults()
for _ in range(100):
    bufs = [bytearray(1 << 20) for _ in range(3)]  # three requests' frames alive at once
    del bufs
print(faults() - before)
"""


def _churn_faults(mode: str) -> int:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    env["PYTHONPATH"] = str(Path(odradek.__file__).resolve().parent.parent)
    out = subprocess.run([sys.executable, "-c", _CHURN, mode], env=env, capture_output=True, text=True,
                         check=True, timeout=60)
    return int(out.stdout.strip())


def test_megabyte_buffers_reuse_pages() -> None:
    # glibc's defaults return freed megabytes to the kernel and fault them in again; how often depends on the
    # machine (~48,000 minor faults on the earlier machines, 5,086 on the 2026-12 ones, where glibc's dynamic mmap
    # threshold keeps more in the heap); tuned, the heap keeps them (~500 on both)
    default, tuned = _churn_faults("default"), _churn_faults("tuned")
    assert tuned < 2_000
    assert default > 4 * tuned, (default, tuned)
