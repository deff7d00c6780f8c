"""odradek.EmbeddedBroker in both modes, driven by confluent-kafka."""

from __future__ import annotations

import os
import signal
import socket
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, ConfigResource

import odradek
from odradek.config import ConfigError
from odradek.embedded.probe import api_versions_ok


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int = 1) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True})
    for i, v in enumerate(values):
        p.produce(topic, value=v, partition=i % partitions)
    assert p.flush(30) == 0


def consume_all(bootstrap: str, topic: str, n: int, timeout: float = 30.0) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}-{time.monotonic_ns()}",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while len(got) < n and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.value())
    finally:
        c.close()
    return got


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_context_manager_serves_and_removes_its_temp_dir(mode: str) -> None:
    with odradek.EmbeddedBroker(mode=mode) as b:  # type: ignore[arg-type]
        assert b.running
        host, port = b.bootstrap_servers.split(":")
        assert host == "127.0.0.1" and int(port) > 0
        assert b.startup_seconds is not None and b.startup_seconds < 30
        b.create_topic("events", partitions=3)
        values = [b"v%d" % i for i in range(30)]
        produce(b.bootstrap_servers, "events", values, partitions=3)
        assert sorted(consume_all(b.bootstrap_servers, "events", 30)) == sorted(values)
        data_dir = b.data_dir
        assert (data_dir / "data" / "events-2").is_dir()
        # /metrics on a free port of its own (http.listeners), counting what was just produced
        with urllib.request.urlopen(b.metrics_url, timeout=10) as r:
            text = r.read().decode()
        assert 'kafka_server_brokertopicmetrics_messagesin_total{topic="events"} 30.0' in text
    assert not b.running
    assert not api_versions_ok("127.0.0.1", int(port), timeout=0.5)
    assert not data_dir.exists()


def test_thread_mode_kill_keeps_acknowledged_writes_and_recovers_as_after_a_crash(tmp_path: Path) -> None:
    with odradek.EmbeddedBroker(data_dir=tmp_path) as b:
        marker = tmp_path / "data" / ".kafka_cleanshutdown"
        b.create_topic("t", partitions=2)
        values = [b"x%d" % i for i in range(200)]
        produce(b.bootstrap_servers, "t", values, partitions=2)
        port = b.port
        b.kill()
        assert not b.running
        assert not api_versions_ok("127.0.0.1", port, timeout=0.5)
        assert not marker.exists(), "an abrupt stop must not leave the clean-shutdown marker"
        b.start()
        assert b.port == port
        assert sorted(consume_all(b.bootstrap_servers, "t", 200)) == sorted(values)
        b.restart()  # a clean stop in between writes the marker
        assert b.running
    assert marker.exists()


def test_process_mode_kill_is_sigkill_and_restart_keeps_data(tmp_path: Path) -> None:
    with odradek.EmbeddedBroker(mode="process", data_dir=tmp_path, config={"num.partitions": 2}) as b:
        pid = b.pid
        assert pid is not None and pid != os.getpid()
        b.create_topic("t", partitions=2)
        produce(b.bootstrap_servers, "t", [b"a", b"b", b"c", b"d"], partitions=2)
        proc = b._process
        assert proc is not None and proc.proc is not None
        b.kill()
        assert proc.proc.returncode == -signal.SIGKILL
        assert not (tmp_path / "data" / ".kafka_cleanshutdown").exists()
        b.start()
        assert b.pid != pid
        assert sorted(consume_all(b.bootstrap_servers, "t", 4)) == [b"a", b"b", b"c", b"d"]
        assert b.log_path is not None and "started broker" in b.log_path.read_text()
    assert proc.proc.returncode == 0  # clean exit on leaving the block


def test_create_topic_applies_its_config() -> None:
    with odradek.EmbeddedBroker() as b:
        b.create_topic("compacted", partitions=1, config={"cleanup.policy": "compact", "segment.bytes": 1 << 20})
        admin = AdminClient({"bootstrap.servers": b.bootstrap_servers})
        res = ConfigResource("topic", "compacted")
        configs = admin.describe_configs([res])[res].result(30)
        assert configs["cleanup.policy"].value == "compact"
        assert configs["segment.bytes"].value == str(1 << 20)


def test_two_thread_mode_brokers_in_one_process_are_independent() -> None:
    with odradek.EmbeddedBroker() as a, odradek.EmbeddedBroker() as b:
        assert a.port != b.port
        a.create_topic("only-a")
        produce(a.bootstrap_servers, "only-a", [b"1"])
        b.kill()
        assert a.running and consume_all(a.bootstrap_servers, "only-a", 1) == [b"1"]
        meta = AdminClient({"bootstrap.servers": a.bootstrap_servers}).list_topics(timeout=10)
        assert "only-a" in meta.topics


def test_bad_config_fails_the_start_and_leaves_no_thread() -> None:
    b = odradek.EmbeddedBroker(config={"num.partitions": "many"})
    with pytest.raises(ConfigError):
        b.start()
    assert not b.running
    b.close()
    with pytest.raises(ValueError, match="listeners"):
        odradek.EmbeddedBroker(config={"listeners": "PLAINTEXT://:9092"})


def test_process_mode_start_failure_reports_the_log() -> None:
    b = odradek.EmbeddedBroker(mode="process", config={"num.partitions": "many"})
    try:
        with pytest.raises(odradek.EmbeddedBrokerError, match="exited with code 2"):
            b.start()
    finally:
        b.close()


def test_thread_mode_start_on_a_taken_port_fails_and_can_be_retried(tmp_path: Path) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        b = odradek.EmbeddedBroker(port=port, data_dir=tmp_path)
        with pytest.raises(OSError):
            b.start()
        assert not b.running
    b.start()  # the same broker, its logs and port released by the failed start
    try:
        assert b.port == port and api_versions_ok("127.0.0.1", port)
        b.create_topic("after-retry")
    finally:
        b.close()


def test_thread_mode_refuses_to_fake_a_kill_of_a_cluster_mode_broker() -> None:
    b = odradek.EmbeddedBroker(config={"zookeeper.connect": "127.0.0.1:1/x", "broker.id": 1})
    try:
        with pytest.raises(odradek.EmbeddedBrokerError, match="mode='process'"):
            b.kill()
    finally:
        b.close()


def test_metrics_listen_before_the_first_kafka_request_is_answered(monkeypatch: pytest.MonkeyPatch) -> None:
    """A client that saw the broker answer finds http.listeners bound: while /metrics is being bound, the
    Kafka listener takes connections into its backlog but answers none (a readiness probe that went on to
    /metrics at once was refused now and then)."""
    import asyncio

    from odradek.devcluster.zookeeper import free_port
    from odradek.server import http_listeners

    real = http_listeners.start_http
    port = free_port()
    answered_during: list[bool] = []

    async def watched(*args: object, **kwargs: object) -> object:
        loop = asyncio.get_running_loop()
        answered_during.append(await loop.run_in_executor(None, api_versions_ok, "127.0.0.1", port, 1.0))
        return await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(http_listeners, "start_http", watched)
    with odradek.EmbeddedBroker(port=port) as b:
        assert answered_during == [False]
        assert b.http_port
        with socket.create_connection(("127.0.0.1", b.http_port), timeout=5):
            pass
