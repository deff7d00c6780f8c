"""``odradek broker``: run one broker (embedded single-node default)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import faulthandler
import importlib.abc
import logging
import signal
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from odradek.clock import SYSTEM_CLOCK, Clock
from odradek.config import BrokerConfig, ConfigError, read_properties
from odradek.controller.store_file import MetadataFileError
from odradek.log.errors import LogError
from odradek.server.allocator import tune_malloc
from odradek.server.gc_tuning import enable_refreeze, freeze_startup_objects

if TYPE_CHECKING:
    from odradek.server.broker import Broker

log = logging.getLogger("odradek")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("broker", help="run a broker")
    p.add_argument("--config", help="server.properties file (Kafka config names)")
    p.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="override a config (repeatable)"
    )
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    p.set_defaults(func=run)


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        stream=sys.stderr,
        format="[%(asctime)s] %(levelname)s %(message)s (%(name)s)",
    )


def load_config(args: argparse.Namespace) -> BrokerConfig:
    props: dict[str, str] = {}
    if args.config:
        props.update(read_properties(args.config))
    for item in args.override:
        if "=" not in item:
            raise ConfigError(f"--override expects KEY=VALUE, got {item!r}")
        k, v = item.split("=", 1)
        props[k.strip()] = v.strip()
    return BrokerConfig(props)


class _NoHypothesis(importlib.abc.MetaPathFinder):
    """Makes ``import hypothesis`` fail while kio loads (see :func:`import_kio`)."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> None:
        if name == "hypothesis" or name.startswith("hypothesis."):
            raise ImportError("hypothesis is not loaded in a broker process")
        return None


def import_kio() -> None:
    """Import kio's core without hypothesis.

    When hypothesis is installed (it is with the test extra), kio registers a hypothesis strategy
    for each of its primitive types as it loads: ~0.3 s of a broker's start-up spent on a test
    library it never uses. A broker process imports kio with hypothesis hidden; hypothesis itself
    stays importable afterwards."""
    if "kio.static.primitive" in sys.modules or "hypothesis" in sys.modules:
        return
    finder = _NoHypothesis()
    sys.meta_path.insert(0, finder)
    try:
        import kio.static.primitive  # noqa: F401
    finally:
        sys.meta_path.remove(finder)


async def serve(
    config: BrokerConfig, started: Callable[[Broker], None] | None = None, embedded: bool = False,
    clock: Clock = SYSTEM_CLOCK,
) -> None:
    """Run one broker until it is asked to stop, then stop it cleanly.

    ``started`` is called with the broker once it serves. As a command (``embedded`` false),
    SIGTERM and SIGINT request the stop and a failed start-up ends the process. Inside another
    program (:mod:`odradek.embedded`: possibly not on the main thread, where signal handlers cannot
    be installed) the caller calls ``request_stop`` itself, and a failed start-up first releases what
    it took (listening sockets, open logs) within a few seconds, since the process goes on."""
    import_kio()
    from odradek.server.broker import Broker

    broker = Broker(config, clock)
    asked = False

    def ask_stop() -> None:
        nonlocal asked
        asked = True
        broker.request_stop()

    if not embedded:
        # before the start: a SIGTERM while the broker starts (its port may already accept) must end in a
        # clean stop once it has started, not in the signal's default action
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, ask_stop)
    try:
        await broker.start()
    except BaseException:
        if embedded:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(broker.stop(), 10.0)
        raise
    if asked:
        broker.request_stop()
    if started is not None:
        started(broker)
    try:
        await broker.wait_stopped()
    finally:
        await broker.stop()


def raise_fd_limit() -> None:
    """Segments keep their file open once read (as Kafka's do) and every connection is a
    descriptor: lift the soft RLIMIT_NOFILE to the hard limit, as Kafka's docs ask of
    operators (ulimit -n 100000)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            log.info("raised the open-file limit from %d to %d", soft, want)
        except (ValueError, OSError) as e:
            log.warning("could not raise the open-file limit (%d): %s", soft, e)


def _freeze(_broker: object) -> None:
    """Once the broker serves (on its event loop): freeze what start-up left, and what grows later."""
    freeze_startup_objects()
    enable_refreeze(asyncio.get_running_loop().call_soon_threadsafe)


def run(args: argparse.Namespace) -> int:
    setup_logging(args.log_level)
    raise_fd_limit()
    tune_malloc()
    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1` dumps stacks to stderr
    try:
        config = load_config(args)
    except (ConfigError, OSError) as e:
        log.error("invalid configuration: %s", e)
        return 2
    from odradek.server import fault_injection

    try:
        fault_injection.check_at_start()
    except ValueError as e:
        log.error("%s", e)
        return 2
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency
        runner = asyncio.run
    try:
        runner(serve(config, started=_freeze))
    except ConfigError as e:
        log.error("invalid configuration: %s", e)
        return 2
    except (OSError, MetadataFileError, LogError) as e:
        # a damaged metadata file or log directory: one line naming the file, nothing touched
        log.error("fatal: %s", e)
        return 1
    return 0
