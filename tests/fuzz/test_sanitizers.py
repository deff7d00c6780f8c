"""The C extension's record decoders (src/odradek/_speedups.c) under AddressSanitizer and UBSan, bounded
in time (about two minutes in all, one test after another, on a 2-core machine: the libFuzzer run 40 s,
the two mutation runs 17 s and 31 s, the unit tests 45 s):

1. ``speedups_fuzzer.c``, a libFuzzer harness of the decoding core (varints, records, batches, CRC-32C,
   the two passes of the Arrow decode with the buffer changed between them), built with clang
   ``-fsanitize=fuzzer,address,undefined``: coverage-guided from ``corpus/speedups`` for
   ``ODRADEK_SANITIZER_FUZZ_SECONDS`` (default 35) or ``ODRADEK_SANITIZER_FUZZ_RUNS`` inputs.
2. The extension itself built with gcc ``-fsanitize=address,undefined`` into a temporary directory, driven
   through its Python entry points, the sanitizer runtime preloaded: by the ``arrow_records`` target (the
   Spark source's reader) and the ``speedups_module`` target (every exported function called directly),
   each with ``mutate.py`` (the kept corpus, then ``ODRADEK_SANITIZER_MUTATIONS`` (default 20,000) seeded
   mutations); and by the extension's unit tests (``UNIT_TESTS``: hand-made, truncated, lying and extreme
   inputs), run again by pytest against that build.

Any sanitizer report, crash or broken invariant fails the test with the input (base64). The compilers
are the machine's (scripts/setup.sh installs clang and libclang-rt-14-dev; gcc 12 brings libasan8 and
libubsan1): a missing one fails the test, it is never skipped.
"""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
CORPUS = HERE / "corpus"
SECONDS = int(os.environ.get("ODRADEK_SANITIZER_FUZZ_SECONDS", "35"))
RUNS = int(os.environ.get("ODRADEK_SANITIZER_FUZZ_RUNS", "-1"))
MUTATIONS = int(os.environ.get("ODRADEK_SANITIZER_MUTATIONS", "20000"))
SANITIZE = ["-g", "-O1", "-fno-omit-frame-pointer", "-fno-sanitize-recover=all"]
SAN_ENV = {
    "ASAN_OPTIONS": "abort_on_error=1:detect_stack_use_after_return=1:strict_string_checks=1",
    "UBSAN_OPTIONS": "halt_on_error=1:print_stacktrace=1",
}


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: scripts/setup.sh installs the sanitizer tool chain "
                    "(Debian: clang libclang-rt-14-dev; gcc with libasan8)")
    return path


def _env() -> dict[str, str]:
    # not measured by coverage (scripts/test.sh): the fuzzers run native code, and a traced Python would
    # run fewer inputs in its time
    env = {k: v for k, v in os.environ.items() if not k.startswith("COVERAGE_")}
    env.update(SAN_ENV)
    return env


def _findings(d: Path) -> str:
    found = [p for p in d.iterdir() if p.is_file() and p.name.split("-")[0] in ("crash", "timeout", "oom", "leak",
                                                                                   "finding")]
    return "\n".join(f"{p.name}: {base64.b64encode(p.read_bytes()[:4096]).decode()}" for p in found)


def _no_sanitizer_report(text: str) -> None:
    for marker in ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer", "SUMMARY: UndefinedBehavior"):
        assert marker not in text, f"sanitizer report ({marker}):\n{text[-6000:]}"


