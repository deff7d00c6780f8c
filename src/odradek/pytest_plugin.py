"""pytest fixtures for testing Kafka applications against Odradek (entry point ``odradek`` in the
``pytest11`` group: installing the package enables them; ``-p no:odradek`` disables them).

Fixtures:

- ``kafka_broker`` (session): an :class:`~odradek.embedded.EmbeddedBroker` on a free loopback port,
  data under pytest's temporary directory. ``.bootstrap_servers``, ``.create_topic(name,
  partitions=1, config=None)``, ``.restart()``, ``.kill()``, ``.start()``.
- ``kafka_topic`` (function): a new topic for each test (its name); starts ``kafka_broker`` again
  should an earlier test have left it killed or stopped. ``@pytest.mark.odradek_topic(partitions=3,
  config={...})`` sets what it is created with.
- ``kafka_cluster`` (session): an :class:`~odradek.embedded.EmbeddedCluster` of
  ``odradek_cluster_size`` brokers and Debian's ZooKeeper (an error when it is not installed).
  ``.kill(broker_id)``, ``.start(broker_id)``, ``.leader(topic, partition)``, ``.create_topic(...)``.
- ``kafka_broker_factory`` (function): ``kafka_broker_factory(config=None, mode=None)`` makes
  more brokers, closed when the test ends.

ini options (pytest.ini, or ``[tool.pytest.ini_options]`` in pyproject.toml):

- ``odradek_broker_config``: broker settings, ``key=value`` lines (several per line allowed),
  Kafka's names; they also go to every broker of ``kafka_cluster``.
- ``odradek_broker_mode``: ``thread`` (default: the broker runs in the test process, started in
  well under a second) or ``process`` (a child process: ``kill()`` is SIGKILL).
- ``odradek_cluster_size``: brokers in ``kafka_cluster`` (default 3).

Nothing is started, and nothing but pytest imported, until a test asks for a fixture.

pytest rewrites the asserts of every top-level package of a distribution that has a ``pytest11``
entry point, so installing this plugin would have every ``odradek`` module (the broker's own
invariant checks included) compiled through pytest's assertion rewriter in every test session:
~0.3 s more per session with bytecode writing off, and other code than the one that ships. Loading
the plugin takes ``odradek`` off the rewriter's list again (:func:`_keep_odradek_unrewritten`);
this module and ``odradek/__init__.py``, imported before that, hold no asserts.
"""

from __future__ import annotations

import re
import sys
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from odradek.clock import Clock
    from odradek.embedded import EmbeddedBroker, EmbeddedCluster

MODES = ("thread", "process")


def _keep_odradek_unrewritten() -> None:
    for finder in sys.meta_path:
        must = getattr(finder, "_must_rewrite", None)  # _pytest.assertion.rewrite.AssertionRewritingHook
        if isinstance(must, set):
            must.discard("odradek")


_keep_odradek_unrewritten()


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addini("odradek_broker_config", type="linelist", default=[],
                  help="odradek: broker settings for kafka_broker and kafka_cluster, key=value lines")
    parser.addini("odradek_broker_mode", default="thread",
                  help="odradek: kafka_broker runs in a thread of the test process (thread) or a child process (process)")
    parser.addini("odradek_cluster_size", default="3", help="odradek: number of brokers in kafka_cluster")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "odradek_topic(partitions=1, config=None): how kafka_topic creates the topic")


def parse_broker_config(lines: list[str]) -> dict[str, str]:
    """``key=value`` words, several per line allowed; ``#`` starts a comment."""
    out: dict[str, str] = {}
    for line in lines:
        for word in line.split("#", 1)[0].split():
            key, sep, value = word.partition("=")
            if not sep or not key:
                raise pytest.UsageError(f"odradek_broker_config: expected key=value, got {word!r}")
            out[key] = value
    return out


def _broker_config(config: pytest.Config) -> dict[str, str]:
    return parse_broker_config(list(config.getini("odradek_broker_config")))


def _mode(config: pytest.Config) -> Any:
    mode = str(config.getini("odradek_broker_mode")).strip() or "thread"
    if mode not in MODES:
        raise pytest.UsageError(f"odradek_broker_mode must be one of {MODES}, not {mode!r}")
    return mode


@pytest.fixture(scope="session")
def kafka_broker(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedBroker]:
    from odradek.embedded import EmbeddedBroker

    broker = EmbeddedBroker(_broker_config(request.config), mode=_mode(request.config),
                            data_dir=tmp_path_factory.mktemp("odradek-broker"))
    broker.start()
    try:
        yield broker
    finally:
        broker.close()


def topic_name(nodeid: str) -> str:
    """A legal, unique topic name ([a-zA-Z0-9._-], at most 249 characters) naming the test."""
    stem = re.sub(r"[^a-zA-Z0-9._-]+", "-", nodeid.rsplit("/", 1)[-1]).strip("-.")
    return f"{stem[:200]}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def kafka_topic(request: pytest.FixtureRequest, kafka_broker: EmbeddedBroker) -> str:
    if not kafka_broker.running:  # an earlier test killed or stopped it
        kafka_broker.start()
    marker = request.node.get_closest_marker("odradek_topic")
    kwargs: dict[str, Any] = dict(marker.kwargs) if marker is not None else {}
    return kafka_broker.create_topic(topic_name(request.node.nodeid), **kwargs)


@pytest.fixture(scope="session")
def kafka_cluster(request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbeddedCluster]:
    from odradek.embedded import EmbeddedCluster

    try:
        size = int(str(request.config.getini("odradek_cluster_size")))
    except ValueError:
        raise pytest.UsageError("odradek_cluster_size must be a number") from None
    cluster = EmbeddedCluster(size, _broker_config(request.config), data_dir=tmp_path_factory.mktemp("odradek-cluster"))
    cluster.start_all()
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.fixture
def kafka_broker_factory(request: pytest.FixtureRequest,
                         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., EmbeddedBroker]]:
    from odradek.embedded import EmbeddedBroker

    made: list[EmbeddedBroker] = []

    def make(config: dict[str, object] | None = None, mode: str | None = None,
             clock: Clock | None = None) -> EmbeddedBroker:
        merged: dict[str, object] = {**_broker_config(request.config), **(config or {})}
        b = EmbeddedBroker(merged, mode=mode or ("thread" if clock is not None else _mode(request.config)),  # type: ignore[arg-type]
                           data_dir=tmp_path_factory.mktemp("odradek-broker"), name=f"broker{len(made)}",
                           clock=clock)
        made.append(b)
        return b.start()

    yield make
    errors = []
    for b in made:
        try:
            b.close()
        except Exception as e:
            errors.append(e)
    if errors:
        raise errors[0]
