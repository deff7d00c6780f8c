"""Kafka 4.4's own tools and Java client as judges of Odradek.

``kafka_jars`` fetches Kafka's jars from Maven Central once (peers/kafka_peer.py); a machine without Maven,
Java or Maven Central fails these tests, never skips them (.ci/run installs Maven and Java). ``kafka`` runs
one of Kafka's tools (``kafka("kafka-topics", "--list", ...)``) as bin/kafka-topics.sh would and returns its
completed process; ``odradek`` is one broker for the module, with an authorizer-free PLAINTEXT listener.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from integration.broker import Broker, BrokerFactory

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "peers"))

import kafka_peer  # noqa: E402

Tool = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture(scope="session")
def kafka_jars() -> Path:
    try:
        return kafka_peer.fetch()
    except kafka_peer.PeerError as e:
        pytest.fail(f"Kafka {kafka_peer.KAFKA_VERSION} is needed for these tests: {e}")


def run_kafka_tool(name: str, *args: str, ok: bool = True, timeout: float = 120.0,
                   input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Kafka's ``bin/<name>.sh args``; with ``ok`` its exit code must be 0."""
    proc = kafka_peer.run_tool(name, *args, timeout=timeout, input=input)
    if ok:
        assert proc.returncode == 0, f"{name} {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


@pytest.fixture(scope="session")
def kafka(kafka_jars: Path) -> Tool:
    return run_kafka_tool


@pytest.fixture(scope="module")
def odradek(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Broker]:
    overrides = {"group.initial.rebalance.delay.ms": "0", "num.partitions": "1",
                 **getattr(request.module, "ODRADEK_OVERRIDES", {})}
    factory = BrokerFactory(tmp_path_factory.mktemp("odradek"))
    yield factory(overrides)
    factory.close()
