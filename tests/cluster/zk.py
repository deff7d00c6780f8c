"""Real ZooKeeper servers (Debian's `zookeeper` package) for the cluster tests.

Each server runs QuorumPeerMain in its own JVM with a temporary dataDir, a free loopback
client port and test-friendly settings (notes/zookeeper.md): forceSync=no, small
preallocation, no admin server, tickTime 500 ms (session timeouts 1–10 s). ``start``
waits until the `srvr` four-letter command reports a Mode line (the client port opens
before the server can serve).
"""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

JARS = ["/usr/share/java/zookeeper.jar", "/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def four_letter(port: int, cmd: str, timeout: float = 1.0) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(cmd.encode())
        out = b""
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return out.decode(errors="replace")
            out += chunk


class ZooKeeperServer:
    def __init__(self, base: Path, myid: int, client_port: int, peers: list[tuple[int, int, int]] | None = None) -> None:
        self.dir = base / f"zk{myid}"
        self.myid = myid
        self.port = client_port
        self.peers = peers or []
        self.proc: subprocess.Popen[bytes] | None = None

    def _write_config(self) -> Path:
        conf = self.dir / "conf"
        data = self.dir / "data"
        conf.mkdir(parents=True, exist_ok=True)
        data.mkdir(parents=True, exist_ok=True)
        lines = [
            "tickTime=500", "initLimit=10", "syncLimit=5", f"dataDir={data}", f"clientPort={self.port}",
            "clientPortAddress=127.0.0.1", "admin.enableServer=false", "forceSync=no", "preAllocSize=4096",
            "4lw.commands.whitelist=srvr,stat,ruok,mntr,conf,cons", "maxSessionTimeout=20000",
        ]
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

    def start(self, wait: bool = True, timeout: float = 30.0) -> ZooKeeperServer:
        java = shutil.which("java")
        if java is None:
            raise RuntimeError("java not found: install Debian's zookeeper package (scripts/setup.sh does)")
        for jar in JARS:
            if not Path(jar).exists():
                raise RuntimeError(f"{jar} missing: install Debian's zookeeper package (scripts/setup.sh does)")
        conf = self._write_config()
        cmd = [
            java, "-Xms16m", "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData",
            f"-Dlog4j.configuration=file:{conf}/log4j.properties", "-cp", ":".join([str(conf), *JARS]),
            "org.apache.zookeeper.server.quorum.QuorumPeerMain", str(conf / "zoo.cfg"),
        ]
        with open(self.dir / "stderr.log", "wb") as err:
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err)
        if wait:
            self.wait_serving(timeout)
        return self

    def wait_serving(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise RuntimeError(f"ZooKeeper exited with {self.proc.returncode}: {self.log_tail()}")
            try:
                if "Mode:" in four_letter(self.port, "srvr"):
                    return
            except OSError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"ZooKeeper on {self.port} not serving after {timeout}s: {self.log_tail()}")

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
    def connect(self) -> str:
        return f"127.0.0.1:{self.port}"


class Ensemble:
    def __init__(self, base: Path, size: int = 1) -> None:
        peers = [(i + 1, free_port(), free_port()) for i in range(size)] if size > 1 else []
        self.servers = [ZooKeeperServer(base, i + 1, free_port(), peers) for i in range(size)]

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
