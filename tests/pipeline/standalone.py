"""A Spark standalone cluster on this machine (master + workers) started with pyspark's own daemon
script, ``$SPARK_HOME/sbin/spark-daemon.sh`` (the pip package ships it, not start-master.sh /
start-worker.sh, which are thin wrappers around it), for tests. Stopped with the same script, by the
pid files it wrote into the cluster's own directory."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

MASTER = "org.apache.spark.deploy.master.Master"
WORKER = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def _free_ports(n: int) -> list[int]:
    """``n`` distinct free ports, all held open while they are picked: ports picked one at a time may
    repeat (a worker's web UI then took the master's before the master's JVM bound it, the master's UI
    moved to the next port and its /json/ here answered the worker's HTML page)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(n)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]


class StandaloneCluster:
    def __init__(self, root: Path, workers: int = 2, cores: int = 1, memory: str = "1g") -> None:
        self.root = root
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.port, self.ui_port, *self.worker_ui_ports = _free_ports(2 + workers)
        self.url = f"spark://127.0.0.1:{self.port}"
        self.env = dict(os.environ)
        src = str(Path(__file__).resolve().parents[2] / "src")
        self.env.update({
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOG_DIR": str(root / "logs"),
            "SPARK_PID_DIR": str(root / "pids"),
            "SPARK_IDENT_STRING": f"odradek-test-{os.getpid()}",
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_MASTER_HOST": "127.0.0.1",
            "PYSPARK_PYTHON": sys.executable,
            # the master's and workers' JVMs start with the tests' drivers' options (tests/conftest.py)
            "SPARK_DAEMON_JAVA_OPTS": os.environ.get("SPARK_SUBMIT_OPTS", ""),
            # executors' Python workers import odradek from this checkout
            "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p),
        })
        self.started: list[tuple[str, int]] = []

    def _daemon(self, action: str, cls: str, instance: int, *args: str) -> None:
        script = spark_home() / "sbin" / "spark-daemon.sh"
        out = subprocess.run(["bash", str(script), action, cls, str(instance), *args], env=self.env,
                             capture_output=True, text=True, timeout=120)
        if out.returncode != 0:
            raise RuntimeError(f"spark-daemon.sh {action} {cls} {instance}: {out.stdout}{out.stderr}")

    def start(self) -> None:
        (self.root / "logs").mkdir(parents=True, exist_ok=True)
        (self.root / "pids").mkdir(parents=True, exist_ok=True)
        self._daemon("start", MASTER, 1, "--host", "127.0.0.1", "--port", str(self.port),
                     "--webui-port", str(self.ui_port))
        self.started.append((MASTER, 1))
        for i in range(1, self.workers + 1):
            work = self.root / f"worker-{i}"
            work.mkdir(exist_ok=True)
            self._daemon("start", WORKER, i, "--host", "127.0.0.1", "--webui-port", str(self.worker_ui_ports[i - 1]),
                         "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work), self.url)
            self.started.append((WORKER, i))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if len(self.alive_workers()) >= self.workers:
                return
            time.sleep(0.5)
        raise RuntimeError(f"{self.workers} workers did not register with {self.url}: {self.logs()}")

    def status(self) -> dict[str, object]:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.ui_port}/json/", timeout=5) as r:
            data: dict[str, object] = json.load(r)
            return data

    def alive_workers(self) -> list[dict[str, object]]:
        try:
            workers = self.status().get("workers", [])
        except (OSError, ValueError):  # not up yet: the master's UI answered /json/ with its HTML page once on CI
            return []
        assert isinstance(workers, list)
        return [w for w in workers if isinstance(w, dict) and w.get("state") == "ALIVE"]

    def logs(self) -> str:
        parts = []
        for f in sorted((self.root / "logs").glob("*.out")):
            parts.append(f"--- {f.name}\n{f.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        for cls, instance in reversed(self.started):
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self._daemon("stop", cls, instance)
        self.started.clear()
