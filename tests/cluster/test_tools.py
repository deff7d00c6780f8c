"""The cluster tools end to end: ``odradek dev-cluster`` starts ZooKeeper and three brokers, the
``topics --describe``, ``elect-leaders`` and ``reassign --generate`` commands work against it,
and SIGTERM stops everything it started with exit code 0."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from waiting import wait_until

from .zk import free_port

START_TIMEOUT = 240.0  # 2 cores shared with other suites: ZooKeeper's JVM and three brokers
STOP_TIMEOUT = 60.0
CLI_TIMEOUT = 120.0


def consecutive_free_ports(n: int) -> int:
    for _ in range(200):
        base = free_port()
        if base + n > 65535:
            continue
        ok = True
        for port in range(base, base + n):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", port))
                except OSError:
                    ok = False
                    break
        if ok:
            return base
    raise AssertionError(f"no {n} consecutive free ports")


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def port_open(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1.0):
            return True
    except OSError:
        return False


class DevClusterProcess:
    """``python -m odradek dev-cluster`` with its stdout read line by line on a thread."""

    def __init__(self, tmp: Path, brokers: int, base_port: int, http_base_port: int) -> None:
        self.data_dir = tmp / "dev"
        self.base_port = base_port
        self.http_base_port = http_base_port
        self.brokers = brokers
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.output: list[str] = []
        self.pids: dict[str, int] = {}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "odradek", "dev-cluster", "--brokers", str(brokers), "--base-port",
             str(base_port), "--http-base-port", str(http_base_port), "--data-dir", str(self.data_dir)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))
        self.lines.put(None)

    def wait_for_line(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {prefix!r} line after {timeout}s:\n" + self.diagnostics())
            try:
                line = self.lines.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if line is None:
                raise AssertionError(f"dev-cluster exited ({self.proc.wait()}) before {prefix!r}:\n"
                                     + self.diagnostics())
            self.output.append(line)
            m = re.match(r"(ZooKeeper|Broker \d+): .*\(pid (\d+)", line)
            if m:
                self.pids[m.group(1)] = int(m.group(2))
            if line.startswith(prefix):
                return line

    def drain(self) -> None:
        while True:
            try:
                line = self.lines.get_nowait()
            except queue.Empty:
                return
            if line is None:
                return
            self.output.append(line)

    def diagnostics(self) -> str:
        self.drain()
        text = "\n".join(self.output)
        for log in sorted(self.data_dir.glob("broker*/broker.log")):
            text += f"\n--- {log} (tail) ---\n" + "\n".join(log.read_text(errors="replace").splitlines()[-30:])
        return text

    def cleanup(self) -> None:
        """After a failure: stop dev-cluster, then anything it started that is still there."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        for pid in self.pids.values():  # only the pids this dev-cluster printed
            if pid_alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@pytest.fixture
def dev_cluster(tmp_path: Path) -> Iterator[DevClusterProcess]:
    base = consecutive_free_ports(6)
    dc = DevClusterProcess(tmp_path, 3, base, base + 3)
    try:
        yield dc
    finally:
        dc.cleanup()


def odradek(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", *argv], capture_output=True, text=True,
                          timeout=CLI_TIMEOUT, stdin=subprocess.DEVNULL)


