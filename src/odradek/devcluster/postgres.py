"""A real PostgreSQL server (Debian's ``postgresql`` package) for change data capture tests and demos.

``PostgresServer`` initdb's a cluster of its own in a fresh directory, starts ``postgres`` on a free
loopback port with logical decoding on (``wal_level=logical``, replication slots and WAL senders for
Debezium's connector and its pgoutput plugin), waits until it answers a query, and stops it with a fast
shutdown (SIGINT: open sessions are ended, as ``pg_ctl stop -m fast``; a connector's replication
connection would hold a "smart" shutdown forever).

Pitfalls this module works around:

1. PostgreSQL refuses to run as root. Run as root (CI, this machine), the cluster's directory is made
   with ``tempfile.mkdtemp`` outside the caller's (pytest's temporary directories are 0700 and root's),
   given to the ``postgres`` system user the package creates, and ``initdb`` and ``postgres`` run as that
   user through util-linux's ``setpriv --reuid --regid --init-groups``. ``stop(remove=True)`` deletes
   the directory.
2. The server is a child of the caller: ``setpriv --pdeathsig INT`` sends it SIGINT (a fast shutdown,
   not SIGTERM's "smart" one that waits for clients) when the caller dies, so a killed test leaves no
   PostgreSQL behind. setpriv applies the parent-death signal after changing the user ids, so it
   survives the change (the kernel clears it on a change of credentials).
3. Debian installs the server binaries under ``/usr/lib/postgresql/<major>/bin``, not on ``PATH``:
   ``bin_dir`` takes the newest major version there (or ``pg_config --bindir``).
4. No Unix socket (``unix_socket_directories=''``): clients use TCP on 127.0.0.1 with trust
   authentication, replication connections included (initdb ``--auth=trust`` writes those lines).
5. ``fsync=off``: a development cluster on a shared machine; a crash of PostgreSQL itself loses nothing
   (the WAL is written, only not forced to disk), a crash of the machine might.

SQL is run with the server's own ``psql`` (``psql``, ``query``): no Python driver is needed.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from .zookeeper import free_port

INSTALL_HINT = "install Debian's postgresql package (apt-get install postgresql; scripts/setup.sh does)"
SUPERUSER = "postgres"
RUN_AS = "postgres"  # the system user of Debian's package, used when the caller is root
HOST = "127.0.0.1"

# the settings of a development cluster for logical decoding (Debezium's PostgreSQL connector: wal_level
# logical, a slot and a WAL sender per connector, more for tests that restart connectors)
DEFAULT_SETTINGS: dict[str, str] = {
    "wal_level": "logical",
    "max_replication_slots": "10",
    "max_wal_senders": "10",
    "max_connections": "40",
    "shared_buffers": "32MB",
    "fsync": "off",
    "full_page_writes": "off",
    "synchronous_commit": "on",
    "unix_socket_directories": "",
    "log_min_messages": "warning",
    "logging_collector": "off",
}


class PostgresError(RuntimeError):
    """PostgreSQL cannot be started, did not start serving, or a statement failed."""


def bin_dir() -> Path:
    """The directory of ``initdb``, ``postgres`` and ``psql`` (PostgresError when the package is missing)."""
    root = Path("/usr/lib/postgresql")
    versions = sorted((p for p in root.glob("*") if (p / "bin" / "postgres").is_file()),
                      key=lambda p: int(p.name) if p.name.isdigit() else 0) if root.is_dir() else []
    if versions:
        return versions[-1] / "bin"
    pg_config = shutil.which("pg_config")
    if pg_config is not None:
        out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True).stdout.strip()
        if out and (Path(out) / "postgres").is_file():
            return Path(out)
    raise PostgresError(f"PostgreSQL's server binaries not found: {INSTALL_HINT}")


def _as_user() -> tuple[list[str], int | None, int | None]:
    """The setpriv prefix that runs a command as ``RUN_AS`` when the caller is root, and that user's ids."""
    if os.geteuid() != 0:
        return [], None, None
    try:
        pw = pwd.getpwnam(RUN_AS)
    except KeyError:
        raise PostgresError(f"running as root needs the {RUN_AS!r} system user: {INSTALL_HINT}") from None
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise PostgresError("running PostgreSQL as root needs util-linux's setpriv (apt-get install util-linux)")
    return [setpriv, f"--reuid={pw.pw_uid}", f"--regid={pw.pw_gid}", "--init-groups"], pw.pw_uid, pw.pw_gid


