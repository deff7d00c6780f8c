"""``odradek configs --log-dir DIR``: the embedded broker's SCRAM users written before its first
start (Kafka's ``kafka-storage format --add-scram`` in KRaft mode); the broker then authenticates
them on a SASL_PLAINTEXT listener and refuses a wrong password."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from confluent_kafka import KafkaError, Producer

from .broker import Broker


def _configs(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "odradek", "configs", *args], capture_output=True, text=True,
                          timeout=60)


def _produce(broker: Broker, password: str) -> list[KafkaError | None]:
    out: list[KafkaError | None] = []
    p = Producer({"bootstrap.servers": broker.bootstrap, "security.protocol": "SASL_PLAINTEXT",
                  "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": "alice", "sasl.password": password,
                  "message.timeout.ms": 8000})
    p.produce("scram-cli", b"v", on_delivery=lambda err, m: out.append(err))
    p.flush(15)
    return out


def test_configs_log_dir_bootstraps_scram_users(tmp_path: Path) -> None:
    b = Broker(tmp_path / "b", {"sasl.enabled.mechanisms": "SCRAM-SHA-256"})
    b.overrides["listeners"] = f"SASL_PLAINTEXT://127.0.0.1:{b.port}"
    r = _configs("--log-dir", str(b.logdir), "--alter", "--entity-type", "users", "--entity-name", "alice",
                 "--add-config", "SCRAM-SHA-256=[iterations=4096,password=alice-secret],"
                                 "SCRAM-SHA-512=[password=other]")
    assert r.returncode == 0, r.stderr
    r = _configs("--log-dir", str(b.logdir), "--alter", "--entity-type", "users", "--entity-name", "alice",
                 "--delete-config", "SCRAM-SHA-512")
    assert r.returncode == 0, r.stderr
    r = _configs("--log-dir", str(b.logdir), "--describe", "--entity-type", "users")
    assert r.stdout.strip() == "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=4096"
    r = _configs("--log-dir", str(b.logdir), "--alter", "--entity-type", "users", "--entity-name", "bob",
                 "--add-config", "SCRAM-SHA-256=[iterations=100,password=x]")
    assert r.returncode == 1 and "iterations must be between 4096 and 16384" in r.stderr
    b.start()
    try:
        assert _produce(b, "alice-secret") == [None]
        errs = _produce(b, "wrong")
        assert len(errs) == 1 and errs[0] is not None
    finally:
        b.stop()
