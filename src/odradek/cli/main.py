"""The ``odradek`` command."""

from __future__ import annotations

import argparse
import sys

from odradek import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="odradek", description="Odradek: a Kafka-compatible broker in Python")
    parser.add_argument("--version", action="version", version=f"odradek {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    # before any subcommand module pulls kio in (features_cmd imports the wire client): kio loaded
    # with hypothesis importable registers a test strategy per primitive type, seconds of every
    # command's and every broker's start on a loaded machine
    from odradek.cli.broker_cmd import import_kio

    import_kio()
    from odradek.cli import (
        acls_cmd,
        broker_cmd,
        configs_cmd,
        controller_cmd,
        dev_cluster_cmd,
        elect_leaders_cmd,
        features_cmd,
        groups_cmd,
        log_dirs_cmd,
        perf_cmd,
        pipeline_cmd,
        reassign_cmd,
        storage_cmd,
        topics_cmd,
        transactions_cmd,
        verify_cmd,
        zk_migration_cmd,
    )

    broker_cmd.add_parser(sub)
    topics_cmd.add_parser(sub)
    configs_cmd.add_parser(sub)
    groups_cmd.add_parser(sub)
    pipeline_cmd.add_parser(sub)
    perf_cmd.add_parser(sub)
    dev_cluster_cmd.add_parser(sub)
    elect_leaders_cmd.add_parser(sub)
    reassign_cmd.add_parser(sub)
    acls_cmd.add_parser(sub)
    transactions_cmd.add_parser(sub)
    features_cmd.add_parser(sub)
    zk_migration_cmd.add_parser(sub)
    verify_cmd.add_parser(sub)
    log_dirs_cmd.add_parser(sub)
    storage_cmd.add_parser(sub)
    controller_cmd.add_parser(sub)
    args = parser.parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    sys.exit(main())
