"""server/gc_tuning.py: the broker command freezes what survived its start-up, so a full garbage
collection later walks only what was created since; cycles made after the freeze are still
reclaimed; an embedded broker freezes nothing of its host's process."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import odradek

_SRC = str(Path(odradek.__file__).resolve().parent.parent)

_FREEZE = """
import gc
from odradek.server.gc_tuning import freeze_startup_objects
keep = [[i] for i in range(50_000)]  # long-lived start-up objects
tracked = len(gc.get_objects())
frozen = freeze_startup_objects()
assert frozen >= 50_000, frozen
assert gc.get_freeze_count() == frozen
assert len(gc.get_objects()) < tracked - 50_000, (len(gc.get_objects()), tracked)
class Node:
    pass
a, b = Node(), Node()
a.other, b.other = b, a  # a cycle made after the freeze
del a, b
assert gc.collect() >= 2
print("ok")
"""


def test_freeze_exempts_start_up_objects_and_later_cycles_are_still_collected() -> None:
    out = subprocess.run([sys.executable, "-c", _FREEZE], capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": _SRC, "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


_EMBEDDED = """
import gc
from odradek.embedded import EmbeddedBroker
with EmbeddedBroker() as broker:
    assert broker.bootstrap_servers
    print(gc.get_freeze_count())
"""


def test_an_embedded_broker_freezes_nothing(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-c", _EMBEDDED], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path, env={"PYTHONPATH": _SRC, "PATH": "/usr/bin:/bin", "TMPDIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "0"
