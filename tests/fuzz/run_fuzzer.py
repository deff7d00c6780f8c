"""Coverage-guided fuzzing of one target of ``targets.py`` with atheris (libFuzzer for Python).

    python tests/fuzz/run_fuzzer.py <target> [libFuzzer options] [corpus dirs]

for example, five minutes on the record-batch validator, new inputs added to the kept corpus::

    python tests/fuzz/run_fuzzer.py record_batches -max_total_time=300 tests/fuzz/corpus/record_batches

``ODRADEK_SPEEDUPS_SO=<path>`` loads that build of the C extension as ``odradek._speedups`` first.
The odradek modules are instrumented for coverage as they are imported. A finding stops the run and
leaves ``crash-<sha1>`` (or ``timeout-``/``oom-``) in the working directory: add it to the target's corpus
directory once fixed, so ``test_fuzz.py`` replays it from then on.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent))


import preload  # noqa: E402,F401  (ODRADEK_SPEEDUPS_SO)

with atheris.instrument_imports(include=["odradek"]):
    import targets


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in targets.TARGETS:
        sys.exit(f"usage: run_fuzzer.py <{'|'.join(targets.TARGETS)}> [libFuzzer options] [corpus dirs]")
    target = targets.TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
