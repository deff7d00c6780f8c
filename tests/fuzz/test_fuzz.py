"""The fuzz targets in CI: every kept input replayed, then a bounded coverage-guided run of each target.

``ODRADEK_FUZZ_SECONDS`` (default 15) bounds each target's atheris run. A run that finds something fails
with the input in the report (base64); fix the bug, then keep the input in ``corpus/<target>/``.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .targets import TARGETS

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
SECONDS = int(os.environ.get("ODRADEK_FUZZ_SECONDS", "15"))



@pytest.mark.parametrize("target", sorted(TARGETS))
def test_kept_corpus_replays_clean(target: str) -> None:
    files = sorted((CORPUS / target).iterdir())
    assert files, f"no corpus for {target}"
    for f in files:
        try:
            TARGETS[target](f.read_bytes())
        except Exception as e:
            raise AssertionError(f"{f.name}: {type(e).__name__}: {e}") from e


@pytest.mark.timeout(SECONDS + 120)
@pytest.mark.parametrize("target", sorted(TARGETS))
def test_fuzzing_finds_nothing(target: str, tmp_path: Path) -> None:
    new = tmp_path / "new"
    new.mkdir()
    cmd = [
        sys.executable, str(HERE / "run_fuzzer.py"), target,
        f"-max_total_time={SECONDS}", "-rss_limit_mb=2048", "-timeout=10", "-max_len=65536",
        f"-artifact_prefix={tmp_path}/", str(new), str(CORPUS / target),
    ]
    # not measured by coverage (scripts/test.sh): atheris instruments the code itself, and a traced fuzzer
    # would run fewer inputs in its time
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=SECONDS + 100)
    found = [p for p in tmp_path.iterdir() if p.is_file() and p.name.split("-")[0] in ("crash", "timeout", "oom", "leak")]
    report = "\n".join(f"{p.name}: {base64.b64encode(p.read_bytes()[:4096]).decode()}" for p in found)
    assert proc.returncode == 0 and not found, (
        f"fuzzing {target} found an input (rc {proc.returncode}):\n{report}\n{proc.stderr[-6000:]}"
    )
    # the run did execute: libFuzzer's summary line
    assert "Done " in proc.stderr, proc.stderr[-3000:]
