"""A peer's jars fetched by Maven into its ignored target folder once, and swapped in whole.

Every peer here is a set of jars from Maven Central that nothing commits: Kafka 4.4 and the Java harness,
Spark's JVM Kafka connector and Kafka's metadata shell (peers/kafka_peer.py), Kafka Connect and Debezium's
PostgreSQL connector (peers/connect_peer.py). Each is a ``MavenFetch``: the poms to run Maven on (``mvn
dependency:copy-dependencies``, the harness also ``package``), the target folder they fill, the files a
complete fetch has there, and for some a stamp (``fetched.sha256``: the hash of the poms and sources the
jars were fetched for). ``MavenFetch.fetch`` is the one way they are fetched:

* skipped when done: every required file is there and the stamp matches; then nothing runs or is written;
* one fetch at a time per target: concurrent callers (test workers, a second checkout sharing the cache)
  wait on an flock of ``target/.fetch.lock``, then look again;
* Maven writes into a new folder, ``target/.fetch-<random>/new`` (``-Dpeer.target``), never into the
  folder in use, so a JVM started from ``target/libs/*`` keeps its classpath while a fetch runs, and a
  failed fetch leaves the old jars as they were;
* each top-level entry Maven made (``libs``, ``plugins``, the harness jar, ...) then replaces its namesake
  in the target in one step: a file by ``rename``, a folder by ``renameat2(RENAME_EXCHANGE)`` where the
  file system has it (Linux 3.15+: ext4, xfs, btrfs, tmpfs, overlayfs), else by two renames (the old one
  aside, the new one in: a gap of microseconds, not the minutes of a download). A JVM already running keeps
  the jars it opened (Linux frees a removed file only when it is closed); the old folders are removed after
  the swap;
* the stamp goes last: removed before the first swap and written (by rename) after the last, so a fetch
  cut short never leaves a mix of old and new jars that claims to be complete.

A ``Runner`` runs Maven (``run_maven``: ``mvn`` with stdin closed and its output captured); tests pass
a fake one that writes the files Maven would.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import shlex
import shutil
import subprocess
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

COPY_DEPENDENCIES = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"
STAMP_NAME = "fetched.sha256"
LOCK_NAME = ".fetch.lock"
STAGING_PREFIX = ".fetch-"
# KAFKA_PEER_MAVEN_ARGS: more arguments for Maven (``-s settings.xml`` naming a mirror or a proxy, ``-o`` to
# stay offline), for every peer's fetch
MAVEN_ARGS_ENV = "KAFKA_PEER_MAVEN_ARGS"

Runner = Callable[[Sequence[str]], subprocess.CompletedProcess[str]]


class PeerError(RuntimeError):
    """A one-line reason a peer cannot be fetched or started."""


def find_java() -> str:
    java = shutil.which("java")
    if java is None:
        raise PeerError("java not found: install OpenJDK 17 (Debian: apt-get install openjdk-17-jdk-headless)")
    return java


def run_maven(args: Sequence[str]) -> subprocess.CompletedProcess[str]:
    """``mvn ARGS``, stdin closed and output captured; ``PeerError`` when Maven or Java is missing."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise PeerError("mvn not found: install Maven (Debian: apt-get install maven), which fetches the peers' "
                        "jars from Maven Central")
    find_java()
    return subprocess.run([mvn, *args], stdin=subprocess.DEVNULL, capture_output=True, text=True)


def maven_reason(output: str) -> str:
    """The first [ERROR] line of Maven's output, without its colour codes and boilerplate."""
    for line in output.splitlines():
        clean = line.replace("\x1b[1;31m", "").replace("\x1b[m", "").replace("\x1b[0m", "").strip()
        if clean.startswith("[ERROR]") and len(clean) > 8 and "COMPILATION ERROR" not in clean:
            return clean[8:].strip()[:400]
    tail = [ln.strip() for ln in output.splitlines() if ln.strip()]
    return tail[-1][:400] if tail else "no output"