def test_dev_cluster_topics_elect_leaders_and_stop(dev_cluster: DevClusterProcess) -> None:
    line = dev_cluster.wait_for_line("Bootstrap servers:", START_TIMEOUT)
    bootstrap = line.split(":", 1)[1].strip()
    ports = [dev_cluster.base_port + i for i in range(3)]
    assert bootstrap == ",".join(f"127.0.0.1:{p}" for p in ports)
    assert {f"Broker {b}" for b in (1, 2, 3)} <= set(dev_cluster.pids), dev_cluster.output
    assert "ZooKeeper" in dev_cluster.pids, dev_cluster.output
    for b in (1, 2, 3):
        assert (dev_cluster.data_dir / f"broker{b}" / "broker.log").exists()

    # a topic with replication factor 3, fully in sync
    topic = "tools"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)],
                        request_timeout=60)[topic].result(90)

    def led_and_in_sync() -> bool:
        md = admin.list_topics(timeout=30).topics.get(topic)
        return md is not None and md.error is None and len(md.partitions) == 3 and all(
            p.leader in (1, 2, 3) and sorted(p.isrs) == [1, 2, 3] for p in md.partitions.values())

    wait_until(led_and_in_sync, 90, f"the partitions of {topic} to be led and in sync", interval=0.5,
               detail=lambda: admin.list_topics(timeout=30).topics.get(topic))

    # each broker serves its own /metrics (the HTTP port printed with it) and hosts a replica of each partition
    # once the controller's LeaderAndIsr reached it (a new topic's ISR is all replicas from the start)
    def partition_counts() -> list[float]:
        counts = []
        for b in (1, 2, 3):
            url = f"http://127.0.0.1:{dev_cluster.http_base_port + b - 1}/metrics"
            assert url.removesuffix("metrics") in next(x for x in dev_cluster.output if x.startswith(f"Broker {b}:"))
            with urllib.request.urlopen(url, timeout=30) as resp:
                text = resp.read().decode()
            m = re.search(r"^kafka_server_replicamanager_partitioncount (\S+)$", text, re.M)
            assert m, text[:2000]
            counts.append(float(m.group(1)))
        return counts

    wait_until(lambda: all(c >= 3 for c in partition_counts()), 60, "every broker to report its three replicas",
               interval=0.5, detail=partition_counts)

    # topics --describe: Kafka's lines
    res = odradek("topics", "--bootstrap-server", bootstrap, "--describe", "--topic", topic)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith(f"Topic: {topic}\tTopicId: ") and "\tPartitionCount: 3\tReplicationFactor: 3\t" in lines[0]
    seen = set()
    for text in lines[1:]:
        m = re.fullmatch(rf"\tTopic: {topic}\tPartition: (\d)\tLeader: (\d)\tReplicas: ([\d,]+)\tIsr: ([\d,]+)", text)
        assert m, repr(text)
        partition, leader = int(m.group(1)), int(m.group(2))
        replicas = [int(b) for b in m.group(3).split(",")]
        isr = [int(b) for b in m.group(4).split(",")]
        assert sorted(replicas) == [1, 2, 3] and sorted(isr) == [1, 2, 3]
        assert leader in replicas
        seen.add(partition)
    assert seen == {0, 1, 2}

    # elect-leaders: the preferred leaders lead already (or are elected now)
    res = odradek("elect-leaders", "--bootstrap-server", bootstrap, "--election-type", "preferred",
                  "--all-topic-partitions")
    assert res.returncode == 0, res.stdout + res.stderr
    named = " ".join(res.stdout.splitlines())
    assert all(f"{topic}-{p}" in named for p in range(3)), res.stdout
    assert "Valid replica already elected for partitions" in res.stdout \
        or "Successfully completed leader election (PREFERRED) for partitions" in res.stdout, res.stdout
    res = odradek("elect-leaders", "--bootstrap-server", bootstrap, "--election-type", "preferred",
                  "--topic", topic, "--partition", "7")
    assert res.returncode == 1
    assert f"Error completing leader election (PREFERRED) for partition: {topic}-7:" in res.stdout

    # reassign --generate against the live cluster: a valid proposal over brokers 2,3
    move = dev_cluster.data_dir / "move.json"
    move.write_text(json.dumps({"version": 1, "topics": [{"topic": topic}]}))
    res = odradek("reassign", "--bootstrap-server", bootstrap, "--generate", "--topics-to-move-json-file",
                  str(move), "--broker-list", "2,3")
    assert res.returncode == 1 and "Replication factor: 3 larger than available brokers: 2." in res.stderr
    res = odradek("reassign", "--bootstrap-server", bootstrap, "--generate", "--topics-to-move-json-file",
                  str(move), "--broker-list", "1,2,3")
    assert res.returncode == 0, res.stderr
    out = res.stdout.splitlines()
    assert out[0] == "Current partition replica assignment" and out[3] == "Proposed partition reassignment configuration"
    proposal = json.loads(out[4])
    assert sorted(p["partition"] for p in proposal["partitions"]) == [0, 1, 2]
    assert all(sorted(p["replicas"]) == [1, 2, 3] for p in proposal["partitions"])

    # SIGTERM: brokers stop (controlled shutdown), then ZooKeeper; exit 0
    dev_cluster.proc.send_signal(signal.SIGTERM)
    try:
        rc = dev_cluster.proc.wait(STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"dev-cluster still running {STOP_TIMEOUT}s after SIGTERM:\n"
                             + dev_cluster.diagnostics()) from None
    dev_cluster._reader.join(10)
    assert rc == 0, dev_cluster.diagnostics()
    dev_cluster.drain()
    assert "Stopped." in dev_cluster.output, dev_cluster.output
    wait_until(lambda: not any(pid_alive(pid) for pid in dev_cluster.pids.values()), 10,
               "dev-cluster's processes to be gone after it exited",
               detail=lambda: {name: pid for name, pid in dev_cluster.pids.items() if pid_alive(pid)})
    assert not any(port_open(p) for p in ports)
