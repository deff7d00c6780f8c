"""kcat (Debian's build, linked against an old librdkafka) lists metadata, produces and consumes."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from .broker import Broker
from .clients import create_topic, unique, watermarks

KCAT = shutil.which("kcat") or shutil.which("kafkacat")
pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat not installed")


def kcat(*args: str, input: bytes | None = None, timeout: float = 30) -> str:
    assert KCAT is not None
    proc = subprocess.run([KCAT, *args], input=input, capture_output=True, timeout=timeout)
    assert proc.returncode == 0, f"kcat {' '.join(args)} exited {proc.returncode}:\n{proc.stderr.decode()}"
    return proc.stdout.decode()


@pytest.mark.timeout(60)
def test_metadata(shared_broker: Broker) -> None:
    topic = unique("kcat-md")
    create_topic(shared_broker.bootstrap, topic, 3)
    out = kcat("-b", shared_broker.bootstrap, "-L", "-t", topic, "-m", "15")
    assert re.search(rf"^\s*broker 0 at {re.escape(shared_broker.bootstrap)}", out, re.M), out
    assert f'topic "{topic}" with 3 partitions:' in out, out
    for p in range(3):
        assert re.search(rf"^\s*partition {p}, leader 0, replicas: 0, isrs: 0\s*$", out, re.M), out
    # full listing (no -t) names the topic too
    assert f'topic "{topic}" with 3 partitions:' in kcat("-b", shared_broker.bootstrap, "-L", "-m", "15")


@pytest.mark.timeout(60)
def test_produce_consume_lines(shared_broker: Broker) -> None:
    topic = unique("kcat-lines")
    create_topic(shared_broker.bootstrap, topic, 1)
    lines = [f"line {i} " + "x" * (i % 50) for i in range(500)]
    kcat("-b", shared_broker.bootstrap, "-P", "-t", topic, "-p", "0", input="\n".join(lines).encode() + b"\n")
    assert watermarks(shared_broker.bootstrap, topic, 0) == (0, len(lines))
    out = kcat("-b", shared_broker.bootstrap, "-C", "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q",
               "-f", "%o|%s\n")
    got = out.splitlines()
    assert got == [f"{i}|{line}" for i, line in enumerate(lines)]


@pytest.mark.timeout(60)
def test_keyed_all_partitions(shared_broker: Broker) -> None:
    topic = unique("kcat-keyed")
    create_topic(shared_broker.bootstrap, topic, 3)
    lines = [f"k{i}:v{i}" for i in range(900)]
    kcat("-b", shared_broker.bootstrap, "-P", "-t", topic, "-K", ":", input="\n".join(lines).encode() + b"\n")
    out = kcat("-b", shared_broker.bootstrap, "-C", "-t", topic, "-o", "beginning", "-e", "-q",
               "-f", "%p|%o|%k|%s\n")
    rows = [line.split("|") for line in out.splitlines()]
    assert sorted((k, v) for _, _, k, v in rows) == sorted(tuple(line.split(":")) for line in lines)
    per: dict[str, list[tuple[int, int]]] = {}
    for p, o, k, _v in rows:
        per.setdefault(p, []).append((int(o), int(k[1:])))
    assert len(per) == 3, f"keys landed on partitions {sorted(per)}"
    for p, items in per.items():
        # offsets contiguous from 0, and the producer's order kept within the partition
        assert [o for o, _ in items] == list(range(len(items))), f"partition {p}"
        assert [i for _, i in items] == sorted(i for _, i in items), f"partition {p} order"
        assert watermarks(shared_broker.bootstrap, topic, int(p)) == (0, len(items))
