"""``odradek controller --config server.properties``: a KRaft controller-only node (``process.roles=controller``),
:mod:`odradek.kraft.controller`. ``odradek broker`` is unchanged by it."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any

from odradek.cli.broker_cmd import setup_logging
from odradek.config import ConfigError, read_properties
from odradek.raft.quorum_store import QuorumStateError

log = logging.getLogger("odradek.kraft.controller")


def add_parser(sub: Any) -> None:
    p = sub.add_parser("controller", help="run a KRaft controller (process.roles=controller)")
    p.add_argument("--config", required=True, help="server.properties file (Kafka config names)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config (repeatable)")
    p.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from odradek.kraft.controller import ControllerConfig, run_controller

    setup_logging(args.log_level)
    try:
        props = dict(read_properties(args.config))
        for item in args.override:
            if "=" not in item:
                raise ConfigError(f"--override expects KEY=VALUE, got {item!r}")
            k, v = item.split("=", 1)
            props[k.strip()] = v.strip()
        cfg = ControllerConfig.from_properties(props)
    except ConfigError as e:
        print(f"odradek controller: {e}", file=sys.stderr)
        return 1
    if cfg.ignored:
        log.warning("These configs are not implemented by the controller and are ignored: %s", ", ".join(cfg.ignored))
    try:
        if not asyncio.run(run_controller(cfg)):
            return 1
    except (ConfigError, QuorumStateError) as e:
        print(f"odradek controller: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    return 0