@pytest.mark.timeout(SECONDS + 300)
def test_decoding_core_under_libfuzzer_asan_ubsan(tmp_path: Path) -> None:
    clang = _tool("clang")
    exe = tmp_path / "speedups_fuzzer"
    build = subprocess.run([clang, *SANITIZE, "-fsanitize=fuzzer,address,undefined", str(HERE / "speedups_fuzzer.c"),
                            "-o", str(exe)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, f"building the harness failed:\n{build.stderr[-4000:]}"
    new = tmp_path / "new"
    new.mkdir()
    seeds = sorted((CORPUS / "speedups").iterdir())
    assert seeds, "no corpus for the C harness (tests/fuzz/make_corpus.py writes it)"
    cmd = [str(exe), f"-max_total_time={SECONDS}", f"-runs={RUNS}", "-max_len=8192", "-timeout=10",
           "-rss_limit_mb=2048", f"-artifact_prefix={tmp_path}/", str(new), str(CORPUS / "speedups")]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=_env(), timeout=SECONDS + 120)
    report = _findings(tmp_path)
    assert proc.returncode == 0 and not report, (
        f"fuzzing the decoding core found an input (rc {proc.returncode}):\n{report}\n{proc.stderr[-6000:]}"
    )
    _no_sanitizer_report(proc.stderr)
    assert "Done " in proc.stderr, proc.stderr[-3000:]  # libFuzzer's summary: the run did execute
    runs = int(proc.stderr.rsplit("Done ", 1)[1].split()[0])
    assert runs >= len(seeds), proc.stderr[-3000:]


# the unit tests of the extension's functions (hand-made, truncated, lying and extreme inputs), run again
# against the sanitized build
UNIT_TESTS = ["tests/unit/protocol/test_speedups_edges.py", "tests/unit/protocol/test_speedups.py",
              "tests/unit/protocol/test_inflate.py", "tests/unit/pipeline/test_corrupt_batches.py"]


@pytest.fixture(scope="module")
def sanitized_extension(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The extension built with gcc -fsanitize=address,undefined, and the environment of a Python process
    that imports it (the sanitizer runtime preloaded, ``preload.py`` making it ``odradek._speedups``)."""
    gcc = _tool("gcc")
    libasan = subprocess.run([gcc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    assert os.path.isabs(libasan) and Path(libasan).exists(), f"gcc has no libasan ({libasan!r}): install libasan8"
    so = tmp_path_factory.mktemp("asan") / "_speedups.so"
    include = sysconfig.get_paths()["include"]
    build = subprocess.run([gcc, *SANITIZE, "-fsanitize=address,undefined", "-shared", "-fPIC", f"-I{include}",
                            str(ROOT / "src" / "odradek" / "_speedups.c"), "-o", str(so)],
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, f"building the extension failed:\n{build.stderr[-4000:]}"
    env = _env()
    env["LD_PRELOAD"] = libasan  # the sanitizer runtime must come first; Python itself is not built with it
    env["ASAN_OPTIONS"] += ":detect_leaks=0"  # the interpreter's own allocations live until exit
    # every Python object from malloc, not from pymalloc's arenas, which the sanitizer cannot see into: a read
    # past a small bytes object is then a read past its allocation (bytes keep one NUL byte past the end)
    env["PYTHONMALLOC"] = "malloc"
    env["ODRADEK_SPEEDUPS_SO"] = str(so)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(HERE), env.get("PYTHONPATH", "")])
    return so, env


@pytest.mark.timeout(600)
@pytest.mark.parametrize("target", ["arrow_records", "speedups_module"])
def test_extension_under_asan_ubsan(target: str, sanitized_extension: tuple[Path, dict[str, str]],
                                    tmp_path: Path) -> None:
    """A bounded, seeded mutation run of the decoders through their Python entry points: ``arrow_records``
    (the Spark source's reader) and ``speedups_module`` (every exported function, called directly)."""
    so, env = sanitized_extension
    cmd = [sys.executable, str(HERE / "mutate.py"), target, str(MUTATIONS), "1", str(CORPUS / target)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=540)
    report = _findings(tmp_path)
    assert proc.returncode == 0 and not report, (
        f"the sanitized extension failed (rc {proc.returncode}):\n{report}\n{proc.stderr[-6000:]}\n{proc.stdout[-2000:]}"
    )
    _no_sanitizer_report(proc.stderr)
    assert f"speedups: {so}" in proc.stdout, proc.stdout  # the sanitized build was the one imported


# runs pytest with the sanitized build imported first, and says which build the tests saw
_PYTEST_WITH_PRELOAD = (
    "import sys, preload, pytest; from odradek import _speedups; print('speedups:', _speedups.__file__, flush=True); "
    "sys.exit(pytest.main(sys.argv[1:]))"
)


@pytest.mark.timeout(600)
def test_unit_tests_under_asan_ubsan(sanitized_extension: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    """The unit tests of the extension (``UNIT_TESTS``) pass against the sanitized build, with no report."""
    so, env = sanitized_extension
    env = dict(env)
    # a test asks for an impossible bytearray and expects MemoryError, as from Python's own allocator: the
    # sanitizer's allocator must return NULL instead of reporting the size
    env["ASAN_OPTIONS"] += ":allocator_may_return_null=1"
    # --capture=sys: a sanitizer report goes to the real stderr (fd 2), not into a capture file lost on abort;
    # odradek is imported before pytest starts (preload), so its pytest plugin is not assertion-rewritten
    cmd = [sys.executable, "-c", _PYTEST_WITH_PRELOAD, "-q", "--capture=sys", "-p", "no:cacheprovider", "-p", "no:xdist",
           "-W", "ignore::pytest.PytestAssertRewriteWarning", "--rootdir", str(ROOT), *(str(ROOT / t) for t in UNIT_TESTS)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=tmp_path, env=env, timeout=540)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"the unit tests failed against the sanitized extension (rc {proc.returncode}):\n{out[-8000:]}"
    _no_sanitizer_report(out)
    assert f"speedups: {so}" in proc.stdout, proc.stdout[-3000:]
    assert " passed" in proc.stdout and " failed" not in proc.stdout, proc.stdout[-3000:]
