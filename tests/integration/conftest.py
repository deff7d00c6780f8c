"""Fixtures that run a real broker process (see broker.py for the command and its env-var override).

- ``broker``: a fresh broker for one test (stopped with SIGTERM afterwards, exit code 0 asserted).
- ``make_broker(**overrides)``: a factory for brokers with extra ``--override`` settings; underscores in
  keyword names become dots (``message_max_bytes=20000``), or pass ``overrides={"a.b": "c"}``.
- ``shared_broker``: one broker per test module, with the module's ``SHARED_BROKER_OVERRIDES`` dict.

When a test fails, the tail of each of its brokers' stderr is attached to the report.
"""

from __future__ import annotations

import resource
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .broker import Broker, BrokerFactory


def _raise_fd_limit() -> None:
    # 1,000 simultaneous connections need more than the common soft limit of 1024 descriptors; brokers
    # started from here inherit the raised limit.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 16384 if hard == resource.RLIM_INFINITY else min(hard, 16384)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


_raise_fd_limit()


@pytest.fixture
def make_broker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerFactory]:
    factory = BrokerFactory(tmp_path)
    request.node._odradek_brokers = factory.brokers
    yield factory
    factory.close()


@pytest.fixture
def broker(make_broker: BrokerFactory) -> Broker:
    return make_broker()


@pytest.fixture(scope="module")
def shared_broker(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Iterator[Broker]:
    overrides = getattr(request.module, "SHARED_BROKER_OVERRIDES", {})
    factory = BrokerFactory(tmp_path_factory.mktemp("shared"))
    b = factory(overrides)
    yield b
    factory.close()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome: Any = yield
    report = outcome.get_result()
    if not report.failed:
        return
    brokers: list[Broker] = list(getattr(item, "_odradek_brokers", []))
    for value in getattr(item, "funcargs", {}).values():
        if isinstance(value, Broker) and value not in brokers:
            brokers.append(value)
    for b in brokers:
        report.sections.append((f"broker {b.name} ({b.bootstrap}) stderr", b.log_tail(80)))


def pytest_configure(config: pytest.Config) -> None:
    # kafka-python loads its protocol schemas through a deprecated importlib.resources API
    config.addinivalue_line("filterwarnings", r"ignore:(read_text|open_text) is deprecated:DeprecationWarning")
