"""Topic creation for the embedded brokers and clusters, through confluent-kafka's AdminClient
(CreateTopics to the controller, then Metadata until every partition has a leader)."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

_quiet = logging.getLogger("odradek.embedded.admin")


class TopicAdmin:
    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka.admin import AdminClient

        # librdkafka logs every refused connection while a broker is down: to Python logging instead
        conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "logger": _quiet}
        self.client: Any = AdminClient(conf)

    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: Mapping[str, object] | None = None, timeout: float = 30.0) -> None:
        from confluent_kafka.admin import NewTopic

        topic = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                         config={k: _value(v) for k, v in (config or {}).items()})
        self.client.create_topics([topic], operation_timeout=timeout, request_timeout=timeout)[name].result(timeout)
        self.wait_leaders(name, partitions, timeout)

    def wait_leaders(self, name: str, partitions: int, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            meta = self.client.list_topics(name, timeout=max(1.0, deadline - time.monotonic()))
            t = meta.topics.get(name)
            if t is not None and t.error is None and len(t.partitions) >= partitions and all(
                p.leader >= 0 and p.error is None for p in t.partitions.values()
            ):
                return
            if time.monotonic() >= deadline:
                raise TimeoutError(f"topic {name}: not every partition has a leader after {timeout:.0f}s")
            time.sleep(0.05)


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def config_strings(config: Mapping[str, object] | None) -> dict[str, str]:
    """Kafka config values as the broker reads them: booleans as ``true``/``false``, others by ``str``."""
    return {str(k): _value(v) for k, v in (config or {}).items()}
