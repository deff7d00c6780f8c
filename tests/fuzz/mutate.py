"""A bounded, seeded mutation fuzzer for one target of ``targets.py``: every input of the given corpus
directories, then ``iterations`` random mutations of them (bytes changed, bursts, cuts, insertions,
repeated pieces). Used by ``test_sanitizers.py`` to drive the C extension built with AddressSanitizer
and UBSan through its Python entry points, where atheris' libFuzzer cannot run (the sanitizer runtime,
preloaded, takes over its coverage hooks)::

    ODRADEK_SPEEDUPS_SO=build/_speedups.so LD_PRELOAD=$(gcc -print-file-name=libasan.so) \\
        python tests/fuzz/mutate.py arrow_records 20000 1 tests/fuzz/corpus/arrow_records

An exception escaping the target is a finding: the input is written to ``finding-<sha1>`` in the working
directory and the run exits 1. A sanitizer report aborts the process.
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
import traceback
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import preload  # noqa: E402,F401  (ODRADEK_SPEEDUPS_SO)
import targets  # noqa: E402


def mutate(rnd: random.Random, data: bytes) -> bytes:
    buf = bytearray(data)
    for _ in range(rnd.randint(1, 4)):
        op = rnd.randrange(6)
        if not buf:
            buf += bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 16)))
            continue
        i = rnd.randrange(len(buf))
        if op == 0:
            buf[i] ^= 1 << rnd.randrange(8)
        elif op == 1:
            buf[i] = rnd.randrange(256)
        elif op == 2:
            for j in range(i, min(len(buf), i + rnd.randint(2, 8))):
                buf[j] = rnd.choice((0, 0x7F, 0x80, 0xFF, rnd.randrange(256)))
        elif op == 3:
            del buf[i : i + rnd.randint(1, 16)]
        elif op == 4:
            buf[i:i] = bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 16)))
        else:
            j = rnd.randrange(len(buf))
            buf[i:i] = buf[j : j + rnd.randint(1, 64)]
    return bytes(buf)


def main() -> None:
    if len(sys.argv) < 5 or sys.argv[1] not in targets.TARGETS:
        sys.exit(f"usage: mutate.py <{'|'.join(targets.TARGETS)}> ITERATIONS SEED CORPUS_DIR...")
    target = targets.TARGETS[sys.argv[1]]
    iterations, seed = int(sys.argv[2]), int(sys.argv[3])
    corpus = [p.read_bytes() for d in sys.argv[4:] for p in sorted(Path(d).iterdir()) if p.is_file()]
    if not corpus:
        sys.exit("empty corpus")
    rnd = random.Random(seed)
    for data in corpus:
        _run(target, data)
    for _ in range(iterations):
        _run(target, mutate(rnd, rnd.choice(corpus)))
    print(f"mutate.py: {len(corpus) + iterations} inputs, no finding (speedups: {os.environ.get('ODRADEK_SPEEDUPS_SO', 'as built')})")


def _run(target: Callable[[bytes], None], data: bytes) -> None:
    try:
        target(data)
    except Exception:
        name = f"finding-{hashlib.sha1(data).hexdigest()}"
        Path(name).write_bytes(data)
        traceback.print_exc()
        sys.exit(f"mutate.py: finding, input saved as {name}")


if __name__ == "__main__":
    main()
