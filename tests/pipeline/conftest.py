"""Fixtures for the pipeline tests: one local Spark (local[2]) for the whole test session, and one real
broker process (tests/integration/broker.py) shared by the pipeline tests.

Spark needs Java: when it is missing these tests fail (they never skip); scripts/setup.sh installs
openjdk-17-jre-headless.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from integration.broker import Broker, BrokerFactory
from waiting import wait_until


@pytest.fixture(scope="session")
def spark(pipeline_broker: Broker) -> Iterator[Any]:
    # depends on the broker so that Spark (and the consumers its Python workers pool) stops first
    from odradek.pipeline.spark import JavaMissing, build_session

    try:
        session = build_session("local[2]", "odradek-tests", {"spark.sql.shuffle.partitions": "2"},
                                log_level="ERROR")
    except JavaMissing as e:
        pytest.fail(str(e), pytrace=False)
    # py4j's callback server (foreachBatch sinks call back into this process) waits for connections
    # with select(), which cannot take a descriptor past 1,023: started now, while this worker's
    # descriptors are few, rather than at the first streaming query after other files ran here
    from pyspark.java_gateway import ensure_callback_server_started

    ensure_callback_server_started(session.sparkContext._gateway)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def pipeline_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    factory = BrokerFactory(tmp_path_factory.mktemp("pipeline-broker"))
    b = factory({"num.partitions": 3, "log.retention.check.interval.ms": 500})
    yield b
    factory.close()


@pytest.fixture
def new_topic(pipeline_broker: Broker) -> Callable[..., str]:
    """``new_topic(partitions=3, config=None)`` creates a uniquely named topic and returns its name."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": pipeline_broker.bootstrap})

    def make(partitions: int = 3, config: dict[str, str] | None = None, prefix: str = "t") -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:10]}"
        fut = admin.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name]
        fut.result(30)

        def visible() -> bool:
            md = admin.list_topics(name, timeout=5).topics.get(name)
            return md is not None and md.error is None and len(md.partitions) == partitions

        wait_until(visible, 10, f"topic {name} in metadata", interval=0.05)
        return name

    return make


@pytest.fixture
def checkpoint(tmp_path: Path) -> Path:
    return tmp_path / "checkpoint"
