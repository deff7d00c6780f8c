"""``odradek pipeline``: the Spark CDC → ODS → warehouse job and SQL on its ClickHouse (chDB) warehouse.

    odradek pipeline run --config pipeline.toml [--available-now] [--master local[4]]
        [--source debezium --topic-prefix pg --tables shop.customers,shop.orders]
    odradek pipeline query --config pipeline.toml [--format table|jsonl|csv] "SELECT * FROM ods.customers"
    odradek pipeline demo [--dir odradek-demo] [--bootstrap-server HOST:PORT]

chDB allows one process per warehouse directory. While ``run`` holds it, ``query`` is answered by the
running job over a Unix socket (``<warehouse>/.odradek-owner.json`` says where); otherwise ``query``
opens the warehouse itself.

PySpark, pyarrow, pandas and chDB come with the ``pipeline`` extra; without them each command says what to
install and exits 2 (a usage error, like argparse's), without a traceback.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import sys
from collections.abc import Callable
from typing import Any

# the top-level modules of the ``pipeline`` extra (pyproject.toml), and py4j that PySpark brings
EXTRA_MODULES = ("pyspark", "py4j", "pyarrow", "pandas", "chdb")
INSTALL_HINT = "pip install 'odradek[pipeline]'"


def _missing(modules: tuple[str, ...]) -> list[str]:
    out = []
    for name in modules:
        try:
            importlib.import_module(name)
        except ImportError:
            out.append(name)
    return out


def _no_extra(missing: list[str]) -> int:
    print(f"Error: the pipeline needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not "
          f"installed; install the pipeline extra: {INSTALL_HINT}", file=sys.stderr)
    return 2


def _needs(*modules: str) -> Callable[[Callable[[argparse.Namespace], int]], Callable[[argparse.Namespace], int]]:
    """The command needs these modules of the pipeline extra: checked before it runs, and a missing
    module of the extra met while it runs is reported the same way."""

    def deco(func: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
        @functools.wraps(func)
        def wrapper(args: argparse.Namespace) -> int:
            missing = _missing(modules)
            if missing:
                return _no_extra(missing)
            try:
                return func(args)
            except ModuleNotFoundError as e:
                root = (e.name or "").split(".")[0]
                if root in EXTRA_MODULES:
                    return _no_extra([root])
                raise

        return wrapper

    return deco


def add_parser(sub: Any) -> None:
    p = sub.add_parser("pipeline", help="Spark CDC → ODS → warehouse pipeline on ClickHouse (chDB)")
    psub = p.add_subparsers(dest="pipeline_command", required=True)

    run = psub.add_parser("run", help="run the streaming job")
    run.add_argument("--config", required=True, metavar="FILE", help="the pipeline's TOML file")
    run.add_argument("--available-now", action="store_true",
                     help="process what is in the topics now, then exit 0 (Trigger.AvailableNow)")
    run.add_argument("--master", help="Spark master (default: the config's [spark] master, else local[*])")
    run.add_argument("--spark-log-level", default="ERROR", help="Spark's log level (default ERROR)")
    run.add_argument("--source", choices=("config", "debezium"), default="config",
                     help="config: the [[ods]] tables' topics; debezium: Debezium's topics of --tables "
                          "(<topic-prefix>.<schema>.<table>) into the [[ods]] tables of the same names")
    run.add_argument("--topic-prefix", default="", help="with --source debezium: the connector's topic.prefix")
    run.add_argument("--tables", default="", metavar="SCHEMA.TABLE,...",
                     help="with --source debezium: the captured tables (the connector's table.include.list)")
    run.set_defaults(func=_run)

    query = psub.add_parser("query", help="run SQL on the warehouse")
    query.add_argument("--config", required=True, metavar="FILE")
    query.add_argument("--format", choices=("table", "jsonl", "csv", "tsv"), default="table")
    query.add_argument("sql")
    query.set_defaults(func=_query)

    demo = psub.add_parser("demo", help="a small shop's CDC streams through the whole pipeline, with a summary")
    demo.add_argument("--dir", default="odradek-demo", help="working directory (default ./odradek-demo)")
    demo.add_argument("--bootstrap-server", metavar="HOST:PORT",
                      help="use this broker (default: start an embedded one)")
    demo.add_argument("--events", type=int, default=3000, help="changes to generate (default 3000)")
    demo.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    demo.set_defaults(func=_demo)


def _fail(msg: str) -> int:
    print(f"Error: {msg}", file=sys.stderr)
    return 1


@_needs("pyspark", "pyarrow", "pandas", "chdb")
def _run(args: argparse.Namespace) -> int:
    from odradek.pipeline.config import ConfigError, load

    try:
        cfg = load(args.config)
        if args.source == "debezium":
            from odradek.pipeline.debezium import debezium_mode

            cfg = debezium_mode(cfg, args.topic_prefix, [t.strip() for t in args.tables.split(",") if t.strip()])
    except ConfigError as e:
        return _fail(str(e))
    from odradek.pipeline.job import Job
    from odradek.pipeline.sink import SinkError
    from odradek.pipeline.spark import JavaMissing

    try:
        return Job(cfg, master=args.master, available_now=args.available_now,
                   log_level=args.spark_log_level).run()
    except (SinkError, JavaMissing) as e:
        return _fail(str(e))


@_needs("pyspark", "pyarrow", "pandas", "chdb")
def _demo(args: argparse.Namespace) -> int:
    from pathlib import Path

    from odradek.pipeline.demo import run_demo
    from odradek.pipeline.sink import SinkError
    from odradek.pipeline.spark import JavaMissing

    try:
        return run_demo(Path(args.dir).resolve(), args.bootstrap_server, args.events, args.master)
    except (SinkError, JavaMissing, RuntimeError) as e:
        return _fail(str(e))


@_needs("pyarrow", "chdb")
def _query(args: argparse.Namespace) -> int:
    from odradek.pipeline.config import ConfigError, load
    from odradek.pipeline.server import run_query
    from odradek.pipeline.sink import SinkError

    try:
        cfg = load(args.config)
        out = run_query(cfg.warehouse_path, args.sql, args.format)
    except (ConfigError, SinkError) as e:
        return _fail(str(e))
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    return 0
