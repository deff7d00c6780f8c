"""``odradek dev-cluster``: a ZooKeeper-mode cluster of N brokers on this machine, in the foreground.

Layout under ``--data-dir`` (a new temporary directory by default, kept afterwards)::

    zk1/                ZooKeeper (conf/, data/, zookeeper.log, stderr.log); absent with --zookeeper
    broker<id>/data/    the broker's log.dirs
    broker<id>/broker.log   its stdout and stderr

Broker ``i`` (1..N) listens on ``PLAINTEXT://127.0.0.1:<base-port + i - 1>``; with
``--internal-base-port`` it has two listeners instead, as Kafka deployments that keep clients off
the brokers' own listener do: ``EXTERNAL://127.0.0.1:<base-port + i - 1>`` for clients and
``INTERNAL://127.0.0.1:<internal-base-port + i - 1>`` (``inter.broker.listener.name=INTERNAL``),
the only one that accepts the controller's requests and follower fetches. It registers under
the ZooKeeper chroot (``/odradek`` unless ``--chroot`` or a path in ``--zookeeper`` says
otherwise). Once every broker is registered in ``/brokers/ids`` and ``/controller`` names one,
the command prints the bootstrap string and waits. SIGINT or SIGTERM stops the brokers with
SIGTERM (a controlled shutdown each: the others first, the controller last), then ZooKeeper, and
exits 0. Children run in their own sessions (a terminal's Ctrl-C reaches only this process) and
get SIGTERM should this process die.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from typing import Any

from odradek.devcluster.cluster import (
    DEFAULT_CHROOT,
    BrokerProc,
    DevCluster,
    DevClusterError,
    broker_overrides,
    parse_overrides,
    port_free,
    prepare,
    split_zookeeper,
)

__all__ = ["BrokerProc", "DevCluster", "DevClusterError", "broker_overrides", "parse_overrides", "port_free",
           "split_zookeeper", "add_parser", "run"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("dev-cluster", help="run ZooKeeper and N brokers in cluster mode on this machine",
                       description="Run Debian's ZooKeeper and N broker processes in the foreground; "
                                   "Ctrl-C or SIGTERM stops them all.")
    p.add_argument("--brokers", type=int, default=3, help="number of brokers, ids 1..N (default 3)")
    p.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]",
                   help="use this ZooKeeper instead of starting one")
    p.add_argument("--zookeeper-port", type=int, default=0,
                   help="client port of the ZooKeeper started here (default: a free port)")
    p.add_argument("--chroot", default=None, help=f"ZooKeeper chroot of the cluster (default {DEFAULT_CHROOT})")
    p.add_argument("--base-port", type=int, default=9092, help="broker i listens on base-port + i - 1 (default 9092)")
    p.add_argument("--internal-base-port", type=int, default=None,
                   help="give broker i a separate INTERNAL listener (inter-broker traffic) on "
                        "internal-base-port + i - 1; clients use the EXTERNAL one on base-port + i - 1")
    p.add_argument("--http-base-port", type=int, default=9644,
                   help="broker i serves /metrics and the console on http://127.0.0.1:<http-base-port + i - 1> "
                        "(default 9644; 0 turns the HTTP listeners off)")
    p.add_argument("--data-dir", help="directory for log dirs and logs (default: a new temporary directory)")
    p.add_argument("--override", action="append", default=[], metavar="KEY=VALUE",
                   help="broker config for every broker (repeatable)")
    p.add_argument("--start-timeout", type=float, default=120.0,
                   help="seconds to wait for registration and a controller (default 120)")
    p.add_argument("--stop-timeout", type=float, default=60.0,
                   help="seconds each broker gets to stop after SIGTERM before SIGKILL (default 60)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # kazoo logs every refused connection attempt; our own errors say what went wrong
    logging.getLogger("kazoo").addHandler(logging.NullHandler())
    logging.getLogger("kazoo").propagate = False
    try:
        cluster = prepare(args)
    except DevClusterError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1

    def on_signal(signum: int, _frame: Any) -> None:
        cluster.stop_requested.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            controller = cluster.start()
        except Exception as e:
            print(f"Error: {e}", file=sys.stderr, flush=True)
            cluster.stop()
            return 1
        if controller is not None and not cluster.stop_requested.is_set():
            _print_ready(cluster, controller)
            cluster.watch()
        ok = cluster.stop()
        print("Stopped." if ok else "Stopped, with errors (see above).", flush=True)
        return 0 if ok else 1
    finally:
        for s, h in previous.items():
            signal.signal(s, h)


def _print_ready(cluster: DevCluster, controller: int) -> None:
    lines = []
    if cluster.zk is not None and cluster.zk.proc is not None:
        lines.append(f"ZooKeeper: {cluster.zk_connect} (pid {cluster.zk.proc.pid}, log {cluster.zk.log_path})")
    else:
        lines.append(f"ZooKeeper: {cluster.zk_connect} (external)")
    for b in cluster.brokers:
        pid = b.proc.pid if b.proc is not None else "?"
        http = b.overrides.get("http.listeners", "")
        web = f", metrics and console {http}/" if http else ""
        lines.append(f"Broker {b.broker_id}: {b.bootstrap} (pid {pid}, log {b.log_path}{web})")
    lines.append(f"Controller: broker {controller}")
    lines.append(f"Data and logs: {cluster.data_dir}")
    lines.append(f"Bootstrap servers: {cluster.bootstrap}")
    lines.append(f"Press Ctrl-C (or send SIGTERM to pid {os.getpid()}) to stop the cluster.")
    print("\n".join(lines), flush=True)
