"""``odradek verify check HISTORY.jsonl``: the checker of Jepsen-style Kafka workload histories
(odradek.verify). Prints what it found, with the operations that prove each anomaly; exits 0 when the
history shows no anomaly, 1 when it does, 2 when the file is not a history."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def add_parser(sub: Any) -> None:
    p = sub.add_parser("verify", help="Jepsen-style verification of Kafka workload histories")
    vsub = p.add_subparsers(dest="verify_command", required=True)
    c = vsub.add_parser("check", help="check a history (JSON lines) for anomalies")
    c.add_argument("history", help="the history file, one operation event a line")
    c.add_argument("--read-uncommitted", action="store_true",
                   help="the consumers read uncommitted data: aborted reads (G1a) are not anomalies")
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    c.add_argument("--examples", type=int, default=5, help="examples printed per anomaly (default 5)")
    c.set_defaults(func=run_check)
    r = vsub.add_parser("run", help="run the workload on a 3-broker ZooKeeper cluster under faults, then check it")
    r.add_argument("--duration", type=float, default=60.0, help="seconds of faults and workload (default 60)")
    r.add_argument("--nemesis", default="kill,pause",
                   help="fault families, comma-separated: kill, kill2, kill-controller, pause; partition, one-way, "
                        "bridge, isolate (network cuts: each broker in its own network namespace, needs root); "
                        "zookeeper; disk-full (each log dir on its own tmpfs, needs root); clock (wall-clock jumps "
                        "with libfaketime); or none (default kill,pause)")
    r.add_argument("--seed", type=int, default=None, help="the schedule's seed (default: random, printed)")
    r.add_argument("--out", required=True, help="directory for the history, the report and the cluster's logs")
    r.add_argument("--partitions", type=int, default=4, help="partitions of the workload's topic (default 4)")
    r.add_argument("--inject-broker-fault", default="", metavar="NAMES",
                   help="start the brokers broken on purpose, to see the checker fail: expose-aborted, "
                        "consumer-skip, duplicate-append, misreport-offset (comma-separated)")
    r.add_argument("--java-clients", type=int, default=0, metavar="N",
                   help="also run N Java clients (kafka-clients 4.4 from peers/kafka: an idempotent producer "
                        "and a read_committed consumer each), their histories merged into the run's (default 0)")
    r.set_defaults(func=run_run)
    k = vsub.add_parser("campaign", help="many runs in a row across every fault family, with a summary")
    k.add_argument("--runs", type=int, default=50, help="number of runs (default 50)")
    k.add_argument("--duration", type=float, default=300.0, help="seconds per run (default 300)")
    k.add_argument("--seed", type=int, default=1, help="the first run's seed; run n uses seed + n (default 1)")
    k.add_argument("--out", required=True, help="directory for the runs and summary.md")
    k.add_argument("--nemesis", default="",
                   help="only these fault families (comma-separated): each alone, then all together "
                        "(default: every family and the campaign's mixes)")
    k.set_defaults(func=run_campaign)


def run_check(args: argparse.Namespace) -> int:
    from odradek.verify import checker, history

    try:
        ops = history.read(args.history)
    except (OSError, history.HistoryError) as e:
        print(f"error: {args.history}: {e}", file=sys.stderr)
        return 2
    report = checker.check(ops, read_committed=not args.read_uncommitted)
    if args.json:
        print(json.dumps({"valid": report.valid, "stats": report.stats, "anomalies": report.anomalies},
                         default=str, indent=1))
    else:
        print(report.summary(args.examples))
    return 0 if report.valid else 1


def run_run(args: argparse.Namespace) -> int:
    import random
    from pathlib import Path

    from odradek.verify import nemesis, runner

    try:
        families = nemesis.parse_families(args.nemesis)
    except ValueError as e:
        print(f"error: --nemesis: {e}", file=sys.stderr)
        return 2
    if not 1 <= args.duration <= 24 * 3600:
        print("error: --duration must be between 1 and 86400 seconds", file=sys.stderr)
        return 2
    if not 1 <= args.partitions <= 1000:
        print("error: --partitions must be between 1 and 1000", file=sys.stderr)
        return 2
    if not 0 <= args.java_clients <= 100:
        print("error: --java-clients must be between 0 and 100", file=sys.stderr)
        return 2
    from odradek.server.fault_injection import KNOWN

    faults = tuple(n.strip() for n in args.inject_broker_fault.split(",") if n.strip())
    if set(faults) - KNOWN:
        print(f"error: --inject-broker-fault: unknown {', '.join(sorted(set(faults) - KNOWN))}; known: "
              f"{', '.join(sorted(KNOWN))}", file=sys.stderr)
        return 2
    seed = args.seed if args.seed is not None else random.randrange(2**31)
    return runner.run(runner.RunConfig(args.duration, families, seed, Path(args.out), partitions=args.partitions,
                                       broker_faults=faults, java_clients=args.java_clients))


def run_campaign(args: argparse.Namespace) -> int:
    from pathlib import Path

    from odradek.verify import campaign

    if not 1 <= args.runs <= 10000 or not 1 <= args.duration <= 24 * 3600:
        print("error: --runs must be 1-10000 and --duration 1-86400 seconds", file=sys.stderr)
        return 2
    from odradek.verify import nemesis

    try:
        families = nemesis.parse_families(args.nemesis)
    except ValueError as e:
        print(f"error: --nemesis: {e}", file=sys.stderr)
        return 2
    return campaign.run(campaign.CampaignConfig(args.runs, args.duration, args.seed, Path(args.out),
                                                campaign.mixes_of(families)))
