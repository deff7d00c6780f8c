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


_REFREEZE = """
import gc
from odradek.server.gc_tuning import GcPauses, RefreezePolicy

class Clock:  # each reading is ``step`` later than the one before: a collection lasts ``step``
    def __init__(self):
        self.t, self.step = 0.0, 0.001
    def __call__(self):
        self.t += self.step
        return self.t

clock = Clock()
pauses = GcPauses(clock)
scheduled = []
policy = RefreezePolicy(pauses, pause_s=0.02, schedule=scheduled.append)
gc.callbacks.extend([pauses, policy])
keep = [[i] for i in range(50_000)]  # a long-lived population created after start-up
gc.collect()  # a 1 ms full collection: nothing frozen
assert policy.refreezes == 0 and gc.get_freeze_count() == 0 and not scheduled
clock.step = 0.05
gc.collect(1)  # a 50 ms young collection: nothing frozen either
assert policy.refreezes == 0 and gc.get_freeze_count() == 0
gc.collect()  # a 50 ms full collection freezes what survived it
assert policy.refreezes == 1, policy.refreezes
assert scheduled == [gc.collect], scheduled  # a full collection of next to nothing, outside the callback
assert gc.get_freeze_count() >= 50_000, gc.get_freeze_count()
assert pauses.count[2] >= 2 and abs(pauses.longest[2] - 0.05) < 1e-6 and pauses.count[1] >= 1, pauses.count
class Node:
    pass
a, b = Node(), Node()
a.other, b.other = b, a  # a cycle made after the freeze is still collected
del a, b
clock.step = 0.001
assert gc.collect() >= 2
del keep  # frozen objects without cycles are freed by their reference counts
assert gc.get_freeze_count() < 50_000, gc.get_freeze_count()
from odradek.server.gc_tuning import REFREEZE_THRESHOLD2, enable_refreeze
enable_refreeze(None)
assert gc.get_threshold()[2] == REFREEZE_THRESHOLD2 < 10, gc.get_threshold()
print("ok")
"""


def test_a_long_full_collection_freezes_what_survived_it() -> None:
    out = subprocess.run([sys.executable, "-c", _REFREEZE], capture_output=True, text=True, timeout=60,
                         env={"PYTHONPATH": _SRC, "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
