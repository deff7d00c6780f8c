"""raft/ is a pure state machine: importing it loads no event loop, socket, thread, wire codec or broker
part, and its modules read no clock (time comes in as ``now_ms``) and draw no global random."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

RAFT = Path(__file__).resolve().parents[3] / "src" / "odradek" / "raft"


def test_importing_raft_loads_no_io_machinery() -> None:
    code = (
        "import sys\n"
        "import odradek.raft.client, odradek.raft.quorum_store\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    env_path = str(RAFT.parents[1])
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, env={"PYTHONPATH": env_path}
    ).stdout.split()
    forbidden = ("asyncio", "socket", "selectors", "threading", "kio", "odradek.server", "odradek.controller", "odradek.log")
    assert [m for m in out if m.startswith(forbidden) and not m.startswith("odradek.raft")] == []


def test_no_clock_and_no_global_random() -> None:
    for path in sorted(RAFT.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                assert not {a.name for a in node.names} & {"time", "datetime"}, path
            if isinstance(node, ast.ImportFrom):
                assert node.module not in ("time", "datetime"), path
                assert not (node.module == "random" and node.names), path
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "random":
                assert node.attr == "Random", f"{path}: random.{node.attr} (use the injected Random)"
