"""Real ZooKeeper servers (Debian's ``zookeeper`` package) for development clusters and tests.

Each server runs ``QuorumPeerMain`` in its own JVM with its own directory (``<base>/zk<myid>``:
``conf/zoo.cfg``, ``conf/log4j.properties``, ``data/``, ``zookeeper.log``, ``stderr.log``), a
loopback client port and settings meant for development:
``forceSync=no``, small preallocation, no admin server, tickTime 500 ms. ``start`` waits until
the server actually serves.

Pitfalls this module works around:

1. The client port opens before the server is ready; a client connecting in that window loses a
   whole session timeout. ``wait_serving`` waits until the ``srvr`` four-letter command reports a
   ``Mode:`` line (``ruok`` answers ``imok`` even without a quorum).
2. Debian's environment file has no logging backend: ``slf4j-log4j12.jar`` and ``log4j-1.2.jar``
   go on the classpath (``JARS``), or the server logs nothing.
3. The admin server would grab port 8080 on every node: ``admin.enableServer=false``.
4. Session timeouts are clamped to 2–20 × tickTime; with tickTime 500 that is 1–10 s, so
   ``maxSessionTimeout=20000`` lets brokers keep Kafka's 18 s default.
5. A taken client port makes the JVM exit 1 with a BindException: ``wait_serving`` notices the
   exit and raises with the log's tail.

SASL (``sasl_users``): the server gets a JAAS file whose ``Server`` section is ZooKeeper's
DigestLoginModule with one ``user_<name>="<password>"`` option per user, named by the
``java.security.auth.login.config`` system property, and ``authProvider.sasl`` =
SASLAuthenticationProvider in zoo.cfg (ZooKeeper's "SASL authentication" admin settings). A
client that authenticates as ``kafka`` is the ACL identity ``sasl:kafka``. With
``require_sasl`` the server also refuses every client that has not authenticated
(``enforce.auth.enabled=true``, ``enforce.auth.schemes=sasl``: ZooKeeper 3.7+); without it,
unauthenticated clients get in and meet the znodes' ACLs.

Clients of these servers have pitfalls of their own: give kazoo
``connection_retry=dict(max_tries=-1, max_delay=1)``, treat SUSPENDED as "stop trusting
leadership", and use ``*_async(...).get(timeout=...)`` since blocking calls hang without quorum.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

JARS = ["/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar"]
INSTALL_HINT = "install Debian's zookeeper package (apt-get install zookeeper; scripts/setup.sh does)"


class ZooKeeperError(RuntimeError):
    """ZooKeeper cannot be started or did not start serving."""


def _ephemeral_range() -> tuple[int, int]:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


class _PortPicker:
    """Ports for servers started later by another process (ZooKeeper, brokers, HTTP listeners).

    A port from ``bind(("127.0.0.1", 0))`` comes from the kernel's ephemeral range, which outgoing
    connections also draw their local ports from, and another process asking the same way may be handed it
    again before the server binds it: with several test workers starting brokers at once both happen.
    Ports are therefore taken below the ephemeral range, walking a slice of it in order (a port is handed out
    again only after the whole slice), one slice per pytest-xdist worker (``PYTEST_XDIST_WORKER=gwN``), the
    start within the slice random so that processes sharing a slice rarely meet; each port is checked free
    with a bind. Where the range below the ephemeral one is too small, the kernel's choice is used."""

    FIRST = 10000
    SLICES = 8

    def __init__(self) -> None:
        self._next: int | None = None
        self._range: tuple[int, int] | None = None

    def _slice(self) -> tuple[int, int] | None:
        lo, _ = _ephemeral_range()
        span = lo - self.FIRST
        if span < self.SLICES * 200:
            return None
        width = span // self.SLICES
        worker = os.environ.get("PYTEST_XDIST_WORKER", "")
        index = int(worker[2:]) % self.SLICES if worker.startswith("gw") and worker[2:].isdigit() else \
            self.SLICES - 1
        start = self.FIRST + index * width
        return start, start + width

    def pick(self) -> int:
        if self._range is None:
            self._range = self._slice() or (0, 0)
            if self._range != (0, 0):
                self._next = random.SystemRandom().randrange(*self._range)  # not the seeded global one
        start, end = self._range
        if start == end:
            return _kernel_port()
        assert self._next is not None
        for _ in range(end - start):
            port = self._next
            self._next = start + (port + 1 - start) % (end - start)
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    continue
            return port
        return _kernel_port()


def _kernel_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_picker = _PortPicker()


def free_port() -> int:
    """A free loopback port for a server another process will bind (see _PortPicker)."""
    return _picker.pick()


def four_letter(port: int, cmd: str, timeout: float = 1.0) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(cmd.encode())
        out = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return out.decode(errors="replace")
            out += chunk


def find_java() -> str:
    """The java binary, after checking that ZooKeeper's jars are installed (ZooKeeperError if not)."""
    java = shutil.which("java")
    if java is None:
        raise ZooKeeperError(f"java not found: {INSTALL_HINT}")
    for jar in JARS:
        if not Path(jar).exists():
            raise ZooKeeperError(f"{jar} missing: {INSTALL_HINT}")
    return java