@dataclass(frozen=True)
class MavenRun:
    """One Maven run of a fetch: its pom, what it fetches (for messages) and its goals."""

    pom: Path
    what: str
    goals: tuple[str, ...] = (COPY_DEPENDENCIES,)

    def args(self, target: Path, quiet: bool) -> list[str]:
        return ["-B", *(["-q"] if quiet else []), "-f", str(self.pom), f"-Dpeer.target={target}",
                *shlex.split(os.environ.get(MAVEN_ARGS_ENV, "")), *self.goals]


@dataclass(frozen=True)
class MavenFetch:
    """The jars of one peer: ``runs`` fill ``target``; ``required`` (paths relative to it) are the files a
    complete fetch has; ``stamp``, when given, computes the hash ``target/fetched.sha256`` must hold."""

    target: Path
    runs: tuple[MavenRun, ...]
    required: tuple[str, ...]
    stamp: Callable[[], str] | None = None

    @property
    def stamp_path(self) -> Path:
        return self.target / STAMP_NAME

    def missing(self, root: Path | None = None) -> list[str]:
        base = self.target if root is None else root
        return [r for r in self.required if not (base / r).is_file()]

    def done(self) -> bool:
        """True when the required files are in place (and the stamp matches the current sources)."""
        if self.missing():
            return False
        if self.stamp is None:
            return True
        try:
            return self.stamp_path.read_text().strip() == self.stamp()
        except FileNotFoundError:
            return False

    def fetch(self, quiet: bool = True, runner: Runner = run_maven) -> bool:
        """Fetch unless done (see the module's docstring); True when Maven ran. Concurrent callers wait for
        the first and then return False. ``PeerError`` when Maven fails: the target is then unchanged."""
        if self.done():
            return False
        self.target.mkdir(parents=True, exist_ok=True)
        with open(self.target / LOCK_NAME, "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if self.done():
                return False
            for leftover in self.target.glob(STAGING_PREFIX + "*"):  # of a fetch killed midway
                shutil.rmtree(leftover, ignore_errors=True)
            staging = self.target / f"{STAGING_PREFIX}{uuid.uuid4().hex[:12]}"
            try:
                self._fetch_into(staging, quiet, runner)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
        return True

    def _fetch_into(self, staging: Path, quiet: bool, runner: Runner) -> None:
        stamp = self.stamp() if self.stamp is not None else None
        new, aside = staging / "new", staging / "old"
        new.mkdir(parents=True)
        aside.mkdir()
        for run in self.runs:
            proc = runner(run.args(new, quiet))
            if proc.returncode != 0:
                raise PeerError(f"Maven could not fetch {run.what} (mvn exit {proc.returncode}): "
                                f"{maven_reason(proc.stdout + proc.stderr)}")
        missing = self.missing(new)
        if missing:
            poms = ", ".join(str(run.pom) for run in self.runs)
            raise PeerError(f"Maven fetched {', '.join(run.what for run in self.runs)} without "
                            f"{', '.join(missing)}: see {poms}")
        with contextlib.suppress(FileNotFoundError):
            self.stamp_path.unlink()
        for entry in sorted(new.iterdir()):
            swap_in(entry, self.target / entry.name, aside / entry.name)
        if stamp is not None:
            written = staging / STAMP_NAME
            written.write_text(stamp + "\n")
            os.replace(written, self.stamp_path)


def swap_in(new: Path, dest: Path, aside: Path) -> None:
    """Put ``new`` at ``dest`` in one step where it can be; what was at ``dest`` ends at ``new`` (after an
    exchange) or at ``aside`` (folders the file system cannot exchange), for the caller to remove."""
    dest_is_dir = dest.is_dir() and not dest.is_symlink()
    if not (dest_is_dir or (new.is_dir() and os.path.lexists(dest))):
        os.replace(new, dest)  # a file, or nothing there yet: rename replaces it at once
        return
    if dest_is_dir and new.is_dir() and exchange(new, dest):
        return
    os.rename(dest, aside)
    os.rename(new, dest)


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def exchange(a: Path, b: Path) -> bool:
    """Swap the two paths in one step (Linux ``renameat2(RENAME_EXCHANGE)``); False where the C library or
    the file system lacks it."""
    try:
        renameat2 = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    renameat2.restype = ctypes.c_int
    if renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))
