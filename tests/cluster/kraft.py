"""Controller-only KRaft quorums of ``odradek controller`` processes (process.roles=controller) for the tests:
each node's directory formatted by ``odradek storage format``, the quorum static (controller.quorum.voters)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from integration.broker import free_port
from kio.schema.describe_quorum.v2.request import PartitionData, TopicData
from kio.static.primitive import i8, i32

from odradek.client.wire import WireClient

HOST = "127.0.0.1"
# Kafka's election and fetch timeouts (1000 / 2000 ms): shorter ones (500 / 1000) made voters on a loaded
# two-core CI machine miss fetches and elect new leaders in the middle of a test
FAST = {"controller.quorum.election.timeout.ms": "1000", "controller.quorum.fetch.timeout.ms": "2000",
        "controller.quorum.election.backoff.max.ms": "1000", "controller.quorum.request.timeout.ms": "2000",
        "metadata.max.idle.interval.ms": "100"}


def run_odradek(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", *args], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL)


class Controller:
    def __init__(self, base: Path, node_id: int, port: int, voters: str, extra: dict[str, str]) -> None:
        self.node_id = node_id
        self.port = port
        self.dir = base / f"c{node_id}"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.data = self.dir / "data"
        self.config = self.dir / "controller.properties"
        props = {"process.roles": "controller", "node.id": str(node_id), "controller.quorum.voters": voters,
                 "controller.listener.names": "CONTROLLER", "listeners": f"CONTROLLER://{HOST}:{port}",
                 "listener.security.protocol.map": "CONTROLLER:PLAINTEXT", "metadata.log.dir": str(self.data),
                 "log.dirs": str(self.data), **extra}
        self.config.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
        self.log_path = self.dir / "controller.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def format(self, cluster_id: str) -> None:
        p = run_odradek("storage", "format", "-t", cluster_id, "-c", str(self.config))
        assert p.returncode == 0, p.stderr

    def start(self, timeout: float = 60.0) -> None:
        assert self.proc is None or self.proc.poll() is not None
        with open(self.log_path, "ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "odradek", "controller", "--config", str(self.config)],
                                         stdin=subprocess.DEVNULL, stdout=err, stderr=err, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"controller {self.node_id} exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                with socket.create_connection((HOST, self.port), timeout=0.5):
                    return
            except OSError:
                time.sleep(0.05)
        raise AssertionError(f"controller {self.node_id} did not listen within {timeout}s:\n{self.log_tail()}")

    def kill(self) -> None:
        """kill -9."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()

    def log_tail(self, n: int = 4000) -> str:
        return self.log_path.read_text(errors="replace")[-n:] if self.log_path.exists() else ""


class Quorum:
    def __init__(self, base: Path, n: int = 3, extra: dict[str, str] | None = None) -> None:
        ports = [free_port() for _ in range(n)]
        voters = ",".join(f"{i + 1}@{HOST}:{p}" for i, p in enumerate(ports))
        self.controllers = {i + 1: Controller(base, i + 1, p, voters, {**FAST, **(extra or {})})
                            for i, p in enumerate(ports)}
        p = run_odradek("storage", "random-uuid")
        assert p.returncode == 0, p.stderr
        self.cluster_id = p.stdout.strip()

    def start(self) -> Quorum:
        for c in self.controllers.values():
            c.format(self.cluster_id)
        for c in self.controllers.values():
            c.start()
        return self

    def stop(self) -> None:
        for c in self.controllers.values():
            c.stop()

    @property
    def bootstrap(self) -> str:
        return ",".join(c.address for c in self.controllers.values())


def describe_cluster(address: str) -> Any:
    with WireClient(address, timeout=5) as c:
        return c.request(60, 2, include_cluster_authorized_operations=False, endpoint_type=i8(2),
                         include_fenced_brokers=False)


def describe_quorum(address: str) -> Any:
    """DescribeQuorum v2's one partition, as ``address`` answers it."""
    with WireClient(address, timeout=5) as c:
        r = c.request(55, 2, topics=(TopicData(topic_name="__cluster_metadata",
                                                partitions=(PartitionData(partition_index=i32(0)),)),))
    return r.topics[0].partitions[0]