def tied_to_parent(cmd: list[str]) -> tuple[list[str], Callable[[], None] | None]:
    """``(command, preexec_fn)`` for a child that gets SIGTERM when the process that started it dies
    (Linux's PR_SET_PDEATHSIG). util-linux's ``setpriv --pdeathsig`` sets it and execs the command, so
    no Python runs between fork and exec: a ``preexec_fn`` does, and in a process with other threads
    (client libraries, a test's fixtures) its import and dlopen could deadlock the child before it ever
    ran (seen: a broker restarted from the verification runner's nemesis thread hung silently). The
    ``preexec_fn`` is the fallback where setpriv is missing."""
    setpriv = shutil.which("setpriv") if sys.platform.startswith("linux") else None
    if setpriv is not None:
        return [setpriv, "--pdeathsig", "TERM", "--", *cmd], None
    return cmd, die_with_parent


def die_with_parent() -> None:  # pragma: no cover - runs in the forked child
    """``preexec_fn``: on Linux, the child gets SIGTERM when the process that started it dies."""
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class ZooKeeperServer:
    def __init__(self, base: Path, myid: int, client_port: int, peers: list[tuple[int, int, int]] | None = None,
                 *, sasl_users: Mapping[str, str] | None = None, require_sasl: bool = False) -> None:
        self.dir = base / f"zk{myid}"
        self.myid = myid
        self.port = client_port
        self.peers = peers or []
        self.sasl_users = dict(sasl_users or {})
        self.require_sasl = require_sasl
        self.proc: subprocess.Popen[bytes] | None = None
        # the address clients connect to: loopback, or 0.0.0.0 for brokers in network namespaces
        self.client_address = "127.0.0.1"

    def _write_config(self) -> Path:
        conf = self.dir / "conf"
        data = self.dir / "data"
        conf.mkdir(parents=True, exist_ok=True)
        data.mkdir(parents=True, exist_ok=True)
        lines = [
            "tickTime=500", "initLimit=10", "syncLimit=5", f"dataDir={data}", f"clientPort={self.port}",
            f"clientPortAddress={self.client_address}", "admin.enableServer=false", "forceSync=no", "preAllocSize=4096",
            "4lw.commands.whitelist=srvr,stat,ruok,mntr,conf,cons", "maxSessionTimeout=20000",
        ]
        if self.sasl_users:
            lines.append("authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider")
            if self.require_sasl:
                lines += ["enforce.auth.enabled=true", "enforce.auth.schemes=sasl"]
            users = " ".join(f'user_{u}="{p}"' for u, p in sorted(self.sasl_users.items()))
            (conf / "jaas.conf").write_text(
                f"Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required {users};\n}};\n")
        for myid, quorum, election in self.peers:
            lines.append(f"server.{myid}=127.0.0.1:{quorum}:{election}")
        if self.peers:
            (data / "myid").write_text(f"{self.myid}\n")
        (conf / "zoo.cfg").write_text("\n".join(lines) + "\n")
        (conf / "log4j.properties").write_text(
            "log4j.rootLogger=WARN, FILE\nlog4j.appender.FILE=org.apache.log4j.FileAppender\n"
            f"log4j.appender.FILE.File={self.dir}/zookeeper.log\n"
            "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.FILE.layout.ConversionPattern=%d %p %c{1} - %m%n\n"
        )
        return conf

    def start(self, wait: bool = True, timeout: float = 30.0, *, new_session: bool = False,
              tie_to_parent: bool = False) -> ZooKeeperServer:
        """Start the JVM (and with ``wait``, wait until it serves).

        ``new_session`` keeps a terminal's Ctrl-C away from the JVM (the caller stops it, after
        the brokers); ``tie_to_parent`` makes it get SIGTERM should the caller die (Linux).
        """
        java = find_java()
        conf = self._write_config()
        cmd = [
            java, "-Xms16m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
            f"-Dlog4j.configuration=file:{conf}/log4j.properties",
            *([f"-Djava.security.auth.login.config={conf}/jaas.conf"] if self.sasl_users else []), "-cp", ":".join([str(conf), *JARS]),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(conf / "zoo.cfg"),
        ]
        preexec = None
        if tie_to_parent:
            cmd, preexec = tied_to_parent(cmd)
        with open(self.dir / "stderr.log", "wb") as err:
            self.proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err,
                start_new_session=new_session, preexec_fn=preexec,
            )
        if wait:
            self.wait_serving(timeout)
        return self

    def wait_serving(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise ZooKeeperError(f"ZooKeeper exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                if "Mode:" in four_letter(self.port, "srvr"):
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise ZooKeeperError(f"ZooKeeper on {self.port} not serving after {timeout}s: {self.log_tail()}")

    def log_tail(self) -> str:
        out = []
        for name in ("zookeeper.log", "stderr.log"):
            p = self.dir / name
            if p.exists():
                out.append(p.read_text(errors="replace")[-2000:])
        return "\n".join(out)

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(sig)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    @property
    def log_path(self) -> Path:
        return self.dir / "zookeeper.log"

    @property
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"


class Ensemble:
    def __init__(self, base: Path, size: int = 1, *, sasl_users: Mapping[str, str] | None = None,
                 require_sasl: bool = False) -> None:
        peers = [(i + 1, free_port(), free_port()) for i in range(size)] if size > 1 else []
        self.servers = [ZooKeeperServer(base, i + 1, free_port(), peers, sasl_users=sasl_users,
                                        require_sasl=require_sasl) for i in range(size)]

    def start(self) -> Ensemble:
        for s in self.servers:
            s.start(wait=False)
        for s in self.servers:
            s.wait_serving()
        return self

    def stop(self) -> None:
        for s in self.servers:
            s.stop()

    @property
    def connect(self) -> str:
        return ",".join(s.connect for s in self.servers)
