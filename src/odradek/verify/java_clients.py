"""The Java client (kafka-clients 4.4) as clients of a verification run, beside the Python ones.

Each Java client is one JVM running the harness's ``dev.odradek.peer.VerifyWorkload``
(peers/kafka/src/main/java): an idempotent producer (acks=all, one record at a time) and a
read_committed consumer assigned every partition from offset 0, recording their operations in the shape
of odradek.verify.history to a file of their own, ``history-java-<n>.jsonl``. The runner merges those
files with the Python clients' by time (odradek.verify.history.merge). A program stops when its stdin
closes, so one whose runner died does not outlive it.

So that the checker can tell them apart, Java client ``n`` (from 0) numbers its processes from
``PROCESS_BASE * (n + 1)`` and draws each key's values from ``VALUE_BASE * (n + 1) + 1`` on, ranges the
Python workload (processes and values counted from 0 and 1) does not reach in a run.

The classpath is ``$ODRADEK_VERIFY_JAVA_CLASSPATH`` when set, else what ``peers/kafka_peer.py
classpath`` prints from this source checkout (which fetches Kafka's jars and builds the harness once;
``KAFKA_PEER_TARGET`` names another target folder).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

PROCESS_BASE = 1_000_000
VALUE_BASE = 1_000_000_000
MAIN_CLASS = "dev.odradek.peer.VerifyWorkload"
CLASSPATH_ENV = "ODRADEK_VERIFY_JAVA_CLASSPATH"
# a client JVM runs for the whole run: a small heap, C1 alone and the serial collector keep it light
JVM_OPTS = ("-Xmx256M", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Djava.awt.headless=true")


class JavaClientError(RuntimeError):
    """Java, the jars or the harness cannot be found."""


def classpath() -> str:
    cp = os.environ.get(CLASSPATH_ENV)
    if cp:
        return cp
    script = Path(__file__).resolve().parents[3] / "peers" / "kafka_peer.py"
    if not script.is_file():
        raise JavaClientError(f"no {script}: set {CLASSPATH_ENV} to the Java client's classpath and the harness jar")
    r = subprocess.run([sys.executable, str(script), "classpath"], capture_output=True, text=True,
                       timeout=1800, stdin=subprocess.DEVNULL)
    lines = r.stdout.strip().splitlines()
    if r.returncode != 0 or not lines:
        raise JavaClientError(f"{script} classpath failed: {r.stderr.strip()[-2000:]}")
    return lines[-1]


def history_path(out: Path, n: int) -> Path:
    return out / f"history-java-{n}.jsonl"


@dataclass
class JavaClients:
    """``count`` Java client programs against ``bootstrap``, writing into ``out``."""

    out: Path
    bootstrap: str
    topic: str
    partitions: int
    count: int
    seed: int
    op_timeout_ms: int = 10_000
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    killed: list[str] = field(default_factory=list)

    @property
    def histories(self) -> list[Path]:
        return [history_path(self.out, n) for n in range(self.count)]

    def start(self) -> None:
        java = shutil.which("java")
        if java is None:
            raise JavaClientError("no java on PATH")
        cp = classpath()
        for n in range(self.count):
            args = [self.bootstrap, self.topic, str(self.partitions), str(history_path(self.out, n)),
                    str(PROCESS_BASE * (n + 1)), str(VALUE_BASE * (n + 1)), str(self.seed * 1000 + n),
                    str(self.op_timeout_ms)]
            with open(self.out / f"java-client-{n}.log", "ab") as log:  # the child keeps its own descriptor
                self.procs.append(subprocess.Popen([java, *JVM_OPTS, "-cp", cp, MAIN_CLASS, *args],
                                                   stdin=subprocess.PIPE, stdout=log, stderr=log))

    def stop(self) -> None:
        """Close each client's stdin: it stops sending, reads on to the end and exits."""
        for p in self.procs:
            if p.stdin is not None and not p.stdin.closed:
                with contextlib.suppress(OSError):  # a client already gone
                    p.stdin.close()

    def finish(self, timeout_s: float = 60.0) -> list[str]:
        """:meth:`stop`, then wait: a client still running after ``timeout_s`` is killed, its open
        operations left as they are (read as ``info``), and noted in :attr:`killed`. Returns the
        clients that failed (a non-zero exit: an exception a client did not expect)."""
        failed: list[str] = []
        self.stop()
        for n, p in enumerate(self.procs):
            try:
                code = p.wait(timeout_s)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
                self.killed.append(f"Java client {n} did not stop within {timeout_s:.0f} s: killed")
                continue
            if code != 0:
                failed.append(f"Java client {n} exited with {code} (see java-client-{n}.log)")
        return failed

    def kill(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