class PostgresServer:
    """One PostgreSQL cluster of its own: ``start()`` (initdb on the first start), ``stop()``, ``psql``.

    ``base`` holds the cluster when the caller is not root; as root the cluster lives in a directory of
    its own owned by ``postgres`` (``self.dir``), since PostgreSQL needs every parent to be searchable."""

    def __init__(self, base: Path | None = None, port: int | None = None,
                 settings: Mapping[str, str] | None = None) -> None:
        self._prefix, uid, gid = _as_user()
        if uid is not None or base is None:
            self.dir = Path(tempfile.mkdtemp(prefix="odradek-pg-"))
            if uid is not None and gid is not None:
                os.chown(self.dir, uid, gid)
        else:
            self.dir = Path(base) / "postgres"
            self.dir.mkdir(parents=True, exist_ok=True)
        self.data = self.dir / "data"
        self.log_path = self.dir / "postgres.log"
        self.port = port if port is not None else free_port()
        self.settings = {**DEFAULT_SETTINGS, **(settings or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.bin = bin_dir()

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def dsn(self, database: str = SUPERUSER) -> str:
        return f"postgresql://{SUPERUSER}@{HOST}:{self.port}/{database}"

    def _initdb(self) -> None:
        if (self.data / "PG_VERSION").is_file():
            return
        proc = subprocess.run(
            [*self._prefix, str(self.bin / "initdb"), "-D", str(self.data), "-U", SUPERUSER, "--auth=trust",
             "--encoding=UTF8", "--locale=C", "--no-sync"],
            stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
        if proc.returncode != 0:
            raise PostgresError(f"initdb failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-1500:]}")

    def start(self, timeout: float = 60.0) -> PostgresServer:
        """initdb (first start only), then ``postgres -D data`` tied to this process; waits until it answers."""
        if self.running:
            return self
        self._initdb()
        args = [str(self.bin / "postgres"), "-D", str(self.data), "-p", str(self.port),
                "-c", f"listen_addresses={HOST}"]
        for k, v in self.settings.items():
            args += ["-c", f"{k}={v}"]
        # one setpriv both changes the user and sets the parent-death signal, after the change (pitfall 2)
        setpriv = self._prefix[0] if self._prefix else shutil.which("setpriv")
        cmd = [setpriv, "--pdeathsig", "INT", *self._prefix[1:], "--", *args] if setpriv is not None else args
        # the log file is opened by the caller (root may write it anywhere); postgres writes to its stderr
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        self.wait_serving(timeout)
        return self

    def wait_serving(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise PostgresError(f"postgres exited with {self.proc.returncode}: {self.log_tail()}")
            proc = subprocess.run(self._psql_args("postgres", "-c", "SELECT 1"), capture_output=True, text=True,
                                  stdin=subprocess.DEVNULL, timeout=30)
            if proc.returncode == 0:
                return
            last = proc.stderr.strip()
            time.sleep(0.2)
        raise PostgresError(f"PostgreSQL on {self.port} not serving after {timeout}s: {last}\n{self.log_tail()}")

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except FileNotFoundError:
            return ""

    def stop(self, timeout: float = 30.0, remove: bool = False) -> None:
        """A fast shutdown (SIGINT), SIGKILL after ``timeout``; with ``remove``, the cluster's directory goes."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if remove:
            shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------------ SQL through psql

    def _psql_args(self, database: str, *args: str) -> list[str]:
        return [str(self.bin / "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", HOST, "-p", str(self.port),
                "-U", SUPERUSER, "-d", database, *args]

    def psql(self, sql: str, database: str = SUPERUSER, timeout: float = 300.0,
             extra: Sequence[str] = ()) -> str:
        """Run ``sql`` (any number of statements, ``BEGIN`` / ``COMMIT`` included) and return psql's stdout;
        PostgresError with psql's message when a statement fails (ON_ERROR_STOP)."""
        proc = subprocess.run(self._psql_args(database, *extra), input=sql, capture_output=True, text=True,
                              timeout=timeout, env={**os.environ, "PGCONNECT_TIMEOUT": "10"})
        if proc.returncode != 0:
            raise PostgresError(f"psql failed ({proc.returncode}): {proc.stderr.strip()[-1500:]}")
        return proc.stdout

    def query(self, sql: str, database: str = SUPERUSER) -> list[list[str]]:
        """The rows of one query, each a list of column texts (unaligned, tab-separated; NULL as '')."""
        out = self.psql(sql, database, extra=("-A", "-t", "-F", "\t"))
        return [line.split("\t") for line in out.splitlines() if line]

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.stop(remove=True)
