"""Change data capture against Odradek: PostgreSQL (Debian's package), Kafka Connect 4.4 in distributed mode
and Debezium's PostgreSQL connector (Maven Central, peers/connect_peer.py).

A machine without PostgreSQL, Maven, Java or Maven Central fails these tests, never skips them (.ci/run
installs them through scripts/setup.sh). ``connect_jars`` fetches Connect and Debezium once; ``postgres`` is
a fresh PostgreSQL cluster for one test, with logical decoding on.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from integration.broker import BrokerFactory

from odradek.devcluster.postgres import PostgresError, PostgresServer

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "peers"))

import connect_peer  # noqa: E402


@pytest.fixture(scope="session")
def connect_jars() -> Path:
    try:
        return connect_peer.fetch()
    except connect_peer.PeerError as e:
        pytest.fail(f"Kafka Connect {connect_peer.CONNECT_VERSION} and Debezium are needed for these tests: {e}")


@pytest.fixture
def postgres() -> Iterator[PostgresServer]:
    try:
        server = PostgresServer().start()
    except PostgresError as e:
        pytest.fail(f"PostgreSQL is needed for these tests: {e}")
    yield server
    server.stop(remove=True)


@pytest.fixture
def make_broker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerFactory]:
    """Odradek brokers for one test (tests/integration/broker.py), their logs attached to a failure's report."""
    factory = BrokerFactory(tmp_path)
    request.node._odradek_brokers = factory.brokers
    yield factory
    factory.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A failed test using a module's shared setup (``shop`` in test_debezium_ods.py) gets the tails of its
    broker's and Connect worker's logs: they live in the module's directory, not the test's."""
    outcome: Any = yield
    report = outcome.get_result()
    shared = getattr(item, "funcargs", {}).get("shop")
    if not report.failed or shared is None:
        return
    report.sections.append((f"broker {shared.broker.name} stderr", shared.broker.log_tail(80)))
    log: Path = shared.worker.log_path
    lines = log.read_text(errors="replace").splitlines() if log.exists() else []
    report.sections.append((f"Connect worker log {log} (last 80 lines)", "\n".join(lines[-80:])))
