"""The hostile-input suite: each test is an attack (or a careless client) against a real broker process.

Every broker started here runs under an address-space cap (``BROKER_MEMORY_LIMIT``), so a decompression
bomb or a frame that claims gigabytes makes the broker fail (and the test with it) instead of taking the
test machine down. A test asserts the broker refused the input the way Kafka does and went on serving.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from integration.broker import Broker, BrokerFactory

BROKER_MEMORY_LIMIT = 2 << 30  # RLIMIT_AS of each broker process: 2 GiB


@pytest.fixture
def make_broker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerFactory]:
    factory = BrokerFactory(tmp_path, memory_limit=BROKER_MEMORY_LIMIT)
    request.node._odradek_brokers = factory.brokers
    yield factory
    factory.close()


@pytest.fixture
def broker(make_broker: BrokerFactory) -> Broker:
    return make_broker()
